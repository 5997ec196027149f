"""zoo.bench.store: see zoo/bench/__init__.py for the layers."""
