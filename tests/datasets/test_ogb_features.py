"""Input/edge encoders, edge-feature attention (vs PyG), graph readouts and activation recomputation."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.graph import as_graph
from zoo.nn.encoders import align_edge_features
from zoo.nn.readout import make_readout


def _graph(n=7, seed=0, loops=True):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (20,), generator=g)
    dst = torch.randint(0, n, (20,), generator=g)
    ei = torch.stack([src, dst])
    if loops:
        ei = torch.cat([ei, torch.tensor([[1, 3], [1, 3]])], 1)  # existing self-loops get replaced
    return ei


def _copy_gatv2_to_pyg(layer, conv):
    with torch.no_grad():
        conv.lin_l.weight.copy_(layer.lin_src.weight)
        conv.lin_r.weight.copy_(layer.lin_src.weight)
        conv.att.copy_(layer.att.unsqueeze(0))
        conv.lin_edge.weight.copy_(layer.lin_edge.weight)


def test_gatv2_edge_term_matches_pyg_gatv2conv():
    from torch_geometric.nn import GATv2Conv

    torch.manual_seed(0)
    ei, n, heads, ch, edim = _graph(), 7, 3, 4, 5
    x = torch.randn(n, 6, dtype=torch.float64)
    ea = torch.randn(ei.size(1), edim, dtype=torch.float64)
    model = zoo.build("gatv2", in_dim=6, out_dim=ch, hidden_dim=heads * ch, num_layers=1, heads=heads,
                      out_heads=heads, edge_encoder="linear", edge_dim=edim).double()
    layer = model.layers[0]
    conv = GATv2Conv(6, ch, heads=heads, edge_dim=heads * ch, bias=False, share_weights=True,
                     concat=False).double()
    _copy_gatv2_to_pyg(layer, conv)
    ours = model(ei, x, edge_attr=ea)
    ref = conv(x, ei, edge_attr=model.edge_encoder(ea))
    assert torch.allclose(ours, ref, atol=1e-5, rtol=0)
    # the edge term matters: without it the outputs differ
    with torch.no_grad():
        layer.lin_edge.weight.zero_()
    assert not torch.allclose(model(ei, x, edge_attr=ea), ref, atol=1e-5)


def test_gatdb_edge_term_matches_pyg_gatconv_at_zero_bias():
    from torch_geometric.nn import GATConv

    torch.manual_seed(1)
    ei, n, heads, ch, edim = _graph(seed=1), 7, 2, 3, 4
    x = torch.randn(n, 5, dtype=torch.float64)
    ea = torch.randn(ei.size(1), edim, dtype=torch.float64)
    model = zoo.build("gatdb", in_dim=5, out_dim=ch, hidden_dim=heads * ch, num_layers=1, heads=heads,
                      out_heads=heads, edge_encoder="linear", edge_dim=edim).double()
    out = model(ei, x, edge_attr=ea)  # ties xi (zero) to this graph
    layer = model.layers[0]
    conv = GATConv(5, ch, heads=heads, edge_dim=heads * ch, bias=False, concat=False).double()
    with torch.no_grad():
        conv.lin.weight.copy_(layer.lin.weight)
        conv.att_src.copy_(layer.att_src.unsqueeze(0))
        conv.att_dst.copy_(layer.att_dst.unsqueeze(0))
        conv.att_edge.copy_(layer.att_edge.unsqueeze(0))
        conv.lin_edge.weight.copy_(layer.lin_edge.weight)
    ref = conv(x, ei, edge_attr=model.edge_encoder(ea))
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)


def test_align_edge_features_follows_the_self_loop_policy():
    ei = torch.tensor([[0, 1, 2, 2, 1], [1, 1, 1, 0, 2]])
    attr = torch.tensor([[1.0], [9.0], [3.0], [5.0], [7.0]])
    for policy in ("add", "keep", "remove"):
        g = as_graph(ei, torch.zeros(3, 1), policy)
        out = align_edge_features(ei, 3, policy, attr)
        assert out.size(0) == g.num_edges
    g = as_graph(ei, torch.zeros(3, 1), "add")
    out = align_edge_features(ei, 3, "add", attr)
    lookup = {(int(s), int(d)): float(v) for (s, d), v in zip(g.edge_index.t().tolist(), out.view(-1))}
    assert lookup[(0, 1)] == 1.0 and lookup[(2, 0)] == 5.0 and lookup[(1, 2)] == 7.0
    assert lookup[(1, 1)] == 2.0  # replaced loop: mean of node 1's other incoming edges (1, 3)
    assert lookup[(0, 0)] == 5.0 and lookup[(2, 2)] == 7.0


def test_edge_encoder_refused_where_the_layer_has_no_edge_term():
    with pytest.raises(ValueError, match="no edge-feature term.*gatv2 or gatdb"):
        zoo.build("gcn", in_dim=9, out_dim=2, edge_encoder="bond")
    with pytest.raises(ValueError, match="no edge-feature term"):
        zoo.build("gat", in_dim=9, out_dim=2, edge_encoder="bond")
    model = zoo.build("gatv2", in_dim=9, out_dim=2, hidden_dim=8, edge_encoder="bond", input_encoder="atom")
    with pytest.raises(ValueError, match="needs edge features"):
        model(torch.tensor([[0], [1]]), torch.zeros(2, 9, dtype=torch.long))


def test_encoder_names_are_normalised_and_typos_listed():
    model = zoo.build("gatv2", in_dim=9, out_dim=2, hidden_dim=8, input_encoder="Atom-Encoder")
    assert model.layers[0].in_dim == 8  # layer 1 reads the encoder's output width
    with pytest.raises(ValueError, match="Did you mean 'atom'"):
        zoo.build("gatv2", in_dim=9, out_dim=2, input_encoder="atm")
    model = zoo.build("gatv2", in_dim=5, out_dim=2, input_encoder="atom")
    with pytest.raises(ValueError, match="9 atom feature columns"):
        model(torch.tensor([[0], [1]]), torch.zeros(2, 5, dtype=torch.long))


def test_atom_and_bond_encoders_on_molecule_codes():
    from ogb.graphproppred.mol_encoder import AtomEncoder

    torch.manual_seed(0)
    x = torch.randint(0, 2, (5, 9))
    ei = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    ea = torch.randint(0, 2, (4, 3))
    model = zoo.build("gatv2", in_dim=9, out_dim=3, hidden_dim=8, heads=2, num_layers=2,
                      input_encoder="atom", edge_encoder="bond")
    assert isinstance(model.input_encoder.encoder, AtomEncoder)
    out = model(ei, x, edge_attr=ea)
    assert out.shape == (5, 3)
    # float codes (the runner casts features to its dtype) give the same output
    assert torch.allclose(model(ei, x.float(), edge_attr=ea), out)
    # edge features change the output
    assert not torch.allclose(model(ei, x, edge_attr=torch.zeros_like(ea)), out)


@pytest.mark.parametrize("name", ["mean", "sum", "attention"])
def test_readouts(name):
    torch.manual_seed(0)
    h = torch.randn(6, 4, dtype=torch.float64)
    batch = torch.tensor([0, 0, 1, 1, 1, 2])
    r = make_readout(name, 4).double()
    out = r(h, batch, 3)
    if name == "sum":
        ref = torch.stack([h[:2].sum(0), h[2:5].sum(0), h[5:].sum(0)])
    elif name == "mean":
        ref = torch.stack([h[:2].mean(0), h[2:5].mean(0), h[5:].mean(0)])
    else:
        from torch_geometric.nn.aggr import AttentionalAggregation

        ref = AttentionalAggregation(r.score)(h, batch, dim_size=3)
    assert torch.allclose(out, ref, atol=1e-12)


def test_readout_names():
    assert type(make_readout("Global-Attention", 4)).__name__ == "AttentionReadout"
    with pytest.raises(ValueError, match="Did you mean 'mean'"):
        make_readout("meen", 4)


@pytest.mark.parametrize("name", ["gatv2", "gcn", "gat"])
def test_recompute_does_not_change_numbers(name):
    torch.manual_seed(0)
    ei, x = _graph(), torch.randn(7, 5, dtype=torch.float64)
    kw = dict(in_dim=5, out_dim=3, hidden_dim=8, num_layers=4, dropout=0.3, residual="linear")
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(1)
        model = zoo.build(name, recompute=ckpt, **kw).double().train()
        torch.manual_seed(2)  # same dropout masks
        out = model(ei, x)
        loss = (out ** 2).sum()
        loss.backward()
        grads.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    (o0, g0), (o1, g1) = grads
    assert torch.equal(o0, o1)
    assert len(g0) == len(g1) and all(torch.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in zip(g0, g1))


@pytest.mark.parametrize("name", ["gatv2", "gat"])
def test_recompute_replays_per_replica_dropout(name):
    """zoo.bench's per-replica dropout streams are not torch's RNG: the recomputation in the
    backward must draw the same masks (else the gradients belong to other masks)."""
    from zoo.ops.dropout import ReplicaRandomness, replica_randomness

    ei, x = _graph(), torch.randn(7, 5, dtype=torch.float64)
    kw = dict(in_dim=5, out_dim=3, hidden_dim=8, num_layers=4, dropout=0.5, residual="linear")
    runs = []
    for ckpt in (False, True):
        torch.manual_seed(1)
        model = zoo.build(name, recompute=ckpt, **kw).double().train()
        rng = ReplicaRandomness([7])
        with replica_randomness(rng, torch.tensor(0)):
            out = model(ei, x)
        (out ** 2).sum().backward()  # outside the context, as a training loop may do
        with replica_randomness(rng, torch.tensor(0)):
            after = model(ei, x)  # the stream continues where the forward left it
        runs.append((out.detach(), [p.grad.clone() for p in model.parameters()], after.detach()))
    (o0, g0, a0), (o1, g1, a1) = runs
    assert torch.equal(o0, o1)
    assert all(torch.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in zip(g0, g1))
    assert torch.equal(a0, a1)


def test_recompute_keeps_fewer_tensors():
    """With recompute=True autograd keeps only the layer inputs (hooks count saved bytes)."""
    torch.manual_seed(0)
    ei, x = _graph(n=50, seed=3), torch.randn(50, 16)
    ei = torch.cat([ei, torch.randint(0, 50, (2, 400))], 1)

    def saved_bytes(model):
        total = [0]

        def pack(t):
            total[0] += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(ei, x).sum()
        return total[0]

    kw = dict(in_dim=16, out_dim=4, hidden_dim=32, heads=4, num_layers=8)
    torch.manual_seed(1)
    plain = saved_bytes(zoo.build("gatv2", **kw))
    torch.manual_seed(1)
    ckpt = saved_bytes(zoo.build("gatv2", recompute=True, **kw))
    assert ckpt < plain / 3


def tiny_molecule_task(graphs_per_split=(12, 6, 6), seed=0):
    """Molecule-shaped graph task: OGB atom/bond codes (9 / 3 int columns), one binary label."""
    from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
    from torch_geometric.data import Data

    from zoo.datasets import Task

    g = torch.Generator().manual_seed(seed)
    atom, bond = get_atom_feature_dims(), get_bond_feature_dims()
    graphs = {}
    for split, count in zip(("train", "val", "test"), graphs_per_split):
        items = []
        for i in range(count):
            n = int(torch.randint(3, 8, (1,), generator=g))
            x = torch.stack([torch.randint(0, min(d, 4), (n,), generator=g) for d in atom], 1)
            s = torch.randint(0, n, (n + 2,), generator=g)
            d = torch.randint(0, n, (n + 2,), generator=g)
            ei = torch.cat([torch.stack([s, d]), torch.stack([d, s])], 1)
            ea = torch.stack([torch.randint(0, min(k, 3), (n + 2,), generator=g) for k in bond], 1).repeat(2, 1)
            y = torch.tensor([[i % 2]])  # both classes in every split
            items.append(Data(x=x.float(), edge_index=ei, edge_attr=ea, y=y))
        graphs[split] = items
    return Task(name="tiny_mol", kind="graph", metric="rocauc", num_features=9, num_classes=1, multilabel=False,
                graphs=graphs, ogb_evaluator="ogbg-molhiv")


@pytest.mark.parametrize("model,readout,extra", [
    ("gatv2", "attention", {"edge_encoder": "bond", "recompute": True}),
    ("gcn", "sum", {}),
])
def test_graph_task_through_model_factory_grouped_equals_sequential(model, readout, extra):
    """ogbg-molhiv's path on tiny data: atom encoder, bond features, readout, OGB Evaluator,
    mini-batches shared by the replicas; stacked replicas reproduce one-at-a-time runs at float64."""
    from zoo.trainer.cells import model_factory
    from zoo.trainer.loop import train_replicas
    from zoo.trainer.replicas import build_replicas
    from zoo.trainer.config import TrainConfig

    task = tiny_molecule_task()
    m = {"name": model, "init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {}, "readout": readout,
         "kwargs": {"hidden_dim": 8, "num_layers": 2, "input_encoder": "atom", **extra}}
    factory = model_factory({"model": m}, task)
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=4, batch_size=5)
    seeds = [0, 1]

    def run(seed_list, stacked):
        reps, view = build_replicas(task, [factory] * len(seed_list), seed_list, torch.device("cpu"),
                                    torch.float64, cfg, stacked)
        return train_replicas(task, reps, view, cfg, seed_list), reps

    grouped, reps = run(seeds, True)
    assert type(reps.base.readout).__name__.lower().startswith(readout[:3])
    if extra.get("edge_encoder"):
        assert reps.base.gnn.edge_encoder is not None
    sequential = [run([s], False)[0][0] for s in seeds]
    for g, s in zip(grouped, sequential):
        assert g.best_epoch == s.best_epoch
        assert g.metrics["test"] is not None and 0.0 <= g.metrics["test"] <= 1.0
        for split in ("train", "val", "test"):
            assert g.metrics[split] == pytest.approx(s.metrics[split], abs=1e-12)
        assert g.val_loss == pytest.approx(s.val_loss, abs=1e-10, rel=0)


def test_readout_on_node_task_is_refused():
    from zoo.trainer.cells import model_factory

    task = tiny_molecule_task()
    task.kind = "transductive"
    m = {"name": "gcn", "init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {}, "readout": "sum",
         "kwargs": {}}
    with pytest.raises(ValueError, match="readout='sum' pools node outputs"):
        model_factory({"model": m}, task)


def test_suite_readout_key_is_validated_and_optional():
    from zoo.bench.suite.load import load_suite
    from zoo.bench.suite.schema import SuiteError

    suite = load_suite("benchmarks/suites/ogb_molhiv.toml", quick=True)
    assert {c.config["model"]["readout"] for c in suite.cells} == {"mean"}
    assert {c.config["model"]["kwargs"].get("edge_encoder") for c in suite.cells
            if c.config["model"]["name"] == "gatv2"} == {"bond"}
    quick = load_suite("benchmarks/suites/quick.toml", quick=True)
    assert all("readout" not in c.config["model"] for c in quick.cells)  # other suites' ids unchanged
    from zoo.bench.suite.load import parse_suite

    raw = {"suite": {"name": "x"}, "defaults": {"dataset": "ogbg_molhiv", "model": "gcn", "readout": "meen"}}
    with pytest.raises(SuiteError, match="Did you mean 'mean'"):
        parse_suite(raw)


@pytest.mark.parametrize("name", ["gatv2", "gatdb"])
def test_conservation_identity_holds_with_edge_features(name):
    """W_e rescales with the incoming side (and a_e with the attention side): the balance
    paper's gradient identity stays exact with an edge term."""
    import torch.nn.functional as F

    from zoo.diagnostics.conservation import gradient_identity

    torch.manual_seed(0)
    ei, x = _graph(), torch.randn(7, 5, dtype=torch.float64)
    ea = torch.randn(ei.size(1), 3, dtype=torch.float64)
    model = zoo.build(name, in_dim=5, out_dim=3, hidden_dim=8, num_layers=3, heads=2,
                      edge_encoder="linear", edge_dim=3).double()
    model(ei, x, edge_attr=ea)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.7)
    F.cross_entropy(model(ei, x, edge_attr=ea), torch.tensor([0, 1, 2, 0, 1, 2, 0])).backward()
    for delta in gradient_identity(model):
        assert float(delta.abs().max()) < 1e-9
    # leaving W_e out of the incoming side breaks it (the test can fail)
    layer = model.layers[0]
    original = type(layer).incoming_params
    try:
        type(layer).incoming_params = lambda self: [p for p in original(self) if p is not getattr(self, "lin_edge").weight]
        assert max(float(d.abs().max()) for d in gradient_identity(model)) > 1e-6
    finally:
        type(layer).incoming_params = original


def test_graph_tied_model_on_graph_task_is_refused():
    from zoo.trainer.cells import model_factory

    m = {"name": "gatdb", "init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {}, "kwargs": {}}
    with pytest.raises(ValueError, match="tied to one graph"):
        model_factory({"model": m}, tiny_molecule_task())()


@pytest.mark.slow
def test_molhiv_subset_from_the_mirror(tmp_path, mirror):
    """The real ogbg-molhiv through zoo.datasets with the --quick subset (OGB processing: ~30-50 s)."""
    data_root = tmp_path / "data"
    task = zoo.datasets.load("ogbg_molhiv", root=data_root, max_graphs=300)
    assert {s: len(g) for s, g in task.graphs.items()} == {"train": 300, "val": 300, "test": 300}
    assert {s: int(sum(int(g.y) for g in gs)) for s, gs in task.graphs.items()} == {"train": 11, "val": 7, "test": 8}
    first = task.graphs["train"][0]
    assert first.x.size(1) == 9 and first.edge_attr.size(1) == 3
    with pytest.raises(ValueError, match="max_graphs must be a positive integer"):
        zoo.datasets.load("ogbg_molhiv", root=data_root, max_graphs=0)
