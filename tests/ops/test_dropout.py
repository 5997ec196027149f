"""Dropout on constant, mostly-zero inputs (bag-of-words features) draws its mask at the non-zeros
only: the same distribution as ``F.dropout`` at a fraction of the random draws."""
import pytest
import torch
from torch.func import vmap

from zoo.ops.dropout import ReplicaRandomness, dropout, keep_draws, replica_randomness

P = 0.5


def _bag_of_words(rows: int = 300, cols: int = 400, density: float = 0.02, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(rows, cols, generator=g) < density).double()
    return x * torch.rand(rows, cols, generator=g, dtype=torch.float64)  # varied non-zero values


def _alone(x: torch.Tensor, seed: int) -> torch.Tensor:
    with replica_randomness(ReplicaRandomness([seed]), torch.tensor(0)):
        return dropout(x, P, training=True)


def test_sparse_input_dropout_draws_one_number_per_nonzero():
    """Fails on the dense mask (one draw per entry, 120 k here instead of ~2.4 k): the replica's
    stream must hold exactly the non-zeros' Bernoulli draws, in the non-zeros' order."""
    x = _bag_of_words()
    assert x.numel() >= 2 ** 16  # zoo.ops.dropout.SPARSE_DROPOUT_MIN_ELEMENTS
    rng = ReplicaRandomness([5])
    nz = x.reshape(-1).nonzero().view(-1)
    keep = keep_draws((nz.numel(),), 1 - P, rng.generator(0, x.device), x.dtype, x.device)
    expected = torch.zeros(x.numel(), dtype=x.dtype)
    expected[nz] = x.reshape(-1)[nz] * keep / (1 - P)
    assert torch.equal(_alone(x, 5), expected.view_as(x))


@pytest.mark.parametrize("replicated", [False, True], ids=["global-stream", "replica-stream"])
def test_sparse_input_dropout_has_dropouts_distribution(replicated):
    x = _bag_of_words()
    drops = []
    for seed in range(20):
        if replicated:
            drops.append(_alone(x, seed))
        else:
            torch.manual_seed(seed)
            drops.append(dropout(x, P, training=True))
    for d in drops:
        kept = d != 0
        assert not kept[x == 0].any()  # a zero stays zero
        assert torch.equal(d[kept], x[kept] / (1 - P))  # a kept entry is scaled as F.dropout
    kept_fraction = torch.stack([(d != 0).sum() for d in drops]).double().sum() / (20 * (x != 0).sum())
    assert abs(float(kept_fraction) - (1 - P)) < 0.02  # ~48 k Bernoulli(0.5) draws: sd 0.0023
    assert not torch.equal(drops[0], drops[1])


def test_stacked_replicas_draw_what_each_draws_alone():
    x, seeds = _bag_of_words(), [3, 11, 4]
    rng = ReplicaRandomness(seeds)

    def one(token):
        with replica_randomness(rng, token):
            return dropout(x, P, training=True)

    stacked = vmap(one, randomness="different")(torch.arange(len(seeds)))
    for r, seed in enumerate(seeds):
        assert torch.equal(stacked[r], _alone(x, seed))


@pytest.mark.parametrize("case", ["dense", "small", "needs-grad"])
def test_other_inputs_keep_the_full_mask(case):
    x = _bag_of_words(density=0.6) if case == "dense" else _bag_of_words(rows=20, cols=30)
    if case == "needs-grad":
        x = _bag_of_words().requires_grad_(True)
    rng = ReplicaRandomness([2])
    mask = ReplicaRandomness([2]).mask(0, x.detach(), P)
    with replica_randomness(rng, torch.tensor(0)):
        out = dropout(x, P, training=True)
    assert torch.equal(out.detach(), x.detach() * mask)


def test_eval_and_zero_rate_return_the_input():
    x = _bag_of_words()
    assert dropout(x, P, training=False) is x
    assert dropout(x, 0.0, training=True) is x


def test_the_dropped_input_reaches_the_first_layer_as_csr_without_a_conversion(monkeypatch):
    """linear() on a dropped bag-of-words input uses the CSR form dropout handed over (the input's
    structure, the dropped values; before, each epoch's fresh tensor was converted: 40 % of a
    2-layer GCN's epoch on Cora) and equals the dense product."""
    import zoo.ops.sparse_linear as sl

    x = _bag_of_words(rows=1100, cols=1000, density=0.01)
    assert x.numel() >= sl.SPARSE_MIN_ELEMENTS
    w = torch.randn(16, 1000, dtype=torch.float64, requires_grad=True)
    for replicated in (False, True):
        if replicated:
            with replica_randomness(ReplicaRandomness([4]), torch.tensor(0)):
                dropped = dropout(x, P, training=True)
        else:
            torch.manual_seed(0)
            dropped = dropout(x, P, training=True)

        def no_conversion(t):
            raise AssertionError("the dropped input was converted to CSR")

        monkeypatch.setattr(sl._SPARSE, "_derive", no_conversion)
        out = sl.linear(dropped, w)
        monkeypatch.undo()
        (g,) = torch.autograd.grad(out.square().sum(), w)
        ref = torch.nn.functional.linear(dropped, w)
        (g_ref,) = torch.autograd.grad(ref.square().sum(), w)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(g, g_ref, rtol=1e-12, atol=1e-12)


def test_san_encoder_equals_its_modules():
    import zoo

    x = _bag_of_words(rows=1100, cols=1000, density=0.01).float()
    model = zoo.build("san_pre_ln", in_dim=1000, out_dim=3, hidden_dim=8, num_layers=1, input_dropout=0.5).double()
    x = x.double()
    for training in (False, True):
        model.train(training)
        torch.manual_seed(1)
        got = model.encode(None, x)
        torch.manual_seed(1)
        want = model.encoder(dropout(x, 0.5, training))
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)



def _first_layer_alone(x, w, promised):
    from zoo.ops.dropout import to_linear_only
    from zoo.ops.sparse_linear import linear

    with replica_randomness(ReplicaRandomness([6]), torch.tensor(0)):
        with to_linear_only(promised):
            dropped = dropout(x, P, training=True)
        out = linear(dropped, w)
    return [out, *torch.autograd.grad(out.square().sum(), w)]


def test_one_replicas_dropped_input_read_by_linear_alone_is_written_only_where_linear_needs_it(monkeypatch):
    """Under :func:`to_linear_only` one replica's dropped bag-of-words input is not written densely where
    ``linear`` multiplies its CSR form (Coauthor CS: 125 M entries zeroed every epoch), and is written
    (once, by ``linear``) where the dense product runs; the numbers are the written input's either way."""
    import zoo.ops.sparse_linear as sl
    from zoo.ops.sparse_input import SparseInput

    x = _bag_of_words(rows=1100, cols=1000, density=0.01)
    w = torch.randn(16, 1000, dtype=torch.float64, requires_grad=True)
    writes = []
    real = SparseInput._write_one
    monkeypatch.setattr(SparseInput, "_write_one", lambda self, *a: writes.append(1) or real(self, *a))
    want = _first_layer_alone(x, w, promised=False)
    assert len(writes) == 1
    got = _first_layer_alone(x, w, promised=True)
    assert len(writes) == 1  # not written
    monkeypatch.setattr(sl, "_sparse_parts", lambda *a: None)
    dense = _first_layer_alone(x, w, promised=True)
    assert len(writes) == 2  # written by linear, for the dense product
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    torch.testing.assert_close(dense, want, rtol=1e-12, atol=1e-12)


def test_san_encoder_leaves_its_dropped_input_unwritten(monkeypatch):
    """SAN's encoder reads its dropped input through ``linear`` alone, so it promises that (fails when
    the dropped copy is written densely)."""
    import zoo
    from zoo.ops.sparse_input import SparseInput

    x = _bag_of_words(rows=1100, cols=1000, density=0.01).float()
    model = zoo.build("san_post_ln", in_dim=1000, out_dim=3, hidden_dim=8, num_layers=1, input_dropout=0.5)
    monkeypatch.setattr(SparseInput, "_write_one", lambda *a: pytest.fail("the dropped input was written"))
    model.train()
    with replica_randomness(ReplicaRandomness([1]), torch.tensor(0)):
        model.encode(None, x).sum().backward()
    assert model.encoder[0].weight.grad is not None


@pytest.mark.parametrize("q", [0.3, 0.999])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_keep_draws_are_bernoulli_q_in_every_dtype(dtype, q):
    """Below float32 the uniforms are drawn in float32: ``torch.rand`` in bfloat16 (a grid of 2^-8)
    compared with q = 0.999 keeps 32 standard errors of these 1 M draws too many."""
    n = 2 ** 20
    keep = keep_draws((n,), q, torch.Generator().manual_seed(0), dtype, torch.device("cpu"))
    assert keep.dtype == dtype and keep.shape == (n,)
    assert set(keep.unique().tolist()) == {0.0, 1.0}
    assert abs(float(keep.double().mean()) - q) < 4 * (q * (1 - q) / n) ** 0.5
    again = keep_draws((n,), q, torch.Generator().manual_seed(0), dtype, torch.device("cpu"))
    assert torch.equal(keep, again)  # the generator alone decides the draws
