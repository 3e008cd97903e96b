// The blocked linear systems (core/kernels/linsys_blocked.h; docs/design.md section 5.7):
// cholesky, lu_factor, solve, inv and solve_triangular beyond the one-group kernels' window.
// Slice per matrix: stat, W (A, m x n column-major), the pivots (the LU ops), and one pass of
// right-hand sides B (n x rc column-major: solve, inv, solve_triangular; rc by n alone).
//  - cholesky, right-looking by blocks of nb columns: the diagonal block factored by one group
//    (ls_potrf), the panel below it by a triangular solve (ls_trsm on its rows), the trailing
//    matrix by the product W22 -= L21 L21^T (both triangles: a full product, twice SYRK's
//    flops, the upper part never read). The upper form factors A^T's lower triangle (A's
//    upper one loaded transposed) and stores U = L^T.
//  - LU with partial pivoting, right-looking: the panel below and on the diagonal factored by
//    one group in device memory (ls_getf2), its interchanges applied to the columns left and
//    right of it (ls_laswp), U12 = L11^-1 A12 (ls_trsm), then W22 -= L21 U12.
//  - the triangular solves by blocks: a diagonal block solve over every right-hand side
//    (ls_trsm), then the rows still to solve updated by one product; solve: the pivots applied
//    to B, L then U (A X = B), or U^T, L^T and the pivots in reverse (X A = B, which is
//    A^T X^T = B^T: B's row-major rows are the columns of B^T, loaded as they lie); inv: B = I.
// The GEMM-rich forms (Options::ls_gemm_form, the default; the forms above with 0) of the
// Cholesky and the triangular solves replace the substitutions over panels and right-hand
// sides by products with inverted diagonal blocks: run_cholesky_gemm and ls_trsm_gemm_rows.
// The GEMM-rich Cholesky's diagonal blocks may go by sub-blocks in one simdgroup (ls_potrf_reg),
// its updates in two levels (outer panels, then stripes of the rest from their diagonal down)
// with the stripes past the next outer panel on the side queue (Options::ls_chol_*).
#include "blocked_impl.h"

namespace ml::blocked {
namespace {

struct LsLayout {
  int64_t stat = 0, w = 0, piv = 0, b = 0;
  // The GEMM-rich forms (gemm): the second right-hand side buffer x (= b in the former forms,
  // which solve in place) and the inverted diagonal blocks (dinv, of nbg rows; two sets for
  // the LU solves: L's at dinv, U's at dinv2; cholesky's one block).
  bool gemm = false;
  int nbg = 0;
  int64_t x = 0, dinv = 0, dinv2 = 0;
  int m = 0, n = 0, k = 0;
  int64_t nrhs = 0;  // right-hand side columns (0: none)
  int rc = 0;        // columns per pass of the right-hand sides (reserved whatever nrhs)
  int64_t floats = 0;
};

bool lu_op(int32_t op) { return op == ML_OP_LU_FACTOR || op == ML_OP_SOLVE || op == ML_OP_INV; }

int ls_nb(const Options &o) { return std::max(1, std::min(o.ls_nb, ML_LSB_MAX_NB)); }

// Whether the GEMM-rich forms run (Options::ls_gemm_form, METAL_LINALG_LS_GEMM_FORM: 0 the
// former forms, 1 the GEMM-rich ones), and their blocks' width (METAL_LINALG_LS_GEMM_NB, 0:
// ls_nb), narrowed until a block fits the group's shared memory.
bool ls_gemm_form(const Options &o) {
  return env_or("METAL_LINALG_LS_GEMM_FORM", o.ls_gemm_form) != 0;
}
int ls_gemm_nb(const Options &o) {
  const int v = env_or("METAL_LINALG_LS_GEMM_NB", o.ls_gemm_nb);
  int nb = std::max(1, std::min(v > 0 ? v : ls_nb(o), 1024));
  while (nb > 1 && ml_lsb_potrf_inv_shared_floats(nb) > o.shared_floats) --nb;
  return nb;
}

LsLayout ls_layout(const Call &c, const Options &o) {
  LsLayout L;
  L.m = static_cast<int>(c.m);
  L.n = static_cast<int>(c.n);
  L.k = std::min(L.m, L.n);
  L.nrhs = c.op == ML_OP_INV ? c.n
           : c.op == ML_OP_SOLVE || c.op == ML_OP_SOLVE_TRIANGULAR ? c.nrhs
                                                                   : 0;
  // Passes of ls_rhs_cols columns whatever nrhs (the workspace a function of n); inv's B = I
  // has n columns, in wider passes while they stay within ls_rhs_floats.
  const int64_t cols = std::max(1, o.ls_rhs_cols);
  const int64_t wide = std::max<int64_t>(
      cols, (c.op == ML_OP_INV ? o.ls_rhs_floats : o.ls_rhs_wide_floats) / std::max(L.n, 1));
  L.rc = static_cast<int>(c.op == ML_OP_INV || o.ls_rhs_wide ? std::min<int64_t>(L.n, wide)
                                                              : cols);
  L.gemm = c.op != ML_OP_LU_FACTOR && ls_gemm_form(o);
  L.nbg = ls_gemm_nb(o);
  Slice s;
  L.stat = s.add(ML_STAT_FLOATS);
  L.w = s.add(int64_t{L.m} * L.n);
  if (lu_op(c.op)) L.piv = s.add(L.k);
  if (c.op != ML_OP_CHOLESKY && c.op != ML_OP_LU_FACTOR) {
    L.b = s.add(int64_t{L.n} * L.rc);
    L.x = L.gemm ? s.add(int64_t{L.n} * L.rc) : L.b;
  }
  if (L.gemm) {
    const int64_t blocks = (L.n + L.nbg - 1) / L.nbg;
    if (c.op == ML_OP_CHOLESKY) {
      L.dinv = s.add(int64_t{L.nbg} * L.nbg);
    } else {
      L.dinv = s.add(blocks * L.nbg * L.nbg);
      if (c.op != ML_OP_SOLVE_TRIANGULAR) L.dinv2 = s.add(blocks * L.nbg * L.nbg);
    }
  }
  L.floats = s.floats;
  return L;
}

ml_step_params ls_params(const LsLayout &L) {
  ml_step_params p = step_params();
  p.off[0] = L.stat;
  return p;
}

int ls_lanes(const Options &o) { return std::min(256, std::max(1, o.max_group)); }

ml_status ls_init(const Chunk &ch, const Options &o, const LsLayout &L) {
  const int gs = plain_lanes(o);
  return ch.launch(kStep_ls_init, (ch.batch + gs - 1) / gs, gs, 0, ls_params(L));
}

// ls_load (store: false) or ls_store of the rows x cols matrix at w (ld) against the call's
// source / output of srows x sld floats a matrix (row-major), from column c0 (ML_LSB_* flags).
ml_status ls_copy(const Chunk &ch, const Options &o, const LsLayout &L, bool store, int64_t w,
                  int ld, int rows, int cols, int flags, int srows, int sld, int c0) {
  if (rows <= 0 || cols <= 0) return ML_OK;
  ml_step_params p = ls_params(L);
  p.m = rows;
  p.n = cols;
  p.flags = flags;
  p.off[1] = w;
  p.ld[1] = ld;
  ML_LSB_SROWS(p) = srows;
  ML_LSB_SLD(p) = sld;
  ML_LSB_C0(p) = c0;
  return ch.launch(store ? kStep_ls_store : kStep_ls_load, ch.batch * tiles32(rows, cols),
                   plain_lanes(o), 32 * 33, p);
}

ml_status ls_info(const Chunk &ch, const Options &o, const LsLayout &L, const Call &c) {
  if (!c.info) return ML_OK;
  const int gs = plain_lanes(o);
  return ch.launch(kStep_ls_info, (ch.batch + gs - 1) / gs, gs, 0, ls_params(L));
}

// Rows [k0, k0 + count) of the interchanges applied to columns [c0, c0 + ncols) of w (ld), by
// the ls_laswp step.
ml_status ls_laswp(const Chunk &ch, const Options &o, const LsLayout &L, int64_t w, int ld,
                   int c0, int ncols, int k0, int k1, bool reverse) {
  if (ncols <= 0 || k1 <= k0) return ML_OK;
  const int gs = plain_lanes(o);
  ml_step_params p = ls_params(L);
  p.n = ncols;
  p.flags = reverse ? ML_LSB_REVERSE : 0;
  p.off[1] = w;
  p.ld[1] = ld;
  p.off[2] = L.piv;
  p.i[0] = c0;
  p.i[1] = k0;
  p.i[2] = k1;
  return ch.launch(kStep_ls_laswp, ch.batch * ((ncols + gs - 1) / gs), gs, 0, p);
}

// The interchanges [k0, k1) (in reverse order when reverse) applied to columns [c0, c0 + ncols)
// of w (ld) but for the skip columns from c0 + s0: ls_laswp_blk in blocks of ML_LSB_SWAPS
// interchanges (Options::ls_laswp_blk), else ls_laswp on the columns left and right of them.
ml_status ls_swap(const Chunk &ch, const Options &o, const LsLayout &L, int64_t w, int ld, int c0,
                  int ncols, int k0, int k1, bool reverse, int s0 = 0, int skip = 0) {
  if (ncols <= 0 || k1 <= k0 || (skip > 0 && s0 <= 0 && s0 + skip >= ncols)) return ML_OK;
  if (!o.ls_laswp_blk) {
    if (skip <= 0) return ls_laswp(ch, o, L, w, ld, c0, ncols, k0, k1, reverse);
    if (ml_status st = ls_laswp(ch, o, L, w, ld, c0, s0, k0, k1, reverse)) return st;
    return ls_laswp(ch, o, L, w, ld, c0 + s0 + skip, ncols - s0 - skip, k0, k1, reverse);
  }
  const int blocks = (k1 - k0 + ML_LSB_SWAPS - 1) / ML_LSB_SWAPS;
  for (int q = 0; q < blocks; ++q) {
    const int kb = k0 + (reverse ? blocks - 1 - q : q) * ML_LSB_SWAPS;
    ml_step_params p = ls_params(L);
    p.n = ncols;
    p.k = std::max(0, skip);
    p.flags = reverse ? ML_LSB_REVERSE : 0;
    p.off[1] = w;
    p.ld[1] = ld;
    p.off[2] = L.piv;
    p.i[0] = c0;
    p.i[1] = kb;
    p.i[2] = std::min(k1, kb + ML_LSB_SWAPS);
    p.i[3] = s0;
    if (ml_status st = ch.launch(kStep_ls_laswp_blk,
                                 ch.batch * ((ncols + ML_LSB_SWAP_COLS - 1) / ML_LSB_SWAP_COLS),
                                 plain_lanes(o), ml_lsb_laswp_blk_shared_floats(), p))
      return st;
  }
  return ML_OK;
}

// op(T) X = R for nv vectors of jb entries of the block at r (ld ldr), T the jb x jb block at t
// (ld ldt); ML_LSB_T_* flags.
ml_status ls_trsm(const Chunk &ch, const Options &o, const LsLayout &L, int64_t t, int ldt,
                  int jb, int64_t r, int ldr, int nv, int flags) {
  if (nv <= 0 || jb <= 0) return ML_OK;
  ml_step_params p = ls_params(L);
  p.k = jb;
  p.n = nv;
  p.flags = flags;
  p.off[1] = t;
  p.ld[1] = ldt;
  p.off[2] = r;
  p.ld[2] = ldr;
  const int gs = ls_lanes(o);
  const int64_t lane_floats = ml_lsb_trsm_lane_shared_floats(jb, gs);
  if (o.ls_trsm_lane != 0 && lane_floats <= o.shared_floats)
    return ch.launch(kStep_ls_trsm_lane, ch.batch * ((nv + gs - 1) / gs), gs, lane_floats, p);
  const int64_t groups = (nv + ML_LSB_TRSM_VECS - 1) / ML_LSB_TRSM_VECS;
  return ch.launch(kStep_ls_trsm, ch.batch * groups, gs, ml_lsb_trsm_shared_floats(jb), p);
}

// op(T) X = B for the n x ncols block at b (ld ldb), T n x n at t (ld ldt): op(T) lower (by
// blocks from the top) or upper (from the bottom), unit diagonal, op(T) = T^T (trans). Per
// diagonal block of nb rows: its rows solved (ls_trsm), then the rows still to solve less the
// block's columns of op(T) times them (one product).
ml_status ls_trsm_blocked(const Chunk &ch, const Options &o, const LsLayout &L, int64_t t,
                          int ldt, int n, bool lower, bool unit, bool trans, int64_t b, int ldb,
                          int ncols) {
  const int nb = ls_nb(o);
  const int flags = (lower ? ML_LSB_T_LOWER : 0) | (unit ? ML_LSB_T_UNIT : 0) |
                    (trans ? ML_LSB_T_TRANS : 0);
  const int ta = trans ? ML_GEMM_TRANS_A : 0;
  const int blocks = (n + nb - 1) / nb;
  for (int q = 0; q < blocks; ++q) {
    const int kb = (lower ? q : blocks - 1 - q) * nb, jb = std::min(nb, n - kb);
    if (ml_status st = ls_trsm(ch, o, L, t + int64_t{kb} * ldt + kb, ldt, jb, b + kb, ldb, ncols,
                               flags))
      return st;
    ml_status st = ML_OK;
    if (lower && kb + jb < n) {  // rows kb + jb.. -= op(T)(kb + jb.., kb..) X(kb..)
      const int64_t a = trans ? t + int64_t{kb + jb} * ldt + kb : t + int64_t{kb} * ldt + kb + jb;
      st = gemm(ch, o, ta, n - kb - jb, ncols, jb, -1.0f, a, ldt, b + kb, ldb, 1.0f, b + kb + jb,
                ldb);
    } else if (!lower && kb > 0) {  // rows ..kb -= op(T)(..kb, kb..) X(kb..)
      const int64_t a = trans ? t + kb : t + int64_t{kb} * ldt;
      st = gemm(ch, o, ta, kb, ncols, jb, -1.0f, a, ldt, b + kb, ldb, 1.0f, b, ldb);
    }
    if (st) return st;
  }
  return ML_OK;
}

// The GEMM-rich triangular solves. The inverses of op(T)'s diagonal blocks of L.nbg rows (T n x
// n at t, ld ldt; ML_LSB_T_* flags) into dinv, all at once (ls_trtri).
ml_status ls_trtri(const Chunk &ch, const Options &o, const LsLayout &L, int64_t t, int ldt,
                   int n, int flags, int64_t dinv) {
  ml_step_params p = ls_params(L);
  p.n = n;
  p.k = L.nbg;
  p.flags = flags;
  p.off[1] = t;
  p.ld[1] = ldt;
  p.off[2] = dinv;
  return ch.launch(kStep_ls_trtri, ch.batch * ((n + L.nbg - 1) / L.nbg), ls_lanes(o),
                   ml_lsb_potrf_inv_shared_floats(L.nbg), p);
}

// op(T) X = B (T n x n at t, ld ldt; op(T) lower or upper, op(T) = T^T when trans) for the n x
// ncols block B at b into X at x (both ld ldb; B is overwritten), by recursive block
// substitution on the inverted diagonal blocks at dinv (ls_trtri's): rows [lo, hi) of one block
// are X = Y_q B (a product); more blocks are split in two halves at a block boundary, the first
// solved (the top for a lower op(T), the bottom for an upper one), the other's right-hand sides
// less op(T)'s block between them times its X (one product, k = the first half's rows), then
// the other solved.
ml_status ls_trsm_gemm_rows(const Chunk &ch, const Options &o, const LsLayout &L, int64_t t,
                            int ldt, bool lower, bool trans, int64_t dinv, int64_t b, int64_t x,
                            int ldb, int ncols, int lo, int hi) {
  const int nbg = L.nbg, blocks = (hi - lo + nbg - 1) / nbg;
  if (blocks <= 1)
    return gemm(ch, o, 0, hi - lo, ncols, hi - lo, 1.0f, dinv + int64_t{lo / nbg} * nbg * nbg,
                nbg, b + lo, ldb, 0.0f, x + lo, ldb);
  const int mid = lo + blocks / 2 * nbg;
  const int ta = trans ? ML_GEMM_TRANS_A : 0;
  // op(T)'s block at rows r0.., columns c0..
  auto opt = [&](int r0, int c0) {
    return trans ? t + int64_t{r0} * ldt + c0 : t + int64_t{c0} * ldt + r0;
  };
  ml_status st;
  if (lower) {
    if ((st = ls_trsm_gemm_rows(ch, o, L, t, ldt, lower, trans, dinv, b, x, ldb, ncols, lo,
                                mid)) ||
        (st = gemm(ch, o, ta, hi - mid, ncols, mid - lo, -1.0f, opt(mid, lo), ldt, x + lo, ldb,
                   1.0f, b + mid, ldb)))
      return st;
    return ls_trsm_gemm_rows(ch, o, L, t, ldt, lower, trans, dinv, b, x, ldb, ncols, mid, hi);
  }
  if ((st = ls_trsm_gemm_rows(ch, o, L, t, ldt, lower, trans, dinv, b, x, ldb, ncols, mid, hi)) ||
      (st = gemm(ch, o, ta, mid - lo, ncols, hi - mid, -1.0f, opt(lo, mid), ldt, x + mid, ldb,
                 1.0f, b + lo, ldb)))
    return st;
  return ls_trsm_gemm_rows(ch, o, L, t, ldt, lower, trans, dinv, b, x, ldb, ncols, lo, mid);
}

// op(T) X = B for the n x ncols block at b, X at x (the GEMM-rich form, dinv holding op(T)'s
// inverted diagonal blocks), or in place at b by ls_trsm_blocked (the former form: x == b).
ml_status ls_tri_solve(const Chunk &ch, const Options &o, const LsLayout &L, int64_t t, int ldt,
                       int n, bool lower, bool unit, bool trans, int64_t dinv, int64_t b,
                       int64_t x, int ldb, int ncols) {
  if (!L.gemm) return ls_trsm_blocked(ch, o, L, t, ldt, n, lower, unit, trans, b, ldb, ncols);
  return ls_trsm_gemm_rows(ch, o, L, t, ldt, lower, trans, dinv, b, x, ldb, ncols, 0, n);
}

// The GEMM-rich Cholesky, right-looking by blocks of L.nbg columns: the diagonal block factored
// and inverted by one group (ls_potrf_inv, or ls_potrf_reg by sub-blocks in registers: L11
// below its diagonal, L11^T above it, L11^-1 at L.dinv), the panel's transpose L21^T = L11^-1 A21^T into W's upper triangle (the block row
// right of the diagonal block, which no later step touches), the trailing matrix A22 -= L21
// L21^T (a full product as the former form's). The store reads L^T from W's upper triangle.
ml_status run_cholesky_gemm(const Call &c, const Options &o, const Chunk &ch, const LsLayout &L) {
  const int n = L.n, nb = L.nbg;
  const bool upper = (c.flags & ML_LS_UPPER) != 0;
  // The diagonal blocks by sub-blocks of 32 (ls_potrf_reg; METAL_LINALG_LS_POTRF_REG: 1 in
  // registers, 2 in shared memory, 0 ls_potrf_inv) where a group holds a whole simdgroup.
  const int potrf_form = env_or("METAL_LINALG_LS_POTRF_REG", o.ls_potrf_reg);
  const bool potrf_reg = potrf_form != 0 && ls_lanes(o) >= 32;
  ml_status st;
  if ((st = ls_init(ch, o, L)) ||
      (st = ls_copy(ch, o, L, false, L.w, n, n, n, (upper ? ML_LSB_STRAIGHT : 0) | ML_LSB_LOWER,
                    n, n, 0)))
    return st;
  // Two levels (METAL_LINALG_LS_CHOL_OUTER, Options::ls_chol_outer: outer panels of that many
  // columns, 0 one level): inside an outer panel each block column updates only the outer
  // panel's columns right of it; after the outer panel the rest of the matrix is updated by
  // products of the outer panel's width on stripes of columns, each from its diagonal down,
  // so the products touch about the lower triangle instead of the whole square.
  const int ov = env_or("METAL_LINALG_LS_CHOL_OUTER", o.ls_chol_outer);
  const int nbo = ov > 0 ? std::max(nb, ov / nb * nb) : n;
  // Lookahead (METAL_LINALG_LS_CHOL_LOOKAHEAD, Options::ls_chol_lookahead; two levels only).
  const bool lookahead =
      ov > 0 && env_or("METAL_LINALG_LS_CHOL_LOOKAHEAD", o.ls_chol_lookahead) != 0;
  bool pending = false;  // side stripes in flight
  auto join = [&]() -> ml_status {
    if (!pending) return ML_OK;
    pending = false;
    return ch.r.join();
  };
  for (int k0 = 0; k0 < n; k0 += nbo) {
    const int end = std::min(n, k0 + nbo);
    for (int k = k0; k < end; k += nb) {
      const int jb = std::min(nb, end - k), r = n - k - jb, cols = end - k - jb;
      ml_step_params p = ls_params(L);
      p.n = jb;
      p.off[1] = L.w;
      p.ld[1] = n;
      p.off[2] = L.dinv;
      p.ld[2] = nb;
      p.i[0] = k;
      p.flags = potrf_form == 2 ? ML_LSB_POTRF_SHARED : 0;
      const bool reg = potrf_reg && ml_lsb_potrf_reg_shared_floats(jb) <= o.shared_floats;
      if ((st = reg ? ch.launch(kStep_ls_potrf_reg, ch.batch, ls_lanes(o),
                                ml_lsb_potrf_reg_shared_floats(jb), p)
                    : ch.launch(kStep_ls_potrf_inv, ch.batch, ls_lanes(o),
                                ml_lsb_potrf_inv_shared_floats(jb), p)))
        return st;
      if (r == 0) break;
      const int64_t d = L.w + int64_t{k} * n + k, u12 = L.w + int64_t{k + jb} * n + k;
      if ((st = gemm(ch, o, ML_GEMM_TRANS_B, jb, r, jb, 1.0f, L.dinv, nb, d + jb, n, 0.0f, u12,
                     n)))
        return st;
      if (cols > 0 &&
          (st = gemm(ch, o, ML_GEMM_TRANS_A, r, cols, jb, -1.0f, u12, n, u12, n, 1.0f, u12 + jb,
                     n)))
        return st;
    }
    // The rest, columns [end, n), by stripes of nbo columns: W(end + s.., end + s..) -=
    // L(end + s.., k0..end) L(end + s..end + s + w, k0..end)^T, L^T read from W's upper part.
    // With lookahead the stripes past the next outer panel go to the side queue: the next outer
    // panel reads and writes only its own columns and its block rows of W's upper part, none of
    // the side's entries; joined before the next stripes (which update the same entries).
    if ((st = join())) return st;
    const int r2 = n - end;
    for (int s0 = 0; s0 < r2; s0 += nbo) {
      const int w = std::min(nbo, r2 - s0);
      const int64_t u = L.w + int64_t{end + s0} * n + k0;
      const int64_t cc = L.w + int64_t{end + s0} * n + end + s0;
      if (s0 == nbo && lookahead) {
        if ((st = ch.r.side_begin())) return st;
        pending = true;
      }
      if ((st = gemm(ch, o, ML_GEMM_TRANS_A, r2 - s0, w, end - k0, -1.0f, u, n, u, n, 1.0f, cc,
                     n)))
        break;
    }
    if (pending) {
      const ml_status f = ch.r.side_end();
      st = st ? st : f;
    }
    if (st) return st;
  }
  if ((st = join())) return st;
  // W's upper triangle is L^T = U: stored as it lies for the upper form, transposed for L.
  const int io = (upper ? 0 : ML_LSB_STRAIGHT) | ML_LSB_UPPER | ML_LSB_NAN_INFO;
  if ((st = ls_copy(ch, o, L, true, L.w, n, n, n, io, n, n, 0))) return st;
  return ls_info(ch, o, L, c);
}

ml_status run_cholesky(const Call &c, const Options &o, const Chunk &ch, const LsLayout &L) {
  if (L.gemm) return run_cholesky_gemm(c, o, ch, L);
  const int n = L.n, nb = ls_nb(o);
  const bool upper = (c.flags & ML_LS_UPPER) != 0;
  const int io = (upper ? ML_LSB_STRAIGHT : 0) | ML_LSB_LOWER;
  ml_status st;
  if ((st = ls_init(ch, o, L)) ||
      (st = ls_copy(ch, o, L, false, L.w, n, n, n, io, n, n, 0)))
    return st;
  for (int k = 0; k < n; k += nb) {
    const int jb = std::min(nb, n - k), r = n - k - jb;
    ml_step_params p = ls_params(L);
    p.n = jb;
    p.off[1] = L.w;
    p.ld[1] = n;
    p.i[0] = k;
    if ((st = ch.launch(kStep_ls_potrf, ch.batch, ls_lanes(o), ml_lsb_potrf_shared_floats(jb),
                        p)))
      return st;
    if (r == 0) break;
    const int64_t d = L.w + int64_t{k} * n + k, l21 = d + jb;
    if ((st = ls_trsm(ch, o, L, d, n, jb, l21, n, r, ML_LSB_T_LOWER | ML_LSB_T_ROWS)) ||
        (st = gemm(ch, o, ML_GEMM_TRANS_B, r, r, jb, -1.0f, l21, n, l21, n, 1.0f,
                   L.w + int64_t{k + jb} * n + k + jb, n)))
      return st;
  }
  if ((st = ls_copy(ch, o, L, true, L.w, n, n, n, io | ML_LSB_NAN_INFO, n, n, 0)))
    return st;
  return ls_info(ch, o, L, c);
}

// The step of register class cls (8, 16 or 32 columns: ml_lsb_reg_plan) among a step's three.
int32_t by_class(int cls, int32_t r8, int32_t r16, int32_t r32) {
  return cls == 8 ? r8 : cls == 16 ? r16 : r32;
}

// W = P L U (sgetrf's blocked form) of the m x n matrix, pivots at L.piv.
// LU's panel of columns [k, k + jb) over rows k..m factored with its pivots: as a leaf in one
// launch (ls_lu_leaf_r*, sub-panels of sub columns) where leaf is on, the rows fit the register
// classes and its shared memory fits; else narrower panels in registers, four launches each
// (ls_lu_ib, from ls_lu_ib_min_m rows), two with fuse (ls_getf2_fused_r*, then the product;
// whatever ls_lu_ib_min_m, as the leaves); else ls_getf2 in device memory.
ml_status lu_panel(const Chunk &ch, const Options &o, const LsLayout &L, int k, int jb, bool leaf,
                   int sub, bool fuse) {
  const int m = L.m;
  ml_step_params p = ls_params(L);
  p.m = m;
  p.n = jb;
  p.off[1] = L.w;
  p.ld[1] = m;
  p.off[2] = L.piv;
  p.i[0] = k;
  ml_status st;
  int cls = 0, gs = 0;
  const int sw = leaf && jb <= ML_LSB_LEAF_MAX
                     ? ml_lsb_reg_plan(m - k, std::min(sub, jb), o.max_group, &cls, &gs)
                     : 0;
  if (sw > 0 && ml_lsb_lu_leaf_shared_floats(jb, cls) <= o.shared_floats) {
    p.k = sw;
    const int32_t step =
        by_class(cls, kStep_ls_lu_leaf_r8, kStep_ls_lu_leaf_r16, kStep_ls_lu_leaf_r32);
    return ch.launch(step, ch.batch, gs, ml_lsb_lu_leaf_shared_floats(jb, cls), p);
  }
  if (o.ls_lu_ib > 0 && (m >= o.ls_lu_ib_min_m || fuse) &&
      ml_lsb_reg_plan(m - k, std::min(o.ls_lu_ib, jb), o.max_group, &cls, &gs) > 0) {
    // Narrower panels in registers inside this one: each factored, its interchanges on the
    // panel's other columns, its block row of U and the update of the panel right of it.
    for (int j = k; j < k + jb;) {
      const int w =
          ml_lsb_reg_plan(m - j, std::min(o.ls_lu_ib, k + jb - j), o.max_group, &cls, &gs);
      const int rin = k + jb - j - w;
      const int64_t dj = L.w + int64_t{j} * m + j, uj = dj + int64_t{w} * m;
      if (fuse && ml_lsb_lu_leaf_shared_floats(jb, cls) <= o.shared_floats) {
        // One launch for the factorisation, its interchanges and U12.
        ml_step_params f = p;  // the panel [k, k + jb), this narrow panel at its column j - k
        f.i[1] = j - k;
        f.k = w;
        const int32_t fused = by_class(cls, kStep_ls_getf2_fused_r8, kStep_ls_getf2_fused_r16,
                                       kStep_ls_getf2_fused_r32);
        if ((st = ch.launch(fused, ch.batch, gs, ml_lsb_lu_leaf_shared_floats(jb, cls), f)))
          return st;
      } else {
        ml_step_params q = p;
        q.n = w;
        q.i[0] = j;
        const int32_t step =
            by_class(cls, kStep_ls_getf2_r8, kStep_ls_getf2_r16, kStep_ls_getf2_r32);
        if ((st = ch.launch(step, ch.batch, gs, ml_lsb_getf2_reg_shared_floats(cls), q)) ||
            (st = ls_swap(ch, o, L, L.w, m, k, jb, j, j + w, false, j - k, w)) ||
            (rin > 0 &&
             (st = ls_trsm(ch, o, L, dj, m, w, uj, m, rin, ML_LSB_T_LOWER | ML_LSB_T_UNIT))))
          return st;
      }
      if (rin > 0 &&
          (st = gemm(ch, o, 0, m - j - w, rin, w, -1.0f, dj + w, m, uj, m, 1.0f, uj + w, m)))
        return st;
      j += w;
    }
    return ML_OK;
  }
  return ch.launch(kStep_ls_getf2, ch.batch, panel_lanes(m - k, o), ML_LS_RED_FLOATS, p);
}

// The panel [k, k + jb)'s block row of U and trailing update on the columns [c0, c0 + nc) right
// of it: U12 = L11^-1 A12 (ls_trsm, or the blocked solve past 64 columns), A22 -= L21 U12.
ml_status lu_update(const Chunk &ch, const Options &o, const LsLayout &L, int k, int jb, int c0,
                    int nc) {
  const int m = L.m;
  const int64_t d = L.w + int64_t{k} * m + k, u12 = L.w + int64_t{c0} * m + k;
  ml_status st;
  if ((st = jb <= ML_LSB_MAX_NB
                ? ls_trsm(ch, o, L, d, m, jb, u12, m, nc, ML_LSB_T_LOWER | ML_LSB_T_UNIT)
                : ls_trsm_blocked(ch, o, L, d, m, jb, true, true, false, u12, m, nc)))
    return st;
  return gemm(ch, o, 0, m - k - jb, nc, jb, -1.0f, d + jb, m, u12, m, 1.0f, u12 + jb, m);
}

// W = P L U (sgetrf's blocked form) of the m x n matrix, pivots at L.piv, by panels of nb
// columns: METAL_LINALG_LS_LU_NB per call, else Options::ls_lu_nb, else ls_nb; the panels as
// leaves (lu_panel) with METAL_LINALG_LS_LU_LEAF / Options::ls_lu_leaf. With lookahead
// (METAL_LINALG_LS_LU_LOOKAHEAD / Options::ls_lu_lookahead) each panel's interchanges, block row
// of U and update go first to the next panel's columns alone, the columns past it on the
// runner's side queue while the next panel is factored (it reads and writes only its own
// columns and pivots; the side reads the panel's L, which only the next panels' interchanges on
// the columns left of them touch: after the join).
ml_status getrf(const Chunk &ch, const Options &o, const LsLayout &L) {
  const int lu_nb = std::clamp(env_or("METAL_LINALG_LS_LU_NB", o.ls_lu_nb), 0, 1024);
  const int m = L.m, n = L.n, nb = lu_nb > 0 ? lu_nb : ls_nb(o);
  const bool leaf = env_or("METAL_LINALG_LS_LU_LEAF", o.ls_lu_leaf) != 0;
  const bool ahead = env_or("METAL_LINALG_LS_LU_LOOKAHEAD", o.ls_lu_lookahead) != 0;
  const bool fuse = env_or("METAL_LINALG_LS_LU_FUSE", o.ls_lu_fuse) != 0;
  const int sub = o.ls_lu_ib > 0 ? o.ls_lu_ib : 32;
  ml_status st;
  if (L.k > 0 && (st = lu_panel(ch, o, L, 0, std::min(nb, L.k), leaf, sub, fuse))) return st;
  for (int k = 0; k < L.k; k += nb) {
    const int jb = std::min(nb, L.k - k), right = n - k - jb;
    const int nj = std::min(nb, L.k - k - jb);  // the next panel's columns (0: none)
    if (!ahead || nj <= 0) {
      if ((st = ls_swap(ch, o, L, L.w, m, 0, n, k, k + jb, false, k, jb)) ||
          (right > 0 && (st = lu_update(ch, o, L, k, jb, k + jb, right))) ||
          (nj > 0 && (st = lu_panel(ch, o, L, k + jb, nj, leaf, sub, fuse))))
        return st;
      continue;
    }
    const int rest = right - nj;
    if ((st = ls_swap(ch, o, L, L.w, m, 0, k + jb + nj, k, k + jb, false, k, jb)) ||
        (st = lu_update(ch, o, L, k, jb, k + jb, nj)))
      return st;
    if (rest > 0) {
      if ((st = ch.r.side_begin())) return st;
      st = ls_swap(ch, o, L, L.w, m, k + jb + nj, rest, k, k + jb, false);
      if (!st) st = lu_update(ch, o, L, k, jb, k + jb + nj, rest);
      const ml_status f = ch.r.side_end();
      if ((st = st ? st : f)) return st;
    }
    if ((st = lu_panel(ch, o, L, k + jb, nj, leaf, sub, fuse)) || (st = ch.r.join())) return st;
  }
  return ML_OK;
}

// The right-hand sides of solve, inv and solve_triangular pass by pass (L.rc columns): load,
// solve (solve_pass, the pass's X left at result), store. A NaN / Inf anywhere in B must reach the stat slot before the
// first store when there are several passes: B is checked whole first.
template <class Solve>
ml_status rhs_passes(const Call &c, const Options &o, const Chunk &ch, const LsLayout &L,
                     int64_t result, Solve solve_pass) {
  const int n = L.n;
  const bool inv = c.op == ML_OP_INV, right = !inv && (c.flags & ML_LS_RIGHT) != 0;
  const int nr = static_cast<int>(L.nrhs);
  const int srows = right ? nr : n, sld = right ? n : nr;  // B: n x nrhs, or nrhs x n
  const int dir = right ? ML_LSB_STRAIGHT : 0;
  ml_status st;
  if (!inv && L.rc < L.nrhs &&
      (st = ls_copy(ch, o, L, false, L.b, n, n, static_cast<int>(L.nrhs),
                    ML_LSB_SRC_B | ML_LSB_CHECK | dir, srows, sld, 0)))
    return st;
  for (int64_t c0 = 0; c0 < L.nrhs; c0 += L.rc) {
    const int w = static_cast<int>(std::min<int64_t>(L.rc, L.nrhs - c0)), cc = static_cast<int>(c0);
    const int src = inv ? ML_LSB_EYE : ML_LSB_SRC_B | dir;
    if ((st = ls_copy(ch, o, L, false, L.b, n, n, w, src, srows, sld, cc)) ||
        (st = solve_pass(w)) ||
        (st = ls_copy(ch, o, L, true, result, n, n, w, dir | ML_LSB_NAN_INFO, srows, sld, cc)))
      return st;
  }
  return ML_OK;
}

ml_status run_lu(const Call &c, const Options &o, const Chunk &ch, const LsLayout &L) {
  const int m = L.m, n = L.n;
  ml_status st;
  if ((st = ls_init(ch, o, L)) ||
      (st = ls_copy(ch, o, L, false, L.w, m, m, n, 0, m, n, 0)) ||
      (st = getrf(ch, o, L)))
    return st;
  if (c.op == ML_OP_LU_FACTOR) {
    ml_step_params p = ls_params(L);
    p.n = L.k;
    p.off[1] = L.piv;
    const int gs = plain_lanes(o);
    if ((st = ls_copy(ch, o, L, true, L.w, m, m, n, 0, m, n, 0)) ||
        (c.out1 && (st = ch.launch(kStep_ls_pivots, ch.batch * ((L.k + gs - 1) / gs), gs, 0, p))))
      return st;
    return ls_info(ch, o, L, c);
  }
  const bool right = c.op == ML_OP_SOLVE && (c.flags & ML_LS_RIGHT) != 0;
  // The GEMM-rich form: the diagonal blocks of both triangular factors inverted once (the
  // first factor's at L.dinv, the second's at L.dinv2); each pass solves B -> X -> B.
  const int f1 = right ? ML_LSB_T_LOWER | ML_LSB_T_TRANS : ML_LSB_T_LOWER | ML_LSB_T_UNIT;
  const int f2 = right ? ML_LSB_T_UNIT | ML_LSB_T_TRANS : 0;
  if (L.gemm && ((st = ls_trtri(ch, o, L, L.w, n, n, f1, L.dinv)) ||
                 (st = ls_trtri(ch, o, L, L.w, n, n, f2, L.dinv2))))
    return st;
  auto pass = [&](int w) -> ml_status {
    ml_status s;
    if (right) {  // A^T = U^T L^T P^T: U^T (lower), L^T (unit upper), then P
      if ((s = ls_tri_solve(ch, o, L, L.w, n, n, true, false, true, L.dinv, L.b, L.x, n, w)) ||
          (s = ls_tri_solve(ch, o, L, L.w, n, n, false, true, true, L.dinv2, L.x, L.b, n, w)))
        return s;
      return ls_swap(ch, o, L, L.b, n, 0, w, 0, n, true);
    }
    if ((s = ls_swap(ch, o, L, L.b, n, 0, w, 0, n, false)) ||
        (s = ls_tri_solve(ch, o, L, L.w, n, n, true, true, false, L.dinv, L.b, L.x, n, w)))
      return s;
    return ls_tri_solve(ch, o, L, L.w, n, n, false, false, false, L.dinv2, L.x, L.b, n, w);
  };
  if ((st = rhs_passes(c, o, ch, L, L.b, pass))) return st;
  return ls_info(ch, o, L, c);
}

ml_status run_triangular(const Call &c, const Options &o, const Chunk &ch, const LsLayout &L) {
  const int n = L.n;
  const bool upper = (c.flags & ML_LS_UPPER) != 0, unit = (c.flags & ML_LS_UNIT) != 0;
  const bool right = (c.flags & ML_LS_RIGHT) != 0;
  const int tri = (upper ? ML_LSB_UPPER : ML_LSB_LOWER) | (unit ? ML_LSB_UNIT : 0);
  ml_status st;
  if ((st = ls_init(ch, o, L)) ||
      (st = ls_copy(ch, o, L, false, L.w, n, n, n, tri, n, n, 0)))
    return st;
  if (!unit) {
    ml_step_params p = ls_params(L);
    p.n = n;
    p.off[1] = L.w;
    p.ld[1] = n;
    if ((st = ch.launch(kStep_ls_diag, ch.batch, ls_lanes(o), ML_RED_FLOATS, p))) return st;
  }
  // A X = B: op(T) = A; X A = B: A^T X^T = B^T, op(T) = A^T (lower when A is upper).
  const bool lower = right ? upper : !upper;
  const int f = (lower ? ML_LSB_T_LOWER : 0) | (unit ? ML_LSB_T_UNIT : 0) |
                (right ? ML_LSB_T_TRANS : 0);
  if (L.gemm && (st = ls_trtri(ch, o, L, L.w, n, n, f, L.dinv))) return st;
  auto pass = [&](int w) {
    return ls_tri_solve(ch, o, L, L.w, n, n, lower, unit, right, L.dinv, L.b, L.x, n, w);
  };
  if ((st = rhs_passes(c, o, ch, L, L.x, pass))) return st;
  return ls_info(ch, o, L, c);
}

int64_t linsys_per_matrix(const Call &c, int32_t kf, const Options &o) {
  (void)kf;
  return ls_layout(c, o).floats;
}

ml_status linsys_run_chunk(const Call &c, int32_t kf, const Options &opts, const Chunk &ch) {
  (void)kf;
  // METAL_LINALG_LS_TRSM_LANE once per chunk, not at each of ls_trsm's many launches.
  Options o = opts;
  o.ls_trsm_lane = env_or("METAL_LINALG_LS_TRSM_LANE", opts.ls_trsm_lane);
  const LsLayout L = ls_layout(c, o);
  if (c.op == ML_OP_CHOLESKY) return run_cholesky(c, o, ch, L);
  if (c.op == ML_OP_SOLVE_TRIANGULAR) return run_triangular(c, o, ch, L);
  return run_lu(c, o, ch, L);
}

}  // namespace

const Algo *linsys_algo() {
  static const Algo a{linsys_per_matrix, linsys_run_chunk};
  return &a;
}

}  // namespace ml::blocked
