// The portable kernels of core/kernels compiled as plain sequential C++ (group size 1:
// every barrier and simd op folds away) for the CPU backend's small-matrix path.
#define ML_CPU_SERIAL 1
#include <algorithm>

#include "../kernels/compat_cpu.h"
#include "../kernels/eigh_tridiag_ql.h"
#include "../kernels/qr_householder.h"
#include "../kernels/svd_bidiag_qr.h"
#include "cpu_kernels.h"
#include "metal_linalg/metal_linalg.h"

namespace ml::cpu_kernels {

int64_t max_n(int32_t op) {
  // The kernels are correct for any n; these caps are where the single-threaded kernel stops
  // beating one LAPACK call per matrix on this 2-core development machine (thread CPU time,
  // n in 2..128). The policy field cpu_kernel_max_n picks the crossover within them.
  switch (op) {
    case ML_OP_QR: return 16;
    case ML_OP_EIGH: return 24;
    case ML_OP_EIGVALSH: return 16;
    case ML_OP_SVD: return 24;      // measured by helper K3 (core/kernels/README.md)
    case ML_OP_SVDVALS: return 16;
    default: return 0;
  }
}

int64_t scratch_floats(int32_t op, int64_t m, int64_t n) {
  if (std::max(m, n) > max_n(op) || m < 1 || n < 1) return 0;
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
            float *out1, float *out2, float *work) {
  if (std::max(m, n) > max_n(op) || m < 1 || n < 1) return ML_INFO_NOT_CONVERGED;
  ml_ctx ctx{0, work};
  ml_params p{static_cast<ml_i32>(m), static_cast<ml_i32>(n), flags, 0, 1, 0};
  int info = 0;
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
