// Sparse (CSR) times dense summed in a dense GEMM's order: out = A @ B with A (n, k) given by its CSR
// parts and B (k, m) dense, every out[i, j] the number a BLAS dense product of A's dense form with B
// gives.  zoo/ops/sparse_linear.py runs it in place of that dense product (stacked replicas' first layer
// on their own dropped bag-of-words input, X_r @ W_r^T and the weight gradient X_r^T @ G_r), after
// checking on this machine that the numbers are the same bits (zoo/ops/gemm_order.py).
//
// Order: the dense product splits k into blocks (``starts``: each block's first index, then k); within
// a block it sums with fused multiply-adds from zero, ``acc = fma(a_ik, b_kj, acc)`` in k's order, and
// it adds each block's sum to the running result, ``out = out + acc``.  A zero a_ik leaves acc as it is
// (fma(0, b, acc) = acc for a finite b), so summing A's stored entries alone, in their column order,
// with the same resets gives the same bits at a cost of nnz instead of n * k.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstring>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

using at::Tensor;

// a block of 64 output columns (4 vectors of 16 floats) in registers where the CPU has AVX-512
template <typename T>
struct Lanes {
  static constexpr int64_t kWidth = 0;  // no vector path: every column by the scalar loop
};

#if defined(__AVX512F__)
template <>
struct Lanes<float> {
  static constexpr int64_t kWidth = 64;
  typedef __m512 V;
  static inline V zero() { return _mm512_setzero_ps(); }
  static inline V load(const float* p) { return _mm512_loadu_ps(p); }
  static inline void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static inline V fma(float a, V b, V c) { return _mm512_fmadd_ps(_mm512_set1_ps(a), b, c); }
  static inline V add(V a, V b) { return _mm512_add_ps(a, b); }
};
#endif

// row i of A @ B over the 64 columns from j0 (the vector path)
template <typename T>
inline void block_row(const int64_t* crow, const int64_t* col, const T* val, const T* b, const int64_t* starts,
                      T* out, int64_t m, int64_t j0, int64_t i) {
  using L = Lanes<T>;
  constexpr int kVectors = 4, kStep = L::kWidth / kVectors;
  typename L::V acc[kVectors], sum[kVectors];
  for (int q = 0; q < kVectors; ++q) acc[q] = sum[q] = L::zero();
  const int64_t* next = starts;  // the first block start after the current block's
  for (int64_t e = crow[i]; e < crow[i + 1]; ++e) {
    if (col[e] >= *next) {  // a new block: its sum starts from zero
      for (int q = 0; q < kVectors; ++q) { sum[q] = L::add(sum[q], acc[q]); acc[q] = L::zero(); }
      while (col[e] >= *next) ++next;
    }
    const T v = val[e];
    const T* row = b + col[e] * m + j0;
    for (int q = 0; q < kVectors; ++q) acc[q] = L::fma(v, L::load(row + q * kStep), acc[q]);
  }
  for (int q = 0; q < kVectors; ++q) L::store(out + i * m + j0 + q * kStep, L::add(sum[q], acc[q]));
}

// the same sums one column at a time (columns past the vector blocks, or no vector path)
template <typename T>
inline void scalar_row(const int64_t* crow, const int64_t* col, const T* val, const T* b, const int64_t* starts,
                       T* out, int64_t m, int64_t j0, int64_t i) {
  for (int64_t j = j0; j < m; ++j) {
    T acc = T(0), sum = T(0);
    const int64_t* next = starts;
    for (int64_t e = crow[i]; e < crow[i + 1]; ++e) {
      if (col[e] >= *next) {
        sum = sum + acc;
        acc = T(0);
        while (col[e] >= *next) ++next;
      }
      acc = std::fma(val[e], b[col[e] * m + j], acc);
    }
    out[i * m + j] = sum + acc;
  }
}

template <typename T>
void product(const int64_t* crow, const int64_t* col, const T* val, const T* b, const int64_t* starts, T* out,
             int64_t n, int64_t m) {
  const int64_t width = Lanes<T>::kWidth;
  at::parallel_for(0, n, 64, [&](int64_t row0, int64_t row1) {
    for (int64_t i = row0; i < row1; ++i) {
      int64_t j0 = 0;
      if constexpr (Lanes<T>::kWidth > 0) {
        for (; j0 + width <= m; j0 += width) block_row<T>(crow, col, val, b, starts, out, m, j0, i);
      }
      if (j0 < m) scalar_row<T>(crow, col, val, b, starts, out, m, j0, i);
    }
  });
}

// values (R, nnz), dense (R, k, m) -> (R, n, m): slice r is A_r @ dense[r], A_r with A's structure and values[r];
// starts: the k blocks' first indices after 0, then k (int64, increasing)
Tensor csr_mm_gemm_order(const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& dense,
                         const Tensor& starts) {
  TORCH_CHECK(values.dim() == 2 && dense.dim() == 3 && values.size(0) == dense.size(0),
              "csr_mm_gemm_order: values (R, nnz) and dense (R, k, m)");
  TORCH_CHECK(crow.scalar_type() == at::kLong && col.scalar_type() == at::kLong && starts.scalar_type() == at::kLong,
              "csr_mm_gemm_order: int64 indices");
  TORCH_CHECK(values.scalar_type() == dense.scalar_type(), "csr_mm_gemm_order: values and dense of one dtype");
  TORCH_CHECK(starts.dim() == 1 && starts.numel() >= 1 && starts[-1].item<int64_t>() == dense.size(1),
              "csr_mm_gemm_order: starts must end with k");
  const Tensor b = dense.contiguous(), v = values.contiguous();
  const Tensor c = crow.contiguous(), k = col.contiguous();
  // the sentinel past k keeps the block scan in bounds whatever the column
  std::vector<int64_t> bounds(starts.data_ptr<int64_t>(), starts.data_ptr<int64_t>() + starts.numel());
  bounds.push_back(INT64_MAX);
  const int64_t reps = b.size(0), n = c.numel() - 1, kk = b.size(1), m = b.size(2), nnz = v.size(1);
  Tensor out = at::empty({reps, n, m}, b.options());
  AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "csr_mm_gemm_order", [&] {
    for (int64_t r = 0; r < reps; ++r) {
      product<scalar_t>(c.data_ptr<int64_t>(), k.data_ptr<int64_t>(), v.data_ptr<scalar_t>() + r * nnz,
                        b.data_ptr<scalar_t>() + r * kk * m, bounds.data(), out.data_ptr<scalar_t>() + r * n * m, n, m);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(zoo_kernels, m) {
  m.def("csr_mm_gemm_order(Tensor crow, Tensor col, Tensor values, Tensor dense, Tensor starts) -> Tensor");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("csr_mm_gemm_order", &csr_mm_gemm_order);
}
