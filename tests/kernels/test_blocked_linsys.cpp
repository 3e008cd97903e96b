// Tests of the blocked linear systems (core/src/blocked_linsys.cpp, core/kernels/
// linsys_blocked.h) through the CPU runner, at reduced sizes with narrow diagonal blocks
// (ls_nb 8, and 5), small groups and right-hand sides in passes of a few columns, so that
// block and pass boundaries fall inside the matrices (n = 1, odd n, n equal to the block,
// tall and wide lu_factor). Every batch mixes the hard families with failing matrices
// (indefinite, exactly singular, NaN / Inf where the op reads and where it does not) from
// linsys_families.h; each matrix is judged on its own: LAPACK's ratios (docs/design.md
// section 7), info as LAPACK's through the library's CPU path, an all-NaN result for a failed
// matrix (lu_factor keeps a singular matrix's factors), lu_factor's pivots as LAPACK's but
// for the ill-conditioned families (near ties); batches also in chunks of a few matrices.
// The faster paths (Options::ls_lu_ib: LU's panels in registers inside each panel, ls_laswp_blk:
// the interchanges composed by blocks, ls_rhs_wide: every right-hand side in one pass) run the
// same checks beside the plain ones ("fast"), with inner panels narrower than the panel, rows
// past one lane's share (several rows a lane, every register class) and more interchanges than
// one block of them.
// The diagonal blocks' triangular solves a right-hand side a lane (Options::ls_trsm_lane) run
// the same checks in every suite ("lane trsm").
// The inner register panels fused (Options::ls_lu_fuse: each one's factorisation, interchanges
// and block row of U in one launch, the product after it) run the same checks ("fused").
// LU's panels as leaves in one launch each (Options::ls_lu_leaf: register sub-panels, their
// interchanges, U and updates inside the panel by one group) and with lookahead
// (ls_lu_lookahead: the side queue's updates held back until the join) run the same checks.
// The Cholesky and the solves (solve, inv, solve_triangular) run every batch in both forms
// (Options::ls_gemm_form: 0 the diagonal blocks' substitutions, 1 the GEMM-rich forms with
// inverted diagonal blocks and recursive block substitution), also with the GEMM-rich blocks
// wider or narrower than ls_nb (ls_gemm_nb), and each suite prints the worst ratio of each form.
// The GEMM-rich Cholesky also runs with its diagonal blocks by sub-blocks in one simdgroup
// (ls_potrf_reg 1 registers, 2 shared memory) and in two levels (ls_chol_outer, with and without
// ls_chol_lookahead: the runner holds the side queue back until the join).
// Suites: cholesky, lu, solve, inv, triangular. Usage: test_blocked_linsys <suite>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernel_runner.h"
#include "linsys_check.h"
#include "linsys_families.h"
#include "step_runner.h"

namespace {

using lsk::Batch;

// The options of a run: diagonal blocks of nb, groups of at most 32 lanes (products of 4 x 4),
// right-hand sides in passes of rhs_cols columns of an n-row B.
ml::blocked::Options options(int nb, int n, int rhs_cols) {
  ml::blocked::Options o = kt::blocked_options(nb, 4, 32);
  o.ls_nb = nb;
  o.ls_rhs_cols = rhs_cols;
  o.ls_rhs_floats = int64_t{n} * rhs_cols;
  return o;
}

// The blocked algorithm of shape s on batch bt under o, through the CPU runner.
lsk::Out run_blocked(const lsk::Shape &s, const Batch &bt, const ml::blocked::Options &o,
                     int batch, kt::Report &rep, const std::string &at) {
  lsk::Out out;
  out.x.assign(size_t(batch) * s.x_floats() + 1, -7.f);
  out.piv.assign(size_t(batch) * s.k() + 1, -7);
  out.info.assign(size_t(batch), -1);
  ml::Call c{s.op, batch, s.m, s.n, s.flags, bt.a.data(), out.x.data(),
             s.op == ML_OP_LU_FACTOR ? reinterpret_cast<float *>(out.piv.data()) : nullptr,
             nullptr, out.info.data()};
  c.nrhs = s.op == ML_OP_INV ? s.n : s.nrhs;
  if (lsk::two_inputs(s.op)) c.b = bt.b.data();
  rep.expect(ml::blocked::supported(s.op), at + " has a blocked algorithm");
  kt::CpuStepRunner r;
  const ml_status st = r.run(c, s.flags, o);
  rep.expect(st == ML_OK, at + " runs");
  rep.expect(out.x.back() == -7.f && out.piv.back() == -7, at + " nothing written past the end");
  return out;
}

// o with the faster paths on: inner LU panels of at most ib columns, the blocked interchanges,
// right-hand sides in passes of up to n columns of an n-row B.
ml::blocked::Options fast(ml::blocked::Options o, int n, int ib = 3) {
  o.ls_lu_ib = ib;
  o.ls_laswp_blk = 1;
  o.ls_rhs_wide = 1;
  o.ls_rhs_floats = int64_t{n} * n;
  o.ls_rhs_wide_floats = int64_t{n} * n;
  return o;
}

// o with the faster paths on and the diagonal blocks' triangular solves a vector a lane
// (Options::ls_trsm_lane).
ml::blocked::Options laned(ml::blocked::Options o, int n, int ib = 3) {
  o = fast(o, n, ib);
  o.ls_trsm_lane = 1;
  return o;
}

// o with the faster paths on and each inner LU panel fused into one launch (Options::ls_lu_fuse:
// its factorisation, interchanges on the panel's other columns and block row of U).
ml::blocked::Options fused(ml::blocked::Options o, int n, int ib = 3) {
  o = fast(o, n, ib);
  o.ls_lu_fuse = 1;
  return o;
}

// o with the faster paths on and LU's panels as leaves in one launch each (Options::ls_lu_leaf:
// sub-panels of at most ib columns in registers, the rest of the panel by the same group).
ml::blocked::Options leafy(ml::blocked::Options o, int n, int ib = 3) {
  o = fast(o, n, ib);
  o.ls_lu_leaf = 1;
  return o;
}

// The worst ratio of each form (Options::ls_gemm_form) over a suite, and where: over every n
// ([f][0]) and over n >= 21 ([f][1], several blocks, past the rounding of the 1 x 1 cases).
double g_worst[2][2] = {};
std::string g_worst_at[2][2];

void print_forms() {
  for (int f = 0; f < 2; ++f)
    for (int big = 0; big < 2; ++big)
      std::printf("form %d%s: worst ratio %.3g (%s)\n", f, big ? " n >= 21" : "",
                  g_worst[f][big], g_worst_at[f][big].c_str());
}

// Runs shape s on bt under o and checks every matrix against LAPACK: lu_factor once, the other
// ops in both forms (o's ls_gemm_form ignored).
void run_batch(kt::Report &rep, const lsk::Shape &s, const Batch &bt,
               const ml::blocked::Options &o0, const char *what) {
  const int batch = int(bt.fams.size());
  std::vector<int> piv;
  const std::vector<int> want = lsk::lapack_info(s, bt, batch, &piv);
  for (int form = 0; form < 2; ++form) {
    if (s.op == ML_OP_LU_FACTOR && form == 0) continue;
    ml::blocked::Options o = o0;
    o.ls_gemm_form = form;
    char head[240];
    std::snprintf(head, sizeof head,
                  "op %d %dx%d nrhs=%d flags=%d nb=%d rhs=%lld ib=%d lu_nb=%d blk=%d wide=%d "
                  "lanes=%d form=%d gemm_nb=%d %s",
                  s.op, s.m, s.n, s.nrhs, s.flags, o.ls_nb,
                  static_cast<long long>(o.ls_rhs_cols), o.ls_lu_ib, o.ls_lu_nb, o.ls_laswp_blk,
                  o.ls_rhs_wide, o.max_group, form, o.ls_gemm_nb, what);
    const lsk::Out out = run_blocked(s, bt, o, batch, rep, head);
    for (int i = 0; i < batch; ++i) {
      const std::string at = std::string(head) + " " + bt.fams[i] + " #" + std::to_string(i);
      const double r = lsk::check_matrix(rep, at, s, bt, out, i, want, piv);
      for (int big = 0; big < 2; ++big)
        if (s.op != ML_OP_LU_FACTOR && (!big || s.n >= 21) && std::isfinite(r) &&
            r > g_worst[form][big]) {
          g_worst[form][big] = r;
          g_worst_at[form][big] = at;
        }
    }
  }
}

// n = 1, below the block, the block itself, odd sizes across several blocks.
const int kSizes[] = {1, 5, 8, 21, 45};

void suite_cholesky(kt::Report &rep) {
  std::mt19937_64 rng(21);
  for (int n : kSizes)
    for (int flags : {0, int(ML_LS_UPPER)}) {
      kt::Timer t("blocked cholesky", n, n, 0);
      const Batch bt = lsk::spd_batch(n, flags, rng);
      run_batch(rep, {ML_OP_CHOLESKY, n, n, 1, flags}, bt, options(8, n, 1), "");
    }
  run_batch(rep, {ML_OP_CHOLESKY, 64, 64, 1, 0}, lsk::spd_batch(64, 0, rng), options(5, 64, 1),
            "nb5");
  // GEMM-rich blocks wider and narrower than ls_nb, several block columns, both triangles.
  for (int flags : {0, int(ML_LS_UPPER)}) {
    kt::Timer t("blocked cholesky gemm_nb", 100, 100, 0);
    const Batch bt = lsk::spd_batch(100, flags, rng);
    for (int gnb : {24, 3}) {
      ml::blocked::Options o = options(8, 100, 1);
      o.ls_gemm_nb = gnb;
      run_batch(rep, {ML_OP_CHOLESKY, 100, 100, 1, flags}, bt, o, "gemm_nb");
    }
    // The diagonal blocks in registers (ls_potrf_reg): sub-blocks of 32 and a narrower last
    // one (blocks of 64 and 36, 40 and 20, 100), one simdgroup a group and two.
    // Both forms: in registers (1) and in shared memory (2).
    for (int form : {1, 2})
      for (int gnb : {64, 40, 100}) {
        ml::blocked::Options o = options(8, 100, 1);
        o.ls_gemm_nb = gnb;
        o.ls_potrf_reg = form;
        if (gnb == 40) o.max_group = 64;
        run_batch(rep, {ML_OP_CHOLESKY, 100, 100, 1, flags}, bt, o,
                  form == 1 ? "potrf_reg" : "potrf_reg shared");
      }
    // Two levels (ls_chol_outer): outer panels of 3 blocks (the last one narrower) and of 2
    // register blocks, the rest by stripes (the last one narrower); with lookahead (the
    // runner holds the side queue's stripes back until the join: a next outer panel reading
    // what they write fails), outer panels of 2 and 3 blocks.
    for (int outer : {24, 80, 16, -24}) {
      ml::blocked::Options o = options(8, 100, 1);
      o.ls_chol_outer = outer < 0 ? -outer : outer;
      o.ls_chol_lookahead = outer == 16 || outer < 0;
      if (outer == 80) {
        o.ls_gemm_nb = 40;
        o.ls_potrf_reg = flags ? 2 : 1;
      }
      run_batch(rep, {ML_OP_CHOLESKY, 100, 100, 1, flags}, bt, o,
                o.ls_chol_lookahead ? "outer lookahead" : "outer");
    }
  }
  for (int form : {1, 2})
    run_batch(rep, {ML_OP_CHOLESKY, 21, 21, 1, 0}, lsk::spd_batch(21, 0, rng),
              [&] {
                ml::blocked::Options o = options(8, 21, 1);
                o.ls_gemm_nb = 16;
                o.ls_potrf_reg = form;
                return o;
              }(),
              form == 1 ? "potrf_reg" : "potrf_reg shared");
  print_forms();
}

void suite_lu(kt::Report &rep) {
  std::mt19937_64 rng(22);
  for (int n : kSizes) {
    kt::Timer t("blocked lu_factor", n, n, 0);
    const Batch bt = lsk::general_batch(n, rng);
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, bt, options(8, n, 1), "");
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, bt, fast(options(8, n, 1), n), "fast");
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, bt, fused(options(8, n, 1), n), "fused");
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, bt, laned(options(8, n, 1), n), "lane trsm");
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, bt, leafy(options(8, n, 1), n), "leaf");
    ml::blocked::Options la = leafy(options(8, n, 1), n);
    la.ls_lu_lookahead = 1;
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, bt, la, "leaf lookahead");
    la = options(8, n, 1);
    la.ls_lu_lookahead = 1;
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, bt, la, "lookahead");
  }
  // Panels in registers of every class (32 lanes: up to 256 rows of 8 columns, 128 of 16, 64 of
  // 32; narrower panels than ib where the rows need it), several simdgroups (128 lanes), 150
  // interchanges in blocks of 64.
  {
    kt::Timer t("blocked lu_factor registers", 150, 150, 0);
    const Batch bt = lsk::general_batch(150, rng);
    const lsk::Shape s{ML_OP_LU_FACTOR, 150, 150, 1, 0};
    for (int ib : {32, 12, 5}) {
      run_batch(rep, s, bt, fast(options(64, 150, 1), 150, ib), "fast");
      run_batch(rep, s, bt, fused(options(64, 150, 1), 150, ib), "fused");
    }
    run_batch(rep, s, bt, laned(options(64, 150, 1), 150, 12), "lane trsm");
    ml::blocked::Options o = fast(options(48, 150, 1), 150, 32);
    o.max_group = 128;
    run_batch(rep, s, bt, o, "fast 128 lanes");
    o.ls_lu_fuse = 1;
    run_batch(rep, s, bt, o, "fused 128 lanes");
    o.ls_lu_fuse = 0;
    o = options(64, 150, 1);
    o.ls_laswp_blk = 1;  // the blocked interchanges alone, on ls_getf2's panels
    run_batch(rep, s, bt, o, "blk");
    // Panels wider than the triangular blocks (U12 by the blocked solve), with and without the
    // register panels inside.
    o = fast(options(8, 150, 1), 150, 32);
    o.ls_lu_nb = 100;
    run_batch(rep, s, bt, o, "fast lu_nb 100");
    o.ls_lu_ib = 0;
    run_batch(rep, s, bt, o, "lu_nb 100");
    // The leaves: every register class over the panels (32 lanes: 8 columns a sub-panel at 150
    // rows, 16 from 86, 32 from 22), sub-panels narrower than the class, a leaf of 100 columns
    // (128 lanes), one past ML_LSB_LEAF_MAX (the launches instead).
    for (int ib : {32, 12, 5})
      run_batch(rep, s, bt, leafy(options(64, 150, 1), 150, ib), "leaf");
    o = leafy(options(8, 150, 1), 150, 32);
    o.ls_lu_nb = 100;
    o.max_group = 128;
    run_batch(rep, s, bt, o, "leaf lu_nb 100 128 lanes");
    o.ls_lu_nb = 150;
    run_batch(rep, s, bt, o, "leaf lu_nb 150");
    // Lookahead over panels of 40 (the last one narrower) with the leaves and the launches.
    o = leafy(options(8, 150, 1), 150, 12);
    o.ls_lu_nb = 40;
    o.ls_lu_lookahead = 1;
    run_batch(rep, s, bt, o, "leaf lu_nb 40 lookahead");
    o.ls_lu_leaf = 0;
    run_batch(rep, s, bt, o, "fast lu_nb 40 lookahead");
    o.ls_lu_fuse = 1;
    run_batch(rep, s, bt, o, "fused lu_nb 40 lookahead");
  }
  // Tall and wide, the panels' and the trailing columns' boundaries inside.
  for (auto mn : {std::pair<int, int>{29, 11}, {11, 29}, {20, 8}, {1, 9}, {9, 1}}) {
    const int m = mn.first, n = mn.second;
    Batch bt;
    lsk::push(bt, "gaussian", kt::to_float(kt::gaussian(rng, m, n)));
    kt::Mat zc = kt::gaussian(rng, m, n);
    for (int i = 0; i < m; ++i) zc(i, std::min(n - 1, 3)) = 0;
    lsk::push(bt, "zerocolumn", kt::to_float(zc));
    auto nan = kt::to_float(kt::gaussian(rng, m, n));
    nan.back() = lsk::kNaN;
    lsk::push(bt, "nan", nan);
    run_batch(rep, {ML_OP_LU_FACTOR, m, n, 1, 0}, bt, options(4, n, 1), "nb4");
    run_batch(rep, {ML_OP_LU_FACTOR, m, n, 1, 0}, bt, fast(options(8, n, 1), n), "nb8 fast");
    run_batch(rep, {ML_OP_LU_FACTOR, m, n, 1, 0}, bt, fused(options(8, n, 1), n), "nb8 fused");
    run_batch(rep, {ML_OP_LU_FACTOR, m, n, 1, 0}, bt, leafy(options(8, n, 1), n), "nb8 leaf");
    ml::blocked::Options la = leafy(options(4, n, 1), n);
    la.ls_lu_lookahead = 1;
    run_batch(rep, {ML_OP_LU_FACTOR, m, n, 1, 0}, bt, la, "nb4 leaf lookahead");
  }
  run_batch(rep, {ML_OP_LU_FACTOR, 64, 64, 1, 0}, lsk::general_batch(64, rng), options(5, 64, 1),
            "nb5");
  ml::blocked::Options o = options(8, 21, 1);
  o.max_workspace_bytes = 2 * 4 * (32 + 21 * 21 + 32 + 32);  // chunks of 2 matrices
  const Batch b21 = lsk::general_batch(21, rng);
  run_batch(rep, {ML_OP_LU_FACTOR, 21, 21, 1, 0}, b21, o, "chunks2");
  run_batch(rep, {ML_OP_LU_FACTOR, 21, 21, 1, 0}, b21, fast(o, 21), "chunks2 fast");
  run_batch(rep, {ML_OP_LU_FACTOR, 21, 21, 1, 0}, b21, fused(o, 21), "chunks2 fused");
  o = leafy(o, 21);
  o.ls_lu_lookahead = 1;
  run_batch(rep, {ML_OP_LU_FACTOR, 21, 21, 1, 0}, b21, o, "chunks2 leaf lookahead");
}

void suite_solve(kt::Report &rep) {
  std::mt19937_64 rng(23);
  for (int n : kSizes)
    for (int nrhs : {1, 19})
      for (int flags : {0, int(ML_LS_RIGHT)}) {
        kt::Timer t("blocked solve", n, nrhs, 0);
        Batch bt = lsk::general_batch(n, rng);
        lsk::add_rhs(bt, n, nrhs, rng);
        // Passes of 5 columns: B's NaN in a later pass must still reach the earlier stores.
        run_batch(rep, {ML_OP_SOLVE, n, n, nrhs, flags}, bt, options(8, n, 5), "");
        // One pass of n columns (several when nrhs > n).
        run_batch(rep, {ML_OP_SOLVE, n, n, nrhs, flags}, bt, fast(options(8, n, 5), n), "fast");
        run_batch(rep, {ML_OP_SOLVE, n, n, nrhs, flags}, bt, laned(options(8, n, 5), n),
                  "lane trsm");
      }
  // 150 interchanges on B in blocks of 64, forward (A X = B) and in reverse (X A = B).
  for (int flags : {0, int(ML_LS_RIGHT)}) {
    kt::Timer t("blocked solve interchanges", 150, 3, 0);
    Batch bt = lsk::general_batch(150, rng);
    lsk::add_rhs(bt, 150, 3, rng);
    run_batch(rep, {ML_OP_SOLVE, 150, 150, 3, flags}, bt, fast(options(64, 150, 2), 150, 32),
              "fast");
    ml::blocked::Options o = fast(options(16, 150, 2), 150, 12);
    o.ls_lu_nb = 70;
    run_batch(rep, {ML_OP_SOLVE, 150, 150, 3, flags}, bt, o, "fast lu_nb 70");
    o.ls_gemm_nb = 24;  // the GEMM-rich blocks wider than ls_nb: 7 blocks, uneven halves
    run_batch(rep, {ML_OP_SOLVE, 150, 150, 3, flags}, bt, o, "fast lu_nb 70 gemm_nb 24");
    o.ls_lu_leaf = 1;
    o.ls_lu_lookahead = 1;
    run_batch(rep, {ML_OP_SOLVE, 150, 150, 3, flags}, bt, o, "leaf lookahead lu_nb 70 gemm_nb 24");
  }
  // The batch in chunks of 3 matrices (the workspace bound): every step's first matrix.
  for (int flags : {0, int(ML_LS_RIGHT)}) {
    Batch bt = lsk::general_batch(21, rng);
    lsk::add_rhs(bt, 21, 7, rng);
    ml::blocked::Options o = options(8, 21, 3);
    o.max_workspace_bytes = 3 * 4 * (32 + 21 * 21 + 32 + 21 * 3 + 32);
    run_batch(rep, {ML_OP_SOLVE, 21, 21, 7, flags}, bt, o, "chunks3");
    ml::blocked::Options f = fast(options(8, 21, 3), 21);
    f.max_workspace_bytes = 3 * 4 * (32 + 21 * 21 + 32 + 21 * 21 + 32);
    run_batch(rep, {ML_OP_SOLVE, 21, 21, 7, flags}, bt, f, "chunks3 fast");
  }
  print_forms();
}

void suite_inv(kt::Report &rep) {
  std::mt19937_64 rng(24);
  for (int n : kSizes) {
    kt::Timer t("blocked inv", n, n, 0);
    const Batch bt = lsk::general_batch(n, rng);
    run_batch(rep, {ML_OP_INV, n, n, n, 0}, bt, options(8, n, 6), "");
    run_batch(rep, {ML_OP_INV, n, n, n, 0}, bt, fast(options(8, n, 6), n), "fast");
    run_batch(rep, {ML_OP_INV, n, n, n, 0}, bt, laned(options(8, n, 6), n), "lane trsm");
  }
  {
    kt::Timer t("blocked inv gemm_nb", 100, 100, 0);
    const Batch bt = lsk::general_batch(100, rng);
    ml::blocked::Options o = fast(options(8, 100, 6), 100);
    o.ls_gemm_nb = 12;
    run_batch(rep, {ML_OP_INV, 100, 100, 100, 0}, bt, o, "fast gemm_nb 12");
  }
  print_forms();
}

void suite_triangular(kt::Report &rep) {
  std::mt19937_64 rng(25);
  for (int n : kSizes)
    for (int flags = 0; flags < 8; ++flags)
      for (int nrhs : {1, 13}) {
        if (n > 8 && nrhs == 1 && (flags & 1)) continue;  // fewer cases at the larger n
        kt::Timer t("blocked solve_triangular", n, nrhs, 0);
        Batch bt = lsk::triangular_batch(n, flags, rng);
        lsk::add_rhs(bt, n, nrhs, rng, 1.0);
        run_batch(rep, {ML_OP_SOLVE_TRIANGULAR, n, n, nrhs, flags}, bt, options(8, n, 4), "");
        if (flags % 2 == 0)  // one pass of up to n columns
          run_batch(rep, {ML_OP_SOLVE_TRIANGULAR, n, n, nrhs, flags}, bt, fast(options(8, n, 4), n),
                    "fast");
        else  // the same, the diagonal blocks a vector a lane
          run_batch(rep, {ML_OP_SOLVE_TRIANGULAR, n, n, nrhs, flags}, bt,
                    laned(options(8, n, 4), n), "lane trsm");
      }
  // Every case at n = 100 with GEMM-rich blocks of 16 and 7 (ls_nb 8): 7 and 15 blocks.
  for (int flags = 0; flags < 8; ++flags) {
    kt::Timer t("blocked solve_triangular gemm_nb", 100, 9, 0);
    Batch bt = lsk::triangular_batch(100, flags, rng);
    lsk::add_rhs(bt, 100, 9, rng, 1.0);
    ml::blocked::Options o = fast(options(8, 100, 4), 100);
    o.ls_gemm_nb = flags % 2 ? 7 : 16;
    run_batch(rep, {ML_OP_SOLVE_TRIANGULAR, 100, 100, 9, flags}, bt, o, "fast gemm_nb");
  }
  print_forms();
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_report_suite(argc, argv, "test_blocked_linsys cholesky|lu|solve|inv|triangular",
                              {{"cholesky", suite_cholesky},
                               {"lu", suite_lu},
                               {"solve", suite_solve},
                               {"inv", suite_inv},
                               {"triangular", suite_triangular}});
}
