"""zoo.bench.run: see zoo/bench/__init__.py for the layers."""
