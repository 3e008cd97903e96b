// Test of the register SVD kernels (core/kernels/svd_jacobi_small.h: one-sided Jacobi, one
// thread per matrix) through the CPU runner at group size 1: every (m, n) in 1..8 x 1..8 on the
// matrix families of test_svd.cpp (plus exact zero columns), LAPACK's ratios in double as
// test_svd.cpp, singular values against a double one-sided Jacobi reference, svdvals bitwise
// equal to svd, NaN/Inf isolation inside a batch, the info word and the sweep cap.
// Usage: test_svd_small
#include "kernel_runner.h"
#include "../../core/kernels/svd_jacobi_small.h"
#include "kernel_test_util.h"

using kt::Mat;
using kt::Report;
using kt::SvdArgs;

namespace {

using kt::kSvdLimit;

void svd_entry(const ml_ctx &ctx, void *user) {
  auto &x = *static_cast<SvdArgs *>(user);
  ml_svd_jacobi_small(ctx, x.p, x.a, x.u, x.s, x.vt, x.info);
}
void svdvals_entry(const ml_ctx &ctx, void *user) {
  auto &x = *static_cast<SvdArgs *>(user);
  ml_svdvals_jacobi_small(ctx, x.p, x.a, x.s, x.info);
}

std::string where(const char *op, int m, int n, const std::string &fam, int idx) {
  char b[180];
  std::snprintf(b, sizeof b, "%s %dx%d %s #%d", op, m, n, fam.c_str(), idx);
  return b;
}

struct Worst {
  double resid = 0, orth_u = 0, orth_v = 0, sval = 0;
  int max_sweeps = 0;
};

// One batch: every family, a NaN matrix in the middle and an Inf one at the end, through svd
// and svdvals; each matrix checked on its own.
void check_svd(Report &rep, Worst &worst, int m, int n, std::mt19937_64 &rng) {
  auto fams = kt::svd_families(m, n, rng, true);
  Mat zc = kt::gaussian(rng, m, n);  // exact zero columns (and rows): rank-deficient U/V
  for (int i = 0; i < m; ++i) zc(i, 0) = 0;
  if (m > 2)
    for (int j = 0; j < n; ++j) zc(m - 1, j) = 0;
  fams.push_back({"zero_cols", zc});
  const int k = std::min(m, n);
  const int nf = int(fams.size()), batch = nf + 2, bad_nan = nf / 2;
  std::vector<float> a;
  std::vector<std::string> names;
  for (int b = 0, f = 0; b < batch; ++b) {
    std::vector<float> v;
    if (b == bad_nan || b == batch - 1) {
      v = kt::to_float(kt::gaussian(rng, m, n));
      v[size_t(rng() % v.size())] = b == bad_nan ? std::numeric_limits<float>::quiet_NaN()
                                                 : std::numeric_limits<float>::infinity();
      names.push_back(b == bad_nan ? "nan" : "inf");
    } else {
      v = kt::to_float(fams[f].second);
      names.push_back(fams[f++].first);
    }
    a.insert(a.end(), v.begin(), v.end());
  }
  std::vector<float> u(size_t(batch) * m * k, -7.f), s(size_t(batch) * k, -7.f),
      vt(size_t(batch) * k * n, -7.f), s2(size_t(batch) * k, -7.f);
  std::vector<int> info(batch, -1), info2(batch, -1);
  SvdArgs args{{m, n, 0, 0, batch, 0}, a.data(), u.data(), s.data(), vt.data(), info.data()};
  ml::kernel_runner::run(1, batch, 0, svd_entry, &args);
  SvdArgs args2{{m, n, ML_K_UPPER, 0, batch, 0}, a.data(), nullptr, s2.data(), nullptr,
                info2.data()};
  ml::kernel_runner::run(1, batch, 0, svdvals_entry, &args2);

  for (int b = 0; b < batch; ++b) {
    const std::string at = where("svd", m, n, names[b], b);
    const float *ub = u.data() + size_t(b) * m * k, *vb = vt.data() + size_t(b) * k * n;
    const float *sb = s.data() + size_t(b) * k, *s2b = s2.data() + size_t(b) * k;
    if (names[b] == "nan" || names[b] == "inf") {
      kt::expect_svd_nonfinite(rep, at, m, n, ub, sb, vb, s2b, info[b], info2[b]);
      continue;
    }
    kt::expect_svd_outputs(rep, at, m, n, ub, sb, vb, s2b, info[b], info2[b]);
    const int sweeps = info[b] >> ML_INFO_SWEEPS_SHIFT;
    worst.max_sweeps = std::max(worst.max_sweeps, sweeps);
    if (names[b] == "gaussian" && k >= 2) rep.expect(sweeps > 0, at + " sweeps counted");

    const kt::SvdRatios x =
        kt::check_svd_ratios(rep, at, names[b], kt::from_float(a.data() + size_t(b) * m * n, m, n),
                             ub, sb, vb, info[b], kSvdLimit);
    worst.resid = std::max(worst.resid, x.resid);
    worst.orth_u = std::max(worst.orth_u, x.orth_u);
    worst.orth_v = std::max(worst.orth_v, x.orth_v);
    worst.sval = std::max(worst.sval, x.sval);

    // Rank-deficiency bit: also for the exact zero columns.
    const bool rd = (info[b] & ML_INFO_RANK_DEFICIENT) != 0;
    if (names[b] == "zero_cols" && (n <= m || m > 2))  // a zero column, or a zero row of a wide one
      rep.expect(rd, at + " zero_cols flagged");
  }
}

// The sweep cap: max_iter = 1 stops early with NOT_CONVERGED, one sweep counted and every
// output NaN. Plus bookkeeping: info may be null, groups
// beyond the batch are ignored, out-of-range shapes are left alone.
void check_cap_and_plumbing(Report &rep, std::mt19937_64 &rng) {
  for (int n : {8, 5}) {
    auto a = kt::to_float(kt::gaussian(rng, n, n));
    std::vector<float> u(n * n), s(n), vt(n * n);
    int info = -1;
    SvdArgs args{{n, n, 0, 1, 1, 0}, a.data(), u.data(), s.data(), vt.data(), &info};
    ml::kernel_runner::run(1, 1, 0, svd_entry, &args);
    const std::string at = "svd cap n=" + std::to_string(n);
    rep.expect((info & ML_INFO_NOT_CONVERGED) && (info >> ML_INFO_SWEEPS_SHIFT) == 1,
               at + " sweep cap");
    rep.expect(kt::all_nan(u.data(), size_t(n) * n) && kt::all_nan(s.data(), n) &&
                   kt::all_nan(vt.data(), size_t(n) * n),
               at + " capped: NaN outputs");
    std::vector<float> s2(n, -7.f);
    SvdArgs args2{{n, n, 0, 0, 1, 0}, a.data(), nullptr, s2.data(), nullptr, nullptr};
    ml::kernel_runner::run(1, 3, 0, svdvals_entry, &args2);  // 2 groups beyond the batch
    rep.expect(kt::all_finite(s2.data(), n) && s2[0] >= s2[n - 1] && s2[n - 1] > 0,
               at + " svdvals without info");
  }
  rep.expect(ml_svd_jacobi_small_fits(8, 8) && ml_svd_jacobi_small_fits(1, 8) &&
                 !ml_svd_jacobi_small_fits(9, 2) && !ml_svd_jacobi_small_fits(2, 9) &&
                 !ml_svd_jacobi_small_fits(0, 2),
             "fits");
  std::vector<float> big(81, 1.f), o(81, -7.f);
  SvdArgs y{{9, 9, 0, 0, 1, 0}, big.data(), o.data(), o.data(), o.data(), nullptr};
  ml::kernel_runner::run(1, 1, 0, svd_entry, &y);
  rep.expect(o[0] == -7.f, "9x9 untouched");
}

}  // namespace

int main() {
  Report rep;
  std::mt19937_64 rng(97531);
  Worst worst;
  for (int draw = 0; draw < 3; ++draw)  // three random draws of every family
    for (int m = 1; m <= 8; ++m)
      for (int n = 1; n <= 8; ++n) check_svd(rep, worst, m, n, rng);
  check_cap_and_plumbing(rep, rng);
  std::printf("worst ratios: |A-USVt| %.3g, |I-UtU| %.3g, |I-VVt| %.3g, s vs double %.3g; "
              "most sweeps %d\n",
              worst.resid, worst.orth_u, worst.orth_v, worst.sval, worst.max_sweeps);
  std::printf("%d checks, %d failures (worst ratio %.3g at %s)\n", rep.checks, rep.failures,
              rep.worst, rep.worst_where.c_str());
  return rep.failures == 0 ? 0 : 1;
}
