// Launch configuration of the Metal backend: threads per threadgroup for every GROUP kernel of
// core/kernels/kernel_table.h (group_size_<name>), threads of lane-per-matrix threadgroups,
// and how long batches are split. Plain C++ (no Metal headers): the kernel tests run the
// kernels through the CPU runner at these sizes (tests/kernels/test_kernel_table.cpp).
// Not tuned on Apple hardware (none was available): the rules are the kernels' natural
// shapes (a lane per row or column in whole simdgroups). Metal's simd_* functions span the
// whole simdgroup, so no group is smaller than 32 lanes (CUDA's 16-lane groups do not apply).
#pragma once
#include <cstdint>

#include "../core/kernels/params.h"  // ML_METAL_SCRATCH_FLOATS

namespace ml::metal {

constexpr int kSimdWidth = 32;
// Threadgroup memory of every entry: the static array of ML_METAL_SCRATCH_FLOATS (32 KB).
constexpr int kScratchFloats = ML_METAL_SCRATCH_FLOATS;

// Whole simdgroups of at least 32 lanes, at most cap.
inline int simdgroups_of(int lanes, int cap) {
  const int g = (lanes + 31) / 32 * 32;
  return g < 32 ? 32 : (g > cap ? cap : g);
}

// Threads per threadgroup of a SIMD line: one simdgroup.
inline int simd_group_size(int, int) { return kSimdWidth; }

// ---- threads per threadgroup of each GROUP and SIMD kernel: (m, n, batch) ----
inline int group_size_qr_householder(int, int n, int64_t) {
  return simdgroups_of(n > 32 ? n : 32, 256);  // a lane per column of the trailing update
}
// qr SIMD lines: one simdgroup per matrix, a lane per column.
inline int group_size_qr_householder_simd(int m, int n, int64_t) { return simd_group_size(m, n); }
inline int group_size_qr_householder_simd64(int m, int n, int64_t) {
  return simd_group_size(m, n);
}
inline int group_size_eigh_tridiag_ql(int, int n, int64_t) {
  // a lane per row, plus a simdgroup for the QL sweeps' rotations where they are long
  const int g = (n + 31) / 32 * 32 + ((n > 24 && n <= 32) || n > 64 ? 32 : 0);
  return g < 32 ? 32 : (g > 288 ? 288 : g);
}
inline int group_size_eigvalsh_tridiag_ql(int, int n, int64_t) {
  const int g = (n + 31) / 32 * 32 + (n > 32 ? 32 : 0);
  return g < 32 ? 32 : (g > 288 ? 288 : g);
}
inline int group_size_eigh_jacobi_simd(int m, int n, int64_t) { return simd_group_size(m, n); }
inline int group_size_eigvalsh_jacobi_simd(int m, int n, int64_t) { return simd_group_size(m, n); }
inline int group_size_eigh_tridiag_bisect(int, int n, int64_t) {
  return simdgroups_of(n, 256);  // a lane per row, eigenvalue and eigenvector
}
inline int group_size_eigvalsh_tridiag_bisect(int, int n, int64_t) {
  return simdgroups_of(n, 256);  // a lane per row, which is also a lane per eigenvalue
}
inline int group_size_svd_bidiag_qr(int m, int n, int64_t) {
  const int big = m > n ? m : n;
  const int g = simdgroups_of(big, 256);
  return big > 24 ? g + 32 : g;
}
inline int group_size_svdvals_bidiag_qr(int m, int n, int64_t) {
  return simdgroups_of(m > n ? m : n, 256);
}
inline int group_size_svdvals_bidiag_bisect(int m, int n, int64_t batch) {
  return group_size_svdvals_bidiag_qr(m, n, batch);
}

// svd / svdvals one-sided Jacobi in a threadgroup: a simdgroup per two column pairs of a round,
// at most 8 (each then takes several pairs a round).
inline int group_size_svd_jacobi_group(int m, int n, int64_t) {
  return simdgroups_of(32 * ((((m < n ? m : n) + 1) / 2 + 1) / 2), 256);
}
inline int group_size_svdvals_jacobi_group(int m, int n, int64_t batch) {
  return group_size_svd_jacobi_group(m, n, batch);
}

// svd / svdvals one-sided Jacobi (SIMD lines): one simdgroup, a lane per column.
inline int group_size_svd_jacobi_simd(int m, int n, int64_t) { return simd_group_size(m, n); }
inline int group_size_svdvals_jacobi_simd(int m, int n, int64_t) {
  return simd_group_size(m, n);
}

// The linear systems (core/kernels/linsys_*.h): about two lanes per row (a lane per entry of
// the trailing block at the first steps), whole simdgroups, at most 256.
inline int linsys_group_size(int n) { return simdgroups_of(2 * n, 256); }
inline int group_size_cholesky_group(int, int n, int64_t) { return linsys_group_size(n); }
inline int group_size_cholesky_simd(int m, int n, int64_t) { return simd_group_size(m, n); }
inline int group_size_cholesky_cols(int, int n, int64_t) { return simdgroups_of(n, 128); }
inline int group_size_cholesky_cols128(int, int n, int64_t) { return simdgroups_of(n, 128); }
inline int group_size_solve_triangular_simd(int, int n, int64_t) { return simd_group_size(n, n); }
inline int group_size_solve_triangular_simd128(int, int n, int64_t) {
  return simd_group_size(n, n);
}
inline int group_size_solve_group(int, int n, int64_t) { return linsys_group_size(n); }
inline int group_size_inv_group(int, int n, int64_t) { return linsys_group_size(n); }
inline int group_size_solve_triangular_group(int, int n, int64_t) { return linsys_group_size(n); }
inline int group_size_lu_factor_group(int m, int n, int64_t) {
  return linsys_group_size(m > n ? m : n);
}
// LU SIMD lines (lu_factor / solve / inv): one simdgroup per matrix, a lane per row.
#define ML_METAL_LU_SIMD_GS(name) \
  inline int group_size_##name(int m, int n, int64_t) { return simd_group_size(m, n); }
ML_METAL_LU_SIMD_GS(lu_factor_simd16)
ML_METAL_LU_SIMD_GS(lu_factor_simd32)
ML_METAL_LU_SIMD_GS(lu_factor_simd64)
ML_METAL_LU_SIMD_GS(solve_simd16)
ML_METAL_LU_SIMD_GS(solve_simd32)
ML_METAL_LU_SIMD_GS(solve_simd64)
ML_METAL_LU_SIMD_GS(solve_right_simd16)
ML_METAL_LU_SIMD_GS(solve_right_simd32)
ML_METAL_LU_SIMD_GS(solve_right_simd64)
ML_METAL_LU_SIMD_GS(inv_simd16)
ML_METAL_LU_SIMD_GS(inv_simd32)
ML_METAL_LU_SIMD_GS(inv_simd64)
#undef ML_METAL_LU_SIMD_GS
// Slice of the threadgroup scratch one thread of a lane-per-matrix threadgroup of `threads`
// threads gets (compat_metal.h's ml_lane_slice: odd, so equal offsets hit distinct banks).
inline int lane_slice(int threads) {
  int slice = kScratchFloats / threads;
  return slice - ((slice & 1) ? 0 : 1);
}

// Threads (matrices) per lane-per-matrix threadgroup: a simdgroup's worth, fewer for a short
// batch, the pipeline's limit or when each matrix's slice would not hold scratch_floats;
// 0 when even one thread's slice is too small (then the block entry runs).
inline int lane_threads(int64_t batch, int scratch_floats, int max_threads) {
  int64_t t = kSimdWidth;
  if (batch < t) t = batch;
  if (max_threads < t) t = max_threads;
  while (t > 1 && lane_slice(static_cast<int>(t)) < scratch_floats) --t;
  return t >= 1 && lane_slice(static_cast<int>(t)) >= scratch_floats ? static_cast<int>(t) : 0;
}

// Threads per threadgroup of a REGISTER kernel (no threadgroup memory): two simdgroups.
inline int register_threads(int max_threads) { return max_threads < 64 ? max_threads : 64; }

// Matrices per dispatch and per command buffer: each dispatch stays far below macOS's GPU
// watchdog (a command buffer running for seconds is killed) by bounding its work, about
// batch * max(m, n)^3 multiply-adds, to 2^34.
// A multiple of 64 (so lane and register threadgroups, of at most 64 matrices, do not straddle
// two dispatches: a straddling group would compute the next dispatch's first matrices too).
inline int64_t matrices_per_dispatch(int64_t m, int64_t n) {
  const int64_t big = m > n ? m : n;
  const int64_t per = big * big * big > 0 ? big * big * big : 1;
  const int64_t cap = (int64_t{1} << 34) / per / 64 * 64;
  return cap < 64 ? 64 : cap;
}

}  // namespace ml::metal
