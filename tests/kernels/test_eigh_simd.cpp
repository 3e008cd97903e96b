// Tests of the SIMD kernel core/kernels/eigh_jacobi_simd.h (eigh / eigvalsh, n <= 32, one
// simdgroup per matrix) through the CPU runner (one thread per lane, real shuffles) at group
// size 32 for every n 1..17 and a sample of n 18..32 (every register path's edges; KT_FULL=1:
// every n) and at group size 16 for n <= 16 (CUDA's sub-warp groups; bitwise
// the results of group size 32): both triangles, the symmetric families of test_kernels (plus
// all ones and graded positive definite matrices, 1e-30 / 1e37 scales, NaN garbage in the
// unread triangle, NaN / Inf matrices inside a batch), judged by LAPACK's ratios in double as
// test_kernels' eigh checks; diagonal matrices exact; the sweep cap; group_offset. The same
// matrices also go through eigh_tridiag_ql (and, for n <= 8, the two-sided Jacobi of
// eigh_jacobi_small) and the worst ratios are printed side by side per family (KT_REPS=k: k
// batches per n and triangle, default 1; KT_FULL=1: see main).
#include <map>

#include "kernel_runner.h"
#include "../../core/kernels/eigh_jacobi_simd.h"
#include "../../core/kernels/eigh_jacobi_small.h"
#include "../../core/kernels/eigh_tridiag_ql.h"
#include "kernel_test_util.h"

using kt::EigArgs;
using kt::Mat;
using kt::Report;

namespace {

using kt::kEigLimit;

KT_EIG_OFFSET_ENTRY(eigh_entry, ml_eigh_jacobi_simd)
KT_EIGVALS_OFFSET_ENTRY(eigvalsh_entry, ml_eigvalsh_jacobi_simd)
KT_EIG_ENTRY(ql_entry, ml_eigh_tridiag_ql)
KT_EIG_ENTRY(two_sided_entry, ml_eigh_jacobi_small)

// Worst ratios of one kernel on one family: |A-VWVt|, |I-VtV|, |w-w_ref| (normwise), and
// max |w_i - w_ref_i| / (|w_ref_i| n ulp) (relative, every eigenvalue).
struct Worst {
  double res = 0, orth = 0, err = 0, rel = 0;
  void add(double r, double o, double e, double l) {
    res = std::max(res, r);
    orth = std::max(orth, o);
    err = std::max(err, e);
    rel = std::max(rel, l);
  }
};
struct Stats {
  std::map<std::string, Worst> jac, ql;
  std::map<std::string, Worst> jac8, two8, ql8;  // n <= 8: with the two-sided register kernel
  int max_sweeps[33] = {};
  double sum_sweeps[33] = {};
  int count_sweeps[33] = {};
};

struct Ratios {
  double res, orth, err, rel;
};
Ratios ratios(const Mat &A, const float *w, const float *v) {
  const int n = A.r;
  const kt::EigRatios x = kt::eig_ratios(A, w, v);
  const auto ref = kt::jacobi_eigenvalues_relative(A);
  double err = 0, rel = 0;
  for (int i = 0; i < n; ++i) {
    err = std::max(err, std::fabs(w[i] - ref[i]));
    if (ref[i] != 0) rel = std::max(rel, std::fabs(w[i] - ref[i]) / std::fabs(ref[i]));
  }
  return {x.resid, x.orth, err / x.scale, rel / (n * kt::kUlp)};
}

// One batch: every family (subset: a few, to keep the runner's time in check), two poisoned
// matrices (NaN / +-Inf in the read triangle), NaN in every unread entry; eigh at group size
// 32 and eigh_tridiag_ql on it for the comparison. extra: also eigvalsh (bitwise eigh's values
// and info) and, for n <= 16, eigh and eigvalsh at group size 16 (bitwise the same outputs).
void check_batch(Report &rep, int n, int uplo, std::mt19937_64 &rng, Stats &st, bool subset,
                 bool extra) {
  kt::Families fams;
  for (auto &f : kt::eig_kernel_families(n, rng, false)) {
    const std::string &k = f.first;
    if (!subset || k == "gaussian" || k == "identity" || k == "clustered" || k == "rankdef" ||
        k == "graded_pd1e-6" || k == "scale1e-30")
      fams.push_back(f);
  }
  kt::EigBatch eb = kt::eig_batch(fams, n, uplo, rng);
  const auto &items = eb.items;
  const auto &poison = eb.poison;
  const auto &a = eb.a;
  const int batch = int(items.size());
  const size_t nw = size_t(batch) * n, nv = size_t(batch) * n * n;
  std::vector<float> w(nw, -7.f), v(nv, -7.f), w2(nw, -7.f), wq(nw, -7.f), vq(nv, -7.f);
  std::vector<int> info(batch, -1), info2(batch, -1), infoq(batch, -1);
  const ml_params p{n, n, uplo, 0, batch, 0};
  EigArgs args{p, a.data(), w.data(), v.data(), info.data()};
  EigArgs args2{p, a.data(), w2.data(), nullptr, info2.data()};
  ml::kernel_runner::run(32, batch, 0, eigh_entry, &args);
  if (extra) ml::kernel_runner::run(32, batch, 0, eigvalsh_entry, &args2);
  if (extra && n <= 16) {  // CUDA's 16-lane groups: bitwise the same
    std::vector<float> w16(nw, -7.f), v16(nv, -7.f), w216(nw, -7.f);
    std::vector<int> info16(batch, -1), info216(batch, -1);
    EigArgs a16{p, a.data(), w16.data(), v16.data(), info16.data()};
    EigArgs a216{p, a.data(), w216.data(), nullptr, info216.data()};
    ml::kernel_runner::run(16, batch, 0, eigh_entry, &a16);
    ml::kernel_runner::run(16, batch, 0, eigvalsh_entry, &a216);
    char at[96];
    std::snprintf(at, sizeof at, "n=%d uplo=%d: group size 16 == 32 (bitwise)", n, uplo);
    rep.expect(std::memcmp(w16.data(), w.data(), nw * 4) == 0 &&
                   std::memcmp(v16.data(), v.data(), nv * 4) == 0 &&
                   std::memcmp(w216.data(), w2.data(), nw * 4) == 0 && info16 == info &&
                   info216 == info2,
               at);
  }
  // The comparison: eigh_tridiag_ql one lane per matrix (its algorithm at any group size).
  EigArgs argsq{p, a.data(), wq.data(), vq.data(), infoq.data()};
  ml::kernel_runner::run(1, batch, ml_eigh_tridiag_ql_scratch_floats(n, n), ql_entry, &argsq);
  // n <= 8: also the two-sided Jacobi of eigh_jacobi_small (relative stopping test).
  std::vector<float> wt(nw, -7.f), vt(nv, -7.f);
  std::vector<int> infot(batch, -1);
  EigArgs argst{p, a.data(), wt.data(), vt.data(), infot.data()};
  if (n <= 8) ml::kernel_runner::run(1, batch, 0, two_sided_entry, &argst);

  for (int b = 0; b < batch; ++b) {
    const std::string fam = items[b].first;
    char atb[160];
    std::snprintf(atb, sizeof atb, "%s n=%d %s #%d", uplo == ML_K_LOWER ? "eigh-L" : "eigh-U",
                  n, fam.c_str(), b);
    const std::string at = atb;
    const float *wb = w.data() + size_t(b) * n, *w2b = w2.data() + size_t(b) * n;
    const float *vb = v.data() + size_t(b) * n * n;
    if (poison[b]) {
      rep.expect(kt::all_nan(wb, n) && kt::all_nan(vb, size_t(n) * n), at + " all NaN");
      if (extra) rep.expect(kt::all_nan(w2b, n) && info2[b] == ML_INFO_NONFINITE, at + " eigvalsh");
      rep.expect(info[b] == ML_INFO_NONFINITE, at + " info");
      continue;
    }
    rep.expect(kt::all_finite(wb, n) && kt::all_finite(vb, size_t(n) * n), at + " finite");
    rep.expect((info[b] & 0xffff) == 0, at + " info converged");
    if (extra) {
      rep.expect(info[b] == info2[b], at + " eigvalsh info == eigh info");
      rep.expect(std::memcmp(wb, w2b, sizeof(float) * n) == 0, at + " eigvalsh == eigh values");
    }
    const int sweeps = info[b] >> ML_INFO_SWEEPS_SHIFT;
    if (fam == "gaussian" || fam == "wilkinson") {
      st.max_sweeps[n] = std::max(st.max_sweeps[n], sweeps);
      st.sum_sweeps[n] += sweeps;
      ++st.count_sweeps[n];
    }
    if (fam == "gaussian" && n >= 2) rep.expect(sweeps > 0, at + " sweep count in info");
    bool asc = true;
    for (int i = 1; i < n; ++i) asc = asc && wb[i - 1] <= wb[i];
    rep.expect(asc, at + " ascending");
    const Mat A = kt::read_symmetric(a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    if (fam == "zero" || fam == "identity" || fam == "diagonal" || n == 1) {
      // Diagonal: no sweep, the diagonal itself (sorted) and the identity's columns.
      std::vector<float> d(n);
      for (int i = 0; i < n; ++i) d[i] = float(A(i, i));
      std::sort(d.begin(), d.end());
      bool exact = sweeps == 0 && std::memcmp(d.data(), wb, sizeof(float) * n) == 0;
      for (int i = 0; i < n; ++i) {
        int ones = 0;
        for (int j = 0; j < n; ++j) {
          const float e = vb[size_t(i) * n + j];
          exact = exact && (e == 0.f || e == 1.f);
          ones += e == 1.f;
        }
        exact = exact && ones == 1;
      }
      rep.expect(exact, at + " diagonal: exact, no sweep");
    }
    const Ratios x = ratios(A, wb, vb);
    rep.ratio(x.res, kEigLimit, at + " |A-VWVt|");
    rep.ratio(x.orth, kEigLimit, at + " |I-VtV|");
    rep.ratio(x.err, kEigLimit, at + " |w-w_ref|");
    st.jac[fam].add(x.res, x.orth, x.err, x.rel);
    const Ratios q = ratios(A, wq.data() + size_t(b) * n, vq.data() + size_t(b) * n * n);
    st.ql[fam].add(q.res, q.orth, q.err, q.rel);
    if (n <= 8) {
      const Ratios t = ratios(A, wt.data() + size_t(b) * n, vt.data() + size_t(b) * n * n);
      st.jac8[fam].add(x.res, x.orth, x.err, x.rel);
      st.two8[fam].add(t.res, t.orth, t.err, t.rel);
      st.ql8[fam].add(q.res, q.orth, q.err, q.rel);
    }
  }
}

// p.max_iter = 1: random matrices (which need more than one sweep) interleaved with diagonal
// ones, at group size 32 and 16: the former all NaN with NOT_CONVERGED and one sweep, the
// latter exact and bitwise as under the default cap.
void check_cap(Report &rep, std::mt19937_64 &rng) {
  for (int n : {5, 16, 24, 32}) {
    for (int gs : {16, 32}) {
      if (n > gs) continue;
      const int batch = 4;
      std::vector<float> a;
      for (int b = 0; b < batch; ++b) {
        Mat m(n, n);
        if (b % 2 == 0) {
          Mat g = kt::gaussian(rng, n, n);
          m = kt::matmul(g, kt::transpose(g));
        } else {
          for (int i = 0; i < n; ++i) m(i, i) = std::normal_distribution<>()(rng);
        }
        auto v = kt::to_float(m);
        a.insert(a.end(), v.begin(), v.end());
      }
      for (bool vec : {true, false}) {
        std::vector<float> w(size_t(batch) * n), v(size_t(batch) * n * n), wd(w), vd(v);
        std::vector<int> info(batch), infod(batch);
        EigArgs capped{{n, n, ML_K_LOWER, 1, batch, 0}, a.data(), w.data(), vec ? v.data() : nullptr,
                       info.data()};
        EigArgs dflt{{n, n, ML_K_LOWER, 0, batch, 0}, a.data(), wd.data(), vec ? vd.data() : nullptr,
                     infod.data()};
        auto fn = vec ? eigh_entry : eigvalsh_entry;
        ml::kernel_runner::run(gs, batch, 0, fn, &capped);
        ml::kernel_runner::run(gs, batch, 0, fn, &dflt);
        char at[96];
        std::snprintf(at, sizeof at, "max_iter=1 n=%d gs=%d %s", n, gs, vec ? "eigh" : "eigvalsh");
        for (int b = 0; b < batch; ++b) {
          const float *wb = w.data() + size_t(b) * n, *vb = v.data() + size_t(b) * n * n;
          if (b % 2 == 0) {
            rep.expect(info[b] == ((1 << ML_INFO_SWEEPS_SHIFT) | ML_INFO_NOT_CONVERGED),
                       std::string(at) + " NOT_CONVERGED after one sweep");
            rep.expect(kt::all_nan(wb, n) && (!vec || kt::all_nan(vb, size_t(n) * n)),
                       std::string(at) + " NaN outputs");
            rep.expect((infod[b] & 0xffff) == 0 && (infod[b] >> ML_INFO_SWEEPS_SHIFT) > 1,
                       std::string(at) + " converges under the default cap");
          } else {
            std::vector<float> d(n);
            for (int i = 0; i < n; ++i) d[i] = a[size_t(b) * n * n + size_t(i) * n + i];
            std::sort(d.begin(), d.end());
            rep.expect(info[b] == 0 && std::memcmp(d.data(), wb, sizeof(float) * n) == 0 &&
                           std::memcmp(wb, wd.data() + size_t(b) * n, sizeof(float) * n) == 0 &&
                           (!vec || std::memcmp(vb, vd.data() + size_t(b) * n * n,
                                                sizeof(float) * n * n) == 0),
                       std::string(at) + " diagonal exact and as under the default cap");
          }
        }
      }
    }
  }
}

// group_offset shifts the matrices a launch handles; info may be null; groups >= batch return.
void check_offset(Report &rep, std::mt19937_64 &rng) {
  kt::check_eig_offset(rep, 11, rng, eigh_entry, 32, 5, 16, 1);  // two groups past the batch
  rep.expect(ml_eigh_jacobi_simd_fits(32, 32, 0) && !ml_eigh_jacobi_simd_fits(33, 33, 1 << 20) &&
                 !ml_eigh_jacobi_simd_fits(4, 5, 0) && !ml_eigh_jacobi_simd_fits(0, 0, 0) &&
                 ml_eigvalsh_jacobi_simd_fits(1, 1, 0) && ml_eigh_jacobi_simd_scratch_floats(32, 32) == 0,
             "fits");
}

void print_table(const Stats &st) {
  std::printf("worst ratios per family over every n and both triangles (limit %.0f); rel = max "
              "|w_i - w_ref_i| / (|w_ref_i| n ulp)\n",
              kEigLimit);
  std::printf("%-16s | %9s %9s %9s %11s | %9s %9s %9s %11s\n", "family", "jac res", "orth",
              "|w-wref|", "rel", "ql res", "orth", "|w-wref|", "rel");
  for (const auto &[fam, j] : st.jac) {
    const Worst &q = st.ql.at(fam);
    std::printf("%-16s | %9.3g %9.3g %9.3g %11.3g | %9.3g %9.3g %9.3g %11.3g\n", fam.c_str(),
                j.res, j.orth, j.err, j.rel, q.res, q.orth, q.err, q.rel);
  }
  std::printf("n <= 8: worst |w-wref| (normwise) and rel, this kernel | two-sided "
              "eigh_jacobi_small | eigh_tridiag_ql\n");
  for (const auto &[fam, j] : st.jac8) {
    const Worst &t = st.two8.at(fam), &q = st.ql8.at(fam);
    std::printf("%-16s | %9.3g %11.3g | %9.3g %11.3g | %9.3g %11.3g\n", fam.c_str(), j.err, j.rel,
                t.err, t.rel, q.err, q.rel);
  }
  std::printf("sweeps (gaussian, wilkinson) per n: max/mean");
  for (int n = 2; n <= 32; ++n)
    if (st.count_sweeps[n])
      std::printf(" %d:%d/%.1f", n, st.max_sweeps[n], st.sum_sweeps[n] / st.count_sweeps[n]);
  std::printf("\n");
}

}  // namespace

int main() {
  Report rep;
  std::mt19937_64 rng(2026);
  const int reps = std::getenv("KT_REPS") ? std::atoi(std::getenv("KT_REPS")) : 1;
  // KT_FULL=1: every n, every family in both triangles with eigvalsh and group size 16 (about
  // 8x the time); default: the sizes below, every family in the lower triangle, a subset in the
  // upper one with the eigvalsh and group-size-16 comparisons.
  const bool full = std::getenv("KT_FULL") && std::atoi(std::getenv("KT_FULL"));
  Stats st;
  // Every n up to 17 (the 8- and 16-row register paths, their edges 8 / 9 and 16 / 17, and the
  // whole 16-lane range); past 17 the edges of the 24- and 32-row paths (24, 25, 32) and an odd
  // n inside each (21, and 31: the schedule's dummy player at the largest odd n). The sizes in
  // between take the same paths; KT_FULL=1 runs every n 1..32.
  std::vector<int> sizes;
  for (int n = 1; n <= 32; ++n)
    if (full || n <= 17 || n == 21 || n == 24 || n == 25 || n >= 31) sizes.push_back(n);
  for (int n : sizes) {
    kt::Timer timer("eigh_simd", n, n, 32);
    for (int r = 0; r < reps; ++r) {
      check_batch(rep, n, ML_K_LOWER, rng, st, false, full);
      check_batch(rep, n, ML_K_UPPER, rng, st, !full, true);
    }
  }
  check_cap(rep, rng);
  check_offset(rep, rng);
  print_table(st);
  std::printf("eigh_simd: %d checks, %d failures, worst ratio %.3g (%s)\n", rep.checks,
              rep.failures, rep.worst, rep.worst_where.c_str());
  return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
}
