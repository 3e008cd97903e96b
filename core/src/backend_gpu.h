// Interface between the backend-neutral core (core/src) and the GPU backends
// (cuda/, later metal/). The core validates arguments, resolves the policy and
// then calls these; a backend never sees invalid arguments.
#pragma once
#include <cstdint>
#include "metal_linalg/metal_linalg.h"

namespace ml {

// One call as the core hands it to a backend. Pointers live in exec->memory.
// Outputs by op: qr: out0 = q (may be null for ML_QR_R), out1 = r
//                eigh: out0 = w, out1 = v;  eigvalsh: out0 = w
//                svd: out0 = u, out1 = s, out2 = vt;  svdvals: out1 = s
// flags: qr mode / eigh uplo / svd full_matrices.
struct Call {
  int32_t op;
  int64_t batch, m, n;
  int32_t flags;
  const float *a;
  float *out0, *out1, *out2;
  int32_t *info;
  // Launch shape the policy asks for (GPU backends): 0 = a group of lanes per matrix,
  // 1 = one lane per matrix (taken only where the kernel has such an entry point).
  int32_t variant = 0;
  // GPU backends: register (thread-per-matrix, no group) kernels are candidates only for
  // max(m, n) <= this (policy gpu_small_max_n).
  int32_t small_max_n = 0;
};

#if defined(ML_WITH_CUDA)
namespace cuda {
// True when a CUDA device and driver are usable (checked once, cached).
bool available();
// Name of device 0 ("NVIDIA H200"), or "" when unavailable.
const char *device_name();
// Name of the kernel that handles this shape (e.g. "eigh_tridiag_ql"),
// or nullptr when no GPU kernel covers it (the core then uses the CPU).
// small_max_n: see Call::small_max_n.
const char *kernel_for(int32_t op, int64_t m, int64_t n, int32_t flags, int64_t small_max_n);
// Whether that kernel has a lane-per-matrix entry point (Call::variant 1 runs it).
bool has_lane_variant(int32_t op, int64_t m, int64_t n, int32_t flags, int64_t small_max_n);
// Device workspace bytes for a device-memory call.
int64_t workspace_bytes(const Call &c);
// Enqueue the call on exec->stream, device pointers, no host sync, no allocation.
ml_status run_device(const ml_exec &exec, const Call &c);
// Host pointers: copy to the device, run, copy back (synchronous).
ml_status run_host(const Call &c);
}  // namespace cuda
#endif

}  // namespace ml
