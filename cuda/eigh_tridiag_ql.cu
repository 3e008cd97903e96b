// CUDA entry points of core/kernels/eigh_tridiag_ql.h: eigh and eigvalsh, a block per matrix
// and a thread per matrix (lane-per-matrix).
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/eigh_tridiag_ql.h"
#include "kernel_desc.h"

__global__ void ml_cuda_eigh_tridiag_ql(ml_params p, const float *a, float *w, float *v, float *,
                                        int *info) {
  ML_CUDA_ENTRY_CONTEXT(ctx, p);
  ml_eigh_tridiag_ql(ctx, p, a, w, v, info);
}

__global__ void ml_cuda_eigh_tridiag_ql_lane(ml_params p, const float *a, float *w, float *v,
                                             float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_eigh_tridiag_ql(ctx, p, a, w, v, info);
}

__global__ void ml_cuda_eigvalsh_tridiag_ql_lane(ml_params p, const float *a, float *w, float *,
                                                 float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_eigvalsh_tridiag_ql(ctx, p, a, w, info);
}

__global__ void ml_cuda_eigvalsh_tridiag_ql(ml_params p, const float *a, float *w, float *,
                                            float *, int *info) {
  ML_CUDA_ENTRY_CONTEXT(ctx, p);
  ml_eigvalsh_tridiag_ql(ctx, p, a, w, info);
}

namespace ml::cuda {
namespace {
int eigh_scratch(int, int n, int) { return ml_eigh_tridiag_ql_scratch_floats(n, n); }
bool eigh_fits(int m, int n, int, int budget) {
  return m == n && ml_eigh_tridiag_ql_fits(n, n, budget);
}
int eigvalsh_scratch(int, int n, int) { return ml_eigvalsh_tridiag_ql_scratch_floats(n, n); }
bool eigvalsh_fits(int m, int n, int, int budget) {
  return m == n && ml_eigvalsh_tridiag_ql_fits(n, n, budget);
}
int eigvalsh_group_size_batch(int m, int n, int64_t batch, int units) {
  return ml_eigvalsh_tridiag_ql_group_size_batch(m, n, batch, units);
}
int eigh_group_size_batch(int m, int n, int64_t batch, int units) {
  return ml_eigh_tridiag_ql_group_size_batch(m, n, batch, units);
}
}  // namespace

extern const KernelDesc kEighTridiagQl = {"eigh_tridiag_ql", 1, ml_cuda_eigh_tridiag_ql,
                                          eigh_scratch, eigh_fits,
                                          ml_eigh_tridiag_ql_group_size, eigh_group_size_batch,
                                          ml_cuda_eigh_tridiag_ql_lane};
extern const KernelDesc kEigvalshTridiagQl = {"eigvalsh_tridiag_ql", 2,
                                              ml_cuda_eigvalsh_tridiag_ql, eigvalsh_scratch,
                                              eigvalsh_fits, ml_eigvalsh_tridiag_ql_group_size,
                                              eigvalsh_group_size_batch, ml_cuda_eigvalsh_tridiag_ql_lane};
}  // namespace ml::cuda
