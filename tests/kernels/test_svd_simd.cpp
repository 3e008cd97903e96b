// Test of the SIMD SVD kernels (core/kernels/svd_jacobi_simd.h: one-sided Jacobi, one lane per
// column, shuffles only) through the CPU runner at group size 32 and, where max(m, n) <= 16, 16
// (one thread per lane, real shuffles): square n = 1..16 and a sample of 17..32 (every n with
// KT_FULL=1), tall and wide shapes up to 32 rows, on the matrix families of test_svd.cpp (plus
// exact zero columns and a column-graded family),
// LAPACK's ratios in double, singular values against a double one-sided Jacobi reference,
// svdvals bitwise equal to svd, NaN/Inf isolation inside a batch, the info word and the sweep
// cap (p.max_iter = 1: NaN outputs and NOT_CONVERGED, diagonal matrices exact).
// Beside it the group kernel svd_bidiag_qr runs on the same matrices (group size 32); the test
// prints both kernels' worst ratios per family, and the relative error of the singular values
// (max_i |s_i - s_ref_i| / (s_ref_i ulp)) on the graded families, where one-sided Jacobi is
// known to be more accurate; it checks that Jacobi's is within a bound there.
// Usage: test_svd_simd [check|compare] (check, the default and the ctest: every shape; compare:
// the family table beside bidiag_qr, minutes). KT_TIMING=1 prints the time per shape.
#include "kernel_runner.h"
#include "../../core/kernels/svd_bidiag_qr.h"
#include "../../core/kernels/svd_jacobi_simd.h"
#include "kernel_test_util.h"

#include <map>

using kt::Mat;
using kt::Report;
using kt::SvdArgs;

namespace {

using kt::kSvdLimit;

KT_SVD_ENTRY(svd_entry, ml_svd_jacobi_simd)
KT_SVDVALS_ENTRY(svdvals_entry, ml_svdvals_jacobi_simd)
KT_SVD_ENTRY(bidiag_entry, ml_svd_bidiag_qr)

std::string where(const char *op, int gs, int m, int n, const std::string &fam, int idx) {
  char b[200];
  std::snprintf(b, sizeof b, "%s gs%d %dx%d %s #%d", op, gs, m, n, fam.c_str(), idx);
  return b;
}

// Worst ratios per family, of the Jacobi kernel and of bidiag_qr on the same matrices.
struct Worst {
  double resid = 0, orth_u = 0, orth_v = 0, sval = 0, srel = 0;
  int sweeps = 0;
  void add(const kt::SvdRatios &x, double rel, int sw = 0) {
    sweeps = std::max(sweeps, sw);
    resid = std::max(resid, x.resid);
    orth_u = std::max(orth_u, x.orth_u);
    orth_v = std::max(orth_v, x.orth_v);
    sval = std::max(sval, x.sval);
    srel = std::max(srel, rel);
  }
};
struct Tables {
  std::map<std::string, Worst> jac, qr;
  int max_sweeps = 0;
  double colgraded_worst = 0;  // relative s error (ulp) / scaled condition
};

// max_i |s_i - ref_i| / (ref_i ulp) over the nonzero reference values: relative accuracy of
// every singular value, small ones included.
double relative_error(const float *s, const std::vector<double> &ref) {
  double e = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i] > 0) e = std::max(e, std::fabs(s[i] - ref[i]) / (ref[i] * kt::kUlp));
  return e;
}

// Families where every singular value is determined to high relative accuracy by the entries
// (graded: D1 B D2; colgraded: B D), so the relative error of the small ones means something.
bool relative_family(const std::string &f) { return f == "graded" || f == "colgraded"; }

// Condition number of A with its columns scaled to unit norm (double, via the reference).
double scaled_condition(Mat a) {
  for (int j = 0; j < a.c; ++j) {
    double t = 0;
    for (int i = 0; i < a.r; ++i) t += a(i, j) * a(i, j);
    for (int i = 0; i < a.r; ++i) a(i, j) /= t > 0 ? std::sqrt(t) : 1.0;
  }
  const auto s = kt::reference_singular_values(a);
  return s.back() > 0 ? s.front() / s.back() : 1e300;
}

// B D for a Gaussian B and D = 1 .. 10^-decades geometric (column grading).
Mat column_graded(std::mt19937_64 &rng, int m, int n, double decades) {
  Mat a = kt::gaussian(rng, m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) a(i, j) *= std::pow(10.0, n > 1 ? -decades * j / (n - 1) : 0);
  return a;
}

// One batch at group size gs: every family, a NaN matrix in the middle and an Inf one at the
// end, through svd and svdvals (and bidiag_qr when compare); each matrix checked on its own.
// part/parts: only the families whose index is part modulo parts, and gaussian (the CPU runner
// pays a simdgroup barrier per shuffle: the full set at every shape would take many minutes).
void check_svd(Report &rep, Tables &tab, int gs, int m, int n, std::mt19937_64 &rng,
               bool compare, int part = 0, int parts = 1) {
  kt::Timer timer("svd_jacobi_simd", m, n, gs);
  auto fams = kt::svd_families(m, n, rng, true);
  kt::push_zero_cols(fams, m, n, rng);
  fams.push_back({"colgraded", m >= n ? column_graded(rng, m, n, 10)
                                       : kt::transpose(column_graded(rng, n, m, 10))});
  if (parts > 1) {
    kt::Families sel;
    for (size_t i = 0; i < fams.size(); ++i)
      if (i == 0 || int(i) % parts == part) sel.push_back(fams[i]);
    fams.swap(sel);
  }
  const int k = std::min(m, n);
  const kt::NamedBatch in =
      kt::nan_inf_batch(fams, m, n, std::numeric_limits<float>::infinity(), rng);
  const int batch = in.size();
  const float *a = in.a.data();
  kt::SvdOut o(m, n, batch);
  SvdArgs args = o.svd_args(a, 0);
  ml::kernel_runner::run(gs, batch, 0, svd_entry, &args);
  SvdArgs args2 = o.svdvals_args(a, 0);
  ml::kernel_runner::run(gs, batch, 0, svdvals_entry, &args2);
  std::vector<float> uq, sq, vq;
  std::vector<int> iq(batch, -1);
  if (compare) {
    uq.assign(o.u.size(), -7.f);
    sq.assign(o.s.size(), -7.f);
    vq.assign(o.vt.size(), -7.f);
    const int flags = ML_K_SVD_V_SHARED;
    SvdArgs q{{m, n, flags, 0, batch, 0}, a, uq.data(), sq.data(), vq.data(), iq.data()};
    ml::kernel_runner::run(32, batch, ml_svd_bidiag_qr_scratch_floats_flags(m, n, flags),
                           bidiag_entry, &q);
  }

  for (int b = 0; b < batch; ++b) {
    const std::string at = where("svd", gs, m, n, in.name[b], b);
    const std::string &fam = in.name[b];
    const Mat A = kt::from_float(a + size_t(b) * m * n, m, n);
    kt::SvdRatios x;
    if (!kt::check_svd_matrix(rep, at, fam, in.nonfinite(b), A, o, b, &x)) continue;
    const int sweeps = o.info[b] >> ML_INFO_SWEEPS_SHIFT;
    tab.max_sweeps = std::max(tab.max_sweeps, sweeps);
    const auto ref = kt::reference_singular_values(A);
    const double rel = relative_error(o.sb(b), ref);
    tab.jac[fam].add(x, relative_family(fam) ? rel : 0, sweeps);
    // Relative accuracy of every singular value on the column-graded family: one-sided
    // Jacobi's bound is a modest multiple of eps times the condition of the column-scaled
    // matrix, whatever the grading (bidiag_qr loses the small ones entirely: see the table).
    if (fam == "colgraded") {
      const double kappa = m >= n ? scaled_condition(A) : scaled_condition(kt::transpose(A));
      rep.ratio(rel / (std::max(m, n) * kappa), 1, at + " relative s error / (max(m,n) kappa)");
      tab.colgraded_worst = std::max(tab.colgraded_worst, rel / kappa);
    }
    // Rank-deficiency bit: also for the exact zero columns.
    kt::expect_zero_cols_flagged(rep, at, m, n, fam, o.info[b]);
    if (compare) {
      const size_t ob = size_t(b);
      const kt::SvdRatios y =
          kt::svd_ratios(A, uq.data() + ob * m * k, sq.data() + ob * k, vq.data() + ob * k * n);
      tab.qr[fam].add(y, relative_family(fam) ? relative_error(sq.data() + ob * k, ref) : 0,
                      iq[b] >> ML_INFO_SWEEPS_SHIFT);
    }
  }
}

// The sweep cap at group size gs: max_iter = 1 stops the matrices that need more sweeps with
// NOT_CONVERGED, one sweep counted and every output NaN; diagonal matrices (with a zero and
// repeated entries) in the same batch converge in that one sweep, exact and bitwise as under
// the default cap. Plus: info may be null, groups beyond the batch are ignored, out-of-range
// shapes are left alone.
void check_cap(Report &rep, int gs, int m, int n, std::mt19937_64 &rng) {
  const int k = std::min(m, n), batch = 4;
  std::vector<float> a;
  for (int b = 0; b < batch; ++b) {
    Mat x(m, n);
    if (b % 2 == 0) {
      x = kt::gaussian(rng, m, n);
    } else {
      for (int i = 0; i < k; ++i) x(i, i) = (i % 3 == 2) ? 0.0 : (i % 4 == 1 ? -2.5 : 1.0 + i);
    }
    auto v = kt::to_float(x);
    a.insert(a.end(), v.begin(), v.end());
  }
  for (int cap : {1, 0}) {
    std::vector<float> u(size_t(batch) * m * k, -7.f), s(size_t(batch) * k, -7.f),
        vt(size_t(batch) * k * n, -7.f), s2(size_t(batch) * k, -7.f);
    std::vector<int> info(batch, -1), info2(batch, -1);
    SvdArgs args{{m, n, 0, cap, batch, 0}, a.data(), u.data(), s.data(), vt.data(), info.data()};
    ml::kernel_runner::run(gs, batch, 0, svd_entry, &args);
    SvdArgs args2{{m, n, 0, cap, batch, 0}, a.data(), nullptr, s2.data(), nullptr, info2.data()};
    ml::kernel_runner::run(gs, batch, 0, svdvals_entry, &args2);
    for (int b = 0; b < batch; ++b) {
      const std::string at = where(cap ? "svd cap1" : "svd cap0", gs, m, n,
                                   b % 2 ? "diagonal" : "gaussian", b);
      const float *ub = u.data() + size_t(b) * m * k, *vb = vt.data() + size_t(b) * k * n;
      const float *sb = s.data() + size_t(b) * k;
      if (b % 2 == 0 && cap == 1 && k >= 2) {
        rep.expect((info[b] & ML_INFO_NOT_CONVERGED) && (info[b] >> ML_INFO_SWEEPS_SHIFT) == 1 &&
                       info2[b] == info[b],
                   at + " sweep cap");
        rep.expect(kt::all_nan(ub, size_t(m) * k) && kt::all_nan(sb, k) &&
                       kt::all_nan(vb, size_t(k) * n) && kt::all_nan(s2.data() + b * k, k),
                   at + " capped: NaN outputs");
        continue;
      }
      rep.expect((info[b] & ML_INFO_NOT_CONVERGED) == 0, at + " converged");
      if (b % 2 == 1) {  // diagonal: s = |d| sorted exactly, one sweep
        std::vector<float> d;
        for (int i = 0; i < k; ++i)
          d.push_back(std::fabs(a[size_t(b) * m * n + size_t(i) * n + i]));
        std::sort(d.rbegin(), d.rend());
        rep.expect(std::memcmp(d.data(), sb, sizeof(float) * k) == 0, at + " diagonal exact");
        rep.expect((info[b] >> ML_INFO_SWEEPS_SHIFT) == (k >= 2 ? 1 : 0), at + " one sweep");
        const kt::SvdRatios x = kt::svd_ratios(kt::from_float(a.data() + size_t(b) * m * n, m, n),
                                               ub, sb, vb);
        rep.ratio(x.resid, 1, at + " diagonal |A-USVt|");
        rep.ratio(x.orth_u, 1, at + " diagonal |I-UtU|");
        rep.ratio(x.orth_v, 1, at + " diagonal |I-VVt|");
      }
    }
  }
  // info null, two groups beyond the batch.
  std::vector<float> s3(size_t(batch) * k, -7.f);
  SvdArgs args3{{m, n, 0, 0, batch, 0}, a.data(), nullptr, s3.data(), nullptr, nullptr};
  ml::kernel_runner::run(gs, batch + 2, 0, svdvals_entry, &args3);
  rep.expect(kt::all_finite(s3.data(), s3.size()), where("svdvals no info", gs, m, n, "", 0));
}

void check_fits(Report &rep) {
  rep.expect(ml_svd_jacobi_simd_fits(32, 32) && ml_svd_jacobi_simd_fits(1, 1) &&
                 ml_svd_jacobi_simd_fits(32, 1) && ml_svd_jacobi_simd_fits(3, 32) &&
                 !ml_svd_jacobi_simd_fits(33, 2) && !ml_svd_jacobi_simd_fits(2, 33) &&
                 !ml_svd_jacobi_simd_fits(0, 2) && !ml_svd_jacobi_simd_fits(2, 0),
             "fits");
  std::vector<float> big(33 * 33, 1.f), o(33 * 33, -7.f);
  SvdArgs y{{33, 33, 0, 0, 1, 0}, big.data(), o.data(), o.data(), o.data(), nullptr};
  ml::kernel_runner::run(32, 1, 0, svd_entry, &y);
  rep.expect(o[0] == -7.f, "33x33 untouched");
  // 17 columns at group size 16: more columns than lanes, left untouched.
  SvdArgs z{{17, 17, 0, 0, 1, 0}, big.data(), o.data(), o.data(), o.data(), nullptr};
  ml::kernel_runner::run(16, 1, 0, svd_entry, &z);
  rep.expect(o[0] == -7.f, "17x17 at 16 lanes untouched");
}

void print_table(const char *title, const std::map<std::string, Worst> &jac,
                 const std::map<std::string, Worst> &qr) {
  std::printf("%s\n%-15s | %-47s | %-47s\n", title, "family",
              "jacobi_simd: resid orthU orthV s rel sweeps",
              "bidiag_qr: resid orthU orthV s rel QR-sweeps");
  for (const auto &[f, x] : jac) {
    auto it = qr.find(f);
    std::printf("%-15s | %6.3g %6.3g %6.3g %6.3g %8.3g %3d |", f.c_str(), x.resid, x.orth_u,
                x.orth_v, x.sval, x.srel, x.sweeps);
    if (it != qr.end())
      std::printf(" %6.3g %6.3g %6.3g %6.3g %8.3g %3d", it->second.resid, it->second.orth_u,
                  it->second.orth_v, it->second.sval, it->second.srel, it->second.sweeps);
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char **argv) {
  const std::string suite = argc > 1 ? argv[1] : "check";
  if (suite != "check" && suite != "compare") {
    std::printf("usage: test_svd_simd [check|compare]\n");
    return 2;
  }
  Report rep;
  std::mt19937_64 rng(86420);
  Tables tab, tab16;
  if (suite == "compare") {
    // Every family at 8x8, 16x16, 32x32 and 32x12 with bidiag_qr beside it (slow: minutes).
    for (int n : {8, 16, 32}) check_svd(rep, tab, 32, n, n, rng, true);
    check_svd(rep, tab, 32, 32, 12, rng, true);
    check_svd(rep, tab16, 16, 16, 16, rng, false);
  } else {
    // Every n = 1..16 and a sample of 17..32 at 32 lanes, 1..16 at 16 lanes, tall and wide
    // shapes. KT_FULL=1: every n, every family at every shape (slow); default: a quarter of the
    // families per shape (an eighth beyond n = 16), rotating, so every family meets every fourth
    // size up to 16 and one of the eight sizes past it; gaussian, NaN and Inf at all.
    // (`compare` runs every family at 32 x 32.) Past 16 (the 32-row register path) the sample
    // keeps its edges 17 and 32, 31 (odd: the round-robin's dummy column at the largest odd
    // n), 24 and 25 (the middle, even and odd) and 18, 21, 28; the sizes in between take the
    // same path.
    const bool full = std::getenv("KT_FULL") != nullptr;
    const int parts = full ? 1 : 4;
    check_fits(rep);
    for (int n = 1; n <= 16; ++n) check_svd(rep, tab, 32, n, n, rng, false, n % parts, parts);
    int big = 0;
    for (int n = 17; n <= 32; ++n) {
      const bool keep = n == 17 || n == 18 || n == 21 || n == 24 || n == 25 || n == 28 || n >= 31;
      if (full || keep) check_svd(rep, tab, 32, n, n, rng, false, full ? 0 : big++ % 8, full ? 1 : 8);
    }
    for (int n = 1; n <= 16; ++n)
      check_svd(rep, tab16, 16, n, n, rng, false, (n + 1) % parts, parts);
    const int shapes[][2] = {{2, 1},  {16, 3},  {9, 16},  {16, 13}, {5, 12}, {32, 8},
                             {8, 32}, {32, 17}, {17, 32}, {31, 24}, {32, 1}, {1, 32},
                             {29, 5}};
    int idx = 0;
    for (const auto &sh : shapes) {
      check_svd(rep, tab, 32, sh[0], sh[1], rng, false, idx++ % parts, parts);
      if (std::max(sh[0], sh[1]) <= 16)
        check_svd(rep, tab16, 16, sh[0], sh[1], rng, false, idx++ % parts, parts);
    }
    for (const auto &sh : {std::pair{32, 32}, std::pair{20, 7}, std::pair{6, 29},
                           std::pair{1, 1}, std::pair{2, 2}})
      check_cap(rep, 32, sh.first, sh.second, rng);
    for (const auto &sh : {std::pair{16, 16}, std::pair{11, 4}, std::pair{3, 13}})
      check_cap(rep, 16, sh.first, sh.second, rng);
  }
  print_table(suite == "compare"
                  ? "worst ratios per family, group size 32, bidiag_qr beside it (32 lanes, V "
                    "shared, same matrices); rel: max_i |s_i - s_ref_i| / (s_ref_i ulp)"
                  : "worst ratios per family, group size 32; rel: max_i |s_i - s_ref_i| / "
                    "(s_ref_i ulp)",
              tab.jac, tab.qr);
  print_table("worst ratios per family, group size 16", tab16.jac, {});
  std::printf("most sweeps %d (32 lanes), %d (16 lanes); colgraded: worst relative s error "
              "%.3g ulp x scaled condition\n",
              tab.max_sweeps, tab16.max_sweeps, tab.colgraded_worst);
  std::printf("%d checks, %d failures (worst ratio %.3g at %s)\n", rep.checks, rep.failures,
              rep.worst, rep.worst_where.c_str());
  return rep.failures == 0 ? 0 : 1;
}
