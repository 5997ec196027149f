"""zoo.bench.suite: suite TOML into cells (schema, expansion, selection, search space, plugins, measures); see zoo/bench/__init__.py for the layers."""
