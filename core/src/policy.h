// Routing policy: named integer fields per op, each resolved from (highest
// first) the user (ml_policy_set), the environment, the tuned table for this
// device (built-in core/tuned/*.policy or the per-machine policy file) and the
// cautious defaults.
#pragma once
#include <cstddef>
#include <cstdint>

#include "metal_linalg/metal_linalg.h"

namespace ml::policy {

enum Field : int {
  kCpuKernelMaxN = 0,   // CPU portable kernel instead of LAPACK when max(m,n) <= this
  kGpuMinBatch = 1,     // device tensors go to the GPU only when batch >= this
  kGpuMaxN = 2,         // largest max(m,n) sent to the GPU kernels
  kHostGpuMinWork = 3,  // host buffers go to the GPU when batch*m*n >= this (0 = never)
  kGpuLaneMaxN = 4,     // GPU: one lane per matrix when max(m,n) <= this (0 = never) ...
  kGpuLaneMinBatch = 5, // ... and batch >= this; else a group of lanes per matrix
  kGpuSmallMaxN = 6,    // GPU register kernels (a thread per matrix) when max(m,n) <= this
  kGpuSimdMaxN = 7,     // GPU simdgroup kernels (a simdgroup per matrix) when max(m,n) <= this
  kGpuGlobalMaxN = 8,   // device memory beyond the shared window: a group kernel with its
                        // scratch in device memory when max(m,n) <= this (0 = never) ...
  kGpuGlobalMinBatch = 9,  // ... and batch >= this
  kGpuBlockedMinN = 10,    // device memory: the blocked algorithm (core/src/blocked.h) for
                           // max(m,n) >= this and beyond the shared window (0 = never)
  kGpuSimdMinN = 11,       // GPU simdgroup kernels only from max(m,n) >= this (with kGpuSimdMaxN:
                           // the window where they win)
  kCpuSmallMaxN = 12,      // CPU portable kernels: the register kernels (core/kernels/*_small.h)
                           // instead of the group kernels when max(m,n) <= this (where they fit)
  kGpuBlockedMaxBatch = 13,  // with kGpuBlockedMinN: inside the shared window the blocked
                             // algorithm only for batch <= this (beyond it: any batch)
  kGpuAltMinN = 14,  // GPU group kernels: for kGpuAltMinN <= max(m,n) <= kGpuAltMaxN the op's
  kGpuAltMaxN = 15,  // next GROUP line that covers the shape instead of its first (0 = never)
  kGpuAltMaxBatch = 16,  // ... at batch <= this
  kFieldCount = 17
};

// kGpuBlockedMaxBatch's default: no bound on the batch.
constexpr int64_t kUnboundedBatch = INT64_MAX;

// Forced backend from METAL_LINALG_<OP>_BACKEND.
enum class Force { kAuto, kCpu, kGpu };

struct Resolved {
  int64_t value[kFieldCount];
  Force force;
};

// The policy a call of `op` uses now (op must be valid).
Resolved resolve(int32_t op);

// The CPU backend's choice under pol (the backend keeps no thresholds of its own): its portable
// kernels instead of LAPACK when max(m, n) <= this, the field cpu_kernel_max_n within the sizes
// where the kernels were measured to win at all.
int64_t cpu_kernel_max_n(int32_t op, const Resolved &pol);

ml_status get(int32_t op, char *buf, size_t buf_len, size_t *needed);
ml_status set(int32_t op, const char *field, int64_t value);
ml_status reset(int32_t op);
const char *source(int32_t op);
const char *calibration_status(int32_t op);
const char *file();
ml_status reload();

// Around fork() (cpu_backend.cpp): the policy lock held, so a child never inherits it locked.
void lock_for_fork();
void unlock_after_fork();

// Process-wide CPU-only mode (ml_set_cpu_only): resolve() then forces the CPU for every op.
bool cpu_only();
void set_cpu_only(bool on);

// Sweep/iteration cap every backend hands its kernels (ml_params::max_iter); 0 = each kernel's
// own default. Set only through ml_set_iteration_cap, for tests.
int32_t iteration_cap();
void set_iteration_cap(int32_t cap);

}  // namespace ml::policy
