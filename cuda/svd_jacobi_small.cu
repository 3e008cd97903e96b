// CUDA entry points of core/kernels/svd_jacobi_small.h: thin SVD and singular values of
// matrices up to 8 x 8, one thread per matrix, everything in registers (lane entries only).
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/svd_jacobi_small.h"
#include "kernel_desc.h"

__global__ void ml_cuda_svd_jacobi_small_lane(ml_params p, const float *a, float *u, float *s,
                                              float *vt, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_svd_jacobi_small(ctx, p, a, u, s, vt, info);
}

__global__ void ml_cuda_svdvals_jacobi_small_lane(ml_params p, const float *a, float *, float *s,
                                                  float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_svdvals_jacobi_small(ctx, p, a, s, info);
}

namespace ml::cuda {
namespace {
int svdj_scratch(int, int, int) { return 0; }
// flags: thin (0) only reaches here for non-square shapes (the backend's pick); square
// full_matrices is the thin problem.
bool svdj_fits(int m, int n, int, int) { return ml_svd_jacobi_small_fits(m, n) != 0; }
int svdj_group_size(int, int) { return 1; }
}  // namespace

extern const KernelDesc kSvdJacobiSmall = {"svd_jacobi_small", 3,
                                           nullptr,  // no group entry
                                           svdj_scratch, svdj_fits, svdj_group_size, nullptr,
                                           ml_cuda_svd_jacobi_small_lane};
extern const KernelDesc kSvdvalsJacobiSmall = {"svdvals_jacobi_small", 4,
                                               nullptr,  // no group entry
                                               svdj_scratch, svdj_fits, svdj_group_size,
                                               nullptr, ml_cuda_svdvals_jacobi_small_lane};
}  // namespace ml::cuda
