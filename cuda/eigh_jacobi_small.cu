// CUDA entry points of core/kernels/eigh_jacobi_small.h: eigh and eigvalsh of n x n matrices,
// n <= 8, one thread per matrix with the matrix in registers (lane entries only).
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/eigh_jacobi_small.h"
#include "kernel_desc.h"

__global__ void ml_cuda_eigh_jacobi_small_lane(ml_params p, const float *a, float *w, float *v,
                                               float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_eigh_jacobi_small(ctx, p, a, w, v, info);
}

__global__ void ml_cuda_eigvalsh_jacobi_small_lane(ml_params p, const float *a, float *w, float *,
                                                   float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_eigvalsh_jacobi_small(ctx, p, a, w, info);
}

namespace ml::cuda {
namespace {
int ejs_scratch(int, int, int) { return 0; }
bool ejs_fits(int m, int n, int, int) { return ml_eigh_jacobi_small_fits(m, n, 0) != 0; }
int ejs_group_size(int, int) { return 1; }
}  // namespace

extern const KernelDesc kEighJacobiSmall = {"eigh_jacobi_small",
                                            1,
                                            nullptr /* no group entry */,
                                            ejs_scratch,
                                            ejs_fits,
                                            ejs_group_size,
                                            nullptr,
                                            ml_cuda_eigh_jacobi_small_lane};
extern const KernelDesc kEigvalshJacobiSmall = {"eigvalsh_jacobi_small",
                                                2,
                                                nullptr /* no group entry */,
                                                ejs_scratch,
                                                ejs_fits,
                                                ejs_group_size,
                                                nullptr,
                                                ml_cuda_eigvalsh_jacobi_small_lane};
}  // namespace ml::cuda
