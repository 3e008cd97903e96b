// MLX without a GPU path in this package: CPU-only MLX, or a GPU MLX built with
// ML_MLX_FLAVOUR=cpu (e.g. a Metal MLX where the core has no Metal backend). build_node() places
// every primitive on the CPU stream (a call on the GPU stream runs the core's host path and MLX
// orders it with the GPU work around it), so eval_gpu is never reached.
#include <stdexcept>
#include <string>

#include "gpu_eval.h"

namespace mlext {

const char *gpu_path() { return "none"; }

bool gpu_covers(const Spec &, const Sizes &) { return false; }

void eval_gpu(const mx::Stream &, const Spec &spec, const std::vector<mx::array> &,
              std::vector<mx::array> &) {
  throw std::runtime_error(std::string("[metal_linalg.") + spec_name(spec) +
                           "] this build has no GPU path for MLX's GPU stream; "
                           "the call should have been placed on the CPU stream");
}

}  // namespace mlext
