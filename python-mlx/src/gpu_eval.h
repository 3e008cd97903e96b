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

// True when eval_gpu can run spec for these sizes on the GPU (a CUDA or Metal kernel covers
// every step's shape and batch under the current policy). When false, build_node() places the
// primitive on the CPU stream.
bool gpu_covers(const Spec &spec, const Sizes &sizes);

// eval_gpu's body: the inputs are row-contiguous float32 on the primitive's GPU stream.
void eval_gpu(const mx::Stream &stream, const Spec &spec, const std::vector<mx::array> &inputs,
              std::vector<mx::array> &outputs);

// The sizes of eval_gpu's inputs, which build_node() made row-contiguous float32 with one
// batch shape.
inline Sizes gpu_input(const Spec &spec, const std::vector<mx::array> &inputs) {
  std::vector<mx::Shape> shapes;
  for (const auto &x : inputs) {
    if (!x.flags().row_contiguous)
      throw std::runtime_error(std::string("[metal_linalg.") + spec_name(spec) +
                               "] internal error: GPU input is not row-contiguous");
    shapes.push_back(x.shape());
  }
  return sizes_of(spec, shapes);
}

}  // namespace mlext
