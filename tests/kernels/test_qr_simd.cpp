// Test of the SIMD QR kernels (core/kernels/qr_householder_simd.h: ml_qr_householder_simd, m, n
// <= 32, and ml_qr_householder_simd64, m, n <= 64) at group sizes 32 and 16 (16: max(m, n) <= 16,
// CUDA's sub-warp groups): the three modes, the QR families of test_qr_small.cpp (the general
// families, exact zero columns, a power-of-two scaled matrix), NaN and Inf inside a batch,
// LAPACK's ratios in double, R exactly upper triangular, the rank-deficiency bit, and agreement
// with the group kernel (qr_householder.h, the same reflectors: same signs of R's diagonal, same
// Q up to rounding).
//
// Lanes: every shuffle of these kernels is a simdgroup-wide exchange, a few thousand per 64 x 64
// matrix. Through the threaded CPU runner (one OS thread per lane) each exchange costs a
// 32-thread barrier, far too slow for a sweep over every shape; so the sweep runs the lanes as
// cooperative fibers on one thread (ucontext), in lockstep rounds with the runner's semantics
// (same summation order, same shuffle results, parity-alternated exchange slots), and a sample of
// shapes also runs through the threaded runner (ml::kernel_runner::run), which must give
// bitwise the same outputs. Under AddressSanitizer (no fibers there) and in unoptimised builds
// only the sample runs, through the threaded runner.
// Usage: test_qr_simd [full|sample|counts]   (default: full when optimised without ASan, else
// sample; counts: simdgroup exchanges per matrix of a few shapes)
#include <ucontext.h>

#include "kernel_runner.h"
#include "../../core/kernels/qr_householder.h"
#include "../../core/kernels/qr_householder_simd.h"
#include "kernel_test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define KT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KT_ASAN 1
#endif
#endif

using kt::Mat;
using kt::QrArgs;
using kt::Report;

namespace {

using kt::kQrLimit;
constexpr double kAgreeLimit = 30;  // |X_simd - X_group| / (max(m,n) cond ulp), as below

KT_QR_ENTRY(simd32_entry, ml_qr_householder_simd)
KT_QR_ENTRY(simd64_entry, ml_qr_householder_simd64)
KT_QR_ENTRY(group_entry, ml_qr_householder)

// ---- lanes as fibers: lockstep rounds, lane 0..gs-1 each run to their next exchange ----
namespace fiber {

using Kernel = ml::kernel_runner::Kernel;
constexpr size_t kStack = size_t(256) << 10;

struct State {
  int gs = 0;
  ml_i64 gid = 0;
  Kernel fn = nullptr;
  void *user = nullptr;
  ucontext_t main_uc;
  ucontext_t uc[32];
  std::vector<char> stack[32];
  float slots[2][32] = {};
  int parity = 0;      // exchange buffer of the current round
  int arrived = 0;     // lanes at the current round's exchange
  int round_op = -1;   // its kind (-2 barrier, else the simd op)
  int finished = 0;
  long exchanges = 0;  // rounds completed (statistics)
  std::vector<float> scratch;
};
State *g_state = nullptr;

[[noreturn]] void fail(const char *what, int lane) {
  std::fprintf(stderr, "[fiber lanes] lane %d: %s (non-uniform control flow?)\n", lane, what);
  std::abort();
}

// Lane `lane` arrives at an exchange of kind op with value x; returns its buffer once every
// lane of the round has arrived (the following lanes run in between).
const float *arrive(int lane, int op, float x) {
  State &s = *g_state;
  if (s.finished > 0) fail("exchange after another lane finished", lane);
  if (s.arrived == 0) s.round_op = op;
  if (op != s.round_op) fail("different exchange kinds in one round", lane);
  if (s.arrived != lane) fail("out of order", lane);
  const float *buf = s.slots[s.parity];
  s.slots[s.parity][lane] = x;
  if (++s.arrived == s.gs) {  // round complete: the next one writes the other buffer
    s.arrived = 0;
    s.parity ^= 1;
    ++s.exchanges;
    if (s.gs > 1) swapcontext(&s.uc[lane], &s.uc[0]);
  } else {
    swapcontext(&s.uc[lane], &s.uc[lane + 1]);
  }
  return buf;
}

void barrier(void *, int lane) { arrive(lane, -2, 0.0f); }

float simd(void *, int lane, int op, float x, int src) {
  State &s = *g_state;
  const float *b = arrive(lane, op, x);
  const int w = s.gs < 32 ? s.gs : 32, sl = lane & 31;
  switch (op) {  // as kernel_runner.cpp
    case 0: {
      float t = b[0];
      for (int i = 1; i < w; ++i) t += b[i];
      return t;
    }
    case 1: {
      float t = b[0];
      for (int i = 1; i < w; ++i) t = std::fmax(t, b[i]);
      return t;
    }
    case 2: {
      float t = b[0];
      for (int i = 1; i < w; ++i) t = std::fmin(t, b[i]);
      return t;
    }
    case 3:
      if (src < 0 || src >= w) fail("shuffle from a lane outside the simdgroup", lane);
      return b[src];
    default: {
      const int partner = sl ^ src;
      return partner < w ? b[partner] : x;
    }
  }
}

const ml_cpu_group_ops kOps = {barrier, simd};

void lane_main(int lane) {
  State &s = *g_state;
  ml_ctx ctx{lane, s.gs, s.gid, s.scratch.data(), &s, &kOps};
  s.fn(ctx, s.user);
  if (s.arrived != 0) fail("finished while other lanes wait at an exchange", lane);
  ++s.finished;
  setcontext(lane + 1 < s.gs ? &s.uc[lane + 1] : &s.main_uc);
}

// As ml::kernel_runner::run for group sizes 1..32, on the calling thread.
void run(int gs, int64_t groups, int64_t scratch_floats, Kernel fn, void *user) {
  static State st;
  g_state = &st;
  st.gs = gs;
  st.fn = fn;
  st.user = user;
  st.scratch.assign(size_t(scratch_floats > 0 ? scratch_floats : 1), 0.0f);
  for (int l = 0; l < gs; ++l)
    if (st.stack[l].empty()) st.stack[l].resize(kStack);
  for (int64_t gid = 0; gid < groups; ++gid) {
    for (float &x : st.scratch) x = std::numeric_limits<float>::quiet_NaN();
    st.gid = gid;
    st.arrived = 0;
    st.finished = 0;
    for (int l = 0; l < gs; ++l) {
      getcontext(&st.uc[l]);
      st.uc[l].uc_stack.ss_sp = st.stack[l].data();
      st.uc[l].uc_stack.ss_size = kStack;
      st.uc[l].uc_link = nullptr;
      makecontext(&st.uc[l], reinterpret_cast<void (*)()>(&lane_main), 1, l);
    }
    swapcontext(&st.main_uc, &st.uc[0]);
    if (st.finished != gs) fail("not every lane finished", st.finished);
  }
}

}  // namespace fiber

using Exec = void (*)(int, int64_t, int64_t, ml::kernel_runner::Kernel, void *);

std::string where(const char *entry, int gs, const char *op, int m, int n, const std::string &fam,
                  int idx) {
  char b[200];
  std::snprintf(b, sizeof b, "%s gs=%d %s %dx%d %s #%d", entry, gs, op, m, n, fam.c_str(), idx);
  return b;
}

struct Run {
  const char *name;
  ml::kernel_runner::Kernel fn;
};

// One batch: the chosen families of m x n (all when pick is empty) with a NaN matrix in the
// middle and an Inf one at the end, through the kernel at group size gs; the group kernel at
// group size 1 as reference. Returns the outputs' bytes (for comparing executors).
std::vector<float> check(Report &rep, kt::QrWorst &worst, const Run &k, Exec exec, int gs, int m,
                         int n, int mode, std::mt19937_64 &rng, const std::vector<int> &pick) {
  auto all = kt::qr_kernel_families(m, n, rng, true);
  kt::Families fams;
  if (pick.empty()) {
    fams = all;
  } else {
    for (int i : pick) fams.push_back(all[size_t(i) % all.size()]);
  }
  const kt::QrShape s(m, n, mode);
  const kt::NamedBatch in =
      kt::nan_inf_batch(fams, m, n, -std::numeric_limits<float>::infinity(), rng);
  const int batch = in.size();
  kt::QrOut res(s, batch), ref(s, batch);
  QrArgs args = res.args(s, in.a.data(), s.want_q);
  exec(gs, batch + 1, 0, k.fn, &args);  // one group beyond the batch: must write nothing
  kt::run_qr_kernel(group_entry, 1, batch, ml_qr_householder_scratch_floats(m, n), s, in, ref,
                    true);
  kt::check_qr_vs_group(rep, worst, s, in, res, ref, kAgreeLimit, true,
                        [&](const std::string &fam, int b) {
                          return where(k.name, gs, s.op, m, n, fam, b);
                        });
  std::vector<float> out(res.r);
  out.insert(out.end(), res.q.begin(), res.q.end());
  for (int x : res.info) out.push_back(float(x));
  return out;
}

constexpr int kModes[3] = {ML_K_QR_REDUCED, ML_K_QR_R, ML_K_QR_COMPLETE};

// Every m, n in 1..lim at group size gs, the three modes; per (shape, mode) the families
// rotate so each appears on a share of the grid (all of them with `all`).
void sweep(Report &rep, kt::QrWorst &worst, const Run &k, int gs, int lim, bool all,
           std::mt19937_64 &rng, int per_batch) {
  kt::Timer tm(k.name, lim, lim, gs);
  int rot = 0;
  for (int m = 1; m <= lim; ++m)
    for (int n = 1; n <= lim; ++n)
      for (int mode : kModes) {
        std::vector<int> pick;
        if (!all)
          for (int i = 0; i < per_batch; ++i) pick.push_back(rot++);
        check(rep, worst, k, fiber::run, gs, m, n, mode, rng, pick);
      }
}

// Shapes with a dimension above 32 (the 64-row entry), every family.
void sweep64(Report &rep, kt::QrWorst &worst, const Run &k, std::mt19937_64 &rng, bool big) {
  kt::Timer tm(k.name, 64, 64, 32);
  const std::vector<int> dims = big ? std::vector<int>{1, 33, 47, 64}
                                    : std::vector<int>{1, 33, 64};
  for (int m : dims)
    for (int n : dims) {
      if (std::max(m, n) <= 32) continue;
      for (int mode : kModes) check(rep, worst, k, fiber::run, 32, m, n, mode, rng, {});
    }
}

// Sample through the threaded CPU runner; with fibers available, also through them: bitwise
// the same outputs.
void sample(Report &rep, kt::QrWorst &worst, const Run &k32, const Run &k64, bool compare) {
  struct S {
    const Run *k;
    int gs, m, n, mode;
  };
  const S shapes[] = {{&k32, 32, 32, 32, ML_K_QR_COMPLETE}, {&k32, 32, 20, 7, ML_K_QR_COMPLETE},
                      {&k32, 32, 5, 29, ML_K_QR_REDUCED},    {&k32, 16, 16, 16, ML_K_QR_REDUCED},
                      {&k32, 16, 9, 13, ML_K_QR_R},          {&k64, 32, 64, 64, ML_K_QR_REDUCED},
                      {&k64, 32, 40, 33, ML_K_QR_COMPLETE},  {&k64, 16, 13, 6, ML_K_QR_COMPLETE},
                      {&k64, 32, 12, 50, ML_K_QR_R}};
  for (const S &s : shapes) {
    kt::Timer tm(s.k->name, s.m, s.n, s.gs);
    const std::vector<int> pick = {0, 3, 5, 12};  // gaussian, clustered, rankdef, tiny_below
    std::mt19937_64 r1(uint64_t(s.m * 131 + s.n)), r2(r1);
    auto threaded = check(rep, worst, *s.k, ml::kernel_runner::run, s.gs, s.m, s.n, s.mode, r1,
                          pick);
    if (compare) {
      auto fibers = check(rep, worst, *s.k, fiber::run, s.gs, s.m, s.n, s.mode, r2, pick);
      rep.expect(threaded.size() == fibers.size() &&
                     std::memcmp(threaded.data(), fibers.data(), sizeof(float) * fibers.size()) ==
                         0,
                 std::string(s.k->name) + " threaded runner == fiber lanes, bitwise");
    }
  }
}

// Plumbing: info may be null; shapes an entry does not take are left untouched.
void plumbing(Report &rep, Exec exec) {
  std::mt19937_64 rng(7);
  const int m = 6, n = 4, batch = 3;
  auto a = kt::to_float(kt::gaussian(rng, m * batch, n));
  std::vector<float> q(size_t(batch) * m * n, -7.f), r(size_t(batch) * n * n, -7.f);
  QrArgs x{{m, n, ML_K_QR_REDUCED, 0, batch, 0}, a.data(), q.data(), r.data(), nullptr};
  exec(32, batch, 0, simd32_entry, &x);
  rep.expect(kt::all_finite(q.data(), q.size()) && kt::all_finite(r.data(), r.size()),
             "plumbing: info=null");
  std::vector<float> big(33 * 33, 1.f), rq(33 * 33, -7.f), rr(33 * 33, -7.f);
  QrArgs y{{33, 33, ML_K_QR_REDUCED, 0, 1, 0}, big.data(), rq.data(), rr.data(), nullptr};
  exec(32, 1, 0, simd32_entry, &y);
  QrArgs z{{17, 17, ML_K_QR_REDUCED, 0, 1, 0}, big.data(), rq.data(), rr.data(), nullptr};
  exec(16, 1, 0, simd32_entry, &z);
  rep.expect(rq[0] == -7.f && rr[0] == -7.f, "plumbing: 33x33 (and 17x17 at 16 lanes) untouched");
  rep.expect(ml_qr_householder_simd_fits(32, 32, ML_K_QR_COMPLETE) &&
                 !ml_qr_householder_simd_fits(33, 32, ML_K_QR_R) &&
                 !ml_qr_householder_simd_fits(32, 33, ML_K_QR_R) &&
                 ml_qr_householder_simd64_fits(64, 64, ML_K_QR_COMPLETE) &&
                 !ml_qr_householder_simd64_fits(65, 64, ML_K_QR_R) &&
                 !ml_qr_householder_simd64_fits(64, 65, ML_K_QR_R) &&
                 !ml_qr_householder_simd64_fits(0, 3, ML_K_QR_REDUCED) &&
                 !ml_qr_householder_simd64_fits(3, 3, 7) &&
                 ml_qr_householder_simd64_fits_flags(33, 1, ML_K_QR_R, 0) &&
                 ml_qr_householder_simd64_fits_flags(2, 64, ML_K_QR_REDUCED, 0) &&
                 !ml_qr_householder_simd64_fits_flags(32, 32, ML_K_QR_COMPLETE, 0),
             "plumbing: fits");
}

// Simdgroup exchanges (shuffles and reductions) per matrix of a few shapes: the shuffle count a
// GPU issues per matrix (one warp-wide instruction each).
void print_counts() {
  struct S {
    const char *name;
    ml::kernel_runner::Kernel fn;
    int gs, m, n, mode;
  };
  const S shapes[] = {{"simd", simd32_entry, 16, 16, 16, ML_K_QR_REDUCED},
                      {"simd", simd32_entry, 32, 32, 32, ML_K_QR_R},
                      {"simd", simd32_entry, 32, 32, 32, ML_K_QR_REDUCED},
                      {"simd64", simd64_entry, 32, 64, 32, ML_K_QR_REDUCED},
                      {"simd64", simd64_entry, 32, 64, 64, ML_K_QR_R},
                      {"simd64", simd64_entry, 32, 64, 64, ML_K_QR_REDUCED}};
  std::mt19937_64 rng(5);
  for (const S &s : shapes) {
    auto a = kt::to_float(kt::gaussian(rng, s.m, s.n));
    const int k = std::min(s.m, s.n);
    std::vector<float> q(size_t(s.m) * s.m), r(size_t(s.m) * s.n);
    QrArgs x{{s.m, s.n, s.mode, 0, 1, 0}, a.data(), q.data(), r.data(), nullptr};
    const long before = fiber::g_state ? fiber::g_state->exchanges : 0;
    fiber::run(s.gs, 1, 0, s.fn, &x);
    std::printf("%s gs=%d %dx%d %s: %ld exchanges (k = %d)\n", s.name, s.gs, s.m, s.n,
                s.mode == ML_K_QR_R ? "R only" : "reduced", fiber::g_state->exchanges - before, k);
  }
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "counts") {
    print_counts();
    return 0;
  }
#if defined(KT_ASAN) || !defined(__OPTIMIZE__)
  bool full = false;
#else
  bool full = true;
#endif
  if (argc > 1) full = std::string(argv[1]) == "full";
#if defined(KT_ASAN)
  full = false;
#endif
  Report rep;
  kt::QrWorst worst;
  const Run k32{"simd", simd32_entry}, k64{"simd64", simd64_entry};
  std::mt19937_64 rng(2718);
  if (full) {
    sweep(rep, worst, k32, 32, 32, false, rng, 2);  // every shape <= 32, two families each
    sweep(rep, worst, k32, 16, 16, true, rng, 0);   // every shape <= 16 at 16 lanes, all families
    sweep(rep, worst, k64, 16, 16, false, rng, 2);
    sweep(rep, worst, k64, 32, 8, true, rng, 0);    // the 64-row entry on small shapes
    sweep64(rep, worst, k64, rng, true);
    std::printf("fiber exchanges: %ld\n", fiber::g_state ? fiber::g_state->exchanges : 0L);
  }
  sample(rep, worst, k32, k64, full);
  plumbing(rep, ml::kernel_runner::run);
  std::printf("worst ratios: |A-QR| %.3g, |I-QtQ| %.3g, |AtA-RtR| %.3g, vs group kernel %.3g\n",
              worst.resid, worst.orth, worst.rtr, worst.agree);
  std::printf("%d checks, %d failures (worst ratio %.3g at %s)\n", rep.checks, rep.failures,
              rep.worst, rep.worst_where.c_str());
  return rep.failures == 0 ? 0 : 1;
}
