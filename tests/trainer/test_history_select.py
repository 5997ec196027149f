"""History picks a replica by its label written with any init alias (zoo.fit's docstring example)."""
from __future__ import annotations

import pytest

import zoo


def test_a_replica_is_named_by_any_alias_of_its_init():
    history = zoo.fit("gat", "cornell", inits=["xavier", "bal_o"], seeds=[0, 1], num_layers=2, hidden_dim=8,
                      epochs=1)
    assert history.labels[1] == "seed=0 init=balanced_orthogonal"
    assert history._index("seed=0 init=bal_o") == 1
    assert history._index("seed=1 init=Bal-O") == 3
    assert history.model("seed=0 init=bal_o").build_config["init"] == "balanced_orthogonal"
    with pytest.raises(KeyError, match="several replica"):
        history.model("init=bal_o")
    with pytest.raises(KeyError, match="no replica"):
        history.model("seed=0 init=no_such_init")
