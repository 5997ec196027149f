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


def test_the_training_thread_flushes_for_the_run_and_the_mode_is_put_back():
    seen = ModeSeen()
    h = _fit(seen, flush_subnormals=True)
    assert seen.seen and all(seen.seen)  # every epoch trained with FTZ / DAZ
    assert not flushes_subnormals()  # put back
    assert h.config["train"]["flush_subnormals"] is True
    assert all(r.extra["subnormals"] == FLUSHED for r in h.results)


def test_off_keeps_subnormals_for_the_run_whatever_the_caller_set():
    torch.set_flush_denormal(True)
    seen = ModeSeen()
    h = _fit(seen)
    assert seen.seen and not any(seen.seen)
    assert flushes_subnormals()  # the caller's mode, put back
    assert all("subnormals" not in r.extra for r in h.results) and "flush_subnormals" not in h.config["train"]


def test_a_failing_run_puts_the_mode_back():
    class Boom(ModeSeen):
        def on_epoch_end(self, state) -> None:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _fit(Boom(), flush_subnormals=True)
    assert not flushes_subnormals()


def test_a_product_with_a_subnormal_operand_is_zero_inside_the_scope_only():
    tiny = torch.ones(4, dtype=torch.int32).view(torch.float32)  # the smallest subnormal
    with subnormal_mode(True, CPU):
        assert torch.equal(tiny * 2.0, torch.zeros(4))
        assert torch.equal(torch.ones(4, 4) @ tiny, torch.zeros(4))  # BLAS too
    assert bool(((tiny * 2.0) > 0).all())


def test_refused_where_it_would_change_nothing():
    with pytest.raises(ValueError, match="CPU mode"):
        with subnormal_mode(True, torch.device("cuda")):
            pass
    with subnormal_mode(False, torch.device("cuda")):  # off: nothing to do there
        pass


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
