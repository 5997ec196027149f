"""zoo.bench.spec: see zoo/bench/__init__.py for the layers."""
