// Dropout keep masks drawn from a torch CPU generator in one pass.
//
//   keep_mask(out, generator, q, scale, x=None): out (float32, contiguous) gets scale where the
//   uniform draw is below q, else 0 — the numbers of
//       torch.rand(out.shape, generator=generator).lt_(q).div_(1 - p)      (scale = 1 / (1 - p))
//   and the generator left where that torch.rand leaves it; with x (out's shape and dtype), the
//   dropped input x * mask instead (one rounded product per element, as torch's mul), with no mask
//   written and read back.
//
// Why: the stacked replicas' dropout draws every mask from its replica's own torch.Generator (the
// records depend on those streams), and torch's CPU uniform_ calls the Mersenne Twister once per
// element through a non-inlined function, then the mask takes two more passes (the comparison, the
// scaling) over a tensor that leaves the cache (Amazon Computers' input: 13 752 x 767 floats per
// replica).  Here the twister's state is read from the generator, advanced by the same recurrence
// (torch's at::mt19937: ATen/core/MT19937RNGEngine.h), and each drawn word becomes its mask
// element at once: the same words in the same order, the same float conversion (24 bits times
// 2^-24: ATen/core/TransformationHelper.h, uniform_real), the same comparison in float.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <tuple>
#include <vector>

namespace {

using at::Tensor;

constexpr int kStateN = 624, kStateM = 397;
constexpr uint32_t kMatrixA = 0x9908b0df, kUpper = 0x80000000, kLower = 0x7fffffff;

inline uint32_t twist(uint32_t u, uint32_t v) { return (((u & kUpper) | (v & kLower)) >> 1) ^ (v & 1 ? kMatrixA : 0); }

// The next 624 words of the state: at::mt19937's next_state, word for word.
void next_state(at::mt19937_data_pod& d) {
  uint32_t* p = d.state_.data();
  for (int j = kStateN - kStateM + 1; --j; p++) *p = p[kStateM] ^ twist(p[0], p[1]);
  for (int j = kStateM; --j; p++) *p = p[kStateM - kStateN] ^ twist(p[0], p[1]);
  *p = p[kStateM - kStateN] ^ twist(p[0], d.state_[0]);
  d.next_ = 0;
}

inline uint32_t temper(uint32_t y) {
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680;
  y ^= (y << 15) & 0xefc60000;
  y ^= (y >> 18);
  return y;
}

void keep_mask(const Tensor& out, const std::optional<at::Generator>& generator, double q, double scale,
               const std::optional<Tensor>& x_) {
  TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == at::kFloat && out.is_contiguous(),
              "keep_mask: out must be a contiguous float32 CPU tensor, got ", out.scalar_type(), " ", out.sizes());
  Tensor x;
  if (x_.has_value() && x_->defined()) {
    TORCH_CHECK(x_->device().is_cpu() && x_->scalar_type() == at::kFloat && x_->sizes() == out.sizes(),
                "keep_mask: x must be a float32 CPU tensor of out's shape ", out.sizes(), ", got ", x_->sizes());
    x = x_->contiguous();
    at::assert_no_overlap(out, x);  // the loop below reads x and writes out as separate arrays
  }
  const float* xp = x.defined() ? x.data_ptr<float>() : nullptr;
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  at::mt19937 engine = gen->engine();
  at::mt19937_data_pod d = engine.data();
  float* o = out.data_ptr<float>();
  const int64_t n = out.numel();
  const float qf = static_cast<float>(q), s = static_cast<float>(scale);
  constexpr float kStep = 1.0f / static_cast<float>(1 << 24);
  // at::mt19937 per word: `if (--left_ == 0) next_state();` then state_[next_++].  So left_ - 1 words
  // are ready; at left_ == 1 the state is renewed and, counting the word that renews it, 624 follow.
  for (int64_t i = 0; i < n;) {
    if (d.left_ <= 1) {
      next_state(d);
      d.left_ = kStateN + 1;
    }
    const int64_t k = std::min<int64_t>(n - i, d.left_ - 1);
    const uint32_t* __restrict w = d.state_.data() + d.next_;
    float* __restrict oi = o + i;
    if (xp == nullptr) {
      for (int64_t t = 0; t < k; ++t) {
        const float u = static_cast<float>(static_cast<int32_t>(temper(w[t]) & 0xffffff)) * kStep;
        oi[t] = u < qf ? s : 0.0f;
      }
    } else {
      const float* __restrict xi = xp + i;
      for (int64_t t = 0; t < k; ++t) {
        const float u = static_cast<float>(static_cast<int32_t>(temper(w[t]) & 0xffffff)) * kStep;
        oi[t] = xi[t] * (u < qf ? s : 0.0f);
      }
    }
    d.next_ += static_cast<uint32_t>(k);
    d.left_ -= static_cast<int>(k);
    i += k;
  }
  engine.set_data(d);
  gen->set_engine(engine);
}

// keep_mask_rows(out, generator, q, scale): keep_mask's mask (no x) into a 2-D out whose rows lie apart
// (out.stride(1) == 1, out.stride(0) >= out.size(1): e.g. one replica's (E, H) slice of an (E, R, H) stack),
// the same numbers at the same (row, column) from the same words, in row-major order.  Its own copy of the
// draw loop, as draw_flags: with the loop shared through a helper taking a lambda, GCC kept these loops
// scalar (keep_mask ~8x, keep_csr ~2x slower; docs/notes/performance.md).
void keep_mask_rows(const Tensor& out, const std::optional<at::Generator>& generator, double q, double scale) {
  TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == at::kFloat && out.dim() == 2 && out.stride(1) == 1 &&
                  out.stride(0) >= out.size(1),
              "keep_mask_rows: out must be a 2-D float32 CPU tensor of unit column stride and non-overlapping rows, got ",
              out.sizes(), " strides ", out.strides());
  const int64_t width = out.size(1), ld = out.stride(0), n = out.numel();
  float* o = out.data_ptr<float>();
  const float qf = static_cast<float>(q), s = static_cast<float>(scale);
  constexpr float kStep = 1.0f / static_cast<float>(1 << 24);
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  at::mt19937 engine = gen->engine();
  at::mt19937_data_pod d = engine.data();
  int64_t row = 0, col = 0;
  for (int64_t i = 0; i < n;) {
    if (d.left_ <= 1) {
      next_state(d);
      d.left_ = kStateN + 1;
    }
    const int64_t k = std::min<int64_t>(n - i, d.left_ - 1);
    const uint32_t* w = d.state_.data() + d.next_;
    for (int64_t t = 0; t < k; ++t) {
      const float u = static_cast<float>(static_cast<int32_t>(temper(w[t]) & 0xffffff)) * kStep;
      o[row * ld + col] = u < qf ? s : 0.0f;
      if (++col == width) {
        col = 0;
        ++row;
      }
    }
    d.next_ += static_cast<uint32_t>(k);
    d.left_ -= static_cast<int>(k);
    i += k;
  }
  engine.set_data(d);
  gen->set_engine(engine);
}

// flags[t] = 1 where the uniform of the generator's next word t is below q, else 0, for t < count:
// count words drawn as keep_mask draws them (its float conversion and comparison), the state advanced.
void draw_flags(at::mt19937_data_pod& d, uint8_t* flags, int64_t count, float qf) {
  constexpr float kStep = 1.0f / static_cast<float>(1 << 24);
  for (int64_t i = 0; i < count;) {
    if (d.left_ <= 1) {
      next_state(d);
      d.left_ = kStateN + 1;
    }
    const int64_t k = std::min<int64_t>(count - i, d.left_ - 1);
    const uint32_t* __restrict w = d.state_.data() + d.next_;
    uint8_t* __restrict f = flags + i;
    for (int64_t t = 0; t < k; ++t) {
      const float u = static_cast<float>(static_cast<int32_t>(temper(w[t]) & 0xffffff)) * kStep;
      f[t] = u < qf ? 1 : 0;
    }
    d.next_ += static_cast<uint32_t>(k);
    d.left_ -= static_cast<int>(k);
    i += k;
  }
}

// keep_csr(crow, col, values, generator, q, scale, ncols) -> (crow, col, values): the stored entries of
// keep_mask's dropped input x * mask, for x the (n, ncols) float32 matrix of these CSR parts: the same
// n * ncols words drawn (one per entry, row-major; the generator left where keep_mask leaves it), a
// stored entry kept where its word's uniform is below q, with the value x * scale (keep_mask's rounded
// product).  The dropped entries, and x's zeros, are left out (the result's col and values are views of
// x's nnz-long arrays, filled as far as kept).
std::tuple<Tensor, Tensor, Tensor> keep_csr(const Tensor& crow, const Tensor& col, const Tensor& values,
                                            const std::optional<at::Generator>& generator, double q, double scale,
                                            int64_t ncols) {
  TORCH_CHECK(crow.scalar_type() == at::kLong && col.scalar_type() == at::kLong && crow.dim() == 1 &&
                  crow.numel() >= 1 && col.dim() == 1 && values.dim() == 1 && values.numel() == col.numel(),
              "keep_csr: int64 crow (n + 1) and col (nnz), values (nnz)");
  TORCH_CHECK(values.device().is_cpu() && values.scalar_type() == at::kFloat, "keep_csr: float32 CPU values");
  const Tensor c = crow.contiguous(), k = col.contiguous(), v = values.contiguous();
  const int64_t n = c.numel() - 1, nnz = k.numel();
  Tensor out_crow = at::empty({n + 1}, c.options()), out_col = at::empty({nnz}, k.options());
  Tensor out_val = at::empty({nnz}, v.options());
  const int64_t *cp = c.data_ptr<int64_t>(), *kp = k.data_ptr<int64_t>();
  const float* vp = v.data_ptr<float>();
  int64_t *ocp = out_crow.data_ptr<int64_t>(), *okp = out_col.data_ptr<int64_t>();
  float* ovp = out_val.data_ptr<float>();
  const float qf = static_cast<float>(q), s = static_cast<float>(scale);
  std::vector<uint8_t> flags(static_cast<size_t>(std::max<int64_t>(ncols, 1)));
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  at::mt19937 engine = gen->engine();
  at::mt19937_data_pod d = engine.data();
  int64_t kept = 0;
  ocp[0] = 0;
  for (int64_t i = 0; i < n; ++i) {
    draw_flags(d, flags.data(), ncols, qf);  // row i's words, one per entry
    for (int64_t e = cp[i]; e < cp[i + 1]; ++e) {  // written always, counted where kept (no branch)
      TORCH_CHECK(static_cast<uint64_t>(kp[e]) < static_cast<uint64_t>(ncols), "keep_csr: columns must lie in [0, ncols)");
      okp[kept] = kp[e];
      ovp[kept] = vp[e] * s;
      kept += flags[kp[e]];
    }
    ocp[i + 1] = kept;
  }
  engine.set_data(d);
  gen->set_engine(engine);
  return {out_crow, out_col.narrow(0, 0, kept), out_val.narrow(0, 0, kept)};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(zoo_kernels, m) {
  m.def("keep_mask(Tensor(a!) out, Generator? generator, float q, float scale, Tensor? x=None) -> ()");
  m.def("keep_mask_rows(Tensor(a!) out, Generator? generator, float q, float scale) -> ()");
  m.def("keep_csr(Tensor crow, Tensor col, Tensor values, Generator? generator, float q, float scale, int ncols) "
        "-> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("keep_mask", &keep_mask);
  m.impl("keep_mask_rows", &keep_mask_rows);
  m.impl("keep_csr", &keep_csr);
}
