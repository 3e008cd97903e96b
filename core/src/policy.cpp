#include "policy.h"

#include <algorithm>
#include <atomic>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "device.h"
#include "errors.h"
#include "ops.h"
#include "tuned_tables.h"

namespace ml::policy {
namespace {

const char *const kFieldNames[kFieldCount] = {"cpu_kernel_max_n",  "gpu_min_batch",
                                              "gpu_max_n",         "host_gpu_min_work",
                                              "gpu_lane_max_n",    "gpu_lane_min_batch",
                                              "gpu_small_max_n",   "gpu_simd_max_n",
                                              "gpu_global_max_n",  "gpu_global_min_batch",
                                              "gpu_blocked_min_n", "gpu_simd_min_n",
                                              "cpu_small_max_n",   "gpu_blocked_max_batch",
                                              "gpu_alt_min_n",     "gpu_alt_max_n",
                                              "gpu_alt_max_batch"};

bool is_lanes_op(int32_t op) {
  return op == ML_OP_CHOLESKY || op == ML_OP_SOLVE || op == ML_OP_INV || op == ML_OP_LU_FACTOR ||
         op == ML_OP_SOLVE_TRIANGULAR;
}

// Largest max(m, n) at which the CPU backend's portable kernels (cpu/cpu_kernels.cpp, group
// size 1) ever beat one LAPACK call per matrix, per op (a 2-core x86-64 machine, thread CPU
// time, n in 2..128; svd as core/kernels/README.md says). The kernels are correct for any n:
// this bounds cpu_kernel_max_n, whatever sets it.
int64_t cpu_kernel_cap(int32_t op) {
  switch (op) {
    case ML_OP_QR: return 16;
    case ML_OP_EIGH: return 24;
    case ML_OP_EIGVALSH: return 16;
    case ML_OP_SVD: return 24;
    case ML_OP_SVDVALS: return 16;
    // The linear systems across SIMD lanes (cpu/cpu_linsys_lanes.cpp), their default bound
    // too: batches of 64 on the 2-core AMD EPYC through the torch package, ms lanes vs LAPACK
    // (docs/routing.md): cholesky 64 0.165 vs 0.210, 96 0.403 vs 0.437 but 0.164 vs 0.134 at
    // 16 matrices, 128 0.967 vs 0.839; solve_triangular (one right-hand side) 96 0.076 vs
    // 0.120, 128 0.066 vs 0.057 at 16 matrices; solve, inv and lu_factor ahead up to 128
    // (1.31 vs 2.49, 3.78 vs 5.34, 1.12 vs 2.49 ms), not timed beyond.
    case ML_OP_CHOLESKY: return 64;
    case ML_OP_SOLVE_TRIANGULAR: return 96;
    case ML_OP_SOLVE:
    case ML_OP_INV:
    case ML_OP_LU_FACTOR: return 128;
    default: return 0;
  }
}

// Where the register kernels (core/kernels/*_small.h) beat the group kernels at group size 1
// on one core of the same machine (g++ -O2, 4096 matrices, us per matrix): qr 8x8 0.88 vs
// 2.46; eigh 5x5 1.55 vs 1.63, 6x6 2.82 vs 1.96; eigvalsh 5x5 1.15 vs 1.30, 6x6 1.54 vs 1.44;
// svd 5x5 1.76 vs 2.92, 6x6 3.00 vs 3.29, 7x7 5.30 vs 4.43; svdvals 4x4 0.77 vs 1.88, 5x5 1.75
// vs 1.48. Jacobi does more arithmetic than tridiagonal/bidiagonal QR, which the CPU pays for
// beyond n ~ 5 (a GPU thread hides it: there they cover n <= 8).
int64_t cpu_small_default(int32_t op) {
  switch (op) {
    case ML_OP_QR: return 8;
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH:
    case ML_OP_SVD: return 5;
    case ML_OP_SVDVALS: return 4;
    default: return 0;
  }
}

// Without measurements: the CPU kernels only where they are known to beat
// LAPACK's call overhead, device tensors stay on the GPU whenever a kernel
// covers the shape (copies would cost more and break CUDA graphs), host
// buffers never pay for a round trip to the GPU.
// The ops whose SIMD lines have not been timed on a GPU yet.
bool simd_unmeasured(int32_t op) {
  return op == ML_OP_SOLVE || op == ML_OP_INV || op == ML_OP_LU_FACTOR ||
         op == ML_OP_SOLVE_TRIANGULAR;
}

int64_t default_value(int32_t op, int field) {
  switch (field) {
    case kCpuKernelMaxN:
      return is_lanes_op(op) ? cpu_kernel_cap(op) : std::min<int64_t>(cpu_kernel_cap(op), 16);
    case kCpuSmallMaxN: return cpu_small_default(op);
    case kGpuMinBatch: return 1;
    case kGpuMaxN: return 16384;  // kBlockedMaxDim (routing.h)
    // Lane-per-matrix GPU kernels: off until measured (a tuned table or calibration sets them).
    case kGpuLaneMaxN: return 0;
    case kGpuLaneMinBatch: return 1;
    // Register kernels wherever they exist (they cover max(m, n) <= 8).
    case kGpuSmallMaxN: return 1 << 20;
    // Simdgroup kernels wherever they exist (their windows: max(m, n) <= 32 or 64), but the
    // linear systems' other than cholesky's only where a table or the user turns them on (not
    // yet measured on a GPU: their group lines are the default).
    case kGpuSimdMaxN: return simd_unmeasured(op) ? 0 : 1 << 20;
    // Group kernels with device-memory scratch beyond the shared window: off until measured.
    case kGpuGlobalMaxN: return 0;
    case kGpuGlobalMinBatch: return 1;
    // Blocked algorithms: beyond the shared window only until measured (a device tensor then
    // stays on the device instead of a host round trip).
    case kGpuBlockedMinN: return int64_t{1} << 30;
    // ... at any batch where gpu_blocked_min_n takes them inside the window.
    case kGpuBlockedMaxBatch: return kUnboundedBatch;
    case kGpuSimdMinN: return 0;
    // The alternative group kernels (eigh_tridiag_bisect, eigvalsh_tridiag_ql,
    // svd_jacobi_group, svdvals_jacobi_group): never until measured.
    case kGpuAltMinN: return 0;
    case kGpuAltMaxN: return 0;
    case kGpuAltMaxBatch: return kUnboundedBatch;
    default: return 0;
  }
}

enum Source { kDefault = 0, kTuned = 1, kEnv = 2, kUser = 3 };

struct Entry {
  int64_t value;
  Source source;
  std::string env_var;  // for kEnv
};

struct State {
  bool loaded = false;
  Entry entry[ML_OP_COUNT][kFieldCount];
  int64_t user[ML_OP_COUNT][kFieldCount];
  bool user_set[ML_OP_COUNT][kFieldCount] = {};
  bool tuned_op[ML_OP_COUNT] = {};
  Force force[ML_OP_COUNT] = {};
  std::string file;
};

std::mutex g_mutex;
State g_state;

int field_from_name(const char *name) {
  for (int f = 0; f < kFieldCount; ++f)
    if (std::strcmp(name, kFieldNames[f]) == 0) return f;
  return -1;
}

bool parse_int(const char *s, int64_t &out) {
  if (!s || !*s) return false;
  char *end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno || *end != 0 || v < 0) return false;
  out = v;
  return true;
}

std::string sanitize(const std::string &name) {
  std::string out = name;
  for (char &c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) c = '_';
  return out;
}

std::string policy_file_path() {
  if (const char *p = std::getenv("METAL_LINALG_POLICY_FILE"); p && *p) return p;
  std::string dir;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = x;
  else if (const char *h = std::getenv("HOME"); h && *h)
    dir = std::string(h) + "/.cache";
  else
    dir = ".cache";
  return dir + "/metal_linalg/" + sanitize(device_name()) + ".policy";
}

// What apply_table() found in a table.
struct TableScan {
  bool other_device = false;  // its "# device:" line names another device (nothing applied)
  std::string device;         // the name on that line
  int bad = 0;                // malformed lines
  int first_bad_line = 0;     // 1-based number of the first one ...
  std::string first_bad;      // ... and its text, printable and shortened
};

std::string printable(const std::string &text) {
  constexpr size_t kMax = 60;
  std::string out;
  for (const char c : text.substr(0, kMax))
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return text.size() > kMax ? out + "..." : out;
}

// Applies the "<op> <field> <value>" lines of a table for this device to `s`:
// all of them, or none when a line is malformed and !apply_if_bad. '#' starts a
// comment; a comment beginning with "device:" names the device the table is for
// (required when require_device), and a table for another device is skipped.
TableScan apply_table(State &s, const std::string &text, bool require_device, bool apply_if_bad) {
  std::istringstream in(text);
  std::string line;
  bool device_ok = !require_device;
  TableScan scan;
  struct Line {
    int op, field;
    int64_t value;
  };
  std::vector<Line> lines;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string original = line;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) {
      const size_t b = line.find_first_not_of(" \t", hash + 1);
      if (b != std::string::npos && line.compare(b, 7, "device:") == 0) {
        std::string dev = line.substr(b + 7);
        const size_t db = dev.find_first_not_of(" \t");
        const size_t de = dev.find_last_not_of(" \t\r");
        dev = db == std::string::npos ? "" : dev.substr(db, de - db + 1);
        if (dev != device_name()) {
          scan.other_device = true;
          scan.device = dev;
          return scan;
        }
        device_ok = true;
      }
      line.resize(hash);
    }
    std::istringstream words(line);
    std::string op_s, field_s, value_s, extra;
    if (!(words >> op_s)) continue;
    int64_t value = 0;
    const int op = op_from_name(op_s.c_str());
    const int field = (words >> field_s) ? field_from_name(field_s.c_str()) : -1;
    if (op < 0 || field < 0 || !(words >> value_s) || !parse_int(value_s.c_str(), value) ||
        (words >> extra)) {
      if (scan.bad++ == 0) scan.first_bad_line = number, scan.first_bad = printable(original);
      continue;
    }
    lines.push_back({op, field, value});
  }
  if (!device_ok || (scan.bad > 0 && !apply_if_bad)) return scan;
  for (const Line &l : lines) {
    s.entry[l.op][l.field] = {l.value, kTuned, ""};
    s.tuned_op[l.op] = true;
  }
  return scan;
}

// The policy file's text, or "" when there is none. Only a regular file of at
// most kMaxPolicyFileBytes is read: a FIFO must not block (opened non-blocking,
// then checked), a device such as /dev/zero must not be read without end.
constexpr int64_t kMaxPolicyFileBytes = 1 << 20;

std::string read_policy_file(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      warn("policy file %s cannot be opened (%s): ignored", path.c_str(), std::strerror(errno));
    return "";
  }
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    warn("policy file %s is not a regular file: ignored", path.c_str());
  } else if (st.st_size > kMaxPolicyFileBytes) {
    warn("policy file %s has %lld bytes, more than the %lld a policy file may have: ignored",
         path.c_str(), static_cast<long long>(st.st_size),
         static_cast<long long>(kMaxPolicyFileBytes));
  } else {
    char buf[65536];
    for (;;) {
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      text.append(buf, static_cast<size_t>(got));
      if (static_cast<int64_t>(text.size()) > kMaxPolicyFileBytes) {  // grew while read
        warn("policy file %s grew past %lld bytes while read: ignored", path.c_str(),
             static_cast<long long>(kMaxPolicyFileBytes));
        text.clear();
        break;
      }
    }
  }
  ::close(fd);
  return text;
}

// Rebuilds every non-user source. A policy file with a malformed line is not
// applied at all (a partly applied file would route by half a calibration); the
// returned text says why, empty when the file (if any) applied whole. Every other
// setting that is ignored gets a warning.
std::string load(State &s) {
  for (int op = 0; op < ML_OP_COUNT; ++op) {
    s.tuned_op[op] = false;
    for (int f = 0; f < kFieldCount; ++f) s.entry[op][f] = {default_value(op, f), kDefault, ""};
  }
  for (int i = 0; tuned_tables[i]; ++i) apply_table(s, tuned_tables[i], true, true);
  s.file = policy_file_path();
  std::string malformed;
  {
    const std::string text = read_policy_file(s.file);
    const TableScan scan = text.empty() ? TableScan{} : apply_table(s, text, false, false);
    if (scan.other_device) {
      warn("policy file %s is for device '%s', not this one ('%s'): ignored", s.file.c_str(),
           scan.device.c_str(), device_name());
    } else if (scan.bad > 0) {
      char msg[512];
      std::snprintf(msg, sizeof msg,
                    "policy file %s has %d malformed line(s) (line %d: '%s'; expected \"<op> "
                    "<field> <value>\", '#' comments and blank lines): none of it applied",
                    s.file.c_str(), scan.bad, scan.first_bad_line, scan.first_bad.c_str());
      malformed = msg;
    }
  }
  for (int op = 0; op < ML_OP_COUNT; ++op) {
    for (int f = 0; f < kFieldCount; ++f) {
      std::string var = std::string("METAL_LINALG_") + op_env_name(op) + "_";
      for (const char *c = kFieldNames[f]; *c; ++c) var += static_cast<char>(std::toupper(*c));
      int64_t v = 0;
      const char *text = std::getenv(var.c_str());
      if (parse_int(text, v))
        s.entry[op][f] = {v, kEnv, var};
      else if (text)
        warn("%s='%s' is not a non-negative integer: ignored", var.c_str(), text);
    }
    s.force[op] = Force::kAuto;
    const std::string var = std::string("METAL_LINALG_") + op_env_name(op) + "_BACKEND";
    if (const char *b = std::getenv(var.c_str())) {
      if (std::strcmp(b, "cpu") == 0) {
        s.force[op] = Force::kCpu;
      } else if (std::strcmp(b, "gpu") == 0) {
        s.force[op] = Force::kGpu;
        if (!gpu_usable())
          warn("%s=gpu but no GPU backend is usable (none built, or no device): %s runs on "
               "the CPU",
               var.c_str(), op_name(op));
      } else if (std::strcmp(b, "auto") != 0 && *b) {
        warn("%s='%s' is not cpu, gpu or auto: ignored", var.c_str(), b);
      }
    }
  }
  s.loaded = true;
  return malformed;
}

State &state() {
  if (!g_state.loaded) {
    const std::string malformed = load(g_state);
    if (!malformed.empty()) warn("%s", malformed.c_str());
  }
  return g_state;
}

int64_t value_of(State &s, int op, int f) {
  return s.user_set[op][f] ? s.user[op][f] : s.entry[op][f].value;
}

}  // namespace

Resolved resolve(int32_t op) {
  std::lock_guard<std::mutex> lock(g_mutex);
  State &s = state();
  Resolved r;
  for (int f = 0; f < kFieldCount; ++f) r.value[f] = value_of(s, op, f);
  r.force = cpu_only() ? Force::kCpu : s.force[op];
  return r;
}

int64_t cpu_kernel_max_n(int32_t op, const Resolved &pol) {
  return std::min(cpu_kernel_cap(op), pol.value[kCpuKernelMaxN]);
}

ml_status get(int32_t op, char *buf, size_t buf_len, size_t *needed) {
  if (!valid_op(op)) return fail(ML_INVALID_ARGUMENT, "policy_get", "invalid op %d", op);
  if (!buf && buf_len > 0)
    return fail(ML_INVALID_ARGUMENT, "policy_get", "buf is NULL but buf_len is %zu", buf_len);
  std::string text;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    State &s = state();
    for (int f = 0; f < kFieldCount; ++f) {
      if (f) text += ';';
      char item[96];
      std::snprintf(item, sizeof item, "%s=%lld", kFieldNames[f],
                    static_cast<long long>(value_of(s, op, f)));
      text += item;
    }
  }
  if (needed) *needed = text.size() + 1;
  if (buf_len > 0) {
    const size_t n = text.size() < buf_len - 1 ? text.size() : buf_len - 1;
    std::memcpy(buf, text.data(), n);
    buf[n] = 0;
  }
  return ML_OK;
}

ml_status set(int32_t op, const char *field, int64_t value) {
  if (!valid_op(op)) return fail(ML_INVALID_ARGUMENT, "policy_set", "invalid op %d", op);
  if (!field) return fail(ML_INVALID_ARGUMENT, "policy_set", "field is NULL");
  const int f = field_from_name(field);
  if (f < 0) {
    std::string names;
    for (int i = 0; i < kFieldCount; ++i) names += (i ? ", " : "") + std::string(kFieldNames[i]);
    return fail(ML_INVALID_ARGUMENT, "policy_set", "unknown policy field '%s' for %s (fields: %s)",
                field, op_name(op), names.c_str());
  }
  if (value < 0)
    return fail(ML_INVALID_ARGUMENT, "policy_set", "%s must be >= 0, got %lld", field,
                static_cast<long long>(value));
  std::lock_guard<std::mutex> lock(g_mutex);
  State &s = state();
  s.user[op][f] = value;
  s.user_set[op][f] = true;
  return ML_OK;
}

ml_status reset(int32_t op) {
  if (!valid_op(op)) return fail(ML_INVALID_ARGUMENT, "policy_reset", "invalid op %d", op);
  std::lock_guard<std::mutex> lock(g_mutex);
  State &s = state();
  for (int f = 0; f < kFieldCount; ++f) s.user_set[op][f] = false;
  return ML_OK;
}

const char *source(int32_t op) {
  if (!valid_op(op)) {
    fail(ML_INVALID_ARGUMENT, "policy_source", "invalid op %d", op);
    return "";
  }
  thread_local std::string out;
  std::lock_guard<std::mutex> lock(g_mutex);
  State &s = state();
  // The op's source is the highest one any of its fields comes from.
  int best = kDefault;
  std::string env_var;
  for (int f = 0; f < kFieldCount; ++f) {
    const int src = s.user_set[op][f] ? kUser : s.entry[op][f].source;
    if (src > best) {
      best = src;
      if (src == kEnv) env_var = s.entry[op][f].env_var;
    }
  }
  if (best < kEnv && s.force[op] != Force::kAuto) {
    best = kEnv;
    env_var = std::string("METAL_LINALG_") + op_env_name(op) + "_BACKEND";
  }
  switch (best) {
    case kUser: out = "user"; break;
    case kEnv: out = "env:" + env_var; break;
    case kTuned: out = std::string("tuned:") + device_name(); break;
    default: out = "default:untuned-device"; break;
  }
  return out.c_str();
}

const char *calibration_status(int32_t op) {
  if (!valid_op(op)) {
    fail(ML_INVALID_ARGUMENT, "calibration_status", "invalid op %d", op);
    return "";
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  return state().tuned_op[op] ? "tuned" : "untuned";
}

const char *file() {
  thread_local std::string out;
  std::lock_guard<std::mutex> lock(g_mutex);
  out = state().file;
  return out.c_str();
}

ml_status reload() {
  std::lock_guard<std::mutex> lock(g_mutex);
  // All or nothing: a file that cannot be applied whole leaves the policy as it was.
  State next = g_state;
  const std::string malformed = load(next);
  if (!malformed.empty())
    return fail(ML_INVALID_ARGUMENT, "policy_reload", "%s; the policy is unchanged",
                malformed.c_str());
  g_state = std::move(next);
  return ML_OK;
}

void lock_for_fork() { g_mutex.lock(); }

void unlock_after_fork() { g_mutex.unlock(); }

namespace {
std::atomic<int32_t> g_iteration_cap{0};
std::atomic<bool> g_cpu_only{false};
}

int32_t iteration_cap() { return g_iteration_cap.load(std::memory_order_relaxed); }

void set_iteration_cap(int32_t cap) { g_iteration_cap.store(cap, std::memory_order_relaxed); }

bool cpu_only() { return g_cpu_only.load(std::memory_order_relaxed); }

void set_cpu_only(bool on) { g_cpu_only.store(on, std::memory_order_relaxed); }

}  // namespace ml::policy
