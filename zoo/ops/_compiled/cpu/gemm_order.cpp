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

// one replica's CSR matrix: row i's entries are crow[i] .. crow[i + 1] - 1 of col / val
template <typename T>
struct Csr {
  const int64_t* crow;
  const int64_t* col;
  const T* val;
};

// Entry e of a row of A into that row's FMA chains acc over the 64 columns from j0 (the vector path): where
// its column crosses the next block start (next), the chains are added to the block sums sum and restart from
// zero (MKL's order); a row's entries taken in turn give its sums exactly.
template <typename T>
inline void add_entry(const Csr<T>& a, const T* b, int64_t e, const int64_t*& next, typename Lanes<T>::V* acc,
                      typename Lanes<T>::V* sum, int64_t m, int64_t j0) {
  using L = Lanes<T>;
  constexpr int kVectors = 4, kStep = L::kWidth / kVectors;
  if (a.col[e] >= *next) {  // a new block: its sum starts from zero
    for (int q = 0; q < kVectors; ++q) { sum[q] = L::add(sum[q], acc[q]); acc[q] = L::zero(); }
    while (a.col[e] >= *next) ++next;
  }
  const T v = a.val[e];
  const T* row = b + a.col[e] * m + j0;
  for (int q = 0; q < kVectors; ++q) acc[q] = L::fma(v, L::load(row + q * kStep), acc[q]);
}

// row i of A @ B over the 64 columns from j0 (the vector path) into out_row (columns j0 .. j0 + 63)
template <typename T>
inline void block_row(const Csr<T>& a, const T* b, const int64_t* starts, T* out_row, int64_t m, int64_t j0,
                      int64_t i) {
  using L = Lanes<T>;
  constexpr int kVectors = 4, kStep = L::kWidth / kVectors;
  typename L::V acc[kVectors], sum[kVectors];
  for (int q = 0; q < kVectors; ++q) acc[q] = sum[q] = L::zero();
  const int64_t* next = starts;  // the first block start after the current block's
  for (int64_t e = a.crow[i]; e < a.crow[i + 1]; ++e) add_entry<T>(a, b, e, next, acc, sum, m, j0);
  for (int q = 0; q < kVectors; ++q) L::store(out_row + j0 + q * kStep, L::add(sum[q], acc[q]));
}

// the same sums one column at a time (columns j0 .. m - 1: past the vector blocks, or no vector path)
template <typename T>
inline void scalar_row(const Csr<T>& a, const T* b, const int64_t* starts, T* out_row, int64_t m, int64_t j0,
                       int64_t i) {
  for (int64_t j = j0; j < m; ++j) {
    T acc = T(0), sum = T(0);
    const int64_t* next = starts;
    for (int64_t e = a.crow[i]; e < a.crow[i + 1]; ++e) {
      if (a.col[e] >= *next) {
        sum = sum + acc;
        acc = T(0);
        while (a.col[e] >= *next) ++next;
      }
      acc = std::fma(a.val[e], b[a.col[e] * m + j], acc);
    }
    out_row[j] = sum + acc;
  }
}

template <typename T>
void product(const int64_t* crow, const int64_t* col, const T* val, const T* b, const int64_t* starts, T* out,
             int64_t n, int64_t m) {
  const int64_t width = Lanes<T>::kWidth;
  const Csr<T> a{crow, col, val};
  at::parallel_for(0, n, 64, [&](int64_t row0, int64_t row1) {
    for (int64_t i = row0; i < row1; ++i) {
      int64_t j0 = 0;
      if constexpr (Lanes<T>::kWidth > 0) {
        for (; j0 + width <= m; j0 += width) block_row<T>(a, b, starts, out + i * m, m, j0, i);
      }
      if (j0 < m) scalar_row<T>(a, b, starts, out + i * m, m, j0, i);
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

// The transposed product out = A^T @ B, A (n, k) by its CSR parts, B (n, m): the reduction runs over A's
// rows, so A is read row by row and every out row k keeps its block's running sum in ``acc`` (k, m), all
// of them folded into ``out`` where the rows cross a block start: per out[c, j] the same FMA chains from
// zero, block sums added in turn, as the CSR product of A's transpose, without building that transpose.
// out and acc: (k, m), zeroed; B's row i at b + i * ldb.
template <typename T>
void transposed_product(const int64_t* crow, const int64_t* col, const T* val, const T* b, int64_t ldb,
                        const int64_t* starts, T* out, T* acc, int64_t n, int64_t k, int64_t m) {
  using L = Lanes<T>;
  const int64_t* next = starts;
  for (int64_t i = 0; i < n; ++i) {
    if (i >= *next) {  // a new block of rows: every block sum joins its total, the next starts from zero
      for (int64_t t = 0; t < k * m; ++t) {
        out[t] = out[t] + acc[t];
        acc[t] = T(0);
      }
      while (i >= *next) ++next;
    }
    const T* row = b + i * ldb;
    int64_t j0 = 0;
    if constexpr (L::kWidth > 0) {
      constexpr int kVectors = 4, kStep = L::kWidth / kVectors;
      for (; j0 + L::kWidth <= m; j0 += L::kWidth) {
        typename L::V bv[kVectors];
        for (int q = 0; q < kVectors; ++q) bv[q] = L::load(row + j0 + q * kStep);
        for (int64_t e = crow[i]; e < crow[i + 1]; ++e) {
          T* a = acc + col[e] * m + j0;
          for (int q = 0; q < kVectors; ++q) L::store(a + q * kStep, L::fma(val[e], bv[q], L::load(a + q * kStep)));
        }
      }
    }
    for (int64_t e = crow[i]; e < crow[i + 1]; ++e) {
      T* a = acc + col[e] * m;
      for (int64_t j = j0; j < m; ++j) a[j] = std::fma(val[e], row[j], a[j]);
    }
  }
  for (int64_t t = 0; t < k * m; ++t) out[t] = out[t] + acc[t];
}

// Rows i of two replicas' products over the 64 columns from j0, their entries taken in turn: each row's
// sums exactly as block_row's (its own FMA chains, block resets and block sums), the two rows' chains
// independent, so the core overlaps them (one row's chain waits on each FMA's latency).
// out0 / out1: the two result rows (columns j0 .. j0 + 63 written).
template <typename T>
inline void block_row_pair(const Csr<T>& a0, const T* b0, T* out0, const Csr<T>& a1, const T* b1, T* out1,
                           const int64_t* starts, int64_t m, int64_t j0, int64_t i) {
  using L = Lanes<T>;
  constexpr int kVectors = 4, kStep = L::kWidth / kVectors;
  typename L::V acc0[kVectors], sum0[kVectors], acc1[kVectors], sum1[kVectors];
  for (int q = 0; q < kVectors; ++q) acc0[q] = sum0[q] = acc1[q] = sum1[q] = L::zero();
  const int64_t *next0 = starts, *next1 = starts;
  int64_t e0 = a0.crow[i], e1 = a1.crow[i];
  const int64_t end0 = a0.crow[i + 1], end1 = a1.crow[i + 1];
  for (; e0 < end0 && e1 < end1; ++e0, ++e1) {
    add_entry<T>(a0, b0, e0, next0, acc0, sum0, m, j0);
    add_entry<T>(a1, b1, e1, next1, acc1, sum1, m, j0);
  }
  for (; e0 < end0; ++e0) add_entry<T>(a0, b0, e0, next0, acc0, sum0, m, j0);
  for (; e1 < end1; ++e1) add_entry<T>(a1, b1, e1, next1, acc1, sum1, m, j0);
  for (int q = 0; q < kVectors; ++q) {
    L::store(out0 + j0 + q * kStep, L::add(sum0[q], acc0[q]));
    L::store(out1 + j0 + q * kStep, L::add(sum1[q], acc1[q]));
  }
}

// out[i, r] = row i of A_r @ b[r] for every replica r (b (R, k, m), out (n, R, m): the replicas' rows side by
// side, the order in which the attention ops take them), rows outermost so that the replicas' b stay in cache
// together, two replicas' rows at a time.
template <typename T>
void each_product(const std::vector<Csr<T>>& a, const T* b, const int64_t* starts, T* out, int64_t n, int64_t k,
                  int64_t m) {
  const int64_t reps = static_cast<int64_t>(a.size()), width = Lanes<T>::kWidth;
  for (int64_t i = 0; i < n; ++i) {
    T* out_i = out + i * reps * m;
    int64_t j0 = 0;
    if constexpr (Lanes<T>::kWidth > 0) {
      for (; j0 + width <= m; j0 += width) {
        int64_t r = 0;
        for (; r + 1 < reps; r += 2) {
          block_row_pair<T>(a[r], b + r * k * m, out_i + r * m, a[r + 1], b + (r + 1) * k * m, out_i + (r + 1) * m,
                            starts, m, j0, i);
        }
        if (r < reps) block_row<T>(a[r], b + r * k * m, starts, out_i + r * m, m, j0, i);
      }
    }
    if (j0 < m) {
      for (int64_t r = 0; r < reps; ++r) scalar_row<T>(a[r], b + r * k * m, starts, out_i + r * m, m, j0, i);
    }
  }
}

// The replicas' CSR parts as pointers, after checking them: crows[r] (n + 1), cols[r] and values[r] of one
// length (contiguous, int64 indices, values of dense's dtype).
template <typename T>
std::vector<Csr<T>> each_parts(at::TensorList crows, at::TensorList cols, at::TensorList values, const Tensor& dense,
                               int64_t n, int64_t ncols, const char* name) {
  TORCH_CHECK(crows.size() == cols.size() && crows.size() == values.size() &&
                  static_cast<int64_t>(crows.size()) == dense.size(0),
              name, ": one crow, col and values per replica (dense's first dim)");
  std::vector<Csr<T>> parts;
  for (size_t r = 0; r < crows.size(); ++r) {
    const Tensor &c = crows[r], &k = cols[r], &v = values[r];
    TORCH_CHECK(c.scalar_type() == at::kLong && k.scalar_type() == at::kLong && v.scalar_type() == dense.scalar_type()
                    && c.is_contiguous() && k.is_contiguous() && v.is_contiguous() && c.dim() == 1 && c.numel() == n + 1
                    && k.dim() == 1 && v.dim() == 1 && k.numel() == v.numel(),
                name, ": replica ", r, ": contiguous int64 crow (n + 1) and col, values of dense's dtype, one length");
    // the columns are trusted to lie in [0, ncols) (made by to_sparse_csr or keep_csr): a scan of them costs
    // as much as a product's share of them
    TORCH_CHECK(c.data_ptr<int64_t>()[0] == 0 && c.data_ptr<int64_t>()[n] == k.numel(),
                name, ": replica ", r, ": crow from 0 to nnz");
    parts.push_back({c.data_ptr<int64_t>(), k.data_ptr<int64_t>(), v.data_ptr<T>()});
  }
  return parts;
}

std::vector<int64_t> bounds_of(const Tensor& starts, int64_t total, const char* name) {
  TORCH_CHECK(starts.scalar_type() == at::kLong && starts.dim() == 1 && starts.numel() >= 1 &&
                  starts[-1].item<int64_t>() == total,
              name, ": int64 starts ending with the reduction's size ", total);
  const Tensor s = starts.contiguous();
  std::vector<int64_t> bounds(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + s.numel());
  bounds.push_back(INT64_MAX);  // the sentinel past the reduction keeps the block scan in bounds
  return bounds;
}

// Each replica its own CSR matrix A_r (n, k) (crows[r], cols[r], values[r]; the same tensors may serve
// several replicas), dense (R, k, m) -> (n, R, m): [:, r] = A_r @ dense[r] in the dense product's order
// (starts: the k blocks' first indices after 0, then k).
Tensor csr_each_mm_gemm_order(at::TensorList crows, at::TensorList cols, at::TensorList values, const Tensor& dense,
                              const Tensor& starts) {
  TORCH_CHECK(dense.dim() == 3 && crows.size() > 0, "csr_each_mm_gemm_order: dense (R, k, m), R > 0");
  const Tensor b = dense.contiguous();
  const int64_t reps = b.size(0), n = crows[0].numel() - 1, kk = b.size(1), m = b.size(2);
  const std::vector<int64_t> bounds = bounds_of(starts, kk, "csr_each_mm_gemm_order");
  Tensor out = at::empty({n, reps, m}, b.options());
  AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "csr_each_mm_gemm_order", [&] {
    const auto parts = each_parts<scalar_t>(crows, cols, values, b, n, kk, "csr_each_mm_gemm_order");
    each_product<scalar_t>(parts, b.data_ptr<scalar_t>(), bounds.data(), out.data_ptr<scalar_t>(), n, kk, m);
  });
  return out;
}

// The weight gradient's products A_r^T @ dense[r] for the same matrices: dense (R, n, m) -> (R, ncols, m),
// the reduction over the n rows in blocks (starts: the n blocks' first indices after 0, then n).  dense may
// have any strides but a unit one along m (the gradient of csr_each_mm's (n, R, m) result, read in place).
Tensor csr_each_t_mm_gemm_order(at::TensorList crows, at::TensorList cols, at::TensorList values, const Tensor& dense,
                                const Tensor& starts, int64_t ncols) {
  TORCH_CHECK(dense.dim() == 3, "csr_each_t_mm_gemm_order: dense (R, n, m)");
  const Tensor b = dense.stride(2) == 1 ? dense : dense.contiguous();
  const int64_t reps = b.size(0), n = b.size(1), m = b.size(2);
  const std::vector<int64_t> bounds = bounds_of(starts, n, "csr_each_t_mm_gemm_order");
  Tensor out = at::zeros({reps, ncols, m}, b.options());
  Tensor acc = at::empty({ncols, m}, b.options());
  AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "csr_each_t_mm_gemm_order", [&] {
    const auto parts = each_parts<scalar_t>(crows, cols, values, b, n, ncols, "csr_each_t_mm_gemm_order");
    for (int64_t r = 0; r < reps; ++r) {
      acc.zero_();
      transposed_product<scalar_t>(parts[r].crow, parts[r].col, parts[r].val, b.data_ptr<scalar_t>() + r * b.stride(0),
                                   b.stride(1), bounds.data(), out.data_ptr<scalar_t>() + r * ncols * m,
                                   acc.data_ptr<scalar_t>(), n, ncols, m);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(zoo_kernels, m) {
  m.def("csr_mm_gemm_order(Tensor crow, Tensor col, Tensor values, Tensor dense, Tensor starts) -> Tensor");
  m.def("csr_each_mm_gemm_order(Tensor[] crows, Tensor[] cols, Tensor[] values, Tensor dense, Tensor starts) -> Tensor");
  m.def("csr_each_t_mm_gemm_order(Tensor[] crows, Tensor[] cols, Tensor[] values, Tensor dense, Tensor starts, "
        "int ncols) "
        "-> Tensor");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("csr_mm_gemm_order", &csr_mm_gemm_order);
  m.impl("csr_each_mm_gemm_order", &csr_each_mm_gemm_order);
  m.impl("csr_each_t_mm_gemm_order", &csr_each_t_mm_gemm_order);
}
