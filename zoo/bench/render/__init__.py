"""zoo.bench.render: see zoo/bench/__init__.py for the layers."""
