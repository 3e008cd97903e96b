#include "errors.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace ml {
namespace {
thread_local std::string g_last_error;

// Warnings: the texts seen so far (each is reported once) and those not yet taken.
constexpr size_t kMaxPending = 64;
std::mutex g_warn_mutex;
std::set<std::string> *g_seen = nullptr;       // never freed: warnings may come during exit
std::vector<std::string> *g_pending = nullptr;
std::atomic<int32_t> g_pending_count{0};
bool g_claimed = false;
}  // namespace

ml_status fail(ml_status status, const char *where, const char *fmt, ...) {
  char msg[768];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, args);
  va_end(args);
  try {
    g_last_error = std::string("[metal_linalg::") + where + "] " + msg;
  } catch (...) {
    // Out of memory while reporting: keep the status, lose the text.
  }
  return status;
}

void clear_error() { g_last_error.clear(); }

const char *last_error() { return g_last_error.c_str(); }

void warn(const char *fmt, ...) {
  char msg[768];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, args);
  va_end(args);
  try {
    std::lock_guard<std::mutex> lock(g_warn_mutex);
    if (!g_seen) g_seen = new std::set<std::string>, g_pending = new std::vector<std::string>;
    if (!g_seen->insert(msg).second) return;
    const std::string text = std::string("[metal_linalg] ") + msg;
    if (!g_claimed) {
      std::fprintf(stderr, "%s\n", text.c_str());
      return;
    }
    if (g_pending->size() >= kMaxPending) return;
    g_pending->push_back(text);
    g_pending_count.store(static_cast<int32_t>(g_pending->size()), std::memory_order_relaxed);
  } catch (...) {
    // Out of memory: the warning is lost, the call goes on.
  }
}

ml_status take_warnings(char *buf, size_t buf_len, size_t *needed) {
  if (!buf && buf_len > 0)
    return fail(ML_INVALID_ARGUMENT, "take_warnings", "buf is NULL but buf_len is %zu", buf_len);
  std::string text;
  {
    std::lock_guard<std::mutex> lock(g_warn_mutex);
    g_claimed = true;
    size_t total = 1;
    if (g_pending)
      for (const std::string &w : *g_pending) total += w.size() + 1;
    if (needed) *needed = total;
    if (g_pending && buf_len > 0) {
      // Whole lines that fit are taken (at least one, truncated if it must be);
      // the rest stays pending for the next call.
      size_t taken = 0;
      for (const std::string &w : *g_pending) {
        if (taken > 0 && text.size() + w.size() + 1 > buf_len - 1) break;
        text += w;
        text += '\n';
        ++taken;
      }
      g_pending->erase(g_pending->begin(), g_pending->begin() + static_cast<long>(taken));
      g_pending_count.store(static_cast<int32_t>(g_pending->size()), std::memory_order_relaxed);
    }
  }
  if (buf_len > 0) {
    const size_t n = text.size() < buf_len - 1 ? text.size() : buf_len - 1;
    std::memcpy(buf, text.data(), n);
    buf[n] = 0;
  }
  return ML_OK;
}

int32_t pending_warnings() { return g_pending_count.load(std::memory_order_relaxed); }

void lock_warnings_for_fork() { g_warn_mutex.lock(); }

void unlock_warnings_after_fork() { g_warn_mutex.unlock(); }

}  // namespace ml
