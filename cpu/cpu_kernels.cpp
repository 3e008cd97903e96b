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
int64_t max_n(int32_t op) {
  // The kernels are correct for any n; these caps are where the single-threaded kernel stops
  // beating one LAPACK call per matrix on this 2-core development machine (thread CPU time,
  // n in 2..128). The policy field cpu_kernel_max_n picks the crossover within them.
  switch (op) {
    case ML_OP_QR: return 16;
    case ML_OP_EIGH: return 24;
    case ML_OP_EIGVALSH: return 16;
    case ML_OP_SVD: return 24;      // measured as core/kernels/README.md says
    case ML_OP_SVDVALS: return 16;
    default: return 0;
  }
}

int64_t small_max_n(int32_t op) {
  // Where the register kernels (core/kernels/*_small.h) beat the group kernels at group size 1
  // on one core of the 2-core development machine (g++ -O2, 4096 matrices, us per matrix):
  // qr 8x8 0.88 vs 2.46; eigh 5x5 1.55 vs 1.63, 6x6 2.82 vs 1.96; eigvalsh 5x5 1.15 vs 1.30,
  // 6x6 1.54 vs 1.44; svd 5x5 1.76 vs 2.92, 6x6 3.00 vs 3.29, 7x7 5.30 vs 4.43; svdvals 4x4
  // 0.77 vs 1.88, 5x5 1.75 vs 1.48. Jacobi does more arithmetic than tridiagonal/bidiagonal QR,
  // which the CPU pays for beyond n ~ 5 (a GPU thread hides it: there they cover n <= 8).
  switch (op) {
    case ML_OP_QR: return 8;
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH:
    case ML_OP_SVD: return 5;
    case ML_OP_SVDVALS: return 4;
    default: return 0;
  }
}

bool small(int32_t op, int64_t m, int64_t n) {
  const int64_t k = small_max_n(op);
  return m >= 1 && n >= 1 && m <= k && n <= k;
}

const char *name(int32_t op, int64_t m, int64_t n) {
  const bool s = small(op, m, n);
  switch (op) {
    case ML_OP_QR: return s ? "qr_householder_small" : "qr_householder";
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH: return s ? "eigh_jacobi_small" : "eigh_tridiag_ql";
    default: return s ? "svd_jacobi_small" : "svd_bidiag_qr";
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
            float *out1, float *out2, float *work, int32_t max_iter) {
  if (std::max(m, n) > max_n(op) || m < 1 || n < 1) return ML_INFO_NOT_CONVERGED;
  ml_ctx ctx{0, work};
  ml_params p{static_cast<ml_i32>(m), static_cast<ml_i32>(n), flags,
              max_iter, 1, 0};
  int info = 0;
  if (small(op, m, n)) {  // the register kernels: no scratch
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
