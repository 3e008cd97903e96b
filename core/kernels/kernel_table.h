// The table of kernel entry points: the one list every target is generated from.
//   cuda/kernels.cu          the __global__ entries and the CUDA backend's kernel list,
//   metal/kernels.metal      the Metal entries (metal/metal_backend.cpp: the pipeline names),
//   core/src/kernel_table.*  the neutral list the core routes over (names, ops, windows),
//   tests/kernels            the CPU runner's list (test_kernel_table.cpp runs every line).
// Adding a kernel: its header here (include below) and one line in ML_KERNEL_TABLE; every
// backend then needs a group size for a GROUP or SIMD line in its launch configuration
// (cuda/launch_config.h, metal/launch_config.h), or it does not compile.
//
// X(name, op, fn, outs, kind, scratch, fits, choose_flags)
//   name          entry name: ml_cuda_<name>[_lane], ml_metal_<name>[_lane], ml_backend's
//                 "<backend>:<name>"
//   op            ML_OP_* (C API enum; only host code expands it)
//   fn            the kernel function: fn(ctx, p, a, <outs>, info)
//   outs          which of the call's outputs fn takes, in order: O01 (out0, out1), O0 (out0),
//                 O012 (out0, out1, out2), O1 (out1), O0B (out0, then the second input B
//                 from the out2 slot); as ml::Call: qr q r, eigh w v, eigvalsh w, svd u s vt,
//                 svdvals s, cholesky / inv / solve / solve_triangular x, lu_factor lu piv
//   kind          GROUP: a group of lanes per matrix in shared scratch (a block entry, plus a
//                 lane entry: one thread per matrix in its own slice of the scratch);
//                 REGISTER: one thread per matrix in registers (lane entry only);
//                 SIMD: one simdgroup per matrix (32 lanes; CUDA may run 16-lane sub-warp
//                 groups where launch_config.h says so), the matrix in the lanes' registers,
//                 data moved by simd shuffles, no group barriers (block entry only; the
//                 group size comes from launch_config.h like a GROUP line's)
//   scratch       int (int m, int n, int flags): scratch floats per matrix of a launch
//   fits          int (int m, int n, int flags, int scratch_floats): whether the shape and
//                 flags run within that scratch budget (m, n >= 1)
//   choose_flags  int (int m, int n, int flags, int scratch_floats): the kernel flags a launch
//                 uses given the scratch one matrix may have (a kernel may pick a faster
//                 layout that needs more)
// Order matters: per op, the core takes the first line whose window covers the shape (and,
// for REGISTER and SIMD lines, that the policy's gpu_small_max_n / gpu_simd_max_n allow).
#ifndef ML_KERNELS_KERNEL_TABLE_H
#define ML_KERNELS_KERNEL_TABLE_H

#include "eigh_jacobi_simd.h"
#include "eigh_jacobi_small.h"
#include "eigh_tridiag_ql.h"
#include "linsys_cholesky.h"
#include "linsys_cholesky_cols.h"
#include "linsys_cholesky_simd.h"
#include "linsys_lu.h"
#include "linsys_lu_simd.h"
#include "linsys_triangular.h"
#include "linsys_triangular_simd.h"
#include "qr_householder.h"
#include "qr_householder_simd.h"
#include "qr_householder_small.h"
#include "svd_bidiag_qr.h"
#include "svd_jacobi_group.h"
#include "svd_jacobi_simd.h"
#include "svd_jacobi_small.h"

// choose_flags of a kernel with a single layout.
ML_HOST_FN int ml_flags_unchanged(int m, int n, int flags, int scratch_floats) {
  (void)m;
  (void)n;
  (void)scratch_floats;
  return flags;
}

// clang-format off
#define ML_KERNEL_TABLE(X)                                                                      \
  X(qr_householder_small, ML_OP_QR, ml_qr_householder_small, O01, REGISTER,                   \
    ml_qr_householder_small_scratch_floats_flags, ml_qr_householder_small_fits_flags,         \
    ml_flags_unchanged)                                                                       \
  X(qr_householder_simd, ML_OP_QR, ml_qr_householder_simd, O01, SIMD,                         \
    ml_qr_householder_simd_scratch_floats_flags, ml_qr_householder_simd_fits_flags,           \
    ml_flags_unchanged)                                                                       \
  X(qr_householder_simd64, ML_OP_QR, ml_qr_householder_simd64, O01, SIMD,                     \
    ml_qr_householder_simd_scratch_floats_flags, ml_qr_householder_simd64_fits_flags,         \
    ml_flags_unchanged)                                                                       \
  X(qr_householder, ML_OP_QR, ml_qr_householder, O01, GROUP,                                  \
    ml_qr_householder_scratch_floats_mode, ml_qr_householder_fits_mode, ml_flags_unchanged)   \
  X(eigh_jacobi_small, ML_OP_EIGH, ml_eigh_jacobi_small, O01, REGISTER,                       \
    ml_eigh_jacobi_small_scratch_floats_flags, ml_eigh_jacobi_small_fits_flags,               \
    ml_flags_unchanged)                                                                       \
  X(eigvalsh_jacobi_small, ML_OP_EIGVALSH, ml_eigvalsh_jacobi_small, O0, REGISTER,            \
    ml_eigvalsh_jacobi_small_scratch_floats_flags, ml_eigvalsh_jacobi_small_fits_flags,       \
    ml_flags_unchanged)                                                                       \
  X(eigh_jacobi_simd, ML_OP_EIGH, ml_eigh_jacobi_simd, O01, SIMD,                             \
    ml_eigh_jacobi_simd_scratch_floats_flags, ml_eigh_jacobi_simd_fits_flags,                 \
    ml_flags_unchanged)                                                                       \
  X(eigvalsh_jacobi_simd, ML_OP_EIGVALSH, ml_eigvalsh_jacobi_simd, O0, SIMD,                  \
    ml_eigvalsh_jacobi_simd_scratch_floats_flags, ml_eigvalsh_jacobi_simd_fits_flags,         \
    ml_flags_unchanged)                                                                       \
  X(eigh_tridiag_ql, ML_OP_EIGH, ml_eigh_tridiag_ql, O01, GROUP,                              \
    ml_eigh_tridiag_ql_scratch_floats_flags, ml_eigh_tridiag_ql_fits_flags, ml_flags_unchanged) \
  X(eigh_tridiag_bisect, ML_OP_EIGH, ml_eigh_tridiag_bisect, O01, GROUP,                      \
    ml_eigh_tridiag_bisect_scratch_floats_flags, ml_eigh_tridiag_bisect_fits_flags,           \
    ml_flags_unchanged)                                                                       \
  X(eigvalsh_tridiag_bisect, ML_OP_EIGVALSH, ml_eigvalsh_tridiag_bisect, O0, GROUP,           \
    ml_eigvalsh_tridiag_bisect_scratch_floats_flags, ml_eigvalsh_tridiag_bisect_fits_flags,   \
    ml_flags_unchanged)                                                                       \
  X(eigvalsh_tridiag_ql, ML_OP_EIGVALSH, ml_eigvalsh_tridiag_ql, O0, GROUP,                   \
    ml_eigvalsh_tridiag_ql_scratch_floats_flags, ml_eigvalsh_tridiag_ql_fits_flags,           \
    ml_flags_unchanged)                                                                       \
  X(svd_jacobi_small, ML_OP_SVD, ml_svd_jacobi_small, O012, REGISTER,                         \
    ml_svd_jacobi_small_scratch_floats_flags, ml_svd_jacobi_small_fits_flags,                 \
    ml_flags_unchanged)                                                                       \
  X(svdvals_jacobi_small, ML_OP_SVDVALS, ml_svdvals_jacobi_small, O1, REGISTER,               \
    ml_svd_jacobi_small_scratch_floats_flags, ml_svd_jacobi_small_fits_flags,                 \
    ml_flags_unchanged)                                                                       \
  X(svd_jacobi_simd, ML_OP_SVD, ml_svd_jacobi_simd, O012, SIMD,                               \
    ml_svd_jacobi_simd_scratch_floats_flags, ml_svd_jacobi_simd_fits_flags,                   \
    ml_flags_unchanged)                                                                       \
  X(svdvals_jacobi_simd, ML_OP_SVDVALS, ml_svdvals_jacobi_simd, O1, SIMD,                     \
    ml_svd_jacobi_simd_scratch_floats_flags, ml_svd_jacobi_simd_fits_flags,                   \
    ml_flags_unchanged)                                                                       \
  X(svd_bidiag_qr, ML_OP_SVD, ml_svd_bidiag_qr, O012, GROUP,                                  \
    ml_svd_bidiag_qr_scratch_floats_flags, ml_svd_bidiag_qr_fits_flags,                       \
    ml_svd_bidiag_qr_choose_flags)                                                            \
  X(svd_jacobi_group, ML_OP_SVD, ml_svd_jacobi_group, O012, GROUP,                            \
    ml_svd_jacobi_group_scratch_floats_flags, ml_svd_jacobi_group_fits_flags,                 \
    ml_flags_unchanged)                                                                       \
  X(svdvals_bidiag_bisect, ML_OP_SVDVALS, ml_svdvals_bidiag_bisect, O1, GROUP,                \
    ml_svdvals_bidiag_bisect_scratch_floats_flags, ml_svdvals_bidiag_bisect_fits_flags,       \
    ml_flags_unchanged)                                                                       \
  X(svdvals_jacobi_group, ML_OP_SVDVALS, ml_svdvals_jacobi_group, O1, GROUP,                  \
    ml_svdvals_jacobi_group_scratch_floats_flags, ml_svdvals_jacobi_group_fits_flags,         \
    ml_flags_unchanged)                                                                       \
  X(svdvals_bidiag_qr, ML_OP_SVDVALS, ml_svdvals_bidiag_qr, O1, GROUP,                        \
    ml_svdvals_bidiag_qr_scratch_floats_flags, ml_svdvals_bidiag_qr_fits_flags,               \
    ml_svdvals_bidiag_qr_choose_flags)                                                        \
  X(cholesky_simd, ML_OP_CHOLESKY, ml_cholesky_simd, O0, SIMD,                               \
    ml_cholesky_simd_scratch_floats_flags, ml_cholesky_simd_fits_flags, ml_flags_unchanged)   \
  X(solve_triangular_simd, ML_OP_SOLVE_TRIANGULAR, ml_solve_triangular_simd, O0B, SIMD,       \
    ml_solve_triangular_simd_scratch_floats_flags, ml_solve_triangular_simd_fits_flags,       \
    ml_flags_unchanged)                                                                       \
  X(solve_triangular_simd128, ML_OP_SOLVE_TRIANGULAR, ml_solve_triangular_simd128, O0B, SIMD, \
    ml_solve_triangular_simd_scratch_floats_flags, ml_solve_triangular_simd128_fits_flags,    \
    ml_flags_unchanged)                                                                       \
  X(cholesky_group, ML_OP_CHOLESKY, ml_cholesky_group, O0, GROUP,                             \
    ml_cholesky_group_scratch_floats_flags, ml_cholesky_group_fits_flags, ml_flags_unchanged) \
  X(cholesky_cols, ML_OP_CHOLESKY, ml_cholesky_cols, O0, GROUP,                               \
    ml_cholesky_cols_scratch_floats_flags, ml_cholesky_cols_fits_flags, ml_flags_unchanged)   \
  X(cholesky_cols128, ML_OP_CHOLESKY, ml_cholesky_cols128, O0, GROUP,                         \
    ml_cholesky_cols_scratch_floats_flags, ml_cholesky_cols128_fits_flags,                    \
    ml_flags_unchanged)                                                                       \
  X(lu_factor_simd16, ML_OP_LU_FACTOR, ml_lu_factor_simd16, O01, SIMD,                        \
    ml_lu_simd_scratch_floats_flags, ml_lu_factor_simd16_fits_flags, ml_flags_unchanged)      \
  X(lu_factor_simd32, ML_OP_LU_FACTOR, ml_lu_factor_simd32, O01, SIMD,                        \
    ml_lu_simd_scratch_floats_flags, ml_lu_factor_simd32_fits_flags, ml_flags_unchanged)      \
  X(lu_factor_simd64, ML_OP_LU_FACTOR, ml_lu_factor_simd64, O01, SIMD,                        \
    ml_lu_simd_scratch_floats_flags, ml_lu_factor_simd64_fits_flags, ml_flags_unchanged)      \
  X(solve_simd16, ML_OP_SOLVE, ml_solve_simd16, O0B, SIMD,                                    \
    ml_lu_simd_scratch_floats_flags, ml_solve_simd16_fits_flags, ml_flags_unchanged)          \
  X(solve_simd32, ML_OP_SOLVE, ml_solve_simd32, O0B, SIMD,                                    \
    ml_lu_simd_scratch_floats_flags, ml_solve_simd32_fits_flags, ml_flags_unchanged)          \
  X(solve_simd64, ML_OP_SOLVE, ml_solve_simd64, O0B, SIMD,                                    \
    ml_lu_simd_scratch_floats_flags, ml_solve_simd64_fits_flags, ml_flags_unchanged)          \
  X(solve_right_simd16, ML_OP_SOLVE, ml_solve_right_simd16, O0B, SIMD,                        \
    ml_lu_simd_scratch_floats_flags, ml_solve_right_simd16_fits_flags, ml_flags_unchanged)    \
  X(solve_right_simd32, ML_OP_SOLVE, ml_solve_right_simd32, O0B, SIMD,                        \
    ml_lu_simd_scratch_floats_flags, ml_solve_right_simd32_fits_flags, ml_flags_unchanged)    \
  X(solve_right_simd64, ML_OP_SOLVE, ml_solve_right_simd64, O0B, SIMD,                        \
    ml_lu_simd_scratch_floats_flags, ml_solve_right_simd64_fits_flags, ml_flags_unchanged)    \
  X(inv_simd16, ML_OP_INV, ml_inv_simd16, O0, SIMD,                                           \
    ml_lu_simd_scratch_floats_flags, ml_inv_simd16_fits_flags, ml_flags_unchanged)            \
  X(inv_simd32, ML_OP_INV, ml_inv_simd32, O0, SIMD,                                           \
    ml_lu_simd_scratch_floats_flags, ml_inv_simd32_fits_flags, ml_flags_unchanged)            \
  X(inv_simd64, ML_OP_INV, ml_inv_simd64, O0, SIMD,                                           \
    ml_lu_simd_scratch_floats_flags, ml_inv_simd64_fits_flags, ml_flags_unchanged)            \
  X(solve_group, ML_OP_SOLVE, ml_solve_group, O0B, GROUP,                                     \
    ml_solve_group_scratch_floats_flags, ml_solve_group_fits_flags,                           \
    ml_solve_group_choose_flags)                                                              \
  X(inv_group, ML_OP_INV, ml_inv_group, O0, GROUP, ml_solve_group_scratch_floats_flags,       \
    ml_inv_group_fits_flags, ml_inv_group_choose_flags)                                       \
  X(solve_triangular_group, ML_OP_SOLVE_TRIANGULAR, ml_solve_triangular_group, O0B, GROUP,    \
    ml_solve_triangular_group_scratch_floats_flags, ml_solve_triangular_group_fits_flags,     \
    ml_solve_triangular_group_choose_flags)                                                   \
  X(lu_factor_group, ML_OP_LU_FACTOR, ml_lu_factor_group, O01, GROUP,                         \
    ml_lu_factor_group_scratch_floats_flags, ml_lu_factor_group_fits_flags, ml_flags_unchanged)
// clang-format on

// The output arguments of each `outs` code, for entry points that name their pointers
// o0, o1, o2 (the kernel's own argument list).
#define ML_KERNEL_OUTS_O01 o0, o1
#define ML_KERNEL_OUTS_O0 o0
#define ML_KERNEL_OUTS_O012 o0, o1, o2
#define ML_KERNEL_OUTS_O1 o1
// The ops with a right-hand side: out0 the result, then B, which the entries receive in the
// out2 slot (linsys_common.h; the backends pass Call::b there).
#define ML_KERNEL_OUTS_O0B o0, o2

#endif  // ML_KERNELS_KERNEL_TABLE_H
