"""The CPU double of a CUDA graph capture (:mod:`tests.trainer.capture_double`) sees what a real capture
would replay wrongly: a freed input, a host scalar changed between replays, a tensor made from a host
value inside the captured region; and it replays a correct program to the eager values."""
from __future__ import annotations

import pytest
import torch

from tests.trainer.capture_double import CheckedBackend, CheckedCapture, ContractError


def test_a_correct_program_replays_to_the_eager_values():
    p, lr = torch.ones(3, dtype=torch.float64), torch.tensor(0.5, dtype=torch.float64)
    backend = CheckedBackend()
    cap = backend.new_capture([])
    out = cap.capture(lambda: p.mul_(lr).sum())
    assert torch.equal(p, torch.ones(3, dtype=torch.float64)) and out.isnan()  # a capture runs nothing
    for k in range(1, 4):
        cap.replay()
        assert float(out) == 3 * 0.5 ** k


def test_a_freed_input_is_caught():
    """The graph reads the captured tensor's address; the tensor behind it was freed since."""
    holder = [torch.ones(3)]
    out = torch.zeros(3)
    cap = CheckedCapture([])
    cap.capture(lambda: out.copy_(holder[0] * 2))
    cap.replay()
    holder[0] = torch.full((3,), 5.0)  # the captured input is freed
    with pytest.raises(ContractError, match=r"replay 2: an input of op 0 \(aten.mul.Tensor\) was freed after the "
                                            "capture"):
        cap.replay()


def test_a_host_scalar_changed_between_replays_is_caught():
    """A 0-dim CPU tensor in a CUDA op is passed by value: the replay keeps the capture's value, so an
    update outside the captured programs would be lost; a captured program's own write is fine."""
    p, lr = torch.ones(3), torch.tensor(0.1)
    cap = CheckedBackend().new_capture([])
    cap.capture(lambda: p.sub_(lr * p))
    cap.replay()
    lr.fill_(0.05)  # a host schedule stepping the rate between epochs
    with pytest.raises(ContractError, match=r"the 0-dim tensor read by op 0 \(aten.mul.Tensor\) changed outside the "
                                            r"captured programs \(0.1000"):
        cap.replay()

    clock = torch.zeros((), dtype=torch.long)
    backend = CheckedBackend()
    tick, read = backend.new_capture([]), backend.new_capture([])
    seen = torch.zeros((), dtype=torch.long)
    read.capture(lambda: seen.copy_(clock * 1))
    tick.capture(lambda: clock.add_(1))
    for _ in range(3):
        read.replay()
        tick.replay()
    assert int(seen) == 2 and int(clock) == 3


def test_a_host_value_lifted_inside_the_capture_is_caught():
    """``torch.tensor(x)`` inside the captured region copies a host buffer: a replay copies the
    capture's value again, whatever ``x`` has become."""
    count, total = [0], torch.zeros(())

    def epoch():
        total.add_(torch.tensor(float(count[0])))
        count[0] += 1

    cap = CheckedCapture([])
    cap.capture(epoch)
    with pytest.raises(ContractError, match=r"replay 1: op 0 makes a tensor from host data whose value differs"):
        cap.replay()
