// The GPU half of the primitive, one implementation per MLX flavour:
//   gpu_eval_cuda.cpp   MLX's CUDA backend: the core's CUDA kernels on MLX's CUDA stream.
//   gpu_eval_metal.cpp  MLX's Metal backend: the core's Metal kernels encoded into MLX's
//                       command encoder (type-checked only so far, see the file).
//   gpu_eval_none.cpp   MLX without a GPU path here (CPU-only MLX, or ML_MLX_FLAVOUR=cpu).
// CMake compiles exactly one of them (python-mlx/CMakeLists.txt picks it from the installed MLX).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "primitive.h"

namespace mlext {

// Which flavour was compiled in: "cuda", "metal" or "none".
const char *gpu_path();

// True when eval_gpu can run spec for this input shape on the GPU (a CUDA or Metal kernel covers
// shape and batch under the current policy). When false, build() places the primitive on the CPU.
bool gpu_covers(const Spec &spec, int64_t batch, int64_t m, int64_t n);

// eval_gpu's body: inputs[0] is row-contiguous float32 on the primitive's GPU stream.
void eval_gpu(const mx::Stream &stream, const Spec &spec, const std::vector<mx::array> &inputs,
              std::vector<mx::array> &outputs);

// Batch and matrix sizes of eval_gpu's input, which build() made row-contiguous float32.
struct GpuInput {
  int64_t batch = 1, m = 0, n = 0;
};

inline GpuInput gpu_input(const Spec &spec, const mx::array &a) {
  const auto &s = a.shape();
  GpuInput in;
  for (size_t i = 0; i + 2 < s.size(); ++i) in.batch *= s[i];
  in.m = s[s.size() - 2];
  in.n = s[s.size() - 1];
  if (!a.flags().row_contiguous)
    throw std::runtime_error(std::string("[metal_linalg.") + op_name(spec.op) +
                             "] internal error: GPU input is not row-contiguous");
  return in;
}

}  // namespace mlext
