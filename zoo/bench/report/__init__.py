"""zoo.bench.report: see zoo/bench/__init__.py for the layers."""
