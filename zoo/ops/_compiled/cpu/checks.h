// Argument checks shared by the C++ sources of the zoo kernels (one library; build.py hashes this
// header with the sources, so an edit builds anew).
#pragma once

#include <ATen/ATen.h>

namespace zoo_kernels_checks {

// `index` is an int64 (E,) index whose entries address `rows` rows; `edges` >= 0: it has that many
// entries (one per edge of the caller's edge tensors).
inline void check_index(const at::Tensor& index, int64_t rows, const char* what, int64_t edges = -1) {
  TORCH_CHECK(index.scalar_type() == at::kLong && index.dim() == 1 && (edges < 0 || index.numel() == edges),
              "zoo kernels: ", what, " must be an int64 (E,) index", edges < 0 ? "" : ", one entry per edge");
  const int64_t* p = index.data_ptr<int64_t>();
  for (int64_t e = 0; e < index.numel(); ++e)
    TORCH_CHECK(p[e] >= 0 && p[e] < rows, "zoo kernels: ", what, " holds ", p[e], ", out of range for ", rows, " rows");
}

}  // namespace zoo_kernels_checks
