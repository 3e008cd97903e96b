// Blocked algorithms for large matrices: each call becomes a sequence of step-kernel launches
// (core/kernels/steps.h) on one device queue, every intermediate in a device workspace the
// caller provides. The sequencing is written once here, backend-neutral; a backend supplies a
// Runner that enqueues one step (cuda/cuda_backend.cu; the CPU runner in the kernel tests).
// Loop bounds depend on the shape only, so nothing waits for the device.
#pragma once
#include <cstdint>

#include "../kernels/params.h"
#include "../kernels/step_list.h"
#include "backend.h"

namespace ml::blocked {

// Step ids: the lines of ML_STEP_TABLE in order (kStep_gemm, ...).
#define ML_STEP_ID(name, fn) kStep_##name,
enum Step : int32_t { ML_STEP_TABLE(ML_STEP_ID) kStepCount };
#undef ML_STEP_ID
// "gemm", "qr_panel", ...
const char *step_name(int32_t step);

struct StepLaunch {
  int32_t step;
  int32_t group_size;     // lanes per group
  int32_t shared_floats;  // shared scratch floats per group
  ml_step_params p;       // p.groups groups, p.group_offset 0
};

// Tuning of a run: panel width, lanes of the products and of the panels (the CPU-runner tests
// use small ones so block boundaries fall inside small matrices).
struct Options {
  int nb = 32;            // panel width (1..64)
  int nb_outer = 64;      // QR: columns per trailing update when the shared-memory panels are
                          // narrower (their reflectors merged by larft; <= 64, 0: one level)
  int gemm_lanes = 16;    // L of core/kernels/gemm.h: groups of L x L lanes
  int max_group = 1024;   // largest group size
  int shared_floats = 1 << 20;  // shared memory one group may use (floats)
  int parallel_groups = 264;    // groups that fill the device (products with fewer split k)
  int64_t max_workspace_bytes = int64_t{1} << 30;  // bound on the workspace of a call

  // QR: rows per group of a panel spread over many groups (core/kernels/qr_tsqr.h; 256 is the
  // intended size), and the largest batch spread so. 0: one group per panel, the default until
  // the spread panels are measured on a GPU.
  int qr_tsqr_rows = 0;
  int qr_tsqr_max_batch = 64;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // Enqueues one step over the call's buffers (bound by the runner) and its workspace.
  virtual ml_status launch(const StepLaunch &l) = 0;
};

// Whether op has a blocked algorithm.
bool supported(int32_t op);
// Workspace bytes of c (kernel flags kf, see routing.h gpu_kernel_flags); 0 when c has none.
// Batches whose workspace would exceed o.max_workspace_bytes run in chunks reusing it.
int64_t workspace_bytes(const Call &c, int32_t kf, const Options &o);
// Enqueues c on r with workspace ws_bytes >= workspace_bytes(c, kf, o) (the runner binds it).
ml_status run(const Call &c, int32_t kf, const Options &o, Runner &r);

}  // namespace ml::blocked
