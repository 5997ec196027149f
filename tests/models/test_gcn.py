"""GCN in float64 equals PyG's GCNConv (the balance paper's Table 7 GCN runs in float64)."""
from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import awkward_graph


def test_gcn_float64_matches_pyg_gcnconv():
    from torch_geometric.nn import GCNConv

    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    model = zoo.build("gcn", in_dim=6, out_dim=4, num_layers=1).double()
    ref = GCNConv(6, 4, bias=False).double()
    with torch.no_grad():
        ref.lin.weight.copy_(model.layers[0].lin.weight)
    # A float32 forward on the same graph first: its cached coefficients must not be reused.
    model.float()(edge_index, x.float())
    model.double()
    torch.testing.assert_close(model(edge_index, x), ref(x, edge_index), atol=1e-12, rtol=1e-12)


def _aten_ops(fn):
    """The aten ops ``fn`` dispatches (names without overloads), and its result."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Record():
        out = fn()
    return seen, out


def _stacked_step(models, edge_index, x):
    """Outputs and parameter gradients of the models stacked under vmap (as the trainer runs them)."""
    from torch.func import functional_call, stack_module_state, vmap

    params, buffers = stack_module_state(models)
    out = vmap(lambda p, b: functional_call(models[0], (p, b), (edge_index, x)))(params, buffers)
    grads = torch.autograd.grad(out.square().sum(), list(params.values()))
    return out, grads


@pytest.mark.parametrize("kwargs", [{}, {"bias": True}, {"residual": "linear"}, {"classifier": "linear",
                                                                                  "classifier_input": "activated"}])
def test_hidden_relus_inside_the_propagation_keep_the_bits(kwargs):
    """A GCN's hidden ReLUs run inside its CSR products (no separate ReLU op, forward or backward)
    where nothing comes between the propagation and the ReLU; the outputs and gradients are bitwise
    those of the model's own ``nn.ReLU`` after the layer (forced here by a hook on it), stacked
    under vmap and alone; with a bias or a residual between them the ReLU stays separate."""
    from tests.conftest import seeded_double_models

    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    models = seeded_double_models("gcn", seeds=(0, 1, 2), **kwargs)
    ops, (out, grads) = _aten_ops(lambda: _stacked_step(models, edge_index, x))
    fused = not kwargs.get("bias") and "residual" not in kwargs
    assert fused == ("relu" not in ops and "threshold_backward" not in ops), sorted(set(ops))
    handle = models[0].act.register_forward_hook(lambda *a: None)  # the activation must be seen: no fusion
    try:
        ref_ops, (ref_out, ref_grads) = _aten_ops(lambda: _stacked_step(models, edge_index, x))
    finally:
        handle.remove()
    assert "relu" in ref_ops
    assert torch.equal(out, ref_out)
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads))
    alone = models[1](edge_index, x)
    torch.testing.assert_close(alone, out[1], rtol=0, atol=1e-12)  # (bmm under vmap, mm alone)
