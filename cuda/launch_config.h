// Launch configuration of the CUDA backend: threads per group for every GROUP kernel of
// core/kernels/kernel_table.h (group_size_<name>), groups per block and matrices per
// lane-per-matrix block. Plain host C++ (no CUDA headers), so the CPU-side tests check the
// launch decisions too (tests/backends/test_routing.cpp). Measurements: H200 (sm_90, 132 SMs).
#pragma once
#include <algorithm>
#include <cstdint>

namespace ml::cuda {

// Whole warps of at least 32 lanes, at most cap.
inline int warps_of(int lanes, int cap) {
  const int g = (lanes + 31) / 32 * 32;
  return g < 32 ? 32 : (g > cap ? cap : g);
}

// Group size for a throughput-bound launch (many matrices per SM) of matrices up to 16 x 16:
// 16 lanes, two matrices per warp (sub-warp groups of compat_cuda.h). H200, 16384 matrices of
// n = 9..16, every op: 0.71-0.84x the time with 32 lanes; 1024 matrices (latency-bound):
// 1.3-1.5x, hence the batch test.
inline int throughput_group_size(int g, int m, int n, int64_t batch, int units) {
  const int big = m > n ? m : n;
  return (big <= 16 && units > 0 && batch >= 16 * int64_t{units}) ? 16 : g;
}

// Group size of a SIMD line (one simdgroup per matrix, a lane per column): a 16-lane sub-warp
// group (two matrices per warp) when max(m, n) <= 16, else a whole warp.
inline int simd_group_size(int m, int n) { return (m > n ? m : n) <= 16 ? 16 : 32; }

// ---- threads per group of each GROUP and SIMD kernel: (m, n, batch, multiprocessors) ----

// qr: a lane per column of the trailing update, rounded to whole warps.
inline int group_size_qr_householder(int m, int n, int64_t batch, int units) {
  return throughput_group_size(warps_of(std::max(n, 32), 256), m, n, batch, units);
}

// qr SIMD lines: one simdgroup per matrix, a lane per column (16 lanes for max(m, n) <= 16).
inline int group_size_qr_householder_simd(int m, int n, int64_t, int) {
  return simd_group_size(m, n);
}
inline int group_size_qr_householder_simd64(int m, int n, int64_t, int) {
  return simd_group_size(m, n);
}

// eigh: a lane per row of the trailing matrix in whole warps, plus one warp for the serial QL
// sweeps when 24 < n <= 32 or n > 64 (the rotations then go to the other warps). H200,
// 16384 x 64^2: 64 lanes 14.8 ms, 96 lanes 16.3 ms. Many matrices per SM: throughput-bound,
// the extra warp for n <= 32 costs more than it hides (H200, 32^2: 16384 matrices 3.55 ms with
// 32 lanes, 4.15 with 64; 1024 matrices 0.53 vs 0.40).
inline int group_size_eigh_tridiag_ql(int m, int n, int64_t batch, int units) {
  if (n <= 32 && units > 0 && batch >= 16 * int64_t{units})
    return throughput_group_size(32, m, n, batch, units);
  const int g = (n + 31) / 32 * 32 + ((n > 24 && n <= 32) || n > 64 ? 32 : 0);
  return g < 32 ? 32 : (g > 288 ? 288 : g);
}

// eigvalsh: one warp for n <= 32 (no rotations to hand to a second one; H200, 16384 x 32^2:
// 1.78 ms vs 3.20 with 64 lanes), else a warp more than the rows (96 lanes measured faster
// than 64 for n = 64).
inline int group_size_eigvalsh_tridiag_ql(int m, int n, int64_t batch, int units) {
  int g = (n + 31) / 32 * 32 + (n > 32 ? 32 : 0);
  g = g < 32 ? 32 : (g > 288 ? 288 : g);
  return throughput_group_size(g, m, n, batch, units);
}

// eigh / eigvalsh Jacobi (SIMD lines, n <= 32): a lane per column; 16-lane groups for n <= 16.
inline int group_size_eigh_jacobi_simd(int m, int n, int64_t, int) { return simd_group_size(m, n); }
inline int group_size_eigvalsh_jacobi_simd(int m, int n, int64_t, int) {
  return simd_group_size(m, n);
}

// eigh by bisection and inverse iteration: a lane per row (and per eigenvalue and vector); no
// serial phase. Not measured yet.
inline int group_size_eigh_tridiag_bisect(int m, int n, int64_t batch, int units) {
  return throughput_group_size(warps_of(n, 256), m, n, batch, units);
}

// eigvalsh by bisection: a lane per row of the tridiagonalisation, which is also a lane per
// eigenvalue; no serial phase, so no extra warp. Not measured yet.
inline int group_size_eigvalsh_tridiag_bisect(int m, int n, int64_t batch, int units) {
  return throughput_group_size(warps_of(n, 256), m, n, batch, units);
}

// svd: a lane per row of the larger side in whole warps, plus a warp for the rotations beyond
// n = 24 unless throughput-bound.
inline int group_size_svd_bidiag_qr(int m, int n, int64_t batch, int units) {
  const int big = m > n ? m : n;
  const int g = warps_of(big, 256);
  if (units > 0 && batch >= 16 * int64_t{units})
    return throughput_group_size(g, m, n, batch, units);
  return big > 24 ? g + 32 : g;
}

// svd / svdvals by one-sided Jacobi in a group: a warp per two column pairs of a round, at most
// 16 warps (the block entry's registers allow 640 lanes; 512 split the pairs evenly).
inline int group_size_svd_jacobi_group(int m, int n, int64_t, int) {
  const int pairs = ((m < n ? m : n) + 1) / 2;
  return warps_of(32 * ((pairs + 1) / 2), 512);
}
inline int group_size_svdvals_jacobi_group(int m, int n, int64_t batch, int units) {
  return group_size_svd_jacobi_group(m, n, batch, units);
}

// svdvals: no vectors and no rotation work: as the bidiagonalisation wants.
inline int group_size_svdvals_bidiag_qr(int m, int n, int64_t batch, int units) {
  return throughput_group_size(warps_of(m > n ? m : n, 256), m, n, batch, units);
}

// svdvals by bisection: as svdvals (a lane per row of the bidiagonalisation, at least one per
// singular value); no serial phase. Not measured yet.
inline int group_size_svdvals_bidiag_bisect(int m, int n, int64_t batch, int units) {
  return group_size_svdvals_bidiag_qr(m, n, batch, units);
}

// ---- the linear systems (core/kernels/linsys_*.h) ----
// Right-looking factorizations and column-oriented substitutions: a lane per entry of a
// trailing block of about n^2 / 2 (cholesky) or n^2 (LU) entries at the first steps, so about
// two lanes per row in whole warps, at most 256. Not measured yet.
inline int linsys_group_size(int n) { return warps_of(2 * n, 256); }
inline int group_size_cholesky_group(int, int n, int64_t, int) { return linsys_group_size(n); }
// cholesky SIMD line (n <= 32): one simdgroup per matrix, a lane per row (16 lanes for n <= 16).
inline int group_size_cholesky_simd(int m, int n, int64_t, int) { return simd_group_size(m, n); }
// cholesky_cols / cholesky_cols128 (n <= 64 / 128): a lane per column, whole warps.
inline int group_size_cholesky_cols(int, int n, int64_t, int) { return warps_of(n, 128); }
inline int group_size_cholesky_cols128(int, int n, int64_t, int) { return warps_of(n, 128); }
// solve_triangular SIMD lines: one simdgroup per matrix (16 lanes for n <= 16).
inline int group_size_solve_triangular_simd(int, int n, int64_t, int) {
  return simd_group_size(n, n);
}
inline int group_size_solve_triangular_simd128(int, int n, int64_t, int) {
  return simd_group_size(n, n);
}
inline int group_size_solve_group(int, int n, int64_t, int) { return linsys_group_size(n); }
inline int group_size_inv_group(int, int n, int64_t, int) { return linsys_group_size(n); }
inline int group_size_solve_triangular_group(int, int n, int64_t, int) {
  return linsys_group_size(n);
}
inline int group_size_lu_factor_group(int m, int n, int64_t, int) {
  return linsys_group_size(m > n ? m : n);
}
// LU SIMD lines (lu_factor / solve / inv, max(m, n) <= 16, 17..32, 33..64): one simdgroup per
// matrix, a lane per row (two for n > 32); 8-lane groups (four matrices per warp) for
// max(m, n) <= 8 (not for X A = B, eight: 0, whose 8-lane form took 200 registers on sm_90
// against 89 at 16 lanes), 16 lanes for <= 16.
inline int lu_simd_group_size(int m, int n, int eight = 1) {
  const int big = m > n ? m : n;
  return (big <= 8 && eight) ? 8 : (big <= 16 ? 16 : 32);
}
#define ML_CUDA_LU_SIMD_GS(name) \
  inline int group_size_##name(int m, int n, int64_t, int) { return lu_simd_group_size(m, n); }
#define ML_CUDA_LU_SIMD_GS16(name) \
  inline int group_size_##name(int m, int n, int64_t, int) { return lu_simd_group_size(m, n, 0); }
ML_CUDA_LU_SIMD_GS(lu_factor_simd16)
ML_CUDA_LU_SIMD_GS(lu_factor_simd32)
ML_CUDA_LU_SIMD_GS(lu_factor_simd64)
ML_CUDA_LU_SIMD_GS(solve_simd16)
ML_CUDA_LU_SIMD_GS(solve_simd32)
ML_CUDA_LU_SIMD_GS(solve_simd64)
ML_CUDA_LU_SIMD_GS16(solve_right_simd16)
ML_CUDA_LU_SIMD_GS16(solve_right_simd32)
ML_CUDA_LU_SIMD_GS16(solve_right_simd64)
ML_CUDA_LU_SIMD_GS(inv_simd16)
ML_CUDA_LU_SIMD_GS(inv_simd32)
ML_CUDA_LU_SIMD_GS(inv_simd64)
#undef ML_CUDA_LU_SIMD_GS
#undef ML_CUDA_LU_SIMD_GS16
// ---- global launches (Launch::kGlobal: a group kernel's scratch in device memory) ----

// Threads of a global launch's block (one matrix per block) for any GROUP kernel: a lane per
// row of the larger side in whole warps plus one warp for the serial steps (QL chase, QR
// steps of the SVD), at most 1024. Unmeasured: a starting point for the H200 runs, not a
// tuned choice (the shared-memory launches above stop at 256-288 lanes; past the shared window
// the trailing updates have more rows than that).
inline int group_size_global(int m, int n) {
  const int big = m > n ? m : n;
  const int g = (big + 31) / 32 * 32 + 32;
  return g > 1024 ? 1024 : g;
}

// svd / svdvals one-sided Jacobi (SIMD lines): a lane per column, one simdgroup.
inline int group_size_svd_jacobi_simd(int m, int n, int64_t, int) {
  return simd_group_size(m, n);
}
inline int group_size_svdvals_jacobi_simd(int m, int n, int64_t, int) {
  return simd_group_size(m, n);
}

// ---- blocks ----

// Threads per group: the kernel's group size, `forced` (METAL_LINALG_CUDA_GROUP_SIZE, 0: not
// set) for experiments, capped by what the compiled kernel allows (registers).
inline int threads_per_group(int suggested, int forced, int max_threads) {
  const int t = forced > 0 ? forced : suggested;
  return std::max(1, std::min(t, std::min(max_threads, 1024)));
}

// Groups per block (blockDim.y). One-warp groups: `forced` (METAL_LINALG_CUDA_GROUPS_PER_BLOCK,
// 0: not set); a block of one warp leaves SM warp slots empty (at most 32 blocks reside per
// SM), but on the H200 two to eight groups per block measured no faster for n <= 32
// (benchmarks/tune_cuda_groups.py), so the default stays one; the tests run both.
// Groups of fewer than 32 lanes (a power of two) always share warps: 32 / threads groups per
// warp, times the forced count.
inline int groups_per_block(int threads, int scratch_floats, int budget_floats, int max_threads,
                            int forced) {
  const bool sub_warp = threads < 32 && (32 % threads) == 0 && threads > 1;
  if (!sub_warp && (threads != 32 || forced <= 1)) return 1;
  const int stride = (scratch_floats + 31) / 32 * 32;
  int g = sub_warp ? (32 / threads) * std::max(forced, 1) : forced;
  const int step = sub_warp ? 32 / threads : 1;  // whole warps only
  while (g > step && (g * threads > max_threads || int64_t{g} * stride > budget_floats)) g -= step;
  while (g > 1 && int64_t{g} * stride > budget_floats) --g;  // (then a warp is partly idle)
  return g;
}

// Groups per block of a SIMD line (one simdgroup per matrix) when not forced: four one-warp
// groups per block, so that up to 64 warps can reside per SM (at most 32 blocks do); for
// 16-lane groups, the same four warps (eight matrices).
inline int simd_groups_per_block() { return 4; }

// Matrices per block of a lane-per-matrix launch (one warp by default; at most 32 blocks
// reside per SM, so shared memory, not this, limits residency for all but the tiniest
// matrices), `forced` (METAL_LINALG_CUDA_LANE_MATRICES, 0: not set) for experiments; capped by
// the batch, the kernel's thread limit and the shared memory budget. stride: the odd slice
// size of one matrix.
inline int lane_matrices(int64_t batch, int stride, int budget_floats, int max_threads,
                         int forced) {
  int64_t g = forced > 0 ? forced : 32;
  g = std::min<int64_t>({g, batch, max_threads, budget_floats / stride});
  return static_cast<int>(std::max<int64_t>(g, 1));
}

// The share of the shared-memory budget one matrix of a lane-per-matrix block is offered when
// the kernel picks its layout (choose_flags): a warp's share.
inline int lane_budget(int budget_floats) { return budget_floats / 32; }

}  // namespace ml::cuda
