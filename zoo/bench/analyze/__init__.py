"""zoo.bench.analyze: see zoo/bench/__init__.py for the layers."""
