"""The shipped ``cuda`` cost entry was fitted before the training loop was rebuilt: its estimates say they
are provisional (the estimate's header, the reproduction page's GPU-hours), and a refit drops that."""
from __future__ import annotations

import json

from zoo.bench.plan import cost_file
from zoo.bench.plan.cost import CostModel
from zoo.bench.render.missing import gpu_caveat, totals_line


def test_the_shipped_cuda_entry_says_it_is_provisional():
    why = cost_file.provisional("cuda")
    assert "before the training loop was rebuilt" in why and "edge and dropout coefficients 0" in why
    assert "provisional: fitted before the training loop was rebuilt" in cost_file.load_cost_model("cuda").fitted_on
    assert cost_file.provisional("cpu") == "" and "provisional" not in cost_file.load_cost_model("cpu").fitted_on
    assert gpu_caveat().startswith("The GPU times come from the cost model's `cuda` entry, fitted before")
    assert "GPU-hours by a provisional estimate" in totals_line([])


def test_a_refit_drops_the_caveat(tmp_path):
    path = tmp_path / "cost_model.json"
    path.write_text(cost_file.MODEL_FILE.read_text())
    refit = CostModel({"dense_macs": 1e-12, "edge_elements": 1e-10, "dropout_elements": 1e-10,
                       "layers_per_replica": 1e-4}, {}, "cuda", "30 trained groups on NVIDIA H200")
    cost_file.write_model([refit], path, {})
    assert "provisional" not in json.loads(path.read_text())["devices"]["cuda"]
    assert cost_file.provisional.__wrapped__("cuda", path) == ""
    assert cost_file.load_cost_model("cuda", path).fitted_on == "30 trained groups on NVIDIA H200"
