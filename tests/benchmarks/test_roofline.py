"""benchmarks/roofline.py and benchmarks/speed_process.py: the pieces that need no timing (the shapes
select one group each, the op classes, the generated whole-process suite is one stacked group)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


roofline = _module("roofline")
process = _module("speed_process")


@pytest.mark.parametrize("key", sorted(roofline.SHAPES))
def test_each_shape_selects_one_group_of_its_suite(key):
    from zoo.bench.suite.load import load_suite
    from zoo.bench.suite.selection import select_where

    shape = roofline.SHAPES[key]
    suite = load_suite(shape.suite, validate_models=False)
    cells = select_where(suite, dict(shape.where))
    groups = {c.group for c in cells}
    assert cells and len(groups) == 1, f"{key}: {len(groups)} groups"
    assert f"R={len(cells)}" in shape.label


def test_op_classes():
    assert roofline.classify("aten::bmm") == "dense"
    assert roofline.classify("aten::index_select") == "edge"
    assert roofline.classify("zoo_kernels::gatv2_backward") == "edge"
    assert roofline.classify("aten::_log_softmax") == "softmax"
    assert roofline.classify("aten::add_") == "elementwise"


def test_a_compiled_ops_autograd_node_counts_as_its_kernel():
    """With a gradient recorded, the compiled attention's forward kernel runs inside its autograd
    node and is recorded under the node's name alone: its time is edge work, not dispatch."""
    node = "GeneratedBackwardFor_zoo_kernels_gatv2_forward_default"
    assert roofline.counted(node) and roofline.classify(node) == "edge"
    assert roofline.counted(node + "Backward")
    assert roofline.counted("zoo_kernels::gatv2_backward") and roofline.counted("aten::mm")
    assert not roofline.counted("autograd::engine::evaluate_function: " + node + "Backward")
    assert not roofline.counted("<built-in method copy_ of Tensor object at 0x7f5>")
    assert not roofline.counted("roofline::optimizer")


def test_the_whole_process_suite_is_one_group_of_the_asked_runs():
    from zoo.bench.suite.load import parse_suite
    from zoo._toml import tomllib

    suite = parse_suite(tomllib.loads(process.suite_text(15, 7)), validate_models=False)
    assert len(suite.cells) == 15 and len(suite.groups()) == 1
    assert {c.config["train"]["epochs"] for c in suite.cells} == {7}
    assert {c.config["train"]["loss_threshold"] for c in suite.cells} == {0.0}


def test_process_zoo_side_runs_the_checkout_on_pythonpath(tmp_path, monkeypatch):
    """Without the environment's ``zoo`` script the zoo side is ``python -m zoo``: a checkout in the
    working folder must not shadow ``PYTHONPATH``'s (the ``--ref`` side would time the wrong tree)."""
    import os
    import subprocess

    shadow = tmp_path / "zoo"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    (shadow / "__main__.py").write_text("print('the shadow checkout')\n")
    monkeypatch.setattr(process.os.path, "exists", lambda path: False)
    command = process.zoo_command("suite.toml", "out")
    head = command[:command.index("bench")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([*head, "--version"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "the shadow checkout" not in out.stdout
    assert out.stdout.startswith("zoo "), out.stdout + out.stderr


def test_paired_figures_are_medians_over_processes_with_their_spread():
    """``--ref``: each side's figure is the median over its fresh processes, printed with min / median
    / max and the median system-time share; the ratio is of the medians, the per-pair ratios follow."""
    new = roofline.Spread((250.0, 240.0, 260.0), (0.02, 0.01, 0.03))
    ref = roofline.Spread((800.0, 450.0, 600.0), (0.30, 0.10, 0.20))
    assert (new.median, ref.median) == (250.0, 600.0)
    assert new.text() == "240.0 / 250.0 / 260.0 (sys 2 %)"
    assert roofline.Spread((5.0,)).text() == "5.0"
    assert roofline.Spread((5.0,), (-0.003,)).text() == "5.0 (sys 0 %)"  # a difference just below zero
    line = roofline.shape_line("oxford4", new, ref)
    assert "ref   450.0 / 600.0 / 800.0 (sys 20 %)" in line
    assert "new/ref 0.417 (0.312 0.533 0.433)" in line
    other = (roofline.Spread((100.0, 140.0)), roofline.Spread((300.0, 340.0)))
    assert roofline.summary_line([new, other[0]], [ref, other[1]]) == (
        "mean over shapes of the median CPU ms per replica-epoch: new 185.00, ref 460.00, ref / new = 2.49x")


def test_the_profiled_optimiser_step_takes_the_deferred_gradients():
    """``--profile`` wraps the optimiser's step in its range: the wrapper passes every argument on
    (it took ``(grads, active)`` only and failed once the step took the deferred gradients)."""
    seen = []
    step = roofline.in_optimiser_range(lambda self, grads, active, deferred={}: seen.append((grads, active, deferred)))
    step(None, "g", "a", {0: "d"})
    assert seen == [("g", "a", {0: "d"})]


@pytest.mark.parametrize("density,dense_first", [(0.35, False), (0.6, True), (0.02, False)])
def test_the_first_layer_counts_what_the_zoo_multiplies(monkeypatch, density, dense_first):
    """oxford4's first layer (Amazon Computers: 35 % non-zero, 5 stacked replicas) is multiplied as CSR
    (zoo.ops.sparse_linear.EACH_MAX_DENSITY): training's forward and weight gradient count the kept entries,
    (1 - dropout) x nnz, the evaluation's forward nnz; a denser input counts the dense products."""
    from zoo.bench.suite.load import load_suite
    from zoo.bench.suite.selection import select_where

    shape = roofline.SHAPES["oxford4"]
    cells = select_where(load_suite(shape.suite, validate_models=False), dict(shape.where))
    group = roofline.Group(shape, "train", cells, None)
    n, f, c = 1000.0, 800.0, 64.0
    sizes = {"n": n, "e": 5000.0, "f": f, "nnz": density * n * f, "classes": 10.0}
    monkeypatch.setattr(roofline, "graph_sizes", lambda g: sizes)
    first = roofline.count_work(group).dense_flops - 2 * n * c * 10 * 4  # less the second layer's products
    nnz = density * n * f
    if dense_first:
        assert first == pytest.approx(2 * n * f * c * 3)
    elif density > 0.05:
        assert first == pytest.approx(2 * c * (0.4 * nnz * 2 + nnz))
    else:
        assert first == pytest.approx(2 * c * nnz * 3)
