// Test of the register SVD kernels (core/kernels/svd_jacobi_small.h: one-sided Jacobi, one
// thread per matrix) through the CPU runner at group size 1: every (m, n) in 1..8 x 1..8 on the
// matrix families of test_svd.cpp (plus exact zero columns), LAPACK's ratios in double as
// test_svd.cpp, singular values against a double one-sided Jacobi reference, svdvals bitwise
// equal to svd, NaN/Inf isolation inside a batch, the info word and the sweep cap.
// Usage: test_svd_small
#include "../../core/src/kernel_runner.h"
#include "../../core/kernels/svd_jacobi_small.h"
#include "kernel_test_util.h"

using kt::Mat;
using kt::Report;

namespace {

constexpr double kSvdLimit = 35;  // DESIGN.md 3, as test_svd.cpp

struct SvdArgs {
  ml_params p;
  const float *a;
  float *u, *s, *vt;
  int *info;
};
void svd_entry(const ml_ctx &ctx, void *user) {
  auto &x = *static_cast<SvdArgs *>(user);
  ml_svd_jacobi_small(ctx, x.p, x.a, x.u, x.s, x.vt, x.info);
}
void svdvals_entry(const ml_ctx &ctx, void *user) {
  auto &x = *static_cast<SvdArgs *>(user);
  ml_svdvals_jacobi_small(ctx, x.p, x.a, x.s, x.info);
}

// (From test_svd.cpp.)
// Singular values of a in double by one-sided (Hestenes) Jacobi, descending.
std::vector<double> reference_singular_values(const Mat &a) {
  const bool tall = a.r >= a.c;
  const int rows = tall ? a.r : a.c, cols = tall ? a.c : a.r;
  std::vector<double> x(size_t(rows) * cols);  // column j at x[j*rows]
  for (int i = 0; i < a.r; ++i)
    for (int j = 0; j < a.c; ++j)
      x[tall ? size_t(j) * rows + i : size_t(i) * rows + j] = a(i, j);
  for (int sweep = 0; sweep < 80; ++sweep) {
    bool rotated = false;
    for (int p = 0; p + 1 < cols; ++p)
      for (int q = p + 1; q < cols; ++q) {
        double *xp = &x[size_t(p) * rows], *xq = &x[size_t(q) * rows];
        double al = 0, be = 0, ga = 0;
        for (int i = 0; i < rows; ++i) {
          al += xp[i] * xp[i];
          be += xq[i] * xq[i];
          ga += xp[i] * xq[i];
        }
        if (ga == 0 || std::fabs(ga) <= 1e-17 * std::sqrt(al * be)) continue;
        rotated = true;
        const double zeta = (be - al) / (2 * ga);
        const double t = (zeta >= 0 ? 1 : -1) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (int i = 0; i < rows; ++i) {
          const double u = xp[i], v = xq[i];
          xp[i] = c * u - s * v;
          xq[i] = s * u + c * v;
        }
      }
    if (!rotated) break;
  }
  std::vector<double> sv(cols);
  for (int j = 0; j < cols; ++j) {
    double t = 0;
    for (int i = 0; i < rows; ++i) t += x[size_t(j) * rows + i] * x[size_t(j) * rows + i];
    sv[j] = std::sqrt(t);
  }
  std::sort(sv.rbegin(), sv.rend());
  return sv;
}

std::vector<std::pair<std::string, Mat>> svd_families(int m, int n, std::mt19937_64 &rng,
                                                      bool all) {
  std::vector<std::pair<std::string, Mat>> out;
  const int k = std::min(m, n);
  out.push_back({"gaussian", kt::gaussian(rng, m, n)});
  if (!all) return out;
  out.push_back({"zero", Mat(m, n)});
  Mat id(m, n);
  for (int i = 0; i < k; ++i) id(i, i) = 1;
  out.push_back({"identity", id});
  for (const char *kind :
       {"clustered", "clustered1", "geometric", "arithmetic", "randlog", "rankdef", "repeated"}) {
    auto s = kt::spectrum(kind, k, rng);
    for (double &x : s) x = std::fabs(x);
    std::sort(s.rbegin(), s.rend());
    out.push_back({kind, kt::with_singular_values(rng, m, n, s)});
  }
  Mat shift(m, n), ones(m, n);  // shift: zero diagonal, exercises the zero-d chase
  for (int i = 0; i < m && i + 1 < n; ++i) shift(i, i + 1) = 1;
  for (double &x : ones.v) x = 1;
  out.push_back({"shift", shift});
  out.push_back({"ones", ones});
  Mat gr = kt::gaussian(rng, m, n);  // graded D1 A D2, D = 1 .. 1e-6 geometric
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      gr(i, j) *= std::pow(1e-6, m > 1 ? double(i) / (m - 1) : 0) *
                  std::pow(1e-6, n > 1 ? double(j) / (n - 1) : 0);
  out.push_back({"graded", gr});
  Mat tiny = kt::gaussian(rng, m, n), huge = kt::gaussian(rng, m, n);
  for (double &x : tiny.v) x *= 1e-30;
  for (double &x : huge.v) x *= 1e37;
  out.push_back({"scale1e-30", tiny});
  out.push_back({"scale1e37", huge});
  auto gs = kt::spectrum("geometric", k, rng);
  for (double &x : gs) x = std::fabs(x) * 1e-30;
  std::sort(gs.rbegin(), gs.rend());
  out.push_back({"geometric1e-30", kt::with_singular_values(rng, m, n, gs)});
  return out;
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
  auto fams = svd_families(m, n, rng, true);
  Mat zc = kt::gaussian(rng, m, n);  // exact zero columns (and rows): rank-deficient U/V
  for (int i = 0; i < m; ++i) zc(i, 0) = 0;
  if (m > 2)
    for (int j = 0; j < n; ++j) zc(m - 1, j) = 0;
  fams.push_back({"zero_cols", zc});
  const int k = std::min(m, n), big = std::max(m, n);
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
      rep.expect(kt::all_nan(ub, size_t(m) * k) && kt::all_nan(vb, size_t(k) * n) &&
                     kt::all_nan(sb, k) && kt::all_nan(s2b, k),
                 at + " all NaN");
      rep.expect(info[b] == ML_INFO_NONFINITE && info2[b] == ML_INFO_NONFINITE,
                 at + " info NONFINITE");
      continue;
    }
    rep.expect(kt::all_finite(ub, size_t(m) * k) && kt::all_finite(vb, size_t(k) * n) &&
                   kt::all_finite(sb, k),
               at + " finite");
    bool ordered = true;
    for (int i = 0; i < k; ++i) ordered = ordered && sb[i] >= 0 && (i == 0 || sb[i] <= sb[i - 1]);
    rep.expect(ordered, at + " s descending, >= 0");
    rep.expect(std::memcmp(sb, s2b, sizeof(float) * k) == 0 && info[b] == info2[b],
               at + " svdvals == svd values, same info");
    rep.expect((info[b] & (ML_INFO_NOT_CONVERGED | ML_INFO_NONFINITE)) == 0, at + " info");
    const int sweeps = info[b] >> ML_INFO_SWEEPS_SHIFT;
    worst.max_sweeps = std::max(worst.max_sweeps, sweeps);
    if (names[b] == "gaussian" && k >= 2) rep.expect(sweeps > 0, at + " sweeps counted");

    Mat A = kt::from_float(a.data() + size_t(b) * m * n, m, n);
    Mat U = kt::from_float(ub, m, k), Vt = kt::from_float(vb, k, n);
    Mat us = U;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < k; ++j) us(i, j) *= sb[j];
    Mat r = kt::matmul(us, Vt);
    for (size_t i = 0; i < r.v.size(); ++i) r.v[i] -= A.v[i];
    const double an = kt::norm1(A);
    const double res = an > 0 ? kt::norm1(r) / (an * big * kt::kUlp) : kt::norm1(r);
    const double ou = kt::orth_defect(U) / (m * kt::kUlp);
    const double ov = kt::orth_defect(kt::transpose(Vt)) / (n * kt::kUlp);
    rep.ratio(res, kSvdLimit, at + " |A-USVt|");
    rep.ratio(ou, kSvdLimit, at + " |I-UtU|");
    rep.ratio(ov, kSvdLimit, at + " |I-VVt|");
    const auto ref = reference_singular_values(A);
    double err = 0;
    for (int i = 0; i < k; ++i) err = std::max(err, std::fabs(sb[i] - ref[i]));
    const double se = ref[0] > 0 ? err / (ref[0] * big * kt::kUlp) : err;
    rep.ratio(se, kSvdLimit, at + " s vs double");
    worst.resid = std::max(worst.resid, res);
    worst.orth_u = std::max(worst.orth_u, ou);
    worst.orth_v = std::max(worst.orth_v, ov);
    worst.sval = std::max(worst.sval, se);

    // Rank-deficiency bit where the family decides it unambiguously.
    const bool rd = (info[b] & ML_INFO_RANK_DEFICIENT) != 0;
    if (names[b] == "zero") rep.expect(rd, at + " zero is rank-deficient");
    if (names[b] == "identity") rep.expect(!rd, at + " identity has full rank");
    if (names[b] == "rankdef" && k >= 2) rep.expect(rd, at + " rankdef flagged");
    if (names[b] == "ones" && k >= 2) rep.expect(rd, at + " ones flagged");
    if (names[b] == "zero_cols" && (n <= m || m > 2))  // a zero column, or a zero row of a wide one
      rep.expect(rd, at + " zero_cols flagged");
  }
}

// The sweep cap: max_iter = 1 stops early with NOT_CONVERGED and one sweep counted; vectors
// stay orthonormal (only rotations were applied). Plus bookkeeping: info may be null, groups
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
    rep.ratio(kt::orth_defect(kt::transpose(kt::from_float(vt.data(), n, n))) / (n * kt::kUlp),
              kSvdLimit, at + " capped |I-VVt|");
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
