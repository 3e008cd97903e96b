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

using kt::where;

using kt::kQrLimit;
constexpr double kAgreeLimit = 30;  // |X_small - X_group| / (max(m,n) ulp), scaled as below

KT_QR_ENTRY(qr_small_entry, ml_qr_householder_small)
KT_QR_ENTRY(qr_group_entry, ml_qr_householder)

void check(Report &rep, kt::QrWorst &worst, int m, int n, int mode, std::mt19937_64 &rng) {
  const kt::QrShape s(m, n, mode);
  // + a NaN matrix in the middle and an Inf one at the end
  const kt::NamedBatch in = kt::nan_inf_batch(kt::qr_kernel_families(m, n, rng, false), m, n,
                                              -std::numeric_limits<float>::infinity(), rng);
  kt::QrOut out(s, in.size()), ref(s, in.size());
  kt::run_qr_kernel(qr_small_entry, 1, in.size(), 0, s, in, out, s.want_q);
  kt::run_qr_kernel(qr_group_entry, 1, in.size(), ml_qr_householder_scratch_floats(m, n), s, in,
                    ref, true);
  kt::check_qr_vs_group(rep, worst, s, in, out, ref, kAgreeLimit, false,
                        [&](const std::string &fam, int b) { return where(s.op, m, n, fam, b); });
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
  kt::QrWorst worst;
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
