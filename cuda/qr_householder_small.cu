// CUDA entry point of core/kernels/qr_householder_small.h: qr (reduced, R only, complete) of
// matrices up to 8 x 8, one thread per matrix, everything in registers (lane entry only).
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/qr_householder_small.h"
#include "kernel_desc.h"

__global__ void ml_cuda_qr_householder_small_lane(ml_params p, const float *a, float *q,
                                                  float *r, float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_qr_householder_small(ctx, p, a, q, r, info);
}

namespace ml::cuda {
namespace {
int qr_small_scratch(int, int, int) { return 0; }
bool qr_small_fits(int m, int n, int flags, int) {
  return ml_qr_householder_small_fits(m, n, flags) != 0;
}
int qr_small_group_size(int, int) { return 1; }
}  // namespace

extern const KernelDesc kQrHouseholderSmall = {"qr_householder_small",
                                               0,
                                               nullptr,  // no group entry
                                               qr_small_scratch,
                                               qr_small_fits,
                                               qr_small_group_size,
                                               nullptr,
                                               ml_cuda_qr_householder_small_lane};
}  // namespace ml::cuda
