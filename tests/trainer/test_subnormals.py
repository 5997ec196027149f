"""``flush_subnormals``: a typed cell key (off by default, out of the cell id at its default), applied
to the thread that trains for the run alone, recorded with the run, and refused where it would
change nothing."""
from __future__ import annotations

import pytest
import torch

import zoo
from tests.trainer.test_train import synthetic_task
from zoo.bench.suite.resolve import resolve_cell
from zoo.bench.suite.schema import SuiteError, cell_id
from zoo.trainer.config import TrainConfig
from zoo.trainer.subnormals import FLUSHED, flushes_subnormals, subnormal_mode

BASE = {"dataset": "twin", "model": "gat", "hidden_dim": 8, "epochs": 3}
CPU = torch.device("cpu")
#: torch sets FTZ / DAZ on x86 only (``set_flush_denormal`` says whether it can)
settable = pytest.mark.skipif(not torch.set_flush_denormal(False), reason="torch cannot set FTZ/DAZ on this CPU")


@pytest.fixture(autouse=True)
def _kept_after():
    """Every test leaves this thread keeping subnormals, as it found it."""
    assert not flushes_subnormals()
    yield
    torch.set_flush_denormal(False)


class ModeSeen:
    """A callback noting, each epoch, whether the training thread flushes subnormals."""

    def __init__(self) -> None:
        self.seen = []

    def on_epoch_end(self, state) -> None:
        self.seen.append(flushes_subnormals())


def _fit(callback, **options):
    return zoo.fit("gat", synthetic_task(), epochs=3, lr=0.05, optimizer="adam", num_layers=2, hidden_dim=8,
                   seeds=[0, 1], progress=False, callbacks=[callback], **options)


def test_the_key_is_out_of_the_cell_at_its_default_and_in_it_when_on():
    plain = resolve_cell("t", BASE)
    assert "flush_subnormals" not in plain["train"]
    assert cell_id(resolve_cell("t", {**BASE, "flush_subnormals": False})) == cell_id(plain)
    on = resolve_cell("t", {**BASE, "flush_subnormals": True})
    assert on["train"]["flush_subnormals"] is True and cell_id(on) != cell_id(plain)


@pytest.mark.parametrize("value", ["yes", 1, "true"])
def test_only_true_or_false_is_accepted(value):
    with pytest.raises(SuiteError, match="flush_subnormals") as err:
        resolve_cell("t", {**BASE, "flush_subnormals": value})
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="flush_subnormals must be true or false"):
        TrainConfig(flush_subnormals=value)


@settable
def test_the_training_thread_flushes_for_the_run_and_the_mode_is_put_back():
    seen = ModeSeen()
    h = _fit(seen, flush_subnormals=True)
    assert seen.seen and all(seen.seen)  # every epoch trained with FTZ / DAZ
    assert not flushes_subnormals()  # put back
    assert h.config["train"]["flush_subnormals"] is True
    assert all(r.extra["subnormals"] == FLUSHED for r in h.results)


@settable
def test_off_keeps_subnormals_for_the_run_whatever_the_caller_set():
    torch.set_flush_denormal(True)
    seen = ModeSeen()
    h = _fit(seen)
    assert seen.seen and not any(seen.seen)
    assert flushes_subnormals()  # the caller's mode, put back
    assert all("subnormals" not in r.extra for r in h.results) and "flush_subnormals" not in h.config["train"]


@settable
def test_a_failing_run_puts_the_mode_back():
    class Boom(ModeSeen):
        def on_epoch_end(self, state) -> None:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _fit(Boom(), flush_subnormals=True)
    assert not flushes_subnormals()


@settable
def test_a_product_with_a_subnormal_operand_is_zero_inside_the_scope_only():
    tiny = torch.ones(4, dtype=torch.int32).view(torch.float32)  # the smallest subnormal
    with subnormal_mode(True, CPU):
        assert torch.equal(tiny * 2.0, torch.zeros(4))
        assert torch.equal(torch.ones(4, 4) @ tiny, torch.zeros(4))  # BLAS too
    assert bool(((tiny * 2.0) > 0).all())


def test_refused_where_it_would_change_nothing(monkeypatch):
    with pytest.raises(ValueError, match="CPU mode"):
        with subnormal_mode(True, torch.device("cuda")):
            pass
    with subnormal_mode(False, torch.device("cuda")):  # off: nothing to do there
        pass
    monkeypatch.setattr(torch, "set_flush_denormal", lambda on: False)  # a CPU without FTZ / DAZ
    with pytest.raises(ValueError, match="cannot set FTZ/DAZ"):
        with subnormal_mode(True, CPU):
            pass
    with subnormal_mode(False, CPU):  # kept is what such a CPU does anyway
        pass


@settable
def test_intra_op_threads_started_before_the_run_are_refused():
    """A thread pool started while subnormals were kept keeps them: a run that would flush only part
    of its arithmetic is refused (threads started later inherit the mode)."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        torch.ones(1 << 18) * 2.0  # start the pool now, in the kept mode
        with pytest.raises(ValueError, match="intra-op threads"):
            with subnormal_mode(True, CPU):
                pass
        assert not flushes_subnormals(2)
    finally:
        torch.set_num_threads(before)


@settable
def test_zoo_bench_records_the_key_and_how_the_run_went(tmp_path):
    """``--set flush_subnormals=true``: the cells' configs hold the key (other ids) and each record says it flushed."""
    from zoo.bench.store import records
    from zoo.cli import main

    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "flush"\n[defaults]\ndataset = "cornell"\nmodel = "gat"\nnum_layers = 2\n'
                     'hidden_dim = 8\nepochs = 2\n[grid]\nseed = [0, 1]\n')
    args = ["--device", "cpu", "--quiet", "--no-leaderboard"]
    assert main(["bench", str(suite), "--out", str(tmp_path / "kept"), *args]) == 0
    assert main(["bench", str(suite), "--out", str(tmp_path / "flushed"), "--set", "flush_subnormals=true", *args]) == 0
    kept = records.read_records(tmp_path / "kept" / "results.jsonl")
    flushed = records.read_records(tmp_path / "flushed" / "results.jsonl")
    assert len(kept) == len(flushed) == 2
    assert all("subnormals" not in r and "flush_subnormals" not in r["config"]["train"] for r in kept)
    assert all(r["subnormals"] == FLUSHED and r["config"]["train"]["flush_subnormals"] is True for r in flushed)
    assert {r["id"] for r in kept}.isdisjoint(r["id"] for r in flushed)
    assert not flushes_subnormals()
