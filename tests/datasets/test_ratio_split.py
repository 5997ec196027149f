"""The ratio split's sizes: rounded (the default) or floored, the nonlocal paper's 1624 / 541 / 543 on Cora.

The paper's Cora accuracies are multiples of 1/1624 (train), 1/541 (val) and 1/543 (test): its
60/20/20 split floors ``0.6 n`` and ``0.2 n`` and gives the remainder to test; rounding gives 1625 / 542 / 541.
"""
from __future__ import annotations

import pytest
import torch

from zoo.datasets.registry import check_options, get_spec, select_split
from zoo.datasets.splits import ratio_sizes, ratio_split


@pytest.mark.parametrize("n,rounded,floored", [
    (2708, (1625, 542, 541), (1624, 541, 543)),      # Cora: the paper's sizes only when floored
    (3327, (1996, 665, 666), (1996, 665, 666)),      # CiteSeer: both rules agree
    (19717, (11830, 3943, 3944), (11830, 3943, 3944)),  # PubMed: both rules agree
])
def test_sizes(n, rounded, floored):
    assert ratio_sizes(n, 0.6, 0.2, "round") == rounded
    assert ratio_sizes(n, 0.6, 0.2, "floor") == floored


def _is_count_of(pct: float, size: int) -> bool:
    """Whether a percentage printed to 2 decimals can be ``k / size`` for an integer ``k``."""
    hits = pct / 100 * size
    return abs(hits - round(hits)) <= 0.005 / 100 * size + 1e-9


# Tables 3 / 5 / 18 (Cora, L = 2): Pre-LN, Post-LN and nonlocal train / val / test
_CORA_L2 = [(100.0, 86.32, 88.40), (97.11, 86.14, 87.66), (100.0, 85.77, 88.77)]


def test_paper_accuracies_are_multiples_of_the_floored_sizes():
    floored = ratio_sizes(2708, 0.6, 0.2, "floor")
    rounded = ratio_sizes(2708, 0.6, 0.2, "round")
    for row in _CORA_L2:
        assert all(_is_count_of(p, n) for p, n in zip(row, floored)), row
    # the rounded val / test sizes (542 / 541) fit none of the val and test accuracies
    for _, val, test in _CORA_L2:
        assert not _is_count_of(val, rounded[1]) and not _is_count_of(test, rounded[2])


# dataset -> nodes (the paper's Table 9)
_NODES = {"cora": 2708, "citeseer": 3327, "pubmed": 19717, "coauthor_cs": 18333, "coauthor_physics": 34493}


def test_every_stored_paper_accuracy_fits_the_floored_sizes():
    """All 225 stored train / val / test accuracies (Tables 3, 5, 7, 10-18) on all five datasets are counts
    of the floored parts; the rounded sizes miss most of Cora's and some of Coauthor CS's / Physics'."""
    import json

    from zoo.bench.suite.load import find_suite
    path = find_suite("nonlocal_accuracy").parent / "reported" / "nonlocal_accuracy.json"
    entries = json.loads(path.read_text())["entries"]
    part = {"train": 0, "val": 1, "test": 2}
    misses = {"round": 0, "floor": 0}
    for rule in misses:
        for e in entries:
            size = ratio_sizes(_NODES[e["dataset"]], 0.6, 0.2, rule)[part[e.get("metric", "test")]]
            misses[rule] += not _is_count_of(e["value"], size)
    assert len(entries) == 225
    assert misses == {"round": 52, "floor": 0}


def test_floor_is_exact_for_integer_products():
    assert 0.29 * 100 < 29  # float rounding: a plain floor would give 28
    assert ratio_sizes(100, 0.29, 0.01, "floor") == (29, 1, 70)


def test_floor_moves_only_the_border_nodes():
    """Same permutation: the floored train part is the rounded one minus its last node(s)."""
    rounded = ratio_split(2708, 3, 0.6, 0.2)
    floored = ratio_split(2708, 3, 0.6, 0.2, rounding="floor")
    assert [int(m.sum()) for m in floored] == [1624, 541, 543]
    assert bool((floored[0] <= rounded[0]).all()) and int((rounded[0] & ~floored[0]).sum()) == 1
    assert int((floored[1] & rounded[1]).sum()) == 540
    assert bool((rounded[2] <= floored[2]).all())


def test_select_split_names_the_floored_rule_and_keeps_the_old_label():
    from torch_geometric.data import Data
    data = Data(x=torch.zeros(10, 1), y=torch.zeros(10, dtype=torch.long), num_nodes=10)
    _, label = select_split(data, "ratio", 0, "public")
    assert label == "random_ratio=0.6/0.2:seed=0"  # records name the default split by this label
    _, label = select_split(data, "ratio", 0, "public", ratio_rounding="floor")
    assert label == "random_ratio=0.6/0.2:floor:seed=0"


def test_bad_rounding_is_one_clear_error():
    with pytest.raises(ValueError, match=r"ratio_rounding must be one of 'round', 'floor', got 'flor'"):
        check_options(get_spec("cora"), {"ratio_rounding": "flor"})
    with pytest.raises(ValueError, match=r"ratio_rounding must be one of"):
        ratio_sizes(10, 0.6, 0.2, "ceil")
