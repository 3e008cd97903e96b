// Tests of the blocked symmetric eigendecomposition (core/src/blocked_eigh.cpp, step kernels of
// core/kernels/sytrd_blocked.h) through the CPU runner, at reduced sizes with small panels and
// groups so that panel and tile boundaries fall inside the matrices.
// Suites:
//   sytrd  the tridiagonalisation and the back-transformation on their own: on the symmetric
//          families (both triangles, non-finite matrices in the batch), with Q formed by the
//          back-transformation of the identity, |A - Q T Q^T| / (n ulp |A|), |I - Q^T Q| /
//          (n ulp), the eigenvalues of T vs those of A in double, Q applied to a random block;
//   eigh   eigh and eigvalsh end to end through ml::blocked::run (needs the tridiagonal
//          eigensolver in the build: fails, saying so, without it);
//   band   the two-stage tridiagonalisation (blocked_eigh2.cpp, core/kernels/sb2st.h) on its
//          own, narrow bands so that several panels and sweeps occur: the band exact (symmetric,
//          zero outside), its eigenvalues and those of the tridiagonal vs those of A in double,
//          with the chase's 1 and 2 tasks per launch and panels past the shared budget;
//   eigvalsh2  eigvalsh end to end by two stages (eigh alongside, still one stage);
//   chase  the chase in one launch (sb_sweeps) against the wavefront launches to the bit (the
//          tridiagonal and the stored reflectors), also with its groups on concurrent threads,
//          its tridiagonal's eigenvalues, and the reflectors applied to the band in double;
//          groups of 32 lanes (the tasks in registers) at bands 8, 16, 32 and below;
//          the chase of each matrix in one group (sb_block, sb2st_block.h) against the
//          wavefronts at 32 lanes to the bit (tridiagonal and reflectors), groups of 1 to 4
//          simdgroups, and eigvalsh by two stages with it.
// Usage: test_blocked_eigh <suite>
#include <cstring>
#include <optional>
#include <thread>

#include "kernel_runner.h"
#include "kernel_test_util.h"
#include "step_runner.h"

#include "../../core/src/blocked_eigh.h"

using kt::Mat;
using kt::Report;

namespace {

// Tighter than eigh's kt::kEigLimit: the blocked path is held to QR's threshold.
constexpr double kLimit = kt::kQrLimit;

std::string where(const char *what, int n, int uplo, const std::string &fam, int idx,
                  const ml::blocked::Options &o) {
  char b[200];
  std::snprintf(b, sizeof b, "%s n%d %s nb%d %s #%d", what, n, uplo == ML_K_LOWER ? "L" : "U",
                o.nb, fam.c_str(), idx);
  return b;
}

struct Worst {
  double resid = 0, orth = 0, eig = 0, apply = 0;
};

// ---- sytrd ----

// The families of the larger cases (the runner's time grows with the batch).
kt::Families some(const kt::Families &all) {
  kt::Families out;
  for (const auto &f : all)
    if (f.first == "gaussian" || f.first == "graded" || f.first == "scale1e37")
      out.push_back(f);
  return out;
}

// threaded: the one-launch panels' groups on concurrent threads.
void sytrd_case(Report &rep, Worst &worst, int n, int uplo, const ml::blocked::Options &o,
                std::mt19937_64 &rng, bool all = true, bool threaded = false, int res_k0 = 0) {
  kt::Families fams = kt::symmetric_families(n, rng, true);
  if (!all) fams = some(fams);
  const kt::EigBatch eb = kt::eig_batch(fams, n, uplo, rng);
  const int batch = int(eb.items.size());
  const ml::blocked::EighLayout L = ml::blocked::eigh_layout(n, true, 0, o);
  kt::CpuStepRunner run;
  if (threaded)
    run.threaded_step = o.trd_tri_rows != 0 ? ml::blocked::kStep_trd_panel_tri
                                            : ml::blocked::kStep_trd_panel;
  // The resident reduction's groups wait on each other both ways: always concurrent threads.
  if (o.trd_res_groups > 0) run.threaded_step = ml::blocked::kStep_trd_res;
  run.ws.assign(size_t(L.per) * batch, std::nanf(""));
  run.a = eb.a.data();
  std::optional<kt::Timer> timer(std::in_place, "sytrd + ormtr", n, n, o.max_group);
  rep.expect(ml::blocked::sytrd(run, 0, batch, uplo, o, L) == ML_OK,
             where("sytrd run", n, uplo, "", 0, o));
  // Q = Q I, and Q B for a random n x k block B in the same region after it (ld n + 1).
  const int k = std::min(n, 5);
  std::vector<Mat> blocks;
  for (int b = 0; b < batch; ++b) {
    float *z = run.ws.data() + size_t(b) * L.per + L.z;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) z[size_t(j) * n + i] = i == j ? 1.f : 0.f;
  }
  const int ldx = n + 1;
  rep.expect(ml::blocked::ormtr(run, 0, batch, o, L, L.z, n, n) == ML_OK,
             where("ormtr run", n, uplo, "", 0, o));
  // The random block goes into the x1/x2-free part: a second pass over Z's region after Q is
  // read out (Z is n x n, the block (n + 1) x k fits when k < n).
  std::vector<std::vector<float>> qs(batch);
  for (int b = 0; b < batch; ++b) {
    const float *z = run.ws.data() + size_t(b) * L.per + L.z;
    qs[b].assign(z, z + size_t(n) * n);
    if (k >= n) continue;
    Mat B = kt::gaussian(rng, n, k);
    blocks.push_back(B);
    float *zb = run.ws.data() + size_t(b) * L.per + L.z;
    for (int j = 0; j < k; ++j)
      for (int i = 0; i < n; ++i) zb[size_t(j) * ldx + i] = float(B(i, j));
  }
  if (k < n)
    rep.expect(ml::blocked::ormtr(run, 0, batch, o, L, L.z, ldx, k) == ML_OK,
               where("ormtr run (block)", n, uplo, "", 0, o));

  timer.reset();
  if (std::getenv("KT_TIMING")) std::printf("  %d launches\n", run.launches);
  if (o.trd_res_groups > 0) {
    // The resident reduction ran (its zeroing launch and itself), after the panels of the
    // columns before res_k0 (nb + 1 trd_update launches each).
    const auto count = [&](int step) { return std::count(run.steps.begin(), run.steps.end(), step); };
    rep.expect(count(ml::blocked::kStep_trd_res) == 2 &&
                   count(ml::blocked::kStep_trd_update) == res_k0 / o.nb * (o.nb + 1),
               where("sytrd trd_res launches", n, uplo, "", 0, o));
  }
  for (int b = 0; b < batch; ++b) {
    const std::string &fam = eb.items[b].first;
    const std::string at = where("sytrd", n, uplo, fam, b, o);
    const float *slice = run.ws.data() + size_t(b) * L.per;
    const float *st = slice + L.stat;
    const float *d = slice + L.d(), *e = slice + L.e();
    if (eb.poison[b]) {
      rep.expect(st[1] == 1.f, at + " non-finite flagged");
      bool zero = true;
      for (int i = 0; i < n; ++i) zero = zero && d[i] == 0.f && (i == n - 1 || e[i] == 0.f);
      rep.expect(zero, at + " zero tridiagonal for a non-finite input");
      continue;
    }
    rep.expect(st[1] == 0.f, at + " finite input");
    bool finite = kt::all_finite(d, n) && kt::all_finite(qs[b].data(), size_t(n) * n);
    for (int i = 0; i + 1 < n; ++i) finite = finite && std::isfinite(e[i]);
    rep.expect(finite, at + " d, e, Q finite");
    if (fam == "tridiag_fill") {
      // Tails of ~1e-20 below the subdiagonal (squares below the float range): still reflected
      // (tau in [1, 2]), through the rescaled sum of squares.
      const float *tau = slice + L.tau();
      bool reflected = true;
      for (int i = 0; i + 2 < n; ++i) reflected = reflected && tau[i] >= 1.f && tau[i] <= 2.f;
      rep.expect(reflected, at + " tiny tails reflected");
    }
    const Mat A = kt::read_symmetric(eb.a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const double s = std::ldexp(1.0, int(st[0]));  // the load scaled by 2^-e
    Mat T(n, n);
    for (int i = 0; i < n; ++i) {
      T(i, i) = d[i] * s;
      if (i + 1 < n) T(i, i + 1) = T(i + 1, i) = e[i] * s;
    }
    // Q from column-major storage.
    Mat Q(n, n);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) Q(i, j) = qs[b][size_t(j) * n + i];
    const double an = kt::norm1(A);
    const double scale = an > 0 ? an * n * kt::kUlp : 1.0;
    Mat R = kt::matmul(kt::matmul(Q, T), kt::transpose(Q));
    for (size_t i = 0; i < R.v.size(); ++i) R.v[i] -= A.v[i];
    const double resid = kt::norm1(R) / scale;
    const double orth = kt::orth_defect(Q) / (n * kt::kUlp);
    rep.ratio(resid, kLimit, at + " |A - Q T Q^T|");
    rep.ratio(orth, kLimit, at + " |I - Q^T Q|");
    worst.resid = std::max(worst.resid, resid);
    worst.orth = std::max(worst.orth, orth);
    const std::vector<double> wa = kt::jacobi_eigenvalues(A), wt = kt::jacobi_eigenvalues(T);
    double err = 0;
    for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(wa[i] - wt[i]));
    rep.ratio(err / scale, kLimit, at + " eigenvalues of T vs A");
    worst.eig = std::max(worst.eig, err / scale);
    if (k < n) {
      // The back-transformation of a block with ld n + 1 and k columns against Q B in double.
      const Mat &B = blocks[size_t(b)];
      const Mat QB = kt::matmul(Q, B);
      const float *zb = slice + L.z;
      double diff = 0, bn = 0;
      for (int j = 0; j < k; ++j) {
        double cd = 0, cb = 0;
        for (int i = 0; i < n; ++i) {
          cd += std::fabs(zb[size_t(j) * ldx + i] - QB(i, j));
          cb += std::fabs(B(i, j));
        }
        diff = std::max(diff, cd);
        bn = std::max(bn, cb);
      }
      const double ap = diff / (bn * n * kt::kUlp);
      rep.ratio(ap, kLimit, at + " ormtr of a block vs Q B");
      worst.apply = std::max(worst.apply, ap);
    }
  }
}

int suite_sytrd() {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(31);
  ml::blocked::Options o = kt::blocked_options(8, 4, 32);
  // Panel boundaries inside the matrix, a last panel of one or two columns, n = 1, 2. Every
  // family up to n 33 (four panels, both triangles between 17 and 33), three at 67 like the
  // larger cases below (the runner's time grows with the batch).
  int uplo = ML_K_LOWER;
  for (int n : {1, 2, 3, 8, 17, 33, 67}) {
    sytrd_case(rep, worst, n, uplo, o, rng, n <= 33);
    uplo = uplo == ML_K_LOWER ? ML_K_UPPER : ML_K_LOWER;
  }
  // The GPU's panel width, bigger groups (several simdgroups per product group), a last panel
  // of one column, columns longer than 128 (the unrolled dot products).
  ml::blocked::Options big = kt::blocked_options(32, 8, 64);
  sytrd_case(rep, worst, 129, ML_K_UPPER, big, rng, false);
  // The column update's rows over 8 slices of the panel with the untiled symv (one simdgroup
  // per output); 4 slices with a tiled symv of 3 outputs per group over two simdgroups.
  ml::blocked::Options sliced = o;
  sliced.trd_rows = 4;
  sliced.trd_symv_per = -1;
  sytrd_case(rep, worst, 67, ML_K_LOWER, sliced, rng, false);
  ml::blocked::Options odd = big;
  odd.trd_rows = 16;
  odd.trd_symv_per = 3;
  sytrd_case(rep, worst, 70, ML_K_UPPER, odd, rng, false);
  // Each panel in one launch (trd_panel): few persistent groups taking every item, the rows
  // sliced, panel boundaries inside the matrix and a last panel of one column.
  ml::blocked::Options fused = o;
  fused.trd_panel_groups = 3;
  for (int n : {2, 17, 67}) sytrd_case(rep, worst, n, ML_K_LOWER, fused, rng, false);
  fused.trd_rows = 8;
  sytrd_case(rep, worst, 33, ML_K_UPPER, fused, rng, false);
  ml::blocked::Options fused_big = big;
  fused_big.trd_rows = 16;
  fused_big.trd_panel_groups = 5;
  sytrd_case(rep, worst, 97, ML_K_LOWER, fused_big, rng, false);
  // The panels' groups on concurrent threads: the tickets and the items-done word under real
  // concurrency (the runner runs groups in turn).
  ml::blocked::Options fused_thr = o;
  fused_thr.trd_panel_groups = 4;
  sytrd_case(rep, worst, 41, ML_K_LOWER, fused_thr, rng, false, true);
  // y from the lower triangle alone (the triangle form): chunks of one block (every column
  // sum over several chunks, row sums from every earlier block), of two blocks with two
  // simdgroups (columns four at a time, a pass and a half), and on concurrent threads.
  ml::blocked::Options tri = fused;
  tri.trd_rows = 4;
  tri.trd_tri_rows = 32;
  for (int n : {2, 33, 67}) sytrd_case(rep, worst, n, n % 2 ? ML_K_LOWER : ML_K_UPPER, tri, rng,
                                        n == 67);
  ml::blocked::Options tri_big = fused_big;
  tri_big.trd_tri_rows = 64;
  sytrd_case(rep, worst, 150, ML_K_UPPER, tri_big, rng, false);
  ml::blocked::Options tri_thr = fused_thr;
  tri_thr.trd_tri_rows = 40;  // rounded up to 64
  sytrd_case(rep, worst, 70, ML_K_LOWER, tri_thr, rng, false, true);
  // The columns resident in the groups' shared memory (trd_res; five matrices: four groups
  // each): every column (n = 2: two groups, more groups than columns late in every matrix), and
  // with a shared budget that leaves the first panels to the steps above (k0 = 24 at n = 67),
  // groups of two simdgroups (a column's dot products over both).
  ml::blocked::Options res = o;
  res.trd_res_groups = 20;
  res.trd_res_max_batch = 8;
  res.trd_res_lanes = 32;
  for (int n : {2, 3, 17, 67}) sytrd_case(rep, worst, n, n % 2 ? ML_K_LOWER : ML_K_UPPER, res,
                                          rng, false);
  // At least 8 columns a group: two groups a matrix at n = 17, four of the five at n = 67.
  ml::blocked::Options res_min = res;
  res_min.trd_res_min_cols = 8;
  for (int n : {17, 67}) sytrd_case(rep, worst, n, ML_K_LOWER, res_min, rng, false);
  ml::blocked::Options res_mixed = res;
  res_mixed.shared_floats = 800;
  sytrd_case(rep, worst, 67, ML_K_LOWER, res_mixed, rng, false, false, 24);
  ml::blocked::Options res_big = big;
  res_big.trd_res_groups = 15;
  res_big.trd_res_max_batch = 8;
  res_big.trd_res_lanes = 64;
  sytrd_case(rep, worst, 50, ML_K_UPPER, res_big, rng, false);
  // The same with the hand-offs as tagged words (two buffers by parity, groups that stop once
  // their columns are eliminated).
  for (ml::blocked::Options t : {res, res_mixed, res_big}) {
    t.trd_res_tagged = 1;
    const bool mixed = t.shared_floats == 800;
    for (int n : mixed ? std::vector<int>{67} : t.trd_res_lanes == 64 ? std::vector<int>{50}
                                                                     : std::vector<int>{2, 3, 17, 67})
      sytrd_case(rep, worst, n, n % 2 ? ML_K_LOWER : ML_K_UPPER, t, rng, false, false,
                 mixed ? 24 : 0);
  }
  // The back-transformation in blocks wider than the panels, of an odd width, and up to the
  // widest (their T in one launch, larft.h's blocks form), and T a panel at a time (no group
  // of lanes enough for the blocks form).
  ml::blocked::Options back = o;
  back.trd_back_nb = 2 * o.nb;
  sytrd_case(rep, worst, 37, ML_K_LOWER, back, rng, false);
  back.trd_back_nb = 5;
  sytrd_case(rep, worst, 23, ML_K_UPPER, back, rng, false);
  ml::blocked::Options back_big = big;
  back_big.max_group = 256;
  back_big.trd_back_nb = 64;
  sytrd_case(rep, worst, 150, ML_K_LOWER, back_big, rng, false);
  // Slices of 256 lanes sharing each block's rows (four, then two where shared memory is short).
  back_big.max_group = 1024;
  sytrd_case(rep, worst, 300, ML_K_UPPER, back_big, rng, false);
  back_big.shared_floats = 8192 + 64 + 128 * 64;
  sytrd_case(rep, worst, 150, ML_K_LOWER, back_big, rng, false);
  ml::blocked::Options panel_t = o;  // 32 lanes: 2 x 16 tiles of G, not 16 x 16
  panel_t.trd_back_nb = 64;
  sytrd_case(rep, worst, 70, ML_K_LOWER, panel_t, rng, false);
  // More rows than eight words a lane: the batched polls' later rounds (ml_poll_tagged_into).
  ml::blocked::Options res_tall = res;
  res_tall.trd_res_tagged = 1;
  res_tall.trd_res_groups = 50;  // ten groups a matrix: 30 columns of 300 rows each
  res_tall.shared_floats = 16384;
  sytrd_case(rep, worst, 300, ML_K_LOWER, res_tall, rng, false);
  std::printf("sytrd: %d checks, %d failures; worst |A-QTQ^T| %.3g, |I-Q^TQ| %.3g, eig %.3g, "
              "QB %.3g (limit %g)\n",
              rep.checks, rep.failures, worst.resid, worst.orth, worst.eig, worst.apply, kLimit);
  return rep.failures ? 1 : 0;
}

// ---- eigh (end to end) ----

void eigh_case(Report &rep, Worst &worst, int n, int uplo, const ml::blocked::Options &o,
               std::mt19937_64 &rng, bool all = true) {
  kt::Families fams = kt::symmetric_families(n, rng, true);
  if (!all) fams = some(fams);
  const kt::EigBatch eb = kt::eig_batch(fams, n, uplo, rng);
  const int batch = int(eb.items.size());
  std::vector<float> w(size_t(batch) * n, -7.f), v(size_t(batch) * n * n, -7.f),
      w2(size_t(batch) * n, -7.f);
  std::vector<int> info(batch, -1), info2(batch, -1);
  kt::Timer timer("eigh + eigvalsh", n, n, o.max_group);
  {
    ml::Call c{ML_OP_EIGH, batch, n, n, uplo, eb.a.data(), w.data(), v.data(), nullptr,
               info.data()};
    kt::CpuStepRunner run;
    if (o.trd_res_groups > 0) run.threaded_step = ml::blocked::kStep_trd_res;
    rep.expect(run.run(c, uplo, o) == ML_OK, where("eigh run", n, uplo, "", 0, o));
  }
  {
    ml::Call c{ML_OP_EIGVALSH, batch, n, n, uplo, eb.a.data(), w2.data(), nullptr, nullptr,
               info2.data()};
    kt::CpuStepRunner run;
    if (o.trd_res_groups > 0) run.threaded_step = ml::blocked::kStep_trd_res;
    rep.expect(run.run(c, uplo, o) == ML_OK, where("eigvalsh run", n, uplo, "", 0, o));
  }
  for (int b = 0; b < batch; ++b) {
    const std::string &fam = eb.items[b].first;
    const std::string at = where("eigh", n, uplo, fam, b, o);
    const float *wb = w.data() + size_t(b) * n, *vb = v.data() + size_t(b) * n * n;
    const float *w2b = w2.data() + size_t(b) * n;
    if (eb.poison[b]) {
      rep.expect(kt::all_nan(wb, n) && kt::all_nan(vb, size_t(n) * n) && kt::all_nan(w2b, n),
                 at + " all NaN");
      rep.expect(info[b] == ML_INFO_NONFINITE && info2[b] == ML_INFO_NONFINITE,
                 at + " info NONFINITE");
      continue;
    }
    rep.expect(kt::all_finite(wb, n) && kt::all_finite(vb, size_t(n) * n) &&
                   kt::all_finite(w2b, n),
               at + " finite");
    rep.expect(info[b] == 0 && info2[b] == 0, at + " info 0");
    bool sorted = true;
    for (int i = 1; i < n; ++i) sorted = sorted && wb[i - 1] <= wb[i] && w2b[i - 1] <= w2b[i];
    rep.expect(sorted, at + " ascending");
    const Mat A = kt::read_symmetric(eb.a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const kt::EigRatios x = kt::check_eig_ratios(rep, at, A, wb, vb, kLimit);
    worst.resid = std::max(worst.resid, x.resid);
    worst.orth = std::max(worst.orth, x.orth);
    const std::vector<double> ref = kt::jacobi_eigenvalues(A);
    double err = 0, err2 = 0;
    for (int i = 0; i < n; ++i) {
      err = std::max(err, std::fabs(wb[i] - ref[i]));
      err2 = std::max(err2, std::fabs(w2b[i] - ref[i]));
    }
    rep.ratio(err / x.scale, kLimit, at + " eigh values vs double");
    rep.ratio(err2 / x.scale, kLimit, at + " eigvalsh values vs double");
    worst.eig = std::max(worst.eig, std::max(err, err2) / x.scale);
  }
}

int suite_eigh() {
  Report rep;
  Worst worst;
  if (!ml::blocked::supported(ML_OP_EIGH) || !ml::blocked::supported(ML_OP_EIGVALSH)) {
    std::printf("FAIL eigh: no blocked eigh / eigvalsh in this build (tridiagonal eigensolver "
                "missing)\n");
    return 1;
  }
  std::mt19937_64 rng(37);
  ml::blocked::Options o = kt::blocked_options(8, 4, 32);
  int uplo = ML_K_UPPER;
  for (int n : {1, 2, 5, 17, 40}) {
    eigh_case(rep, worst, n, uplo, o, rng);
    uplo = uplo == ML_K_LOWER ? ML_K_UPPER : ML_K_LOWER;
  }
  ml::blocked::Options big = kt::blocked_options(32, 8, 64);
  eigh_case(rep, worst, 67, ML_K_LOWER, big, rng, false);
  ml::blocked::Options wide = big;  // back-transformation blocks of 64 reflectors
  wide.max_group = 256;
  wide.trd_back_nb = 64;
  eigh_case(rep, worst, 100, ML_K_UPPER, wide, rng, false);
  // Divide and conquer (from 256 rows) with its own roots as the values, no bisection.
  ml::blocked::Options dcv = big;
  dcv.dc_values = 1;
  eigh_case(rep, worst, 300, ML_K_LOWER, dcv, rng, false);
  // A workspace bound that forces one matrix per chunk.
  ml::blocked::Options chunked = o;
  chunked.max_workspace_bytes = 1;
  eigh_case(rep, worst, 20, ML_K_UPPER, chunked, rng, false);
  // The tridiagonalisation's columns resident in shared memory (trd_res), one matrix per chunk
  // (so four groups each, on concurrent threads).
  ml::blocked::Options res = chunked;
  res.trd_res_groups = 4;
  res.trd_res_max_batch = 1;
  eigh_case(rep, worst, 37, ML_K_LOWER, res, rng, false);
  res.trd_res_tagged = 1;
  eigh_case(rep, worst, 37, ML_K_UPPER, res, rng, false);
  // Each panel in one launch with y from the lower triangle, chunks longer than the columns
  // (one chunk of 96 rows at n = 90).
  ml::blocked::Options tri = big;
  tri.trd_panel_groups = 6;
  tri.trd_tri_rows = 1024;
  eigh_case(rep, worst, 90, ML_K_LOWER, tri, rng, false);
  std::printf("eigh: %d checks, %d failures; worst |A-VWV^T| %.3g, |I-V^TV| %.3g, values %.3g "
              "(limit %g)\n",
              rep.checks, rep.failures, worst.resid, worst.orth, worst.eig, kLimit);
  return rep.failures ? 1 : 0;
}

// ---- two stages ----

// The families above and the ones that stress a band reduction: A^T A of a random A (a
// clustered low end), glued Wilkinson matrices (pairs closer than ulp), band matrices of
// half-width 3 and bw, bw + 1 (already banded: tiny or empty panels).
kt::Families band_families(int n, int bw, std::mt19937_64 &rng, bool all = true) {
  kt::Families out = kt::symmetric_families(n, rng, true);
  const Mat g = kt::gaussian(rng, n, n);
  out.push_back({"ata", kt::matmul(kt::transpose(g), g)});
  Mat glued(n, n);
  const int w = 7;  // blocks W_7^+ glued by 1e-6
  for (int i = 0; i < n; ++i) {
    glued(i, i) = std::fabs((i % w) - (w - 1) / 2.0);
    if (i + 1 < n) glued(i, i + 1) = glued(i + 1, i) = (i % w == w - 1) ? 1e-6 : 1.0;
  }
  out.push_back({"glued_wilkinson", glued});
  for (int h : {3, bw, bw + 1}) {
    Mat band(n, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j <= i && i - j <= h; ++j)
        band(i, j) = band(j, i) = std::normal_distribution<>()(rng);
    out.push_back({"band" + std::to_string(h), band});
  }
  if (all) return out;
  // The larger cases (the runner's time grows with the batch): the hard ones.
  kt::Families some;
  for (const auto &f : out)
    for (const char *k : {"graded", "clustered", "rankdef", "ata", "glued_wilkinson",
                          "scale1e-30", "scale1e37"})
      if (f.first == k || f.first == "band" + std::to_string(bw + 1)) {
        some.push_back(f);
        break;
      }
  return some;
}

std::string where2(const char *what, int n, int uplo, const std::string &fam, int idx,
                   const ml::blocked::Options &o) {
  char b[200];
  std::snprintf(b, sizeof b, "%s n%d %s bw%d K%d sh%d %s #%d", what, n,
                uplo == ML_K_LOWER ? "L" : "U", o.eigh_band, o.eigh_chase_tasks, o.shared_floats,
                fam.c_str(), idx);
  return b;
}

void band_case(Report &rep, Worst &worst, int n, int uplo, const ml::blocked::Options &o,
               std::mt19937_64 &rng, bool all = true) {
  const kt::Families fams = band_families(n, o.eigh_band, rng, all);
  const kt::EigBatch eb = kt::eig_batch(fams, n, uplo, rng);
  const int batch = int(eb.items.size());
  const ml::blocked::BandLayout L = ml::blocked::band_layout(n, batch, 0, o);
  const int bw = L.bw;
  kt::CpuStepRunner run;
  run.ws.assign(size_t(L.per) * batch, std::nanf(""));
  run.a = eb.a.data();
  kt::Timer timer("sy2sb + sb2st", n, n, o.max_group);
  rep.expect(ml::blocked::sy2sb(run, 0, batch, uplo, o, L) == ML_OK,
             where2("sy2sb run", n, uplo, "", 0, o));
  std::vector<std::vector<float>> bands(batch);
  for (int b = 0; b < batch; ++b) {
    const float *a = run.ws.data() + size_t(b) * L.per + L.a;
    bands[b].assign(a, a + size_t(n) * n);
  }
  rep.expect(ml::blocked::sb2st(run, 0, batch, o, L) == ML_OK,
             where2("sb2st run", n, uplo, "", 0, o));
  for (int b = 0; b < batch; ++b) {
    const std::string &fam = eb.items[b].first;
    const std::string at = where2("band", n, uplo, fam, b, o);
    const float *slice = run.ws.data() + size_t(b) * L.per;
    const float *st = slice + L.stat, *d = slice + L.d, *e = slice + L.e;
    if (eb.poison[b]) {
      rep.expect(st[1] == 1.f, at + " non-finite flagged");
      continue;
    }
    // The band: symmetric and zero outside it up to 3 bw below the diagonal (what the chase
    // reads), finite everywhere.
    const std::vector<float> &B = bands[b];
    bool exact = kt::all_finite(B.data(), B.size());
    for (int j = 0; j < n; ++j)
      for (int i = j; i < std::min(n, j + 3 * bw + 1); ++i) {
        const float x = B[size_t(j) * n + i];
        exact = exact && x == B[size_t(i) * n + j] && (i - j <= bw || x == 0.f);
      }
    rep.expect(exact, at + " band symmetric, zero outside");
    bool finite = kt::all_finite(d, n);
    for (int i = 0; i + 1 < n; ++i) finite = finite && std::isfinite(e[i]);
    rep.expect(finite, at + " d, e finite");
    const Mat A = kt::read_symmetric(eb.a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const double s = std::ldexp(1.0, int(st[0]));  // the load scaled by 2^-e
    Mat Bm(n, n), T(n, n);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) Bm(i, j) = std::abs(i - j) <= bw ? B[size_t(j) * n + i] * s : 0;
    for (int i = 0; i < n; ++i) {
      T(i, i) = d[i] * s;
      if (i + 1 < n) T(i, i + 1) = T(i + 1, i) = e[i] * s;
    }
    const double an = kt::norm1(A);
    const double scale = an > 0 ? an * n * kt::kUlp : 1.0;
    const std::vector<double> wa = kt::jacobi_eigenvalues(A), wb = kt::jacobi_eigenvalues(Bm),
                              wt = kt::jacobi_eigenvalues(T);
    double eb_ = 0, et = 0;
    for (int i = 0; i < n; ++i) {
      eb_ = std::max(eb_, std::fabs(wa[i] - wb[i]));
      et = std::max(et, std::fabs(wa[i] - wt[i]));
    }
    rep.ratio(eb_ / scale, kLimit, at + " eigenvalues of the band vs A");
    rep.ratio(et / scale, kLimit, at + " eigenvalues of T vs A");
    worst.resid = std::max(worst.resid, eb_ / scale);
    worst.eig = std::max(worst.eig, et / scale);
  }
}

ml::blocked::Options small_two_stage(int bw, int tasks) {
  ml::blocked::Options o = kt::blocked_options(8, 4, 32);
  o.eigh_two_stage_min_n = 1;
  o.eigh_band = bw;
  o.eigh_chase_tasks = tasks;
  return o;
}

int suite_band() {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(41);
  // n below, at and past the band; several panels and sweeps; a last panel of fewer rows than
  // bw; the chase in one launch and by 1 and 2 tasks per launch.
  int uplo = ML_K_LOWER;
  for (int n : {1, 2, 3, 5, 6, 13}) {
    band_case(rep, worst, n, uplo, small_two_stage(4, n % 3), rng);
    uplo = uplo == ML_K_LOWER ? ML_K_UPPER : ML_K_LOWER;
  }
  band_case(rep, worst, 30, ML_K_UPPER, small_two_stage(4, 2), rng, false);
  band_case(rep, worst, 17, ML_K_UPPER, small_two_stage(2, 1), rng, false);
  band_case(rep, worst, 33, ML_K_LOWER, small_two_stage(3, 0), rng, false);
  // Panels whose rows do not fit the shared budget (two-level QR panels through larft).
  ml::blocked::Options narrow = small_two_stage(8, 2);
  narrow.shared_floats = 400;
  band_case(rep, worst, 37, ML_K_UPPER, narrow, rng, false);
  // Wider band and groups, as on a GPU (several simdgroups in the chase's groups).
  ml::blocked::Options wide = small_two_stage(16, 1);
  wide.max_group = 64;
  wide.eigh_chase_lanes = 64;
  band_case(rep, worst, 40, ML_K_LOWER, wide, rng, false);
  std::printf("band: %d checks, %d failures; worst band eigenvalues %.3g, tridiagonal's %.3g "
              "(limit %g)\n",
              rep.checks, rep.failures, worst.resid, worst.eig, kLimit);
  return rep.failures ? 1 : 0;
}

// ---- chase ----

// A batch of symmetric bands of half-width bw in L.a (both triangles, zero outside up to 3 bw
// below the diagonal, as sy2sb leaves them), sb_sweeps' progress words and ticket zeroed:
// gaussian, graded (entries scaled down to 2^-20 along the diagonal), one non-finite if nan >= 0.
std::vector<float> band_ws(const ml::blocked::BandLayout &L, int batch, int nan,
                           std::mt19937_64 &rng) {
  std::vector<float> ws(size_t(L.per) * batch, std::nanf(""));
  kt::fill_bands(ws, L, batch, nan, rng);
  return ws;
}

// sb_sweeps with `groups` groups of one lane, each on a thread of its own, all at once: the
// tickets and progress words under real concurrency (the runner runs groups in turn).
void sweeps_threaded(std::vector<float> &ws, const ml::blocked::BandLayout &L, int batch,
                     int groups) {
  ml_step_params p{};
  p.n = L.n;
  p.i[1] = L.bw;
  p.i[2] = batch;
  p.off[0] = L.a;
  p.ld[0] = L.n;
  p.off[1] = L.tau;
  p.off[2] = L.qstat;
  p.off[3] = L.v2;
  for (int i = 0; i < 4; ++i) p.stride[i] = L.per;
  p.batch = batch;
  p.groups = groups;
  std::vector<std::thread> threads;
  for (int g = 0; g < groups; ++g)
    threads.emplace_back([&, g] {
      std::vector<float> scratch(size_t(ml_sb_chase_shared_floats(L.bw) + 1), std::nanf(""));
      const ml_ctx ctx{0, 1, g, scratch.data(), nullptr, nullptr};
      ml_step_sb_sweeps(ctx, p, ws.data(), nullptr, nullptr, nullptr, nullptr, nullptr);
    });
  for (auto &t : threads) t.join();
}

// The tridiagonal (d, then e) the chase left in L.a of matrix b.
std::vector<float> tridiag_of(const std::vector<float> &ws, const ml::blocked::BandLayout &L,
                              int b) {
  const float *a = ws.data() + size_t(b) * L.per + L.a;
  std::vector<float> t;
  for (int i = 0; i < L.n; ++i) t.push_back(a[size_t(i) * L.n + i]);
  for (int i = 0; i + 1 < L.n; ++i) t.push_back(a[size_t(i) * L.n + i + 1]);
  return t;
}

bool same_bits(const std::vector<float> &x, const std::vector<float> &y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The reflector store (L.v2) of matrix b.
std::vector<float> reflectors_of(const std::vector<float> &ws, const ml::blocked::BandLayout &L,
                                 int b) {
  const float *v = ws.data() + size_t(b) * L.per + L.v2;
  return std::vector<float>(v, v + ml_sb_v2_floats(L.n, L.bw));
}

// max |H_N .. H_1 B H_1 .. H_N - T| in double, the stored reflectors applied as the chase did
// (sweeps in order, a sweep's tasks in order, each to the rows r0 + [0, m) it names).
double reflectors_residual(const Mat &B, const Mat &T, const std::vector<float> &v2, int bw) {
  const int n = B.r;
  Mat A = B;
  for (int s = 0; s + 3 <= n; ++s)
    for (int t = 0; t < ml_sb_tasks(n, bw, s); ++t) {
      const int r0 = s + 1 + t * bw, m = std::min(bw, n - r0);
      const float *q = v2.data() + ml_sb_v2_slot(n, bw, s, t);
      const double tau = q[bw];
      if (tau == 0.0) continue;
      for (int side = 0; side < 2; ++side)
        for (int k = 0; k < n; ++k) {  // rows (side 0) then columns (side 1) of A
          double w = 0;
          for (int j = 0; j < m; ++j) w += q[j] * (side ? A(k, r0 + j) : A(r0 + j, k));
          w *= tau;
          for (int j = 0; j < m; ++j) (side ? A(k, r0 + j) : A(r0 + j, k)) -= w * q[j];
        }
    }
  double err = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(A(i, j) - T(i, j)));
  return err;
}

// One batch of bands: the one-launch chase (the runner: groups in turn, `lanes` lanes) against
// the wavefront launches (K = 1) to the bit, the same with one-lane groups on concurrent
// threads, and the tridiagonal's eigenvalues against the band's in double.
void chase_case(Report &rep, Worst &worst, int n, int bw, int batch, int lanes, int nan,
                std::mt19937_64 &rng) {
  kt::Timer timer("chase bw" , n, bw, lanes);
  ml::blocked::Options o = small_two_stage(bw, 0);
  o.max_group = lanes;
  o.eigh_chase_lanes = lanes;
  ml::blocked::BandLayout L = ml::blocked::band_layout(n, batch, 0, o);
  L.v2 = L.per;  // the reflectors after the slice
  L.per += std::max<int64_t>(1, ml_sb_v2_floats(n, bw));
  char buf[120];
  std::snprintf(buf, sizeof buf, "chase n%d bw%d batch%d lanes%d%s", n, bw, batch, lanes,
                ml_sb_fast(lanes, bw) ? " (registers)" : "");
  const std::string at = buf;
  const std::vector<float> ws0 = band_ws(L, batch, nan, rng);
  kt::CpuStepRunner one, wave, wave1, thr_g;
  one.ws = ws0;
  wave.ws = ws0;
  wave1.ws = ws0;
  thr_g.ws = ws0;
  rep.expect(ml::blocked::sb2st(one, 0, batch, o, L) == ML_OK, at + " run");
  rep.expect(one.launches == (n >= 3 ? 2 : 1), at + " one chase launch");
  // The one-launch chase's groups of `lanes` lanes, all at once on threads of their own.
  thr_g.threaded_step = ml::blocked::kStep_sb_sweeps;
  rep.expect(ml::blocked::sb2st(thr_g, 0, batch, o, L) == ML_OK, at + " threaded groups run");
  ml::blocked::Options ow = o;
  ow.eigh_chase_tasks = 1;
  rep.expect(ml::blocked::sb2st(wave, 0, batch, ow, L) == ML_OK, at + " wavefronts run");
  ow.max_group = 1;
  rep.expect(ml::blocked::sb2st(wave1, 0, batch, ow, L) == ML_OK, at + " one-lane wavefronts");
  std::vector<float> thr = ws0;
  if (n >= 3) sweeps_threaded(thr, L, batch, 5);
  for (int b = 0; b < batch; ++b) {
    const std::string ab = at + " #" + std::to_string(b);
    const std::vector<float> t = tridiag_of(one.ws, L, b);
    rep.expect(same_bits(t, tridiag_of(wave.ws, L, b)), ab + " = wavefronts, to the bit");
    rep.expect(same_bits(reflectors_of(one.ws, L, b), reflectors_of(wave.ws, L, b)),
               ab + " reflectors = wavefronts', to the bit");
    rep.expect(same_bits(t, tridiag_of(thr_g.ws, L, b)) &&
                   same_bits(reflectors_of(thr_g.ws, L, b), reflectors_of(wave.ws, L, b)),
               ab + " threaded groups = wavefronts, to the bit (reflectors too)");
    rep.expect(same_bits(tridiag_of(thr, L, b), tridiag_of(wave1.ws, L, b)) &&
                   same_bits(reflectors_of(thr, L, b), reflectors_of(wave1.ws, L, b)),
               ab + " threaded one-lane groups = one-lane wavefronts, to the bit");
    if (b == nan) {
      rep.expect(!kt::all_finite(t.data(), t.size()), ab + " non-finite stays non-finite");
      continue;
    }
    rep.expect(kt::all_finite(t.data(), t.size()), ab + " finite");
    const float *a0 = ws0.data() + size_t(b) * L.per + L.a;
    Mat B(n, n), T(n, n);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) B(i, j) = a0[size_t(j) * n + i];
    for (int i = 0; i < n; ++i) {
      T(i, i) = t[i];
      if (i + 1 < n) T(i, i + 1) = T(i + 1, i) = t[n + i];
    }
    const double an = kt::norm1(B), scale = an > 0 ? an * n * kt::kUlp : 1.0;
    const std::vector<double> wb = kt::jacobi_eigenvalues(B), wt = kt::jacobi_eigenvalues(T);
    double err = 0;
    for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(wb[i] - wt[i]));
    rep.ratio(err / scale, kLimit, ab + " eigenvalues of T vs the band");
    worst.eig = std::max(worst.eig, err / scale);
    // The stored reflectors take the band to T: the contract of the back-transformation.
    const double res = reflectors_residual(B, T, reflectors_of(one.ws, L, b), bw) / scale;
    rep.ratio(res, kLimit, ab + " H_N .. H_1 B H_1 .. H_N = T");
    worst.resid = std::max(worst.resid, res);
  }
}

// Equal bits, a NaN matching any NaN (its sign and payload depend on the order the compiler
// gives a commutative operation's operands: the instantiations may differ).
bool same_bits_or_nan(const std::vector<float> &x, const std::vector<float> &y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0 && !(std::isnan(x[i]) && std::isnan(y[i])))
      return false;
  return true;
}

// One batch of bands: the chase of each matrix in one group of `lanes` lanes (sb_block) against
// the wavefront launches at 32 lanes (the same tasks in registers) to the bit, the tridiagonal
// and the stored reflectors, also with the batch's groups on concurrent threads.
void block_case(Report &rep, int n, int bw, int batch, int lanes, int nan, std::mt19937_64 &rng) {
  kt::Timer timer("block chase bw", n, bw, lanes);
  ml::blocked::Options o = small_two_stage(bw, 1);
  o.max_group = 32;
  o.eigh_chase_lanes = 32;
  ml::blocked::BandLayout L = ml::blocked::band_layout(n, batch, 0, o);
  L.v2 = L.per;
  L.per += std::max<int64_t>(1, ml_sb_v2_floats(n, bw));
  char buf[120];
  std::snprintf(buf, sizeof buf, "block chase n%d bw%d batch%d lanes%d", n, bw, batch, lanes);
  const std::string at = buf;
  const std::vector<float> ws0 = band_ws(L, batch, nan, rng);
  kt::CpuStepRunner wave, blk, thr;
  wave.ws = blk.ws = thr.ws = ws0;
  rep.expect(ml::blocked::sb2st(wave, 0, batch, o, L) == ML_OK, at + " wavefronts run");
  ml::blocked::Options ob = o;
  ob.eigh_chase_tasks = 0;
  ob.eigh_chase_block = lanes;
  ob.max_group = lanes;
  rep.expect(ml::blocked::sb2st(blk, 0, batch, ob, L) == ML_OK, at + " run");
  const int want = lanes > 512 ? ml::blocked::kStep_sb_block_wide : ml::blocked::kStep_sb_block;
  rep.expect(n < 3 || (blk.steps.size() == 2 && blk.steps[0] == want),
             at + " one sb_block launch, then sb_extract");
  thr.threaded_step = want;
  rep.expect(ml::blocked::sb2st(thr, 0, batch, ob, L) == ML_OK, at + " threaded groups run");
  for (int b = 0; b < batch; ++b) {
    const std::string ab = at + " #" + std::to_string(b);
    const std::vector<float> t = tridiag_of(blk.ws, L, b), tw = tridiag_of(wave.ws, L, b);
    const std::vector<float> rw = reflectors_of(wave.ws, L, b);
    // To the bit; in the non-finite matrix, NaN for NaN.
    const auto same = b == nan ? same_bits_or_nan : same_bits;
    rep.expect(same(t, tw) && same(reflectors_of(blk.ws, L, b), rw),
               ab + " = wavefronts, to the bit (reflectors too)");
    rep.expect(same(tridiag_of(thr.ws, L, b), tw) && same(reflectors_of(thr.ws, L, b), rw),
               ab + " threaded groups = wavefronts, to the bit (reflectors too)");
    if (b == nan)
      rep.expect(!kt::all_finite(t.data(), t.size()), ab + " non-finite stays non-finite");
    else
      rep.expect(kt::all_finite(t.data(), t.size()), ab + " finite");
  }
  // Off past what it can run: bands wider than 32 take sb_sweeps.
  if (bw == 2 && n == 37) {
    ml::blocked::Options wide = ob;
    wide.eigh_band = 40;
    ml::blocked::BandLayout LW = ml::blocked::band_layout(n, 1, 0, wide);
    kt::CpuStepRunner w;
    w.ws = band_ws(LW, 1, -1, rng);
    rep.expect(ml::blocked::sb2st(w, 0, 1, wide, LW) == ML_OK &&
                   w.steps[0] == ml::blocked::kStep_sb_sweeps,
               at + " bw 40: sb_sweeps");
  }
}

int suite_chase() {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(47);
  // Tiny n, n < 3 bw, n not a multiple of bw, batches with a non-finite matrix, groups of one
  // and of several simdgroups.
  chase_case(rep, worst, 2, 4, 1, 32, -1, rng);
  chase_case(rep, worst, 3, 2, 2, 32, -1, rng);
  chase_case(rep, worst, 10, 4, 3, 32, 1, rng);
  chase_case(rep, worst, 29, 4, 4, 32, 2, rng);
  chase_case(rep, worst, 37, 3, 2, 16, -1, rng);
  chase_case(rep, worst, 40, 16, 2, 64, 0, rng);
  chase_case(rep, worst, 45, 8, 3, 32, -1, rng);
  chase_case(rep, worst, 64, 16, 1, 64, -1, rng);
  // The tasks in registers (one simdgroup) at the bands a GPU runs, 8, 16 and 32, and below
  // them; a non-finite matrix in a batch; n past several sweeps' tasks and not a multiple of bw.
  chase_case(rep, worst, 53, 8, 3, 32, 1, rng);
  chase_case(rep, worst, 70, 16, 2, 32, 0, rng);
  chase_case(rep, worst, 101, 32, 2, 32, 1, rng);
  chase_case(rep, worst, 34, 32, 1, 32, -1, rng);
  chase_case(rep, worst, 31, 13, 1, 32, -1, rng);
  // The chase of each matrix in one group: a NaN matrix in the middle of each batch, groups of
  // 1, 2 and 4 simdgroups in turn; n past several rings of progress words (n 130 at bw 2: 128
  // sweeps over a ring of 2 G words; n 37 at bw 16 in 4 simdgroups: 35 sweeps over 8 words).
  // At n 130 the bands 8 and 16 run in 1 and 2 simdgroups (4 are the slowest in the
  // thread-per-lane runner, and take the same path at n 37), the NaN matrix at bands 2 and 8.
  int k = 0;
  for (int n : {3, 4, 37})
    for (int bw : {2, 8, 16}) block_case(rep, n, bw, 3, 32 << (k++ % 3), 1, rng);
  block_case(rep, 130, 2, 3, 32, 1, rng);
  block_case(rep, 130, 8, 2, 64, 1, rng);
  block_case(rep, 130, 8, 2, 32, -1, rng);
  block_case(rep, 130, 16, 1, 64, -1, rng);
  block_case(rep, 37, 16, 1, 128, -1, rng);
  std::printf("chase: %d checks, %d failures; worst eigenvalues %.3g, reflectors' residual %.3g "
              "(limit %g)\n", rep.checks, rep.failures, worst.eig, worst.resid, kLimit);
  return rep.failures ? 1 : 0;
}

void eigvalsh2_case(Report &rep, Worst &worst, int n, int uplo, const ml::blocked::Options &o,
                    std::mt19937_64 &rng, bool all = true) {
  const kt::Families fams = band_families(n, o.eigh_band, rng, all);
  const kt::EigBatch eb = kt::eig_batch(fams, n, uplo, rng);
  const int batch = int(eb.items.size());
  std::vector<float> w(size_t(batch) * n, -7.f), v(size_t(batch) * n * n, -7.f),
      w1(size_t(batch) * n, -7.f);
  std::vector<int> info(batch, -1), info1(batch, -1);
  kt::Timer timer("eigvalsh2 + eigh", n, n, o.max_group);
  const ml::Call c{ML_OP_EIGVALSH, batch, n, n, uplo, eb.a.data(), w.data(), nullptr, nullptr,
                   info.data()};
  const ml::Call ce{ML_OP_EIGH, batch, n, n, uplo, eb.a.data(), w1.data(), v.data(), nullptr,
                    info1.data()};
  rep.expect(ml::blocked::eigh_two_stage(c, o) && !ml::blocked::eigh_two_stage(ce, o),
             where2("two stages for eigvalsh only", n, uplo, "", 0, o));
  {
    kt::CpuStepRunner run;
    rep.expect(run.run(c, uplo, o) == ML_OK, where2("eigvalsh run", n, uplo, "", 0, o));
  }
  {
    kt::CpuStepRunner run;
    rep.expect(run.run(ce, uplo, o) == ML_OK, where2("eigh run", n, uplo, "", 0, o));
  }
  for (int b = 0; b < batch; ++b) {
    const std::string &fam = eb.items[b].first;
    const std::string at = where2("eigvalsh2", n, uplo, fam, b, o);
    const float *wb = w.data() + size_t(b) * n, *w1b = w1.data() + size_t(b) * n;
    if (eb.poison[b]) {
      rep.expect(kt::all_nan(wb, n) && kt::all_nan(w1b, n), at + " all NaN");
      rep.expect(info[b] == ML_INFO_NONFINITE, at + " info NONFINITE");
      continue;
    }
    rep.expect(kt::all_finite(wb, n), at + " finite");
    rep.expect(info[b] == 0 && info1[b] == 0, at + " info 0");
    bool sorted = true;
    for (int i = 1; i < n; ++i) sorted = sorted && wb[i - 1] <= wb[i];
    rep.expect(sorted, at + " ascending");
    const Mat A = kt::read_symmetric(eb.a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const kt::EigRatios x =
        kt::check_eig_ratios(rep, at + " eigh", A, w1b, v.data() + size_t(b) * n * n, kLimit);
    const double err = kt::max_abs_diff(wb, kt::jacobi_eigenvalues(A), n);
    rep.ratio(err / x.scale, kLimit, at + " values vs double");
    worst.eig = std::max(worst.eig, err / x.scale);
  }
}

int suite_eigvalsh2() {
  Report rep;
  Worst worst;
  if (!ml::blocked::supported(ML_OP_EIGVALSH)) {
    std::printf("FAIL eigvalsh2: no blocked eigvalsh in this build\n");
    return 1;
  }
  std::mt19937_64 rng(43);
  eigvalsh2_case(rep, worst, 4, ML_K_UPPER, small_two_stage(4, 1), rng);
  eigvalsh2_case(rep, worst, 21, ML_K_LOWER, small_two_stage(4, 2), rng, false);
  ml::blocked::Options chunked = small_two_stage(3, 0);
  chunked.max_workspace_bytes = 1;  // one matrix per chunk
  eigvalsh2_case(rep, worst, 11, ML_K_UPPER, chunked, rng, false);
  // The chase of each matrix in one group of two simdgroups, on the hard families.
  ml::blocked::Options blk = small_two_stage(8, 0);
  blk.max_group = 64;
  blk.eigh_chase_block = 64;
  eigvalsh2_case(rep, worst, 30, ML_K_LOWER, blk, rng, false);
  // Below the threshold: one stage.
  ml::blocked::Options above = small_two_stage(4, 2);
  above.eigh_two_stage_min_n = 30;
  const ml::Call c{ML_OP_EIGVALSH, 1, 29, 29, ML_K_LOWER, nullptr, nullptr, nullptr, nullptr,
                   nullptr};
  rep.expect(!ml::blocked::eigh_two_stage(c, above), "eigvalsh n29 below min_n 30: one stage");
  // A window of n and a smallest batch (the CUDA backend's routing).
  ml::blocked::Options window = above;
  window.eigh_two_stage_max_n = 40;
  window.eigh_two_stage_min_batch = 8;
  const auto two = [&](int64_t batch, int64_t n) {
    const ml::Call w{ML_OP_EIGVALSH, batch, n, n, ML_K_LOWER, nullptr, nullptr, nullptr, nullptr,
                     nullptr};
    return ml::blocked::eigh_two_stage(w, window);
  };
  rep.expect(two(8, 30) && two(64, 40) && !two(7, 35) && !two(8, 41) && !two(8, 29),
             "eigvalsh two stages for n 30..40 from batch 8 only");
  std::printf("eigvalsh2: %d checks, %d failures; worst values %.3g (limit %g)\n", rep.checks,
              rep.failures, worst.eig, kLimit);
  return rep.failures ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_suite(argc, argv, "test_blocked_eigh sytrd|eigh|band|eigvalsh2|chase",
                       {{"sytrd", suite_sytrd}, {"eigh", suite_eigh}, {"band", suite_band},
                        {"eigvalsh2", suite_eigvalsh2}, {"chase", suite_chase}});
}
