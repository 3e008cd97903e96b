#include "kernel_runner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ml::kernel_runner {
namespace {

double g_timeout_s = 300.0;
// Completed barriers (all kinds): the watchdog aborts when this stops moving while lanes wait.
std::atomic<uint64_t> g_progress{0};
std::atomic<int> g_waiting{0};

// Reusable barrier: lanes sleep on a futex (C++20 atomic wait), no mutex to re-acquire, which
// matters with hundreds of lane threads on two cores.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    const uint32_t gen = gen_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_release);
      gen_.notify_all();
      g_progress.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    g_waiting.fetch_add(1, std::memory_order_relaxed);
    while (gen_.load(std::memory_order_acquire) == gen) gen_.wait(gen, std::memory_order_acquire);
    g_waiting.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  int count_;
  std::atomic<int> arrived_{0};
  std::atomic<uint32_t> gen_{0};
};

// Aborts the process when lanes wait and no barrier completes for g_timeout_s: a kernel with
// a barrier or simd op under non-uniform control flow would otherwise hang the test.
class Watchdog {
 public:
  Watchdog() : thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    uint64_t last = g_progress.load();
    auto since = std::chrono::steady_clock::now();
    while (!cv_.wait_for(lk, std::chrono::milliseconds(200), [&] { return stop_; })) {
      const uint64_t now = g_progress.load();
      const auto t = std::chrono::steady_clock::now();
      if (now != last || g_waiting.load() == 0) {
        last = now;
        since = t;
      } else if (std::chrono::duration<double>(t - since).count() > g_timeout_s) {
        std::fprintf(stderr,
                     "[kernel_runner] no barrier completed for %.0f s while %d lanes wait: "
                     "non-uniform control flow around a barrier or simd op?\n",
                     g_timeout_s, g_waiting.load());
        std::abort();
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

struct Simdgroup {
  explicit Simdgroup(int width) : width(width), bar(width) {}
  int width;
  Barrier bar;
  float slots[2][32] = {};  // ping-pong: a buffer is rewritten only after another barrier
};

struct Group {
  Group(int gs, int64_t scratch_floats) : group_size(gs), bar(gs), parity(gs, 0) {
    for (int s = 0; s * 32 < gs; ++s)
      simd.push_back(std::make_unique<Simdgroup>(gs - s * 32 < 32 ? gs - s * 32 : 32));
    scratch.assign(static_cast<size_t>(scratch_floats > 0 ? scratch_floats : 1), 0.0f);
  }
  int group_size;
  Barrier bar;
  std::vector<std::unique_ptr<Simdgroup>> simd;
  std::vector<int> parity;  // per lane, so each lane alternates its simd slot buffers
  std::vector<float> scratch;
};

void group_barrier(void *state, int) { static_cast<Group *>(state)->bar.wait(); }

float group_simd(void *state, int lane, int op, float x, int src) {
  Group &g = *static_cast<Group *>(state);
  Simdgroup &s = *g.simd[lane >> 5];
  const int sl = lane & 31, w = s.width;
  float *slots = s.slots[g.parity[lane]];
  g.parity[lane] ^= 1;
  slots[sl] = x;
  s.bar.wait();
  switch (op) {
    case 0: {  // same summation order on every lane: identical bits, as the GPUs give
      float t = slots[0];
      for (int i = 1; i < w; ++i) t += slots[i];
      return t;
    }
    case 1: {
      float t = slots[0];
      for (int i = 1; i < w; ++i) t = std::fmax(t, slots[i]);
      return t;
    }
    case 2: {
      float t = slots[0];
      for (int i = 1; i < w; ++i) t = std::fmin(t, slots[i]);
      return t;
    }
    case 3:
      if (src < 0 || src >= w) {
        std::fprintf(stderr, "[kernel_runner] simd shuffle from lane %d of a %d-wide simdgroup\n",
                     src, w);
        std::abort();
      }
      return slots[src];
    default: {
      const int partner = sl ^ src;
      return partner < w ? slots[partner] : x;
    }
  }
}

const ml_cpu_group_ops kOps = {group_barrier, group_simd};

void fill_nan(std::vector<float> &v) {
  for (float &x : v) x = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

void set_barrier_timeout(double seconds) { g_timeout_s = seconds; }

void run(int group_size, int64_t groups, int64_t scratch_floats, Kernel fn, void *user) {
  if (group_size < 1 || group_size > ML_MAX_GROUP_SIZE || groups <= 0) return;
  Group g(group_size, scratch_floats);
  if (group_size == 1) {
    for (int64_t gid = 0; gid < groups; ++gid) {
      fill_nan(g.scratch);
      ml_ctx ctx{0, 1, gid, g.scratch.data(), &g, &kOps};
      fn(ctx, user);
    }
    return;
  }
  fill_nan(g.scratch);
  Watchdog watchdog;
  auto lane_main = [&](int lane) {
    for (int64_t gid = 0; gid < groups; ++gid) {
      ml_ctx ctx{lane, group_size, gid, g.scratch.data(), &g, &kOps};
      fn(ctx, user);
      // Every lane leaves the group before its scratch is refilled for the next one.
      g.bar.wait();
      if (lane == 0) fill_nan(g.scratch);
      g.bar.wait();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(group_size - 1));
  for (int lane = 1; lane < group_size; ++lane) threads.emplace_back(lane_main, lane);
  lane_main(0);
  for (auto &t : threads) t.join();
}

}  // namespace ml::kernel_runner
