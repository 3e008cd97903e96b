// The portable kernels of core/kernels compiled as plain sequential C++ (group size 1:
// every barrier and simd op folds away) for the CPU backend's small-matrix path.
#define ML_CPU_SERIAL 1
#include <algorithm>

#include "../core/kernels/compat_cpu.h"
#include "../core/kernels/eigh_jacobi_small.h"
#include "../core/kernels/eigh_tridiag_ql.h"
#include "../core/kernels/qr_householder.h"
#include "../core/kernels/qr_householder_small.h"
#include "../core/kernels/svd_bidiag_qr.h"
#include "../core/kernels/svd_jacobi_small.h"
#include "cpu_kernels.h"
#include "metal_linalg/metal_linalg.h"

namespace ml::cpu_kernels {

bool small_fits(int32_t op, int64_t m, int64_t n) {
  if (m < 1 || n < 1 || m > INT32_MAX || n > INT32_MAX) return false;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  switch (op) {
    // Every QR mode fits where one does.
    case ML_OP_QR: return ml_qr_householder_small_fits(mi, ni, ML_K_QR_REDUCED) != 0;
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH: return ml_eigh_jacobi_small_fits(mi, ni, 0) != 0;
    case ML_OP_SVD:
    case ML_OP_SVDVALS: return ml_svd_jacobi_small_fits(mi, ni) != 0;
    default: return false;
  }
}

const char *name(int32_t op, bool small) {
  switch (op) {
    case ML_OP_QR: return small ? "qr_householder_small" : "qr_householder";
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH: return small ? "eigh_jacobi_small" : "eigh_tridiag_ql";
    default: return small ? "svd_jacobi_small" : "svd_bidiag_qr";
  }
}

int64_t scratch_floats(int32_t op, int64_t m, int64_t n) {
  if (m < 1 || n < 1) return 0;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  switch (op) {
    case ML_OP_QR: return ml_qr_householder_scratch_floats(mi, ni);
    case ML_OP_EIGH: return ml_eigh_tridiag_ql_scratch_floats(ni, ni);
    case ML_OP_EIGVALSH: return ml_eigvalsh_tridiag_ql_scratch_floats(ni, ni);
    case ML_OP_SVD: return ml_svd_bidiag_qr_scratch_floats(mi, ni);
    case ML_OP_SVDVALS: return ml_svdvals_bidiag_qr_scratch_floats(mi, ni);
    default: return 0;
  }
}

int32_t run(int32_t op, int64_t m, int64_t n, int32_t flags, const float *a, float *out0,
            float *out1, float *out2, float *work, bool small, int32_t max_iter) {
  if (m < 1 || n < 1 || (small && !small_fits(op, m, n))) return ML_INFO_NOT_CONVERGED;
  ml_ctx ctx{0, work};
  ml_params p{static_cast<ml_i32>(m), static_cast<ml_i32>(n), flags,
              max_iter, 1, 0};
  int info = 0;
  if (small) {  // the register kernels: no scratch
    switch (op) {
      case ML_OP_QR: ml_qr_householder_small(ctx, p, a, out0, out1, &info); break;
      case ML_OP_EIGH: ml_eigh_jacobi_small(ctx, p, a, out0, out1, &info); break;
      case ML_OP_EIGVALSH: ml_eigvalsh_jacobi_small(ctx, p, a, out0, &info); break;
      case ML_OP_SVD: ml_svd_jacobi_small(ctx, p, a, out0, out1, out2, &info); break;
      case ML_OP_SVDVALS: ml_svdvals_jacobi_small(ctx, p, a, out1, &info); break;
      default: return ML_INFO_NOT_CONVERGED;
    }
    return info;
  }
  switch (op) {
    case ML_OP_QR: ml_qr_householder(ctx, p, a, out0, out1, &info); break;
    case ML_OP_EIGH: ml_eigh_tridiag_ql(ctx, p, a, out0, out1, &info); break;
    case ML_OP_EIGVALSH: ml_eigvalsh_tridiag_ql(ctx, p, a, out0, &info); break;
    case ML_OP_SVD: ml_svd_bidiag_qr(ctx, p, a, out0, out1, out2, &info); break;
    case ML_OP_SVDVALS: ml_svdvals_bidiag_qr(ctx, p, a, out1, &info); break;
    default: return ML_INFO_NOT_CONVERGED;
  }
  return info;
}

}  // namespace ml::cpu_kernels
