// Tests of the register kernel core/kernels/eigh_jacobi_small.h (eigh / eigvalsh, n <= 8, one
// thread per matrix) through the CPU runner at group size 1: every n 1..8, both triangles,
// the symmetric families of test_kernels (plus graded positive definite ones, 1e-30 / 1e37
// scales, NaN garbage in the unread triangle, NaN / Inf matrices inside a batch), judged by
// LAPACK's ratios in double as test_kernels' eigh checks; the sweep cap; group_offset.
#include "kernel_runner.h"
#include "../../core/kernels/eigh_jacobi_small.h"
#include "kernel_test_util.h"

using kt::Mat;
using kt::EigArgs;
using kt::Report;

namespace {

using kt::kEigLimit;

KT_EIG_OFFSET_ENTRY(eigh_entry, ml_eigh_jacobi_small)
KT_EIGVALS_OFFSET_ENTRY(eigvalsh_entry, ml_eigvalsh_jacobi_small)

std::string where(const char *op, int n, const std::string &fam, int idx) {
  char b[160];
  std::snprintf(b, sizeof b, "%s n=%d %s #%d", op, n, fam.c_str(), idx);
  return b;
}

struct Worst {
  double res = 0, orth = 0, err = 0, rel = 0;
  int max_sweeps = 0;
};

// One batch: every family, with two poisoned matrices (NaN and Inf in the read triangle) in
// the middle and at the end; NaN in every unread entry. eigh and eigvalsh on the same batch.
void check_batch(Report &rep, int n, int uplo, std::mt19937_64 &rng, Worst &worst) {
  auto fams = kt::eig_kernel_families(n, rng, true);
  kt::EigBatch eb = kt::eig_batch(fams, n, uplo, rng);
  const auto &items = eb.items;
  const auto &poison = eb.poison;
  const auto &a = eb.a;
  const int batch = int(items.size());
  std::vector<float> w(size_t(batch) * n, -7.f), v(size_t(batch) * n * n, -7.f), w2(w);
  std::vector<int> info(batch, -1), info2(batch, -1);
  EigArgs args{{n, n, uplo, 0, batch, 0}, a.data(), w.data(), v.data(), info.data()};
  EigArgs args2{{n, n, uplo, 0, batch, 0}, a.data(), w2.data(), nullptr, info2.data()};
  ml::kernel_runner::run(1, batch, 0, eigh_entry, &args);
  ml::kernel_runner::run(1, batch, 0, eigvalsh_entry, &args2);
  for (int b = 0; b < batch; ++b) {
    const std::string fam = items[b].first;
    const std::string at = where(uplo == ML_K_LOWER ? "eigh-L" : "eigh-U", n, fam, b);
    const float *wb = w.data() + size_t(b) * n, *w2b = w2.data() + size_t(b) * n;
    const float *vb = v.data() + size_t(b) * n * n;
    if (!kt::check_eig_outputs(rep, at, n, poison[b], wb, vb, w2b, info[b], info2[b])) continue;
    rep.expect(info[b] == info2[b], at + " eigvalsh info == eigh info");
    rep.expect(std::memcmp(wb, w2b, sizeof(float) * n) == 0, at + " eigvalsh == eigh values");
    const int sweeps = info[b] >> ML_INFO_SWEEPS_SHIFT;
    worst.max_sweeps = std::max(worst.max_sweeps, sweeps);
    if (fam == "gaussian" && n >= 2) rep.expect(sweeps > 0, at + " sweep count in info");
    if (fam == "zero" || fam == "identity" || fam == "diagonal" || n == 1)
      rep.expect(sweeps == 0, at + " no sweep for a diagonal matrix");
    bool asc = true;
    for (int i = 1; i < n; ++i) asc = asc && wb[i - 1] <= wb[i];
    rep.expect(asc, at + " ascending");
    // The matrix as the kernel saw it: the read triangle, mirrored.
    const Mat A = kt::read_symmetric(a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const kt::EigRatios x = kt::eig_ratios(A, wb, vb);
    const double den = x.scale, res = x.resid, orth = x.orth;
    rep.ratio(res, kEigLimit, at + " |A-VWVt|");
    rep.ratio(orth, kEigLimit, at + " |I-VtV|");
    // Relative stopping test: graded matrices' small eigenvalues to high relative accuracy.
    const auto ref = kt::jacobi_eigenvalues_relative(A);
    double err = 0, rel = 0;
    for (int i = 0; i < n; ++i) {
      err = std::max(err, std::fabs(wb[i] - ref[i]));
      if (ref[i] != 0) rel = std::max(rel, std::fabs(wb[i] - ref[i]) / std::fabs(ref[i]));
    }
    rep.ratio(err / den, kEigLimit, at + " |w-w_ref|");
    worst.res = std::max(worst.res, res);
    worst.orth = std::max(worst.orth, orth);
    worst.err = std::max(worst.err, err / den);
    // Graded positive definite: every eigenvalue to high relative accuracy (B's condition
    // number is ~2, so LAPACK-style n ulp per eigenvalue, times the same factor).
    if (fam.rfind("graded_pd", 0) == 0) {
      rep.ratio(rel / (n * kt::kUlp), kEigLimit, at + " relative |w-w_ref|/|w_ref|");
      worst.rel = std::max(worst.rel, rel / (n * kt::kUlp));
    }
  }
}

// p.max_iter = 1 cannot converge a random 8 x 8 matrix: NOT_CONVERGED, one sweep, NaN outputs.
void check_cap(Report &rep, std::mt19937_64 &rng) {
  const int n = 8;
  Mat g = kt::gaussian(rng, n, n);
  auto a = kt::to_float(kt::matmul(g, kt::transpose(g)));
  std::vector<float> w(n), v(n * n), w2(n);
  int info = 0, info2 = 0;
  EigArgs args{{n, n, ML_K_LOWER, 1, 1, 0}, a.data(), w.data(), v.data(), &info};
  EigArgs args2{{n, n, ML_K_LOWER, 1, 1, 0}, a.data(), w2.data(), nullptr, &info2};
  ml::kernel_runner::run(1, 1, 0, eigh_entry, &args);
  ml::kernel_runner::run(1, 1, 0, eigvalsh_entry, &args2);
  rep.expect((info & ML_INFO_NOT_CONVERGED) && (info >> ML_INFO_SWEEPS_SHIFT) == 1, "max_iter=1 NOT_CONVERGED");
  rep.expect(info2 == info, "max_iter=1 eigvalsh info");
  rep.expect(kt::all_nan(w.data(), n) && kt::all_nan(v.data(), size_t(n) * n) && kt::all_nan(w2.data(), n),
             "max_iter=1 NaN outputs");
}

// group_offset shifts the matrices a launch handles; info may be null; groups >= batch return.
void check_offset(Report &rep, std::mt19937_64 &rng) {
  kt::check_eig_offset(rep, 5, rng, eigh_entry, 1, 5, 1, 3);  // two groups past the batch
  rep.expect(ml_eigh_jacobi_small_fits(8, 8, 0) && !ml_eigh_jacobi_small_fits(9, 9, 1 << 20) &&
                 !ml_eigh_jacobi_small_fits(4, 5, 0) && !ml_eigh_jacobi_small_fits(0, 0, 0) &&
                 ml_eigvalsh_jacobi_small_fits(1, 1, 0) && ml_eigh_jacobi_small_scratch_floats(8, 8) == 0,
             "fits");
}

}  // namespace

int main() {
  Report rep;
  std::mt19937_64 rng(2024);
  const int reps = std::getenv("KT_REPS") ? std::atoi(std::getenv("KT_REPS")) : 200;
  for (int n = 1; n <= 8; ++n) {
    Worst worst;
    {
      kt::Timer timer("eigh_small", n, n, 1);
      for (int r = 0; r < reps; ++r)
        for (int uplo : {ML_K_LOWER, ML_K_UPPER}) check_batch(rep, n, uplo, rng, worst);
    }
    std::printf("n=%d: worst |A-VWVt| %.3g, |I-VtV| %.3g, |w-w_ref| %.3g, graded_pd relative %.3g; "
                "max sweeps %d\n",
                n, worst.res, worst.orth, worst.err, worst.rel, worst.max_sweeps);
  }
  check_cap(rep, rng);
  check_offset(rep, rng);
  std::printf("eigh_small: %d checks, %d failures, worst ratio %.3g (%s)\n", rep.checks,
              rep.failures, rep.worst, rep.worst_where.c_str());
  return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
}
