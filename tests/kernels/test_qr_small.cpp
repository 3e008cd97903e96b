// Test of the register QR kernel (core/kernels/qr_householder_small.h) through the CPU runner
// at group size 1: every (m, n) in 1..8 x 1..8, the three modes, the general matrix families
// (as test_kernels.cpp's QR test) plus exact zero columns, LAPACK's ratios in double, NaN/Inf
// isolation inside a batch, and agreement with the group kernel (qr_householder.h): the same
// reflectors, so the same signs of R's diagonal and the same Q up to rounding.
// Usage: test_qr_small
#include "kernel_runner.h"
#include "../../core/kernels/qr_householder.h"
#include "../../core/kernels/qr_householder_small.h"
#include "kernel_test_util.h"

using kt::Mat;
using kt::QrArgs;
using kt::Report;

namespace {

using kt::kQrLimit;
constexpr double kAgreeLimit = 30;  // |X_small - X_group| / (max(m,n) ulp), scaled as below

void qr_small_entry(const ml_ctx &ctx, void *u) {
  auto &x = *static_cast<QrArgs *>(u);
  ml_qr_householder_small(ctx, x.p, x.a, x.q, x.r, x.info);
}
void qr_group_entry(const ml_ctx &ctx, void *u) {
  auto &x = *static_cast<QrArgs *>(u);
  ml_qr_householder(ctx, x.p, x.a, x.q, x.r, x.info);
}

std::string where(const char *op, int m, int n, const std::string &fam, int idx) {
  char b[160];
  std::snprintf(b, sizeof b, "%s %dx%d %s #%d", op, m, n, fam.c_str(), idx);
  return b;
}

// kt::general_families (test_kernels.cpp's QR families), plus exact zero columns (R's
// diagonal exactly 0) and a power-of-two scaled matrix.
kt::Families families(int m, int n, std::mt19937_64 &rng) {
  kt::Families out = kt::general_families(m, n, rng);
  Mat zc = kt::gaussian(rng, m, n);  // column 0 (and the last when n > 2) exactly zero
  for (int i = 0; i < m; ++i) {
    zc(i, 0) = 0;
    if (n > 2) zc(i, n - 1) = 0;
  }
  out.push_back({"zero_cols", zc});
  Mat one = kt::gaussian(rng, m, n);  // a 2^k-scaled copy of gaussian: exercises the scaling
  for (double &x : one.v) x = std::ldexp(std::round(x * 8), 90);
  out.push_back({"pow2_1e27", one});
  return out;
}

struct Worst {
  double resid = 0, orth = 0, rtr = 0, agree = 0;
};

void check(Report &rep, Worst &worst, int m, int n, int mode, std::mt19937_64 &rng) {
  auto fams = families(m, n, rng);
  const int k = std::min(m, n);
  const int qcols = mode == ML_K_QR_COMPLETE ? m : k, rrows = qcols;
  const int nf = int(fams.size());
  const int batch = nf + 2;        // + a NaN matrix in the middle and an Inf one at the end
  const int bad_nan = nf / 2;      // batch index of the NaN matrix
  std::vector<std::string> name;
  std::vector<float> a;
  for (int b = 0, f = 0; b < batch; ++b) {
    std::vector<float> v;
    if (b == bad_nan || b == batch - 1) {
      v = kt::to_float(kt::gaussian(rng, m, n));
      v[size_t(rng() % v.size())] = b == bad_nan ? std::numeric_limits<float>::quiet_NaN()
                                                 : -std::numeric_limits<float>::infinity();
      name.push_back(b == bad_nan ? "nan" : "inf");
    } else {
      v = kt::to_float(fams[f].second);
      name.push_back(fams[f].first);
      ++f;
    }
    a.insert(a.end(), v.begin(), v.end());
  }
  const bool want_q = mode != ML_K_QR_R;
  std::vector<float> q(size_t(batch) * m * qcols, -7.f), r(size_t(batch) * rrows * n, -7.f);
  std::vector<float> q0(q), r0(r);
  std::vector<int> info(batch, -1), info0(batch, -1);
  QrArgs args{{m, n, mode, 0, batch, 0}, a.data(), want_q ? q.data() : nullptr, r.data(),
              info.data()};
  ml::kernel_runner::run(1, batch, 0, qr_small_entry, &args);
  QrArgs ref{{m, n, mode, 0, batch, 0}, a.data(), q0.data(), r0.data(), info0.data()};
  ml::kernel_runner::run(1, batch, ml_qr_householder_scratch_floats(m, n), qr_group_entry, &ref);

  const char *op = mode == ML_K_QR_R ? "qr-r" : mode == ML_K_QR_COMPLETE ? "qr-complete" : "qr";
  const int mx = std::max(m, n);
  for (int b = 0; b < batch; ++b) {
    const std::string &fam = name[b];
    const std::string at = where(op, m, n, fam, b);
    const float *rb = r.data() + size_t(b) * rrows * n;
    const float *qb = q.data() + size_t(b) * m * qcols;
    if (fam == "nan" || fam == "inf") {
      rep.expect(kt::all_nan(rb, size_t(rrows) * n), at + " R all NaN");
      if (want_q) rep.expect(kt::all_nan(qb, size_t(m) * qcols), at + " Q all NaN");
      rep.expect(info[b] == ML_INFO_NONFINITE, at + " info NONFINITE");
      continue;
    }
    rep.expect(kt::all_finite(rb, size_t(rrows) * n), at + " R finite");
    bool tri = true;
    for (int i = 0; i < rrows; ++i)
      for (int j = 0; j < std::min(i, n); ++j) tri = tri && rb[size_t(i) * n + j] == 0.f;
    rep.expect(tri, at + " R upper triangular");
    rep.expect((info[b] & ~ML_INFO_RANK_DEFICIENT) == 0, at + " info");
    if (fam == "zero" || fam == "zero_cols")
      rep.expect(info[b] == ML_INFO_RANK_DEFICIENT, at + " info RANK_DEFICIENT");
    if (fam == "identity" || fam == "gaussian") rep.expect(info[b] == 0, at + " info full rank");
    if (fam == "zero" || fam == "identity" || fam == "gaussian" || fam == "zero_cols")
      rep.expect(info[b] == info0[b], at + " info as the group kernel");
    Mat A = kt::from_float(a.data() + size_t(b) * m * n, m, n);
    Mat R = kt::from_float(rb, rrows, n);
    const double an = kt::norm1(A);
    // Agreement with the group kernel on well-conditioned inputs (unique QR up to signs, and
    // the signs must match): |R - R0| / (max(m,n) ||A|| ulp), |Q - Q0| / (max(m,n) ulp).
    const bool unique = fam == "gaussian" || fam == "identity" || fam == "pow2_1e27" ||
                        fam == "scale1e-30" || fam == "scale1e37" || fam == "zero";
    if (unique) {
      Mat R0 = kt::from_float(r0.data() + size_t(b) * rrows * n, rrows, n);
      for (size_t i = 0; i < R.v.size(); ++i) R0.v[i] -= R.v[i];
      const double d = an > 0 ? kt::norm1(R0) / (mx * an * kt::kUlp) : kt::norm1(R0);
      rep.ratio(d, kAgreeLimit, at + " R vs group kernel");
      worst.agree = std::max(worst.agree, d);
      for (int i = 0; i < k; ++i)
        rep.expect(std::signbit(rb[size_t(i) * n + i]) ==
                       std::signbit(r0[size_t(b) * rrows * n + size_t(i) * n + i]),
                   at + " sign of R's diagonal as the group kernel");
      if (want_q) {
        Mat Q0 = kt::from_float(q0.data() + size_t(b) * m * qcols, m, qcols);
        Mat Q1 = kt::from_float(qb, m, qcols);
        for (size_t i = 0; i < Q1.v.size(); ++i) Q0.v[i] -= Q1.v[i];
        const double dq = kt::norm1(Q0) / (mx * kt::kUlp);
        rep.ratio(dq, kAgreeLimit, at + " Q vs group kernel");
        worst.agree = std::max(worst.agree, dq);
      }
    }
    if (!want_q) {  // R^T R = A^T A (Q-less check), scaled by max(m, n)
      const double x = kt::rtr_ratio(A, R, mx);
      rep.ratio(x, kQrLimit, at + " |AtA-RtR|");
      worst.rtr = std::max(worst.rtr, x);
      continue;
    }
    rep.expect(kt::all_finite(qb, size_t(m) * qcols), at + " Q finite");
    const kt::QrRatios x = kt::qr_ratios(A, kt::from_float(qb, m, qcols), R, mx);
    rep.ratio(x.resid, kQrLimit, at + " |A-QR|");
    rep.ratio(x.orth, kQrLimit, at + " |I-QtQ|");
    worst.resid = std::max(worst.resid, x.resid);
    worst.orth = std::max(worst.orth, x.orth);
  }
}

// Batch bookkeeping: groups past p.batch untouched, group_offset honoured, info may be null.
void check_plumbing(Report &rep) {
  const int m = 5, n = 3, batch = 4;
  std::mt19937_64 rng(7);
  auto a = kt::to_float(kt::gaussian(rng, m * batch, n));
  std::vector<float> q(size_t(batch) * m * n, -7.f), r(size_t(batch) * n * n, -7.f);
  QrArgs x{{m, n, ML_K_QR_REDUCED, 0, batch, 0}, a.data(), q.data(), r.data(), nullptr};
  ml::kernel_runner::run(1, batch + 3, 0, qr_small_entry, &x);  // 3 groups beyond the batch
  rep.expect(kt::all_finite(q.data(), q.size()) && kt::all_finite(r.data(), r.size()),
             "plumbing: info=null, extra groups");
  rep.expect(ml_qr_householder_small_fits(8, 8, ML_K_QR_COMPLETE) &&
                 ml_qr_householder_small_fits(1, 1, ML_K_QR_R) &&
                 !ml_qr_householder_small_fits(9, 8, ML_K_QR_REDUCED) &&
                 !ml_qr_householder_small_fits(8, 9, ML_K_QR_REDUCED) &&
                 !ml_qr_householder_small_fits(0, 3, ML_K_QR_REDUCED),
             "plumbing: fits");
  // Out-of-range shapes are left alone.
  std::vector<float> big(81, 1.f), rq(81, -7.f), rr(81, -7.f);
  QrArgs y{{9, 9, ML_K_QR_REDUCED, 0, 1, 0}, big.data(), rq.data(), rr.data(), nullptr};
  ml::kernel_runner::run(1, 1, 0, qr_small_entry, &y);
  rep.expect(rq[0] == -7.f && rr[0] == -7.f, "plumbing: 9x9 untouched");
}

}  // namespace

int main() {
  Report rep;
  std::mt19937_64 rng(4321);
  Worst worst;
  for (int rep_i = 0; rep_i < 3; ++rep_i)  // three random draws of every family
    for (int m = 1; m <= 8; ++m)
      for (int n = 1; n <= 8; ++n)
        for (int mode : {ML_K_QR_REDUCED, ML_K_QR_R, ML_K_QR_COMPLETE}) check(rep, worst, m, n, mode, rng);
  check_plumbing(rep);
  std::printf("worst ratios: |A-QR| %.3g, |I-QtQ| %.3g, |AtA-RtR| %.3g, vs group kernel %.3g\n",
              worst.resid, worst.orth, worst.rtr, worst.agree);
  std::printf("%d checks, %d failures (worst ratio %.3g at %s)\n", rep.checks, rep.failures,
              rep.worst, rep.worst_where.c_str());
  return rep.failures == 0 ? 0 : 1;
}
