r"""Compiled fused graph attention: score, softmax and aggregation in one pass per destination.

For every edge ``u -> v`` and head ``h`` (under vmap, of every replica: the C++ ops take the
stacked tensors replicas first, the Triton ops fold the replicas into the heads):

.. math::
    e^{\text{GATv2}}_{uv,h} = \sum_c a_{hc}\,\mathrm{LeakyReLU}(x^s_{u,hc} + x^t_{v,hc}),\qquad
    e^{\text{GAT}}_{uv,h} = \mathrm{LeakyReLU}(s_{u,h} + t_{v,h} + b_{uv,h}),

    \alpha_{uv,h} = \operatorname{softmax}_{u \in \mathcal N(v)} e_{uv,h},\qquad
    h'_{v,h} = \sum_{u \in \mathcal N(v)} \alpha_{uv,h}\, x_{u,h}

The forward is one task per destination over its CSR row (all heads; online softmax) and
writes ``out``, ``alpha`` and ``lse = log sum_u exp e_uv`` — no ``(E, heads, channels)`` tensor;
the C++ GATv2 forward keeps each edge's ``log alpha = e_uv - lse_v`` ``(E, heads)`` instead of ``lse``.
The backward is two passes: by destination (``alpha = exp(e - lse)``, the scores recomputed, or for
the C++ GATv2 ``exp(log alpha)``, its scores being most of the forward's work;
``delta_v = <g_v, out_v>``, ``de = alpha (d alpha - delta)``, the destination-side gradients and
partial sums of ``d a``), then by source over the reverse CSR (the source-side gradients).  Every
output row is written by one task: no atomics, deterministic, and a replica's numbers do not
depend on the number of replicas or threads.

Backends: C++ on the CPU (:mod:`.build`, ``cpu/attention.cpp``), Triton on CUDA
(:mod:`.triton_attention`: launchers over light/heavy degree buckets, :mod:`.degree_buckets`;
kernels in :mod:`.triton_kernels`).  :mod:`.ops` registers their autograd and vmap rules and holds the
entry points :func:`~.ops.gatv2_attention` and :func:`~.ops.gat_attention`.
"""
