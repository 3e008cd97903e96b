// SVD kernel tests (core/kernels/svd_bidiag_qr.h) through the CPU runner (one thread per lane,
// real barriers) at several group sizes: square, tall and wide shapes on the matrix families of
// docs/design.md section 7, judged by LAPACK's ratios in double, singular values against a double one-sided
// Jacobi reference, non-finite isolation inside a batch, the info word, and the scratch limits.
// Every check runs in both V modes: V in device memory (flags 0) and V in shared scratch
// (ML_K_SVD_V_SHARED), and the two must give bitwise the same singular values.
// Usage: test_svd <suite>   suites: square shapes limits bisect
#include "kernel_runner.h"
#include "../../core/kernels/svd_bidiag_qr.h"
#include "../../metal/launch_config.h"
#include "kernel_test_util.h"

using kt::Mat;
using kt::Report;
using kt::SvdArgs;

namespace {

using kt::kSvdLimit;

KT_SVD_ENTRY(svd_entry, ml_svd_bidiag_qr)
KT_SVDVALS_ENTRY(svdvals_entry, ml_svdvals_bidiag_qr)

std::string where(const char *op, int m, int n, int gs, int flags, const std::string &fam,
                  int idx) {
  char b[180];
  std::snprintf(b, sizeof b, "%s%s %dx%d gs=%d %s #%d", op,
                (flags & ML_K_SVD_V_SHARED) ? "[vshared]" : "", m, n, gs, fam.c_str(), idx);
  return b;
}

// Runs a batch (every family, plus one matrix poisoned with NaN/Inf in the middle) through
// svd and svdvals and checks each matrix on its own. flags: p.flags of both launches (extra
// bits beyond ML_K_SVD_V_SHARED must be ignored). Returns the singular values.
std::vector<float> check_svd(Report &rep, int m, int n, int gs, std::mt19937_64 &rng, bool all,
                             int flags = 0) {
  kt::Timer timer((flags & ML_K_SVD_V_SHARED) ? "svd[vshared]" : "svd", m, n, gs);
  auto fams = kt::svd_families(m, n, rng, all);
  const int poisoned = int(fams.size()) / 2;
  const kt::NamedBatch in = kt::poisoned_batch(fams, m, n, poisoned,
                                               -std::numeric_limits<float>::infinity(), rng);
  const int batch = in.size();
  kt::SvdOut o(m, n, batch);
  SvdArgs args = o.svd_args(in.a.data(), flags);
  const int scratch = ml_svd_bidiag_qr_scratch_floats_flags(m, n, flags);
  ml::kernel_runner::run(gs, batch, scratch, svd_entry, &args);
  SvdArgs args2 = o.svdvals_args(in.a.data(), flags);
  ml::kernel_runner::run(gs, batch, ml_svdvals_bidiag_qr_scratch_floats_flags(m, n, flags),
                         svdvals_entry, &args2);

  for (int b = 0; b < batch; ++b) {
    const std::string at = where("svd", m, n, gs, flags, in.name[b], b);
    kt::check_svd_matrix(rep, at, in.name[b], b == poisoned,
                         kt::from_float(in.a.data() + size_t(b) * m * n, m, n), o, b);
  }
  return o.s;
}

// Both modes on the same batch: identical singular values and info (the QR on B does not
// depend on where V lives); each mode checked on its own by check_svd.
void check_both(Report &rep, int m, int n, int gs, std::mt19937_64 &rng, bool all) {
  const auto state = rng;
  const auto s0 = check_svd(rep, m, n, gs, rng, all, 0);
  rng = state;  // same matrices
  const auto s1 = check_svd(rep, m, n, gs, rng, all, ML_K_SVD_V_SHARED | ML_K_UPPER);
  bool same = s0.size() == s1.size();
  for (size_t i = 0; same && i < s0.size(); ++i)
    same = std::memcmp(&s0[i], &s1[i], sizeof(float)) == 0 || (std::isnan(s0[i]) && std::isnan(s1[i]));
  rep.expect(same, where("svd", m, n, gs, ML_K_SVD_V_SHARED, "both modes", 0) +
                       " s bitwise equal across V modes");
}

// The sweep cap: max_iter = 1 stops early with NOT_CONVERGED, one sweep counted, every output NaN.
void check_cap(Report &rep, int gs, std::mt19937_64 &rng) {
  const int n = 16;
  auto a = kt::to_float(kt::gaussian(rng, n, n));
  for (int flags : {0, ML_K_SVD_V_SHARED}) {
    std::vector<float> u(n * n), s(n), vt(n * n);
    int info = -1;
    SvdArgs args{{n, n, flags, 1, 1, 0}, a.data(), u.data(), s.data(), vt.data(), &info};
    ml::kernel_runner::run(gs, 1, ml_svd_bidiag_qr_scratch_floats_flags(n, n, flags), svd_entry,
                           &args);
    const std::string at = "svd flags=" + std::to_string(flags) + " gs=" + std::to_string(gs);
    kt::expect_svd_capped(rep, at, n, u.data(), s.data(), vt.data(), info);
  }
  // info may be null.
  std::vector<float> s2(n, -7.f);
  SvdArgs args2{{n, n, 0, 0, 1, 0}, a.data(), nullptr, s2.data(), nullptr, nullptr};
  ml::kernel_runner::run(gs, 1, ml_svdvals_bidiag_qr_scratch_floats(n, n), svdvals_entry, &args2);
  rep.expect(kt::positive_descending_ends(s2.data(), n),
             "svdvals without info gs=" + std::to_string(gs));
}

void test_square(Report &rep) {
  std::mt19937_64 rng(4321);
  const int sizes[] = {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 63, 64, 65};
  for (int n : sizes)
    for (int gs : {1, 7, 32, 37, 64, 128}) {
      if (gs == 37 && n > 33) continue;
      // Thread-per-lane is slow: groups wider than the matrix run at 64 lanes on every size up
      // to 33 but 31 and 32 (one simdgroup's edge, which 32 lanes take above), at 128 (four
      // simdgroups) on 1, 2, 17 and 33 (tiny, and one past one and two simdgroups' rows).
      if (gs == 64 && (n == 31 || n == 32)) continue;
      if (gs == 128 && n != 1 && n != 2 && n != 17 && n != 33) continue;
      check_both(rep, n, n, gs, rng, gs != 7 || n <= 17);
    }
  check_cap(rep, 1, rng);
  check_cap(rep, 32, rng);
}

void test_shapes(Report &rep) {
  std::mt19937_64 rng(8765);
  const int shapes[][2] = {{64, 32}, {32, 64}, {100, 7}, {7, 100}, {65, 33}, {33, 65},
                           {1, 9},   {9, 1},   {1, 40},  {40, 1},  {2, 17},  {17, 2}};
  for (auto &sh : shapes)
    for (int gs : {1, 7, 64}) check_both(rep, sh[0], sh[1], gs, rng, gs != 7);
}

// Largest square n whose scratch in mode flags fits the budget.
int max_square(int flags, int budget) {
  int n = 1;
  while (ml_svd_bidiag_qr_fits_flags(n + 1, n + 1, flags, budget)) ++n;
  return n;
}

void test_limits(Report &rep) {
  std::mt19937_64 rng(99);
  const int metal_n = 83, cuda_n = 234;  // largest square n in the Metal / sm_90 budgets
  const int metal_vs = 60, cuda_vs = 167;  // the same with V in shared scratch
  const int V = ML_K_SVD_V_SHARED;
  rep.expect(ml_svd_bidiag_qr_fits(metal_n, metal_n, ML_METAL_SCRATCH_FLOATS) &&
                 !ml_svd_bidiag_qr_fits(metal_n + 1, metal_n + 1, ML_METAL_SCRATCH_FLOATS),
             "svd Metal limit is 83");
  rep.expect(ml_svd_bidiag_qr_fits(cuda_n, cuda_n, ML_CUDA_SCRATCH_FLOATS_SM90) &&
                 !ml_svd_bidiag_qr_fits(cuda_n + 1, cuda_n + 1, ML_CUDA_SCRATCH_FLOATS_SM90),
             "svd sm_90 limit is 234");
  rep.expect(max_square(0, ML_METAL_SCRATCH_FLOATS) == metal_n &&
                 max_square(0, ML_CUDA_SCRATCH_FLOATS_SM90) == cuda_n,
             "device-V limits via the flags helpers");
  rep.expect(max_square(V, ML_METAL_SCRATCH_FLOATS) == metal_vs, "shared-V Metal limit is 60");
  rep.expect(max_square(V, ML_CUDA_SCRATCH_FLOATS_SM90) == cuda_vs, "shared-V sm_90 limit is 167");
  std::printf("limits: device V: Metal %d, sm_80 %d, sm_90 %d; shared V: Metal %d, sm_80 %d, "
              "sm_90 %d\n",
              max_square(0, ML_METAL_SCRATCH_FLOATS), max_square(0, ML_CUDA_SCRATCH_FLOATS_SM80),
              max_square(0, ML_CUDA_SCRATCH_FLOATS_SM90), max_square(V, ML_METAL_SCRATCH_FLOATS),
              max_square(V, ML_CUDA_SCRATCH_FLOATS_SM80), max_square(V, ML_CUDA_SCRATCH_FLOATS_SM90));
  for (int n : {16, 32, 64, 128})
    std::printf("scratch floats n=%d: device V %d, shared V %d\n", n,
                ml_svd_bidiag_qr_scratch_floats_flags(n, n, 0),
                ml_svd_bidiag_qr_scratch_floats_flags(n, n, V));
  // The helpers: the old function is the device-V mode; choose_flags keeps the other bits.
  for (int n : {1, 16, 60, 61, 83, 167, 168, 234})
    rep.expect(ml_svd_bidiag_qr_scratch_floats_flags(n, n, 0) ==
                       ml_svd_bidiag_qr_scratch_floats(n, n) &&
                   ml_svd_bidiag_qr_scratch_floats_flags(n, n, V | 1) ==
                       ml_svd_bidiag_qr_scratch_floats(n, n) + (n | 1) * n &&
                   ml_svdvals_bidiag_qr_scratch_floats_flags(n, n, V) ==
                       ml_svdvals_bidiag_qr_scratch_floats(n, n) &&
                   ml_svdvals_bidiag_qr_choose_flags(n, n, 1, 1 << 30) == 1,
               "scratch helpers n=" + std::to_string(n));
  rep.expect(ml_svd_bidiag_qr_choose_flags(metal_vs, metal_vs, 1, ML_METAL_SCRATCH_FLOATS) ==
                     (V | 1) &&
                 ml_svd_bidiag_qr_choose_flags(metal_vs + 1, metal_vs + 1, V | 1,
                                               ML_METAL_SCRATCH_FLOATS) == 1 &&
                 ml_svd_bidiag_qr_choose_flags(cuda_vs, cuda_vs, 0, ML_CUDA_SCRATCH_FLOATS_SM90) ==
                     V &&
                 ml_svd_bidiag_qr_choose_flags(cuda_vs + 1, cuda_vs + 1, V,
                                               ML_CUDA_SCRATCH_FLOATS_SM90) == 0 &&
                 ml_svd_bidiag_qr_choose_flags(40, 200, 0, ML_CUDA_SCRATCH_FLOATS_SM90) == V &&
                 ml_svd_bidiag_qr_choose_flags(0, 5, 0, 1 << 30) == 0,
             "choose_flags");
  // Either side of each mode's limits, in the mode choose_flags picks, at the suggested group
  // size and at 1 (sequential); tall and wide shapes next to the Metal shared-V limit.
  for (int n : {metal_vs, metal_vs + 1}) {
    const int f = ml_svd_bidiag_qr_choose_flags(n, n, 0, ML_METAL_SCRATCH_FLOATS);
    rep.expect((f == V) == (n == metal_vs), "Metal picks shared V up to 60");
    check_svd(rep, n, n, ml::metal::group_size_svd_bidiag_qr(n, n, 1), rng, false, f);
    check_svd(rep, n, n, 1, rng, n == metal_vs, f);
  }
  check_svd(rep, metal_n, metal_n, ml::metal::group_size_svd_bidiag_qr(metal_n, metal_n, 1), rng, false);
  check_svd(rep, metal_n, metal_n, 1, rng, true);
  for (int n : {cuda_vs, cuda_vs + 1})
    check_svd(rep, n, n, 1, rng, false,
              ml_svd_bidiag_qr_choose_flags(n, n, 0, ML_CUDA_SCRATCH_FLOATS_SM90));
  check_svd(rep, cuda_n, cuda_n, 1, rng, false);
  check_svd(rep, 256, 64, 1, rng, false);
  check_svd(rep, 64, 256, 1, rng, false);
  check_svd(rep, 256, 64, 1, rng, false, V);
  check_svd(rep, 64, 256, 1, rng, false, V);
  // Tall/wide with the small side at the shared-V Metal limit (k = 60 needs M = 60 only).
  for (int k : {40, 41}) {
    int big = k;  // largest long side whose shared-V scratch fits Metal
    while (ml_svd_bidiag_qr_fits_flags(big + 1, k, V, ML_METAL_SCRATCH_FLOATS)) ++big;
    for (int mm : {big, big + 1}) {
      const int f = ml_svd_bidiag_qr_choose_flags(mm, k, 0, ML_METAL_SCRATCH_FLOATS);
      rep.expect((f == V) == (mm == big), "Metal tall choice " + std::to_string(mm) + "x" +
                                              std::to_string(k));
      check_svd(rep, mm, k, 64, rng, false, f);
      check_svd(rep, k, mm, 37, rng, false, f);
    }
  }
}

KT_SVDVALS_ENTRY(svdvals_bisect_entry, ml_svdvals_bidiag_bisect)

// ml_svdvals_bidiag_bisect on every family (one matrix poisoned with NaN/Inf in the middle)
// at group size gs: values against the double reference and against ml_svdvals_bidiag_qr on
// the same batch (the same bidiagonal), descending and >= 0, the info word (halvings, the
// rank-deficiency bit where the family decides it), non-finite isolation.
void check_svdvals_bisect(Report &rep, int m, int n, int gs, std::mt19937_64 &rng, bool all) {
  kt::Timer timer("svdvals-bisect", m, n, gs);
  auto fams = kt::svd_families(m, n, rng, all);
  const int k = std::min(m, n), big = std::max(m, n);
  const int poisoned = int(fams.size()) / 2;
  const kt::NamedBatch in = kt::poisoned_batch(fams, m, n, poisoned,
                                               std::numeric_limits<float>::infinity(), rng);
  const int batch = in.size();
  const std::vector<std::string> &names = in.name;
  const std::vector<float> &a = in.a;
  std::vector<float> s(size_t(batch) * k, -7.f), sq(s);
  std::vector<int> info(batch, -1), infoq(batch, -1);
  SvdArgs args{{m, n, 0, 0, batch, 0}, a.data(), nullptr, s.data(), nullptr, info.data()};
  SvdArgs argsq{{m, n, 0, 0, batch, 0}, a.data(), nullptr, sq.data(), nullptr, infoq.data()};
  const int scratch = ml_svdvals_bidiag_bisect_scratch_floats_flags(m, n, 0);
  ml::kernel_runner::run(gs, batch, scratch, svdvals_bisect_entry, &args);
  ml::kernel_runner::run(gs, batch, scratch, svdvals_entry, &argsq);
  for (int b = 0; b < batch; ++b) {
    const std::string at = where("svdvals-bisect", m, n, gs, 0, names[b], b);
    const float *sb = s.data() + size_t(b) * k, *sqb = sq.data() + size_t(b) * k;
    if (b == poisoned) {
      rep.expect(kt::all_nan(sb, k) && info[b] == ML_INFO_NONFINITE, at + " NaN, NONFINITE");
      continue;
    }
    bool ordered = kt::all_finite(sb, k) && sb[k - 1] >= 0.0f;
    for (int i = 1; i < k; ++i) ordered = ordered && sb[i - 1] >= sb[i];
    rep.expect(ordered, at + " finite, descending, >= 0");
    rep.expect((info[b] & (ML_INFO_NOT_CONVERGED | ML_INFO_NONFINITE)) == 0, at + " info");
    const int halvings = info[b] >> ML_INFO_SWEEPS_SHIFT;
    rep.expect(halvings <= 25, at + " at most 25 halvings");
    if (names[b] == "gaussian" && k >= 2) rep.expect(halvings > 0, at + " halvings counted");
    const auto ref = kt::reference_singular_values(kt::from_float(a.data() + size_t(b) * m * n, m, n));
    double err = 0, diff = 0;
    for (int i = 0; i < k; ++i) {
      err = std::max(err, std::fabs(sb[i] - ref[i]));
      diff = std::max(diff, std::fabs(double(sb[i]) - sqb[i]));
    }
    const double scale = ref[0] > 0 ? ref[0] * big * kt::kUlp : 1.0;
    rep.ratio(err / scale, kSvdLimit, at + " s vs double");
    rep.ratio(diff / scale, kSvdLimit, at + " s vs svdvals_bidiag_qr");
    kt::expect_svd_rank_bit(rep, at, names[b], k, info[b]);
  }
}

// The cap: max_iter = 1 halving cannot place the values of a gaussian 16 x 16: NaN values,
// NOT_CONVERGED with 1 counted; a diagonal matrix needs none and comes out exact (|d| sorted).
void check_bisect_cap(Report &rep, int gs, std::mt19937_64 &rng) {
  const int n = 16;
  auto a = kt::to_float(kt::gaussian(rng, n, n));
  std::vector<float> dg(size_t(n) * n, 0.0f), ref;
  for (int i = 0; i < n; ++i) ref.push_back(std::fabs(dg[size_t(i) * n + i] = (i % 2 ? -1.5f : 1.0f) * (1 + i)));
  a.insert(a.end(), dg.begin(), dg.end());
  std::sort(ref.rbegin(), ref.rend());
  std::vector<float> s(2 * n, -7.f);
  std::vector<int> info(2, -1);
  SvdArgs args{{n, n, 0, 1, 2, 0}, a.data(), nullptr, s.data(), nullptr, info.data()};
  ml::kernel_runner::run(gs, 2, ml_svdvals_bidiag_bisect_scratch_floats_flags(n, n, 0),
                         svdvals_bisect_entry, &args);
  const std::string at = "svdvals-bisect max_iter=1 gs=" + std::to_string(gs);
  rep.expect((info[0] & ML_INFO_NOT_CONVERGED) && (info[0] >> ML_INFO_SWEEPS_SHIFT) == 1, at + " cap");
  rep.expect(kt::all_nan(s.data(), n), at + " capped: NaN values");
  rep.expect(info[1] == 0 && std::memcmp(s.data() + n, ref.data(), sizeof(float) * n) == 0,
             at + " diagonal: exact, no halving");
}

// Bisection: square sizes at several group sizes, tall and wide shapes, the sm_90 limit, the cap.
void test_bisect(Report &rep) {
  std::mt19937_64 rng(2468);
  for (int n : {1, 2, 3, 5, 8, 16, 17, 32, 33, 64, 65})
    for (int gs : {1, 7, 32, 64}) check_svdvals_bisect(rep, n, n, gs, rng, gs != 64 || n <= 33);
  const int shapes[][2] = {{64, 32}, {32, 64}, {100, 7}, {7, 100}, {1, 9}, {9, 1}, {2, 17}, {17, 2}};
  for (auto &sh : shapes)
    for (int gs : {1, 32}) check_svdvals_bisect(rep, sh[0], sh[1], gs, rng, true);
  check_svdvals_bisect(rep, 128, 128, 128, rng, false);
  check_svdvals_bisect(rep, 234, 234, 1, rng, false);
  for (int gs : {1, 7, 32}) check_bisect_cap(rep, gs, rng);
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_report_suite(argc, argv, "test_svd square|shapes|limits|bisect",
                              {{"square", test_square}, {"shapes", test_shapes},
                               {"limits", test_limits}, {"bisect", test_bisect}});
}
