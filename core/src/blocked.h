// Blocked algorithms for large matrices: each call becomes a sequence of step-kernel launches
// (core/kernels/steps.h) on one device queue, every intermediate in a device workspace the
// caller provides. The sequencing is written once here, backend-neutral; a backend supplies a
// Runner that enqueues one step (cuda/cuda_backend.cu; the CPU runner in the kernel tests).
// Loop bounds depend on the shape only, so nothing waits for the device.
#pragma once
#include <cstdint>

#include "../kernels/params.h"
#include "../kernels/step_list.h"
#include "backend.h"

namespace ml::blocked {

// Step ids: the lines of ML_STEP_TABLE in order (kStep_gemm, ...).
#define ML_STEP_ID(name, fn) kStep_##name,
enum Step : int32_t { ML_STEP_TABLE(ML_STEP_ID) kStepCount };
#undef ML_STEP_ID
// "gemm", "qr_panel", ...
const char *step_name(int32_t step);

struct StepLaunch {
  int32_t step;
  int32_t group_size;     // lanes per group
  int32_t shared_floats;  // shared scratch floats per group
  ml_step_params p;       // p.groups groups, p.group_offset 0
};

// Tuning of a run: panel width, lanes of the products and of the panels (the CPU-runner tests
// use small ones so block boundaries fall inside small matrices).
struct Options {
  int nb = 32;            // panel width (1..64)
  int nb_outer = 64;      // QR: columns per trailing update when the shared-memory panels are
                          // narrower (their reflectors merged by larft; <= 64, 0: one level)
  int gemm_lanes = 16;    // L of core/kernels/gemm.h: groups of L x L lanes
  int gemm_regs = 4;      // R of the largest tile: R x R outputs per lane (4, or 8 when L = 16)
  int max_group = 1024;   // largest group size
  int shared_floats = 1 << 20;  // shared memory one group may use (floats)
  int parallel_groups = 264;    // groups that fill the device (products with fewer split k)
  int64_t max_workspace_bytes = int64_t{1} << 30;  // bound on the workspace of a call
  // eigvalsh by two stages (dense -> band -> tridiagonal, blocked_eigh2.cpp) from this n (0:
  // never); the band's half-width (2..64) and the chase's tasks per sweep and launch (1, 2;
  // 0: the whole chase in one launch, the sweeps taken by tickets).
  int eigh_two_stage_min_n = 0;
  int eigh_two_stage_max_n = 0;      // and up to this n (0: any)
  int eigh_two_stage_min_batch = 1;  // and from this batch
  int eigh_band = 16;
  int eigh_chase_tasks = 0;
  int eigh_chase_lanes = 0;  // lanes of the chase's groups (0: by the band)
  // QR: rows per group of a panel spread over many groups (core/kernels/qr_tsqr.h; 256 is the
  // intended size), and the largest batch spread so. 0: one group per panel, the default until
  // the spread panels are measured on a GPU.
  int qr_tsqr_rows = 0;
  int qr_tsqr_max_batch = 64;
  int qr_tsqr_min_rows = 0;   // spread only panels of at least this many rows (and 2 qr_tsqr_rows)
  int qr_tsqr_min_ratio = 0;  // and only matrices with m >= this x n (0: any shape)
  // QR: a panel column's rows over several warps while fewer columns than warps are left (1),
  // and the lanes of the panel steps of >= 1024 rows (0: panel_lanes()).
  int qr_panel_split = 0;
  int qr_panel_lanes = 0;
  // SVD: brd_tgk_fix's projections a warp per column, with this many lanes (0: a lane per
  // column, plain_lanes()).
  int svd_fix_lanes = 0;
  // eigh's one-stage tridiagonalisation (blocked_eigh.cpp): lanes and rows per group of the
  // column update (lanes / rows slices of the panel per row), outputs per group of the tiled
  // symv (0: from the device's size; -1: one simdgroup per output, untiled, the default: the
  // tiled one measured slower on the H200).
  int trd_lanes = 256;
  int trd_rows = 32;
  int trd_symv_per = -1;
  // The same steps with each panel in one launch (trd_panel: persistent groups taking the
  // steps' groups as items, core/kernels/sytrd_blocked.h): this many groups (0: a launch per
  // step, the default; -1: parallel_groups, twice that for wide columns, blocked_eigh.cpp), for
  // chunks of up to trd_panel_max_batch matrices (0: any).
  int trd_panel_groups = 0;
  int trd_panel_max_batch = 0;
  // trd_panel's y = A22 v from A22's lower triangle alone (the triangle form, trd_panel_tri):
  // items of 32 columns by chunks of this many rows (rounded up to a multiple of 32; 0: full
  // columns, the default), for chunks of up to trd_tri_max_batch matrices (0: any).
  int trd_tri_rows = 0;
  int trd_tri_max_batch = 0;
  // eigh's tridiagonalisation with the trailing matrix resident in the groups' shared memory
  // (trd_res, core/kernels/sytrd_resident.h) for chunks of at most trd_res_max_batch matrices
  // (0: never): trd_res_groups groups in all, each of trd_res_lanes lanes (all must run at once:
  // at most the groups the device holds together, one per multiprocessor on CUDA); the panels
  // above run first until the columns left fit the groups' shared memory (shared_floats).
  int trd_res_groups = 0;
  int trd_res_max_batch = 0;
  int trd_res_lanes = 1024;
  // At most n / trd_res_min_cols groups a matrix (fewer, fuller groups for small n; 1: one
  // column a group at the least).
  int trd_res_min_cols = 1;
  // trd_res's hand-offs as tagged words (sytrd_resident.h; backends whose dialect has them,
  // ML_HAS_TAGGED) instead of flags and fences.
  int trd_res_tagged = 0;
  // eigh's back-transformation in blocks of this many reflectors (1..64; 0: nb), their T in one
  // launch after the reduction (larft.h's blocks form) where a group can hold G.
  int trd_back_nb = 0;
  // QR: the one-group panels by the fused factorisation (one reduction per column, T built
  // alongside, core/kernels/qr_blocked.h ml_qr_factor_fused; 0: a simdgroup per column), with
  // this many lanes (0: 32 per simdgroup, about sqrt(rows) simdgroups, at most 32). Off: slower
  // than a simdgroup per column on the H200 (benchmarks/results/nvidia-h200-blocked-variants.md:
  // 4096 x1 78.1 vs 48.5 ms, 1024 x1 7.26 vs 6.25).
  int qr_panel_fused = 0;
  int qr_fused_lanes = 0;
  // QR: the one-group panels in registers (qr_panel_reg, core/kernels/qr_panel_reg.h) for
  // matrices of at least this many rows (0: never) where the rows fit them (panels of 32
  // columns up to 1024 rows, 16 up to 2048, 8 up to 4096 with 512 lanes), before the spread
  // (tsqr), fused and shared-memory panels.
  int qr_panel_reg = 0;
  // QR: below qr_panel_reg rows, register panels of at most this many columns (0: none there),
  // one level unless the batch asks for two (qr_outer_min_batch).
  int qr_panel_reg_small = 0;
  // QR: the form of the register panels (core/kernels/qr_panel_reg.h, ML_QRR_FORM_*): 0 the
  // column a run-time index (every access to its registers a select over the panel's), 1
  // rotating (the current column always the first register column, a compact loop), 2 the
  // columns unrolled (compile-time indices; classes 8 and 16, class 32 rotating: more code), 3
  // the rotating form of classes 8 and 16 in kernels of their own (qr_panel_rot8, rot16; CUDA).
  int qr_panel_reg_form = 1;
  // QR: two levels (outer panels of nb_outer columns) from this batch even where the panels
  // need no narrowing.
  int qr_outer_min_batch = 8;
  // QR: T of an outer panel by the qr_larft step (T's rows a simdgroup each, no barrier per
  // column; 0: larft_gram, larft.h). Off with the fused panels (measured together).
  int qr_row_larft = 0;
  // QR: lookahead (0: off; 1: one-level runs; 2: two-level runs too) for k = min(m, n) >=
  // qr_lookahead_min_k. The trailing update after a panel is split: the next panel's columns
  // first (two levels: by the products, not larfb_cols), then the rest on the runner's side
  // queue (Runner::side_begin) while the next panel (one level) or the next outer panel's
  // panels and T (two levels) are factored; joined before the next split. The side's products
  // use their own buffers.
  int qr_lookahead = 0;
  int qr_lookahead_min_k = 0;
  // QR: at most this many rows a lane in the register panels where ML_QRR_MAX_LANES lanes
  // allow it (0: the fewest lanes that hold the rows, up to ML_QRR_REGS floats a lane): more,
  // less loaded simdgroups.
  int qr_panel_reg_rows = 0;
  // eigh (with eigenvectors) by two stages (blocked_eigh2.cpp) for eigh_vec_two_stage_min_n <=
  // n <= eigh_vec_two_stage_max_n (0: any) from batch eigh_vec_two_stage_min_batch (min_n 0:
  // never); the band as eigvalsh's (eigh_band). The chase's back-transformation in blocks of
  // eigh_back_sweeps sweeps (0: the band's half-width) on eigh_back_cols columns of Z per
  // group (0: 64, a multiple of 4, fewer where shared memory is short); stage 1's reflectors
  // applied in blocks of eigh_back_q1 (rounded down to whole panels; 0: 64).
  int eigh_vec_two_stage_min_n = 0;
  int eigh_vec_two_stage_max_n = 0;
  int eigh_vec_two_stage_min_batch = 1;
  int eigh_back_sweeps = 0;
  int eigh_back_cols = 0;
  int eigh_back_q1 = 0;
  // eigvalsh by two stages: the chase of each matrix in one group of this many lanes (a multiple
  // of 32, up to 1024: its simdgroups take the sweeps, hand-offs in shared memory, sb2st_block.h)
  // instead of sb_sweeps' groups over the device; 0: off. Needs bw <= 32.
  int eigh_chase_block = 0;
  // larfb() by the larfb_cols step (core/kernels/larfb_cols.h: one launch, a group per few
  // columns over all rows) instead of three products, for at most 64 reflectors on at most
  // larfb_cols columns, or on more while batch x rows x columns x reflectors <= larfb_work
  // (the step re-reads V once per group: its cost grows with that product, the products'
  // latency does not); 0 / 0: always the products.
  int larfb_cols = 0;
  int64_t larfb_work = 0;
  // SVD: lanes of the brd_x step's groups (32 rows each, the simdgroups splitting the columns;
  // 0: as the other bidiagonalisation steps, at most 256).
  int brd_x_lanes = 0;
  // The linear systems (blocked_linsys.cpp): the width of their diagonal blocks and panels
  // (1..64); the columns of one pass of right-hand sides of solve and solve_triangular (the
  // workspace then depends on n alone: ml_workspace_size takes no nrhs), and of inv, whose
  // passes may be wider: up to ls_rhs_floats / n columns.
  int ls_nb = 64;
  int ls_rhs_cols = 256;
  int64_t ls_rhs_floats = int64_t{1} << 24;
  // LU's panels in registers (ls_getf2_r*): inside each ls_nb-wide panel, panels of at most
  // ls_lu_ib columns (1..32; fewer where the rows need it: 32 up to 1024 rows, 16 up to 2048, 8
  // up to 4096 at 512 lanes) factored in registers, each followed by its interchanges on the
  // panel's other columns, its block row of U and the product updating the panel's columns to
  // its right; 0 (or rows beyond 4096): ls_getf2 over the whole panel in device memory.
  int ls_lu_ib = 0;
  // ... and only for matrices of at least this many rows.
  int ls_lu_ib_min_m = 0;
  // LU's panel width, its trailing products' k (any width: U12 by the blocked triangular solve
  // where it passes 64; 0: ls_nb).
  int ls_lu_nb = 0;
  // LU's panels (up to ML_LSB_LEAF_MAX columns, of at most 4096 rows at 512 lanes) factored in
  // one launch each (ls_lu_leaf_r*): the register panels of ls_lu_ib columns (32 when 0) and
  // their interchanges, block rows of U and updates inside the panel by the same group, whatever
  // ls_lu_ib_min_m (0: the launches above). METAL_LINALG_LS_LU_LEAF overrides it per call.
  int ls_lu_leaf = 0;
  // The register panels of ls_lu_ib fused: each narrow panel's factorisation, interchanges on the
  // panel's other columns and block row of U in one launch (ls_getf2_fused_r*; its product
  // stays the backend's), where its shared memory fits, whatever ls_lu_ib_min_m (0: three
  // launches).
  // METAL_LINALG_LS_LU_FUSE overrides it per call.
  int ls_lu_fuse = 0;
  // The blocked paths' triangular solves of diagonal blocks (ls_trsm) with a right-hand side
  // vector a lane and no barrier inside the substitution (ls_trsm_lane), where its shared memory
  // fits (0: ls_trsm, a barrier a row). METAL_LINALG_LS_TRSM_LANE overrides it per call.
  int ls_trsm_lane = 0;
  // LU's lookahead: each panel's update of the columns past the next panel on the runner's side
  // queue while the next panel is factored (0: off). METAL_LINALG_LS_LU_LOOKAHEAD per call.
  int ls_lu_lookahead = 0;
  // Row interchanges (LU's panels, the pivots applied to right-hand sides) by ls_laswp_blk: up
  // to 64 interchanges composed, a group per 32 columns moving the touched rows at once (0:
  // ls_laswp, a lane per column doing the interchanges one after another).
  int ls_laswp_blk = 0;
  // solve and solve_triangular: passes of right-hand sides of up to min(n, ls_rhs_wide_floats /
  // n) columns (at least ls_rhs_cols: up to n right-hand sides in one pass to n = 2896, each
  // triangular solve's launches once a pass) instead of ls_rhs_cols; the workspace then holds
  // that many columns of n floats per matrix (still by n alone: at most 2^23 floats, half inv's
  // bound, so that 4096 x 4096 solves keep 8 matrices in flight under max_workspace_bytes).
  int ls_rhs_wide = 0;
  int64_t ls_rhs_wide_floats = int64_t{1} << 23;
  // The GEMM-rich forms of the Cholesky and the triangular solves (1, the default; 0: the
  // forms above, a diagonal block's substitution by ls_trsm per block of ls_nb). Cholesky:
  // per block column the diagonal block factored and inverted by one group (ls_potrf_inv),
  // the panel as a product with the inverse (kept transposed in W's upper triangle), the
  // trailing update a product. Triangular solves: every diagonal block of op(T) inverted in
  // one launch (ls_trtri), then a recursive block substitution: a leaf's rows X = inverse x
  // right-hand sides (a product into a second right-hand side buffer), halves joined by one
  // product (k = the half's rows), so most of the work runs in a few large products. The
  // blocks' width: ls_gemm_nb (0: ls_nb; any width whose blocks fit the group's shared
  // memory, shared_floats).
  int ls_gemm_form = 1;
  int ls_gemm_nb = 0;
  // The GEMM-rich Cholesky's diagonal blocks by ls_potrf_reg (sub-blocks of 32 columns factored
  // and inverted by one simdgroup, a few group barriers per sub-block: 1 in its registers, 2 in
  // shared memory) instead of ls_potrf_inv (0: three group barriers per column); where the
  // group has at least 32 lanes.
  int ls_potrf_reg = 0;
  // The GEMM-rich Cholesky in two levels: outer panels of ls_chol_outer columns (a multiple of
  // the blocks' width), the rest of the matrix updated after each by products on stripes of
  // that many columns from their diagonal down (about SYRK's flops instead of a full square's);
  // 0: one level, every block column's update a product over the whole trailing square.
  int ls_chol_outer = 0;
  // With ls_chol_outer: after each outer panel the stripes past the next outer panel's columns
  // go to the runner's side queue (Runner::side_begin), updated while the next outer panel is
  // factored (its diagonal blocks one group a matrix); joined before the next stripes.
  int ls_chol_lookahead = 0;
  // Divide and conquer: the secular equation's roots a simdgroup each (instead of a lane) in the
  // levels with at most this many merges over the chunk (0: never).
  int dc_secular_simd = 0;
  // eigh by divide and conquer: the eigenvalues from its secular roots too (1), instead of from
  // bisection as eigvalsh's (0: then eigh's values equal eigvalsh's bit for bit).
  int dc_values = 0;
  // Divide and conquer: the leaves by one-sided Jacobi in a simdgroup of 32 lanes (1) instead
  // of every lane repeating the QL recurrence (0; also where the group is not 32 lanes).
  int dc_leaf_jacobi = 0;
  // SVD: the bidiagonalisation with the trailing matrix resident in the groups' shared memory
  // (brd_res, core/kernels/gebrd_resident.h) for chunks of at most brd_res_max_batch matrices
  // (0: never): brd_res_groups groups in all, each of brd_res_lanes lanes (all must run at once:
  // at most the groups the device holds together, one per multiprocessor on CUDA); the panels
  // run first until the rows left fit the groups' shared memory (shared_floats).
  int brd_res_groups = 0;
  int brd_res_max_batch = 0;
  int brd_res_lanes = 1024;
  // brd_res's hand-offs as tagged words (gebrd_resident.h; backends with ML_HAS_TAGGED).
  int brd_res_tagged = 0;
};

// ML_GEMM_TRANS_A / _B of core/kernels/gemm.h, for host code that does not see the kernels.
constexpr int kGemmTransA = 1, kGemmTransB = 2;

// C = alpha op(A) op(B) + beta C (column-major, kGemmTrans* flags) for `batch` matrices whose
// operands lie `stride` floats apart in the workspace; offsets in floats.
struct GemmCall {
  int flags = 0, m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;  // beta == 0: C is never read
  int64_t a = 0, b = 0, c = 0;
  int lda = 1, ldb = 1, ldc = 1;
  int64_t batch = 0, stride = 0;
  int64_t part_floats = 0;  // split-k scratch the gemm step may use per matrix (0: none)
};

class Runner {
 public:
  virtual ~Runner() = default;
  // Enqueues one step over the call's buffers (bound by the runner) and its workspace.
  virtual ml_status launch(const StepLaunch &l) = 0;
  // A backend's own product for g (a vendor library), in place of the gemm step: true when it
  // took g (its status in *st), false to leave g to the step.
  virtual bool gemm(const GemmCall &g, ml_status *st) {
    (void)g, (void)st;
    return false;
  }
  // A side queue: the launches and products enqueued between side_begin() and side_end() start
  // after everything enqueued before side_begin() and may run alongside those enqueued after
  // side_end(), until join() makes everything enqueued after it wait for them (a backend
  // keeps the side's products off any scratch the main queue's use). Default: one queue, in
  // order (no-ops).
  virtual ml_status side_begin() { return ML_OK; }
  virtual ml_status side_end() { return ML_OK; }
  virtual ml_status join() { return ML_OK; }
};

// Clears the vector-access bits of a gemm step's parameters (ML_GEMM_VEC of
// core/kernels/gemm.h): its vector loads need a 16-byte aligned workspace base.
void gemm_scalar_access(ml_step_params &p);

// Whether op has a blocked algorithm.
bool supported(int32_t op);
// Workspace bytes of c (kernel flags kf, see routing.h gpu_kernel_flags); 0 when c has none.
// Batches whose workspace would exceed o.max_workspace_bytes run in chunks reusing it.
int64_t workspace_bytes(const Call &c, int32_t kf, const Options &o);
// Enqueues g on r (the workspace's product outside an algorithm: tests, benchmarks), split k
// into part_floats floats at workspace offset part when that pays (0: never).
ml_status product(Runner &r, const Options &o, const GemmCall &g, int64_t part = 0,
                  int64_t part_floats = 0);
// Enqueues c on r with workspace ws_bytes >= workspace_bytes(c, kf, o) (the runner binds it).
ml_status run(const Call &c, int32_t kf, const Options &o, Runner &r);

}  // namespace ml::blocked
