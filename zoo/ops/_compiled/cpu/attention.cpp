// Fused graph attention on the CPU: score + softmax + aggregation in one pass per destination,
// and a two-pass backward (by destination, then by source).  See zoo/ops/_compiled/__init__.py
// docstrings for the equations; shapes (H = heads, C, Cv = channels, R = replicas):
//   CSR by destination: crow (N+1), col (E) = sources, perm (E) = original edge id of each slot;
//   CSR by source:      crow_s, col_s = destinations, perm_s.
//   gatv2: e_uv,h = sum_c a_hc LeakyReLU(xs_u,hc + xd_v,hc)          xs, xd ([R,] N,H,C), a ([R,] H,C)
//   gat:   e_uv,h = LeakyReLU(s_u,h + t_v,h [+ b_uv,h])                s, t ([R,] N,H), b ([R,] E,H)
//   both:  alpha = softmax over v's in-edges, out_v,h = sum_u alpha_uv,h k_uv,h x_u,h   x ([R,] N,H,Cv)
//   k: attention dropout's scaled keep mask ([R,] E,H, original edge order: 0 or 1/(1-p)), or none
//   (k = 1); alpha is returned before the mask, as the plain ops' softmax.
// Each forward returns (out, alpha, saved), saved being what its backward takes after out: GAT's
// lse_v,h = log sum_u exp e_uv,h ([R,] N,H; its backward recomputes the cheap scores), GATv2's
// log alpha_uv,h = e_uv,h - lse_v,h ([R,] E,H, original edge order; its backward reads no scores).
// Replicas: every node, edge and parameter tensor may carry a leading replica dimension (the
// stacked models of torch.func.vmap, passed as they are by the vmap rules: no folding copies);
// without one, R = 1.  Replica r is computed by exactly the code that runs for it alone.
// Determinism: every output row is written by exactly one task, each head's arithmetic reads
// only that head's data in a fixed order (SIMD over channels within one head), so a replica's
// numbers do not depend on the number of replicas, on the loop order or on the thread count.
// No atomics.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

using at::Tensor;

// destinations per task of the backward's pass A: the d(att) partial sums are kept per block,
// a constant, so their summation order does not depend on the thread count.
constexpr int64_t kBlock = 32;
// destinations (forward) or sources (pass B) per task unit; with the replicas inner, every
// replica runs over one unit before the next unit (one pass over the graph for all replicas).
constexpr int64_t kRows = 16;

// The product first, then a select: written `z > 0 ? z : z * slope`, GCC compiled GAT's scalar score
// loop (one head) to a compare and a branch on the sign of every score (random: mispredicted half the
// time); this way it is a compare and a blend.  The same value either way (the product is discarded
// where z > 0).
template <typename T>
inline T leaky(T z, T slope) {
  const T negative = z * slope;
  return z > T(0) ? z : negative;
}

template <typename T>
inline T leaky_grad(T z, T slope) { return z > T(0) ? T(1) : slope; }

// Channel counts: the common ones (8 .. 64) are compile-time constants, so the loops over
// channels are fully unrolled SIMD without trip-count checks; others are read at run time.
// Either way the arithmetic order depends on the count alone.
template <int K>
struct Width {
  int64_t runtime;
  inline int64_t operator()() const { return K > 0 ? K : runtime; }
};

// Heads, the same way (a count fixed at compile time or read at run time): one head (every
// balance-paper GATv2) a compile-time constant, so the per-edge loops over heads fold away (the same
// operations per head in the same order: the same bits).
template <int K>
using Heads = Width<K>;

template <typename F>
void with_heads(int64_t h, const F& f) {
  if (h == 1) f(std::integral_constant<int, 1>());
  else f(std::integral_constant<int, 0>());
}

template <typename F>
void with_width(int64_t c, const F& f) {
  switch (c) {
    case 8: f(std::integral_constant<int, 8>()); break;
    case 16: f(std::integral_constant<int, 16>()); break;
    case 32: f(std::integral_constant<int, 32>()); break;
    case 64: f(std::integral_constant<int, 64>()); break;
    default: f(std::integral_constant<int, 0>());
  }
}

// Dot products in kLanes independent partial sums combined in a fixed tree: GCC vectorizes
// these (a plain float sum it may not reorder), and the order depends on C alone, never on the
// number of heads or threads.
constexpr int kLanes = 8;

template <typename T, typename F>
inline T lane_sum(int64_t C, const F& term) {
  T acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= C; c += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += term(c + k);
  T tail = 0;
  for (; c < C; ++c) tail += term(c);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

template <typename T>
inline T dot(const T* __restrict a, const T* __restrict b, int64_t C) {
  return lane_sum<T>(C, [&](int64_t c) { return a[c] * b[c]; });
}

// Eight heads of eight channels at once (float, AVX2): the eight sums ((t0 + t1) + (t2 + t3)) +
// ((t4 + t5) + (t6 + t7)) of eight rows t, in lane_sum's order (its tail is 0 at C = 8; adding it
// changes nothing but the sign of a zero), so the numbers are lane_sum's bitwise.  Narrow heads (the
// Oxford report's 8 x 8) spent most of their time in one horizontal reduction per edge and head.
#if defined(__AVX2__)
inline __m256 sums8(__m256 v0, __m256 v1, __m256 v2, __m256 v3, __m256 v4, __m256 v5, __m256 v6, __m256 v7) {
  const __m256 q0 = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));  // (01 + 23) per half
  const __m256 q1 = _mm256_hadd_ps(_mm256_hadd_ps(v4, v5), _mm256_hadd_ps(v6, v7));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

// e[h] = sum_c w[h, c] LeakyReLU(p[h, c] + q[h, c]) for heads h0 .. h0 + 7 (rows of 8 channels).
inline void gatv2_scores8(const float* p, const float* q, const float* w, float slope, float* e) {
  const __m256 s = _mm256_set1_ps(slope), zero = _mm256_setzero_ps();
  __m256 t[8];
  for (int h = 0; h < 8; ++h) {
    const __m256 z = _mm256_add_ps(_mm256_loadu_ps(p + 8 * h), _mm256_loadu_ps(q + 8 * h));
    const __m256 l = _mm256_blendv_ps(_mm256_mul_ps(z, s), z, _mm256_cmp_ps(z, zero, _CMP_GT_OQ));
    t[h] = _mm256_mul_ps(_mm256_loadu_ps(w + 8 * h), l);
  }
  _mm256_storeu_ps(e, sums8(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]));
}

// d[h] = <a[h, :], b[h, :]> for heads h0 .. h0 + 7 (rows of 8 channels).
inline void dots8(const float* a, const float* b, float* d) {
  __m256 t[8];
  for (int h = 0; h < 8; ++h) t[h] = _mm256_mul_ps(_mm256_loadu_ps(a + 8 * h), _mm256_loadu_ps(b + 8 * h));
  _mm256_storeu_ps(d, sums8(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]));
}
#endif

#if defined(__AVX2__)
constexpr bool kAvx2 = true;
#else
constexpr bool kAvx2 = false;
#endif

// Whether heads go in blocks of eight (float rows of 8 channels on an AVX2 CPU); the heads past the
// last full block, and every other case, go one by one through lane_sum.
template <typename T, int K>
constexpr bool kEightWide = kAvx2 && std::is_same<T, float>::value && K == 8;

// acc[c] += w * x[c]: element-wise, so its rounding does not depend on how it is vectorized.
template <typename T>
inline void axpy(T* __restrict acc, T w, const T* __restrict x, int64_t C) {
  for (int64_t c = 0; c < C; ++c) acc[c] += w * x[c];
}

// exp(x) for x <= 0 (softmax terms: x = score - row max, or score - log-sum-exp), written so
// that GCC vectorizes a loop over a row's (edge, head) buffer — std::exp is a scalar libm call
// per element.  Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, then a Taylor polynomial of
// exp(r) in Horner form: degree 7 for float (truncation < 5e-9 relative, below float's 6e-8
// epsilon), 13 for double (< 1e-17).  Below the smallest normal result (x < -87 / -708) it
// returns 0 (std::exp: a subnormal); NaN stays NaN.  A fixed sequence of operations: the same
// result for the same x, whatever the row length or loop order.
template <typename T>
struct ExpConst;
template <>
struct ExpConst<float> {
  using Int = int32_t;
  static constexpr float lo = -87.0f, log2e = 1.44269504088896341f;
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  static constexpr int degree = 7, mantissa = 23, bias = 127;
};
template <>
struct ExpConst<double> {
  using Int = int64_t;
  static constexpr double lo = -708.0, log2e = 1.4426950408889634074;
  static constexpr double ln2_hi = 6.93145751953125e-1, ln2_lo = 1.42860682030941723212e-6;
  static constexpr int degree = 13, mantissa = 52, bias = 1023;
};

struct InverseFactorials {  // 1 / i!, i = 0 .. 13, at compile time
  double v[14];
  constexpr InverseFactorials() : v() {
    v[0] = 1.0;
    for (int i = 1; i < 14; ++i) v[i] = v[i - 1] / i;
  }
};
constexpr InverseFactorials kInverseFactorial{};

template <typename T>
inline T exp_nonpositive(T x) {
  using K = ExpConst<T>;
  using Int = typename K::Int;
  const T xc = (x < K::lo || x != x) ? K::lo : x;  // (NaN: any finite value here, returned below)
  const T k = std::nearbyint(xc * K::log2e);
  const T r = (xc - k * K::ln2_hi) - k * K::ln2_lo;
  T p = static_cast<T>(kInverseFactorial.v[K::degree]);  // Horner: sum_i r^i / i!
  for (int i = K::degree - 1; i >= 0; --i) p = p * r + static_cast<T>(kInverseFactorial.v[i]);
  const Int bits = (static_cast<Int>(k) + K::bias) << K::mantissa;
  T scale;
  std::memcpy(&scale, &bits, sizeof(T));
  return x != x ? x : x < K::lo ? T(0) : p * scale;
}

// e[k] = exp(e[k] - shift[k % H]) over a row buffer (deg x H): one vectorizable loop.  Out of line, here
// and in exp_in_place: inlined into a pass, GCC compiled the loop to scalar code (the forward 1.4x as long).
template <typename T>
__attribute__((noinline)) void exp_shifted(T* __restrict e, const T* __restrict shift, int64_t deg, int64_t H) {
  if (H == 1) {  // one head: one flat loop over the edges (the same arithmetic per element)
    const T s0 = shift[0];
    for (int64_t j = 0; j < deg; ++j) e[j] = exp_nonpositive(e[j] - s0);
    return;
  }
  for (int64_t j = 0; j < deg; ++j)
    for (int64_t h = 0; h < H; ++h) e[j * H + h] = exp_nonpositive(e[j * H + h] - shift[h]);
}

// e[k] = exp(e[k]) for k < count (e <= 0: log alpha).
template <typename T>
__attribute__((noinline)) void exp_in_place(T* __restrict e, int64_t count) {
  for (int64_t k = 0; k < count; ++k) e[k] = exp_nonpositive(e[k]);
}

template <typename T>
std::vector<T>& scratch(int slot) {  // per-thread row buffers, reused across calls
  static thread_local std::vector<T> buffers[5];
  return buffers[slot];
}

struct Csr {
  const int64_t* crow;
  const int64_t* col;
  const int64_t* perm;
  int64_t nnz;  // E
};

inline Csr csr_of(const Tensor& crow, const Tensor& col, const Tensor& perm) {
  return {crow.data_ptr<int64_t>(), col.data_ptr<int64_t>(), perm.data_ptr<int64_t>(), col.numel()};
}

// ------------------------------------------------------------------------------- prefetch

// The passes gather rows where a CSR slot points: a node's row by col[slot] (the scores' and the
// aggregation's x_u, pass B's g_v and x_dst v), a per-edge row by perm[slot] (pass B's d e and
// alpha k, written by pass A in the original edge order, which is the destination order for the
// graphs built here, so pass B's reads jump).  The hardware prefetcher cannot guess those
// addresses, and one edge's work (every head and channel) is long enough that the out-of-order
// core does not reach the next edge's loads before the current ones stall: on Amazon Computers
// (rows of 40 x 8 floats, 80 MB per-edge buffers) the first load of each row was most of the
// passes' samples.  So each loop asks for the rows of the slot kAhead edges on (the next
// destination's or source's included) while it works on this one.  Hints only: no arithmetic and
// no order changes.  Distances 1 to 8 measured alike on Amazon Computers; 0 is without.
constexpr int64_t kAhead = 4;

// x86: the instruction itself, as volatile asm.  GCC (-O3, this file) deleted every
// __builtin_prefetch / _mm_prefetch here once the distance was a compile-time constant (0
// prefetch instructions in the object, none of the gain); an asm statement it must keep.
inline void prefetch_row(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  for (int64_t o = 0; o < bytes; o += 64) asm volatile("prefetcht0 %0" : : "m"(c[o]));
#elif defined(__GNUC__)
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o);
#else
  (void)c; (void)bytes;
#endif
}

// The row of `len` elements at base + index[slot + kAhead] * len, if that slot exists (slots < nnz).
template <typename T>
inline void prefetch_ahead(const T* base, const int64_t* index, int64_t slot, int64_t nnz, int64_t len) {
  if (slot + kAhead < nnz) prefetch_row(base + index[slot + kAhead] * len, len * sizeof(T));
}

void check_graph(const Tensor& crow, const Tensor& col, const Tensor& perm, int64_t n) {
  TORCH_CHECK(crow.scalar_type() == at::kLong && col.scalar_type() == at::kLong && perm.scalar_type() == at::kLong,
              "zoo kernels: graph index tensors must be int64");
  TORCH_CHECK(crow.dim() == 1 && crow.numel() == n + 1, "zoo kernels: crow must be (N + 1,), got ", crow.sizes());
  TORCH_CHECK(col.numel() == perm.numel(), "zoo kernels: col and perm must both be (E,)");
}

// ------------------------------------------------------------------------------- replicas

struct Replicas {
  int64_t count;  // R (1 without a replica dimension)
  bool outer;     // replica by replica over the graph (one replica's rows stay in cache), or
                  // all replicas per unit of kRows rows (one pass over the graph)
};

// task(begin, end, r) over units [begin, end) of replica r; every (unit, replica) exactly once.
template <typename Task>
void for_replicas(const Replicas& reps, int64_t units, int64_t group, const Task& task) {
  if (reps.outer || reps.count == 1) {
    for (int64_t r = 0; r < reps.count; ++r)
      at::parallel_for(0, units, group, [&](int64_t b, int64_t e) { task(b, e, r); });
    return;
  }
  const int64_t groups = (units + group - 1) / group;
  at::parallel_for(0, groups, 1, [&](int64_t gb, int64_t ge) {
    for (int64_t gi = gb; gi < ge; ++gi)
      for (int64_t r = 0; r < reps.count; ++r) task(gi * group, std::min(units, (gi + 1) * group), r);
  });
}

// The shapes of one call: node tensors ([R,] N, H, C), the replica dimension present or not.
struct Dims {
  bool batched;
  int64_t R, n, H;
};

Dims node_dims(const Tensor& t, int64_t per_replica_dims, const char* what) {
  TORCH_CHECK(t.dim() == per_replica_dims || t.dim() == per_replica_dims + 1, "zoo kernels: ", what, " must have ",
              per_replica_dims, " dims (one replica) or ", per_replica_dims + 1, " (replicas first), got ", t.sizes());
  const bool batched = t.dim() == per_replica_dims + 1;
  const int64_t o = batched ? 1 : 0;
  return {batched, batched ? t.size(0) : 1, t.size(o), t.size(o + 1)};
}

void check_like(const Tensor& t, const Dims& d, std::vector<int64_t> per_replica, const char* what) {
  if (d.batched) per_replica.insert(per_replica.begin(), d.R);
  TORCH_CHECK(t.sizes().vec() == per_replica, "zoo kernels: ", what, " must be ", at::IntArrayRef(per_replica),
              " (the values' replicas, nodes and heads), got ", t.sizes());
}

std::vector<int64_t> with_replicas(const Dims& d, std::vector<int64_t> per_replica) {
  if (d.batched) per_replica.insert(per_replica.begin(), d.R);
  return per_replica;
}

// Attention dropout's scaled keep mask ([R,] E, H, original edge order, the values' dtype), or undefined.
Tensor keep_of(const std::optional<Tensor>& keep, const Dims& d, int64_t E, int64_t H, const Tensor& values) {
  if (!keep.has_value() || !keep->defined()) return Tensor();
  TORCH_CHECK(keep->scalar_type() == values.scalar_type(), "zoo kernels: keep must have the values' dtype");
  check_like(*keep, d, {E, H}, "keep");
  return keep->contiguous();
}

template <typename T>
const T* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; }

// ------------------------------------------------------------------------------- scorers

// Score of every in-edge of v (row slots [a, b)), all heads, into e (deg x H).
template <typename T, bool V2, int K, int KH = 0>
struct Scorer;

template <typename T, int K, int KH>
struct Scorer<T, true, K, KH> {  // GATv2
  const T *xs, *xd, *att;
  int64_t n;
  Heads<KH> heads;
  Width<K> C;
  T slope;
  Scorer replica(int64_t r) const {
    const int64_t node = n * heads() * C(), par = heads() * C();
    return {xs + r * node, xd + r * node, att + r * par, n, heads, C, slope};
  }
  inline void row(const Csr& g, int64_t v, int64_t a, int64_t b, T* e) const {
    const int64_t H = heads(), c_ = C();
    const T* xv = xd + v * H * c_;
    for (int64_t j = a; j < b; ++j) {
      const T* xu = xs + g.col[j] * H * c_;
      prefetch_ahead(xs, g.col, j, g.nnz, H * c_);
      int64_t h = 0;
#if defined(__AVX2__)
      if constexpr (kEightWide<T, K>)
        for (; h + 8 <= H; h += 8)
          gatv2_scores8(xu + h * 8, xv + h * 8, att + h * 8, slope, e + (j - a) * H + h);
#endif
      for (; h < H; ++h) {
        const T* p = xu + h * c_; const T* q = xv + h * c_; const T* w = att + h * c_;
        const T sl = slope;
        e[(j - a) * H + h] = lane_sum<T>(c_, [&](int64_t c) { return w[c] * leaky(p[c] + q[c], sl); });
      }
    }
  }
};

template <typename T, int K, int KH>
struct Scorer<T, false, K, KH> {  // GAT (+ optional edge term, original edge order)
  const T *s, *t, *bias;
  int64_t n, E;
  Heads<KH> heads;
  T slope;
  Scorer replica(int64_t r) const {
    const int64_t H = heads();
    return {s + r * n * H, t + r * n * H, bias ? bias + r * E * H : nullptr, n, E, heads, slope};
  }
  inline void row(const Csr& g, int64_t v, int64_t a, int64_t b, T* e) const {
    const int64_t H = heads();
    const T* tv = t + v * H;
    for (int64_t j = a; j < b; ++j) {
      const T* su = s + g.col[j] * H;
      const T* bj = bias ? bias + g.perm[j] * H : nullptr;
      for (int64_t h = 0; h < H; ++h) {
        T z = su[h] + tv[h];
        if (bj) z += bj[h];
        e[(j - a) * H + h] = leaky(z, slope);
      }
    }
  }
};

// ------------------------------------------------------------------------------- passes

// Forward: per destination, scores (row buffer), softmax per head, accumulate alpha * x_u.
// With `sp` (GATv2), also each edge's log alpha = score - lse ([R,] E, H, original order): the backward's
// alpha is exp(score - lse), and reading these spares it the scores (most of its per-edge work but for
// the gradients themselves); the same subtraction of the same numbers as the backward did, so the same bits.
template <typename T, typename S, int K, int KH>
void forward_impl(const S& scorer, const T* xp, const T* kp, const Csr& g, int64_t n, int64_t E, Heads<KH> heads,
                  Width<K> width, const Replicas& reps, T* op, T* ap, T* lp, T* sp) {
  const int64_t Cv = width();
  for_replicas(reps, n, kRows, [&](int64_t begin, int64_t end, int64_t r) {
    const int64_t H = heads();  // (here, not captured: a constant for one head)
    const S sc = scorer.replica(r);
    const T* x = xp + r * n * H * Cv;
    const T* keep = kp ? kp + r * E * H : nullptr;
    T* o = op + r * n * H * Cv; T* al = ap + r * E * H; T* ls = lp + r * n * H;
    T* la = sp ? sp + r * E * H : nullptr;
    std::vector<T>& e = scratch<T>(0);
    std::vector<T>& m = scratch<T>(1);
    std::vector<T>& l = scratch<T>(2);
    std::vector<T>& raw = scratch<T>(3);
    m.resize(H); l.resize(H);
    for (int64_t v = begin; v < end; ++v) {
      const int64_t a = g.crow[v], b = g.crow[v + 1];
      T* ov = o + v * H * Cv;
      for (int64_t k = 0; k < H * Cv; ++k) ov[k] = T(0);
      if (a == b) {
        for (int64_t h = 0; h < H; ++h) ls[v * H + h] = -std::numeric_limits<T>::infinity();
        continue;
      }
      e.resize((b - a) * H);
      sc.row(g, v, a, b, e.data());
      if (la) raw.assign(e.begin(), e.begin() + (b - a) * H);  // the scores, before exp_shifted takes them
      // The row's scores are in a task-local buffer, so the softmax needs no online rescaling:
      // the max first, then one exp per edge and head (p, kept in the buffer for alpha).
      const int64_t deg = b - a;
      // each head's max in a local over its edges in order (the same std::max calls as edge by edge
      // with every head's max in the buffer, which GCC stored and reloaded once per edge)
      for (int64_t h = 0; h < H; ++h) {
        T mh = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < deg; ++j) mh = std::max(mh, e[j * H + h]);
        m[h] = mh;
        l[h] = T(0);
      }
      exp_shifted(e.data(), m.data(), deg, H);  // p = exp(e - max), kept in the buffer for alpha
      for (int64_t j = a; j < b; ++j) {
        const T* xu = x + g.col[j] * H * Cv;
        prefetch_ahead(x, g.col, j, g.nnz, H * Cv);
        const T* kj = keep ? keep + g.perm[j] * H : nullptr;
        for (int64_t h = 0; h < H; ++h) {
          const T p = e[(j - a) * H + h];
          l[h] += p;
          axpy(ov + h * Cv, kj ? p * kj[h] : p, xu + h * Cv, Cv);
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        const T inv = T(1) / l[h];
        T* acc = ov + h * Cv;
        for (int64_t c = 0; c < Cv; ++c) acc[c] *= inv;
        ls[v * H + h] = m[h] + std::log(l[h]);
        l[h] = inv;
      }
      for (int64_t j = a; j < b; ++j)
        for (int64_t h = 0; h < H; ++h)
          al[g.perm[j] * H + h] = e[(j - a) * H + h] * l[h];
      if (la)
        for (int64_t j = a; j < b; ++j)
          for (int64_t h = 0; h < H; ++h) la[g.perm[j] * H + h] = raw[(j - a) * H + h] - ls[v * H + h];
    }
  });
}

// The backward's alpha of v's in-edges (row slots [a, b), deg x H into e), two ways:
// GAT recomputes the scores (a sum of two node terms: cheaper than storing them) and shifts by lse;
template <typename T, typename S>
struct ScoredAlpha {
  S sc;
  const T* lse;  // ([R,] N, H)
  int64_t n, H;
  ScoredAlpha replica(int64_t r) const { return {sc.replica(r), lse + r * n * H, n, H}; }
  inline void row(const Csr& g, int64_t v, int64_t a, int64_t b, T* e) const {
    sc.row(g, v, a, b, e);
    exp_shifted(e, lse + v * H, b - a, H);
  }
};

// GATv2 reads the log alpha its forward saved (forward_impl's `sp`): exp(score - lse), the same bits.
template <typename T>
struct SavedAlpha {
  const T* log_alpha;  // ([R,] E, H), original edge order
  int64_t E, H;
  SavedAlpha replica(int64_t r) const { return {log_alpha + r * E * H, E, H}; }
  inline void row(const Csr& g, int64_t, int64_t a, int64_t b, T* e) const {
    for (int64_t j = a; j < b; ++j)
      for (int64_t h = 0; h < H; ++h) e[(j - a) * H + h] = log_alpha[g.perm[j] * H + h];
    exp_in_place(e, (b - a) * H);
  }
};

// Backward pass A, by destination: alpha (`alphas`: ScoredAlpha or SavedAlpha), d alpha = k <g_v, x_u> (+ grad_alpha),
// de = alpha (d alpha - delta_v) with delta_v = <g_v, out_v> (+ sum alpha grad_alpha);
// writes de and alpha k per edge (original order, replica r at r * E * H) for pass B — or, with
// de_p and al_p null (the one-pass backward), only into a buffer of this edge's H values — and
// calls `dst_part(blk, v, j, r, de_j, alk_j)` with this edge's de and alpha k (H values each) for
// the destination-side gradients (dx_dst / dt and d att partials); then, without the buffers,
// `row_part(v, a, b, r, de_row, alk_row)` with the row's (deg x H values each, slot order).
// `zeroed`: rows ([R,] N, len) set to zero as each destination v comes up, before its edges (the
// rows dst_part adds into: no separate pass over the whole tensor, and the row is in cache after).
// `done(v, r)`: after every destination v of replica r, in the traversal's order (isolated ones too).
template <typename T>
struct Rows {
  T* base;  // or null: none
  int64_t len;
};

template <typename T, typename A, int K, typename DstPart, typename RowPart, typename Done>
void pass_a(const A& alphas, const T* xp, const T* kp, const T* gp, const T* ga, const T* op,
            const Csr& g, int64_t n, int64_t E, int64_t H, Width<K> width, const Replicas& reps, T* de_p, T* al_p,
            Rows<T> zeroed, const DstPart& dst_part, const RowPart& row_part, const Done& done) {
  const int64_t Cv = width();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  for_replicas(reps, blocks, 1, [&](int64_t bb, int64_t be, int64_t r) {
    const A alpha_of = alphas.replica(r);
    const T* x = xp + r * n * H * Cv; const T* gr = gp + r * n * H * Cv; const T* o = op + r * n * H * Cv;
    const T* gar = ga ? ga + r * E * H : nullptr;
    const T* keep = kp ? kp + r * E * H : nullptr;
    T* de = de_p ? de_p + r * E * H : nullptr; T* alr = al_p ? al_p + r * E * H : nullptr;
    T* zr = zeroed.base ? zeroed.base + r * n * zeroed.len : nullptr;
    std::vector<T>& e = scratch<T>(0);
    std::vector<T>& delta = scratch<T>(1);
    std::vector<T>& dot_buf = scratch<T>(2);
    std::vector<T>& de_buf = scratch<T>(3);
    std::vector<T>& al_buf = scratch<T>(4);
    delta.resize(H);
    dot_buf.resize(H);
    const bool store = de_p != nullptr;
    for (int64_t blk = bb; blk < be; ++blk) {
      for (int64_t v = blk * kBlock; v < std::min(n, (blk + 1) * kBlock); ++v) {
        const int64_t a = g.crow[v], b = g.crow[v + 1];
        if (zr) std::fill(zr + v * zeroed.len, zr + (v + 1) * zeroed.len, T(0));
        if (a == b) {
          done(v, r);
          continue;
        }
        e.resize((b - a) * H);
        if (!store) { de_buf.resize((b - a) * H); al_buf.resize((b - a) * H); }
        alpha_of.row(g, v, a, b, e.data());
        const T* gv = gr + v * H * Cv;
        for (int64_t h = 0; h < H; ++h) delta[h] = dot(gv + h * Cv, o + v * H * Cv + h * Cv, Cv);
        if (gar) {
          for (int64_t j = a; j < b; ++j)
            for (int64_t h = 0; h < H; ++h) delta[h] += e[(j - a) * H + h] * gar[g.perm[j] * H + h];
        }
        for (int64_t j = a; j < b; ++j) {
          const T* xu = x + g.col[j] * H * Cv;
          prefetch_ahead(x, g.col, j, g.nnz, H * Cv);
          const int64_t id = g.perm[j];
          T* dots = dot_buf.data();
          int64_t h0 = 0;
#if defined(__AVX2__)
          if constexpr (kEightWide<T, K>)
            for (; h0 + 8 <= H; h0 += 8) dots8(gv + h0 * 8, xu + h0 * 8, dots + h0);
#endif
          for (; h0 < H; ++h0) dots[h0] = dot(gv + h0 * Cv, xu + h0 * Cv, Cv);
          T* dej = store ? de + id * H : de_buf.data() + (j - a) * H;
          T* alj = store ? alr + id * H : al_buf.data() + (j - a) * H;
          for (int64_t h = 0; h < H; ++h) {
            T da = dots[h];
            if (keep) da *= keep[id * H + h];
            if (gar) da += gar[id * H + h];
            const T al = e[(j - a) * H + h];
            dej[h] = al * (da - delta[h]);
            alj[h] = keep ? al * keep[id * H + h] : al;  // the weight of x_u in out_v
          }
          dst_part(blk, v, j, r, static_cast<const T*>(dej), static_cast<const T*>(alj));
        }
        if (!store) row_part(v, a, b, r, static_cast<const T*>(de_buf.data()), static_cast<const T*>(al_buf.data()));
        done(v, r);
      }
    }
  });
}

// Backward pass B, by source: d values_u = sum_v alpha_uv g_v, plus `src_part(u, r)` (dx_src / ds).
template <typename T, int K, typename SrcPart>
void pass_b(const T* gp, const Csr& gs, int64_t n, int64_t E, int64_t H, Width<K> width, const Replicas& reps,
            const T* al_p, T* dx_p, const SrcPart& src_part) {
  const int64_t Cv = width();
  for_replicas(reps, n, kRows, [&](int64_t begin, int64_t end, int64_t r) {
    const T* gr = gp + r * n * H * Cv; const T* al = al_p + r * E * H; T* dx = dx_p + r * n * H * Cv;
    for (int64_t u = begin; u < end; ++u) {
      T* du = dx + u * H * Cv;
      for (int64_t k = 0; k < H * Cv; ++k) du[k] = T(0);
      for (int64_t k = gs.crow[u]; k < gs.crow[u + 1]; ++k) {
        const T* gv = gr + gs.col[k] * H * Cv;
        const int64_t id = gs.perm[k];
        prefetch_ahead(gr, gs.col, k, E, H * Cv);
        prefetch_ahead(al, gs.perm, k, E, H);
        for (int64_t h = 0; h < H; ++h) axpy(du + h * Cv, al[id * H + h], gv + h * Cv, Cv);
      }
      src_part(u, r);
    }
  });
}

// ------------------------------------------------------------------------------- one pass

// dx_src u += de w LeakyReLU'(x_src u + x_dst v) for one edge, every head: the term pass B adds
// (its loop, for the one-pass backward).  Contraction off: pass B's loop compiles to separate
// products and sums (no FMA), and GCC fuses the same expression into an FMA in other contexts
// (pass A's dx_dst loop); so that the one pass gives pass B's bits, this function never fuses.
// Not inlined into the FMA-contracting caller (GCC does not inline across optimize options):
// source_row below calls it for a destination's edges.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
template <typename T, int K>
void source_terms(const T* __restrict xu, const T* __restrict xv, const T* __restrict w, const T* __restrict dej,
                  T s, int64_t H, Width<K> width, T* __restrict du) {
  const int64_t C = width();
  for (int64_t h = 0; h < H; ++h) {
    const T d = dej[h];
    const T *p = xu + h * C, *q = xv + h * C, *wh = w + h * C;
    T* __restrict dh = du + h * C;
    for (int64_t c = 0; c < C; ++c) dh[c] += d * wh[c] * leaky_grad(p[c] + q[c], s);
  }
}

// source_terms for a destination's in-edges (slots of `cols`, de per slot and head): one call per
// destination instead of one per edge; every source row still gets its terms in slot order.
template <typename T, int K>
void source_row(const int64_t* cols, int64_t deg, const T* xs, const T* xv, const T* w, const T* de, T s, int64_t H,
                Width<K> width, T* ds) {
  const int64_t row = H * width();
  for (int64_t k = 0; k < deg; ++k)
    source_terms<T, K>(xs + cols[k] * row, xv, w, de + k * H, s, H, width, ds + cols[k] * row);
}
#pragma GCC pop_options

// Whether the GATv2 backward runs as one pass by destination, adding each edge's source-side terms
// (pass B's dx_src and d values rows) into the source rows as it goes, instead of a second pass by
// source.  Pass B sums a source's edges in its CSR slot order; the one pass adds them in the
// destination traversal's order, which is the same sequence when (a) the by-destination slots are
// the original edge order (perm the identity: every graph built here, whose edges are sorted by
// destination) and (b) each source's slots list its edges in ascending original id (the stable sort
// that builds the CSR by source).  Then every row gets the same terms in the same order from zero:
// the same bits.  (c) One task: the source rows are written from every destination's task, so with
// several threads the two passes stay (they write each row from one task).  O(E) index reads.
bool one_pass(const Tensor& crow, const Tensor& col, const Tensor& perm, const Tensor& crow_s, const Tensor& col_s,
              const Tensor& perm_s) {
  if (at::get_num_threads() > 1 && !at::in_parallel_region()) return false;
  const int64_t n = crow.numel() - 1, E = col.numel();
  if (crow_s.numel() != n + 1 || perm.numel() != E || perm_s.numel() != E) return false;
  const int64_t* p = perm.data_ptr<int64_t>();
  for (int64_t j = 0; j < E; ++j)
    if (p[j] != j) return false;
  const int64_t* rs = crow_s.data_ptr<int64_t>();
  const int64_t* ps = perm_s.data_ptr<int64_t>();
  for (int64_t u = 0; u < n; ++u)
    for (int64_t k = rs[u] + 1; k < rs[u + 1]; ++k)
      if (ps[k] <= ps[k - 1]) return false;
  return true;
}

bool gatv2_one_pass_backward(const Tensor& crow, const Tensor& col, const Tensor& perm, const Tensor& crow_s,
                             const Tensor& col_s, const Tensor& perm_s) {
  check_graph(crow, col, perm, crow.numel() - 1);
  check_graph(crow_s, col_s, perm_s, crow.numel() - 1);
  return one_pass(crow, col, perm, crow_s, col_s, perm_s);
}

// ------------------------------------------------------------------------------------ GATv2

// The summed backward (one tensor passed as x_src, x_dst and values, GATv2 with shared weights):
// its gradient row k is (d values_k + d x_dst k) + d x_src k, the order in which autograd sums the
// three gradients of one tensor (so the same bits as returning them apart).  In the one pass, row
// k's three parts are final once destination k is done (d x_dst k) and every edge out of k (its d
// values and d x_src terms, added at their destinations): after destination max(k, the last
// destination k sends to).  Summed there, two of the three rows are still in cache, where a pass
// over the three whole tensors afterwards reads them all again.
struct SumSchedule {
  std::vector<int64_t> start;  // (N + 1): the rows summed after destination v are rows[start[v] .. start[v + 1])
  std::vector<int64_t> rows;   // (N)
};

SumSchedule sum_schedule(const Csr& gs, int64_t n) {
  SumSchedule sched{std::vector<int64_t>(n + 2, 0), std::vector<int64_t>(n)};
  std::vector<int64_t> at(n);
  for (int64_t k = 0; k < n; ++k) {
    int64_t t = k;
    for (int64_t j = gs.crow[k]; j < gs.crow[k + 1]; ++j) t = std::max(t, gs.col[j]);
    at[k] = t;
    ++sched.start[t + 2];
  }
  for (int64_t v = 0; v < n; ++v) sched.start[v + 2] += sched.start[v + 1];  // start[v + 1]: where v's rows go
  for (int64_t k = 0; k < n; ++k) sched.rows[sched.start[at[k] + 1]++] = k;  // (then start[v + 1] = end of v's)
  sched.start.pop_back();
  return sched;
}

// d values row += d x_dst row, then += d x_src row, element by element (autograd's two additions).
template <typename T>
inline void sum_row(T* __restrict dv, const T* __restrict dd, const T* __restrict ds, int64_t len) {
  for (int64_t i = 0; i < len; ++i) dv[i] = (dv[i] + dd[i]) + ds[i];
}

std::tuple<Tensor, Tensor, Tensor> gatv2_forward(const Tensor& x_src_, const Tensor& x_dst_, const Tensor& values_,
                                                 const Tensor& att_, const Tensor& crow, const Tensor& col,
                                                 const Tensor& perm, const Tensor& crow_s, const Tensor& col_s,
                                                 const Tensor& perm_s, double slope, bool replicas_outer,
                                                 const std::optional<Tensor>& keep_) {
  const Dims d = node_dims(x_src_, 3, "x_src");
  const int64_t n = d.n, H = d.H, C = x_src_.size(-1);
  check_like(x_dst_, d, {n, H, C}, "x_dst");
  check_like(att_, d, {H, C}, "att");
  const int64_t Cv = values_.size(-1);
  check_like(values_, d, {n, H, Cv}, "values");
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);  // (used by the backward only: checked where they enter)
  auto x_src = x_src_.contiguous(), x_dst = x_dst_.contiguous(), values = values_.contiguous(),
       att = att_.contiguous();
  const int64_t E = col.numel();
  const Tensor keep = keep_of(keep_, d, E, H, values);
  auto out = at::empty(values.sizes(), values.options());
  auto alpha = at::empty(with_replicas(d, {E, H}), values.options());
  auto log_alpha = at::empty(with_replicas(d, {E, H}), values.options());  // what the backward reads
  const Replicas reps{d.R, replicas_outer};
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gatv2_forward", [&] {
    using T = scalar_t;
    with_width(C == Cv ? C : 0, [&](auto tag) {
      constexpr int K = decltype(tag)::value;
      with_heads(H, [&](auto htag) {
        constexpr int KH = decltype(htag)::value;
        Scorer<T, true, K, KH> sc{x_src.data_ptr<T>(), x_dst.data_ptr<T>(), att.data_ptr<T>(), n, Heads<KH>{H},
                                  Width<K>{C}, static_cast<T>(slope)};
        std::vector<T> lse(d.R * n * H);  // the softmax's own: the backward reads log_alpha
        forward_impl<T>(sc, values.data_ptr<T>(), ptr_or_null<T>(keep), csr_of(crow, col, perm), n, E, Heads<KH>{H},
                        Width<K>{Cv}, reps, out.data_ptr<T>(), alpha.data_ptr<T>(), lse.data(), log_alpha.data_ptr<T>());
      });
    });
  });
  return {out, alpha, log_alpha};
}

// `summed`: d values returned as (d values + d x_dst) + d x_src (SumSchedule), the other two undefined.
std::tuple<Tensor, Tensor, Tensor, Tensor> gatv2_backward_impl(
    const Tensor& grad_out_, const std::optional<Tensor>& grad_alpha_, const Tensor& x_src_, const Tensor& x_dst_,
    const Tensor& values_, const Tensor& att_, const Tensor& out_, const Tensor& log_alpha_, const Tensor& crow,
    const Tensor& col, const Tensor& perm, const Tensor& crow_s, const Tensor& col_s, const Tensor& perm_s,
    double slope, bool replicas_outer, const std::optional<Tensor>& keep_, bool summed) {
  const Dims d = node_dims(x_src_, 3, "x_src");
  const int64_t n = d.n, H = d.H, C = x_src_.size(-1), Cv = values_.size(-1), E = col.numel();
  TORCH_CHECK(!summed || C == Cv, "zoo kernels: the summed GATv2 backward needs values shaped like x_src");
  const Tensor keep = keep_of(keep_, d, E, H, values_);
  check_like(x_dst_, d, {n, H, C}, "x_dst");
  check_like(att_, d, {H, C}, "att");
  check_like(values_, d, {n, H, Cv}, "values");
  check_like(grad_out_, d, {n, H, Cv}, "grad_out");
  check_like(out_, d, {n, H, Cv}, "out");
  check_like(log_alpha_, d, {E, H}, "log_alpha");
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);
  auto x_src = x_src_.contiguous(), x_dst = x_dst_.contiguous(), values = values_.contiguous(),
       att = att_.contiguous(), grad_out = grad_out_.contiguous(), out = out_.contiguous(),
       log_alpha = log_alpha_.contiguous();
  Tensor grad_alpha;
  if (grad_alpha_.has_value() && grad_alpha_->defined()) {
    grad_alpha = grad_alpha_->contiguous();
    check_like(grad_alpha, d, {E, H}, "grad_alpha");
  }
  const int64_t blocks = (n + kBlock - 1) / kBlock, R = d.R;
  const bool one = one_pass(crow, col, perm, crow_s, col_s, perm_s);
  // the one pass adds into the source rows edge by edge: they start at zero (pass B zeroes its own)
  // (pass A zeroes each destination row of d_dst as it comes to it)
  auto d_src = one ? at::zeros_like(x_src) : at::empty_like(x_src), d_dst = at::empty_like(x_dst),
       d_val = one ? at::zeros_like(values) : at::empty_like(values);
  auto d_att = at::zeros_like(att);
  const Replicas reps{R, replicas_outer};
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gatv2_backward", [&] {
    using T = scalar_t;
    with_width(C == Cv ? C : 0, [&](auto tag) {
      constexpr int K = decltype(tag)::value;
      const Width<K> cw{C}, vw{Cv};
      const int64_t Cc = cw(), Cw = vw();
      const T s = static_cast<T>(slope);
      const T *xs0 = x_src.data_ptr<T>(), *xd0 = x_dst.data_ptr<T>(), *w0 = att.data_ptr<T>(),
              *g0 = grad_out.data_ptr<T>();
      // per-edge de and alpha k for pass B (every slot written by pass A); none for the one pass
      std::unique_ptr<T[]> de(one ? nullptr : new T[R * E * H]), al(one ? nullptr : new T[R * E * H]);
      std::vector<T> part(R * blocks * H * Cc, T(0));
      const SavedAlpha<T> alphas{log_alpha.data_ptr<T>(), E, H};
      Csr g = csr_of(crow, col, perm), gs = csr_of(crow_s, col_s, perm_s);
      T *dd0 = d_dst.data_ptr<T>(), *ds0 = d_src.data_ptr<T>(), *dv0 = d_val.data_ptr<T>();
      const int64_t node = n * H * Cc, vnode = n * H * Cw, par = H * Cc;
      const SumSchedule sched = summed && one ? sum_schedule(gs, n) : SumSchedule{};
      // the destination side of edge j = (u -> v): dx_dst v += t and the d att partial, with
      // t = de w LeakyReLU'(z), z = x_src u + x_dst v; with `source` (the one pass) also the source
      // side pass B computes: dx_src u += t (the same t) and d values_u += alpha k g_v.
      auto edge_part = [&](auto source, int64_t blk, int64_t v, int64_t j, int64_t r, const T* dej,
                           const T* alj) {
        constexpr bool kSource = decltype(source)::value;
        const int64_t u = g.col[j];
        const T* xu = xs0 + r * node + u * H * Cc; const T* xv = xd0 + r * node + v * H * Cc;
        const T* w = w0 + r * par;
        T* pb = part.data() + (r * blocks + blk) * H * Cc;
        prefetch_ahead(xs0 + r * node, g.col, j, g.nnz, H * Cc);  // (no score pass reads it first now)
        if (kSource) {
          prefetch_ahead(ds0 + r * node, g.col, j, g.nnz, H * Cc);
          prefetch_ahead(dv0 + r * vnode, g.col, j, g.nnz, H * Cw);
        }
        for (int64_t h = 0; h < H; ++h) {  // pass A's destination side, as it was
          const T dej_h = dej[h];
          const T *p = xu + h * Cc, *q = xv + h * Cc, *wh = w + h * Cc;
          T* __restrict dv = dd0 + r * node + v * H * Cc + h * Cc; T* __restrict ph = pb + h * Cc;
          for (int64_t c = 0; c < Cc; ++c) {
            const T z = p[c] + q[c];
            dv[c] += dej_h * wh[c] * leaky_grad(z, s);
            ph[c] += dej_h * leaky(z, s);
          }
        }
        if (kSource) {  // d values u += alpha k g_v: pass B's axpy, in the same order per source row
          for (int64_t h = 0; h < H; ++h)
            axpy(dv0 + r * vnode + u * H * Cw + h * Cw, alj[h], g0 + r * vnode + v * H * Cw + h * Cw, Cw);
        }
      };
      if (one) {
        pass_a<T>(alphas, values.data_ptr<T>(), ptr_or_null<T>(keep), g0,
                  grad_alpha.defined() ? grad_alpha.data_ptr<T>() : nullptr, out.data_ptr<T>(), g,
                  n, E, H, vw, reps, static_cast<T*>(nullptr), static_cast<T*>(nullptr), Rows<T>{dd0, H * Cc},
                  [&](int64_t blk, int64_t v, int64_t j, int64_t r, const T* dej, const T* alj) {
                    edge_part(std::true_type(), blk, v, j, r, dej, alj);
                  },
                  [&](int64_t v, int64_t a, int64_t b, int64_t r, const T* de_row, const T*) {
                    // dx_src u += de w LeakyReLU'(z) over v's in-edges (pass B's term and bits)
                    source_row<T, K>(g.col + a, b - a, xs0 + r * node, xd0 + r * node + v * H * Cc, w0 + r * par,
                                     de_row, s, H, cw, ds0 + r * node);
                  },
                  [&](int64_t v, int64_t r) {
                    if (!summed) return;
                    for (int64_t i = sched.start[v]; i < sched.start[v + 1]; ++i) {
                      const int64_t k = sched.rows[i];
                      sum_row(dv0 + r * vnode + k * par, dd0 + r * node + k * par, ds0 + r * node + k * par, par);
                    }
                  });
      } else {
        pass_a<T>(alphas, values.data_ptr<T>(), ptr_or_null<T>(keep), g0,
                  grad_alpha.defined() ? grad_alpha.data_ptr<T>() : nullptr, out.data_ptr<T>(), g,
                  n, E, H, vw, reps, de.get(), al.get(), Rows<T>{dd0, H * Cc},
                  [&](int64_t blk, int64_t v, int64_t j, int64_t r, const T* dej, const T* alj) {
                    edge_part(std::false_type(), blk, v, j, r, dej, alj);
                  },
                  [](int64_t, int64_t, int64_t, int64_t, const T*, const T*) {}, [](int64_t, int64_t) {});
        auto src_part = [&](int64_t u, int64_t r) {
          const T* xd = xd0 + r * node; const T* w = w0 + r * par; const T* der = de.get() + r * E * H;
          T* du = ds0 + r * node + u * H * Cc;
          for (int64_t k = 0; k < H * Cc; ++k) du[k] = T(0);
          const T* xu = xs0 + r * node + u * H * Cc;
          for (int64_t k = gs.crow[u]; k < gs.crow[u + 1]; ++k) {
            const T* xv = xd + gs.col[k] * H * Cc;
            const int64_t id = gs.perm[k];
            prefetch_ahead(xd, gs.col, k, E, H * Cc);
            prefetch_ahead(der, gs.perm, k, E, H);
            for (int64_t h = 0; h < H; ++h) {
              const T dej = der[id * H + h];
              const T *p = xu + h * Cc, *q = xv + h * Cc, *wh = w + h * Cc;
              T* __restrict dh = du + h * Cc;
              for (int64_t c = 0; c < Cc; ++c) dh[c] += dej * wh[c] * leaky_grad(p[c] + q[c], s);
            }
          }
        };
        pass_b<T>(g0, gs, n, E, H, vw, reps, al.get(), dv0, src_part);
        if (summed)
          at::parallel_for(0, R * n, kRows, [&](int64_t b, int64_t e) {
            for (int64_t k = b; k < e; ++k) sum_row(dv0 + k * par, dd0 + k * par, ds0 + k * par, par);
          });
      }
      T* dw0 = d_att.data_ptr<T>();  // fixed-order sum of the per-block partials
      for (int64_t r = 0; r < R; ++r)
        for (int64_t blk = 0; blk < blocks; ++blk)
          for (int64_t k = 0; k < par; ++k) dw0[r * par + k] += part[(r * blocks + blk) * par + k];
    });
  });
  if (summed) return {d_val, Tensor(), Tensor(), d_att};
  return {d_src, d_dst, d_val, d_att};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> gatv2_backward(
    const Tensor& grad_out, const std::optional<Tensor>& grad_alpha, const Tensor& x_src, const Tensor& x_dst,
    const Tensor& values, const Tensor& att, const Tensor& out, const Tensor& log_alpha, const Tensor& crow,
    const Tensor& col, const Tensor& perm, const Tensor& crow_s, const Tensor& col_s, const Tensor& perm_s,
    double slope, bool replicas_outer, const std::optional<Tensor>& keep) {
  return gatv2_backward_impl(grad_out, grad_alpha, x_src, x_dst, values, att, out, log_alpha, crow, col, perm, crow_s,
                             col_s, perm_s, slope, replicas_outer, keep, false);
}

// GATv2's backward for one tensor x passed as x_src, x_dst and values: (d x, d att), d x being
// (d values + d x_dst) + d x_src (the three gradients autograd would sum, in its order).
std::tuple<Tensor, Tensor> gatv2_backward_summed(
    const Tensor& grad_out, const std::optional<Tensor>& grad_alpha, const Tensor& x, const Tensor& att,
    const Tensor& out, const Tensor& log_alpha, const Tensor& crow, const Tensor& col, const Tensor& perm,
    const Tensor& crow_s, const Tensor& col_s, const Tensor& perm_s, double slope, bool replicas_outer,
    const std::optional<Tensor>& keep) {
  auto grads = gatv2_backward_impl(grad_out, grad_alpha, x, x, x, att, out, log_alpha, crow, col, perm, crow_s, col_s,
                                   perm_s, slope, replicas_outer, keep, true);
  return {std::get<0>(grads), std::get<3>(grads)};
}

// -------------------------------------------------------------------------------------- GAT

std::tuple<Tensor, Tensor, Tensor> gat_forward(const Tensor& s_, const Tensor& t_, const std::optional<Tensor>& bias_,
                                               const Tensor& values_, const Tensor& crow, const Tensor& col,
                                               const Tensor& perm, const Tensor& crow_s, const Tensor& col_s,
                                               const Tensor& perm_s, double slope, bool replicas_outer,
                                               const std::optional<Tensor>& keep_) {
  const Dims d = node_dims(s_, 2, "score_src");
  const int64_t n = d.n, H = d.H, E = col.numel();
  check_like(t_, d, {n, H}, "score_dst");
  const int64_t Cv = values_.size(-1);
  check_like(values_, d, {n, H, Cv}, "values");
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);  // (used by the backward only: checked where they enter)
  auto s = s_.contiguous(), t = t_.contiguous(), values = values_.contiguous();
  Tensor bias;
  if (bias_.has_value() && bias_->defined()) {
    bias = bias_->contiguous();
    check_like(bias, d, {E, H}, "bias");
  }
  const Tensor keep = keep_of(keep_, d, E, H, values);
  auto out = at::empty(values.sizes(), values.options());
  auto alpha = at::empty(with_replicas(d, {E, H}), values.options());
  auto lse = at::empty(with_replicas(d, {n, H}), values.options());
  const Replicas reps{d.R, replicas_outer};
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gat_forward", [&] {
    using T = scalar_t;
    with_width(Cv, [&](auto tag) {
      constexpr int K = decltype(tag)::value;
      with_heads(H, [&](auto htag) {  // one head (SAN's): its loops over heads folded away, as GATv2's
        constexpr int KH = decltype(htag)::value;
        Scorer<T, false, K, KH> sc{s.data_ptr<T>(), t.data_ptr<T>(), bias.defined() ? bias.data_ptr<T>() : nullptr,
                                   n, E, Heads<KH>{H}, static_cast<T>(slope)};
        forward_impl<T>(sc, values.data_ptr<T>(), ptr_or_null<T>(keep), csr_of(crow, col, perm), n, E, Heads<KH>{H},
                        Width<K>{Cv}, reps, out.data_ptr<T>(), alpha.data_ptr<T>(), lse.data_ptr<T>(),
                        static_cast<T*>(nullptr));
      });
    });
  });
  return {out, alpha, lse};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> gat_backward(
    const Tensor& grad_out_, const std::optional<Tensor>& grad_alpha_, const Tensor& s_, const Tensor& t_,
    const std::optional<Tensor>& bias_, const Tensor& values_, const Tensor& out_, const Tensor& lse_,
    const Tensor& crow, const Tensor& col, const Tensor& perm, const Tensor& crow_s, const Tensor& col_s,
    const Tensor& perm_s, double slope, bool replicas_outer, const std::optional<Tensor>& keep_) {
  const Dims d = node_dims(s_, 2, "score_src");
  const int64_t n = d.n, H = d.H, E = col.numel(), Cv = values_.size(-1), R = d.R;
  const Tensor keep = keep_of(keep_, d, E, H, values_);
  check_like(t_, d, {n, H}, "score_dst");
  check_like(values_, d, {n, H, Cv}, "values");
  check_like(grad_out_, d, {n, H, Cv}, "grad_out");
  check_like(out_, d, {n, H, Cv}, "out");
  check_like(lse_, d, {n, H}, "lse");
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);
  auto s = s_.contiguous(), t = t_.contiguous(), values = values_.contiguous(), grad_out = grad_out_.contiguous(),
       out = out_.contiguous(), lse = lse_.contiguous();
  Tensor bias, grad_alpha;
  if (bias_.has_value() && bias_->defined()) {
    bias = bias_->contiguous();
    check_like(bias, d, {E, H}, "bias");
  }
  if (grad_alpha_.has_value() && grad_alpha_->defined()) {
    grad_alpha = grad_alpha_->contiguous();
    check_like(grad_alpha, d, {E, H}, "grad_alpha");
  }
  auto d_s = at::empty_like(s), d_t = at::zeros_like(t), d_val = at::empty_like(values);
  auto d_bias = at::empty(with_replicas(d, {E, H}), values.options());  // = d z per edge, original order
  const Replicas reps{R, replicas_outer};
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gat_backward", [&] {
    using T = scalar_t;
    with_width(Cv, [&](auto tag) {
      constexpr int K = decltype(tag)::value;
      const T sl = static_cast<T>(slope);
      const T *sp0 = s.data_ptr<T>(), *tp0 = t.data_ptr<T>(), *bp0 = bias.defined() ? bias.data_ptr<T>() : nullptr;
      std::unique_ptr<T[]> de(new T[R * E * H]), al(new T[R * E * H]);  // every slot written by pass A
      const ScoredAlpha<T, Scorer<T, false, K>> alphas{{sp0, tp0, bp0, n, E, Heads<0>{H}, sl}, lse.data_ptr<T>(), n, H};
      Csr g = csr_of(crow, col, perm), gs = csr_of(crow_s, col_s, perm_s);
      T *dt0 = d_t.data_ptr<T>(), *dz0 = d_bias.data_ptr<T>();
      auto dst_part = [&](int64_t, int64_t v, int64_t j, int64_t r, const T* dej, const T*) {
        const int64_t u = g.col[j], id = g.perm[j];
        const T* sp = sp0 + r * n * H; const T* tp = tp0 + r * n * H; const T* bp = bp0 ? bp0 + r * E * H : nullptr;
        T* dz = dz0 + r * E * H; T* dt = dt0 + r * n * H;
        for (int64_t h = 0; h < H; ++h) {
          T z = sp[u * H + h] + tp[v * H + h];
          if (bp) z += bp[id * H + h];
          const T dd = dej[h] * leaky_grad(z, sl);
          dz[id * H + h] = dd;
          dt[v * H + h] += dd;
        }
      };
      pass_a<T>(alphas, values.data_ptr<T>(), ptr_or_null<T>(keep), grad_out.data_ptr<T>(),
                grad_alpha.defined() ? grad_alpha.data_ptr<T>() : nullptr, out.data_ptr<T>(), g,
                n, E, H, Width<K>{Cv}, reps, de.get(), al.get(), Rows<T>{nullptr, 0}, dst_part,
                [](int64_t, int64_t, int64_t, int64_t, const T*, const T*) {}, [](int64_t, int64_t) {});
      T* dsp0 = d_s.data_ptr<T>();
      auto src_part = [&](int64_t u, int64_t r) {
        const T* dz = dz0 + r * E * H;
        T* dsp = dsp0 + r * n * H;
        for (int64_t h = 0; h < H; ++h) dsp[u * H + h] = T(0);
        for (int64_t k = gs.crow[u]; k < gs.crow[u + 1]; ++k) {
          const int64_t id = gs.perm[k];
          for (int64_t h = 0; h < H; ++h) dsp[u * H + h] += dz[id * H + h];
        }
      };
      pass_b<T>(grad_out.data_ptr<T>(), gs, n, E, H, Width<K>{Cv}, reps, al.get(), d_val.data_ptr<T>(), src_part);
    });
  });
  return {d_s, d_t, d_val, d_bias};
}

}  // namespace

TORCH_LIBRARY(zoo_kernels, m) {
  m.def("gatv2_forward(Tensor x_src, Tensor x_dst, Tensor values, Tensor att, Tensor crow, Tensor col, "
        "Tensor perm, Tensor crow_s, Tensor col_s, Tensor perm_s, float slope, bool replicas_outer=False, "
        "Tensor? keep=None) -> (Tensor, Tensor, Tensor)");
  m.def("gatv2_backward(Tensor grad_out, Tensor? grad_alpha, Tensor x_src, Tensor x_dst, Tensor values, "
        "Tensor att, Tensor out, Tensor log_alpha, Tensor crow, Tensor col, Tensor perm, Tensor crow_s, "
        "Tensor col_s, Tensor perm_s, float slope, bool replicas_outer=False, Tensor? keep=None) "
        "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def("gatv2_backward_summed(Tensor grad_out, Tensor? grad_alpha, Tensor x, Tensor att, Tensor out, "
        "Tensor log_alpha, Tensor crow, Tensor col, Tensor perm, Tensor crow_s, Tensor col_s, Tensor perm_s, "
        "float slope, bool replicas_outer=False, Tensor? keep=None) -> (Tensor, Tensor)");
  m.def("gatv2_one_pass_backward(Tensor crow, Tensor col, Tensor perm, Tensor crow_s, Tensor col_s, "
        "Tensor perm_s) -> bool");
  m.def("gat_forward(Tensor score_src, Tensor score_dst, Tensor? bias, Tensor values, Tensor crow, Tensor col, "
        "Tensor perm, Tensor crow_s, Tensor col_s, Tensor perm_s, float slope, bool replicas_outer=False, "
        "Tensor? keep=None) -> (Tensor, Tensor, Tensor)");
  m.def("gat_backward(Tensor grad_out, Tensor? grad_alpha, Tensor score_src, Tensor score_dst, Tensor? bias, "
        "Tensor values, Tensor out, Tensor lse, Tensor crow, Tensor col, Tensor perm, Tensor crow_s, Tensor col_s, "
        "Tensor perm_s, float slope, bool replicas_outer=False, Tensor? keep=None) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("gatv2_forward", &gatv2_forward);
  m.impl("gatv2_backward", &gatv2_backward);
  m.impl("gatv2_backward_summed", &gatv2_backward_summed);
  m.impl("gatv2_one_pass_backward", &gatv2_one_pass_backward);
  m.impl("gat_forward", &gat_forward);
  m.impl("gat_backward", &gat_backward);
}
