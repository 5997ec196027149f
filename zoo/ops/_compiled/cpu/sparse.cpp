// Sparse (CSR) times dense on the CPU: out = A @ B, A (n, k) in CSR (crow, col, values), B (k, m) dense
// (or a stack of R such B, each multiplied alone).  zoo/ops/csr.py calls it for the first layer's
// product with constant bag-of-words features (zoo/ops/sparse_linear.py: X @ W^T and the weight
// gradient X^T @ G, every replica's weights side by side in B's columns) and for GCN's propagation
// with constant coefficients (zoo/ops/propagate.py: A @ X, A^T @ G, the replicas stacked).
// Two optional fusions serve a propagation followed by a ReLU (GCN's hidden layers): ``relu`` stores
// relu(A @ B) (torch's clamp_min: 0 where the sum is below 0, NaN kept), and ``gate`` multiplies
// A @ (B where gate > 0, else 0) (torch's threshold_backward(B, gate, 0), NaN in gate keeps B), the
// ReLU's backward read inside the product: each saves a pass over a (R, n, m) tensor, same bits.
//
// Order: every out[i, j] is  ((0 + v_0 * b_0j) + v_1 * b_1j) + ...  over row i's stored entries in
// their order, each product rounded before it is added (no fused multiply-add).  That is the order
// of MKL's CSR product, which torch.sparse.mm runs on x86 builds: the results are bitwise the same
// (tests/ops/compiled/test_sparse_mm.py), so records made with either agree.
// Speed: B's columns are taken in blocks of 4 or 8 SIMD vectors (the columns left over in narrower
// blocks, down to one vector) whose sums stay in registers across a row's entries (one store per
// block), and every row is run over one block before the next, so that block of B is read from
// cache, not memory.  One task per range of rows: every output element is written by one task,
// whatever the thread count.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>

// a product rounded before the sum, as MKL: no contraction into fused multiply-adds
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace {

using at::Tensor;

// A block is 256 bytes of a row of B, 64 floats or 32 doubles: 4 vectors of 64 bytes where the CPU
// has AVX-512 (faster on the first layer's products: docs/notes/performance.md, "The Cornell
// process without torch._dynamo"), else 8 of 32 bytes (GCC / clang vector extensions; on a CPU
// without 32-byte SIMD the compiler splits each into narrower ones).  Every lane sums its own
// column in the order above, so the width changes no bit of the result.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#else
constexpr int kVectorBytes = 32;
#endif
constexpr int kVectors = 256 / kVectorBytes;

template <typename T>
struct Simd {
  typedef T V __attribute__((vector_size(kVectorBytes)));
  static constexpr int64_t kLanes = kVectorBytes / sizeof(T);
  static inline V load(const T* p) { V v; std::memcpy(&v, p, sizeof(V)); return v; }
  static inline void store(T* p, const V& v) { std::memcpy(p, &v, sizeof(V)); }
};

// B's element where the gate lets it through (threshold_backward: 0 where gate <= 0, NaN passes)
template <typename V>
inline V gated(const V& b, const V& gate) { return gate <= V{} ? V{} : b; }
template <typename V>
inline V relu(const V& x) { return x < V{} ? V{} : x; }  // as clamp_min(x, 0): max_ps(0, x)

// row i of A @ B over one block of NV vectors of columns from j0, in registers: the sums in the order of A's entries
template <typename T, bool Gated, int NV>
inline void block_sums(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* gate, int64_t m,
                       int64_t j0, int64_t i, typename Simd<T>::V* acc) {
  using S = Simd<T>;
  for (int q = 0; q < NV; ++q) acc[q] = typename S::V{};
  for (int64_t k = crow[i]; k < crow[i + 1]; ++k) {
    const T v = val[k];
    const int64_t at = col[k] * m + j0;
    for (int q = 0; q < NV; ++q) {
      typename S::V x = S::load(b + at + q * S::kLanes);
      if (Gated) x = gated(x, S::load(gate + at + q * S::kLanes));
      acc[q] = acc[q] + v * x;
    }
  }
}

template <typename T, bool Gated, bool Relu, int NV = kVectors>
void block_rows(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* gate, T* out,
                int64_t m, int64_t j0, int64_t row0, int64_t row1) {
  using S = Simd<T>;
  typename S::V acc[NV];
  for (int64_t i = row0; i < row1; ++i) {
    block_sums<T, Gated, NV>(crow, col, val, b, gate, m, j0, i, acc);
    for (int q = 0; q < NV; ++q) S::store(out + i * m + j0 + q * S::kLanes, Relu ? relu(acc[q]) : acc[q]);
  }
}

template <typename T, bool Gated, bool Relu>
void tail_rows(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* gate, T* out,
               int64_t m, int64_t j0, int64_t row0, int64_t row1) {
  for (int64_t i = row0; i < row1; ++i) {
    for (int64_t j = j0; j < m; ++j) out[i * m + j] = T(0);
    for (int64_t k = crow[i]; k < crow[i + 1]; ++k) {
      const T v = val[k];
      const int64_t at = col[k] * m;
      for (int64_t j = j0; j < m; ++j) {
        const T x = Gated && gate[at + j] <= T(0) ? T(0) : b[at + j];
        out[i * m + j] = out[i * m + j] + v * x;
      }
    }
    if (Relu) {
      for (int64_t j = j0; j < m; ++j) out[i * m + j] = out[i * m + j] < T(0) ? T(0) : out[i * m + j];
    }
  }
}

// The columns left after the full blocks, in blocks of NV, NV / 2, ... vectors (the remainder's binary
// digits; each lane summed as in a full block), advancing j0; tail_rows takes those short of one vector.
// Without them SAN's 32 hidden columns (and GCN's 16) all went through tail_rows, which loads and
// stores the output row once per stored entry.
template <typename T, bool Gated, bool Relu, int NV>
void narrower_blocks(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* gate, T* out,
                     int64_t m, int64_t& j0, int64_t row0, int64_t row1) {
  if constexpr (NV >= 1) {
    if (j0 + NV * Simd<T>::kLanes <= m) {
      block_rows<T, Gated, Relu, NV>(crow, col, val, b, gate, out, m, j0, row0, row1);
      j0 += NV * Simd<T>::kLanes;
    }
    narrower_blocks<T, Gated, Relu, NV / 2>(crow, col, val, b, gate, out, m, j0, row0, row1);
  }
}

template <typename T, bool Gated, bool Relu>
void csr_dense(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* gate, T* out, int64_t n,
               int64_t m) {
  constexpr int64_t width = kVectors * Simd<T>::kLanes;
  at::parallel_for(0, n, 64, [&](int64_t row0, int64_t row1) {
    int64_t j0 = 0;
    for (; j0 + width <= m; j0 += width) block_rows<T, Gated, Relu>(crow, col, val, b, gate, out, m, j0, row0, row1);
    narrower_blocks<T, Gated, Relu, kVectors / 2>(crow, col, val, b, gate, out, m, j0, row0, row1);
    if (j0 < m) tail_rows<T, Gated, Relu>(crow, col, val, b, gate, out, m, j0, row0, row1);
  });
}

// the kernel for this gate / relu pair (each a template flag: the plain product keeps its loop)
template <typename T>
void csr_dense_any(bool gated, bool relu, const int64_t* crow, const int64_t* col, const T* val, const T* b,
                   const T* gate, T* out, int64_t n, int64_t m) {
  if (gated && relu) csr_dense<T, true, true>(crow, col, val, b, gate, out, n, m);
  else if (gated) csr_dense<T, true, false>(crow, col, val, b, gate, out, n, m);
  else if (relu) csr_dense<T, false, true>(crow, col, val, b, gate, out, n, m);
  else csr_dense<T, false, false>(crow, col, val, b, gate, out, n, m);
}

// dense (k, m) -> (n, m); or a stack (R, k, m) -> (R, n, m), each slice the product alone;
// gate: None or dense's shape
Tensor csr_mm(const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& dense,
              const c10::optional<Tensor>& gate, bool relu) {
  TORCH_CHECK(dense.dim() == 2 || dense.dim() == 3, "csr_mm: dense must be (k, m) or (R, k, m)");
  TORCH_CHECK(crow.scalar_type() == at::kLong && col.scalar_type() == at::kLong, "csr_mm: int64 indices");
  TORCH_CHECK(values.scalar_type() == dense.scalar_type(), "csr_mm: values and dense of one dtype");
  const bool gated = gate.has_value() && gate->defined();
  TORCH_CHECK(!gated || (gate->sizes() == dense.sizes() && gate->scalar_type() == dense.scalar_type()),
              "csr_mm: gate must have dense's shape and dtype");
  const Tensor b = dense.contiguous();
  const Tensor g = gated ? gate->contiguous() : Tensor();
  const Tensor c = crow.contiguous(), k = col.contiguous(), v = values.contiguous();
  const bool stacked = b.dim() == 3;
  const int64_t reps = stacked ? b.size(0) : 1, n = c.numel() - 1, kk = b.size(-2), m = b.size(-1);
  Tensor out = stacked ? at::empty({reps, n, m}, b.options()) : at::empty({n, m}, b.options());
  AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "csr_mm", [&] {
    for (int64_t r = 0; r < reps; ++r) {
      const scalar_t* gr = gated ? g.data_ptr<scalar_t>() + r * kk * m : nullptr;
      csr_dense_any<scalar_t>(gated, relu, c.data_ptr<int64_t>(), k.data_ptr<int64_t>(), v.data_ptr<scalar_t>(),
                              b.data_ptr<scalar_t>() + r * kk * m, gr, out.data_ptr<scalar_t>() + r * n * m, n, m);
    }
  });
  return out;
}

// The product's rows folded into an SGD step instead of stored: param[i, j] = fma(-rate[j / c], (A @ B)[i, j],
// param[i, j]), each (A @ B)[i, j] summed as above.  That is torch's addcmul_(param, rate, A @ B, value=-1)
// where its kernel contracts ``param + (-rate) * g`` into one fused multiply-add (one rounding: std::fma
// is exact, so any FMA gives these bits; zoo/ops/sparse_linear.py checks torch's kernel does that
// before it uses this).  Saves writing A @ B and the step's pass reading it back.
template <typename T>
void sgd_rows(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* rate, int64_t c, T* param,
              int64_t m, int64_t j0, int64_t j1, int64_t row0, int64_t row1) {
  T acc[256 / sizeof(T)];
  for (int64_t i = row0; i < row1; ++i) {
    for (int64_t j = j0; j < j1; ++j) acc[j - j0] = T(0);
    for (int64_t k = crow[i]; k < crow[i + 1]; ++k) {
      const T v = val[k];
      const T* row = b + col[k] * m;
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] = acc[j - j0] + v * row[j];
    }
    T* out = param + i * m;
    for (int64_t j = j0; j < j1; ++j) out[j] = std::fma(-rate[j / c], acc[j - j0], out[j]);
  }
}

// sgd_rows over a full block: the sums in registers (block_sums, as block_rows), then the step
template <typename T>
void sgd_block_rows(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* rate, int64_t c,
                    T* param, int64_t m, int64_t j0, int64_t row0, int64_t row1) {
  using S = Simd<T>;
  constexpr int64_t width = kVectors * S::kLanes;
  T neg[width], sums[width];
  for (int64_t j = 0; j < width; ++j) neg[j] = -rate[(j0 + j) / c];
  typename S::V acc[kVectors];
  for (int64_t i = row0; i < row1; ++i) {
    block_sums<T, false, kVectors>(crow, col, val, b, nullptr, m, j0, i, acc);
    for (int q = 0; q < kVectors; ++q) S::store(sums + q * S::kLanes, acc[q]);
    T* out = param + i * m + j0;
    for (int64_t j = 0; j < width; ++j) out[j] = std::fma(neg[j], sums[j], out[j]);
  }
}

template <typename T>
void csr_dense_sgd(const int64_t* crow, const int64_t* col, const T* val, const T* b, const T* rate, int64_t c,
                   T* param, int64_t n, int64_t m) {
  constexpr int64_t width = kVectors * Simd<T>::kLanes;
  at::parallel_for(0, n, 64, [&](int64_t row0, int64_t row1) {
    int64_t j0 = 0;
    for (; j0 + width <= m; j0 += width) sgd_block_rows<T>(crow, col, val, b, rate, c, param, m, j0, row0, row1);
    if (j0 < m) sgd_rows<T>(crow, col, val, b, rate, c, param, m, j0, m, row0, row1);
  });
}

// param (n, m) contiguous, in place: param -= rate[j / c] * (A @ dense) as above; dense (k, m); rate (m / c,)
void csr_mm_sgd_(const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& dense, const Tensor& param,
                 const Tensor& rate, int64_t c) {
  TORCH_CHECK(dense.dim() == 2 && param.dim() == 2 && rate.dim() == 1, "csr_mm_sgd_: dense, param 2-d; rate 1-d");
  TORCH_CHECK(crow.scalar_type() == at::kLong && col.scalar_type() == at::kLong, "csr_mm_sgd_: int64 indices");
  TORCH_CHECK(values.scalar_type() == dense.scalar_type() && param.scalar_type() == dense.scalar_type() &&
              rate.scalar_type() == dense.scalar_type(), "csr_mm_sgd_: one dtype");
  TORCH_CHECK(param.is_contiguous() && param.size(0) == crow.numel() - 1 && param.size(1) == dense.size(1),
              "csr_mm_sgd_: param must be the contiguous (rows, m) product's shape");
  TORCH_CHECK(c > 0 && rate.numel() * c == dense.size(1), "csr_mm_sgd_: one rate per c columns");
  const Tensor b = dense.contiguous(), r = rate.contiguous();
  const Tensor cr = crow.contiguous(), k = col.contiguous(), v = values.contiguous();
  AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "csr_mm_sgd_", [&] {
    csr_dense_sgd<scalar_t>(cr.data_ptr<int64_t>(), k.data_ptr<int64_t>(), v.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                            r.data_ptr<scalar_t>(), c, param.data_ptr<scalar_t>(), param.size(0), param.size(1));
  });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(zoo_kernels, m) {
  m.def("csr_mm(Tensor crow, Tensor col, Tensor values, Tensor dense, Tensor? gate=None, bool relu=False) -> Tensor");
  m.def("csr_mm_sgd_(Tensor crow, Tensor col, Tensor values, Tensor dense, Tensor(a!) param, Tensor rate, int c) -> ()");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("csr_mm", &csr_mm);
  m.impl("csr_mm_sgd_", &csr_mm_sgd_);
}
