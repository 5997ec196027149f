"""Stacked (grouped) training must reproduce one-at-a-time training; optimisers match torch.optim."""
from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.data import Data

import zoo
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.optim import make_optimizer
from zoo.trainer.replicas import build_replicas
from zoo.datasets import Task
from zoo.ops._custom import HAS_CUSTOM_OPS


def synthetic_task(n: int = 40, features: int = 6, classes: int = 3, seed: int = 0) -> Task:
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n, (2, 6 * n), generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    x = torch.randn(n, features, generator=g) + 0.5 * torch.nn.functional.one_hot(y, features).float()
    perm = torch.randperm(n, generator=g)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    for m, part in zip(masks, perm.chunk(3)):
        m[part] = True
    return Task(name="synthetic", kind="transductive", metric="accuracy", num_features=features,
                num_classes=classes, multilabel=False,
                data=Data(x=x, edge_index=edge_index, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2]))


def graph_list_task(k: int = 3) -> Task:
    from zoo.datasets.synthetic import complete_edge_index, twin_graph

    g = torch.Generator().manual_seed(0)
    ei = complete_edge_index(2 * k)
    graphs = {s: [twin_graph(k, torch.randperm(k, generator=g), ei) for _ in range(c)]
              for s, c in (("train", 4), ("val", 2), ("test", 2))}
    return Task(name="twin", kind="inductive", metric="accuracy", num_features=2 * k, num_classes=k,
                multilabel=False, graphs=graphs)


def _run(task, models, seeds, cfg, stacked, dtype=torch.float64, **kwargs):
    factories = [(lambda m=m: zoo.build(m[0], in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,
                                        num_layers=m[1], init=m[2], **kwargs)) for m in models]
    reps, view = build_replicas(task, factories, seeds, torch.device("cpu"), dtype, cfg, stacked)
    return train_replicas(task, reps, view, cfg, seeds), reps


def _sequential(task, models, seeds, cfg):
    out = []
    for m, s in zip(models, seeds):
        out += _run(task, [m], [s], cfg, stacked=False)[0]
    return out


@pytest.mark.parametrize("model,optimizer,extra", [
    ("gat", "adam", {"weight_decay": 5e-4}),
    ("gatv2", "sgd", {"momentum": 0.9, "lr": 0.05}),
    ("gcn", "adamw", {"weight_decay": 1e-2, "warmup_epochs": 5}),
    ("gatdb", "adam", {"patience": 5}),
])
def test_grouped_equals_sequential(model, optimizer, extra):
    task = synthetic_task()
    cfg = TrainConfig(optimizer=optimizer, lr=extra.pop("lr", 0.01), epochs=25, **extra)
    inits = ["xavier", "xavier", "bal_o" if "balanced_orthogonal" in zoo.list_inits() else "xavier"]
    models = [(model, 3, init) for init in inits]
    seeds = [0, 1, 2]
    grouped, _ = _run(task, models, seeds, cfg, stacked=True)
    sequential = _sequential(task, models, seeds, cfg)
    assert len({r.best_epoch for r in grouped} | {r.epochs_run for r in grouped}) > 1 or model != "gatdb"
    for g, s in zip(grouped, sequential):
        assert g.best_epoch == s.best_epoch and g.epochs_run == s.epochs_run and g.stop_reason == s.stop_reason
        assert g.metrics == s.metrics
        assert g.val_loss == pytest.approx(s.val_loss, abs=1e-10, rel=0)
        assert g.train_loss == pytest.approx(s.train_loss, abs=1e-10, rel=0)


def test_grouped_equals_sequential_on_graph_lists():
    task = graph_list_task()
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=15, batch_size=2)
    models = [("gatdb", 1, "xavier"), ("gatdb", 1, "xavier")]
    grouped, _ = _run(task, models, [3, 4], cfg, stacked=True)
    sequential = _sequential(task, models, [3, 4], cfg)
    for g, s in zip(grouped, sequential):
        assert g.metrics == s.metrics and g.best_epoch == s.best_epoch
        assert g.val_loss == pytest.approx(s.val_loss, abs=1e-10, rel=0)


def test_stopped_replica_is_frozen():
    """A replica that stops early keeps its parameters and optimiser state while others train on."""
    task = synthetic_task()
    cfg = TrainConfig(optimizer="adam", lr=0.1, epochs=60, patience=3, select="val_loss")
    results, reps = _run(task, [("gat", 2, "xavier")] * 3, [0, 1, 2], cfg, stacked=True)
    epochs = [r.epochs_run for r in results]
    assert min(epochs) < max(epochs), "test needs replicas that stop at different epochs"
    # Re-train the earliest-stopping replica alone for exactly its epochs: same final parameters.
    first = epochs.index(min(epochs))
    alone, reps_alone = _run(task, [("gat", 2, "xavier")], [first], cfg, stacked=False)
    for p_group, p_alone in zip(reps.params, reps_alone.params):
        torch.testing.assert_close(p_group[first], p_alone[0], rtol=0, atol=1e-12)


def test_divergence_is_recorded_and_others_continue():
    task = synthetic_task()
    cfg = TrainConfig(optimizer="sgd", lr=1e8, epochs=10)
    # linear GCN in float32 with an absurd step size: logits overflow, the loss becomes inf/NaN
    results, _ = _run(task, [("gcn", 3, "xavier")] * 2, [0, 1], cfg, stacked=True, dtype=torch.float32,
                      activation="identity")
    assert all(r.diverged for r in results)
    assert all(r.stop_reason == "diverged" and r.diverged_epoch is not None and r.diverged_epoch >= 1 for r in results)
    assert all(r.best_epoch is not None and r.best_epoch < r.diverged_epoch for r in results)
    ok, _ = _run(task, [("gcn", 3, "xavier")], [0], TrainConfig(optimizer="sgd", lr=0.01, epochs=10), stacked=True)
    assert not ok[0].diverged and ok[0].stop_reason == "max_epochs"


def test_loss_threshold_stops_training():
    task = synthetic_task()
    cfg = TrainConfig(optimizer="adam", lr=0.05, epochs=400, loss_threshold=0.05)
    results, _ = _run(task, [("gcn", 2, "xavier")], [0], cfg, stacked=True)
    assert results[0].stop_reason == "converged" and results[0].epochs_run < 400


def test_a_zero_loss_threshold_never_stops_training():
    """``loss_threshold = 0`` means no loss stop, also when the training loss is exactly 0.0 (float32
    cross-entropy underflows once the margins pass ~17: two CiteSeer runs of lipschitz_table1 stopped
    there). One class: the loss is exactly 0 from the start."""
    task = synthetic_task(classes=1)
    stopped, _ = _run(task, [("gcn", 2, "xavier")], [0], TrainConfig(optimizer="adam", epochs=20, loss_threshold=1e-30),
                      stacked=True)
    assert stopped[0].stop_reason == "converged" and stopped[0].epochs_run == 0  # a positive threshold still stops
    results, _ = _run(task, [("gcn", 2, "xavier")], [0], TrainConfig(optimizer="adam", epochs=20, loss_threshold=0.0),
                      stacked=True)
    assert results[0].stop_reason == "max_epochs" and results[0].epochs_run == 20


@pytest.mark.parametrize("name,torch_cls,kwargs", [
    ("sgd", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3}),
    ("adam", torch.optim.Adam, {"lr": 0.01, "weight_decay": 5e-4}),
    ("adamw", torch.optim.AdamW, {"lr": 0.01, "weight_decay": 1e-2}),
])
def test_stacked_optimizer_matches_torch(name, torch_cls, kwargs):
    g = torch.Generator().manual_seed(0)
    ref = [torch.randn(4, 3, generator=g, dtype=torch.float64) for _ in range(2)]
    mine = [torch.stack([r.clone(), r.clone() * 2]) for r in ref]  # 2 replicas; the 2nd is frozen
    ref_params = [r.clone().requires_grad_(True) for r in ref]
    frozen = [m[1].clone() for m in mine]
    opt_ref = torch_cls(ref_params, **kwargs)
    opt = make_optimizer(name, mine, **kwargs)
    active = torch.tensor([True, False])
    for step in range(6):
        grads = [torch.sin(p * (step + 1)) for p in ref_params]
        for p, gr in zip(ref_params, grads):
            p.grad = gr.detach().clone()
        opt_ref.step()
        opt.step(mine, [torch.stack([gr.detach(), gr.detach()]) for gr in grads], active)
    for m, r, f in zip(mine, ref_params, frozen):
        torch.testing.assert_close(m[0], r.detach(), rtol=0, atol=1e-12)
        assert torch.equal(m[1], f)


def test_warmup_is_linear():
    p = [torch.zeros(2, 1, dtype=torch.float64)]
    opt = make_optimizer("sgd", p, lr=1.0, warmup_epochs=4)
    deltas = []
    for _ in range(6):
        before = p[0][0].clone()
        opt.step(p, [torch.ones(2, 1, dtype=torch.float64)], torch.tensor([True, True]))
        deltas.append(float(before - p[0][0]))
    assert deltas == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
    assert not any(math.isnan(d) for d in deltas)


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="per-replica dropout streams need torch.library.custom_op (torch >= 2.4)")
@pytest.mark.parametrize("model", ["gat", "gatv2"])
def test_dropout_replica_depends_only_on_its_seed(model):
    """Replica independence: seed 1 alone == seed 1 next to seed 0 (stacked or not), with dropout 0.5."""
    task = synthetic_task()
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=8, loss_threshold=0.0)
    kw = dict(dropout=0.5, attn_dropout=0.5)
    alone, _ = _run(task, [(model, 2, "xavier")], [1], cfg, stacked=True, **kw)
    pair, _ = _run(task, [(model, 2, "xavier")] * 2, [0, 1], cfg, stacked=True, **kw)
    seq, _ = _run(task, [(model, 2, "xavier")] * 2, [0, 1], cfg, stacked=False, **kw)
    other, _ = _run(task, [(model, 2, "xavier")] * 2, [2, 1], cfg, stacked=True, **kw)
    for r in (pair[1], seq[1], other[1]):
        assert r.metrics == alone[0].metrics and r.best_epoch == alone[0].best_epoch
        assert r.val_loss == alone[0].val_loss and r.train_loss == alone[0].train_loss
    # dropout is live: a different seed's run differs, and a dropout-free run differs
    assert pair[0].val_loss != pair[1].val_loss
    plain, _ = _run(task, [(model, 2, "xavier")], [1], cfg, stacked=True)
    assert plain[0].val_loss != alone[0].val_loss


def graph_level_task(seed: int = 0) -> Task:
    """Tiny graph classification: label = whether a random graph has more edges than the median."""
    g = torch.Generator().manual_seed(seed)

    def one() -> Data:
        n = int(torch.randint(4, 8, (1,), generator=g))
        m = int(torch.randint(n, 3 * n, (1,), generator=g))
        ei = torch.randint(0, n, (2, m), generator=g)
        return Data(x=torch.randn(n, 4, generator=g), edge_index=ei, y=torch.tensor([int(m > 2 * n)]))

    graphs = {s: [one() for _ in range(c)] for s, c in (("train", 10), ("val", 4), ("test", 4))}
    return Task(name="tiny_graphs", kind="graph", metric="accuracy", num_features=4, num_classes=2,
                multilabel=False, graphs=graphs)


@pytest.mark.parametrize("model", ["gatv2", "gcn"])
def test_grouped_equals_sequential_on_graph_level_task(model):
    """Mini-batches of graphs, replicas share the (shuffled) batches; float64."""
    from zoo.nn.readout import GraphPool

    task = graph_level_task()
    cfg = TrainConfig(optimizer="adam", lr=0.02, epochs=6, batch_size=3, loss_threshold=0.0)

    def factory(init):
        return lambda: GraphPool(zoo.build(model, in_dim=4, out_dim=8, hidden_dim=8, num_layers=2, init=init), 8, 2)

    def run(inits, seeds, stacked):
        reps, view = build_replicas(task, [factory(i) for i in inits], seeds, torch.device("cpu"), torch.float64,
                                    cfg, stacked)
        return train_replicas(task, reps, view, cfg, seeds)

    inits, seeds = ["xavier", "xavier", "balanced_orthogonal" if model == "gatv2" else "xavier"], [0, 1, 2]
    grouped = run(inits, seeds, True)
    sequential = [run([i], [s], False)[0] for i, s in zip(inits, seeds)]
    assert len({r.val_loss for r in grouped}) == 3  # the replicas really differ
    for g, s in zip(grouped, sequential):
        assert g.metrics == s.metrics and g.best_epoch == s.best_epoch and g.epochs_run == s.epochs_run
        assert g.val_loss == pytest.approx(s.val_loss, abs=1e-10, rel=0)
        assert g.train_loss == pytest.approx(s.train_loss, abs=1e-10, rel=0)


@pytest.mark.parametrize("name,kwargs", [
    ("sgd", {"lr": 0.1}), ("sgd", {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3}),
    ("adam", {"lr": 0.01, "weight_decay": 1e-3}), ("adamw", {"lr": 0.01, "weight_decay": 1e-2, "warmup_epochs": 3}),
])
def test_in_place_optimizer_step_equals_masked_step(name, kwargs):
    """The all-active in-place path (taken where host reads are free) gives bitwise the masked path's parameters."""
    g = torch.Generator().manual_seed(1)
    start = [torch.randn(3, 5, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g, dtype=torch.float64)]
    grads = [[torch.randn(p.shape, generator=g, dtype=torch.float64) for p in start] for _ in range(5)]
    results = []
    for host_reads in (True, False):
        params = [p.clone() for p in start]
        opt = make_optimizer(name, params, **kwargs)
        opt.host_reads = host_reads
        for gr in grads:
            opt.step(params, gr, torch.ones(3, dtype=torch.bool))
        results.append(params)
    for a, b in zip(*results):
        assert torch.equal(a, b)
    assert not torch.equal(results[0][0], start[0])


@pytest.mark.parametrize("name,torch_cls,kwargs", [
    ("sgd", torch.optim.SGD, {"lr": 0.1}),
    ("sgd", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3}),
    ("adam", torch.optim.Adam, {"lr": 0.01, "weight_decay": 5e-4}),
    ("adamw", torch.optim.AdamW, {"lr": 0.01, "weight_decay": 1e-2}),
])
def test_all_active_optimizer_step_matches_torch(name, torch_cls, kwargs):
    """Every replica active: each replica is its own torch.optim run."""
    g = torch.Generator().manual_seed(2)
    shapes = [(3, 7, 5), (3, 5), (3,)]
    mine = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    refs = [[p[r].clone().requires_grad_(True) for p in mine] for r in range(3)]
    opts = [torch_cls(ps, **kwargs) for ps in refs]
    opt = make_optimizer(name, mine, **kwargs)
    for step in range(6):
        grads = [torch.cos(p * (step + 1)) for p in mine]
        for r in range(3):
            for p, gr in zip(refs[r], grads):
                p.grad = gr[r].clone()
            opts[r].step()
        opt.step(mine, grads, torch.ones(3, dtype=torch.bool))
    for i, p in enumerate(mine):
        for r in range(3):
            torch.testing.assert_close(p[r], refs[r][i].detach(), rtol=0, atol=1e-12)


def test_transductive_scores_equal_the_per_split_masks():
    """One argmax over the labelled rows + a membership product == each split's masked accuracy, bitwise
    (ties, unlabelled nodes and overlapping splits included); rows() == boolean-mask indexing."""
    from zoo.trainer.config import SPLITS
    from zoo.trainer.views import TransductiveView, score as _score

    task = synthetic_task(n=50)
    d = task.data
    d.test_mask[:8] = False  # unlabelled nodes
    d.val_mask[d.train_mask.nonzero()[:3]] = True  # a node in two splits
    view = TransductiveView(task, torch.device("cpu"), torch.float64)
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 50, 3, generator=g, dtype=torch.float64)
    logits[:, :10] = logits[:, :10].round()  # ties: argmax keeps the first maximum either way
    logits[1, 20] = float("nan")
    expected = torch.stack([_score(task, logits[:, view.masks[s]], view.y[view.masks[s]]) for s in SPLITS], 1)
    assert torch.equal(view.scores(task, logits), expected)
    for s in SPLITS:
        torch.testing.assert_close(view.rows(logits, s), logits[:, view.masks[s]], rtol=0, atol=0, equal_nan=True)
        assert torch.equal(view.targets[s], view.y[view.masks[s]])


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="the stacked CSR first layer is a custom op (torch >= 2.4)")
@pytest.mark.parametrize("optimizer,extra", [("sgd", {"momentum": 0.9}), ("adam", {"weight_decay": 1e-3})])
def test_parameters_in_their_gradients_layout_train_the_same(optimizer, extra, monkeypatch):
    """Replicas.adopt_layout (parameters stored like their gradients: the stacked CSR first layer's
    (F, R*C) weight) changes no number: same metrics, losses, best and final parameters, bitwise."""
    from zoo.trainer.replicas import Replicas

    task = synthetic_task(n=40, features=60)
    g = torch.Generator().manual_seed(4)
    task.data.x = torch.rand(40, 60, generator=g) * (torch.rand(40, 60, generator=g) < 0.04)  # 4 % dense: CSR
    cfg = TrainConfig(optimizer=optimizer, lr=0.05, epochs=6, loss_threshold=0.0, keep_best_state=True, **extra)
    models = [("gatv2", 2, "xavier"), ("gatv2", 2, "balanced_orthogonal")]
    adopt, moved = Replicas.adopt_layout, []
    monkeypatch.setattr(Replicas, "adopt_layout", lambda self, grads: moved.append(adopt(self, grads)) or moved[-1])
    new, reps_new = _run(task, models, [0, 1], cfg, stacked=True)
    assert moved == [True]
    assert any(not p.is_contiguous() for p in reps_new.params)  # the first layer's weight took (F, R*C)
    monkeypatch.setattr(Replicas, "adopt_layout", lambda self, grads: False)
    old, reps_old = _run(task, models, [0, 1], cfg, stacked=True)
    assert all(p.is_contiguous() for p in reps_old.params)
    for a, b in zip(new, old):
        assert (a.metrics, a.val_loss, a.train_loss, a.best_epoch) == (b.metrics, b.val_loss, b.train_loss, b.best_epoch)
        for n in a.best_state:
            assert torch.equal(a.best_state[n], b.best_state[n]), (n, (a.best_state[n] - b.best_state[n]).abs().max())
    for p, q in zip(reps_new.params, reps_old.params):
        assert torch.equal(p, q), (p - q).abs().max()
