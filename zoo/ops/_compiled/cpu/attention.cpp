// Fused graph attention on the CPU: score + softmax + aggregation in one pass per destination,
// and a two-pass backward (by destination, then by source).  See zoo/ops/_compiled/__init__.py
// docstrings for the equations; shapes (H = heads, replicas folded in; C, Cv = channels):
//   CSR by destination: crow (N+1), col (E) = sources, perm (E) = original edge id of each slot;
//   CSR by source:      crow_s, col_s = destinations, perm_s.
//   gatv2: e_uv,h = sum_c a_hc LeakyReLU(xs_u,hc + xd_v,hc)          xs, xd (N,H,C), a (H,C)
//   gat:   e_uv,h = LeakyReLU(s_u,h + t_v,h [+ b_uv,h])                s, t (N,H), b (E,H)
//   both:  alpha = softmax over v's in-edges, out_v,h = sum_u alpha_uv,h x_u,h   x (N,H,Cv)
// Determinism: every output row is written by exactly one task, each head's arithmetic reads
// only that head's data in a fixed order (SIMD over channels within one head), so a head's
// numbers do not depend on the number of heads (replicas) or of threads.  No atomics.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace {

using at::Tensor;

// destinations per task of the backward's pass A: the d(att) partial sums are kept per block,
// a constant, so their summation order does not depend on the thread count.
constexpr int64_t kBlock = 32;

template <typename T>
inline T leaky(T z, T slope) { return z > T(0) ? z : z * slope; }

template <typename T>
inline T leaky_grad(T z, T slope) { return z > T(0) ? T(1) : slope; }

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
inline T dot(const T* a, const T* b, int64_t C) {
  return lane_sum<T>(C, [&](int64_t c) { return a[c] * b[c]; });
}

struct Csr {
  const int64_t* crow;
  const int64_t* col;
  const int64_t* perm;
};

inline Csr csr_of(const Tensor& crow, const Tensor& col, const Tensor& perm) {
  return {crow.data_ptr<int64_t>(), col.data_ptr<int64_t>(), perm.data_ptr<int64_t>()};
}

void check_graph(const Tensor& crow, const Tensor& col, const Tensor& perm, int64_t n) {
  TORCH_CHECK(crow.scalar_type() == at::kLong && col.scalar_type() == at::kLong && perm.scalar_type() == at::kLong,
              "zoo kernels: graph index tensors must be int64");
  TORCH_CHECK(crow.dim() == 1 && crow.numel() == n + 1, "zoo kernels: crow must be (N + 1,), got ", crow.sizes());
  TORCH_CHECK(col.numel() == perm.numel(), "zoo kernels: col and perm must both be (E,)");
}

// Score of every in-edge of v (row slots [a, b)), all heads, into e (deg x H).
template <typename T, bool V2>
struct Scorer;

template <typename T>
struct Scorer<T, true> {  // GATv2
  const T *xs, *xd, *att;
  int64_t H, C;
  T slope;
  inline void row(const Csr& g, int64_t v, int64_t a, int64_t b, T* e) const {
    const T* xv = xd + v * H * C;
    for (int64_t j = a; j < b; ++j) {
      const T* xu = xs + g.col[j] * H * C;
      for (int64_t h = 0; h < H; ++h) {
        const T* p = xu + h * C; const T* q = xv + h * C; const T* w = att + h * C;
        const T sl = slope;
        e[(j - a) * H + h] = lane_sum<T>(C, [&](int64_t c) { return w[c] * leaky(p[c] + q[c], sl); });
      }
    }
  }
};

template <typename T>
struct Scorer<T, false> {  // GAT (+ optional edge term, original edge order)
  const T *s, *t, *bias;
  int64_t H;
  T slope;
  inline void row(const Csr& g, int64_t v, int64_t a, int64_t b, T* e) const {
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

// Forward: per destination, scores (row buffer), softmax per head, accumulate alpha * x_u.
template <typename T, typename S>
void forward_impl(const S& scorer, const Tensor& x, const Csr& g, int64_t n, int64_t H, int64_t Cv,
                  Tensor& out, Tensor& alpha, Tensor& lse) {
  const T* xp = x.data_ptr<T>();
  T* op = out.data_ptr<T>();
  T* ap = alpha.data_ptr<T>();
  T* lp = lse.data_ptr<T>();
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    std::vector<T> e, m(H), l(H);
    for (int64_t v = begin; v < end; ++v) {
      const int64_t a = g.crow[v], b = g.crow[v + 1];
      T* ov = op + v * H * Cv;
      for (int64_t k = 0; k < H * Cv; ++k) ov[k] = T(0);
      if (a == b) {
        for (int64_t h = 0; h < H; ++h) lp[v * H + h] = -std::numeric_limits<T>::infinity();
        continue;
      }
      e.resize((b - a) * H);
      scorer.row(g, v, a, b, e.data());
      // The row's scores are in a task-local buffer, so the softmax needs no online rescaling:
      // the max first, then one exp per edge and head (p, kept in the buffer for alpha).
      for (int64_t h = 0; h < H; ++h) { m[h] = -std::numeric_limits<T>::infinity(); l[h] = T(0); }
      for (int64_t k = 0; k < (b - a) * H; ++k) m[k % H] = std::max(m[k % H], e[k]);
      for (int64_t j = a; j < b; ++j) {
        const T* xu = xp + g.col[j] * H * Cv;
        for (int64_t h = 0; h < H; ++h) {
          const T p = std::exp(e[(j - a) * H + h] - m[h]);
          e[(j - a) * H + h] = p;
          l[h] += p;
          T* acc = ov + h * Cv; const T* xh = xu + h * Cv;
          for (int64_t c = 0; c < Cv; ++c) acc[c] += p * xh[c];
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        const T inv = T(1) / l[h];
        T* acc = ov + h * Cv;
        for (int64_t c = 0; c < Cv; ++c) acc[c] *= inv;
        lp[v * H + h] = m[h] + std::log(l[h]);
        l[h] = inv;
      }
      for (int64_t j = a; j < b; ++j)
        for (int64_t h = 0; h < H; ++h)
          ap[g.perm[j] * H + h] = e[(j - a) * H + h] * l[h];
    }
  });
}

// Backward pass A, by destination: alpha from lse, d alpha = <g_v, x_u> (+ grad_alpha),
// de = alpha (d alpha - delta_v) with delta_v = <g_v, out_v> (+ sum alpha grad_alpha);
// writes de and alpha per edge (original order) for pass B and calls `dst_part` for the
// destination-side gradients (dx_dst / dt and d att partials).
template <typename T, typename S, typename DstPart>
void pass_a(const S& scorer, const Tensor& x, const Tensor& grad_out, const T* ga, const Tensor& out,
            const Tensor& lse, const Csr& g, int64_t n, int64_t H, int64_t Cv, T* de_p, T* al_p,
            const DstPart& dst_part) {
  const T* xp = x.data_ptr<T>();
  const T* gp = grad_out.data_ptr<T>();
  const T* op = out.data_ptr<T>();
  const T* lp = lse.data_ptr<T>();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
    std::vector<T> e, delta(H);
    for (int64_t blk = bb; blk < be; ++blk) {
      for (int64_t v = blk * kBlock; v < std::min(n, (blk + 1) * kBlock); ++v) {
        const int64_t a = g.crow[v], b = g.crow[v + 1];
        if (a == b) continue;
        e.resize((b - a) * H);
        scorer.row(g, v, a, b, e.data());
        const T* gv = gp + v * H * Cv;
        for (int64_t h = 0; h < H; ++h) {
          const T* gh = gv + h * Cv; const T* oh = op + v * H * Cv + h * Cv;
          delta[h] = dot(gh, oh, Cv);
        }
        for (int64_t j = a; j < b; ++j)  // e -> alpha in place
          for (int64_t h = 0; h < H; ++h) e[(j - a) * H + h] = std::exp(e[(j - a) * H + h] - lp[v * H + h]);
        if (ga) {
          for (int64_t j = a; j < b; ++j)
            for (int64_t h = 0; h < H; ++h) delta[h] += e[(j - a) * H + h] * ga[g.perm[j] * H + h];
        }
        for (int64_t j = a; j < b; ++j) {
          const T* xu = xp + g.col[j] * H * Cv;
          const int64_t id = g.perm[j];
          for (int64_t h = 0; h < H; ++h) {
            const T* gh = gv + h * Cv; const T* xh = xu + h * Cv;
            T da = dot(gh, xh, Cv);
            if (ga) da += ga[id * H + h];
            const T al = e[(j - a) * H + h];
            const T dej = al * (da - delta[h]);
            de_p[id * H + h] = dej;
            al_p[id * H + h] = al;
          }
          dst_part(blk, v, j);
        }
      }
    }
  });
}

// Backward pass B, by source: d values_u = sum_v alpha_uv g_v, plus `src_part` (dx_src / ds).
template <typename T, typename SrcPart>
void pass_b(const Tensor& grad_out, const Csr& gs, int64_t n, int64_t H, int64_t Cv, const T* al_p,
            Tensor& grad_x, const SrcPart& src_part) {
  const T* gp = grad_out.data_ptr<T>();
  T* dx = grad_x.data_ptr<T>();
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      T* du = dx + u * H * Cv;
      for (int64_t k = 0; k < H * Cv; ++k) du[k] = T(0);
      for (int64_t k = gs.crow[u]; k < gs.crow[u + 1]; ++k) {
        const T* gv = gp + gs.col[k] * H * Cv;
        const int64_t id = gs.perm[k];
        for (int64_t h = 0; h < H; ++h) {
          const T al = al_p[id * H + h];
          T* dh = du + h * Cv; const T* gh = gv + h * Cv;
          for (int64_t c = 0; c < Cv; ++c) dh[c] += al * gh[c];
        }
      }
      src_part(u);
    }
  });
}

void check_values(const Tensor& x, int64_t n, int64_t H) {
  TORCH_CHECK(x.dim() == 3 && x.size(0) == n && x.size(1) == H,
              "zoo kernels: values must be (N, H, Cv) with the scores' N and H, got ", x.sizes());
}

// ------------------------------------------------------------------------------------ GATv2

std::tuple<Tensor, Tensor, Tensor> gatv2_forward(const Tensor& x_src_, const Tensor& x_dst_, const Tensor& values_,
                                                 const Tensor& att_, const Tensor& crow, const Tensor& col,
                                                 const Tensor& perm, const Tensor& crow_s, const Tensor& col_s,
                                                 const Tensor& perm_s, double slope) {
  TORCH_CHECK(x_src_.dim() == 3 && x_dst_.sizes() == x_src_.sizes(), "zoo gatv2: x_src, x_dst must be (N, H, C)");
  const int64_t n = x_src_.size(0), H = x_src_.size(1), C = x_src_.size(2);
  TORCH_CHECK(att_.dim() == 2 && att_.size(0) == H && att_.size(1) == C, "zoo gatv2: att must be (H, C)");
  check_values(values_, n, H);
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);  // (used by the backward only: checked where they enter)
  auto x_src = x_src_.contiguous(), x_dst = x_dst_.contiguous(), values = values_.contiguous(),
       att = att_.contiguous();
  const int64_t Cv = values.size(2), E = col.numel();
  auto out = at::empty({n, H, Cv}, values.options());
  auto alpha = at::empty({E, H}, values.options());
  auto lse = at::empty({n, H}, values.options());
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gatv2_forward", [&] {
    Scorer<scalar_t, true> sc{x_src.data_ptr<scalar_t>(), x_dst.data_ptr<scalar_t>(), att.data_ptr<scalar_t>(), H, C,
                              static_cast<scalar_t>(slope)};
    forward_impl<scalar_t>(sc, values, csr_of(crow, col, perm), n, H, Cv, out, alpha, lse);
  });
  return {out, alpha, lse};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> gatv2_backward(
    const Tensor& grad_out_, const std::optional<Tensor>& grad_alpha_, const Tensor& x_src_, const Tensor& x_dst_,
    const Tensor& values_, const Tensor& att_, const Tensor& out_, const Tensor& lse_, const Tensor& crow,
    const Tensor& col, const Tensor& perm, const Tensor& crow_s, const Tensor& col_s, const Tensor& perm_s,
    double slope) {
  const int64_t n = x_src_.size(0), H = x_src_.size(1), C = x_src_.size(2);
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);
  auto x_src = x_src_.contiguous(), x_dst = x_dst_.contiguous(), values = values_.contiguous(),
       att = att_.contiguous(), grad_out = grad_out_.contiguous(), out = out_.contiguous(), lse = lse_.contiguous();
  Tensor grad_alpha;
  if (grad_alpha_.has_value() && grad_alpha_->defined()) grad_alpha = grad_alpha_->contiguous();
  const int64_t Cv = values.size(2), E = col.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  auto d_src = at::empty_like(x_src), d_dst = at::zeros_like(x_dst), d_val = at::empty_like(values);
  auto d_att = at::zeros_like(att);
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gatv2_backward", [&] {
    using T = scalar_t;
    const T s = static_cast<T>(slope);
    const T *xs = x_src.data_ptr<T>(), *xd = x_dst.data_ptr<T>(), *w = att.data_ptr<T>();
    std::vector<T> de(E * H), al(E * H), part(blocks * H * C, T(0));
    Scorer<T, true> sc{xs, xd, w, H, C, s};
    Csr g = csr_of(crow, col, perm), gs = csr_of(crow_s, col_s, perm_s);
    T* dd = d_dst.data_ptr<T>();
    auto dst_part = [&](int64_t blk, int64_t v, int64_t j) {
      const T* xu = xs + g.col[j] * H * C; const T* xv = xd + v * H * C;
      const int64_t id = g.perm[j];
      T* pb = part.data() + blk * H * C;
      for (int64_t h = 0; h < H; ++h) {
        const T dej = de[id * H + h];
        const T *p = xu + h * C, *q = xv + h * C, *wh = w + h * C;
        T* dv = dd + v * H * C + h * C; T* ph = pb + h * C;
        for (int64_t c = 0; c < C; ++c) {
          const T z = p[c] + q[c];
          dv[c] += dej * wh[c] * leaky_grad(z, s);
          ph[c] += dej * leaky(z, s);
        }
      }
    };
    pass_a<T>(sc, values, grad_out, grad_alpha.defined() ? grad_alpha.data_ptr<T>() : nullptr, out, lse, g, n, H, Cv,
              de.data(), al.data(), dst_part);
    T* ds = d_src.data_ptr<T>();
    auto src_part = [&](int64_t u) {
      T* du = ds + u * H * C;
      for (int64_t k = 0; k < H * C; ++k) du[k] = T(0);
      const T* xu = xs + u * H * C;
      for (int64_t k = gs.crow[u]; k < gs.crow[u + 1]; ++k) {
        const T* xv = xd + gs.col[k] * H * C;
        const int64_t id = gs.perm[k];
        for (int64_t h = 0; h < H; ++h) {
          const T dej = de[id * H + h];
          const T *p = xu + h * C, *q = xv + h * C, *wh = w + h * C;
          T* dh = du + h * C;
          for (int64_t c = 0; c < C; ++c) dh[c] += dej * wh[c] * leaky_grad(p[c] + q[c], s);
        }
      }
    };
    pass_b<T>(grad_out, gs, n, H, Cv, al.data(), d_val, src_part);
    T* dw = d_att.data_ptr<T>();  // fixed-order sum of the per-block partials
    for (int64_t blk = 0; blk < blocks; ++blk)
      for (int64_t k = 0; k < H * C; ++k) dw[k] += part[blk * H * C + k];
  });
  return {d_src, d_dst, d_val, d_att};
}

// -------------------------------------------------------------------------------------- GAT

std::tuple<Tensor, Tensor, Tensor> gat_forward(const Tensor& s_, const Tensor& t_, const std::optional<Tensor>& bias_,
                                               const Tensor& values_, const Tensor& crow, const Tensor& col,
                                               const Tensor& perm, const Tensor& crow_s, const Tensor& col_s,
                                               const Tensor& perm_s, double slope) {
  TORCH_CHECK(s_.dim() == 2 && t_.sizes() == s_.sizes(), "zoo gat: score_src, score_dst must be (N, H)");
  const int64_t n = s_.size(0), H = s_.size(1);
  check_values(values_, n, H);
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);  // (used by the backward only: checked where they enter)
  auto s = s_.contiguous(), t = t_.contiguous(), values = values_.contiguous();
  Tensor bias;
  if (bias_.has_value() && bias_->defined()) {
    bias = bias_->contiguous();
    TORCH_CHECK(bias.dim() == 2 && bias.size(0) == col.numel() && bias.size(1) == H, "zoo gat: bias must be (E, H)");
  }
  const int64_t Cv = values.size(2), E = col.numel();
  auto out = at::empty({n, H, Cv}, values.options());
  auto alpha = at::empty({E, H}, values.options());
  auto lse = at::empty({n, H}, values.options());
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gat_forward", [&] {
    Scorer<scalar_t, false> sc{s.data_ptr<scalar_t>(), t.data_ptr<scalar_t>(),
                               bias.defined() ? bias.data_ptr<scalar_t>() : nullptr, H,
                               static_cast<scalar_t>(slope)};
    forward_impl<scalar_t>(sc, values, csr_of(crow, col, perm), n, H, Cv, out, alpha, lse);
  });
  return {out, alpha, lse};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> gat_backward(
    const Tensor& grad_out_, const std::optional<Tensor>& grad_alpha_, const Tensor& s_, const Tensor& t_,
    const std::optional<Tensor>& bias_, const Tensor& values_, const Tensor& out_, const Tensor& lse_,
    const Tensor& crow, const Tensor& col, const Tensor& perm, const Tensor& crow_s, const Tensor& col_s,
    const Tensor& perm_s, double slope) {
  const int64_t n = s_.size(0), H = s_.size(1);
  check_graph(crow, col, perm, n);
  check_graph(crow_s, col_s, perm_s, n);
  auto s = s_.contiguous(), t = t_.contiguous(), values = values_.contiguous(), grad_out = grad_out_.contiguous(),
       out = out_.contiguous(), lse = lse_.contiguous();
  Tensor bias, grad_alpha;
  if (bias_.has_value() && bias_->defined()) bias = bias_->contiguous();
  if (grad_alpha_.has_value() && grad_alpha_->defined()) grad_alpha = grad_alpha_->contiguous();
  const int64_t Cv = values.size(2), E = col.numel();
  auto d_s = at::empty_like(s), d_t = at::zeros_like(t), d_val = at::empty_like(values);
  auto d_bias = at::empty({E, H}, values.options());  // = d z per edge, original order
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "zoo_gat_backward", [&] {
    using T = scalar_t;
    const T sl = static_cast<T>(slope);
    const T *sp = s.data_ptr<T>(), *tp = t.data_ptr<T>(), *bp = bias.defined() ? bias.data_ptr<T>() : nullptr;
    std::vector<T> de(E * H), al(E * H);
    Scorer<T, false> sc{sp, tp, bp, H, sl};
    Csr g = csr_of(crow, col, perm), gs = csr_of(crow_s, col_s, perm_s);
    T *dt = d_t.data_ptr<T>(), *dz = d_bias.data_ptr<T>();
    auto dst_part = [&](int64_t, int64_t v, int64_t j) {
      const int64_t u = g.col[j], id = g.perm[j];
      for (int64_t h = 0; h < H; ++h) {
        T z = sp[u * H + h] + tp[v * H + h];
        if (bp) z += bp[id * H + h];
        const T d = de[id * H + h] * leaky_grad(z, sl);
        dz[id * H + h] = d;
        dt[v * H + h] += d;
      }
    };
    pass_a<T>(sc, values, grad_out, grad_alpha.defined() ? grad_alpha.data_ptr<T>() : nullptr, out, lse, g, n, H, Cv,
              de.data(), al.data(), dst_part);
    T* dsp = d_s.data_ptr<T>();
    auto src_part = [&](int64_t u) {
      for (int64_t h = 0; h < H; ++h) dsp[u * H + h] = T(0);
      for (int64_t k = gs.crow[u]; k < gs.crow[u + 1]; ++k) {
        const int64_t id = gs.perm[k];
        for (int64_t h = 0; h < H; ++h) dsp[u * H + h] += dz[id * H + h];
      }
    };
    pass_b<T>(grad_out, gs, n, H, Cv, al.data(), d_val, src_part);
  });
  return {d_s, d_t, d_val, d_bias};
}

}  // namespace

TORCH_LIBRARY(zoo_kernels, m) {
  m.def("gatv2_forward(Tensor x_src, Tensor x_dst, Tensor values, Tensor att, Tensor crow, Tensor col, "
        "Tensor perm, Tensor crow_s, Tensor col_s, Tensor perm_s, float slope) -> (Tensor, Tensor, Tensor)");
  m.def("gatv2_backward(Tensor grad_out, Tensor? grad_alpha, Tensor x_src, Tensor x_dst, Tensor values, "
        "Tensor att, Tensor out, Tensor lse, Tensor crow, Tensor col, Tensor perm, Tensor crow_s, Tensor col_s, "
        "Tensor perm_s, float slope) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("gat_forward(Tensor score_src, Tensor score_dst, Tensor? bias, Tensor values, Tensor crow, Tensor col, "
        "Tensor perm, Tensor crow_s, Tensor col_s, Tensor perm_s, float slope) -> (Tensor, Tensor, Tensor)");
  m.def("gat_backward(Tensor grad_out, Tensor? grad_alpha, Tensor score_src, Tensor score_dst, Tensor? bias, "
        "Tensor values, Tensor out, Tensor lse, Tensor crow, Tensor col, Tensor perm, Tensor crow_s, Tensor col_s, "
        "Tensor perm_s, float slope) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("gatv2_forward", &gatv2_forward);
  m.impl("gatv2_backward", &gatv2_backward);
  m.impl("gat_forward", &gat_forward);
  m.impl("gat_backward", &gat_backward);
}
