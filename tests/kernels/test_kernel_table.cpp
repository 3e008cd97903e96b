// The CPU runner's list of kernels, generated from core/kernels/kernel_table.h: every line of
// the table runs through the runner in every launch kind its backends use (GROUP lines: a
// group per matrix at the CUDA and at the Metal launch configuration's group size, and one
// lane per matrix; REGISTER lines: one lane per matrix; SIMD lines: a simdgroup per matrix at
// the CUDA and Metal group sizes), on square and rectangular shapes
// within its window, judged by the ratios of docs/design.md section 7 in double; and every
// iterating line under p.max_iter = 1 (unconverged matrices: NaN outputs, the info bit). A GROUP
// or SIMD line without a group size in cuda/launch_config.h or metal/launch_config.h does not
// compile.
// `test_kernel_table global`: the GROUP lines as global launches (run_global below).
// Usage: test_kernel_table [global]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "../../core/kernels/compat_cpu.h"
#include "../../core/kernels/kernel_table.h"
#include "../../cuda/launch_config.h"
#include "../../metal/launch_config.h"
#include "kernel_runner.h"
#include "kernel_test_util.h"
#include "linsys_check.h"
#include "metal_linalg/metal_linalg.h"

namespace {

struct Args {
  ml_params p;
  const float *a;
  float *o0, *o1, *o2;
  int *info;
};

struct Entry {
  const char *name;
  int op;
  int kind;  // KT_IS_GROUP, KT_IS_REGISTER, KT_IS_SIMD
  int (*scratch)(int, int, int);
  int (*fits)(int, int, int, int);
  int (*choose)(int, int, int, int);
  ml::kernel_runner::Kernel run;
  int (*cuda_group_size)(int, int, int64_t, int);
  int (*metal_group_size)(int, int, int64_t);
};

#define KT_RUN(name, fn, outs)                                 \
  [](const ml_ctx &ctx, void *u) {                             \
    Args &x = *static_cast<Args *>(u);                         \
    float *o0 = x.o0, *o1 = x.o1, *o2 = x.o2;                  \
    (void)o0, (void)o1, (void)o2;                              \
    fn(ctx, x.p, x.a, ML_KERNEL_OUTS_##outs, x.info);          \
  }
#define KT_GS_GROUP(name) ml::cuda::group_size_##name, ml::metal::group_size_##name
#define KT_GS_REGISTER(name) nullptr, nullptr
#define KT_GS_SIMD(name) KT_GS_GROUP(name)
#define KT_IS_GROUP 0
#define KT_IS_REGISTER 1
#define KT_IS_SIMD 2
#define KT_ENTRY(name, op, fn, outs, kind, scratch, fits, choose) \
  {#name, op, KT_IS_##kind, scratch, fits, choose, KT_RUN(name, fn, outs), KT_GS_##kind(name)},

const Entry kEntries[] = {ML_KERNEL_TABLE(KT_ENTRY)};

constexpr double kLimit = kt::kEigLimit;  // eigh's threshold, qr and svd held to it too
constexpr int kH200Budget = ML_CUDA_SCRATCH_FLOATS_SM90;
constexpr int kH200Units = 132;

int flags_for(int op, int variant) {
  if (op == ML_OP_QR) return variant;  // reduced, R, complete
  if (op == ML_OP_CHOLESKY) return variant ? ML_LS_UPPER : 0;
  if (op == ML_OP_SOLVE) return variant ? ML_LS_RIGHT : 0;
  if (op == ML_OP_SOLVE_TRIANGULAR) return variant ? ML_LS_UPPER | ML_LS_RIGHT : ML_LS_UNIT;
  if (lsk::is_linsys(op)) return 0;
  return variant == 1 && (op == ML_OP_EIGH || op == ML_OP_EIGVALSH) ? ML_K_UPPER : 0;
}

// Runs e on the m x n matrices `inputs` (named by fams; rounded to float here) with group size
// gs (1: lane per matrix) and flags chosen for scratch_budget, and checks every result.
void run_mats(kt::Report &rep, const Entry &e, const std::vector<kt::Mat> &inputs,
              const std::vector<std::string> &fams, int m, int n, int flags, int gs,
              int scratch_budget, const char *launch) {
  const int batch = static_cast<int>(inputs.size()), k = std::min(m, n);
  const bool complete = e.op == ML_OP_QR && flags == ML_K_QR_COMPLETE;
  const int64_t sz0 = e.op == ML_OP_QR ? (flags == ML_K_QR_R ? 0 : int64_t(m) * (complete ? m : k))
                      : e.op == ML_OP_EIGH || e.op == ML_OP_EIGVALSH ? n
                      : e.op == ML_OP_SVD ? int64_t(m) * k
                                          : 0;
  const int64_t sz1 = e.op == ML_OP_QR ? int64_t(complete ? m : k) * n
                      : e.op == ML_OP_EIGH ? int64_t(n) * n
                      : e.op == ML_OP_SVD || e.op == ML_OP_SVDVALS ? k
                                                                     : 0;
  const int64_t sz2 = e.op == ML_OP_SVD ? int64_t(k) * n : 0;
  std::vector<kt::Mat> mats;
  std::vector<float> a;
  for (int b = 0; b < batch; ++b) {
    auto f = kt::to_float(inputs[b]);
    a.insert(a.end(), f.begin(), f.end());
    mats.push_back(kt::from_float(f.data(), m, n));  // the matrix the kernel sees, exactly
  }
  std::vector<float> o0(size_t(batch * sz0) + 1, -7.f), o1(size_t(batch * sz1) + 1, -7.f),
      o2(size_t(batch * sz2) + 1, -7.f);
  std::vector<int> info(batch, -1);
  const int kflags = e.choose(m, n, flags, scratch_budget);
  Args x{{m, n, kflags, 0, batch, 0}, a.data(), o0.data(), o1.data(), o2.data(), info.data()};
  ml::kernel_runner::run(gs, batch, e.scratch(m, n, kflags), e.run, &x);
  char at[200];
  for (int b = 0; b < batch; ++b) {
    std::snprintf(at, sizeof at, "%s %dx%d flags=%d %s gs=%d %s #%d", e.name, m, n, flags,
                  launch, gs, fams[b].c_str(), b);
    const kt::Mat &A = mats[b];
    rep.expect((info[b] & (ML_INFO_NOT_CONVERGED | ML_INFO_NONFINITE)) == 0,
               std::string(at) + " info");
    const float *p0 = o0.data() + b * sz0, *p1 = o1.data() + b * sz1, *p2 = o2.data() + b * sz2;
    switch (e.op) {
      case ML_OP_QR: {
        const int qc = complete ? m : k;
        kt::Mat R = kt::from_float(p1, qc, n);
        bool upper = true;
        for (int i = 0; i < qc; ++i)
          for (int j = 0; j < std::min(i, n); ++j) upper = upper && R(i, j) == 0.0;
        rep.expect(upper, std::string(at) + " R upper");
        if (flags == ML_K_QR_R) {  // R^T R = A^T A
          rep.ratio(kt::rtr_ratio(A, R, std::max(m, n)), kLimit, std::string(at) + " |RtR-AtA|");
          break;
        }
        const kt::QrRatios x = kt::qr_ratios(A, kt::from_float(p0, m, qc), R, std::max(m, n));
        rep.ratio(x.resid, kLimit, std::string(at) + " |A-QR|");
        rep.ratio(x.orth, kLimit, std::string(at) + " |I-QtQ|");
        break;
      }
      case ML_OP_EIGH:
        kt::check_eig_ratios(rep, at, A, p0, p1, kLimit);
        break;
      case ML_OP_EIGVALSH: {
        auto ref = kt::jacobi_eigenvalues(A);
        std::sort(ref.begin(), ref.end());
        double err = 0;
        for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(p0[i] - ref[i]));
        rep.ratio(err / (kt::norm1(A) * n * kt::kUlp), kLimit, std::string(at) + " w vs double");
        break;
      }
      case ML_OP_SVD: kt::check_svd_ratios(rep, at, fams[b], A, p0, p1, p2, info[b], kLimit); break;
      default: {
        const auto ref = kt::reference_singular_values(A);
        double err = 0;
        for (int i = 0; i < k; ++i) err = std::max(err, std::fabs(p1[i] - ref[i]));
        rep.ratio(err / (ref[0] * std::max(m, n) * kt::kUlp), kLimit,
                  std::string(at) + " s vs double");
      }
    }
  }
}

// Runs e on three gaussian matrices of m x n (symmetrised for eigh) and checks every result.
void run_and_check(kt::Report &rep, const Entry &e, int m, int n, int flags, int gs,
                   int scratch_budget, const char *launch) {
  std::mt19937_64 rng(1234 + 17 * m + n);
  if (lsk::is_linsys(e.op)) {  // three gaussian matrices (SPD for cholesky), B with 3 columns
    const lsk::Line l{e.name, e.op, e.kind == KT_IS_SIMD, e.scratch, e.fits, e.choose, e.run};
    const lsk::Shape s{e.op, m, n, 3, flags};
    std::vector<float> a, b;
    for (int i = 0; i < 3; ++i) {
      kt::Mat g = kt::gaussian(rng, m, n);
      if (e.op == ML_OP_CHOLESKY) {
        g = kt::matmul(g, kt::transpose(g));
        for (int d = 0; d < n; ++d) g(d, d) += n;
      }
      if (e.op == ML_OP_SOLVE_TRIANGULAR)
        for (int d = 0; d < n; ++d) g(d, d) = 2 + std::fabs(g(d, d));
      const auto f = kt::to_float(g), fb = kt::to_float(kt::gaussian(rng, n, 3));
      a.insert(a.end(), f.begin(), f.end());
      b.insert(b.end(), fb.begin(), fb.end());
    }
    const lsk::Out o = lsk::run(l, s, a, b, 3, gs, scratch_budget);
    for (int i = 0; i < 3; ++i) {
      char at[200];
      std::snprintf(at, sizeof at, "%s %dx%d flags=%d %s gs=%d #%d", e.name, m, n, flags, launch,
                    gs, i);
      lsk::check(rep, at, s, a.data() + size_t(i) * m * n, b.data() + size_t(i) * n * 3, o, i, 0);
    }
    return;
  }
  std::vector<kt::Mat> mats;
  for (int b = 0; b < 3; ++b) {
    kt::Mat g = kt::gaussian(rng, m, n);
    if (e.op == ML_OP_EIGH || e.op == ML_OP_EIGVALSH) g = kt::matmul(g, kt::transpose(g));
    mats.push_back(g);
  }
  run_mats(rep, e, mats, std::vector<std::string>(mats.size(), "gaussian"), m, n, flags, gs,
           scratch_budget, launch);
}

// Global launches (the backends' Launch::kGlobal: a GROUP line with its scratch in device
// memory, past the shared window): every GROUP line at odd sizes beyond the H200 window, with
// the global scratch budget (2^28 floats, as core/src/routing.h's kGlobalScratchFloats) and
// large groups (512 lanes, and CUDA's global group size), on hard families, with the ratios of
// docs/design.md section 7. The runner's scratch is ordinary memory: this checks the kernels'
// logic past the shared window and at group sizes the shared launches never use.
constexpr int kGlobalBudget = 1 << 28;

void run_global(kt::Report &rep) {
  for (const Entry &e : kEntries) {
    if (e.kind != KT_IS_GROUP) continue;
    if (lsk::is_linsys(e.op)) {  // one shape past the shared window, 512 lanes
      const int n = 245;
      const int flags = flags_for(e.op, 1);
      if (!e.fits(n, n, flags, kGlobalBudget)) continue;  // a bounded window (cholesky_cols)
      rep.expect(!e.fits(n, n, flags, kH200Budget) && e.fits(n, n, flags, kGlobalBudget),
                 std::string(e.name) + " global shape past the shared window, in the global one");
      kt::Timer t(e.name, n, n, 512);
      run_and_check(rep, e, n, n, flags, 512, kGlobalBudget, "global");
      continue;
    }
    const bool eig = e.op == ML_OP_EIGH || e.op == ML_OP_EIGVALSH;
    // Two shapes per line (the CI machine has 2 cores and the runner one OS thread per lane:
    // about 3 matrices per line keep this suite near a minute there): 512 lanes on two
    // families, the CUDA global group size on a third.
    struct Shape {
      int m, n, flags, gs;
      std::set<std::string> want;
    };
    std::vector<Shape> shapes;
    if (eig) {
      shapes = {{241, 241, ML_K_LOWER, 512, {"graded", "clustered"}},
                {299, 299, ML_K_UPPER, 0, {"scale1e-30"}}};
    } else if (e.op == ML_OP_QR) {
      shapes = {{299, 257, ML_K_QR_REDUCED, 512, {"graded", "rankdef"}},
                {241, 299, ML_K_QR_COMPLETE, 0, {"scale1e37"}}};
    } else {
      shapes = {{299, 241, 0, 512, {"graded", "rankdef"}}, {241, 257, 0, 0, {"geometric1e-30"}}};
    }
    for (const Shape &sh : shapes) {
      const int m = sh.m, n = sh.n;
      const int gs = sh.gs > 0 ? sh.gs : ml::cuda::group_size_global(m, n);
      rep.expect(!e.fits(m, n, sh.flags, kH200Budget) && e.fits(m, n, sh.flags, kGlobalBudget),
                 std::string(e.name) + " global shape past the shared window, in the global one");
      std::mt19937_64 rng(4242 + 31 * m + n);
      const kt::Families all = eig ? kt::symmetric_families(n, rng, true)
                               : e.op == ML_OP_QR ? kt::general_families(m, n, rng)
                                                  : kt::svd_families(m, n, rng, true);
      const std::set<std::string> &want = sh.want;
      std::vector<kt::Mat> mats;
      std::vector<std::string> fams;
      for (const auto &f : all)
        if (want.count(f.first)) {
          fams.push_back(f.first);
          mats.push_back(f.second);
        }
      rep.expect(fams.size() == want.size(), std::string(e.name) + " global families found");
      kt::Timer t(e.name, m, n, gs);
      run_mats(rep, e, mats, fams, m, n, sh.flags, gs, kGlobalBudget, "global");
    }
  }
  std::printf("global: %d checks, %d failures, worst ratio %.3g (%s)\n", rep.checks, rep.failures,
              rep.worst, rep.worst_where.c_str());
}

// The outputs' sizes per matrix (floats of o0, o1, o2) of an op at m x n.
void out_sizes(int op, int m, int n, int flags, int64_t *sz) {
  const int k = std::min(m, n);
  const bool complete = op == ML_OP_QR && flags == ML_K_QR_COMPLETE;
  sz[0] = op == ML_OP_QR ? (flags == ML_K_QR_R ? 0 : int64_t(m) * (complete ? m : k))
          : op == ML_OP_EIGH || op == ML_OP_EIGVALSH ? n
          : op == ML_OP_SVD ? int64_t(m) * k
                            : 0;
  sz[1] = op == ML_OP_QR ? int64_t(complete ? m : k) * n
          : op == ML_OP_EIGH ? int64_t(n) * n
          : op == ML_OP_SVD || op == ML_OP_SVDVALS ? k
                                                   : 0;
  sz[2] = op == ML_OP_SVD ? int64_t(k) * n : 0;
}

// The iteration cap (every kernel that iterates, i.e. all but QR): a batch of gaussian
// matrices (symmetrised for eigh) that need more than one sweep, interleaved with diagonal
// ones that need none, run with p.max_iter = 1 at group size gs (1: lane per matrix) and
// flags, with and without info. Every output of a capped matrix must be NaN and its info carry
// ML_INFO_NOT_CONVERGED; each diagonal matrix must come out right, bitwise as with the default
// cap, under which nothing is capped and every output is finite.
void check_cap(kt::Report &rep, const Entry &e, int m, int n, int flags, int gs,
               const char *launch) {
  std::mt19937_64 rng(777 + 13 * m + n);
  const int batch = 4, k = std::min(m, n);
  int64_t sz[3];
  out_sizes(e.op, m, n, flags, sz);
  const bool eig = e.op == ML_OP_EIGH || e.op == ML_OP_EIGVALSH;
  std::vector<float> a;
  std::vector<kt::Mat> mats;
  for (int b = 0; b < batch; ++b) {
    kt::Mat g = kt::gaussian(rng, m, n);
    if (b & 1) {  // diagonal, distinct entries of both signs
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) g(i, j) = i == j ? (1.0 + 0.75 * i) * (i % 3 == 1 ? -1 : 1) : 0.0;
    } else if (eig) {
      g = kt::matmul(g, kt::transpose(g));
    }
    auto f = kt::to_float(g);
    a.insert(a.end(), f.begin(), f.end());
    mats.push_back(kt::from_float(f.data(), m, n));
  }
  std::vector<float> ref[3];
  std::vector<int> ref_info(batch, -1);
  for (int cap : {0, 1})
    for (int with_info : {1, 0}) {
      if (cap == 0 && !with_info) continue;
      std::vector<float> o[3];
      for (int t = 0; t < 3; ++t) o[t].assign(size_t(batch * sz[t]) + 1, -7.f);
      std::vector<int> info(batch, -1);
      Args x{{m, n, flags, cap, batch, 0}, a.data(),  o[0].data(), o[1].data(), o[2].data(),
             with_info ? info.data() : nullptr};
      ml::kernel_runner::run(gs, batch, e.scratch(m, n, flags), e.run, &x);
      for (int b = 0; b < batch; ++b) {
        char at[200];
        std::snprintf(at, sizeof at, "%s %dx%d flags=%d %s gs=%d max_iter=%d info=%s #%d", e.name,
                      m, n, flags, launch, gs, cap, with_info ? "yes" : "null", b);
        const std::string w(at);
        const float *p[3] = {o[0].data() + b * sz[0], o[1].data() + b * sz[1],
                             o[2].data() + b * sz[2]};
        if (cap == 0) {  // default cap: nothing capped, the reference for the diagonal ones
          rep.expect((info[b] & (ML_INFO_NOT_CONVERGED | ML_INFO_NONFINITE)) == 0, w + " info");
          for (int t = 0; t < 3; ++t)
            rep.expect(kt::all_finite(p[t], size_t(sz[t])), w + " finite output " + std::to_string(t));
          continue;
        }
        if (with_info) {
          rep.expect((info[b] & ML_INFO_NONFINITE) == 0, w + " no NONFINITE");
          rep.expect(((info[b] & ML_INFO_NOT_CONVERGED) != 0) == !(b & 1),
                     w + ((b & 1) ? " converged" : " NOT_CONVERGED"));
        }
        if (!(b & 1)) {
          for (int t = 0; t < 3; ++t)
            rep.expect(kt::all_nan(p[t], size_t(sz[t])), w + " NaN output " + std::to_string(t));
          continue;
        }
        // The diagonal matrix: bitwise as under the default cap, and right.
        for (int t = 0; t < 3; ++t)
          rep.expect(std::memcmp(p[t], ref[t].data() + b * sz[t], sizeof(float) * sz[t]) == 0,
                     w + " output " + std::to_string(t) + " as with the default cap");
        if (with_info) rep.expect(info[b] == ref_info[b], w + " info as with the default cap");
        const kt::Mat &A = mats[b];
        std::vector<double> dg;
        for (int i = 0; i < k; ++i) dg.push_back(eig ? A(i, i) : std::fabs(A(i, i)));
        std::sort(dg.begin(), dg.end());
        if (!eig) std::reverse(dg.begin(), dg.end());
        const float *vals = eig ? p[0] : p[1];
        double err = 0;
        for (int i = 0; i < k; ++i) err = std::max(err, std::fabs(vals[i] - dg[i]));
        rep.expect(err == 0, w + " values exact");
        if (e.op == ML_OP_EIGH) {
          const kt::EigRatios r = kt::eig_ratios(A, p[0], p[1]);
          rep.ratio(r.resid, kLimit, w + " |A-VWVt|");
          rep.ratio(r.orth, kLimit, w + " |I-VtV|");
        } else if (e.op == ML_OP_SVD) {
          kt::check_svd_ratios(rep, w, "diagonal", A, p[0], p[1], p[2], with_info ? info[b] : 0,
                               kLimit);
        }
      }
      if (cap == 0) {
        for (int t = 0; t < 3; ++t) ref[t] = o[t];
        ref_info = info;
      }
    }
}

}  // namespace

int main(int argc, char **argv) {
  kt::Report rep;
  if (argc > 1 && std::strcmp(argv[1], "global") == 0) {
    run_global(rep);
    return rep.failures == 0 ? 0 : 1;
  }
  std::set<int> ops;
  std::set<std::string> names;
  for (const Entry &e : kEntries) {
    ops.insert(e.op);
    rep.expect(names.insert(e.name).second, std::string(e.name) + " listed once");
    rep.expect(e.op >= 0 && e.op < ML_OP_COUNT, std::string(e.name) + " has a valid op");
    rep.expect((e.kind != KT_IS_REGISTER) ==
                   (e.cuda_group_size != nullptr && e.metal_group_size != nullptr),
               std::string(e.name) + " group sizes exactly for GROUP and SIMD lines");
    const int shapes[][2] = {{1, 1}, {2, 2}, {5, 5}, {8, 8}, {7, 3}, {3, 7}, {13, 13}, {20, 9},
                             {9, 20}, {24, 24}, {33, 33}};
    int covered = 0;
    for (const auto &s : shapes) {
      const int m = s[0], n = s[1];
      if (lsk::two_inputs(e.op) && m != n) continue;  // A square; m is nrhs for these lines
      // The linear systems' lines on 1, 5, 13, 24 and 33 (their own suites, kernels_linsys_*,
      // sweep n and the hard families): each launch kind and flag still runs on each line.
      if (lsk::is_linsys(e.op) && (m == 2 || m == 8)) continue;
      // 24 x 24: the linear systems' lines of 17..32 (their square shapes) only.
      if (!lsk::is_linsys(e.op) && m == 24) continue;
      for (int variant = 0; variant < (e.op == ML_OP_QR ? 3 : 2); ++variant) {
        const int flags = flags_for(e.op, variant);
        if (!e.fits(m, n, flags, ML_METAL_SCRATCH_FLOATS) || !e.fits(m, n, flags, kH200Budget))
          continue;
        ++covered;
        if (e.kind == KT_IS_REGISTER) {
          run_and_check(rep, e, m, n, flags, 1, 0, "register");
          continue;
        }
        const int cuda_gs = e.cuda_group_size(m, n, 16384, kH200Units);
        const int metal_gs = e.metal_group_size(m, n, 16384);
        rep.expect(metal_gs >= 32 && metal_gs % 32 == 0,
                   std::string(e.name) + " Metal group size in whole simdgroups");
        run_and_check(rep, e, m, n, flags, cuda_gs, kH200Budget, "cuda-block");
        run_and_check(rep, e, m, n, flags, metal_gs, ML_METAL_SCRATCH_FLOATS, "metal-block");
        if (e.kind == KT_IS_SIMD) {  // one simdgroup per matrix, no lane entry
          rep.expect(metal_gs == 32 && (cuda_gs == 32 || cuda_gs == 16 || cuda_gs == 8),
                     std::string(e.name) + " SIMD group size one simdgroup (CUDA: or 16, 8 lanes)");
          for (int b : {1, 64, 1024})
            rep.expect(e.cuda_group_size(m, n, b, kH200Units) == cuda_gs,
                       std::string(e.name) + " SIMD group size independent of the batch");
          continue;
        }
        run_and_check(rep, e, m, n, flags, 1, ml::metal::lane_slice(ml::metal::kSimdWidth),
                      "lane");
      }
    }
    rep.expect(covered > 0, std::string(e.name) + " ran on at least one shape");
    std::printf("%-24s %s, %d shapes/flags\n", e.name,
                e.kind == KT_IS_GROUP ? "group   " : e.kind == KT_IS_SIMD ? "simd    " : "register",
                covered);
  }
  // The iteration cap: every launch kind (lane per matrix, 16- and 32-lane groups, the CUDA and
  // Metal block sizes; register kernels lane per matrix), SVD with V in shared and in device
  // memory.
  for (const Entry &e : kEntries) {
    if (e.op == ML_OP_QR || lsk::is_linsys(e.op)) continue;  // no iterations
    const bool eig = e.op == ML_OP_EIGH || e.op == ML_OP_EIGVALSH;
    const int big = e.kind == KT_IS_REGISTER ? 8 : 12, small = e.kind == KT_IS_REGISTER ? 5 : 7;
    const int shapes[][2] = {{big, big}, {big, small}, {small, big}, {small, small}};
    int ran = 0;
    for (const auto &s : shapes) {
      const int m = s[0], n = s[1];
      if (eig && m != n) continue;
      const int variants[] = {eig ? ML_K_LOWER : 0, eig ? ML_K_UPPER : ML_K_SVD_V_SHARED};
      for (int flags : variants) {
        if (!e.fits(m, n, flags, ML_METAL_SCRATCH_FLOATS) || !e.fits(m, n, flags, kH200Budget))
          continue;
        if (e.kind == KT_IS_REGISTER) {
          check_cap(rep, e, m, n, flags, 1, "register");
          ++ran;
          continue;
        }
        std::set<int> sizes = {e.cuda_group_size(m, n, 16384, kH200Units),
                               e.metal_group_size(m, n, 16384)};
        if (e.kind == KT_IS_GROUP) sizes.insert({1, 16, 32});
        for (int gs : sizes) check_cap(rep, e, m, n, flags, gs, gs == 1 ? "lane" : "block");
        ++ran;
      }
    }
    rep.expect(ran > 0, std::string(e.name) + " iteration cap checked");
    std::printf("%-24s iteration cap: %d shapes/flags\n", e.name, ran);
  }
  for (int op = 0; op < ML_OP_COUNT; ++op)
    rep.expect(ops.count(op) == 1, "op " + std::to_string(op) + " has a kernel");
  std::printf("kernel table: %d checks, %d failures, worst ratio %.3g (%s)\n", rep.checks,
              rep.failures, rep.worst, rep.worst_where.c_str());
  return rep.failures == 0 ? 0 : 1;
}
