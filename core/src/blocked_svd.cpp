// Blocked SVD and singular values (core/kernels/gebrd_blocked.h): the Householder
// bidiagonalisation A = Q B P^T in panels of nb columns, the singular values and vectors of B
// from the Golub-Kahan tridiagonal TGK (order 2N, zero diagonal, off-diagonal d0, e0, d1, e1,
// ..., d_{N-1}): its eigenvalues are +-sigma, the eigenvector of +sigma_i is
// [v_i(0), u_i(0), v_i(1), u_i(1), ...] / sqrt(2) (LAPACK's bdsvdx), solved by the blocked
// tridiagonal eigensolver, then U = Q U_B and V = P V_B in compact WY form from the last panel.
// Wide inputs (m < n) are factored as their transpose: A^T = U' S V'^T gives u = V', vt = U'^T.
// With brd_res (Options::brd_res_*) the columns from a panel boundary k0 on are bidiagonalised
// in one launch with the trailing rows resident in the groups' shared memory
// (core/kernels/gebrd_resident.h), the panels before k0.
#include "blocked_svd.h"

#include <cstdlib>

#include "blocked_tridiag.h"
#include "errors.h"

namespace ml::blocked {

namespace {

// Lanes of the bidiagonalisation's steps: a multiple of 32 (the steps use whole warps).
int brd_lanes(const Options &o) { return std::max(32, std::min(256, o.max_group) / 32 * 32); }

int i32(int64_t x) { return static_cast<int>(x); }

// METAL_LINALG_BRD_RES_GROUPS / _MAX_BATCH / _LANES override the Options fields (measurement;
// env_or, blocked_impl.h).

bool brd_res_tagged(const Options &o) {
  return env_or("METAL_LINALG_BRD_RES_TAGGED", o.brd_res_tagged) != 0;
}

int res_groups(const Options &o) {
  const int groups = env_or("METAL_LINALG_BRD_RES_GROUPS", o.brd_res_groups);
  const int max_batch = env_or("METAL_LINALG_BRD_RES_MAX_BATCH", o.brd_res_max_batch);
  return groups > 0 && max_batch > 0 ? groups : 0;
}

// The resident bidiagonalisation (brd_res) of a chunk: from column k0 (a panel boundary, N:
// not taken) with g groups per matrix of gs lanes, nr rows each at most.
struct ResPlan {
  int k0, g, gs, nr, shared;
};

ResPlan res_plan(const Options &o, const BrdLayout &L, int64_t batch) {
  ResPlan rp{L.N, 0, 0, 0, 0};
  const int64_t groups = res_groups(o);
  const int64_t max_batch = env_or("METAL_LINALG_BRD_RES_MAX_BATCH", o.brd_res_max_batch);
  if (groups <= 0 || L.res < 0 || batch > max_batch) return rp;
  const int lanes = env_or("METAL_LINALG_BRD_RES_LANES", o.brd_res_lanes);
  const int gs = std::max(32, std::min({lanes, o.max_group, ML_RES_MAX_LANES})) / 32 * 32;
  const int gm = static_cast<int>(std::min<int64_t>(groups / batch, L.res_g));
  if (gm < 1) return rp;
  for (int k0 = 0; k0 < L.N; k0 += L.nb) {
    // At most one group per row: every group takes part in every column's exchanges.
    const int r = L.M - k0, g = std::min(gm, r), nr = (r + g - 1) / g;
    const int shared = ml_brd_res_shared_floats(nr, L.N - k0, gs);
    if (shared <= o.shared_floats) return ResPlan{k0, g, gs, nr, shared};
  }
  return rp;
}

}  // namespace

BrdLayout brd_layout(int64_t m, int64_t n, bool vectors, bool solver, const Options &o,
                     int64_t batch) {
  BrdLayout L;
  L.m = i32(m);
  L.n = i32(n);
  L.wide = m < n;
  L.M = i32(std::max(m, n));
  L.N = i32(std::min(m, n));
  L.nb = std::max(1, std::min(o.nb, 64));
  L.gs_col = L.gs_row = L.gs_x = brd_lanes(o);
  if (o.brd_x_lanes > 0) L.gs_x = std::max(32, std::min(o.brd_x_lanes, o.max_group) / 32 * 32);
  L.cb_row = 4 * (L.gs_row / 32);
  const int64_t M = L.M, N = L.N, nb = L.nb, pw = ML_BRD_PW(nb);
  Slice s;
  L.vec = s.add(ml_brd_vec(L.N, ML_BRD_VECS));
  L.w = s.add(M * N);
  L.v = s.add(M * N);
  L.u = s.add(N * N);
  L.x = s.add(M * nb);
  L.y = s.add(N * nb);
  L.p1 = s.add(ml_brd_col_groups(L.M, 0, L.gs_col) * pw);
  L.p3 = s.add(ml_brd_row_groups(L.N, 0, L.cb_row) * pw);
  if (vectors) {
    L.t = s.add(nb * nb);
    L.x1 = s.add(nb * N);
    L.x2 = s.add(nb * N);
    L.uf = L.w;  // W is spent once B is out
    L.vf = s.add(N * N);
  }
  if (solver) {
    L.td = s.add(2 * N);
    L.te = s.add(2 * N);
    L.tw = s.add(2 * N);
    L.tz = vectors ? s.add(2 * N * N) : -1;
    L.tscr = s.add(tridiag_scratch_floats(2 * N, N, vectors));
  }
  if (const int g = res_groups(o); g > 0) {
    // A chunk of k matrices gives each g / k groups. The region of every matrix of a call of many
    // is sized for the chunks the call will run (at most brd_res_max_batch matrices for brd_res
    // to run, at most what fits max_workspace_bytes), not for one matrix alone; a smaller last
    // chunk then uses no more groups per matrix than that (res_plan caps them by res_g).
    const int64_t max_batch = env_or("METAL_LINALG_BRD_RES_MAX_BATCH", o.brd_res_max_batch);
    const int64_t fit = o.max_workspace_bytes / 4 / std::max<int64_t>(s.floats, 1);
    const int64_t k = std::clamp<int64_t>(std::min({batch, max_batch, fit}), 1, g);
    L.res_g = static_cast<int>(std::min<int64_t>(g / k, L.M));
    L.res = s.add(brd_res_tagged(o) ? ml_brd_res_tagged_floats(L.N, L.res_g)
                                    : ml_brd_res_floats(L.N, L.res_g));
  }
  L.per = s.floats;
  return L;
}

ml_status brd_load(const Chunk &ch, const Options &o, const BrdLayout &L) {
  if (!L.wide) return load_input(ch, o, L.m, L.n, ML_STEP_TRI_FULL, L.vec, L.w);
  // The input as it is into V (free until the bidiagonalisation), then W = its transpose.
  if (ml_status st = load_input(ch, o, L.m, L.n, ML_STEP_TRI_FULL, L.vec, L.v)) return st;
  ml_step_params p = step_params();
  p.m = L.m;
  p.n = L.n;
  p.off[0] = L.v;
  p.off[1] = L.w;
  return ch.launch(kStep_brd_transpose, ch.batch * tiles32(L.m, L.n), plain_lanes(o), 32 * 33,
                   p);
}

int brd_res_k0(const Options &o, const BrdLayout &L, int64_t batch) {
  return res_plan(o, L, batch).k0;
}

ml_status brd_bidiagonalize(const Chunk &ch, const Options &o, const BrdLayout &L) {
  const int M = L.M, N = L.N, nb = L.nb;
  // Panels up to rp.k0, then the columns left in one launch of brd_res.
  const ResPlan rp = res_plan(o, L, ch.batch);
  ml_step_params p = step_params();
  p.m = M;
  p.n = N;
  p.off[0] = L.w;
  p.off[1] = L.v;
  p.off[2] = L.u;
  p.off[3] = L.x;
  p.ld[0] = i32(L.y);
  p.ld[1] = i32(L.vec);
  p.ld[2] = i32(L.p1);
  p.ld[3] = i32(L.p3);
  p.i[2] = nb;
  p.i[3] = L.cb_row;
  ml_status st;
  for (int j = 0; j < rp.k0; j += nb) {
    const int jb = std::min(nb, N - j);
    p.i[1] = j;
    for (int c = j; c < j + jb; ++c) {
      p.i[0] = c;
      const int g1 = ml_brd_col_groups(M, c, L.gs_col);
      const int g3 = ml_brd_row_groups(N, c, L.cb_row);
      p.k = 0;
      if ((st = ch.launch(kStep_brd_col, ch.batch * g1, L.gs_col,
                          ml_brd_col_shared(nb, L.gs_col), p)))
        return st;
      p.k = g1;
      if ((st = ch.launch(kStep_brd_row, ch.batch * g3, L.gs_row,
                          ml_brd_row_shared(nb, L.gs_row, L.cb_row), p)))
        return st;
      if (c == N - 1) continue;
      p.k = g3;
      if ((st = ch.launch(kStep_brd_x, ch.batch * ml_brd_x_groups(M, c), L.gs_x,
                          ml_brd_x_shared(nb, L.gs_x), p)))
        return st;
    }
    const int mt = M - j - jb, nt = N - j - jb;
    if (nt <= 0) continue;
    // A22 -= V Y^T + X U^T over rows and columns j + jb ..
    const int64_t a22 = L.w + static_cast<int64_t>(j + jb) * M + j + jb;
    if ((st = gemm(ch, o, ML_GEMM_TRANS_B, mt, nt, jb, -1.0f,
                   L.v + static_cast<int64_t>(j) * M + j + jb, M, L.y + j + jb, N, 1.0f, a22,
                   M)) ||
        (st = gemm(ch, o, ML_GEMM_TRANS_B, mt, nt, jb, -1.0f, L.x + j + jb, M,
                   L.u + static_cast<int64_t>(j) * N + j + jb, N, 1.0f, a22, M)))
      return st;
  }
  if (rp.k0 >= N) return ML_OK;
  ml_step_params r = step_params();
  r.m = M;
  r.n = N;
  r.off[0] = L.w;
  r.off[1] = L.v;
  r.off[2] = L.u;
  r.off[3] = L.vec;
  r.ld[0] = i32(L.res);
  r.i[0] = rp.k0;
  r.i[1] = rp.g;
  r.i[2] = rp.nr;
  if (brd_res_tagged(o)) {
    // Every tag voided first, by up to 64 groups per matrix.
    const int64_t words = ml_brd_res_tagged_floats(N, rp.g) / 2;
    const int lanes = plain_lanes(o);
    r.i[3] = static_cast<int>(std::clamp<int64_t>(words / (16 * lanes), 1, 64));
    r.flags = 4 | 8;
    if ((st = ch.launch(kStep_brd_res, ch.batch * r.i[3], lanes, 0, r))) return st;
    r.flags = 8;
    r.i[3] = 0;
  } else {
    r.flags = 4;
    if ((st = ch.launch(kStep_brd_res, ch.batch, 32, 0, r))) return st;
    r.flags = 0;
  }
  return ch.launch(kStep_brd_res, ch.batch * rp.g, rp.gs, rp.shared, r);
}

namespace {

// X2 := (I - R T R^T) X2 for the reflectors R (r x jb at offset rf, ld ldr, taus at tau) and
// X2 (r x ncols at x2, ld ldx): T by larft(), then larfb().
ml_status apply_block(const Chunk &ch, const Options &o, const BrdLayout &L, int64_t rf, int ldr,
                      int64_t tau, int r, int jb, int64_t x2, int ldx, int ncols) {
  const int nb = L.nb;
  if (ml_status st = larft(ch, o, rf, ldr, tau, r, jb, nb, L.t, panel_lanes(r, o))) return st;
  return larfb(ch, o, BlockReflector{rf, ldr, L.t, nb, r, jb}, false, x2, ldx, ncols,
               LarfbWork{L.x1, L.x2, nb});
}

}  // namespace

ml_status brd_apply_q(const Chunk &ch, const Options &o, const BrdLayout &L, int64_t x,
                      int ncols) {
  const int M = L.M, N = L.N, nb = L.nb;
  const int64_t tauq = L.vec + ml_brd_vec(N, ML_BRD_TAUQ);
  for (int j = (N - 1) / nb * nb; j >= 0; j -= nb) {
    const int jb = std::min(nb, N - j);
    if (ml_status st = apply_block(ch, o, L, L.v + static_cast<int64_t>(j) * M + j, M, tauq + j,
                                   M - j, jb, x + j, M, ncols))
      return st;
  }
  return ML_OK;
}

ml_status brd_apply_p(const Chunk &ch, const Options &o, const BrdLayout &L, int64_t x,
                      int ncols) {
  const int N = L.N, nb = L.nb;
  const int64_t taup = L.vec + ml_brd_vec(N, ML_BRD_TAUP);
  for (int j = (N - 1) / nb * nb; j >= 0; j -= nb) {
    const int jb = std::min(nb, N - 1 - j);  // G_{N-1} does not exist
    if (jb <= 0) continue;
    if (ml_status st = apply_block(ch, o, L, L.u + static_cast<int64_t>(j) * N + j + 1, N,
                                   taup + j, N - 1 - j, jb, x + j + 1, N, ncols))
      return st;
  }
  return ML_OK;
}

ml_status brd_svd_front(const Chunk &ch, const Options &o, const BrdLayout &L) {
  ml_status st;
  if ((st = brd_load(ch, o, L)) || (st = brd_bidiagonalize(ch, o, L))) return st;
  ml_step_params p = step_params();
  p.n = L.N;
  p.off[0] = L.vec;
  p.off[1] = L.td;
  p.off[2] = L.te;
  return ch.launch(kStep_brd_tgk, ch.batch, plain_lanes(o), 0, p);
}

ml_status brd_svd_back(const Call &c, const Chunk &ch, const Options &o, const BrdLayout &L) {
  const bool vec = L.tz >= 0;
  const int M = L.M, N = L.N, k = N;
  ml_step_params p = step_params();
  p.m = M;
  p.n = N;
  p.flags = vec ? 1 : 0;
  p.off[0] = L.vec;
  p.off[1] = L.tw;
  p.off[2] = vec ? L.tz : 0;
  p.off[3] = L.uf;
  p.ld[0] = M;
  p.ld[1] = i32(L.vf);
  ml_status st;
  if ((st = ch.launch(kStep_brd_tgk_out, ch.batch * N, plain_lanes(o), ML_RED_FLOATS, p)))
    return st;
  if (vec) {
    ml_step_params f = p;
    f.i[0] = o.svd_fix_lanes > 0 ? 1 : 0;
    const int fl = o.svd_fix_lanes > 0 ? std::min(o.svd_fix_lanes, o.max_group) : plain_lanes(o);
    if ((st = ch.launch(kStep_brd_tgk_fix, ch.batch, fl, ml_brd_fix_shared(N), f))) return st;
    if ((st = brd_apply_q(ch, o, L, L.uf, k)) || (st = brd_apply_p(ch, o, L, L.vf, k))) return st;
    // A = (Q U_B) S (P V_B)^T, or for a wide input A^T = that.
    const int64_t uw = L.wide ? L.vf : L.uf, vw = L.wide ? L.uf : L.vf;
    const int ldu = L.wide ? N : M, ldv = L.wide ? M : N;
    if ((st = store_output(ch, o, 0, L.m, k, 0, uw, ldu, L.vec)) ||
        (st = store_output(ch, o, 2, k, L.n, ML_STORE_TRANSPOSE, vw, ldv, L.vec)))
      return st;
  }
  if ((st = store_output(ch, o, 1, 1, k, ML_STORE_SCALE, L.vec + ml_brd_vec(N, ML_BRD_S), 1,
                         L.vec)))
    return st;
  return store_info(ch, o, L.vec, c.info != nullptr);
}

namespace {

int64_t per_matrix(const Call &c, int32_t kf, const Options &o) {
  (void)kf;
  return brd_layout(c.m, c.n, c.op == ML_OP_SVD, true, o, c.batch).per;
}

ml_status run_chunk(const Call &c, int32_t kf, const Options &o, const Chunk &ch) {
  (void)kf;  // thin SVD only (full_matrices is not routed here)
  const BrdLayout L = brd_layout(c.m, c.n, c.op == ML_OP_SVD, true, o, c.batch);
  if (L.per >= (int64_t{1} << 31))
    return fail(ML_RUNTIME_ERROR, "svd", "matrix too large for the blocked SVD");
  const int N = L.N;
  ml_status st;
  if ((st = brd_svd_front(ch, o, L)) ||
      (st = tridiag_eig(ch, o, 2 * N, N, N, L.td, L.te, L.tw, L.tz, 2 * N, L.tscr, L.vec)))
    return st;
  return brd_svd_back(c, ch, o, L);
}

}  // namespace

const Algo *svd_algo() {
  static const Algo a{per_matrix, run_chunk};
  return &a;
}

}  // namespace ml::blocked
