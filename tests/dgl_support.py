"""Real DGL for the adapter tests: imported without stubs, or the test is skipped.

``make test-dgl`` builds the environment where ``import dgl`` works (docs/dgl.md) and sets
``ZOO_REQUIRE_DGL=1``: there a DGL that cannot be imported fails the tests instead of skipping
them, so the DGL target cannot pass by testing nothing.
"""
from __future__ import annotations

import os

import pytest

REQUIRE_ENV = "ZOO_REQUIRE_DGL"


def real_dgl():
    try:
        import dgl  # noqa: F401  the real package, graphbolt included
        import dgl.graphbolt  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the environment
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but dgl does not import: {type(exc).__name__}: {exc}")
        pytest.skip(f"dgl is not importable here ({type(exc).__name__}: {exc}); `make test-dgl` builds an "
                    "environment where it is (docs/dgl.md)")
    return dgl


class DGLLike:
    """The DGLGraph surface Task.from_data reads (the real package is tested where it imports)."""

    def __init__(self, data):
        self._data = data
        self.ndata = {"feat": data.x, "label": data.y, "train_mask": data.train_mask, "val_mask": data.val_mask,
                      "test_mask": data.test_mask}
        self.edata, self.ntypes, self.canonical_etypes, self.is_block = {}, ["_N"], [("_N", "_E", "_N")], False

    def edges(self, order="eid"):
        return self._data.edge_index[0], self._data.edge_index[1]

    def num_nodes(self):
        return self._data.num_nodes


DGLLike.__module__ = "dgl.heterograph"
