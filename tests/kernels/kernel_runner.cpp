#include "kernel_runner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// Lanes as fibers (user-space stacks switched by a few instructions) on a handful of OS
// threads: x86-64 Linux, and not under ThreadSanitizer, which needs real threads to see races.
#if defined(__x86_64__) && defined(__linux__)
#define KR_FIBERS 1
#endif
#if defined(__SANITIZE_THREAD__)
#undef KR_FIBERS
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#undef KR_FIBERS
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define KR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KR_ASAN 1
#endif
#endif

#if defined(KR_FIBERS)
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>
#if defined(KR_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#endif

namespace ml::kernel_runner {
namespace {

double g_timeout_s = 300.0;
// Completed barriers (thread-per-lane mode): the watchdog aborts when this stops moving while
// lanes wait.
std::atomic<uint64_t> g_progress{0};
std::atomic<int> g_waiting{0};

[[noreturn]] void deadlock(int waiting) {
  std::fprintf(stderr,
               "[kernel_runner] no barrier completed for %.0f s while %d lanes wait: "
               "non-uniform control flow around a barrier or simd op?\n",
               g_timeout_s, waiting);
  std::abort();
}

#if defined(KR_FIBERS)
[[noreturn]] void stuck(int lanes) {
  std::fprintf(stderr,
               "[kernel_runner] %d lanes wait at barriers or simd ops that no other lane "
               "reaches: non-uniform control flow around a barrier or simd op?\n",
               lanes);
  std::abort();
}

struct Fiber;
// The fiber running on this OS thread (null outside fibers: the thread-per-lane mode, or the
// scheduler's own stack).
thread_local Fiber *t_fiber = nullptr;
void fiber_block(Fiber *f, std::atomic<uint32_t> *gen, uint32_t seen);
void fiber_completed(Fiber *f);
#endif

// Reusable barrier of count lanes. Threads: lanes sleep on a futex (C++20 atomic wait), no
// mutex to re-acquire, which matters with hundreds of lane threads on two cores. Fibers: a lane
// that is not the last to arrive switches to its worker's scheduler, which resumes it once the
// generation moved.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    const uint32_t gen = gen_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_release);
#if defined(KR_FIBERS)
      if (Fiber *f = t_fiber) {
        if (cross_) fiber_completed(f);
        return;
      }
#endif
      gen_.notify_all();
      g_progress.fetch_add(1, std::memory_order_relaxed);
      return;
    }
#if defined(KR_FIBERS)
    if (Fiber *f = t_fiber) {
      fiber_block(f, &gen_, gen);
      return;
    }
#endif
    g_waiting.fetch_add(1, std::memory_order_relaxed);
    while (gen_.load(std::memory_order_acquire) == gen) gen_.wait(gen, std::memory_order_acquire);
    g_waiting.fetch_sub(1, std::memory_order_relaxed);
  }
  // Fibers: whether the lanes of this barrier run on more than one worker thread (a completion
  // then wakes the others).
  void set_cross(bool cross) { cross_ = cross; }

 private:
  int count_;
  bool cross_ = false;
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
        deadlock(g_waiting.load());
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

// What every lane of a launch runs: its lane of each group in turn.
struct Launch {
  Launch(int gs, int64_t groups, int64_t scratch_floats, Kernel fn, void *user)
      : g(gs, scratch_floats), groups(groups), fn(fn), user(user) {}
  Group g;
  int64_t groups;
  Kernel fn;
  void *user;
#if defined(KR_FIBERS)
  // Completed barriers whose lanes span workers: a worker with no runnable lane waits for it.
  alignas(64) std::atomic<uint32_t> progress{0};
  std::atomic<int> sleepers{0};
#endif
};

void lane_main(Launch &L, int lane) {
  Group &g = L.g;
  for (int64_t gid = 0; gid < L.groups; ++gid) {
    ml_ctx ctx{lane, g.group_size, gid, g.scratch.data(), &g, &kOps};
    L.fn(ctx, L.user);
    // Every lane leaves the group before its scratch is refilled for the next one.
    g.bar.wait();
    if (lane == 0) fill_nan(g.scratch);
    g.bar.wait();
  }
}

// Thread-per-lane mode: a fresh OS thread for each lane.
void run_threads(Launch &L) {
  Watchdog watchdog;
  const int gs = L.g.group_size;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(gs - 1));
  for (int lane = 1; lane < gs; ++lane) threads.emplace_back([&L, lane] { lane_main(L, lane); });
  lane_main(L, 0);
  for (auto &t : threads) t.join();
}

#if defined(KR_FIBERS)
// ---------------- fibers ----------------
// Switches stacks: saves the callee-saved registers on the current stack and its pointer in
// *save, then continues on the stack `to` (saved by an earlier switch, or made by
// fiber_stack_init). The first switch to a new stack "returns" into kr_fiber_start, which calls
// fn(arg) (r13, r12 of the made frame) and never returns.
extern "C" void kr_switch(void **save, void *to);
extern "C" void kr_fiber_start();
asm(R"(
  .text
  .p2align 4
  .type kr_switch,@function
kr_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kr_switch,.-kr_switch
  .p2align 4
  .type kr_fiber_start,@function
kr_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size kr_fiber_start,.-kr_fiber_start
)");

// Stack of a lane fiber (with ASan's fake frames larger and more of them).
#if defined(KR_ASAN)
constexpr size_t kStackBytes = size_t(4) << 20;
#else
constexpr size_t kStackBytes = size_t(1) << 20;
#endif
constexpr size_t kGuardBytes = 64 << 10;

struct Worker;

struct Fiber {
  enum State : uint8_t { kReady, kWaiting, kDone };
  Fiber() {
    void *p = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("[kernel_runner] mmap of a lane stack");
      std::abort();
    }
    mprotect(p, kGuardBytes, PROT_NONE);  // an overflow faults instead of corrupting
    base = static_cast<char *>(p);
  }
  ~Fiber() { munmap(base, kGuardBytes + kStackBytes); }
  Fiber(const Fiber &) = delete;
  Fiber &operator=(const Fiber &) = delete;

  char *base;
  void *sp = nullptr;
  Worker *worker = nullptr;
  Launch *launch = nullptr;
  int lane = 0;
  State state = kDone;
  std::atomic<uint32_t> *wait_gen = nullptr;
  uint32_t wait_seen = 0;
  void *asan_fake = nullptr;
};

struct Worker {
  void *sched_sp = nullptr;
  std::vector<Fiber *> lanes;  // this launch's lanes on this worker
  int polls = 0;               // lanes that polled a word during the current pass
  // The scheduler's stack as ASan sees it (from the first switch into a fiber).
  void *asan_fake = nullptr;
  const void *asan_bottom = nullptr;
  size_t asan_size = 0;
};

void fiber_main(Fiber *f);

// Makes f start fiber_main(f) at its next switch-in.
void fiber_stack_init(Fiber *f) {
  char *top = f->base + kGuardBytes + kStackBytes;
#if defined(KR_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(f->base + kGuardBytes, kStackBytes);
#endif
  // kr_switch pops r15 r14 r13 r12 rbx rbp, then returns into kr_fiber_start with rsp 16-aligned.
  auto *frame = reinterpret_cast<void **>(top - 136);
  for (int i = 0; i < 8; ++i) frame[i] = nullptr;
  frame[2] = reinterpret_cast<void *>(&fiber_main);  // r13
  frame[3] = f;                                      // r12
  frame[6] = reinterpret_cast<void *>(&kr_fiber_start);
  f->sp = frame;
  f->state = Fiber::kReady;
  f->asan_fake = nullptr;
}

// Scheduler -> fiber f, back when f blocks, yields or ends.
void switch_in(Worker &w, Fiber *f) {
  t_fiber = f;
#if defined(KR_ASAN)
  __sanitizer_start_switch_fiber(&w.asan_fake, f->base + kGuardBytes, kStackBytes);
#endif
  kr_switch(&w.sched_sp, f->sp);
#if defined(KR_ASAN)
  __sanitizer_finish_switch_fiber(w.asan_fake, nullptr, nullptr);
#endif
  t_fiber = nullptr;
}

// Fiber f -> its scheduler (final: f never runs again on this stack frame).
void switch_out(Fiber *f, bool final) {
  Worker &w = *f->worker;
#if defined(KR_ASAN)
  __sanitizer_start_switch_fiber(final ? nullptr : &f->asan_fake, w.asan_bottom, w.asan_size);
#else
  (void)final;
#endif
  kr_switch(&f->sp, w.sched_sp);
#if defined(KR_ASAN)
  __sanitizer_finish_switch_fiber(f->asan_fake, &w.asan_bottom, &w.asan_size);
#endif
}

void fiber_main(Fiber *f) {
#if defined(KR_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &f->worker->asan_bottom, &f->worker->asan_size);
#endif
  lane_main(*f->launch, f->lane);
  f->state = Fiber::kDone;
  switch_out(f, true);
  std::abort();  // never resumed
}

void fiber_block(Fiber *f, std::atomic<uint32_t> *gen, uint32_t seen) {
  f->state = Fiber::kWaiting;
  f->wait_gen = gen;
  f->wait_seen = seen;
  switch_out(f, false);
}

void fiber_completed(Fiber *f) {
  Launch &L = *f->launch;
  L.progress.fetch_add(1, std::memory_order_seq_cst);
  if (L.sleepers.load(std::memory_order_seq_cst) > 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&L.progress), FUTEX_WAKE_PRIVATE, INT32_MAX,
            nullptr, nullptr, 0);
}

// A lane polling a word that another lane sets (ml_load_acquire_*): the other lanes of its
// worker run first, so a lane that spins never starves the one it waits for.
void fiber_poll() {
  Fiber *f = t_fiber;
  if (!f) return;
  f->state = Fiber::kReady;
  ++f->worker->polls;
  switch_out(f, false);
}

// No lane of this worker can run until a barrier spanning workers completes: spins a little
// (the other worker is usually a few lanes from the barrier), then sleeps on the launch's
// progress word.
void idle_wait(Launch &L, uint32_t seen) {
  for (int i = 0; i < 1000; ++i) {
    if (L.progress.load(std::memory_order_acquire) != seen) return;
    _mm_pause();
  }
  L.sleepers.fetch_add(1, std::memory_order_seq_cst);
  double slept = 0;
  while (L.progress.load(std::memory_order_seq_cst) == seen) {
    timespec ts{1, 0};
    const auto t0 = std::chrono::steady_clock::now();
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&L.progress), FUTEX_WAIT_PRIVATE, seen, &ts,
            nullptr, 0);
    slept += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (slept > g_timeout_s && L.progress.load(std::memory_order_seq_cst) == seen)
      deadlock(L.g.group_size);
  }
  L.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

// Runs this worker's lanes of L to their end, in passes over them that alternate direction
// (the first pass forward or not as `forward` says): each lane runs to its next barrier, simd
// op or poll, and the lanes' order between two barriers changes from one to the next (a write
// another lane reads without a barrier between them shows as a wrong result, whichever of the
// two comes first in the kernel).
void schedule(Worker &w, Launch &L, int workers, bool forward) {
  const int n = static_cast<int>(w.lanes.size());
  int alive = n;
  while (alive > 0) {
    const uint32_t seen = L.progress.load(std::memory_order_acquire);
    int ran = 0;
    w.polls = 0;
    for (int k = 0; k < n; ++k) {
      Fiber *f = w.lanes[forward ? k : n - 1 - k];
      if (f->state == Fiber::kDone) continue;
      if (f->state == Fiber::kWaiting) {
        if (f->wait_gen->load(std::memory_order_acquire) == f->wait_seen) continue;
        f->state = Fiber::kReady;
      }
      switch_in(w, f);
      ++ran;
      if (f->state == Fiber::kDone) --alive;
    }
    forward = !forward;
    if (ran == 0) {
      if (workers == 1) stuck(alive);  // no other worker can complete a barrier
      idle_wait(L, seen);
    } else if (ran == w.polls) {
      // Only lanes polling words that other groups' threads set: let those run.
      std::this_thread::yield();
    }
  }
}

// Fibers of finished calling threads (groups run on threads of their own), for the next.
std::mutex g_spare_mu;
std::vector<std::unique_ptr<Fiber>> g_spare;

std::unique_ptr<Fiber> take_fiber() {
  {
    std::lock_guard<std::mutex> lk(g_spare_mu);
    if (!g_spare.empty()) {
      auto f = std::move(g_spare.back());
      g_spare.pop_back();
      return f;
    }
  }
  return std::make_unique<Fiber>();
}

// The fibers and worker threads of one calling thread, kept from launch to launch.
class Executor {
 public:
  explicit Executor(int workers) : workers_(workers), w_(static_cast<size_t>(workers)) {
    for (int i = 1; i < workers_; ++i) helpers_.emplace_back([this, i] { helper(i); });
  }
  ~Executor() {
    stop_ = true;
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    epoch_.notify_all();
    for (auto &t : helpers_) t.join();
    std::lock_guard<std::mutex> lk(g_spare_mu);
    for (auto &f : fibers_) g_spare.push_back(std::move(f));
  }
  int workers() const { return workers_; }

  void run(Launch &L) {
    const int gs = L.g.group_size;
    while (static_cast<int>(fibers_.size()) < gs) fibers_.push_back(take_fiber());
    for (auto &w : w_) w.lanes.clear();
    // Whole simdgroups to the workers in turn; a group of one simdgroup split in two halves.
    const int nsimd = (gs + 31) / 32;
    auto worker_of = [&](int lane) {
      if (nsimd == 1) return lane * std::min(workers_, 2) / gs;
      return (lane >> 5) % workers_;
    };
    int used = 0;
    for (int lane = 0; lane < gs; ++lane) {
      Fiber *f = fibers_[static_cast<size_t>(lane)].get();
      const int wi = worker_of(lane);
      f->worker = &w_[static_cast<size_t>(wi)];
      f->launch = &L;
      f->lane = lane;
      fiber_stack_init(f);
      w_[static_cast<size_t>(wi)].lanes.push_back(f);
      used = std::max(used, wi + 1);
    }
    for (int s = 0; s < nsimd; ++s)
      L.g.simd[s]->bar.set_cross(worker_of(s * 32) != worker_of(s * 32 + L.g.simd[s]->width - 1));
    L.g.bar.set_cross(used > 1);
    // The first pass alternates from launch to launch too (a kernel's first phase is ordered
    // both ways when it runs twice).
    forward_ = !forward_;
    if (used > 1) {
      cur_ = &L;
      cur_used_ = used;
      done_.store(0, std::memory_order_relaxed);
      epoch_.fetch_add(1, std::memory_order_seq_cst);
      epoch_.notify_all();
    }
    schedule(w_[0], L, used, forward_);
    if (used > 1) {
      int d;
      while ((d = done_.load(std::memory_order_acquire)) != workers_ - 1)
        done_.wait(d, std::memory_order_acquire);
    }
  }

 private:
  void helper(int i) {
    uint32_t seen = 0;  // the epoch before the first launch (a helper may start after it)
    for (;;) {
      epoch_.wait(seen, std::memory_order_acquire);
      seen = epoch_.load(std::memory_order_acquire);
      if (stop_) return;
      // Every helper acknowledges every launch, so none reads the next one's state late.
      if (i < cur_used_) schedule(w_[static_cast<size_t>(i)], *cur_, cur_used_, forward_);
      done_.fetch_add(1, std::memory_order_release);
      done_.notify_one();
    }
  }

  int workers_;
  std::vector<Worker> w_;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<std::thread> helpers_;
  Launch *cur_ = nullptr;
  int cur_used_ = 0;
  bool forward_ = false;
  bool stop_ = false;
  std::atomic<uint32_t> epoch_{0};
  std::atomic<int> done_{0};
};
#endif

// The mode: 0 a thread per lane, n >= 1 fibers on n threads; -1 until read from the
// environment.
std::atomic<int> g_workers{-1};

int workers_from_env() {
  const char *e = std::getenv("ML_KERNEL_RUNNER");
  if (!e || !*e) return 1;
  if (std::strcmp(e, "threads") == 0) return 0;
  char *end = nullptr;
  const long k = std::strtol(e, &end, 10);
  if (*end != '\0' || k < 1 || k > 64) {
    std::fprintf(stderr, "[kernel_runner] ML_KERNEL_RUNNER=%s: 'threads' or 1..64\n", e);
    std::abort();
  }
  return static_cast<int>(k);
}

}  // namespace

void set_barrier_timeout(double seconds) { g_timeout_s = seconds; }

void set_workers(int n) { g_workers.store(n < 0 ? 0 : n > 64 ? 64 : n); }

int workers() {
  int w = g_workers.load();
  if (w < 0) {
    int expected = -1;
    g_workers.compare_exchange_strong(expected, workers_from_env());
    w = g_workers.load();
  }
#if !defined(KR_FIBERS)
  w = 0;
#endif
  return w;
}

void run(int group_size, int64_t groups, int64_t scratch_floats, Kernel fn, void *user) {
  if (group_size < 1 || group_size > ML_MAX_GROUP_SIZE || groups <= 0) return;
  auto L = std::make_unique<Launch>(group_size, groups, scratch_floats, fn, user);
  Group &g = L->g;
  if (group_size == 1) {
    for (int64_t gid = 0; gid < groups; ++gid) {
      fill_nan(g.scratch);
      ml_ctx ctx{0, 1, gid, g.scratch.data(), &g, &kOps};
      fn(ctx, user);
    }
    return;
  }
  fill_nan(g.scratch);
#if defined(KR_FIBERS)
  if (const int w = workers(); w > 0) {
    static const bool hooked = (ml_cpu_poll_hook = fiber_poll, true);
    (void)hooked;
    thread_local std::unique_ptr<Executor> ex;
    if (!ex || ex->workers() != w) {
      ex.reset();
      ex = std::make_unique<Executor>(w);
    }
    ex->run(*L);
    return;
  }
#endif
  run_threads(*L);
}

}  // namespace ml::kernel_runner
