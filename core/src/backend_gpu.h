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
  // GPU launch policy (filled by the core from the op's policy; GPU backends read it):
  // register kernels (thread per matrix, no group) are candidates for max(m, n) <= small_max_n;
  // a group kernel runs one lane per matrix for max(m, n) <= lane_max_n and
  // batch >= lane_min_batch (where it has such an entry point), else a group per matrix.
  int64_t small_max_n = 0, lane_max_n = 0, lane_min_batch = 1;
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
// The kernel and launch shape run_device / run_host would use for c ("eigh_tridiag_ql",
// "eigh_tridiag_ql/lane"), or nullptr when no kernel covers it.
const char *launch_name(const Call &c);
// Device workspace bytes for a device-memory call.
int64_t workspace_bytes(const Call &c);
// Enqueue the call on exec->stream, device pointers, no host sync, no allocation.
ml_status run_device(const ml_exec &exec, const Call &c);
// Host pointers: copy to the device, run, copy back (synchronous).
ml_status run_host(const Call &c);
}  // namespace cuda
#endif

}  // namespace ml
