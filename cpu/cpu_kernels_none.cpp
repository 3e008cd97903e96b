// Stand-in for cpu_kernels.cpp while the portable kernels are absent: reports
// that no kernel exists, so the CPU backend always uses LAPACK.
#include "cpu_kernels.h"

namespace ml::cpu_kernels {

int64_t max_n(int32_t) { return 0; }

int64_t small_max_n(int32_t) { return 0; }

bool small(int32_t, int64_t, int64_t) { return false; }

const char *name(int32_t, int64_t, int64_t) { return "none"; }

int64_t scratch_floats(int32_t, int64_t, int64_t) { return 0; }

int32_t run(int32_t, int64_t, int64_t, int32_t, const float *, float *, float *, float *, float *,
            int32_t) {
  return 0x1;  // ML_INFO_NOT_CONVERGED: unreachable while max_n() is 0
}

}  // namespace ml::cpu_kernels
