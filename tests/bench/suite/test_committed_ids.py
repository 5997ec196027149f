"""The committed records stay valid: each shipped suite still resolves its recorded runs to the ids they
were recorded under (a change to how cells are identified must keep them; docs/reproduction/records), and
each record's id is the hash of the config it holds, in canonical form.  The one sanctioned change of ids is a
re-keying script under research/ that rewrites configs and ids together (research/rekey_split.py: the
split's one form)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, research_script
from zoo.bench.suite.load import load_suite
from zoo.bench.suite.schema import cell_id

RECORDS = REPO / "docs" / "reproduction" / "records"
FOLDERS = sorted(p.parent.name for p in RECORDS.glob("*/suite.resolved.json"))
#: folders whose records were made by an earlier version of the suite file (the report shows them as such)
EARLIER_SUITE = {"nonlocal_pruning": "input_dropout and loss_threshold were set in the suite after these runs"}
#: suites that take several seconds to resolve (run with the slow tests)
SLOW = {"lipschitz_table1", "ogb_molhiv"}


@pytest.mark.parametrize("folder", [pytest.param(f, marks=pytest.mark.slow) if f in SLOW else f for f in FOLDERS])
def test_the_shipped_suite_resolves_to_the_recorded_ids(folder):
    resolved = json.loads((RECORDS / folder / "suite.resolved.json").read_text())
    recorded = {json.loads(line)["id"] for line in (RECORDS / folder / "results.jsonl").read_text().splitlines()
                if line.strip()}
    suite = load_suite(REPO / "benchmarks" / "suites" / f"{resolved['name']}.toml", quick=resolved["quick"],
                       validate_models=False, settings=resolved.get("set"))
    ids = {c.id for c in suite.cells}
    if folder in EARLIER_SUITE:
        assert not recorded & ids, f"{folder}: its records are cells of the suite again; drop it from EARLIER_SUITE"
        return
    assert recorded <= ids, f"{len(recorded - ids)} of {len(recorded)} recorded runs of {folder} are not cells any more"


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_record_is_the_cell_of_the_config_it_holds(folder):
    """A record merged from a run of older code (a split in its old form) says how to bring it up to date."""
    canonical_config = research_script("rekey_split.py").canonical_config
    for line in (RECORDS / folder / "results.jsonl").read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            assert cell_id(rec["config"]) == rec["id"], f"{folder}: record {rec['id']} is not its config's hash"
            assert canonical_config(rec["config"]) is None, (
                f"{folder}: record {rec['id']} holds split {rec['config']['task']['split']!r}, not its canonical "
                "form: run python research/rekey_split.py docs/reproduction/records")
