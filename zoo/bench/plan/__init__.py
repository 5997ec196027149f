"""zoo.bench.plan: what a suite costs and how its cells are scheduled (cost model, estimates, shards); see zoo/bench/__init__.py for the layers."""
