"""The trainer options ``lr_scheduler`` (epoch schedules), ``grad_clip_norm`` and ``precision`` as suite
keys: validated at load with one line, and at their defaults absent from the cell (same id as before)."""
from __future__ import annotations

import copy

import pytest

from zoo.bench.suite.load import list_suites, load_suite, parse_suite
from zoo.bench.suite.resolve import resolve_cell
from zoo.bench.suite.schema import SuiteError, cell_id

BASE = {"dataset": "twin", "model": "gat", "hidden_dim": 8, "epochs": 3}


def _cell(**keys):
    return resolve_cell("t", {**BASE, **keys})


def test_options_at_their_defaults_leave_the_cell_and_its_id_unchanged():
    plain = _cell()
    assert "grad_clip_norm" not in plain["train"] and "precision" not in plain["train"]
    assert _cell(precision="fp32") == plain and cell_id(_cell(precision="fp32")) == cell_id(plain)


def test_set_options_enter_the_cell():
    bf16 = _cell(precision="bf16", grad_clip_norm=1)
    assert bf16["train"]["precision"] == "bf16" and bf16["train"]["grad_clip_norm"] == 1.0
    assert cell_id(bf16) != cell_id(_cell())
    assert cell_id(_cell(grad_clip_norm=1)) == cell_id(_cell(grad_clip_norm=1.0))  # one protocol, one id
    cos = _cell(lr_scheduler="cosine", lr_scheduler_kwargs={"T_max": 10})
    assert cos["train"]["lr_scheduler"] == "cosine" and cos["train"]["lr_scheduler_kwargs"] == {"T_max": 10}


@pytest.mark.parametrize("keys,words", [
    ({"precision": "bf32"}, "precision must be one of 'fp32', 'bf16'"),
    ({"precision": "bf16", "dtype": "float64"}, "autocasts a float32 model"),
    ({"grad_clip_norm": 0}, "grad_clip_norm must be > 0"),
    ({"grad_clip_norm": "1"}, "'grad_clip_norm' must be int or float"),
    ({"lr_scheduler": "cosin"}, "Did you mean 'cosine'"),
    ({"lr_scheduler": "step"}, "needs step_size"),
    ({"lr_scheduler": "step", "lr_scheduler_kwargs": {"step_size": 2, "gama": 0.5}}, "no option(s) 'gama'"),
    ({"lr_scheduler": "multistep", "lr_scheduler_kwargs": {"milestones": 5}}, "milestones must be a list"),
    ({"lr_scheduler": "exponential", "lr_scheduler_kwargs": {"gamma": 2.0}}, "gamma must be in (0, 1]"),
])
def test_bad_values_fail_at_load_with_one_line(keys, words):
    with pytest.raises(SuiteError) as err:
        _cell(**keys)
    assert words in str(err.value) and "\n" not in str(err.value)


#: Suites that set a new key on purpose; none of them had records before the key existed.
SETS_NEW_KEYS = {"rescale_heterophilous": {"grad_clip_norm"}}  # the authors' code clips to 3


@pytest.mark.slow  # resolves every cell of every shipped suite (~11 s)
def test_no_shipped_suite_cell_carries_the_new_keys():
    """The shipped suites with records set none of them, so every stored record keeps its cell id
    (``zoo report --check`` compares them with the records)."""
    for path in list_suites():
        suite = load_suite(path, validate_models=False)
        allowed = SETS_NEW_KEYS.get(suite.name, set())
        for cell in suite.cells:
            assert not ({"grad_clip_norm", "precision"} - allowed) & set(cell.config["train"]), (path, cell.id)


def test_the_rescaling_suite_clips_as_the_authors_code():
    cells = load_suite("rescale_heterophilous", validate_models=False).cells
    assert cells and all(c.config["train"]["grad_clip_norm"] == 3.0 for c in cells)


def test_a_suite_grid_over_schedules_resolves():
    raw = {"suite": {"name": "s"}, "defaults": copy.deepcopy(BASE),
           "grid": {"lr_scheduler": ["none", "cosine"], "precision": ["fp32", "bf16"]}}
    cells = parse_suite(raw, validate_models=False).cells
    assert len({c.id for c in cells}) == 4
