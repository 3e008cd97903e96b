// CUDA entry points of core/kernels/svd_bidiag_qr.h: thin svd and svdvals, any m x n; a block
// per matrix and a thread per matrix (lane-per-matrix).
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/svd_bidiag_qr.h"
#include "kernel_desc.h"

__global__ void ml_cuda_svd_bidiag_qr(ml_params p, const float *a, float *u, float *s, float *vt,
                                      int *info) {
  ML_CUDA_ENTRY_CONTEXT(ctx, p);
  ml_svd_bidiag_qr(ctx, p, a, u, s, vt, info);
}

__global__ void ml_cuda_svdvals_bidiag_qr(ml_params p, const float *a, float *, float *s, float *,
                                          int *info) {
  ML_CUDA_ENTRY_CONTEXT(ctx, p);
  ml_svdvals_bidiag_qr(ctx, p, a, s, info);
}

__global__ void ml_cuda_svd_bidiag_qr_lane(ml_params p, const float *a, float *u, float *s,
                                           float *vt, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_svd_bidiag_qr(ctx, p, a, u, s, vt, info);
}

__global__ void ml_cuda_svdvals_bidiag_qr_lane(ml_params p, const float *a, float *, float *s,
                                               float *, int *info) {
  ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);
  ml_svdvals_bidiag_qr(ctx, p, a, s, info);
}

namespace ml::cuda {
namespace {
// The window is the device-V mode's (fits); a launch whose budget also holds V in shared memory
// sets ML_K_SVD_V_SHARED (choose_flags) and sizes its scratch for it.
int svd_scratch(int m, int n, int flags) {
  return ml_svd_bidiag_qr_scratch_floats_flags(m, n, flags);
}
bool svd_fits(int m, int n, int, int budget) { return ml_svd_bidiag_qr_fits(m, n, budget); }
int svd_choose_flags(int m, int n, int flags, int budget) {
  return ml_svd_bidiag_qr_choose_flags(m, n, flags, budget);
}
int svd_group_size_batch(int m, int n, int64_t batch, int units) {
  return ml_svd_bidiag_qr_group_size_batch(m, n, batch, units);
}
int svdvals_group_size_batch(int m, int n, int64_t batch, int units) {
  return ml_svdvals_bidiag_qr_group_size_batch(m, n, batch, units);
}
int svdvals_scratch(int m, int n, int) { return ml_svdvals_bidiag_qr_scratch_floats(m, n); }
bool svdvals_fits(int m, int n, int, int budget) {
  return ml_svdvals_bidiag_qr_fits(m, n, budget);
}
}  // namespace

extern const KernelDesc kSvdBidiagQr = {"svd_bidiag_qr", 3, ml_cuda_svd_bidiag_qr, svd_scratch,
                                        svd_fits, ml_svd_bidiag_qr_group_size,
                                        svd_group_size_batch, ml_cuda_svd_bidiag_qr_lane,
                                        svd_choose_flags};
extern const KernelDesc kSvdvalsBidiagQr = {"svdvals_bidiag_qr", 4, ml_cuda_svdvals_bidiag_qr,
                                            svdvals_scratch, svdvals_fits,
                                            ml_svdvals_bidiag_qr_group_size,
                                            svdvals_group_size_batch,
                                            ml_cuda_svdvals_bidiag_qr_lane};
}  // namespace ml::cuda
