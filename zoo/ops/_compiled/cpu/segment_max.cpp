// Per-destination maxima and per-destination divisors over edges, with the numbers of the torch
// expressions they replace and of those expressions' autograd formulas, operation for operation,
// without the (E, ...) gathered copies, index, masks and counts the formulas materialise (under
// vmap the index is expanded to the stacked shape too).  zoo/ops/segment.py and zoo/ops/bounds.py
// wrap them in custom ops with autograd and vmap rules (the replicas are an outer dimension: one
// call for all of them, no copy when they lead).
//
// Layout: every tensor is (B, rows, K) with B the product of the dims before `dim` (the edge or
// node dim) and K of those after; edges are rows of values / grads, nodes rows of x / result / b.
//
//   segment_max(values, index, n, dim)[b, i, k] = max over the edges e with index[e] = i of
//       values[b, e, k], from -inf, NaN sticking (torch's amax update: isnan(v) ? v : max(m, v)):
//       out.new_full(-inf).scatter_reduce(dim, index, values, "amax", include_self=True);
//   segment_max_backward(grad, values, index, result, dim)[b, e, k]
//       = float(values[b, e, k] == result[b, i, k]) * (grad[b, i, k] / count[b, i, k]),  i = index[e],
//       count = float(result == -inf) + the number of edges of i whose value equals result:
//       torch's scatter_reduce backward for amax (the gradient split evenly among tied maxima);
//   neighbour_max(x, src, dst, n, dim) = segment_max(x.index_select(dim, src), dst, n, dim), and its
//       backward the gradient of that: the edges' gradients above added into a zero (.., N, K)
//       tensor at src in edge order (index_select's backward, index_add);
//   scale_divide(s, b, dst, alpha, dim)[., e, k] = (s[., e, k] * alpha) / b[., dst[e], k]
//       = alpha * s / b.index_select(dim, dst); its backward (torch's mul and div formulas):
//       grad_s = (g / b[dst]) * alpha, grad_b = zeros.index_add(dim, dst, -g * ((s * alpha / b[dst]) / b[dst])).
//   edge_sum(a, b, src, dst, dim)[., e, k] = a[., src[e], k] + b[., dst[e], k]
//       = a.index_select(dim, src) + b.index_select(dim, dst); its backward (index_select's, twice):
//       grad_a = zeros.index_add(dim, src, g), grad_b = zeros.index_add(dim, dst, g).
// Every output element is one fixed sequence of operations (sums in edge order from zero), whatever
// the thread count; alpha is rounded to the tensors' dtype first, as torch does with a Python scalar.
#include <torch/library.h>
#include <ATen/ATen.h>
#include "checks.h"

#include <cmath>
#include <limits>
#include <vector>

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace {

using at::Tensor;

struct Layout {
  int64_t outer, rows, inner;
};

Layout layout(const Tensor& t, int64_t dim, const char* what) {
  TORCH_CHECK(dim >= 0 && dim < t.dim(), "zoo kernels: ", what, " has no dim ", dim);
  Layout l{1, t.size(dim), 1};
  for (int64_t d = 0; d < dim; ++d) l.outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) l.inner *= t.size(d);
  return l;
}

using zoo_kernels_checks::check_index;

std::vector<int64_t> with_rows(const Tensor& t, int64_t dim, int64_t rows) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[dim] = rows;
  return shape;
}

void same_rows(const Tensor& a, const Tensor& b, int64_t dim, const char* what) {
  TORCH_CHECK(a.dim() == b.dim() && a.sizes().slice(0, dim) == b.sizes().slice(0, dim) &&
              a.sizes().slice(dim + 1) == b.sizes().slice(dim + 1) && a.scalar_type() == b.scalar_type(),
              "zoo kernels: ", what, ": tensors of one dtype whose shapes differ only at dim ", dim);
}

// m = max(m, v) as torch's amax reduction: a NaN value sticks (and a NaN m stays).  Both tests are
// evaluated (no short circuit) so that the choice compiles to a select, not a branch: a branch on
// random data mispredicts half the time (one head: the inner loop is a single element).
template <typename T>
inline T amax(T m, T v) {
  const bool take = (v != v) | (m < v);
  return take ? v : m;
}

// The runs of equal entries of a destination index: their starts and, last, the end; empty where the
// index is not sorted (the graphs are sorted by destination: each node's edges are then one run, whose
// maximum and count stay in a register instead of a store and reload per edge).
std::vector<int64_t> runs_of(const int64_t* index, int64_t E) {
  std::vector<int64_t> starts;
  for (int64_t e = 0; e < E; ++e) {
    if (e > 0 && index[e] < index[e - 1]) return {};
    if (e == 0 || index[e] != index[e - 1]) starts.push_back(e);
  }
  starts.push_back(E);
  return starts;
}

// out[b, index[e], k] = amax(out, value(b, e)[k]) over the edges in order (out starts at -inf).
template <typename T, int64_t FixedK, typename Value>
void max_into_k(T* out, const int64_t* index, int64_t E, int64_t B, int64_t n, int64_t K_, Value value) {
  const int64_t K = FixedK ? FixedK : K_;  // a constant 1 (one head) drops the inner loop's per-edge setup
  const std::vector<int64_t> runs = runs_of(index, E);
  if (runs.empty()) {
    for (int64_t e = 0; e < E; ++e)
      for (int64_t b = 0; b < B; ++b) {
        const T* __restrict v = value(b, e);
        T* __restrict m = out + (b * n + index[e]) * K;
        for (int64_t k = 0; k < K; ++k) m[k] = amax(m[k], v[k]);
      }
    return;
  }
  for (int64_t b = 0; b < B; ++b)  // one replica at a time: its rows stay in cache
    for (size_t r = 0; r + 1 < runs.size(); ++r) {
      T* __restrict m = out + (b * n + index[runs[r]]) * K;
      for (int64_t e = runs[r]; e < runs[r + 1]; ++e) {
        const T* __restrict v = value(b, e);
        for (int64_t k = 0; k < K; ++k) m[k] = amax(m[k], v[k]);
      }
    }
}

// torch's amax gradient of each edge, float(value == result) * (grad / count) with count =
// float(result == -inf) + the tied edges (added in edge order), handed to put(b, e, k, g) in edge
// order for every (b, k).
template <typename T, int64_t FixedK, typename Value, typename Put>
void max_grads_k(const T* grad, const T* result, const int64_t* index, int64_t E, int64_t B, int64_t n, int64_t K_,
                 Value value, Put put) {
  const int64_t K = FixedK ? FixedK : K_;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const std::vector<int64_t> runs = runs_of(index, E);
  if (runs.empty()) {
    std::vector<T> share(static_cast<size_t>(B * n * K));
    for (size_t i = 0; i < share.size(); ++i) share[i] = static_cast<T>(result[i] == neg_inf);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t row = (b * n + index[e]) * K;
        const T* v = value(b, e);
        for (int64_t k = 0; k < K; ++k) share[row + k] = share[row + k] + static_cast<T>(v[k] == result[row + k]);
      }
    for (size_t i = 0; i < share.size(); ++i) share[i] = grad[i] / share[i];
    for (int64_t e = 0; e < E; ++e)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t row = (b * n + index[e]) * K;
        const T* v = value(b, e);
        for (int64_t k = 0; k < K; ++k) put(b, e, k, static_cast<T>(v[k] == result[row + k]) * share[row + k]);
      }
    return;
  }
  std::vector<T> share(static_cast<size_t>(K));
  for (int64_t b = 0; b < B; ++b)
    for (size_t r = 0; r + 1 < runs.size(); ++r) {
      const T* __restrict top = result + (b * n + index[runs[r]]) * K;
      const T* __restrict g = grad + (b * n + index[runs[r]]) * K;
      for (int64_t k = 0; k < K; ++k) share[k] = static_cast<T>(top[k] == neg_inf);
      for (int64_t e = runs[r]; e < runs[r + 1]; ++e) {
        const T* __restrict v = value(b, e);
        for (int64_t k = 0; k < K; ++k) share[k] = share[k] + static_cast<T>(v[k] == top[k]);
      }
      for (int64_t k = 0; k < K; ++k) share[k] = g[k] / share[k];
      for (int64_t e = runs[r]; e < runs[r + 1]; ++e) {
        const T* __restrict v = value(b, e);
        for (int64_t k = 0; k < K; ++k) put(b, e, k, static_cast<T>(v[k] == top[k]) * share[k]);
      }
    }
}

template <typename T, typename Value>
void max_into(T* out, const int64_t* index, int64_t E, int64_t B, int64_t n, int64_t K, Value value) {
  if (K == 1) max_into_k<T, 1>(out, index, E, B, n, K, value);
  else max_into_k<T, 0>(out, index, E, B, n, K, value);
}

template <typename T, typename Value, typename Put>
void max_grads(const T* grad, const T* result, const int64_t* index, int64_t E, int64_t B, int64_t n, int64_t K,
               Value value, Put put) {
  if (K == 1) max_grads_k<T, 1>(grad, result, index, E, B, n, K, value, put);
  else max_grads_k<T, 0>(grad, result, index, E, B, n, K, value, put);
}

Tensor segment_max(const Tensor& values_, const Tensor& index_, int64_t n, int64_t dim) {
  const Tensor values = values_.contiguous(), index = index_.contiguous();
  const Layout l = layout(values, dim, "segment_max: values");
  check_index(index, n, "segment_max: index", l.rows);
  Tensor out = at::full(with_rows(values, dim, n), -std::numeric_limits<double>::infinity(), values.options());
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "segment_max", [&] {
    using T = scalar_t;
    const T* vp = values.data_ptr<T>();
    auto value = [&](int64_t b, int64_t e) { return vp + (b * l.rows + e) * l.inner; };
    max_into<T>(out.data_ptr<T>(), index.data_ptr<int64_t>(), l.rows, l.outer, n, l.inner, value);
  });
  return out;
}

Tensor segment_max_backward(const Tensor& grad_, const Tensor& values_, const Tensor& index_, const Tensor& result_,
                            int64_t dim) {
  const Tensor grad = grad_.contiguous(), values = values_.contiguous(), index = index_.contiguous(),
               result = result_.contiguous();
  TORCH_CHECK(grad.sizes() == result.sizes(), "segment_max_backward: grad and result of one shape");
  same_rows(grad, result, dim, "segment_max_backward: grad and result");
  same_rows(values, result, dim, "segment_max_backward: values and result");
  const Layout l = layout(values, dim, "segment_max_backward: values");
  const int64_t n = result.size(dim);
  check_index(index, n, "segment_max_backward: index", l.rows);
  Tensor out = at::empty_like(values);
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "segment_max_backward", [&] {
    using T = scalar_t;
    const T* vp = values.data_ptr<T>(); T* op = out.data_ptr<T>();
    const int64_t K = l.inner;
    auto value = [&](int64_t b, int64_t e) { return vp + (b * l.rows + e) * K; };
    auto put = [&](int64_t b, int64_t e, int64_t k, T g) { op[(b * l.rows + e) * K + k] = g; };
    max_grads<T>(grad.data_ptr<T>(), result.data_ptr<T>(), index.data_ptr<int64_t>(), l.rows, l.outer, n, K, value, put);
  });
  return out;
}

Tensor neighbour_max(const Tensor& x_, const Tensor& src_, const Tensor& dst_, int64_t n, int64_t dim) {
  const Tensor x = x_.contiguous(), src = src_.contiguous(), dst = dst_.contiguous();
  const Layout l = layout(x, dim, "neighbour_max: x");
  const int64_t E = src.numel();
  check_index(src, l.rows, "neighbour_max: src", E);
  check_index(dst, n, "neighbour_max: dst", E);
  Tensor out = at::full(with_rows(x, dim, n), -std::numeric_limits<double>::infinity(), x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neighbour_max", [&] {
    using T = scalar_t;
    const T* xp = x.data_ptr<T>(); const int64_t* s = src.data_ptr<int64_t>();
    auto value = [&](int64_t b, int64_t e) { return xp + (b * l.rows + s[e]) * l.inner; };
    max_into<T>(out.data_ptr<T>(), dst.data_ptr<int64_t>(), E, l.outer, n, l.inner, value);
  });
  return out;
}

Tensor neighbour_max_backward(const Tensor& grad_, const Tensor& x_, const Tensor& src_, const Tensor& dst_,
                              const Tensor& result_, int64_t dim) {
  const Tensor grad = grad_.contiguous(), x = x_.contiguous(), src = src_.contiguous(), dst = dst_.contiguous(),
               result = result_.contiguous();
  TORCH_CHECK(grad.sizes() == result.sizes(), "neighbour_max_backward: grad and result of one shape");
  same_rows(x, result, dim, "neighbour_max_backward: x and result");
  const Layout nodes = layout(x, dim, "neighbour_max_backward: x");
  const int64_t n = result.size(dim), E = src.numel(), K = nodes.inner;
  check_index(src, nodes.rows, "neighbour_max_backward: src", E);
  check_index(dst, n, "neighbour_max_backward: dst", E);
  Tensor out = at::zeros_like(x);  // index_add's start: the edges' gradients added at src in edge order
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neighbour_max_backward", [&] {
    using T = scalar_t;
    const T* xp = x.data_ptr<T>(); T* op = out.data_ptr<T>(); const int64_t* s = src.data_ptr<int64_t>();
    auto value = [&](int64_t b, int64_t e) { return xp + (b * nodes.rows + s[e]) * K; };
    auto put = [&](int64_t b, int64_t e, int64_t k, T g) {
      T& acc = op[(b * nodes.rows + s[e]) * K + k];
      acc = acc + g;
    };
    max_grads<T>(grad.data_ptr<T>(), result.data_ptr<T>(), dst.data_ptr<int64_t>(), E, nodes.outer, n, K, value, put);
  });
  return out;
}

Tensor scale_divide(const Tensor& s_, const Tensor& b_, const Tensor& dst_, double alpha, int64_t dim) {
  const Tensor s = s_.contiguous(), bound = b_.contiguous(), dst = dst_.contiguous();
  same_rows(s, bound, dim, "scale_divide: s and b");
  const Layout edges = layout(s, dim, "scale_divide: s");
  const int64_t n = bound.size(dim), K = edges.inner;
  check_index(dst, n, "scale_divide: dst", edges.rows);
  Tensor out = at::empty_like(s);
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "scale_divide", [&] {
    using T = scalar_t;
    const T a = static_cast<T>(alpha);
    const T* sp = s.data_ptr<T>(); const T* bp = bound.data_ptr<T>(); T* op = out.data_ptr<T>();
    const int64_t* d = dst.data_ptr<int64_t>();
    for (int64_t b = 0; b < edges.outer; ++b)
      for (int64_t e = 0; e < edges.rows; ++e) {
        const T* __restrict se = sp + (b * edges.rows + e) * K; const T* __restrict bv = bp + (b * n + d[e]) * K;
        T* __restrict o = op + (b * edges.rows + e) * K;
        for (int64_t k = 0; k < K; ++k) o[k] = (se[k] * a) / bv[k];
      }
  });
  return out;
}

std::tuple<Tensor, Tensor> scale_divide_backward(const Tensor& grad_, const Tensor& out_, const Tensor& b_,
                                                 const Tensor& dst_, double alpha, int64_t dim) {
  const Tensor grad = grad_.contiguous(), out = out_.contiguous(), bound = b_.contiguous(), dst = dst_.contiguous();
  TORCH_CHECK(grad.sizes() == out.sizes() && grad.scalar_type() == out.scalar_type(),
              "scale_divide_backward: grad and out of one shape and dtype");
  same_rows(out, bound, dim, "scale_divide_backward: out and b");
  const Layout edges = layout(out, dim, "scale_divide_backward: out");
  const int64_t n = bound.size(dim), K = edges.inner;
  check_index(dst, n, "scale_divide_backward: dst", edges.rows);
  Tensor grad_s = at::empty_like(out), grad_b = at::zeros_like(bound);
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "scale_divide_backward", [&] {
    using T = scalar_t;
    const T a = static_cast<T>(alpha);
    const T* gp = grad.data_ptr<T>(); const T* op = out.data_ptr<T>(); const T* bp = bound.data_ptr<T>();
    T* gs = grad_s.data_ptr<T>(); T* gb = grad_b.data_ptr<T>();
    const int64_t* d = dst.data_ptr<int64_t>();
    for (int64_t b = 0; b < edges.outer; ++b)
      for (int64_t e = 0; e < edges.rows; ++e) {
        const int64_t at = (b * edges.rows + e) * K, row = (b * n + d[e]) * K;
        for (int64_t k = 0; k < K; ++k) {
          const T g = gp[at + k], bv = bp[row + k];
          gs[at + k] = (g / bv) * a;
          // out is (s * alpha) / b[dst]: torch's div backward recomputes exactly that quotient
          const T edge_grad = (-g) * (op[at + k] / bv);
          gb[row + k] = gb[row + k] + edge_grad;
        }
      }
  });
  return {grad_s, grad_b};
}

Tensor edge_sum(const Tensor& a_, const Tensor& b_, const Tensor& src_, const Tensor& dst_, int64_t dim) {
  const Tensor a = a_.contiguous(), bn = b_.contiguous(), src = src_.contiguous(), dst = dst_.contiguous();
  same_rows(a, bn, dim, "edge_sum: a and b");
  const Layout nodes = layout(a, dim, "edge_sum: a");
  const int64_t E = src.numel(), n = nodes.rows, K = nodes.inner;
  check_index(src, n, "edge_sum: src", E);
  check_index(dst, n, "edge_sum: dst", E);
  Tensor out = at::empty(with_rows(a, dim, E), a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_sum", [&] {
    using T = scalar_t;
    const T* ap = a.data_ptr<T>(); const T* bp = bn.data_ptr<T>(); T* op = out.data_ptr<T>();
    const int64_t* s = src.data_ptr<int64_t>(); const int64_t* d = dst.data_ptr<int64_t>();
    for (int64_t b = 0; b < nodes.outer; ++b)
      for (int64_t e = 0; e < E; ++e) {
        const T* __restrict au = ap + (b * n + s[e]) * K; const T* __restrict bv = bp + (b * n + d[e]) * K;
        T* __restrict o = op + (b * E + e) * K;
        for (int64_t k = 0; k < K; ++k) o[k] = au[k] + bv[k];
      }
  });
  return out;
}

std::tuple<Tensor, Tensor> edge_sum_backward(const Tensor& grad_, const Tensor& src_, const Tensor& dst_, int64_t n,
                                             int64_t dim) {
  const Tensor grad = grad_.contiguous(), src = src_.contiguous(), dst = dst_.contiguous();
  const Layout edges = layout(grad, dim, "edge_sum_backward: grad");
  const int64_t E = edges.rows, K = edges.inner;
  check_index(src, n, "edge_sum_backward: src", E);
  check_index(dst, n, "edge_sum_backward: dst", E);
  // index_add's start: each edge's gradient added at its source / destination in edge order from zero
  Tensor grad_a = at::zeros(with_rows(grad, dim, n), grad.options()), grad_b = at::zeros_like(grad_a);
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "edge_sum_backward", [&] {
    using T = scalar_t;
    const T* gp = grad.data_ptr<T>(); T* ga = grad_a.data_ptr<T>(); T* gb = grad_b.data_ptr<T>();
    const int64_t* s = src.data_ptr<int64_t>(); const int64_t* d = dst.data_ptr<int64_t>();
    for (int64_t b = 0; b < edges.outer; ++b)
      for (int64_t e = 0; e < E; ++e) {
        const T* __restrict g = gp + (b * E + e) * K;
        T* __restrict au = ga + (b * n + s[e]) * K;
        T* __restrict bv = gb + (b * n + d[e]) * K;
        for (int64_t k = 0; k < K; ++k) au[k] = au[k] + g[k];
        for (int64_t k = 0; k < K; ++k) bv[k] = bv[k] + g[k];
      }
  });
  return {grad_a, grad_b};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(zoo_kernels, m) {
  m.def("segment_max(Tensor values, Tensor index, int n, int dim) -> Tensor");
  m.def("segment_max_backward(Tensor grad, Tensor values, Tensor index, Tensor result, int dim) -> Tensor");
  m.def("neighbour_max(Tensor x, Tensor src, Tensor dst, int n, int dim) -> Tensor");
  m.def("neighbour_max_backward(Tensor grad, Tensor x, Tensor src, Tensor dst, Tensor result, int dim) -> Tensor");
  m.def("scale_divide(Tensor s, Tensor b, Tensor dst, float alpha, int dim) -> Tensor");
  m.def("scale_divide_backward(Tensor grad, Tensor out, Tensor b, Tensor dst, float alpha, int dim) -> (Tensor, Tensor)");
  m.def("edge_sum(Tensor a, Tensor b, Tensor src, Tensor dst, int dim) -> Tensor");
  m.def("edge_sum_backward(Tensor grad, Tensor src, Tensor dst, int n, int dim) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("segment_max", &segment_max);
  m.impl("segment_max_backward", &segment_max_backward);
  m.impl("neighbour_max", &neighbour_max);
  m.impl("neighbour_max_backward", &neighbour_max_backward);
  m.impl("scale_divide", &scale_divide);
  m.impl("scale_divide_backward", &scale_divide_backward);
  m.impl("edge_sum", &edge_sum);
  m.impl("edge_sum_backward", &edge_sum_backward);
}
