"""The C++ attention ops equal the plain torch ops at float64 to 1e-10: values and gradients,
isolated nodes, a destination of degree 41 (> the 32-destination block), C = 5 (not a power of
two), several heads, under vmap with R = 3; opcheck on every op; deterministic across threads."""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch.func import vmap

from tests.ops.compiled.cases import SLOPE, assert_same, fused, make_inputs, reference
from zoo.ops._compiled import ops
from zoo.ops.segment import segment_softmax, segment_sum

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ attention kernels could not be built here (no compiler?)")

FAMILIES = ["gatv2", "gat"]


def _fused(family, case):
    return fused(family, case, ops.gatv2_attention, ops.gat_attention)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("heads,channels,value_channels", [(1, 5, None), (3, 5, None), (2, 4, 7)])
def test_equals_plain(family, heads, channels, value_channels):
    case = make_inputs(family, heads, channels, value_channels)
    assert_same(_fused(family, case), reference(family, case), case["tensors"])


def test_gat_without_bias_and_isolated_node_gets_zero():
    case = make_inputs("gat", bias=False)
    assert_same(_fused("gat", case), reference("gat", case), case["tensors"])
    out, _ = _fused("gat", case)(*case["tensors"].values())
    assert out[6].abs().max() == 0


def test_shared_tensors_sum_their_gradients():
    """GATv2 with shared weights passes one tensor as x_src, x_dst and values."""
    case = make_inputs("gatv2")
    x = case["tensors"]["x_src"]
    att = case["tensors"]["att"]
    assert_same(lambda x, att: _fused("gatv2", case)(x, x, x, att),
                lambda x, att: reference("gatv2", case)(x, x, x, att), dict(x=x, att=att))


def _stack(tensors, replicas, seed=5):
    """``replicas`` perturbed copies of each tensor along a new first dimension (on its device)."""
    g = torch.Generator().manual_seed(seed)
    return {k: None if v is None else (v.detach().unsqueeze(0) + torch.randn((replicas,) + v.shape, generator=g,
                                                                             dtype=v.dtype).to(v.device))
            .requires_grad_() for k, v in tensors.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_equals_plain_under_vmap(family):
    case = make_inputs(family, heads=2, channels=3)
    stacked = _stack(case["tensors"], 3)
    dims = tuple(None if v is None else 0 for v in stacked.values())
    assert_same(vmap(_fused(family, case), in_dims=dims), vmap(reference(family, case), in_dims=dims), stacked)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_replica_is_bitwise_the_same_alone_and_in_any_thread_count(family):
    case = make_inputs(family, heads=2, channels=3)
    stacked = _stack(case["tensors"], 3)
    dims = tuple(None if v is None else 0 for v in stacked.values())

    def run(fn, tensors):
        out, alpha = fn(*tensors.values())
        grads = torch.autograd.grad(out.square().sum() + alpha.sum(), [v for v in tensors.values() if v is not None])
        return [out, alpha, *grads]

    together = run(vmap(_fused(family, case), in_dims=dims), stacked)
    threads = torch.get_num_threads()
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            alone = run(_fused(family, case), {k: None if v is None else v[1].detach().requires_grad_()
                                               for k, v in stacked.items()})
            for a, b in zip(alone, together):
                assert torch.equal(a, b[1])
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("family", FAMILIES)
def test_opcheck(family):
    case = make_inputs(family, heads=2, channels=3)
    t = {k: v for k, v in case["tensors"].items()}
    graph = ops.graph_arguments(case["orders"], triton=False)
    if family == "gatv2":
        args = (t["x_src"], t["x_dst"], t["values"], t["att"], *graph, 0.2)
        fwd, bwd = torch.ops.zoo_kernels.gatv2_forward, torch.ops.zoo_kernels.gatv2_backward
        fixed = (t["x_src"], t["x_dst"], t["values"], t["att"])
    else:
        args = (t["score_src"], t["score_dst"], t["bias"], t["values"], *graph, 0.2)
        fwd, bwd = torch.ops.zoo_kernels.gat_forward, torch.ops.zoo_kernels.gat_backward
        fixed = (t["score_src"], t["score_dst"], t["bias"], t["values"])
    torch.library.opcheck(fwd, args)
    out, alpha, lse = fwd(*[a.detach() if isinstance(a, torch.Tensor) else a for a in args])
    grad_out, grad_alpha = torch.randn_like(out), torch.randn_like(alpha)
    for ga in (grad_alpha, None):
        torch.library.opcheck(bwd, (grad_out, ga, *[a.detach() for a in fixed], out, lse, *graph, 0.2))


@pytest.mark.parametrize("family", FAMILIES)
def test_equals_plain_when_heads_are_processed_in_blocks(family):
    """5000 nodes x 16 channels at float64 is 640 kB per head: one head per cache block, not all at once."""
    from tests.ops.compiled.cases import plain_gat, plain_gatv2
    from zoo.ops.aggregate import edge_orders

    g = torch.Generator().manual_seed(2)
    n, heads, channels = 5000, 3, 16
    src, dst = torch.randint(0, n, (2, 20_000), generator=g)
    orders = edge_orders(src, dst, n)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()

    if family == "gatv2":
        tensors = dict(x_src=rand(n, heads, channels), x_dst=rand(n, heads, channels),
                       values=rand(n, heads, channels), att=rand(heads, channels))
        f = lambda *t: ops.gatv2_attention(*t, 0.2, ops.graph_arguments(orders, False))  # noqa: E731
        ref = lambda *t: plain_gatv2(*t, src, dst, n)  # noqa: E731
    else:
        tensors = dict(score_src=rand(n, heads), score_dst=rand(n, heads), bias=rand(src.numel(), heads),
                       values=rand(n, heads, channels))
        f = lambda s, t, b, v: ops.gat_attention(s, t, b, v, 0.2, ops.graph_arguments(orders, False))  # noqa: E731
        ref = lambda s, t, b, v: plain_gat(s, t, b, v, src, dst, n)  # noqa: E731
    assert_same(f, ref, tensors)


@pytest.mark.parametrize("family", FAMILIES)
def test_replicas_one_by_one_equal_folded_bitwise(family, monkeypatch):
    """When one replica fits FOLD_MAX_BYTES and all do not, the vmap rules call the op once per
    replica: the same numbers exactly."""
    from zoo.ops._compiled import rules

    case = make_inputs(family, heads=2, channels=3)
    stacked = _stack(case["tensors"], 3)
    dims = tuple(None if v is None else 0 for v in stacked.values())
    leaves = [v for v in stacked.values() if v is not None]

    def run():
        out, alpha = vmap(_fused(family, case), in_dims=dims)(*stacked.values())
        return [out, alpha, *torch.autograd.grad(out.square().sum() + alpha.sum(), leaves)]

    folded = run()
    # one replica's rows fit the cache budget, all three do not: the rules go one by one
    largest = max(v.numel() * v.element_size() for v in leaves) // 3
    monkeypatch.setattr(rules, "FOLD_MAX_BYTES", largest)
    monkeypatch.setattr(rules, "FOLD_ROW_MAX_BYTES", 0)  # (these rows are narrow: they would fold)
    one_by_one = run()
    for a, b in zip(folded, one_by_one):
        assert torch.equal(a, b)
    assert_same(vmap(_fused(family, case), in_dims=dims), vmap(reference(family, case), in_dims=dims), stacked)


def test_fold_rule_splits_replicas_only_when_one_replica_fits_the_cache_budget(monkeypatch):
    """Fold when all replicas fit (Cornell), one by one when only one does (Cora, 15 x 64 channels),
    fold again when not even one does (PubMed, 8 x 8 channels: nothing to gain from splitting);
    always fold off the CPU."""
    from zoo.ops._compiled import rules

    monkeypatch.setattr(rules, "FOLD_MAX_BYTES", 1000)
    r = 10
    values = lambda per_replica_floats: torch.zeros(r, per_replica_floats)  # noqa: E731  (float32)
    assert rules._fold_fits(values(20), 0, r)          # 800 B folded: fits
    assert not rules._fold_fits(values(200), 0, r)     # 800 B per replica fits, 8000 B folded does not
    assert rules._fold_fits(values(2000), 0, r)        # 8000 B per replica: no cache to win
    assert rules._fold_fits(torch.zeros(r, 200, device="meta"), 0, r)
    assert not rules._fold_fits(torch.zeros(200), None, r)  # unbatched values shared by r replicas


def _spy_kernel_calls(family, monkeypatch):
    """The list that each call of the family's C++ forward / backward appends ``(op, values' shape)`` to."""
    kernels = torch.ops.zoo_kernels
    seen = []
    for name in (f"{family}_forward", f"{family}_backward"):
        def spy(*args, _op=getattr(kernels, name), _name=name):
            values = args[3] if _name == "gat_forward" else args[5] if _name == "gat_backward" else \
                args[2] if _name == "gatv2_forward" else args[4]
            seen.append((_name, tuple(values.shape)))
            return _op(*args)
        monkeypatch.setattr(kernels, name, spy)
    return seen


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("budget", ["all_fit", "one_fits"])
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "dispatched"])
def test_all_replicas_run_in_one_call_with_replicas_first(family, budget, direct, monkeypatch):
    """Under vmap the C++ op runs once for all replicas on the stacked tensors as they are,
    replicas first, forward and backward — also when one replica's values fit the cache budget and
    all do not (before: one call per replica, with unbind / stack copies of every input and output;
    or replicas folded into the heads, a copy of every input).  Called directly (zoo/ops/_direct.py),
    the forward is not first called on the batched tensors."""
    from zoo.ops._compiled import rules
    from zoo.ops._direct import dispatched

    case = make_inputs(family, heads=2, channels=3)
    stacked = _stack(case["tensors"], 3)
    dims = tuple(None if v is None else 0 for v in stacked.values())
    leaves = [v for v in stacked.values() if v is not None]
    if budget == "one_fits":
        monkeypatch.setattr(rules, "FOLD_MAX_BYTES", stacked["values"][0].numel() * 8)
        monkeypatch.setattr(rules, "FOLD_ROW_MAX_BYTES", 0)  # (these rows are narrow: they would fold)
    seen = _spy_kernel_calls(family, monkeypatch)

    with contextlib.nullcontext() if direct else dispatched():
        out, alpha = vmap(_fused(family, case), in_dims=dims)(*stacked.values())
        torch.autograd.grad(out.square().sum() + alpha.sum(), leaves)
    physical = tuple(stacked["values"].shape)  # (3, N, H, C)
    # the forward: through the dispatcher once on the logical (batched) tensors, then once for all
    # replicas on the physical ones; the backward (recorded below vmap): once on the physical ones
    logical = [] if direct else [(f"{family}_forward", physical[1:])]
    assert seen == logical + [(f"{family}_forward", physical), (f"{family}_backward", physical)]


@pytest.mark.parametrize("family", FAMILIES)
def test_narrow_rows_fold_where_one_replica_fits_and_the_numbers_stay(family, monkeypatch):
    """One replica's values fit FOLD_MAX_BYTES and all do not, but a replica's row (heads x
    channels) is narrow (an output layer of a few classes): the replicas are folded into the heads,
    one call over the edges for all of them, forward and backward — with the numbers of the
    replica-by-replica call bitwise (each head is computed on its own either way)."""
    from zoo.ops._compiled import rules

    case = make_inputs(family, heads=1, channels=5)
    stacked = _stack(case["tensors"], 3)
    dims = tuple(None if v is None else 0 for v in stacked.values())
    leaves = [v for v in stacked.values() if v is not None]
    monkeypatch.setattr(rules, "FOLD_MAX_BYTES", stacked["values"][0].numel() * 8)  # one fits, three do not
    seen = _spy_kernel_calls(family, monkeypatch)

    def run():
        out, alpha = vmap(_fused(family, case), in_dims=dims)(*stacked.values())
        return [out, alpha, *torch.autograd.grad(out.square().sum() + alpha.sum(), leaves)]

    assert rules._row_bytes(stacked["values"].detach(), 0) == 5 * 8 <= rules.FOLD_ROW_MAX_BYTES
    folded = run()
    r, n, h, c = stacked["values"].shape
    assert seen[-2:] == [(f"{family}_forward", (n, r * h, c)), (f"{family}_backward", (n, r * h, c))]
    seen.clear()
    monkeypatch.setattr(rules, "FOLD_ROW_MAX_BYTES", 0)
    one_by_one = run()
    assert seen[-2:] == [(f"{family}_forward", (r, n, h, c)), (f"{family}_backward", (r, n, h, c))]
    for a, b in zip(folded, one_by_one):
        assert torch.equal(a, b)


@pytest.mark.parametrize("heads", [1, 2])
def test_a_tensor_passed_three_times_is_folded_once_and_the_numbers_stay(heads, monkeypatch):
    """GATv2 with shared weights under vmap, replicas folded into the heads: x_src, x_dst and values
    (one tensor) reach the op as one contiguous folded copy, forward and backward — and the outputs
    and the gradient of x (its three parts summed by autograd) are bitwise those of a fold per
    argument.  One head too: there the fold's reshape is a strided view, not a copy, and the op
    copied each of the three arguments itself (balance_table2 PubMed L = 20: a third of the epoch).
    Through the dispatcher, where the op takes three arguments (called directly it takes the one
    tensor once: test_a_shared_tensor_takes_one_node_with_autograds_bits)."""
    from zoo.ops._compiled import rules
    from zoo.ops._direct import dispatched

    monkeypatch.setattr(rules, "FOLD_MAX_BYTES", 0)  # fold whatever the size
    case = make_inputs("gatv2", heads=heads, channels=3)
    stacked = _stack(case["tensors"], 3)
    x, att = stacked["x_src"], stacked["att"]
    kernels = torch.ops.zoo_kernels
    seen = []
    for name in ("gatv2_forward", "gatv2_backward"):
        def spy(*args, _op=getattr(kernels, name), _at=2 if name == "gatv2_forward" else 4):
            three = args[_at - 2:_at + 1]
            if torch._C._functorch.is_batchedtensor(three[0]):  # the dispatcher's logical call
                return _op(*args)
            seen.append(len({t.data_ptr() for t in three}) if all(t.is_contiguous() for t in three) else "strided")
            return _op(*args)
        monkeypatch.setattr(kernels, name, spy)

    def run():
        with dispatched():
            out, alpha = vmap(lambda x, a: _fused("gatv2", case)(x, x, x, a))(x, att)
            return [out, alpha, *torch.autograd.grad(out.square().sum() + alpha.sum(), [x, att])]

    once = run()
    assert seen[-2:] == [1, 1]  # one contiguous storage for the three arguments
    monkeypatch.setattr(rules, "_folds", lambda ts, dims, b: [rules._fold(t, d, b) for t, d in zip(ts, dims)])
    seen.clear()
    each = run()
    assert seen[-2:] == ([3, 3] if heads > 1 else ["strided", "strided"])
    for a, b in zip(once, each):
        assert torch.equal(a, b)


def _shared_layouts(layout, monkeypatch):
    """The vmap rule's path for ``layout``: replicas folded into the heads, or replicas first."""
    from zoo.ops._compiled import rules

    monkeypatch.setattr(rules, "FOLD_MAX_BYTES", 0 if layout == "folded" else 1 << 40)


@pytest.mark.parametrize("layout", ["folded", "replicas_first"])
def test_a_shared_tensor_under_vmap_equals_plain(layout, monkeypatch):
    """GATv2 with shared weights under vmap (one tensor as x_src, x_dst and values, which the op's
    direct path takes once and whose gradient it sums itself): values and gradients equal the plain ops'."""
    _shared_layouts(layout, monkeypatch)
    case = make_inputs("gatv2", heads=2, channels=5)
    stacked = _stack(case["tensors"], 3)
    assert_same(vmap(lambda x, a: _fused("gatv2", case)(x, x, x, a)),
                vmap(lambda x, a: reference("gatv2", case)(x, x, x, a)), dict(x=stacked["x_src"], att=stacked["att"]))


@pytest.mark.parametrize("layout", ["folded", "replicas_first"])
@pytest.mark.parametrize("heads,channels", [(1, 64), (2, 8)])
def test_a_shared_tensor_takes_one_node_with_autograds_bits(layout, heads, channels, monkeypatch):
    """One tensor as x_src, x_dst and values under vmap: called directly, the op gets that one tensor for
    the three (one autograd node, whose backward returns one gradient: ``(d values + d x_dst) + d x_src``,
    added in place), and the outputs and gradients are bitwise those of the dispatched op, whose three
    inputs' gradients autograd sums (float32, so that another order of the sum shows); also bitwise those of
    three distinct tensors equal to it (copies), whose gradients autograd sums too."""
    from zoo.ops._direct import dispatched

    _shared_layouts(layout, monkeypatch)
    case = make_inputs("gatv2", heads=heads, channels=channels, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, case["n"], heads, channels, generator=g).requires_grad_()
    att = torch.randn(3, heads, channels, generator=g).requires_grad_()
    w = torch.randn(3, case["n"], heads, channels, generator=g)
    kernels = torch.ops.zoo_kernels
    one = []

    def spy(*args, _op=kernels.gatv2_forward):
        if args[0].dim() == 4 or args[0].shape[1] != heads:  # the physical call: replicas first, or folded
            one.append(args[0] is args[1] is args[2])
        return _op(*args)
    monkeypatch.setattr(kernels, "gatv2_forward", spy)

    def run(f):
        out, alpha = vmap(f)(x, att)
        return [out, alpha, *torch.autograd.grad((out * w).sum() + alpha.sum(), [x, att])]

    shared = run(lambda x, a: _fused("gatv2", case)(x, x, x, a))
    assert one == [True]
    with dispatched():
        through_autograd = run(lambda x, a: _fused("gatv2", case)(x, x, x, a))
    copies = run(lambda x, a: _fused("gatv2", case)(x * 1, x * 1, x * 1, a))
    assert one[1:] == [False, False]
    for a, b, c in zip(shared, through_autograd, copies):
        assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("layout", ["folded", "replicas_first"])
@pytest.mark.parametrize("heads,channels", [(1, 64), (2, 8)])
def test_a_shared_tensor_called_plainly_has_the_stacked_replicas_bits(layout, heads, channels, monkeypatch):
    """One tensor as x_src, x_dst and values outside vmap (one replica trained alone, or unstacked):
    outputs and gradients bitwise each replica's under vmap, the gradient of x summed in their order,
    ``(d values + d x_dst) + d x_src``.  Through the dispatcher autograd summed it in the op's output
    order, ``(d x_src + d x_dst) + d values`` (float32, so that the other order shows): a replica's
    numbers then depended on whether it was trained beside others."""
    from zoo.ops._direct import dispatched

    _shared_layouts(layout, monkeypatch)
    case = make_inputs("gatv2", heads=heads, channels=channels, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, case["n"], heads, channels, generator=g)
    att = torch.randn(3, heads, channels, generator=g)
    w = torch.randn(3, case["n"], heads, channels, generator=g)
    f = lambda x, a: _fused("gatv2", case)(x, x, x, a)

    def run(x, att, w, batched):
        x, att = x.clone().requires_grad_(), att.clone().requires_grad_()
        out, alpha = (vmap(f) if batched else f)(x, att)
        return [out, alpha, *torch.autograd.grad((out * w).sum() + alpha.sum(), [x, att])]

    stacked = run(x, att, w, batched=True)
    for r in range(3):
        for a, b in zip(run(x[r], att[r], w[r], batched=False), stacked):
            assert torch.equal(a, b[r])
    with dispatched():
        apart = [run(x[r], att[r], w[r], batched=False)[2] for r in range(3)]
    assert not all(torch.equal(a, stacked[2][r]) for r, a in enumerate(apart))  # (so that the old order shows)


@pytest.mark.parametrize("family", FAMILIES)
def test_equals_plain_under_nested_vmap(family):
    """vmap inside vmap: the outer replicas are merged into the inner replica dimension."""
    case = make_inputs(family, heads=2, channels=3)
    inner = _stack(case["tensors"], 2)
    nested = _stack(inner, 3, seed=6)
    dims = tuple(None if v is None else 0 for v in nested.values())
    assert_same(vmap(vmap(_fused(family, case), in_dims=dims), in_dims=dims),
                vmap(vmap(reference(family, case), in_dims=dims), in_dims=dims), nested)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("channels", [8, 64, 5])
def test_float32_equals_plain_to_float_rounding(family, channels):
    """The kernels' own exp (a polynomial GCC vectorizes) and the compile-time channel counts at
    float32: within float rounding of the plain ops (outputs, alpha and gradients)."""
    case = make_inputs(family, heads=2, channels=channels, dtype=torch.float32)
    assert_same(_fused(family, case), reference(family, case), case["tensors"], tol=dict(rtol=1e-4, atol=1e-4))


@pytest.mark.parametrize("slope", [SLOPE, 1.0])
def test_one_head_per_edge_scores_of_both_signs_and_tied_maxima_equal_plain(slope):
    """SAN's call: no node terms, the scores as the per-edge term, one head of 32 float channels (a
    compile-time width): scores of both signs (LeakyReLU's select), rows whose maximum is tied or
    comes first, last or in between (each head's row maximum), within float rounding of the plain ops."""
    case = make_inputs("gat", heads=1, channels=32, dtype=torch.float32)
    t = case["tensors"]
    with torch.no_grad():
        t["score_src"].zero_()
        t["score_dst"].zero_()
        bias = t["bias"]
        bias[::3] = 1.5  # ties of the maximum in the hub's row and elsewhere
        bias[1::7] = -bias[1::7].abs() - 0.5
    src, dst, n = case["src"], case["dst"], case["n"]

    def ref(score_src, score_dst, bias, values):
        z = score_src.index_select(0, src) + score_dst.index_select(0, dst) + bias
        alpha = segment_softmax(F.leaky_relu(z, slope), dst, n)
        return segment_sum(alpha.unsqueeze(-1) * values.index_select(0, src), dst, n), alpha

    graph = ops.graph_arguments(case["orders"], False)
    assert_same(lambda s_, t_, b_, v_: ops.gat_attention(s_, t_, b_, v_, slope, graph), ref, t,
                tol=dict(rtol=1e-4, atol=1e-4))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("keep", [False, True])
def test_float32_heads_of_8_channels_each_bitwise_as_alone(family, keep):
    """Float rows of 8 channels go eight heads at a time on an AVX2 CPU (scores, and the backward's
    <g, x> per edge), the heads past the last full block and a single head one by one: every head
    of a 9-head call is bitwise the same head called alone (values, alpha, every gradient)."""
    heads = 9
    case = make_inputs(family, heads=heads, channels=8, dtype=torch.float32)
    mask = _keep_mask(case, heads).float() if keep else None
    graph = ops.graph_arguments(case["orders"], False)

    g = torch.Generator().manual_seed(5)
    w_out = torch.randn(case["n"], heads, 8, generator=g)  # the loss's weights on out and alpha
    w_alpha = torch.randn(case["src"].numel(), heads, generator=g)

    def run(tensors, k, h=slice(None)):
        args = list(tensors.values())
        if family == "gatv2":
            out, alpha = ops.gatv2_attention(*args, SLOPE, graph, keep=k)
        else:
            out, alpha = ops.gat_attention(*args, SLOPE, graph, keep=k)
        loss = (out * w_out[:, h]).sum() + (alpha * w_alpha[:, h]).sum()
        return out, alpha, torch.autograd.grad(loss, args)

    def head(name, t, h):  # att is (H, C); every other tensor has the heads second
        return t[h:h + 1] if name == "att" else t[:, h:h + 1]

    out, alpha, grads = run(case["tensors"], mask)
    for h in range(heads):
        alone = {k: head(k, v, h).detach().requires_grad_() for k, v in case["tensors"].items()}
        out_h, alpha_h, grads_h = run(alone, None if mask is None else mask[:, h:h + 1].contiguous(), slice(h, h + 1))
        assert torch.equal(out[:, h:h + 1], out_h) and torch.equal(alpha[:, h:h + 1], alpha_h), h
        for name, g_all, g_h in zip(alone, grads, grads_h):
            assert torch.equal(head(name, g_all, h), g_h), (h, name)


def _keep_mask(case, heads, p=0.4, seed=3, lead=()):
    """A scaled keep mask over the case's edges (0 or 1 / (1 - p)), as attention dropout draws it."""
    g = torch.Generator().manual_seed(seed)
    e = case["src"].numel()
    return (torch.rand(*lead, e, heads, generator=g, dtype=torch.float64) >= p).double() / (1 - p)


def _with_keep(family, case, keep, plain):
    """The family's op (``plain``: the plain ops with alpha * keep as the weights) with a keep mask."""
    from tests.ops.compiled.cases import SLOPE

    src, dst, n = case["src"], case["dst"], case["n"]
    graph = ops.graph_arguments(case["orders"], triton=False)

    def ref_gatv2(x_src, x_dst, values, att, k):
        e = (torch.nn.functional.leaky_relu(x_src.index_select(0, src) + x_dst.index_select(0, dst), SLOPE)
             * att).sum(-1)
        alpha = segment_softmax(e, dst, n)
        return segment_sum((alpha * k).unsqueeze(-1) * values.index_select(0, src), dst, n), alpha

    def ref_gat(s, t, b, values, k):
        z = s.index_select(0, src) + t.index_select(0, dst) + b
        alpha = segment_softmax(torch.nn.functional.leaky_relu(z, SLOPE), dst, n)
        return segment_sum((alpha * k).unsqueeze(-1) * values.index_select(0, src), dst, n), alpha

    if family == "gatv2":
        if plain:
            return lambda x_src, x_dst, values, att: ref_gatv2(x_src, x_dst, values, att, keep)
        return lambda x_src, x_dst, values, att: ops.gatv2_attention(x_src, x_dst, values, att, SLOPE, graph, keep)
    if plain:
        return lambda s, t, b, values: ref_gat(s, t, b, values, keep)
    return lambda s, t, b, values: ops.gat_attention(s, t, b, values, SLOPE, graph, keep)



@pytest.mark.parametrize("family", FAMILIES)
def test_a_keep_mask_weights_the_messages_and_alpha_is_before_it(family):
    """Attention dropout inside the op: out = sum alpha k x, alpha before the mask; the gradients
    (through out and alpha) those of the plain ops with the same mask, at float64 to 1e-10."""
    case = make_inputs(family, heads=3, channels=4)
    keep = _keep_mask(case, 3)
    assert_same(_with_keep(family, case, keep, False), _with_keep(family, case, keep, True), case["tensors"])
    ones = torch.ones_like(keep)
    no_mask = _with_keep(family, case, ones, False)(*case["tensors"].values())
    plain = _fused(family, case)(*case["tensors"].values())
    for a, b in zip(no_mask, plain):  # an all-ones mask is no mask, bitwise
        assert torch.equal(a, b)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fold", [False, True])
def test_a_keep_mask_under_vmap_is_each_replicas_own(family, fold, monkeypatch):
    """Stacked replicas with their own masks (replicas first, or folded into the heads when one
    replica's values exceed the cache rule): each replica bitwise as alone."""
    from zoo.ops._compiled import rules

    if fold:
        monkeypatch.setattr(rules, "FOLD_MAX_BYTES", 0)
    case = make_inputs(family, heads=2, channels=3)
    stacked = _stack(case["tensors"], 3)
    keep = _keep_mask(case, 2, lead=(3,))
    dims = tuple(None if v is None else 0 for v in stacked.values())
    graph = ops.graph_arguments(case["orders"], triton=False)
    if family == "gatv2":
        op = lambda k, x_src, x_dst, values, att: ops.gatv2_attention(x_src, x_dst, values, att, 0.2, graph, k)  # noqa
    else:
        op = lambda k, s, t, b, values: ops.gat_attention(s, t, b, values, 0.2, graph, k)  # noqa: E731

    def run(fn, k, tensors):
        out, alpha = fn(k, *tensors.values())
        grads = torch.autograd.grad(out.square().sum() + alpha.sum(), [v for v in tensors.values() if v is not None])
        return [out, alpha, *grads]

    together = run(vmap(op, in_dims=(0, *dims)), keep, stacked)
    for r in range(3):
        alone = run(op, keep[r], {k: None if v is None else v[r].detach().requires_grad_() for k, v in stacked.items()})
        for a, b in zip(alone, together):
            assert torch.equal(a, b[r])


@pytest.mark.parametrize("family", FAMILIES)
def test_opcheck_with_a_keep_mask(family):
    case = make_inputs(family, heads=2, channels=3)
    t = {k: None if v is None else v.detach() for k, v in case["tensors"].items()}
    graph = ops.graph_arguments(case["orders"], triton=False)
    keep = _keep_mask(case, 2)
    if family == "gatv2":
        fixed = (t["x_src"], t["x_dst"], t["values"], t["att"])
        fwd, bwd = torch.ops.zoo_kernels.gatv2_forward, torch.ops.zoo_kernels.gatv2_backward
    else:
        fixed = (t["score_src"], t["score_dst"], t["bias"], t["values"])
        fwd, bwd = torch.ops.zoo_kernels.gat_forward, torch.ops.zoo_kernels.gat_backward
    torch.library.opcheck(fwd, (*fixed, *graph, 0.2, False, keep))
    out, alpha, lse = fwd(*fixed, *graph, 0.2, False, keep)
    torch.library.opcheck(bwd, (torch.randn_like(out), torch.randn_like(alpha), *fixed, out, lse, *graph, 0.2, False,
                                keep))


def test_a_strided_tensor_passed_three_times_is_copied_once_with_the_same_bits(monkeypatch):
    """GATv2 with shared weights passes one tensor as x_src, x_dst and values; after the first layer's
    CSR product it is ``(N, R, H, C)`` (replica dim 1).  The op gets one contiguous replica-first copy
    for all three, forward and backward (before: the op copied each argument, and again in the
    backward), and the outputs and gradients are bitwise those of three strided views.  Through the
    dispatcher, where the op takes three arguments (called directly it takes the one tensor once)."""
    from zoo.ops._compiled import rules
    from zoo.ops._direct import dispatched

    case = make_inputs("gatv2", heads=2, channels=4, dtype=torch.float32)
    att = _stack({"att": case["tensors"]["att"]}, 3)["att"]
    x = torch.randn(case["n"], 3, 2, 4, generator=torch.Generator().manual_seed(2)).requires_grad_()
    f = vmap(lambda x, a: _fused("gatv2", case)(x, x, x, a), in_dims=(1, 0))
    kernels = torch.ops.zoo_kernels
    seen = []
    for name in ("gatv2_forward", "gatv2_backward"):
        def spy(*args, _op=getattr(kernels, name), _name=name):
            first = 0 if _name == "gatv2_forward" else 2
            if args[first].dim() == 4:  # the physical call (the logical one sees (N, H, C))
                seen.append((_name, [args[first + i].is_contiguous() for i in range(3)],
                             len({args[first + i].data_ptr() for i in range(3)})))
            return _op(*args)
        monkeypatch.setattr(kernels, name, spy)

    def run():
        with dispatched():
            out, alpha = f(x, att)
            return (out, alpha, *torch.autograd.grad(out.square().sum() + alpha.sum(), (x, att)))

    now = run()
    assert seen == [("gatv2_forward", [True] * 3, 1), ("gatv2_backward", [True] * 3, 1)]
    monkeypatch.setattr(rules, "_firsts", lambda ts, dims, b, merge: [rules._first(t, d, b, merge)
                                                                       for t, d in zip(ts, dims)])
    seen.clear()
    before = run()
    assert seen == [("gatv2_forward", [False] * 3, 1), ("gatv2_backward", [False] * 3, 1)]
    for a, b in zip(now, before):
        assert torch.equal(a, b)


def _case_on(edge_index, n, heads, channels, dtype, seed=0):
    """GATv2 inputs like :func:`make_inputs`, on a given graph."""
    from zoo.ops.aggregate import edge_orders

    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_()
    tensors = dict(x_src=rand(n, heads, channels), x_dst=rand(n, heads, channels), values=rand(n, heads, channels),
                   att=rand(heads, channels))
    return dict(tensors=tensors, src=edge_index[0], dst=edge_index[1], n=n,
                orders=edge_orders(edge_index[0], edge_index[1], n))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", ["fewer_edges_than_prefetched", "shuffled_8x8"])
def test_gatv2_rows_read_ahead(shape, dtype):
    """The passes read the rows of a slot a few edges on ahead of time: a graph with fewer edges than
    that distance, and a shuffled random graph (sources in no order, 8 heads x 8 channels: the
    eight-wide path), in both dtypes, still equal the plain ops."""
    g = torch.Generator().manual_seed(3)
    if shape == "fewer_edges_than_prefetched":
        edge_index, n, heads, channels = torch.tensor([[0, 2, 1], [1, 1, 2]]), 3, 1, 5
    else:
        n, e, heads, channels = 60, 400, 8, 8
        edge_index = torch.randint(0, n, (2, e), generator=g)[:, torch.randperm(e, generator=g)]
    case = _case_on(edge_index, n, heads, channels, dtype)
    tol = dict(rtol=0, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    assert_same(_fused("gatv2", case), reference("gatv2", case), case["tensors"], tol=tol)


def _sorted_graph(n, e, seed):
    """A random graph with its edges in destination order (as every graph built here: ``perm`` is the
    identity), multi-edges, self-loops and isolated nodes among them."""
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n - 2, (2, e), generator=g)  # the last two nodes isolated
    src = torch.cat([src, torch.arange(n - 2), src[:5]])
    dst = torch.cat([dst, torch.arange(n - 2), dst[:5]])
    order = torch.argsort(dst, stable=True)
    return torch.stack([src[order], dst[order]])


def _backward_both_ways(edge_index, n, heads, channels, value_channels, dtype, keep, grad_alpha, replicas):
    """The GATv2 backward at one thread and at two, and whether each took the one pass."""
    from zoo.ops.aggregate import edge_orders

    graph = ops.graph_arguments(edge_orders(edge_index[0], edge_index[1], n), triton=False)
    g = torch.Generator().manual_seed(1)
    r = lambda *shape: torch.randn(replicas, *shape, generator=g, dtype=torch.float64).to(dtype)
    e = edge_index.size(1)
    xs, xd, att = r(n, heads, channels), r(n, heads, channels), r(heads, channels)
    values = xs if value_channels == channels else r(n, heads, value_channels)
    mask = (torch.rand(replicas, e, heads, generator=g) > 0.3).to(dtype) / 0.7 if keep else None
    kernels = torch.ops.zoo_kernels
    out, _, lse = kernels.gatv2_forward(xs, xd, values, att, *graph, SLOPE, True, mask)
    grad_out, ga = r(n, heads, value_channels), r(e, heads) if grad_alpha else None
    threads = torch.get_num_threads()
    runs = []
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            runs.append((kernels.gatv2_one_pass_backward(*graph),
                         kernels.gatv2_backward(grad_out, ga, xs, xd, values, att, out, lse, *graph, SLOPE, True,
                                                mask)))
    finally:
        torch.set_num_threads(threads)
    return runs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("heads,channels,value_channels", [(1, 64, 64), (8, 8, 8), (1, 5, 5), (2, 4, 7)])
@pytest.mark.parametrize("extras", ["plain", "keep_and_grad_alpha"])
def test_gatv2_one_pass_backward_equals_the_two_passes_bitwise(heads, channels, value_channels, dtype, extras):
    """On one thread, a graph in destination order takes the one-pass backward (the source rows added
    edge by edge in pass A) and gives the two passes' bits (taken on two threads), every output; the
    widths cover the compile-time ones (64, the eight-wide 8 x 8 heads) and run-time ones."""
    extra = extras != "plain"
    (one, got), (two, want) = _backward_both_ways(_sorted_graph(70, 900, 0), 70, heads, channels, value_channels,
                                                   dtype, extra, extra, replicas=3)
    assert one and not two
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_gatv2_one_pass_backward_only_where_each_sources_order_is_the_same():
    """Edges not in destination order (``perm`` not the identity): the two passes, on one thread too."""
    edge_index = _sorted_graph(40, 300, 1)
    shuffled = edge_index[:, torch.randperm(edge_index.size(1), generator=torch.Generator().manual_seed(0))]
    (one, got), (_, want) = _backward_both_ways(shuffled, 40, 1, 8, 8, torch.float32, False, False, replicas=2)
    assert not one
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    (one, _), _ = _backward_both_ways(edge_index, 40, 1, 8, 8, torch.float32, False, False, replicas=2)
    assert one


def test_gatv2_backward_reads_the_saved_log_alpha_not_the_scores():
    """The GATv2 forward's third output is each edge's log alpha (original edge order), and the backward
    takes its alpha from it instead of recomputing the scores: given the log alpha of another ``att``,
    d values is that alpha's weighted sum of the output gradients (before: the third output was the
    per-destination lse and the backward recomputed the scores from ``att``)."""
    case = make_inputs("gatv2", heads=2, channels=3)
    t = {k: v.detach() for k, v in case["tensors"].items()}
    graph = ops.graph_arguments(case["orders"], triton=False)
    kernels = torch.ops.zoo_kernels
    out, alpha, saved = kernels.gatv2_forward(t["x_src"], t["x_dst"], t["values"], t["att"], *graph, SLOPE)
    assert saved.shape == alpha.shape
    torch.testing.assert_close(saved.exp(), alpha, rtol=1e-12, atol=0)
    _, other, other_saved = kernels.gatv2_forward(t["x_src"], t["x_dst"], t["values"], -t["att"], *graph, SLOPE)
    grad_out = torch.randn_like(out)
    d_val = kernels.gatv2_backward(grad_out, None, t["x_src"], t["x_dst"], t["values"], t["att"], out, other_saved,
                                   *graph, SLOPE)[2]
    src, dst = case["src"], case["dst"]
    expected = torch.zeros_like(d_val).index_add_(0, src, other.unsqueeze(-1) * grad_out[dst])
    torch.testing.assert_close(d_val, expected, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(other, alpha)


def _with_isolated_and_early_senders(edge_index, n):
    """``edge_index`` on nodes ``0 .. n-1`` plus an isolated node and a node that only sends to node 0
    (its row is done at its own index, not at its last destination's), sorted by destination."""
    extra = torch.tensor([[n + 1], [0]])
    edges = torch.cat([edge_index, extra], 1)
    return edges[:, torch.argsort(edges[1] * (n + 2) + edges[0], stable=True)], n + 2


@pytest.mark.parametrize("threads", [1, 2], ids=["one_pass", "two_passes"])
@pytest.mark.parametrize("heads,channels", [(1, 64), (8, 8), (2, 5)])
@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("extras", ["plain", "keep_and_grad_alpha"])
def test_gatv2_backward_summed_is_the_three_gradients_in_autograds_order(threads, heads, channels, outer, extras):
    """``gatv2_backward_summed`` (one tensor x as x_src, x_dst and values) returns d att and d x =
    (d values + d x_dst) + d x_src of ``gatv2_backward``, bitwise (float32), each row summed as its
    three parts are done (the one pass, on one thread) or after the passes (two threads); the graph has
    an isolated node and a node whose last destination comes before it."""
    from zoo.ops.aggregate import edge_orders

    edge_index, n = _with_isolated_and_early_senders(_sorted_graph(70, 900, 0), 70)
    graph = ops.graph_arguments(edge_orders(edge_index[0], edge_index[1], n), triton=False)
    g = torch.Generator().manual_seed(1)
    r = lambda *shape: torch.randn(3, *shape, generator=g)
    e = edge_index.size(1)
    x, att, grad_out = r(n, heads, channels), r(heads, channels), r(n, heads, channels)
    extra = extras != "plain"
    mask = (torch.rand(3, e, heads, generator=g) > 0.3).float() / 0.7 if extra else None
    ga = r(e, heads) if extra else None
    kernels = torch.ops.zoo_kernels
    out, _, saved = kernels.gatv2_forward(x, x, x, att, *graph, SLOPE, outer, mask)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        assert kernels.gatv2_one_pass_backward(*graph) == (threads == 1)
        d_x, d_att = kernels.gatv2_backward_summed(grad_out, ga, x, att, out, saved, *graph, SLOPE, outer, mask)
        d_src, d_dst, d_val, d_att3 = kernels.gatv2_backward(grad_out, ga, x, x, x, att, out, saved, *graph, SLOPE,
                                                              outer, mask)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(d_x, (d_val + d_dst) + d_src) and torch.equal(d_att, d_att3)
    assert not torch.equal(d_x, (d_src + d_dst) + d_val)  # (so that another order would show)


def test_opcheck_gatv2_backward_summed():
    case = make_inputs("gatv2", heads=2, channels=3)
    t = {k: v.detach() for k, v in case["tensors"].items()}
    graph = ops.graph_arguments(case["orders"], triton=False)
    kernels = torch.ops.zoo_kernels
    out, alpha, saved = kernels.gatv2_forward(t["x_src"], t["x_src"], t["x_src"], t["att"], *graph, SLOPE)
    torch.library.opcheck(kernels.gatv2_backward_summed, (torch.randn_like(out), torch.randn_like(alpha), t["x_src"],
                                                          t["att"], out, saved, *graph, SLOPE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("channels", [64, 5])
@pytest.mark.parametrize("keep", [False, True])
def test_gatv2_forward_of_one_head_is_bitwise_each_head_of_two(channels, dtype, keep):
    """One head takes the forward compiled for one head (its loops over heads folded away): every
    output (values, alpha, the per-edge log alpha the backward reads) is bitwise the same head of a
    two-head call through the general path, replicas first, with and without a keep mask; at a
    compile-time width (64, the balance paper's) and a run-time one (5: the output layers)."""
    from zoo.ops.aggregate import edge_orders

    n, heads, replicas = 70, 2, 3
    edge_index = _sorted_graph(n, 900, 2)
    e = edge_index.size(1)
    graph = ops.graph_arguments(edge_orders(edge_index[0], edge_index[1], n), triton=False)
    g = torch.Generator().manual_seed(4)
    r = lambda *shape: torch.randn(replicas, *shape, generator=g, dtype=torch.float64).to(dtype)
    xs, xd, values, att = r(n, heads, channels), r(n, heads, channels), r(n, heads, channels), r(heads, channels)
    mask = (torch.rand(replicas, e, heads, generator=g) > 0.3).to(dtype) / 0.7 if keep else None
    kernels = torch.ops.zoo_kernels
    both = kernels.gatv2_forward(xs, xd, values, att, *graph, SLOPE, True, mask)
    for h in range(heads):
        one = lambda t: t[..., h:h + 1, :].contiguous()  # noqa: E731
        alone = kernels.gatv2_forward(one(xs), one(xd), one(values), att[:, h:h + 1].contiguous(), *graph, SLOPE,
                                      True, None if mask is None else mask[..., h:h + 1].contiguous())
        for a, b in zip(alone, (both[0][..., h:h + 1, :], both[1][..., h:h + 1], both[2][..., h:h + 1])):
            assert torch.equal(a, b), h


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("channels", [32, 5])
@pytest.mark.parametrize("keep", [False, True])
def test_gat_forward_of_one_head_is_bitwise_each_head_of_two(channels, dtype, keep):
    """GAT's one head (SAN's call: zero node terms, the scores as the per-edge term) takes the forward
    compiled for one head: its values, alpha and log-sum-exp are bitwise the same head of a two-head
    call through the general path, replicas first, with and without a keep mask; at a compile-time
    width (32, SAN's) and a run-time one (5)."""
    from zoo.ops.aggregate import edge_orders

    n, heads, replicas = 70, 2, 3
    edge_index = _sorted_graph(n, 900, 2)
    e = edge_index.size(1)
    graph = ops.graph_arguments(edge_orders(edge_index[0], edge_index[1], n), triton=False)
    g = torch.Generator().manual_seed(5)
    r = lambda *shape: torch.randn(replicas, *shape, generator=g, dtype=torch.float64).to(dtype)  # noqa: E731
    s, t, bias, values = r(n, heads), r(n, heads), r(e, heads), r(n, heads, channels)
    mask = (torch.rand(replicas, e, heads, generator=g) > 0.3).to(dtype) / 0.7 if keep else None
    kernels = torch.ops.zoo_kernels
    for node_terms in (True, False):
        if not node_terms:
            s, t = torch.zeros_like(s), torch.zeros_like(t)
        both = kernels.gat_forward(s, t, bias, values, *graph, SLOPE, True, mask)
        for h in range(heads):
            one = lambda x: x[..., h:h + 1].contiguous()  # noqa: E731
            alone = kernels.gat_forward(one(s), one(t), one(bias), values[..., h:h + 1, :].contiguous(), *graph,
                                        SLOPE, True, None if mask is None else one(mask))
            for a, b in zip(alone, (both[0][..., h:h + 1, :], both[1][..., h:h + 1], both[2][..., h:h + 1])):
                assert torch.equal(a, b), (h, node_terms)
