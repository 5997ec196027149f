"""LipschitzNorm's bounds give the bits of their plain torch formulas (``index_select`` gathers and
``scatter_reduce(reduce="amax")``), forward and gradient, alone and under ``vmap`` over stacked
replicas, tied maxima included: the compiled segment maximum and the vmap-friendly gathers change
no number of a record."""
from __future__ import annotations

import pytest
import torch
from torch.func import vmap

from zoo.graph import as_graph
from zoo.norms.lipschitz import LipschitzNorm, safe_norm
from zoo.norms.scores import AdditiveScores
from zoo.ops import segment
from zoo.ops._compiled import ops
from zoo.ops.message import squared_norm

_TINY = 1e-12


def _old_segment_max(values, index, n):
    out = values.new_full((n,) + tuple(values.shape[1:]), float("-inf"))
    idx = index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce(0, idx, values, reduce="amax", include_self=True)


def _old_paper(norm, s):
    """The paper rule (Eq. 17) as written before the compiled maximum: index_select and scatter_reduce."""
    graph = s.graph
    query_norm = safe_norm(torch.cat([s.att_src, s.att_dst], dim=-1))
    sq = squared_norm(s.nodes)
    max_src = _old_segment_max(sq.index_select(0, graph.src), graph.dst, graph.num_nodes).clamp_min(0.0)
    bound = (query_norm * (sq + max_src).clamp_min(_TINY**2).sqrt()).clamp_min(_TINY)
    return norm.alpha * s.scores / bound.index_select(0, graph.dst)


def _old_authors(norm, s):
    graph = s.graph
    att = torch.cat([s.att_src, s.att_dst], dim=-1)
    att_norm = 4.0 * (att.pow(2).sum().sqrt() if norm.variant == "authors_code" else att.pow(2).sum(-1).sqrt())
    norm_x = squared_norm(s.nodes).index_select(0, graph.src)
    per_node = _old_segment_max(norm_x, graph.dst, graph.num_nodes).clamp_min(0.0)
    flat_max = per_node.reshape(-1, 1).index_select(0, graph.dst)
    divisor = (flat_max + norm_x).clamp_min(_TINY**2).sqrt()
    return norm.alpha * s.scores / (att_norm * divisor + 1e-12)


def _bits(a, b):
    ints = {torch.float32: torch.int32, torch.float64: torch.int64}[a.dtype]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


def _tied_inputs(replicas, n, heads, channels, dtype, seed):
    """Node features drawn from few distinct rows (many tied neighbourhood maxima), some all-zero rows."""
    g = torch.Generator().manual_seed(seed)
    palette = torch.randn(4, heads, channels, generator=g, dtype=dtype)
    pick = torch.randint(0, 4, (replicas, n), generator=g)
    x = palette[pick]
    x[:, :3] = 0.0  # dead rows (safe_norm's floor)
    e0 = 6 * n
    ei = torch.randint(0, n, (2, e0), generator=g)
    graph = as_graph(ei, torch.zeros(n, 1), self_loops="add")
    att_src = torch.randn(replicas, heads, channels, generator=g, dtype=dtype)
    att_dst = torch.randn(replicas, heads, channels, generator=g, dtype=dtype)
    scores = torch.randn(replicas, graph.num_edges, heads, generator=g, dtype=dtype)
    grad = torch.randn(replicas, graph.num_edges, heads, generator=g, dtype=dtype)
    return graph, [x, att_src, att_dst, scores], grad


def _run(fn, graph, leaves, grad, stacked):
    leaves = [t.clone().requires_grad_(True) for t in leaves]

    def one(x, a_s, a_t, sc):
        return fn(AdditiveScores(graph, x, a_s, a_t, sc))

    if stacked:
        out = vmap(one)(*leaves)
    else:
        out = torch.stack([one(*(t[r] for t in leaves)) for r in range(leaves[0].shape[0])])
    out.backward(grad)
    return [out.detach()] + [t.grad for t in leaves]


@pytest.mark.parametrize("variant", ["paper", "authors_code", "authors_code_si"])
@pytest.mark.parametrize("heads", [1, 8])
@pytest.mark.parametrize("stacked", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_additive_bits_equal_old_formula(variant, heads, stacked, dtype):
    norm = LipschitzNorm(alpha=0.7, variant=variant)
    old = _old_paper if variant == "paper" else _old_authors
    graph, leaves, grad = _tied_inputs(3, 40, heads, 4, dtype, seed=heads)
    want = _run(lambda s: old(norm, s), graph, leaves, grad, stacked)
    got = _run(norm.normalize, graph, leaves, grad, stacked)
    for w, g in zip(want, got):
        assert _bits(g, w)


def _max_case(dtype, ties):
    g = torch.Generator().manual_seed(5)
    values = torch.randint(0, 3, (300, 4), generator=g).to(dtype) if ties else torch.randn(300, 4, generator=g, dtype=dtype)
    values[7, 1] = float("-inf")
    index = torch.randint(0, 60, (300,), generator=g)
    index[index == 13] = 14  # segment 13 empty (-inf, no gradient to share)
    values[index == 20] = float("-inf")  # segment 20 holds -inf only: the -inf start ties with its edges
    return values, index, torch.randn(61, 4, generator=g, dtype=dtype)


@pytest.mark.skipif(not ops.available(torch.device("cpu")), reason="the C++ kernels could not be built here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ties", [True, False])
def test_compiled_segment_max_bits(dtype, ties):
    """The compiled maximum and gradient: scatter_reduce's amax and its autograd (ties split evenly)."""
    values, index, grad = _max_case(dtype, ties)
    a = values.clone().requires_grad_(True)
    want = _old_segment_max(a, index, 61)
    want.backward(grad)
    b = values.clone().requires_grad_(True)
    got = segment.segment_max(b, index, 61)
    assert segment.compiled_edge_op_serves(b)
    got.backward(grad)
    assert _bits(got.detach(), want.detach()) and _bits(b.grad, a.grad)
    if ties:  # the split gradient is there to check: some segment has a tied maximum
        counts = (values == want.detach()[index]).to(dtype)
        assert bool((torch.zeros(61, 4, dtype=dtype).index_add_(0, index, counts) > 1).any())


@pytest.mark.skipif(not ops.available(torch.device("cpu")), reason="the C++ kernels could not be built here")
def test_compiled_segment_max_nan_sticks():
    values = torch.tensor([[1.0], [float("nan")], [3.0], [2.0]])
    index = torch.tensor([0, 0, 0, 1])
    got = segment.segment_max(values, index, 2)
    want = _old_segment_max(values, index, 2)
    assert torch.isnan(got[0, 0]) and _bits(got, want)


@pytest.mark.skipif(not ops.available(torch.device("cpu")), reason="the C++ kernels could not be built here")
def test_compiled_segment_max_under_vmap_bits():
    values, index, grad = _max_case(torch.float32, True)
    stacked = torch.stack([values, values.flip(0), values * 2])
    grads = torch.stack([grad, grad * 3, -grad])
    a = stacked.clone().requires_grad_(True)
    vmap(lambda v: _old_segment_max(v, index, 61))(a).backward(grads)
    b = stacked.clone().requires_grad_(True)
    out = vmap(lambda v: segment.segment_max(v, index, 61))(b)
    out.backward(grads)
    want = torch.stack([_old_segment_max(v, index, 61) for v in stacked])
    assert _bits(out.detach(), want) and _bits(b.grad, a.grad)


def _bounds_case(dtype, sort):
    g = torch.Generator().manual_seed(9)
    x = torch.randint(0, 3, (3, 50, 2), generator=g).to(dtype)  # few values: tied maxima everywhere
    src, dst = torch.randint(0, 50, (400,), generator=g), torch.randint(0, 49, (400,), generator=g)
    if sort:
        order = torch.argsort(dst, stable=True)
        src, dst = src[order], dst[order]
    return x, src, dst, g


@pytest.mark.skipif(not ops.available(torch.device("cpu")), reason="the C++ kernels could not be built here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sort", [True, False])
def test_neighbour_max_and_scale_divide_bits(dtype, sort):
    """Each op against its torch expression under vmap, forward and gradient (node 49 has no edge:
    -inf, no gradient)."""
    from zoo.ops.bounds import neighbour_max, scale_divide

    x, src, dst, g = _bounds_case(dtype, sort)
    grad = torch.randn(3, 50, 2, generator=g, dtype=dtype)
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    want = vmap(lambda t: _old_segment_max(t.index_select(0, src), dst, 50))(a)
    got = vmap(lambda t: neighbour_max(t, src, dst, 50))(b)
    want.backward(grad)
    got.backward(grad)
    assert _bits(got.detach(), want.detach()) and _bits(b.grad, a.grad)

    scores = torch.randn(3, 400, 2, generator=g, dtype=dtype)
    bound = torch.rand(3, 50, 2, generator=g, dtype=dtype) + 0.5
    grad = torch.randn(3, 400, 2, generator=g, dtype=dtype)
    leaves = [[t.clone().requires_grad_(True) for t in (scores, bound)] for _ in range(2)]
    want = vmap(lambda s, c: 0.3 * s / c.index_select(0, dst))(*leaves[0])
    got = vmap(lambda s, c: scale_divide(s, c, dst, 0.3))(*leaves[1])
    want.backward(grad)
    got.backward(grad)
    assert _bits(got.detach(), want.detach())
    assert all(_bits(n.grad, o.grad) for n, o in zip(leaves[1], leaves[0]))


def _stacked_gat_lip(heads, dtype, variant, seeds=(0, 1, 2)):
    """Forward and every parameter's gradient of a stacked GAT with LipschitzNorm."""
    from torch.func import functional_call, stack_module_state

    import zoo

    g = torch.Generator().manual_seed(heads)
    n = 30
    edge_index = torch.randint(0, n, (2, 120), generator=g)
    x = torch.randn(n, 6, generator=g, dtype=dtype)
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=8 * heads, heads=heads, num_layers=3,
                                norm="lipschitz", norm_kwargs={"variant": variant}).to(dtype))
    params, buffers = stack_module_state(models)
    out = vmap(lambda p, b: functional_call(models[0], (p, b), (edge_index, x)))(params, buffers)
    grads = torch.autograd.grad(out.square().sum(), list(params.values()))
    return [out.detach(), *grads]


@pytest.mark.skipif(not ops.available(torch.device("cpu")), reason="the C++ kernels could not be built here")
@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("variant", ["paper", "authors_code", "authors_code_si"])
def test_rules_on_the_physical_replicas_give_the_dispatched_bits(heads, dtype, variant, monkeypatch):
    """Under one vmap the summed node terms (bounds.edge_sum) and the rule's chain (Eq. 17 or the released
    rule, bounds.on_replicas) run once each on the replicas' physical tensors, two calls a layer; the
    model's output and every gradient keep the bits of the gathers and the chain run op by op under vmap
    (each op through its vmap rule)."""
    from zoo.ops import bounds
    from zoo.ops._direct import dispatched

    taken = []
    real = bounds.vmapped

    def spy(rule, args):
        done = real(rule, args)
        taken.append(done is not None)
        return done

    monkeypatch.setattr(bounds, "vmapped", spy)
    direct = _stacked_gat_lip(heads, dtype, variant)
    assert taken == [True] * 6
    with dispatched():
        via_vmap = _stacked_gat_lip(heads, dtype, variant)
    assert len(taken) == 12 and not any(taken[6:])
    for a, b in zip(direct, via_vmap):
        assert _bits(a, b)


@pytest.mark.skipif(not ops.available(torch.device("cpu")), reason="the C++ kernels could not be built here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["replicas_first", "nodes_first"])
def test_edge_sum_gives_the_gathers_bits(dtype, layout):
    """bounds.edge_sum under vmap (one compiled pass on the physical replicas) against gather_rows(a, src) +
    gather_rows(b, dst) under vmap: forward and both gradients bitwise, repeated sources / destinations
    (sums in edge order), signed zeros, an isolated node; and the plain path outside vmap."""
    from zoo.ops.bounds import edge_sum

    g = torch.Generator().manual_seed(3)
    r, n, e, h = 3, 11, 60, 4
    src, dst = torch.randint(0, n - 1, (2, e), generator=g)  # node n - 1 isolated
    a = torch.randn(n, r, h, generator=g, dtype=dtype) * 1e3
    b = torch.randn(n, r, h, generator=g, dtype=dtype)
    a[0], b[1] = -0.0, 0.0
    if layout == "replicas_first":
        a, b = a.transpose(0, 1).contiguous(), b.transpose(0, 1).contiguous()
        dim = 0
    else:
        dim = 1
    grad = torch.randn(r, e, h, generator=g, dtype=dtype)
    grad[:, :5] = -0.0

    def run(fn, stacked=True):
        leaves = [t.clone().requires_grad_(True) for t in (a, b)]
        if stacked:
            out = vmap(fn, in_dims=(dim, dim))(*leaves)
        else:
            out = torch.stack([fn(leaves[0].select(dim, i), leaves[1].select(dim, i)) for i in range(r)])
        out.backward(grad)
        return [out.detach(), leaves[0].grad, leaves[1].grad]

    want = run(lambda x, y: segment.gather_rows(x, src) + segment.gather_rows(y, dst))
    for got in (run(lambda x, y: edge_sum(x, y, src, dst)), run(lambda x, y: edge_sum(x, y, src, dst), False)):
        for w, o in zip(want, got):
            assert _bits(o, w)


@pytest.mark.skipif(not ops.available(torch.device("cpu")), reason="the C++ kernels could not be built here")
def test_edge_sum_kernels_check_indices():
    x = torch.randn(2, 5, 3)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ops.zoo_kernels.edge_sum(x, x, torch.tensor([0, 5]), torch.tensor([0, 1]), 1)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ops.zoo_kernels.edge_sum_backward(torch.randn(2, 2, 3), torch.tensor([0, 1]), torch.tensor([-1, 1]), 5, 1)
