"""research/rekey_split.py: records written before splits had one form get the ids the runner looks up now,
byte for byte otherwise, and a second run changes nothing."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO, research_script
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.store.records import SuiteMismatchError
from zoo.bench.suite.load import load_suite
from zoo.bench.suite.schema import cell_id, group_id

GATE_REAL = REPO / "docs" / "reproduction" / "records" / "gate_real"
FILES = ("results.jsonl", "suite.resolved.json")


def _as_older_code_wrote(item):
    """A record or cell of a ten-split dataset as written before: "no split given" held as ``null``."""
    config = item["config"]
    if config["task"]["dataset"] in ("minesweeper", "tolokers") and config["task"]["split"] == 0:
        config["task"]["split"] = None
        item["id"], item["group"] = cell_id(config), group_id(config)
    return item


@pytest.fixture
def old_folder(tmp_path):
    lines = (GATE_REAL / "results.jsonl").read_text().splitlines()
    recs = [_as_older_code_wrote(json.loads(line)) for line in lines]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))
    info = json.loads((GATE_REAL / "suite.resolved.json").read_text())
    info["cells"] = [_as_older_code_wrote(c) for c in info["cells"]]
    (tmp_path / "suite.resolved.json").write_text(json.dumps(info, indent=1, sort_keys=True))
    return tmp_path


def _run_nothing(folder):
    """The runner's look-up of finished runs, training nothing (minesweeper: 10 of its 40 cells recorded)."""
    suite = load_suite("gate_real", validate_models=False)
    return run_suite(suite, folder, RunOptions(where={"dataset": ["minesweeper"]}, stop_after=0, quiet=True,
                                               device="cpu"))


def test_old_records_are_rekeyed_to_the_committed_form_and_found_as_done(old_folder):
    rekey = research_script("rekey_split.py")
    ids = {json.loads(line)["id"] for line in (old_folder / "results.jsonl").read_text().splitlines()}
    assert "24b829060caaa684" in ids  # a minesweeper run's id as recorded before the canonical split
    with pytest.raises(SuiteMismatchError, match=r"before each split had one form: 80 of its cells .* Re-key the "
                       r"folder with `python research/rekey_split.py "):  # unmigrated: the runner says how
        _run_nothing(old_folder)
    assert rekey.rekey_folder(old_folder).endswith("10 record(s) re-keyed, suite.resolved.json re-keyed")
    for name in FILES:  # the committed folder was re-keyed by the same script: byte for byte the same
        assert (old_folder / name).read_bytes() == (GATE_REAL / name).read_bytes(), name
    before = {name: (old_folder / name).read_bytes() for name in FILES}
    assert rekey.rekey_folder(old_folder).endswith(": 0 record(s) re-keyed")
    assert {name: (old_folder / name).read_bytes() for name in FILES} == before
    summary = _run_nothing(old_folder)
    assert (summary.already_done, summary.ran) == (10, 0)


def test_a_folder_a_runner_holds_is_refused(tmp_path):
    import fcntl

    rekey = research_script("rekey_split.py")
    shutil.copy(GATE_REAL / "results.jsonl", tmp_path / "results.jsonl")
    with open(tmp_path / "suite.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="a runner is writing it"):
            rekey.rekey_folder(tmp_path)
    assert rekey.main([str(tmp_path)]) == 0  # released: nothing to re-key in canonical records
