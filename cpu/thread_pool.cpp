#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "errors.h"

namespace ml {
namespace {

std::atomic<int32_t> g_user_threads{0};

int32_t core_count() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int32_t>(hw ? std::min(hw, 1024u) : 1);
}

// Far more threads than cores only adds switching and memory (a stack and a
// scratch buffer each): requests above this are capped, with a warning.
int32_t max_threads() { return 4 * core_count(); }

int32_t default_threads() {
  static const int32_t value = [] {
    const int32_t cores = core_count(), cap = max_threads();
    if (const char *env = std::getenv("METAL_LINALG_CPU_THREADS"); env && *env) {
      char *end = nullptr;
      errno = 0;
      const long long v = std::strtoll(env, &end, 10);
      if (errno || *end != 0 || v < 0) {
        warn("METAL_LINALG_CPU_THREADS='%s' is not a non-negative integer: ignored (using %d)",
             env, cores);
      } else if (v > cap) {
        warn("METAL_LINALG_CPU_THREADS=%lld is more than 4 x the %d cores: using %d", v, cores,
             cap);
        return cap;
      } else if (v > 0) {
        return static_cast<int32_t>(v);
      }
    }
    return cores;
  }();
  return value;
}

class Pool {
 public:
  // Runs the job if the pool is free; false when another batch holds it.
  bool try_run(int64_t count, int32_t threads, void (*task)(void *, int64_t), void *ctx) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    const int helpers = static_cast<int>(std::min<int64_t>(threads, count)) - 1;
    grow(helpers);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = task;
      ctx_ = ctx;
      count_ = count;
      next_.store(0, std::memory_order_relaxed);
      helpers_ = helpers;
      finished_ = 0;
      ++generation_;
    }
    if (helpers > 0) wake_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return finished_ == helpers_; });
    return true;
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto &t : workers_) t.join();
  }

 private:
  void work() {
    for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count_;) task_(ctx_, i);
  }

  void grow(int helpers) {
    while (static_cast<int>(workers_.size()) < helpers) {
      const int id = static_cast<int>(workers_.size());
      // A new worker must not skip the job about to be posted: it starts from
      // the generation before it.
      const uint64_t start = generation_;
      workers_.emplace_back([this, id, start] { loop(id, start); });
    }
  }

  void loop(int id, uint64_t seen) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (id >= helpers_) continue;
      lock.unlock();
      work();
      lock.lock();
      if (++finished_ == helpers_) done_.notify_one();
    }
  }

  std::mutex busy_;   // held by the one batch running on the pool
  std::mutex mutex_;  // guards the job fields below
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  uint64_t generation_ = 0;
  void (*task_)(void *, int64_t) = nullptr;
  void *ctx_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  int helpers_ = 0;
  int finished_ = 0;
  bool stop_ = false;
};

Pool &pool() {
  // Never destroyed: worker threads must not be joined during static
  // destruction while another library may still call in. A forked child
  // (multiprocessing, data loaders) has none of the parent's workers, so it
  // starts a pool of its own and abandons the inherited one untouched.
  static std::atomic<Pool *> current{nullptr};
  static std::atomic<pid_t> owner{0};
  const pid_t me = getpid();
  Pool *p = current.load(std::memory_order_acquire);
  if (p && owner.load(std::memory_order_acquire) == me) return *p;
  Pool *fresh = new Pool;
  if (current.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) {
    owner.store(me, std::memory_order_release);
    return *fresh;
  }
  delete fresh;  // another thread installed one first; `fresh` never started a thread
  return *p;
}

}  // namespace

int32_t cpu_threads() {
  const int32_t user = g_user_threads.load(std::memory_order_relaxed);
  return user > 0 ? user : default_threads();
}

void set_cpu_threads(int32_t n) {
  const int32_t cap = max_threads();
  if (n > cap) {
    warn("set_cpu_threads(%d): more than 4 x the %d cores, using %d", n, core_count(), cap);
    n = cap;
  }
  g_user_threads.store(n > 0 ? n : 0, std::memory_order_relaxed);
}

void parallel_for(int64_t count, void (*task)(void *ctx, int64_t i), void *ctx) {
  const int32_t threads = cpu_threads();
  if (count <= 0) return;
  if (count == 1 || threads <= 1 || !pool().try_run(count, threads, task, ctx))
    for (int64_t i = 0; i < count; ++i) task(ctx, i);
}

}  // namespace ml

