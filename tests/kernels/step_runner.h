// The blocked algorithms (core/src/blocked.h) on the CPU runner: a Runner that executes each
// step kernel of core/kernels/steps.h with kernel_runner::run (every lane its own stack, real
// barriers), the workspace a host vector filled with NaN first so that reads of never-written
// workspace show in the results. Include after kernel_runner.h.
#pragma once
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "../../core/kernels/steps.h"
#include "../../core/src/blocked.h"
#include "kernel_runner.h"
#include "kernel_test_util.h"

namespace kt {

// Options of the blocked algorithms with panels of nb columns, products of gemm_lanes lanes and
// groups of up to max_group lanes (the rest the defaults).
inline ml::blocked::Options blocked_options(int nb, int gemm_lanes, int max_group) {
  ml::blocked::Options o;
  o.nb = nb;
  o.gemm_lanes = gemm_lanes;
  o.max_group = max_group;
  return o;
}

// Symmetric bands of half-width L.bw in L.a of each of batch workspace slices (both triangles,
// zero elsewhere, as sy2sb leaves them), sb_sweeps' progress words and ticket zeroed:
// gaussian, graded (entries scaled down to 2^-20 along the diagonal) in turn; matrix `nan`
// gets a NaN on its diagonal. Layout: ml::blocked::BandLayout.
template <class Layout>
inline void fill_bands(std::vector<float> &ws, const Layout &L, int batch, int nan,
                       std::mt19937_64 &rng) {
  const int n = L.n, bw = L.bw;
  for (int b = 0; b < batch; ++b) {
    float *a = ws.data() + size_t(b) * L.per;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) a[L.a + size_t(j) * n + i] = 0.f;
    for (int j = 0; j < n; ++j)
      for (int i = j; i < std::min(n, j + bw + 1); ++i) {
        double x = std::normal_distribution<>()(rng);
        if (b % 2 == 1) x *= std::ldexp(1.0, -20 * (i + j) / (2 * n));
        a[L.a + size_t(j) * n + i] = a[L.a + size_t(i) * n + j] = float(x);
      }
    if (b == nan) a[L.a + size_t(n / 2) * n + n / 2] = std::nanf("");
    for (int j = 0; j < n; ++j) a[L.tau + j] = 0.f;
    a[L.qstat] = 0.f;
  }
}

// The blocked QR of in's matrices (shape s) under o into out, through runner (a CpuStepRunner,
// or a runner that passes the launches on to one).
template <class Runner>
inline ml_status run_blocked_qr(Runner &runner, const QrShape &s, const NamedBatch &in,
                                QrOut &out, const ml::blocked::Options &o) {
  const QrArgs args = out.args(s, in.a.data(), s.want_q);
  const ml::Call c{
      ML_OP_QR, in.size(), s.m, s.n, s.mode, in.a.data(), args.q, args.r, nullptr, args.info};
  return runner.run(c, s.mode, o);
}

class CpuStepRunner final : public ml::blocked::Runner {
 public:
  std::vector<float> ws;
  const float *a = nullptr;
  float *o0 = nullptr, *o1 = nullptr, *o2 = nullptr;
  int *info = nullptr;
  int launches = 0;
  std::vector<int> steps;  // the step of each launch, in order
  // Launches of this step run their groups on concurrent threads, all at once (the steps whose
  // groups wait on each other through device words), not in turn.
  int threaded_step = -1;

  // The side queue (Runner::side_begin): its launches are held back and run at join(), after
  // the main queue's launches made in between, so a sequence that let the two overlap on
  // shared data computes a different result here.
  ml_status side_begin() override {
    if (ml_status st = join()) return st;
    side = true;
    return ML_OK;
  }
  ml_status side_end() override {
    side = false;
    return ML_OK;
  }
  ml_status join() override {
    std::vector<ml::blocked::StepLaunch> held;
    held.swap(side_launches);
    for (const auto &l : held)
      if (ml_status st = run_launch(l)) return st;
    return ML_OK;
  }
  int side_count = 0;  // launches made on the side queue

  ml_status launch(const ml::blocked::StepLaunch &l) override {
    if (side) {
      side_launches.push_back(l);
      ++side_count;
      return ML_OK;
    }
    return run_launch(l);
  }

  ml_status run_launch(const ml::blocked::StepLaunch &l) {
    if (l.step < 0 || l.step >= ml::blocked::kStepCount || l.group_size < 1 ||
        l.group_size > 1024 || l.p.groups < 0) {
      std::printf("FAIL bad step launch %d (gs %d)\n", l.step, l.group_size);
      return ML_RUNTIME_ERROR;
    }
    Bound u{&l, this};
    steps.push_back(l.step);
    if (l.step == threaded_step) {
      std::vector<Bound> one(static_cast<size_t>(l.p.groups));
      std::vector<std::thread> threads;
      for (int64_t g = 0; g < l.p.groups; ++g) {
        one[g] = Bound{&l, this, g};
        threads.emplace_back([&, g] {
          ml::kernel_runner::run(l.group_size, 1, l.shared_floats, kEntries[l.step], &one[g]);
        });
      }
      for (auto &t : threads) t.join();
      ++launches;
      return ML_OK;
    }
    ml::kernel_runner::run(l.group_size, l.p.groups, l.shared_floats, kEntries[l.step], &u);
    ++launches;
    return ML_OK;
  }

  // Runs c (kernel flags kf) under o; the workspace sized by workspace_bytes. The launches go
  // through via where given (a runner that passes them on to this one).
  ml_status run(const ml::Call &c, int32_t kf, const ml::blocked::Options &o,
                ml::blocked::Runner *via = nullptr) {
    const int64_t bytes = ml::blocked::workspace_bytes(c, kf, o);
    ws.assign(static_cast<size_t>(bytes / 4), std::nanf(""));
    a = c.a;
    o0 = c.out0;
    o1 = c.out1;
    o2 = ml::rhs_op(c) ? const_cast<float *>(c.b) : c.out2;  // B in the out2 slot (backend.h)
    info = c.info;
    side = false;
    side_launches.clear();
    const ml_status st = ml::blocked::run(c, kf, o, via ? *via : *this);
    if (!side_launches.empty()) {
      std::printf("FAIL side-queue launches never joined\n");
      return ML_RUNTIME_ERROR;
    }
    return st;
  }

 private:
  bool side = false;
  std::vector<ml::blocked::StepLaunch> side_launches;
  struct Bound {
    const ml::blocked::StepLaunch *l;
    CpuStepRunner *r;
    int64_t group = -1;  // >= 0: the runner's one group is this group of the launch
  };
#define KT_STEP_ENTRY(name, fn)                                                        \
  static void entry_##name(const ml_ctx &ctx, void *u) {                              \
    auto &b = *static_cast<Bound *>(u);                                               \
    ml_ctx c = ctx;                                                                   \
    if (b.group >= 0) c.group_id = b.group;                                           \
    fn(c, b.l->p, b.r->ws.data(), b.r->a, b.r->o0, b.r->o1, b.r->o2, b.r->info);      \
  }
  ML_STEP_TABLE(KT_STEP_ENTRY)
#undef KT_STEP_ENTRY
#define KT_STEP_PTR(name, fn) &entry_##name,
  static constexpr ml::kernel_runner::Kernel kEntries[] = {ML_STEP_TABLE(KT_STEP_PTR)};
#undef KT_STEP_PTR
};

}  // namespace kt
