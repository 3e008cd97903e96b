// Kernel tests: every portable kernel of core/kernels through the CPU runner (one thread per
// lane, real barriers) at several group sizes, on the sizes either side of its limits and on
// hard matrix families, judged by LAPACK's ratios in double. Also the runner's own simd ops
// and the group-size-1 build the CPU backend uses (cpu/cpu_kernels.cpp).
// Usage: test_kernels <suite>   suites: runner qr eigh bisect serial race (race: for -DML_KERNELS_TSAN=ON)
#include "kernel_runner.h"
#include "../../core/kernels/eigh_tridiag_ql.h"
#include "../../core/kernels/qr_householder.h"
#include "../../cpu/cpu_kernels.h"
#include "metal_linalg/metal_linalg.h"
#include "../../metal/launch_config.h"
#include "kernel_test_util.h"

// Under AddressSanitizer (tools/test.sh's second ctest) the bisect suite runs fewer families at
// its largest sizes: the sanitizer checks the kernels' indexing at the scratch limits there; the
// Release run checks every family's numbers at the same sizes.
#if defined(__SANITIZE_ADDRESS__)
#define KT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KT_ASAN 1
#endif
#endif

using kt::Mat;
using kt::EigArgs;
using kt::QrArgs;
using kt::Report;

namespace {

using kt::kEigLimit;
using kt::kQrLimit;
using kt::kSvdLimit;

// check_qr / check_eig with gs = 0 run the CPU backend's group kernels at group size 1, with
// gs = kRegister its register kernels.
constexpr int kRegister = -1;

std::string where(const char *op, int m, int n, int gs, const std::string &fam, int idx) {
  char b[160];
  std::snprintf(b, sizeof b, "%s %dx%d gs=%d %s #%d", op, m, n, gs, fam.c_str(), idx);
  return b;
}

// Which families a configuration runs: big groups are slow in the thread-per-lane runner.
enum { kAll = 0, kCore = 1, kFew = 2 };
void keep_families(std::vector<std::pair<std::string, Mat>> &fams, int which) {
  if (which == kAll) return;
  std::vector<std::pair<std::string, Mat>> kept;
  for (auto &f : fams) {
    const bool few = f.first == "gaussian" || f.first == "graded";
    const bool core = few || f.first == "clustered" || f.first == "repeated" ||
                      f.first == "scale1e-30" || f.first == "rankdef" ||
                      f.first == "tridiag_fill" || f.first == "zero_cols";
    if (which == kFew ? few : core) kept.push_back(f);
  }
  fams.swap(kept);
}

// ---------------- runner self-test ----------------
struct RunnerArgs {
  std::vector<float> out;  // per lane: 8 results
};
void runner_kernel(const ml_ctx &ctx, void *u) {
  auto &r = *static_cast<RunnerArgs *>(u);
  const int l = ctx.lane;
  const float x = float(l + 1);
  float *o = r.out.data() + size_t(ctx.group_id) * ctx.group_size * 8 + size_t(l) * 8;
  o[0] = ml_simd_sum(ctx, x);
  o[1] = ml_simd_max(ctx, x);
  o[2] = ml_simd_min(ctx, x);
  o[3] = ml_simd_shuffle(ctx, x, (ml_simd_lane(ctx) + 1) % ml_simd_width(ctx));
  o[4] = ml_simd_shuffle_xor(ctx, x, 1);
  o[5] = ml_simd_broadcast(ctx, x, 0);
  o[6] = ml_group_sum(ctx, x, ctx.scratch);
  // Shared-memory exchange across simdgroups through a barrier.
  ctx.scratch[64 + l] = x;
  ml_barrier(ctx);
  o[7] = ctx.scratch[64 + (ctx.group_size - 1 - l)];
}
// Simdgroup 1 polls a shared word that lane 0 sets after a simd op, with no barrier between:
// no lane may keep another from running (the runner's fibers share threads).
void poll_kernel(const ml_ctx &ctx, void *u) {
  float *w = ctx.scratch;
  if (ctx.lane == 0) w[0] = 0.0f;
  ml_barrier(ctx);
  const float x = ml_simd_sum(ctx, 1.0f);
  if (ctx.lane == 0) ml_store_release_block_u32(w, 1u);
  if (ctx.lane == 32)
    while (ml_load_acquire_block_u32(w) == 0u) {
    }
  ml_barrier(ctx);
  static_cast<float *>(u)[size_t(ctx.group_id) * ctx.group_size + ctx.lane] = x;
}
// A read of lane 0's write with no barrier between them (a race the runner must expose).
void race_kernel(const ml_ctx &ctx, void *u) {
  if (ctx.lane == 0) ctx.scratch[0] = 7.0f;
  static_cast<float *>(u)[size_t(ctx.group_id) * ctx.group_size + ctx.lane] = ctx.scratch[0];
}

void test_runner_mode(Report &rep, const std::string &mode);
void test_runner(Report &rep) {
  // Every mode of the runner (kernel_runner.h); fibers on one thread (the default) also order
  // the lanes both ways, so a missing barrier shows.
  const int was = ml::kernel_runner::workers();
  for (int w : {1, 2, 3, 0}) {
    ml::kernel_runner::set_workers(w);
    if (ml::kernel_runner::workers() != w) continue;  // no fibers here
    test_runner_mode(rep, w == 0 ? " threads" : " workers=" + std::to_string(w));
    for (int gs : {33, 64, 100}) {
      std::vector<float> out(size_t(2) * gs, -1.0f);
      ml::kernel_runner::run(gs, 2, 1, poll_kernel, out.data());
      for (int l = 0; l < 2 * gs; ++l)
        rep.expect(out[l] == float(std::min(32, gs - (l % gs & ~31))),
                   "runner poll gs=" + std::to_string(gs) + " workers=" + std::to_string(w));
    }
    if (w == 1)
      for (int gs : {2, 32, 64}) {
        int stale = 0;
        for (int launch = 0; launch < 2; ++launch) {
          std::vector<float> out(size_t(gs), 0.0f);
          ml::kernel_runner::run(gs, 1, 1, race_kernel, out.data());
          for (float x : out) stale += x != 7.0f;
        }
        rep.expect(stale > 0, "runner exposes a missing barrier gs=" + std::to_string(gs));
      }
  }
  ml::kernel_runner::set_workers(was);
}

void test_runner_mode(Report &rep, const std::string &mode) {
  for (int gs : {1, 2, 7, 31, 32, 33, 64, 100, 128}) {
    RunnerArgs r;
    const int groups = 3;
    r.out.assign(size_t(groups) * gs * 8, -1.0f);
    ml::kernel_runner::run(gs, groups, 64 + gs, runner_kernel, &r);
    for (int g = 0; g < groups; ++g)
      for (int l = 0; l < gs; ++l) {
        const float *o = r.out.data() + (size_t(g) * gs + l) * 8;
        const int base = l & ~31, w = std::min(32, gs - base), sl = l & 31;
        double sum = 0;
        for (int i = 0; i < w; ++i) sum += base + i + 1;
        const std::string at =
            "runner" + mode + " gs=" + std::to_string(gs) + " lane=" + std::to_string(l);
        rep.expect(o[0] == float(sum), at + " simd_sum");
        rep.expect(o[1] == float(base + w), at + " simd_max");
        rep.expect(o[2] == float(base + 1), at + " simd_min");
        rep.expect(o[3] == float(base + (sl + 1) % w + 1), at + " simd_shuffle");
        const int partner = sl ^ 1;
        rep.expect(o[4] == float(partner < w ? base + partner + 1 : l + 1), at + " shuffle_xor");
        rep.expect(o[5] == float(base + 1), at + " broadcast");
        rep.expect(o[6] == float(double(gs) * (gs + 1) / 2), at + " group_sum");
        rep.expect(o[7] == float(gs - l), at + " barrier exchange");
      }
  }
}

// ---------------- QR ----------------
KT_QR_ENTRY(qr_entry, ml_qr_householder)

// Runs a batch through the kernel; the last matrix is poisoned with a NaN/Inf when poison is
// set, and every other matrix must stay finite and accurate.
void check_qr(Report &rep, int m, int n, int mode, int gs, std::mt19937_64 &rng, int families) {
  kt::Timer timer("qr", m, n, gs);
  auto fams = kt::general_families(m, n, rng);
  keep_families(fams, families);
  const kt::QrShape s(m, n, mode);
  const kt::NamedBatch in = kt::poisoned_batch(fams, m, n, int(fams.size()),
                                               -std::numeric_limits<float>::infinity(), rng);
  const int batch = in.size();
  kt::QrOut out(s, batch);
  QrArgs args = out.args(s, in.a.data(), true);
  if (gs <= 0) {  // the group-size-1 build of the CPU backend, one matrix per call
    std::vector<float> work(size_t(ml::cpu_kernels::scratch_floats(ML_OP_QR, m, n)));
    for (int b = 0; b < batch; ++b)
      out.info[b] = ml::cpu_kernels::run(
          ML_OP_QR, m, n, mode, in.a.data() + size_t(b) * m * n,
          mode == ML_K_QR_R ? nullptr : out.q.data() + size_t(b) * s.q_floats(),
          out.r.data() + size_t(b) * s.r_floats(), nullptr, work.data(), gs == kRegister);
  } else {
    ml::kernel_runner::run(gs, batch, ml_qr_householder_scratch_floats(m, n), qr_entry, &args);
  }
  const auto at_b = [&](const std::string &fam, int b) { return where(s.op, m, n, gs, fam, b); };
  kt::each_qr_matrix(rep, s, in, out, at_b, [&](int b, const std::string &at, const Mat &A,
                                                const Mat &R) {
    const std::string &fam = in.name[b];
    const int info = out.info[b];
    rep.expect((info & ~ML_INFO_RANK_DEFICIENT) == 0, at + " info");
    if (fam == "zero") rep.expect(info == ML_INFO_RANK_DEFICIENT, at + " info RANK_DEFICIENT");
    if (fam == "identity") rep.expect(info == 0, at + " info full rank");
    if (mode == ML_K_QR_R) {  // R^T R = A^T A (Q-less check), scaled by m
      rep.ratio(kt::rtr_ratio(A, R, m), kQrLimit, at + " |AtA-RtR|");
      return;
    }
    kt::check_q_factor(rep, at, s, A, out.q.data() + size_t(b) * s.q_floats(), R, m);
  });
}

void test_qr(Report &rep) {
  std::mt19937_64 rng(1234);
  const int metal_n = 89, cuda_n = 239;  // largest square n in the Metal / sm_90 budgets
  rep.expect(ml_qr_householder_max_n(ML_METAL_SCRATCH_FLOATS) == metal_n &&
                 ml_qr_householder_max_n(ML_CUDA_SCRATCH_FLOATS_SM90) == cuda_n,
             "qr max_n helper");
  rep.expect(ml_qr_householder_fits(metal_n, metal_n, ML_METAL_SCRATCH_FLOATS) &&
                 !ml_qr_householder_fits(metal_n + 1, metal_n + 1, ML_METAL_SCRATCH_FLOATS),
             "qr Metal limit is 89");
  rep.expect(ml_qr_householder_fits(cuda_n, cuda_n, ML_CUDA_SCRATCH_FLOATS_SM90) &&
                 !ml_qr_householder_fits(cuda_n + 1, cuda_n + 1, ML_CUDA_SCRATCH_FLOATS_SM90),
             "qr sm_90 limit is 239");
  const int sizes[] = {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 63, 64, 65};
  for (int n : sizes)
    for (int gs : {1, 7, 32, 64, 128}) {
      if (n > 17 && gs == 128) continue;  // thread-per-lane is slow; core families at >= 32
      check_qr(rep, n, n, ML_K_QR_REDUCED, gs, rng, gs <= 7 ? kAll : kCore);
    }
  const int shapes[][2] = {{1, 5}, {5, 1}, {17, 3}, {3, 17}, {64, 32}, {32, 64}, {65, 33}, {33, 65}, {40, 1}, {1, 40}};
  for (auto &s : shapes)
    for (int gs : {1, 7, 64}) {
      check_qr(rep, s[0], s[1], ML_K_QR_REDUCED, gs, rng, kAll);
      check_qr(rep, s[0], s[1], ML_K_QR_R, gs, rng, gs != 64 ? kAll : kCore);
      check_qr(rep, s[0], s[1], ML_K_QR_COMPLETE, gs, rng, gs != 64 ? kAll : kCore);
    }
  // Either side of the limits: at the limit (group sizes 1 and the preferred one).
  check_qr(rep, metal_n, metal_n, ML_K_QR_REDUCED, ml::metal::group_size_qr_householder(metal_n, metal_n, 1), rng, kCore);
  check_qr(rep, metal_n, metal_n, ML_K_QR_REDUCED, 1, rng, kAll);
  // Every square size up to the Metal limit sequentially; an odd group size every 6th size.
  for (int n = 1; n <= metal_n; ++n) {
    check_qr(rep, n, n, ML_K_QR_REDUCED, 1, rng, kFew);
    if (n % 6 == 0) check_qr(rep, n, n, ML_K_QR_REDUCED, 37, rng, kFew);
  }
  // Just past the Metal budget (a CUDA-only size) and at the sm_90 limit.
  check_qr(rep, metal_n + 1, metal_n + 1, ML_K_QR_REDUCED, 64, rng, kFew);
  check_qr(rep, cuda_n, cuda_n, ML_K_QR_REDUCED, 1, rng, kFew);
  check_qr(rep, 400, 100, ML_K_QR_REDUCED, 1, rng, kFew);
}


// ---------------- eigh / eigvalsh ----------------
KT_EIG_ENTRY(eigh_entry, ml_eigh_tridiag_ql)
KT_EIGVALS_ENTRY(eigvalsh_entry, ml_eigvalsh_tridiag_ql)

// eigh and eigvalsh on the same batch at group size gs. The unread triangle holds NaN, the
// last matrix is non-finite in its read triangle.
void check_eig(Report &rep, int n, int uplo, int gs, std::mt19937_64 &rng, int families) {
  kt::Timer timer("eig", n, n, gs);
  auto fams = kt::symmetric_families(n, rng, n <= 100);
  keep_families(fams, families);
  const int batch = int(fams.size()) + 1;
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a;
  auto push = [&](const Mat &m, bool poison) {
    auto v = kt::to_float(m);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const bool read = uplo == ML_K_LOWER ? i >= j : i <= j;
        if (!read) v[size_t(i) * n + j] = qnan;
      }
    if (poison) {
      const int i = int(rng() % n), j = int(rng() % n);
      v[uplo == ML_K_LOWER ? size_t(std::max(i, j)) * n + std::min(i, j)
                           : size_t(std::min(i, j)) * n + std::max(i, j)] =
          (rng() & 1) ? qnan : std::numeric_limits<float>::infinity();
    }
    a.insert(a.end(), v.begin(), v.end());
  };
  for (auto &f : fams) push(f.second, false);
  push(kt::identity(n), true);
  std::vector<float> w(size_t(batch) * n, -7.f), v(size_t(batch) * n * n, -7.f), w2(w);
  std::vector<int> info(batch, -1), info2(batch, -1);
  EigArgs args{{n, n, uplo, 0, batch, 0}, a.data(), w.data(), v.data(), info.data()};
  EigArgs args2{{n, n, uplo, 0, batch, 0}, a.data(), w2.data(), nullptr, info2.data()};
  if (gs <= 0) {  // the group-size-1 build of the CPU backend, one matrix per call
    std::vector<float> work(size_t(ml::cpu_kernels::scratch_floats(ML_OP_EIGH, n, n)));
    for (int b = 0; b < batch; ++b) {
      const float *ab = a.data() + size_t(b) * n * n;
      info[b] = ml::cpu_kernels::run(ML_OP_EIGH, n, n, uplo, ab, w.data() + size_t(b) * n,
                                     v.data() + size_t(b) * n * n, nullptr, work.data(),
                                     gs == kRegister);
      info2[b] = ml::cpu_kernels::run(ML_OP_EIGVALSH, n, n, uplo, ab, w2.data() + size_t(b) * n,
                                      nullptr, nullptr, work.data(), gs == kRegister);
    }
  } else {
    ml::kernel_runner::run(gs, batch, ml_eigh_tridiag_ql_scratch_floats(n, n), eigh_entry, &args);
    ml::kernel_runner::run(gs, batch, ml_eigvalsh_tridiag_ql_scratch_floats(n, n), eigvalsh_entry,
                           &args2);
  }
  for (int b = 0; b < batch; ++b) {
    const std::string fam = b < int(fams.size()) ? fams[b].first : "nonfinite";
    const std::string at = where(uplo == ML_K_LOWER ? "eigh-L" : "eigh-U", n, n, gs, fam, b);
    const float *wb = w.data() + size_t(b) * n, *w2b = w2.data() + size_t(b) * n;
    const float *vb = v.data() + size_t(b) * n * n;
    if (!kt::check_eig_outputs(rep, at, n, b == batch - 1, wb, vb, w2b, info[b], info2[b])) continue;
    rep.expect(std::memcmp(wb, w2b, sizeof(float) * n) == 0, at + " eigvalsh == eigh values");
    if (fam == "gaussian" && n >= 3)
      rep.expect((info[b] >> ML_INFO_SWEEPS_SHIFT) > 0 && info[b] >> ML_INFO_SWEEPS_SHIFT <= 30 * n,
                 at + " iteration count in info");
    bool asc = true;
    for (int i = 1; i < n; ++i) asc = asc && wb[i - 1] <= wb[i];
    rep.expect(asc, at + " ascending");
    // The matrix as the kernel saw it: the read triangle, mirrored.
    const Mat A = kt::read_symmetric(a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const kt::EigRatios x = kt::check_eig_ratios(rep, at, A, wb, vb, kEigLimit);
    const double err = kt::max_abs_diff(wb, kt::jacobi_eigenvalues(A), n);
    rep.ratio(err / x.scale, kEigLimit, at + " |w-w_ref|");
  }
}

// The iteration cap: p.max_iter = 1 cannot converge a random 16 x 16 matrix: every output NaN.
void check_eig_cap(Report &rep, int gs, std::mt19937_64 &rng) {
  const int n = 16;
  Mat g = kt::gaussian(rng, n, n);
  auto a = kt::to_float(kt::matmul(g, kt::transpose(g)));
  std::vector<float> w(n), v(n * n);
  int info = 0, info2 = 0;
  EigArgs args{{n, n, ML_K_LOWER, 1, 1, 0}, a.data(), w.data(), v.data(), &info};
  EigArgs args2{{n, n, ML_K_LOWER, 1, 1, 0}, a.data(), w.data(), nullptr, &info2};
  ml::kernel_runner::run(gs, 1, ml_eigh_tridiag_ql_scratch_floats(n, n), eigh_entry, &args);
  ml::kernel_runner::run(gs, 1, ml_eigvalsh_tridiag_ql_scratch_floats(n, n), eigvalsh_entry, &args2);
  const std::string at = "eigh max_iter=1 gs=" + std::to_string(gs);
  rep.expect((info & ML_INFO_NOT_CONVERGED) && (info >> ML_INFO_SWEEPS_SHIFT) == 1, at + " NOT_CONVERGED");
  rep.expect((info2 & ML_INFO_NOT_CONVERGED) && (info2 >> ML_INFO_SWEEPS_SHIFT) == 1,
             at + " eigvalsh NOT_CONVERGED");
  rep.expect(kt::all_nan(w.data(), n) && kt::all_nan(v.data(), size_t(n) * n), at + " NaN outputs");
}

// ---------------- eigvalsh by bisection ----------------
KT_EIGVALS_ENTRY(eigvalsh_bisect_entry, ml_eigvalsh_tridiag_bisect)
KT_EIG_ENTRY(eigh_bisect_entry, ml_eigh_tridiag_bisect)

// ml_eigvalsh_tridiag_bisect on the symmetric families (Wilkinson's W+ among them: pairs of
// eigenvalues that agree to far below float's resolution) at group size gs, and against
// ml_eigvalsh_tridiag_ql on the same batch (the same tridiagonal at the same group size: the
// two must agree to a few ulps of ||A||); where its scratch fits sm_90, ml_eigh_tridiag_bisect
// too: LAPACK's ratios of its vectors, its values bitwise those of ml_eigvalsh_tridiag_bisect.
// The last matrix is non-finite; the unread triangle holds NaN.
void check_eig_bisect(Report &rep, int n, int uplo, int gs, std::mt19937_64 &rng, int families) {
  kt::Timer timer("eigvalsh-bisect", n, n, gs);
  auto fams = kt::symmetric_families(n, rng, n <= 100);
  keep_families(fams, families);
  const int batch = int(fams.size()) + 1;
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a;
  for (size_t b = 0; b < size_t(batch); ++b) {
    auto v = kt::to_float(b < fams.size() ? fams[b].second : kt::identity(n));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (!(uplo == ML_K_LOWER ? i >= j : i <= j)) v[size_t(i) * n + j] = qnan;
    if (b == fams.size()) v[size_t(n / 2) * n + n / 2] = (rng() & 1) ? qnan : -std::numeric_limits<float>::infinity();
    a.insert(a.end(), v.begin(), v.end());
  }
  std::vector<float> w(size_t(batch) * n, -7.f), wq(w);
  std::vector<int> info(batch, -1), infoq(batch, -1);
  EigArgs args{{n, n, uplo, 0, batch, 0}, a.data(), w.data(), nullptr, info.data()};
  EigArgs argsq{{n, n, uplo, 0, batch, 0}, a.data(), wq.data(), nullptr, infoq.data()};
  ml::kernel_runner::run(gs, batch, ml_eigvalsh_tridiag_bisect_scratch_floats(n, n),
                         eigvalsh_bisect_entry, &args);
  ml::kernel_runner::run(gs, batch, ml_eigvalsh_tridiag_ql_scratch_floats(n, n), eigvalsh_entry,
                         &argsq);
  const bool vectors = ml_eigh_tridiag_bisect_fits(n, n, ML_CUDA_SCRATCH_FLOATS_SM90);
  std::vector<float> wv(size_t(batch) * n, -7.f), vv(vectors ? size_t(batch) * n * n : 1, -7.f);
  std::vector<int> infov(batch, -1);
  if (vectors) {
    EigArgs argsv{{n, n, uplo, 0, batch, 0}, a.data(), wv.data(), vv.data(), infov.data()};
    ml::kernel_runner::run(gs, batch, ml_eigh_tridiag_bisect_scratch_floats(n, n), eigh_bisect_entry,
                           &argsv);
  }
  for (int b = 0; b < batch; ++b) {
    const std::string fam = b < int(fams.size()) ? fams[b].first : "nonfinite";
    const std::string at = where(uplo == ML_K_LOWER ? "eigvalsh-bisect-L" : "eigvalsh-bisect-U", n, n, gs, fam, b);
    const float *wb = w.data() + size_t(b) * n;
    const float *wvb = wv.data() + size_t(b) * n, *vvb = vv.data() + size_t(b) * n * n;
    if (b == batch - 1) {
      rep.expect(kt::all_nan(wb, n) && info[b] == ML_INFO_NONFINITE, at + " all NaN, NONFINITE");
      if (vectors)
        rep.expect(kt::all_nan(wvb, n) && kt::all_nan(vvb, size_t(n) * n) &&
                       infov[b] == ML_INFO_NONFINITE,
                   at + " eigh: all NaN, NONFINITE");
      continue;
    }
    rep.expect(kt::all_finite(wb, n), at + " finite");
    rep.expect((info[b] & 0xffff) == 0, at + " info converged");
    const int halvings = info[b] >> ML_INFO_SWEEPS_SHIFT;
    if ((fam == "gaussian" || fam == "wilkinson") && n >= 3)
      rep.expect(halvings > 0 && halvings <= 25, at + " halvings in info (1..25)");
    rep.expect(halvings <= 25, at + " at most 25 halvings");
    bool asc = true;
    for (int i = 1; i < n; ++i) asc = asc && wb[i - 1] <= wb[i];
    rep.expect(asc, at + " ascending");
    const Mat A = kt::read_symmetric(a.data() + size_t(b) * n * n, n, uplo == ML_K_LOWER);
    const double an = kt::norm1(A), scale = an > 0 ? an * n * kt::kUlp : 1.0;
    const auto ref = kt::jacobi_eigenvalues(A);
    double err = 0;
    double diff = 0;
    for (int i = 0; i < n; ++i) {
      err = std::max(err, std::fabs(wb[i] - ref[i]));
      diff = std::max(diff, std::fabs(double(wb[i]) - wq[size_t(b) * n + i]));
    }
    rep.ratio(err / scale, kEigLimit, at + " |w-w_ref|");
    rep.ratio(diff / scale, kEigLimit, at + " |w-w_ql|");
    if (vectors) {
      rep.expect(std::memcmp(wvb, wb, sizeof(float) * n) == 0 && infov[b] == info[b],
                 at + " eigh: values and info bitwise eigvalsh's");
      rep.expect(kt::all_finite(vvb, size_t(n) * n), at + " eigh: finite vectors");
      kt::check_eig_ratios(rep, at + " eigh", A, wvb, vvb, kEigLimit);
    }
  }
}

// The cap: p.max_iter = 1 halving cannot place the eigenvalues of a random 16 x 16 matrix:
// every output NaN, NOT_CONVERGED with 1 in the count; a diagonal matrix needs no halving and
// comes out exact.
void check_eig_bisect_cap(Report &rep, int gs, std::mt19937_64 &rng) {
  const int n = 16;
  Mat g = kt::gaussian(rng, n, n), dg(n, n);
  for (int i = 0; i < n; ++i) dg(i, i) = (i % 2 ? -1.0 : 1.0) * (3 + i);
  auto a = kt::to_float(kt::matmul(g, kt::transpose(g)));
  auto ad = kt::to_float(dg);
  a.insert(a.end(), ad.begin(), ad.end());
  std::vector<float> w(2 * n, -7.f);
  std::vector<int> info(2, -1);
  EigArgs args{{n, n, ML_K_LOWER, 1, 2, 0}, a.data(), w.data(), nullptr, info.data()};
  ml::kernel_runner::run(gs, 2, ml_eigvalsh_tridiag_bisect_scratch_floats(n, n), eigvalsh_bisect_entry, &args);
  std::vector<float> wv(2 * n, -7.f), vv(2 * n * n, -7.f);
  std::vector<int> infov(2, -1);
  EigArgs argsv{{n, n, ML_K_LOWER, 1, 2, 0}, a.data(), wv.data(), vv.data(), infov.data()};
  ml::kernel_runner::run(gs, 2, ml_eigh_tridiag_bisect_scratch_floats(n, n), eigh_bisect_entry, &argsv);
  const std::string at = "eigvalsh-bisect max_iter=1 gs=" + std::to_string(gs);
  rep.expect((info[0] & ML_INFO_NOT_CONVERGED) && (info[0] >> ML_INFO_SWEEPS_SHIFT) == 1, at + " NOT_CONVERGED");
  rep.expect(kt::all_nan(w.data(), n), at + " NaN outputs");
  rep.expect(info[1] == 0, at + " diagonal: no halving");
  std::vector<double> ref;
  for (int i = 0; i < n; ++i) ref.push_back(dg(i, i));
  std::sort(ref.begin(), ref.end());
  bool exact = true;
  for (int i = 0; i < n; ++i) exact = exact && w[n + i] == float(ref[i]);
  rep.expect(exact, at + " diagonal exact");
  rep.expect(infov == info && kt::all_nan(wv.data(), n) && kt::all_nan(vv.data(), size_t(n) * n) &&
                 std::memcmp(wv.data() + n, w.data() + n, sizeof(float) * n) == 0,
             at + " eigh: capped NaN, diagonal as eigvalsh");
  const kt::EigRatios x = kt::eig_ratios(dg, wv.data() + n, vv.data() + size_t(n) * n);
  rep.ratio(x.resid, kEigLimit, at + " eigh diagonal |A-VWVt|");
  rep.ratio(x.orth, kEigLimit, at + " eigh diagonal |I-VtV|");
}

int eig_limit(int budget) { return ml_eigh_tridiag_ql_max_n(budget); }

// Bisection: every family at group sizes 7 and 32, the core ones at the Metal launch
// configuration's sizes up to the Metal limit; the sm_90 limit; the cap.
void test_bisect(Report &rep) {
  std::mt19937_64 rng(4242);
  const int metal_n = ml_eigvalsh_tridiag_bisect_max_n(ML_METAL_SCRATCH_FLOATS);
  const int cuda_n = ml_eigvalsh_tridiag_bisect_max_n(ML_CUDA_SCRATCH_FLOATS_SM90);
  rep.expect(metal_n == 87 && cuda_n == 237, "eigvalsh-bisect limits 87 (Metal) / 237 (sm_90)");
  const int metal_v = ml_eigh_tridiag_bisect_max_n(ML_METAL_SCRATCH_FLOATS);
  const int cuda_v = ml_eigh_tridiag_bisect_max_n(ML_CUDA_SCRATCH_FLOATS_SM90);
  rep.expect(metal_v == 50 && cuda_v == 137, "eigh-bisect limits 50 (Metal) / 137 (sm_90)");
  int turn = 0;
  for (int n : {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 64, 65})
    for (int gs : {7, 32}) check_eig_bisect(rep, n, (turn++ & 1) ? ML_K_UPPER : ML_K_LOWER, gs, rng, kAll);
  // The limits and 128 lanes: under ASan on the few families (gaussian, graded and the
  // non-finite matrix), in Release on the core ones (every family at the Metal eigh limit).
#if defined(KT_ASAN)
  const int core = kFew, all = kFew;
#else
  const int core = kCore, all = kAll;
#endif
  check_eig_bisect(rep, metal_n, ML_K_UPPER,
                   ml::metal::group_size_eigvalsh_tridiag_bisect(metal_n, metal_n, 1), rng, core);
  check_eig_bisect(rep, 128, ML_K_LOWER, 128, rng, core);
  check_eig_bisect(rep, cuda_n, ML_K_LOWER, 32, rng, kFew);
  check_eig_bisect(rep, metal_v, ML_K_LOWER, ml::metal::group_size_eigh_tridiag_bisect(metal_v, metal_v, 1),
                   rng, all);
  check_eig_bisect(rep, cuda_v, ML_K_UPPER, 64, rng, core);
  for (int gs : {1, 7, 32}) check_eig_bisect_cap(rep, gs, rng);
}

void test_eigh(Report &rep) {
  std::mt19937_64 rng(99);
  const int metal_n = eig_limit(ML_METAL_SCRATCH_FLOATS), cuda_n = eig_limit(ML_CUDA_SCRATCH_FLOATS_SM90);
  std::printf("eigh limits: Metal n <= %d, sm_90 n <= %d\n", metal_n, cuda_n);
  rep.expect(metal_n == 85 && cuda_n == 235 && ml_eigvalsh_tridiag_ql_max_n(ML_METAL_SCRATCH_FLOATS) == 87 &&
                 !ml_eigh_tridiag_ql_fits(metal_n + 1, metal_n + 1, ML_METAL_SCRATCH_FLOATS),
             "eigh limits 85 (Metal) / 235 (sm_90)");
  const int sizes[] = {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 63, 64, 65};
  int turn = 0;
  // Every family at group sizes 1 and 7; the core families at 32, 64 and 128 (slow in the
  // thread-per-lane runner), 128 only up to 17.
  for (int n : sizes)
    for (int gs : {1, 7, 32, 64, 128}) {
      if (n > 17 && gs == 128) continue;
      check_eig(rep, n, (turn++ & 1) ? ML_K_UPPER : ML_K_LOWER, gs, rng, gs <= 7 ? kAll : kCore);
    }
  for (int gs : {1, 7, 32}) check_eig_cap(rep, gs, rng);
  check_eig(rep, metal_n, ML_K_LOWER, ml::metal::group_size_eigh_tridiag_ql(metal_n, metal_n, 1), rng, kCore);
  check_eig(rep, metal_n, ML_K_UPPER, 1, rng, kAll);
  // Square sizes up to the Metal limit sequentially: every n up to 20, then every third one
  // and the last two before the limit (the limit itself runs above), both triangles in turn; an
  // odd group size (37) at n 12, 24, ..., 84 and at n = 37, 38 (a row per lane, and one row
  // more). The sizes left out take the same paths as their neighbours.
  for (int n = 1; n <= metal_n; ++n) {
    if (n <= 20 || n % 3 == 0 || n >= metal_n - 2)
      check_eig(rep, n, n & 1 ? ML_K_LOWER : ML_K_UPPER, 1, rng, kFew);
    if (n % 12 == 0 || n == 37 || n == 38) check_eig(rep, n, ML_K_LOWER, 37, rng, kFew);
  }
  check_eig(rep, metal_n + 1, ML_K_UPPER, 64, rng, kFew);
  check_eig(rep, cuda_n, ML_K_LOWER, 1, rng, kFew);
  rep.expect(!ml_eigh_tridiag_ql_fits(cuda_n + 1, cuda_n + 1, ML_CUDA_SCRATCH_FLOATS_SM90), "eigh sm_90 limit");
}


// svd / svdvals of the group-size-1 build (the kernel itself is tested through the runner by
// test_svd.cpp): LAPACK's ratios, values against double eigenvalues of A^T A, NaN isolation.
void check_svd_serial(Report &rep, int m, int n, std::mt19937_64 &rng, bool small) {
  auto fams = kt::general_families(m, n, rng);
  const int k = std::min(m, n);
  std::vector<float> work(size_t(ml::cpu_kernels::scratch_floats(ML_OP_SVD, m, n)));
  std::vector<float> work2(size_t(ml::cpu_kernels::scratch_floats(ML_OP_SVDVALS, m, n)));
  for (size_t b = 0; b <= fams.size(); ++b) {
    const bool bad = b == fams.size();
    std::vector<float> a = kt::to_float(bad ? kt::gaussian(rng, m, n) : fams[b].second);
    if (bad) a[size_t(rng() % a.size())] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> u(size_t(m) * k), sv(k), vt(size_t(k) * n), s2(k);
    const int info = ml::cpu_kernels::run(ML_OP_SVD, m, n, 0, a.data(), u.data(), sv.data(),
                                          vt.data(), work.data(), small);
    const int info2 = ml::cpu_kernels::run(ML_OP_SVDVALS, m, n, 0, a.data(), nullptr, s2.data(),
                                           nullptr, work2.data(), small);
    const std::string at = where("svd-serial", m, n, 0, bad ? "nonfinite" : fams[b].first, int(b));
    if (bad) {
      rep.expect(kt::all_nan(u.data(), u.size()) && kt::all_nan(sv.data(), k) &&
                     kt::all_nan(vt.data(), vt.size()) && kt::all_nan(s2.data(), k),
                 at + " all NaN");
      rep.expect((info & ML_INFO_NONFINITE) && (info2 & ML_INFO_NONFINITE), at + " info");
      continue;
    }
    rep.expect((info & ML_INFO_NOT_CONVERGED) == 0 && (info2 & ML_INFO_NOT_CONVERGED) == 0, at + " converged");
    rep.expect(kt::all_finite(u.data(), u.size()) && kt::all_finite(vt.data(), vt.size()), at + " finite");
    Mat A = kt::from_float(a.data(), m, n), U = kt::from_float(u.data(), m, k), Vt = kt::from_float(vt.data(), k, n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < k; ++j) U(i, j) *= sv[j];
    Mat R = kt::matmul(U, Vt);
    for (size_t i = 0; i < R.v.size(); ++i) R.v[i] -= A.v[i];
    const double an = kt::norm1(A), den = an > 0 ? an * std::max(m, n) * kt::kUlp : 1.0;
    rep.ratio(kt::norm1(R) / den, kSvdLimit, at + " |A-USVt|");
    rep.ratio(kt::orth_defect(kt::from_float(u.data(), m, k)) / (m * kt::kUlp), kSvdLimit, at + " |I-UtU|");
    rep.ratio(kt::orth_defect(kt::transpose(Vt)) / (n * kt::kUlp), kSvdLimit, at + " |I-VVt|");
    auto lam = kt::jacobi_eigenvalues(m >= n ? kt::matmul(kt::transpose(A), A) : kt::matmul(A, kt::transpose(A)));
    double err = 0;
    for (int i = 0; i < k; ++i) err = std::max(err, std::fabs(sv[i] - std::sqrt(std::max(0.0, lam[k - 1 - i]))));
    rep.ratio(err / den, kSvdLimit, at + " |s-s_ref|");
    rep.expect(std::memcmp(sv.data(), s2.data(), sizeof(float) * k) == 0, at + " svdvals == svd values");
  }
}

// The CPU backend's build (cpu/cpu_kernels.cpp, group size 1, ML_CPU_SERIAL): the group
// kernels up to kSerialMaxN (the policy's bound on cpu_kernel_max_n, core/src/policy.cpp, is 16
// to 24) and the register kernels wherever they fit (the policy picks between them).
constexpr int kSerialMaxN = 16;
void test_serial(Report &rep) {
  std::mt19937_64 rng(7);
  for (int op : {ML_OP_QR, ML_OP_EIGH, ML_OP_EIGVALSH, ML_OP_SVD, ML_OP_SVDVALS}) {
    rep.expect(ml::cpu_kernels::small_fits(op, 1, 1) && ml::cpu_kernels::small_fits(op, 8, 8) &&
                   !ml::cpu_kernels::small_fits(op, 9, 9) && !ml::cpu_kernels::small_fits(op, 0, 3),
               "serial register kernels fit 1..8");
    rep.expect(ml::cpu_kernels::scratch_floats(op, kSerialMaxN, kSerialMaxN) > 0,
               "serial scratch at kSerialMaxN");
  }
  rep.expect(ml::cpu_kernels::small_fits(ML_OP_QR, 8, 3) &&
                 !ml::cpu_kernels::small_fits(ML_OP_EIGH, 8, 3),
             "serial register kernels: qr rectangular, eigh square");
  for (int n : {1, 2, 3, 5, 8, 16}) {
    for (int gs : {0, kRegister}) {
      if (gs == kRegister && !ml::cpu_kernels::small_fits(ML_OP_QR, n, n)) continue;
      check_qr(rep, n, n, ML_K_QR_REDUCED, gs, rng, kAll);
      check_eig(rep, n, n & 1 ? ML_K_UPPER : ML_K_LOWER, gs, rng, kAll);
    }
  }
  const int shapes[][2] = {{1, 5}, {5, 1}, {8, 3}, {16, 12}, {12, 16}};
  for (auto &s : shapes)
    for (int gs : {0, kRegister}) {
      if (gs == kRegister && !ml::cpu_kernels::small_fits(ML_OP_QR, s[0], s[1])) continue;
      for (int mode : {ML_K_QR_REDUCED, ML_K_QR_R, ML_K_QR_COMPLETE})
        check_qr(rep, s[0], s[1], mode, gs, rng, kAll);
    }
  check_qr(rep, kSerialMaxN, kSerialMaxN / 2, ML_K_QR_COMPLETE, 0, rng, kAll);
  const int svd_shapes[][2] = {{1, 1}, {1, 4}, {4, 1}, {3, 3}, {8, 8},
                               {16, 16}, {16, 5}, {5, 16}, {2, 9}};
  for (auto &s : svd_shapes) {
    check_svd_serial(rep, s[0], s[1], rng, false);
    if (ml::cpu_kernels::small_fits(ML_OP_SVD, s[0], s[1]))
      check_svd_serial(rep, s[0], s[1], rng, true);
  }
}

// A small cross-section for race detection under ThreadSanitizer (tsan is slow with many
// lane threads): odd sizes, partial and several simdgroups.
void test_race(Report &rep) {
  std::mt19937_64 rng(5);
  {  // info may be null; a batch offset (group_offset) shifts which matrices a launch handles
    const int n = 9, batch = 3;
    std::vector<float> a;
    for (int b = 0; b < batch; ++b) {
      auto v = kt::to_float(kt::with_spectrum(rng, kt::spectrum("randlog", n, rng)));
      a.insert(a.end(), v.begin(), v.end());
    }
    std::vector<float> w(size_t(batch) * n, -7.f), v(size_t(batch) * n * n, -7.f);
    EigArgs args{{n, n, ML_K_LOWER, 0, batch, 0}, a.data(), w.data(), v.data(), nullptr};
    ml::kernel_runner::run(7, batch, ml_eigh_tridiag_ql_scratch_floats(n, n), eigh_entry, &args);
    rep.expect(kt::all_finite(w.data(), w.size()) && kt::all_finite(v.data(), v.size()), "eigh info=null");
    std::vector<float> q(size_t(batch) * n * n, -7.f), r(q);
    QrArgs qa{{n, n, ML_K_QR_REDUCED, 0, batch, 0}, a.data(), q.data(), r.data(), nullptr};
    ml::kernel_runner::run(7, batch, ml_qr_householder_scratch_floats(n, n), qr_entry, &qa);
    rep.expect(kt::all_finite(q.data(), q.size()) && kt::all_finite(r.data(), r.size()), "qr info=null");
    // group_offset = 2 with 3 groups: only matrix 2 is in range, groups 1 and 2 return at once.
    std::vector<float> w2(w.size(), -7.f);
    EigArgs off{{n, n, ML_K_LOWER, 0, batch, 2}, a.data(), w2.data(), v.data(), nullptr};
    ml::kernel_runner::run(7, batch, ml_eigh_tridiag_ql_scratch_floats(n, n),
                           [](const ml_ctx &ctx, void *u) {
                             auto &x = *static_cast<EigArgs *>(u);
                             ml_ctx c = ctx;
                             c.group_id += x.p.group_offset;  // what an entry point does
                             ml_eigh_tridiag_ql(c, x.p, x.a, x.w, x.v, nullptr);
                           },
                           &off);
    rep.expect(std::memcmp(w2.data() + 2 * n, w.data() + 2 * n, sizeof(float) * n) == 0 &&
                   w2[0] == -7.f && w2[n] == -7.f,
               "group_offset");
  }
  for (int gs : {7, 33, 64})
    for (int n : {5, 17, 33}) {
      check_qr(rep, n, n, ML_K_QR_REDUCED, gs, rng, kFew);
      check_qr(rep, n + 3, n, ML_K_QR_COMPLETE, gs, rng, kFew);
      check_eig(rep, n, ML_K_LOWER, gs, rng, kFew);
      check_eig_bisect(rep, n, ML_K_UPPER, gs, rng, kCore);  // clusters: the rounds' barriers
    }
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_report_suite(argc, argv, "test_kernels runner|qr|eigh|bisect|serial|race",
                              {{"runner", test_runner}, {"qr", test_qr}, {"eigh", test_eigh},
                               {"bisect", test_bisect}, {"serial", test_serial},
                               {"race", test_race}});
}
