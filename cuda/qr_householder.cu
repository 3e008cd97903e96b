// CUDA entry points of core/kernels/qr_householder.h: qr in modes reduced, R only and complete;
// a block per matrix, and a thread per matrix (lane-per-matrix, for large batches of tiny ones).
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/qr_householder.h"
#include "kernel_desc.h"

__global__ void ml_cuda_qr_householder(ml_params p, const float *a, float *q, float *r, float *,
                                       int *info) {
  ML_CUDA_ENTRY_CONTEXT(ctx, p);
  ml_qr_householder(ctx, p, a, q, r, info);
}

__global__ void ml_cuda_qr_householder_lane(ml_params p, const float *a, float *q, float *r,
                                            float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_qr_householder(ctx, p, a, q, r, info);
}

namespace ml::cuda {
namespace {
int qr_scratch(int m, int n, int flags) {
  return ml_qr_householder_scratch_floats_mode(m, n, flags);
}
// The kernel's own fits() budgets for complete mode; reduced and R-only need less.
bool qr_fits(int m, int n, int flags, int budget) {
  return ml_qr_householder_fits(m, n, 1 << 30) && qr_scratch(m, n, flags) <= budget;
}
int qr_group_size_batch(int m, int n, int64_t batch, int units) {
  return ml_qr_householder_group_size_batch(m, n, batch, units);
}
}  // namespace

extern const KernelDesc kQrHouseholder = {"qr_householder",
                                          0,
                                          ml_cuda_qr_householder,
                                          qr_scratch,
                                          qr_fits,
                                          ml_qr_householder_group_size,
                                          qr_group_size_batch,
                                          ml_cuda_qr_householder_lane};
}  // namespace ml::cuda
