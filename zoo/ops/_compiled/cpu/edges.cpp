// Edge-wise arithmetic on gathered rows without the gathered copies: each op reads the rows it
// needs straight from the node tensors instead of materialising x[index] (an (E, C) tensor that
// leaves the cache on large graphs) and then reading it back.  zoo/ops/segment.py calls them where
// no gradient is needed (evaluation, the energy diagnostics); training keeps the torch ops.
//
//   gather_mul(a, ia, b, ib)[e, ...]  = a[ia[e], ...] * b[ib[e], ...]
//       the numbers of a.index_select(0, ia) * b.index_select(0, ib): one rounded product each;
//   neighbour_difference_sum(x, src, dst, n)[i, :] = sum over the edges e with dst[e] = i, in
//       edge order, of (x[src[e], :] - x[i, :])
//       the numbers of x.new_zeros(n, C).index_add(0, dst, x[src] - x[dst]): torch's index_add on
//       the CPU adds each destination's rows in edge order, starting from zero.
//   gathered_dot(a, ia, b, ib, lanes)[e, h] = sum over c of a[ia[e], h, c] * b[ib[e], h, c]
//       the numbers of (a.index_select(0, ia) * b.index_select(0, ib)).sum(-1) where torch's CPU sum
//       adds the C products in the order torch_order_dot spells out for a vector of ``lanes`` elements
//       (segment.py finds ``lanes`` once per dtype and width by comparing with torch's sum);
//   gathered_dot_backward(g, a, ia, b, ib, need_a, need_b) -> (grad_a, grad_b)
//       the gradients of (a[ia] * b[ib]).sum(-1) (a, b (N, H, C); g (E, H)): grad_a[i, h, :] = sum over
//       the edges e with ia[e] = i, in edge order, of g[e, h] * b[ib[e], h, :], grad_b likewise: the
//       numbers of torch's backward (the expanded gradient times the other gathered factor, one rounded
//       product each, then index_add from zero, which adds each row's terms in edge order); an
//       undefined tensor where not needed.
//   weighted_gather_sum(w, x, src, dst, n)[i, h, :] = sum over the edges e with dst[e] = i, in edge
//       order, of w[e, h] * x[src[e], :] (w (E, H), x (N, C) -> (n, H, C)): the numbers of
//       zeros.index_add(0, dst, w[..., None] * x[src][:, None]);
//   weighted_gather_sum_backward(g, w, x, src, dst, lanes, need_w, need_x) -> (grad_w, grad_x), one head:
//       grad_w[e] = torch's sum over c of g[dst[e], 0, c] * x[src[e], c] (gathered_dot's order at
//       ``lanes``), grad_x[j, :] = sum over the edges with src[e] = j, in edge order, of
//       g[dst[e], 0, :] * w[e]: the numbers of the torch expression's autograd.
// Every output element is one fixed sequence of operations, whatever the thread count.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include "checks.h"

#include <algorithm>
#include <tuple>
#include <vector>

// element-wise products and differences: nothing to contract, but keep the rule of sparse.cpp
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace {

using at::Tensor;

using zoo_kernels_checks::check_index;

Tensor gather_mul(const Tensor& a_, const Tensor& ia_, const Tensor& b_, const Tensor& ib_) {
  TORCH_CHECK(a_.dim() >= 1 && b_.dim() == a_.dim() && a_.sizes().slice(1) == b_.sizes().slice(1),
              "gather_mul: a and b must have the same row shape, got ", a_.sizes(), " and ", b_.sizes());
  TORCH_CHECK(a_.scalar_type() == b_.scalar_type(), "gather_mul: a and b of one dtype");
  TORCH_CHECK(ia_.numel() == ib_.numel(), "gather_mul: ia and ib must have the same length");
  const Tensor a = a_.contiguous(), b = b_.contiguous(), ia = ia_.contiguous(), ib = ib_.contiguous();
  check_index(ia, a.size(0), "ia");
  check_index(ib, b.size(0), "ib");
  std::vector<int64_t> shape = a.sizes().vec();
  shape[0] = ia.numel();
  Tensor out = at::empty(shape, a.options());
  const int64_t row = a.size(0) ? a.numel() / a.size(0) : 0;
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "gather_mul", [&] {
    using T = scalar_t;
    const T* ap = a.data_ptr<T>(); const T* bp = b.data_ptr<T>(); T* op = out.data_ptr<T>();
    const int64_t* ja = ia.data_ptr<int64_t>(); const int64_t* jb = ib.data_ptr<int64_t>();
    at::parallel_for(0, ia.numel(), 256, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) {
        const T* __restrict pa = ap + ja[e] * row; const T* __restrict pb = bp + jb[e] * row;
        T* __restrict po = op + e * row;
        for (int64_t c = 0; c < row; ++c) po[c] = pa[c] * pb[c];
      }
    });
  });
  return out;
}

Tensor neighbour_difference_sum(const Tensor& x_, const Tensor& src_, const Tensor& dst_, int64_t n) {
  TORCH_CHECK(x_.dim() == 2, "neighbour_difference_sum: x must be (N, C), got ", x_.sizes());
  TORCH_CHECK(src_.numel() == dst_.numel(), "neighbour_difference_sum: src and dst must have the same length");
  const Tensor x = x_.contiguous(), src = src_.contiguous(), dst = dst_.contiguous();
  check_index(src, x.size(0), "src");
  check_index(dst, std::min(n, x.size(0)), "dst");
  Tensor out = at::zeros({n, x.size(1)}, x.options());
  const int64_t C = x.size(1), E = src.numel();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neighbour_difference_sum", [&] {
    using T = scalar_t;
    const T* xp = x.data_ptr<T>(); T* op = out.data_ptr<T>();
    const int64_t* s = src.data_ptr<int64_t>(); const int64_t* d = dst.data_ptr<int64_t>();
    // one pass in edge order: each output row's additions in the order index_add makes them
    for (int64_t e = 0; e < E; ++e) {
      const T* __restrict xu = xp + s[e] * C; const T* __restrict xi = xp + d[e] * C;
      T* __restrict acc = op + d[e] * C;
      for (int64_t c = 0; c < C; ++c) acc[c] = acc[c] + (xu[c] - xi[c]);
    }
  });
  return out;
}

// The order in which torch's CPU sum (ATen/native/cpu/SumKernel.cpp, cascade_sum) adds a contiguous
// row of C values into a zeroed output, for vectors of L lanes (L = 1: its scalar path, for C < the
// vector width): C / L vectors summed as rows of four accumulators (row_sum, ilp 4; multi_row_sum
// adds its three upper levels, zero below 16 rows, into the first), the rest into the first, the
// accumulators into the first; then the scalars past the vectors and the lanes in turn, from zero.
// Only for fewer than 64 L values (no cascade level is flushed); the caller checks that.  torch's
// additions of zero (the upper levels, the zeroed output) are left out: every sum starts from +0, so
// it is never -0, and adding +0 to anything but -0 changes no bit.  The accumulators are GCC vectors
// of L lanes (L a template argument): loops over an array of lanes compiled to shuffles and spills.
template <typename T, int L>
inline T torch_order_dot(const T* pa, const T* pb, int64_t C) {
  typedef T V __attribute__((vector_size(sizeof(T) * L)));  // one of torch's vectors
  const int64_t n = C / L, nilp = n / 4;
  V acc[4] = {};
  for (int64_t i = 0; i < nilp; ++i)
    for (int k = 0; k < 4; ++k) {
      V va, vb;
      __builtin_memcpy(&va, pa + (i * 4 + k) * L, sizeof(V));
      __builtin_memcpy(&vb, pb + (i * 4 + k) * L, sizeof(V));
      acc[k] = acc[k] + va * vb;
    }
  for (int64_t i = nilp * 4; i < n; ++i) {
    V va, vb;
    __builtin_memcpy(&va, pa + i * L, sizeof(V));
    __builtin_memcpy(&vb, pb + i * L, sizeof(V));
    acc[0] = acc[0] + va * vb;
  }
  acc[0] = acc[0] + acc[1];
  acc[0] = acc[0] + acc[2];
  acc[0] = acc[0] + acc[3];
  T total = T(0);
  for (int64_t c = n * L; c < C; ++c) total = total + pa[c] * pb[c];
  for (int l = 0; l < L; ++l) total = total + acc[0][l];
  return total;
}

// Rows read at random (the source nodes' on a graph sorted by destination; ``b``'s in gathered_dot)
// leave the cache on large graphs: fetched this many edges ahead, a row's lines arrive before its
// products need them.
constexpr int64_t kPrefetchEdges = 8;

template <typename T>
inline void prefetch_row(const T* row, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(reinterpret_cast<const char*>(row) + off);
}

template <typename T, int L>
void gathered_dot_rows(const T* __restrict ap, const int64_t* __restrict ja, const T* __restrict bp,
                       const int64_t* __restrict jb, T* __restrict op, int64_t e0, int64_t e1, int64_t H, int64_t C) {
  const int64_t row = H * C;
  for (int64_t e = e0; e < e1; ++e) {
    if (e + kPrefetchEdges < e1) prefetch_row(bp + jb[e + kPrefetchEdges] * row, row * int64_t(sizeof(T)));
    for (int64_t h = 0; h < H; ++h)
      op[e * H + h] = torch_order_dot<T, L>(ap + ja[e] * row + h * C, bp + jb[e] * row + h * C, C);
  }
}

template <typename T, int L>
void gathered_dot_all(const T* ap, const int64_t* ja, const T* bp, const int64_t* jb, T* op, int64_t E, int64_t H,
                      int64_t C) {
  at::parallel_for(0, E, 256, [=](int64_t e0, int64_t e1) { gathered_dot_rows<T, L>(ap, ja, bp, jb, op, e0, e1, H, C); });
}

Tensor gathered_dot(const Tensor& a_, const Tensor& ia_, const Tensor& b_, const Tensor& ib_, int64_t lanes) {
  TORCH_CHECK(a_.dim() == 3 && b_.dim() == 3 && a_.sizes().slice(1) == b_.sizes().slice(1),
              "gathered_dot: a and b must be (N, H, C) of one row shape, got ", a_.sizes(), " and ", b_.sizes());
  TORCH_CHECK(a_.scalar_type() == b_.scalar_type(), "gathered_dot: a and b of one dtype");
  TORCH_CHECK(ia_.numel() == ib_.numel(), "gathered_dot: ia and ib must have the same length");
  const int64_t H = a_.size(1), C = a_.size(2), L = C < lanes ? 1 : lanes;
  TORCH_CHECK((lanes == 1 || lanes == 2 || lanes == 4 || lanes == 8 || lanes == 16) && C < 64 * L, "gathered_dot: ",
              C, " channels at ", lanes, " lanes are not summed in torch's order here");
  const Tensor a = a_.contiguous(), b = b_.contiguous(), ia = ia_.contiguous(), ib = ib_.contiguous();
  check_index(ia, a.size(0), "ia");
  check_index(ib, b.size(0), "ib");
  Tensor out = at::empty({ia.numel(), H}, a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "gathered_dot", [&] {
    using T = scalar_t;
    const T* ap = a.data_ptr<T>(); const T* bp = b.data_ptr<T>(); T* op = out.data_ptr<T>();
    const int64_t* ja = ia.data_ptr<int64_t>(); const int64_t* jb = ib.data_ptr<int64_t>();
    const int64_t E = ia.numel();
    switch (L) {
      case 1: gathered_dot_all<T, 1>(ap, ja, bp, jb, op, E, H, C); break;
      case 2: gathered_dot_all<T, 2>(ap, ja, bp, jb, op, E, H, C); break;
      case 4: gathered_dot_all<T, 4>(ap, ja, bp, jb, op, E, H, C); break;
      case 8: gathered_dot_all<T, 8>(ap, ja, bp, jb, op, E, H, C); break;
      default: gathered_dot_all<T, 16>(ap, ja, bp, jb, op, E, H, C); break;
    }
  });
  return out;
}

// One pass in edge order: each output row's additions in the order index_add makes them.
template <typename T>
void gathered_dot_grads(const T* __restrict gp, const T* __restrict ap, const int64_t* __restrict ja,
                        const T* __restrict bp, const int64_t* __restrict jb, T* __restrict dap, T* __restrict dbp,
                        int64_t E, int64_t H, int64_t C) {
  const int64_t row = H * C, bytes = row * int64_t(sizeof(T));
  for (int64_t e = 0; e < E; ++e) {
    if (e + kPrefetchEdges < E) {
      prefetch_row(ap + ja[e + kPrefetchEdges] * row, bytes);
      prefetch_row(bp + jb[e + kPrefetchEdges] * row, bytes);
      if (dap != nullptr) prefetch_row(dap + ja[e + kPrefetchEdges] * row, bytes);
      if (dbp != nullptr) prefetch_row(dbp + jb[e + kPrefetchEdges] * row, bytes);
    }
    const T* pa = ap + ja[e] * row; const T* pb = bp + jb[e] * row;
    for (int64_t h = 0; h < H; ++h) {
      const T ge = gp[e * H + h];
      if (dap != nullptr) {
        T* acc = dap + ja[e] * row + h * C;
        for (int64_t c = 0; c < C; ++c) acc[c] = acc[c] + ge * pb[h * C + c];
      }
      if (dbp != nullptr) {
        T* acc = dbp + jb[e] * row + h * C;
        for (int64_t c = 0; c < C; ++c) acc[c] = acc[c] + ge * pa[h * C + c];
      }
    }
  }
}

std::tuple<Tensor, Tensor> gathered_dot_backward(const Tensor& g_, const Tensor& a_, const Tensor& ia_, const Tensor& b_,
                                                 const Tensor& ib_, bool need_a, bool need_b) {
  TORCH_CHECK(a_.dim() == 3 && b_.dim() == 3 && a_.sizes().slice(1) == b_.sizes().slice(1),
              "gathered_dot_backward: a and b must be (N, H, C) of one row shape, got ", a_.sizes(), " and ", b_.sizes());
  TORCH_CHECK(a_.scalar_type() == b_.scalar_type() && g_.scalar_type() == a_.scalar_type(),
              "gathered_dot_backward: g, a and b of one dtype");
  TORCH_CHECK(ia_.numel() == ib_.numel() && g_.dim() == 2 && g_.size(0) == ia_.numel() && g_.size(1) == a_.size(1),
              "gathered_dot_backward: g must be (E, H) for E = len(ia) = len(ib), got ", g_.sizes());
  const Tensor a = a_.contiguous(), b = b_.contiguous(), g = g_.contiguous(), ia = ia_.contiguous(), ib = ib_.contiguous();
  check_index(ia, a.size(0), "ia");
  check_index(ib, b.size(0), "ib");
  Tensor grad_a = need_a ? at::zeros_like(a) : Tensor(), grad_b = need_b ? at::zeros_like(b) : Tensor();
  const int64_t H = a.size(1), C = a.size(2), E = ia.numel();
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "gathered_dot_backward", [&] {
    using T = scalar_t;
    const T* ap = a.data_ptr<T>(); const T* bp = b.data_ptr<T>(); const T* gp = g.data_ptr<T>();
    T* dap = need_a ? grad_a.data_ptr<T>() : nullptr; T* dbp = need_b ? grad_b.data_ptr<T>() : nullptr;
    const int64_t* ja = ia.data_ptr<int64_t>(); const int64_t* jb = ib.data_ptr<int64_t>();
    gathered_dot_grads<T>(gp, ap, ja, bp, jb, dap, dbp, E, H, C);
  });
  return {grad_a, grad_b};
}

Tensor weighted_gather_sum(const Tensor& w_, const Tensor& x_, const Tensor& src_, const Tensor& dst_, int64_t n) {
  TORCH_CHECK(w_.dim() == 2 && x_.dim() == 2 && w_.scalar_type() == x_.scalar_type(),
              "weighted_gather_sum: w (E, H) and x (N, C) of one dtype, got ", w_.sizes(), " and ", x_.sizes());
  TORCH_CHECK(src_.numel() == dst_.numel() && w_.size(0) == src_.numel(),
              "weighted_gather_sum: w, src and dst must have E rows");
  const Tensor w = w_.contiguous(), x = x_.contiguous(), src = src_.contiguous(), dst = dst_.contiguous();
  check_index(src, x.size(0), "src");
  check_index(dst, n, "dst");
  const int64_t E = src.numel(), H = w.size(1), C = x.size(1);
  Tensor out = at::zeros({n, H, C}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "weighted_gather_sum", [&] {
    using T = scalar_t;
    const T* __restrict wp = w.data_ptr<T>(); const T* __restrict xp = x.data_ptr<T>(); T* __restrict op = out.data_ptr<T>();
    const int64_t* __restrict s = src.data_ptr<int64_t>(); const int64_t* __restrict d = dst.data_ptr<int64_t>();
    // one pass in edge order: each output row's additions in the order index_add makes them
    for (int64_t e = 0; e < E; ++e) {
      if (e + kPrefetchEdges < E) prefetch_row(xp + s[e + kPrefetchEdges] * C, C * int64_t(sizeof(T)));
      const T* xu = xp + s[e] * C;
      for (int64_t h = 0; h < H; ++h) {
        const T we = wp[e * H + h];
        T* acc = op + (d[e] * H + h) * C;
        for (int64_t c = 0; c < C; ++c) acc[c] = acc[c] + we * xu[c];
      }
    }
  });
  return out;
}

template <typename T, int L>
void weighted_grads(const T* __restrict gp, const T* __restrict wp, const T* __restrict xp, const int64_t* __restrict s,
                    const int64_t* __restrict d, T* __restrict dwp, T* __restrict dxp, int64_t E, int64_t C) {
  for (int64_t e = 0; e < E; ++e) {
    if (e + kPrefetchEdges < E) {
      prefetch_row(xp + s[e + kPrefetchEdges] * C, C * int64_t(sizeof(T)));
      if (dxp != nullptr) prefetch_row(dxp + s[e + kPrefetchEdges] * C, C * int64_t(sizeof(T)));
    }
    const T* gv = gp + d[e] * C; const T* xu = xp + s[e] * C;
    if (dwp != nullptr) dwp[e] = torch_order_dot<T, L>(gv, xu, C);
    if (dxp != nullptr) {
      const T we = wp[e];
      T* acc = dxp + s[e] * C;
      for (int64_t c = 0; c < C; ++c) acc[c] = acc[c] + gv[c] * we;
    }
  }
}

std::tuple<Tensor, Tensor> weighted_gather_sum_backward(const Tensor& g_, const Tensor& w_, const Tensor& x_,
                                                        const Tensor& src_, const Tensor& dst_, int64_t lanes,
                                                        bool need_w, bool need_x) {
  TORCH_CHECK(g_.dim() == 3 && g_.size(1) == 1 && w_.dim() == 2 && w_.size(1) == 1 && x_.dim() == 2 &&
              g_.size(2) == x_.size(1), "weighted_gather_sum_backward: one head: g (n, 1, C), w (E, 1), x (N, C)");
  TORCH_CHECK(g_.scalar_type() == x_.scalar_type() && w_.scalar_type() == x_.scalar_type(),
              "weighted_gather_sum_backward: g, w and x of one dtype");
  TORCH_CHECK(src_.numel() == dst_.numel() && w_.size(0) == src_.numel(),
              "weighted_gather_sum_backward: w, src and dst must have E rows");
  const int64_t C = x_.size(1), L = C < lanes ? 1 : lanes;
  TORCH_CHECK((lanes == 1 || lanes == 2 || lanes == 4 || lanes == 8 || lanes == 16) && C < 64 * L,
              "weighted_gather_sum_backward: ", C, " channels at ", lanes, " lanes are not summed in torch's order here");
  const Tensor g = g_.contiguous(), w = w_.contiguous(), x = x_.contiguous(), src = src_.contiguous(), dst = dst_.contiguous();
  check_index(src, x.size(0), "src");
  check_index(dst, g.size(0), "dst");
  const int64_t E = src.numel();
  Tensor grad_w = need_w ? at::empty_like(w) : Tensor(), grad_x = need_x ? at::zeros_like(x) : Tensor();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "weighted_gather_sum_backward", [&] {
    using T = scalar_t;
    const T* gp = g.data_ptr<T>(); const T* wp = w.data_ptr<T>(); const T* xp = x.data_ptr<T>();
    const int64_t* s = src.data_ptr<int64_t>(); const int64_t* d = dst.data_ptr<int64_t>();
    T* dwp = need_w ? grad_w.data_ptr<T>() : nullptr; T* dxp = need_x ? grad_x.data_ptr<T>() : nullptr;
    switch (L) {
      case 1: weighted_grads<T, 1>(gp, wp, xp, s, d, dwp, dxp, E, C); break;
      case 2: weighted_grads<T, 2>(gp, wp, xp, s, d, dwp, dxp, E, C); break;
      case 4: weighted_grads<T, 4>(gp, wp, xp, s, d, dwp, dxp, E, C); break;
      case 8: weighted_grads<T, 8>(gp, wp, xp, s, d, dwp, dxp, E, C); break;
      default: weighted_grads<T, 16>(gp, wp, xp, s, d, dwp, dxp, E, C); break;
    }
  });
  return {grad_w, grad_x};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(zoo_kernels, m) {
  m.def("gather_mul(Tensor a, Tensor ia, Tensor b, Tensor ib) -> Tensor");
  m.def("neighbour_difference_sum(Tensor x, Tensor src, Tensor dst, int n) -> Tensor");
  m.def("weighted_gather_sum(Tensor w, Tensor x, Tensor src, Tensor dst, int n) -> Tensor");
  m.def("weighted_gather_sum_backward(Tensor g, Tensor w, Tensor x, Tensor src, Tensor dst, int lanes, bool need_w, "
        "bool need_x) -> (Tensor, Tensor)");
  m.def("gathered_dot(Tensor a, Tensor ia, Tensor b, Tensor ib, int lanes) -> Tensor");
  m.def("gathered_dot_backward(Tensor g, Tensor a, Tensor ia, Tensor b, Tensor ib, bool need_a, bool need_b) "
        "-> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("gather_mul", &gather_mul);
  m.impl("neighbour_difference_sum", &neighbour_difference_sum);
  m.impl("weighted_gather_sum", &weighted_gather_sum);
  m.impl("weighted_gather_sum_backward", &weighted_gather_sum_backward);
  m.impl("gathered_dot", &gathered_dot);
  m.impl("gathered_dot_backward", &gathered_dot_backward);
}
