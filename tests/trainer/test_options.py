"""The trainer's options beyond the optimiser: epoch lr schedules, per-replica gradient clipping and
bf16 autocast — each stacked per replica, each equal to its torch counterpart on a replica alone."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.trainer.test_train import synthetic_task
from zoo.graph import as_graph
from zoo.trainer.clipping import clip_replica_grads, replica_grad_norms
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.optim import make_lr_scheduler, make_optimizer
from zoo.trainer.replicas import build_replicas
from zoo.trainer.schedules import StackedEpochSchedule

LR = 0.1
TORCH_SCHEDULES = {
    "step": ({"step_size": 3, "gamma": 0.5}, lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)),
    "multistep": ({"milestones": [7, 2, 7], "gamma": 0.3},
                  lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[7, 2, 7], gamma=0.3)),
    "exponential": ({"gamma": 0.9}, lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)),
    "cosine": ({"T_max": 10, "eta_min": 0.01},
               lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.01)),
}


def _torch_lrs(make, epochs):
    """The lr torch uses for epochs 0 .. epochs - 1 (``scheduler.step()`` after each)."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=LR)
    sched = make(opt)
    out = []
    for _ in range(epochs):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("name", sorted(TORCH_SCHEDULES))
def test_stacked_schedule_is_torchs_per_replica(name):
    """Each replica's lr follows the torch scheduler at its own epoch count; a stopped replica's
    lr and count stay (the third stops after epoch 4, the second trains from epoch 0 on too)."""
    options, make = TORCH_SCHEDULES[name]
    epochs = 25  # cosine: past T_max, where torch's cosine goes on
    sched = make_lr_scheduler(name, 3, LR, options=options, epochs=epochs)
    assert isinstance(sched, StackedEpochSchedule)
    ref = _torch_lrs(make, epochs)
    seen = []
    for e in range(epochs):
        if e >= 1:  # the loop steps the scheduler before each epoch after the first
            sched.step(None, torch.tensor([True, True, e <= 4]))
        seen.append(sched.lr.clone())
    lrs = torch.stack(seen)
    torch.testing.assert_close(lrs[:, 0], torch.tensor(ref, dtype=torch.float64), rtol=1e-12, atol=0)
    assert torch.equal(lrs[:, 0], lrs[:, 1])
    torch.testing.assert_close(lrs[:, 2], torch.tensor(ref[:5] + [ref[4]] * (epochs - 5), dtype=torch.float64),
                               rtol=1e-12, atol=0)
    assert int(sched.epochs[2]) == 4 and len(set(ref)) > 2  # the schedule did move


def test_cosine_t_max_defaults_to_the_runs_epochs():
    sched = make_lr_scheduler("cosine", 1, LR, epochs=8)
    sched.step(None, torch.tensor([True]))
    assert sched.t_max == 8 and float(sched.lr[0]) == pytest.approx(LR * (1 + math.cos(math.pi / 8)) / 2, rel=1e-14)


def test_warmup_is_torchs_linear_lr_and_multiplies_the_schedule():
    """warmup_epochs = W is LinearLR(start_factor=1/W, total_iters=W-1); with a schedule, their product."""
    W, epochs = 4, 12
    p = [torch.zeros(2, 3)]
    warm = _torch_lrs(lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=1 / W, total_iters=W - 1), epochs)
    step = _torch_lrs(TORCH_SCHEDULES["step"][1], epochs)
    opt = make_optimizer("sgd", p, lr=LR, warmup_epochs=W)
    sched = make_lr_scheduler("step", 2, LR, options=TORCH_SCHEDULES["step"][0])
    alone = make_optimizer("sgd", p, lr=LR, warmup_epochs=W)
    for e in range(epochs):
        if e >= 1:
            sched.step(None, torch.tensor([True, True]))
        opt.replica_lr = sched.lr
        t = torch.full((2,), e + 1.0, dtype=torch.float64)
        assert float(alone.lr_at(t)[0]) == pytest.approx(warm[e], rel=1e-12)
        assert float(opt.lr_at(t)[0]) == pytest.approx(warm[e] * step[e] / LR, rel=1e-12)


def _gat(task):
    return lambda: zoo.build("gat", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8, num_layers=2,
                             heads=2)


def test_schedule_and_clipping_train_like_a_torch_loop():
    """One replica, float64: Adam + CosineAnnealingLR + warm-up (as LambdaLR) + clip_grad_norm_."""
    task, d = synthetic_task(), synthetic_task().data
    epochs, W, clip = 15, 3, 0.05
    cfg = TrainConfig(optimizer="adam", lr=LR, epochs=epochs, loss_threshold=0.0, select="last",
                      lr_scheduler="cosine", warmup_epochs=W, grad_clip_norm=clip)
    reps, view = build_replicas(task, [_gat(task)], [3], torch.device("cpu"), torch.float64, cfg, stacked=True)
    result = train_replicas(task, reps, view, cfg, [3])[0]

    torch.manual_seed(3)
    ref = _gat(task)().double()
    x = d.x.double()
    opt = torch.optim.Adam(ref.parameters(), lr=LR)
    cosine = lambda e: (1 + math.cos(math.pi * e / epochs)) / 2  # noqa: E731  (checked against torch above)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: min(1.0, (e + 1) / W) * cosine(e))
    norms = []
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(ref(d.edge_index, x)[d.train_mask], d.y[d.train_mask]).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(ref.parameters(), clip)))
        last_lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
    assert max(norms) > clip  # the clipping acted
    assert result.extra["last_step_lr"] == pytest.approx(last_lr, rel=1e-12)
    for name, p in ref.named_parameters():
        torch.testing.assert_close(reps.state_of(0)[name], p.detach(), rtol=0, atol=1e-10)


def test_stacked_replicas_equal_each_replica_alone():
    """Three seeds stacked, a step schedule and clipping that binds for some replicas and epochs, with
    patience stopping them at different epochs: each equals its run alone (float64)."""
    task = synthetic_task()
    cfg = TrainConfig(optimizer="sgd", lr=0.5, momentum=0.9, epochs=20, patience=4, loss_threshold=0.0,
                      lr_scheduler="step", lr_scheduler_kwargs={"step_size": 4, "gamma": 0.5}, grad_clip_norm=0.3)
    seeds = [0, 1, 2]
    reps, view = build_replicas(task, [_gat(task)] * 3, seeds, torch.device("cpu"), torch.float64, cfg, True)
    grouped = train_replicas(task, reps, view, cfg, seeds)
    assert len({r.epochs_run for r in grouped}) > 1
    for r, seed in enumerate(seeds):
        one, v1 = build_replicas(task, [_gat(task)], [seed], torch.device("cpu"), torch.float64, cfg, False)
        alone = train_replicas(task, one, v1, cfg, [seed])[0]
        assert (grouped[r].metrics, grouped[r].best_epoch, grouped[r].epochs_run) == \
            (alone.metrics, alone.best_epoch, alone.epochs_run)
        assert grouped[r].extra == alone.extra
        for name, p in one.state_of(0).items():
            torch.testing.assert_close(reps.state_of(r)[name], p, rtol=0, atol=1e-10)


def test_clipping_is_torchs_on_each_replica_slice():
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(3, 4, 5, generator=g, dtype=torch.float64), torch.randn(3, 5, generator=g, dtype=torch.float64),
             torch.randn(3, generator=g, dtype=torch.float64)]
    grads = [t * torch.tensor([0.01, 1.0, 10.0], dtype=torch.float64).view(-1, *[1] * (t.dim() - 1)) for t in grads]
    grads[0] = grads[0].transpose(1, 2).contiguous().transpose(1, 2)  # a gradient in another layout
    clipped = clip_replica_grads(grads, 1.0)
    assert clipped[0].stride() == grads[0].stride()
    for r in range(3):
        mine = [t[r].clone().requires_grad_() for t in grads]
        for t in mine:
            t.grad = t.detach().clone()
        total = torch.nn.utils.clip_grad_norm_(mine, 1.0)
        assert float(replica_grad_norms(grads)[r]) == pytest.approx(float(total), rel=1e-14)
        for c, t in zip(clipped, mine):
            torch.testing.assert_close(c[r], t.grad, rtol=1e-14, atol=0)
    assert torch.equal(clipped[1][0], grads[1][0])  # below the bound: untouched


# --------------------------------------------------------------------------- bf16 autocast


@pytest.mark.parametrize("name", ["gat", "gatv2", "gcn"])
def test_bf16_forward_is_close_to_fp32(name):
    task = synthetic_task()
    factory = lambda: zoo.build(name, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=16,  # noqa: E731
                                num_layers=2, **({} if name == "gcn" else {"heads": 2}))
    out = {}
    for precision in ("fp32", "bf16"):
        cfg = TrainConfig(precision=precision)
        reps, view = build_replicas(task, [factory, factory], [0, 1], torch.device("cpu"), torch.float32, cfg, True)
        with torch.no_grad():
            out[precision] = reps.forward(*view.inputs(), train=False)
    assert out["bf16"].dtype == torch.float32
    scale = out["fp32"].abs().max()
    err = float((out["bf16"] - out["fp32"]).abs().max() / scale)
    assert 0 < err < 0.05, err  # bfloat16's 8-bit mantissa: ~1e-2 relative, and not exactly fp32


@pytest.mark.parametrize("name", ["gat", "gatv2"])
def test_bf16_fit_runs_and_learns_on_the_cpu(name):
    h = zoo.fit(name, synthetic_task(), epochs=30, lr=0.05, optimizer="adam", seeds=[0, 1], precision="bf16",
                num_layers=2, hidden_dim=16, progress=False, loss_threshold=0.0)
    loss = h.metrics["train_loss"]
    assert h.config["train"]["precision"] == "bf16"
    assert all(loss[-1] < 0.7 * loss[0]) and all(map(math.isfinite, loss[-1]))


def test_ops_compute_in_float32_under_autocast():
    """The fused / compiled attention receives one dtype (float32) under autocast: its gradients
    equal the plain ops' at float32 on the same bf16 inputs."""
    from zoo.ops import fused, gatv2_attention

    g = torch.Generator().manual_seed(0)
    n, e = 30, 120
    graph = as_graph(torch.randint(0, n, (2, e), generator=g), torch.zeros(n, 1))
    x = torch.randn(n, 2, 4, generator=g).to(torch.bfloat16).requires_grad_()
    att = torch.randn(2, 4, generator=g, requires_grad=True)
    grads = []
    for on in (True, False):
        with fused(on, min_elements=0), torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = gatv2_attention(x, None, att, graph, 0.2)
        assert out.dtype == torch.float32
        grads.append(torch.autograd.grad(out.square().sum(), (x, att)))
    for a, b in zip(*grads):
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=1e-3)


def test_sparse_input_product_under_autocast():
    """The first layer's CSR product (bag-of-words inputs, stacked weights) runs in float32 under
    autocast and equals the float32 product."""
    from torch.func import vmap

    from zoo.ops.sparse_input import SparseInput
    from zoo.ops.sparse_linear import linear

    g = torch.Generator().manual_seed(0)
    x = (torch.rand(64, 40, generator=g) < 0.04).float()
    sparse = SparseInput(x)
    w = torch.randn(2, 8, 40, generator=g, requires_grad=True)
    outs = []
    for autocast in (False, True):
        xd = sparse.dropped(torch.ones(sparse.nnz), 0.0)  # remembered as CSR: linear multiplies it sparse
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = vmap(lambda weight: linear(xd, weight))(w)
        (grad,) = torch.autograd.grad(out.square().sum(), w)
        outs.append((out, grad))
    (ref, ref_grad), (got, got_grad) = outs
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_grad, ref_grad, rtol=1e-6, atol=1e-6)
