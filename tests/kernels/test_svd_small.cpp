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

using kt::where;

using kt::kSvdLimit;

KT_SVD_ENTRY(svd_entry, ml_svd_jacobi_small)
KT_SVDVALS_ENTRY(svdvals_entry, ml_svdvals_jacobi_small)

struct Worst {
  double resid = 0, orth_u = 0, orth_v = 0, sval = 0;
  int max_sweeps = 0;
};

// One batch: every family, a NaN matrix in the middle and an Inf one at the end, through svd
// and svdvals; each matrix checked on its own.
void check_svd(Report &rep, Worst &worst, int m, int n, std::mt19937_64 &rng) {
  auto fams = kt::svd_families(m, n, rng, true);
  kt::push_zero_cols(fams, m, n, rng);
  const kt::NamedBatch in =
      kt::nan_inf_batch(fams, m, n, std::numeric_limits<float>::infinity(), rng);
  kt::SvdOut o(m, n, in.size());
  SvdArgs args = o.svd_args(in.a.data(), 0);
  ml::kernel_runner::run(1, in.size(), 0, svd_entry, &args);
  SvdArgs args2 = o.svdvals_args(in.a.data(), ML_K_UPPER);
  ml::kernel_runner::run(1, in.size(), 0, svdvals_entry, &args2);

  for (int b = 0; b < in.size(); ++b) {
    const std::string at = where("svd", m, n, in.name[b], b);
    const Mat A = kt::from_float(in.a.data() + size_t(b) * m * n, m, n);
    kt::SvdRatios x;
    if (!kt::check_svd_matrix(rep, at, in.name[b], in.nonfinite(b), A, o, b, &x)) continue;
    worst.max_sweeps = std::max(worst.max_sweeps, o.info[b] >> ML_INFO_SWEEPS_SHIFT);
    worst.resid = std::max(worst.resid, x.resid);
    worst.orth_u = std::max(worst.orth_u, x.orth_u);
    worst.orth_v = std::max(worst.orth_v, x.orth_v);
    worst.sval = std::max(worst.sval, x.sval);
    // Rank-deficiency bit: also for the exact zero columns.
    kt::expect_zero_cols_flagged(rep, at, m, n, in.name[b], o.info[b]);
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
    kt::expect_svd_capped(rep, at, n, u.data(), s.data(), vt.data(), info);
    std::vector<float> s2(n, -7.f);
    SvdArgs args2{{n, n, 0, 0, 1, 0}, a.data(), nullptr, s2.data(), nullptr, nullptr};
    ml::kernel_runner::run(1, 3, 0, svdvals_entry, &args2);  // 2 groups beyond the batch
    rep.expect(kt::positive_descending_ends(s2.data(), n), at + " svdvals without info");
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
