"""`make test` runs under `pytest -n 2 --dist loadgroup`: the modules marked ``xdist_group`` share a
worker (an expensive fixture or cache built once). pytest-xdist carries the group in the node id; a
pytest that drops it (9.2 with xdist 3.8) ungroups every module without a word, so this checks it."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("xdist_groups_check")


def test_the_group_reaches_the_scheduler(request):
    if not (hasattr(request.config, "workerinput") and request.config.getvalue("loadgroup")):
        pytest.skip("runs under pytest -n N --dist loadgroup (make test)")
    assert request.node.nodeid.endswith("@xdist_groups_check"), (
        f"node id {request.node.nodeid!r} lost its xdist group: this pytest / pytest-xdist pair does not "
        "group tests (see the pytest pin in setup.cfg)")
