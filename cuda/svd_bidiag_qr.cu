// CUDA entry points of core/kernels/svd_bidiag_qr.h: thin svd and svdvals, any m x n.
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

namespace ml::cuda {
namespace {
int svd_scratch(int m, int n, int) { return ml_svd_bidiag_qr_scratch_floats(m, n); }
bool svd_fits(int m, int n, int, int budget) { return ml_svd_bidiag_qr_fits(m, n, budget); }
int svdvals_scratch(int m, int n, int) { return ml_svdvals_bidiag_qr_scratch_floats(m, n); }
bool svdvals_fits(int m, int n, int, int budget) {
  return ml_svdvals_bidiag_qr_fits(m, n, budget);
}
}  // namespace

extern const KernelDesc kSvdBidiagQr = {"svd_bidiag_qr", 3, ml_cuda_svd_bidiag_qr, svd_scratch,
                                        svd_fits, ml_svd_bidiag_qr_group_size};
extern const KernelDesc kSvdvalsBidiagQr = {"svdvals_bidiag_qr", 4, ml_cuda_svdvals_bidiag_qr,
                                            svdvals_scratch, svdvals_fits,
                                            ml_svdvals_bidiag_qr_group_size};
}  // namespace ml::cuda
