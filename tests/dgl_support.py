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
