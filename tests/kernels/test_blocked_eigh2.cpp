// Tests of eigh (with eigenvectors) by two stages (core/src/blocked_eigh2.cpp, the chase's
// back-transformation core/kernels/sb2st_back.h) through the CPU runner, at reduced sizes with
// small groups so that block and tile boundaries fall inside the matrices.
// Suites:
//   back   the chase's back-transformation alone: bands chased with the reflectors stored, then
//          Q2 Z by sb_back_t / sb_back against the stored reflectors applied one at a time in
//          double (the last first), for bands 4 / 8 / 16, blocks of k sweeps other than the
//          band, column slices that do not divide Z, a non-finite band in the batch; and with
//          Z = I, B Q2 = Q2 T (the store's order and meaning);
//   eigh2  eigh end to end by two stages: |A - V W V^T| / (n ulp |A|), |I - V^T V| / (n ulp)
//          and the values against double on the hard families, non-finite matrices NaN.
// Usage: test_blocked_eigh2 <suite>
#include <cstring>

#include "kernel_runner.h"
#include "kernel_test_util.h"
#include "step_runner.h"

#include "../../core/src/blocked_eigh.h"

using kt::Mat;
using kt::Report;

namespace {

constexpr double kLimit = kt::kQrLimit;

ml::blocked::Options small_two_stage(int bw, int k, int nc) {
  ml::blocked::Options o = kt::blocked_options(8, 4, 32);
  o.eigh_two_stage_min_n = 1;
  o.eigh_vec_two_stage_min_n = 1;
  o.eigh_band = bw;
  o.eigh_back_sweeps = k;
  o.eigh_back_cols = nc;
  return o;
}

// ---- back ----

// Q2 Z in double from matrix b's reflector store: every task's reflector, the last first.
Mat apply_reference(const std::vector<float> &ws, const ml::blocked::BandLayout &L, int b,
                    Mat Z) {
  const int n = L.n, bw = L.bw;
  const float *v2 = ws.data() + size_t(b) * L.per + L.v2;
  for (int s = n - 3; s >= 0; --s)
    for (int t = ml_sb_tasks(n, bw, s) - 1; t >= 0; --t) {
      const float *v = v2 + ml_sb_v2_slot(n, bw, s, t);
      const int r0 = s + 1 + t * bw, m = std::min(bw, n - r0);
      const double tau = v[bw];
      for (int c = 0; c < Z.c; ++c) {
        double d = 0;
        for (int i = 0; i < m; ++i) d += v[i] * Z(r0 + i, c);
        d *= tau;
        for (int i = 0; i < m; ++i) Z(r0 + i, c) -= d * v[i];
      }
    }
  return Z;
}

void back_case(Report &rep, double &worst, int n, int bw, int k, int nc, int ncols, int batch,
               int nan, std::mt19937_64 &rng) {
  const ml::blocked::Options o = small_two_stage(bw, k, nc);
  const ml::blocked::BandLayout L = ml::blocked::band_layout(n, batch, 0, o, true);
  char buf[160];
  std::snprintf(buf, sizeof buf, "back n%d bw%d k%d nc%d cols%d batch%d", n, bw, L.k2, nc, ncols,
                batch);
  const std::string at = buf;
  kt::CpuStepRunner run;
  run.ws.assign(size_t(L.per) * batch, std::nanf(""));
  kt::fill_bands(run.ws, L, batch, nan, rng);
  std::vector<Mat> bands;
  for (int b = 0; b < batch; ++b) {
    Mat B(n, n);
    const float *a = run.ws.data() + size_t(b) * L.per + L.a;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) B(i, j) = a[size_t(j) * n + i];
    bands.push_back(B);
  }
  kt::Timer timer("sb2st + sb2st_back", n, n, o.max_group);
  rep.expect(ml::blocked::sb2st(run, 0, batch, o, L) == ML_OK, at + " sb2st run");
  // Z: the identity (ncols = n) or a random block, ld n.
  std::vector<Mat> z0;
  for (int b = 0; b < batch; ++b) {
    Mat Z = ncols == n ? kt::identity(n) : kt::gaussian(rng, n, ncols);
    float *z = run.ws.data() + size_t(b) * L.per + L.z;
    for (int j = 0; j < ncols; ++j)
      for (int i = 0; i < n; ++i) z[size_t(j) * n + i] = float(Z(i, j));
    z0.push_back(Z);
  }
  const int before = run.launches;
  rep.expect(ml::blocked::sb2st_back(run, 0, batch, o, L, L.z, n, ncols) == ML_OK,
             at + " sb2st_back run");
  if (n >= 3) {
    const int G = ml_sbb_groups(n, L.k2), T0 = ml_sb_tasks(n, bw, 0);
    rep.expect(run.launches - before == 1 + G + T0 - 1, at + " 1 + G + T0 - 1 launches");
  }
  for (int b = 0; b < batch; ++b) {
    const std::string ab = at + " #" + std::to_string(b);
    const float *z = run.ws.data() + size_t(b) * L.per + L.z;
    if (b == nan) continue;  // its values mean nothing (NaN where the store is)
    Mat got(n, ncols);
    bool finite = true;
    for (int j = 0; j < ncols; ++j)
      for (int i = 0; i < n; ++i) {
        got(i, j) = z[size_t(j) * n + i];
        finite = finite && std::isfinite(z[size_t(j) * n + i]);
      }
    rep.expect(finite, ab + " finite");
    const Mat ref = apply_reference(run.ws, L, b, z0[size_t(b)]);
    Mat d = got;
    for (size_t i = 0; i < d.v.size(); ++i) d.v[i] -= ref.v[i];
    const double zn = kt::norm1(z0[size_t(b)]);
    const double r = kt::norm1(d) / ((zn > 0 ? zn : 1.0) * n * kt::kUlp);
    rep.ratio(r, kLimit, ab + " Q2 Z vs one reflector at a time");
    worst = std::max(worst, r);
    if (ncols == n) {
      // Z = Q2: B Q2 = Q2 T with T the chase's tridiagonal, and Q2 orthogonal.
      const float *d0 = run.ws.data() + size_t(b) * L.per + L.d;
      const float *e0 = run.ws.data() + size_t(b) * L.per + L.e;
      Mat T(n, n);
      for (int i = 0; i < n; ++i) {
        T(i, i) = d0[i];
        if (i + 1 < n) T(i, i + 1) = T(i + 1, i) = e0[i];
      }
      Mat R = kt::matmul(bands[size_t(b)], got);
      const Mat QT = kt::matmul(got, T);
      for (size_t i = 0; i < R.v.size(); ++i) R.v[i] -= QT.v[i];
      const double bn = kt::norm1(bands[size_t(b)]);
      const double rr = kt::norm1(R) / ((bn > 0 ? bn : 1.0) * n * kt::kUlp);
      rep.ratio(rr, kLimit, ab + " |B Q2 - Q2 T|");
      rep.ratio(kt::orth_defect(got) / (n * kt::kUlp), kLimit, ab + " |I - Q2^T Q2|");
      worst = std::max(worst, rr);
    }
  }
}

int suite_back() {
  Report rep;
  double worst = 0;
  std::mt19937_64 rng(53);
  // Bands 4 / 8 / 16, blocks of bw sweeps and of others (k < bw, k > bw), column slices that
  // do not divide Z, the last block of a group short, a non-finite band in the batch.
  back_case(rep, worst, 3, 4, 0, 4, 3, 1, -1, rng);
  back_case(rep, worst, 30, 4, 0, 8, 30, 2, -1, rng);
  back_case(rep, worst, 37, 4, 3, 5, 11, 3, 1, rng);
  back_case(rep, worst, 61, 8, 0, 7, 61, 2, 0, rng);
  back_case(rep, worst, 67, 8, 11, 16, 20, 2, -1, rng);
  back_case(rep, worst, 100, 16, 0, 32, 40, 2, 1, rng);
  back_case(rep, worst, 130, 16, 5, 9, 130, 1, -1, rng);
  std::printf("back: %d checks, %d failures; worst %.3g (limit %g)\n", rep.checks, rep.failures,
              worst, kLimit);
  return rep.failures ? 1 : 0;
}

// ---- eigh2 (end to end) ----

// The symmetric families and the ones that stress a band reduction: A^T A of a random A (a
// clustered low end), band matrices of half-width bw + 1 (short panels). all = false: the
// hard ones only (the runner's time grows with the batch).
kt::Families hard_families(int n, int bw, std::mt19937_64 &rng, bool all) {
  kt::Families out = kt::symmetric_families(n, rng, true);
  const Mat g = kt::gaussian(rng, n, n);
  out.push_back({"ata", kt::matmul(kt::transpose(g), g)});
  Mat band(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i && i - j <= bw + 1; ++j)
      band(i, j) = band(j, i) = std::normal_distribution<>()(rng);
  out.push_back({"band", band});
  if (all) return out;
  kt::Families some;
  for (const auto &f : out)
    for (const char *k : {"clustered", "ata", "graded", "rankdef", "scale1e-30", "scale1e37"})
      if (f.first == k) {
        some.push_back(f);
        break;
      }
  return some;
}

void eigh2_case(Report &rep, double &worst, int n, int uplo, const ml::blocked::Options &o,
                std::mt19937_64 &rng, bool all) {
  const kt::Families fams = hard_families(n, o.eigh_band, rng, all);
  const kt::EigBatch eb = kt::eig_batch(fams, n, uplo, rng);
  const int batch = int(eb.items.size());
  std::vector<float> w(size_t(batch) * n, -7.f), v(size_t(batch) * n * n, -7.f);
  std::vector<int> info(batch, -1);
  char buf[160];
  std::snprintf(buf, sizeof buf, "eigh2 n%d %s bw%d k%d q1 %d chase%d", n,
                uplo == ML_K_LOWER ? "L" : "U", o.eigh_band, o.eigh_back_sweeps, o.eigh_back_q1,
                o.eigh_chase_tasks);
  const std::string at0 = buf;
  kt::Timer timer("eigh2", n, n, o.max_group);
  const ml::Call c{ML_OP_EIGH, batch, n, n, uplo, eb.a.data(), w.data(), v.data(), nullptr,
                   info.data()};
  rep.expect(ml::blocked::eigh_two_stage(c, o), at0 + " routed to two stages");
  {
    kt::CpuStepRunner run;
    rep.expect(run.run(c, uplo, o) == ML_OK, at0 + " run");
  }
  for (int b = 0; b < batch; ++b) {
    const std::string &fam = eb.items[b].first;
    const std::string at = at0 + " " + fam + " #" + std::to_string(b);
    const float *wb = w.data() + size_t(b) * n, *vb = v.data() + size_t(b) * n * n;
    if (eb.poison[b]) {
      rep.expect(kt::all_nan(wb, n) && kt::all_nan(vb, size_t(n) * n), at + " all NaN");
      rep.expect(info[b] == ML_INFO_NONFINITE, at + " info NONFINITE");
      continue;
    }
    rep.expect(kt::all_finite(wb, n) && kt::all_finite(vb, size_t(n) * n), at + " finite");
    rep.expect(info[b] == 0, at + " info 0");
    bool sorted = true;
    for (int i = 1; i < n; ++i) sorted = sorted && wb[i - 1] <= wb[i];
    rep.expect(sorted, at + " ascending");
    const Mat A = kt::read_symmetric(eb.a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const kt::EigRatios x = kt::check_eig_ratios(rep, at, A, wb, vb, kLimit);
    const double err = kt::max_abs_diff(wb, kt::jacobi_eigenvalues(A), n);
    rep.ratio(err / x.scale, kLimit, at + " values vs double");
    worst = std::max({worst, x.resid, x.orth, err / x.scale});
  }
}

int suite_eigh2() {
  Report rep;
  double worst = 0;
  if (!ml::blocked::supported(ML_OP_EIGH)) {
    std::printf("FAIL eigh2: no blocked eigh in this build\n");
    return 1;
  }
  std::mt19937_64 rng(59);
  // n below, at and past the band, all families; then the hard ones with several panels and
  // sweeps, the chase by wavefronts, blocks of other than bw sweeps, panels past the shared
  // budget (two-level QR panels), one matrix per chunk.
  eigh2_case(rep, worst, 2, ML_K_LOWER, small_two_stage(4, 0, 0), rng, true);
  eigh2_case(rep, worst, 13, ML_K_UPPER, small_two_stage(4, 0, 0), rng, true);
  // Stage 1's reflectors in blocks of one and of two panels.
  ml::blocked::Options q1 = small_two_stage(4, 3, 5);
  q1.eigh_back_q1 = 9;
  eigh2_case(rep, worst, 40, ML_K_LOWER, q1, rng, false);
  q1.eigh_back_q1 = 4;
  q1.eigh_back_sweeps = 0;
  eigh2_case(rep, worst, 23, ML_K_UPPER, q1, rng, false);
  ml::blocked::Options wave = small_two_stage(8, 0, 16);
  wave.eigh_chase_tasks = 2;
  eigh2_case(rep, worst, 53, ML_K_UPPER, wave, rng, false);
  ml::blocked::Options narrow = small_two_stage(8, 12, 0);
  narrow.shared_floats = 1200;
  eigh2_case(rep, worst, 37, ML_K_LOWER, narrow, rng, false);
  ml::blocked::Options wide = small_two_stage(16, 0, 0);
  wide.max_group = 64;
  eigh2_case(rep, worst, 70, ML_K_UPPER, wide, rng, false);
  ml::blocked::Options chunked = small_two_stage(3, 0, 0);
  chunked.max_workspace_bytes = 1;
  eigh2_case(rep, worst, 19, ML_K_LOWER, chunked, rng, false);
  // Routing: eigh by two stages only under its own fields.
  ml::blocked::Options off = small_two_stage(4, 0, 0);
  off.eigh_vec_two_stage_min_n = 0;
  ml::blocked::Options window = small_two_stage(4, 0, 0);
  window.eigh_vec_two_stage_min_n = 30;
  window.eigh_vec_two_stage_max_n = 40;
  window.eigh_vec_two_stage_min_batch = 8;
  const auto two = [](const ml::blocked::Options &o, int32_t op, int64_t batch, int64_t n) {
    const ml::Call w{op, batch, n, n, ML_K_LOWER, nullptr, nullptr, nullptr, nullptr, nullptr};
    return ml::blocked::eigh_two_stage(w, o);
  };
  rep.expect(!two(off, ML_OP_EIGH, 8, 35) && two(off, ML_OP_EIGVALSH, 8, 35),
             "eigh one stage without eigh_vec_two_stage_min_n");
  rep.expect(two(window, ML_OP_EIGH, 8, 30) && two(window, ML_OP_EIGH, 64, 40) &&
                 !two(window, ML_OP_EIGH, 7, 35) && !two(window, ML_OP_EIGH, 8, 41) &&
                 !two(window, ML_OP_EIGH, 8, 29),
             "eigh two stages for n 30..40 from batch 8 only");
  std::printf("eigh2: %d checks, %d failures; worst ratio %.3g (limit %g)\n", rep.checks,
              rep.failures, worst, kLimit);
  return rep.failures ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_suite(argc, argv, "test_blocked_eigh2 back|eigh2",
                       {{"back", suite_back}, {"eigh2", suite_eigh2}});
}
