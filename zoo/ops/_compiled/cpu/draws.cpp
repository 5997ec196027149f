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

}  // namespace

TORCH_LIBRARY_FRAGMENT(zoo_kernels, m) {
  m.def("keep_mask(Tensor(a!) out, Generator? generator, float q, float scale, Tensor? x=None) -> ()");
}

TORCH_LIBRARY_IMPL(zoo_kernels, CPU, m) {
  m.impl("keep_mask", &keep_mask);
}
