// Routing, decided in one place: which backend, kernel and launch kind run a call.
// dispatch.cpp and the queries call route(); GPU backends answer Backend::plan() with
// gpu_plan(), so no backend keeps routing rules of its own.
#pragma once
#include <cstdint>

#include "backend.h"
#include "policy.h"

namespace ml {

// Global launches (Launch::kGlobal): a GROUP kernel with its scratch in device memory, one
// matrix per group of up to 1024 lanes. The scratch budget a global plan's fits/choose_flags
// see, the largest max(m, n) it runs (the kernels' int size helpers stay far from overflow
// below it: 4096 x 4097 floats and a few vectors) and the bound on its device workspace.
constexpr int64_t kGlobalScratchFloats = int64_t{1} << 28;
constexpr int64_t kGlobalMaxDim = 4096;
constexpr int64_t kGlobalWorkspaceBytes = int64_t{1} << 30;

// Floats between two matrices' slices of a global workspace: the kernel's scratch rounded up
// to 128 bytes.
int64_t global_slice_floats(int64_t scratch_floats);
// Matrices in flight of a global launch of `batch` matrices with slices of slice_floats: as
// many as fit kGlobalWorkspaceBytes (at least one); larger batches run chunk after chunk on
// the same queue, reusing the workspace.
int64_t global_in_flight(int64_t batch, int64_t slice_floats);
// Scratch floats per matrix of global plan p for c (its choose_flags under
// kGlobalScratchFloats), and the flags it runs with in *flags (may be null).
int64_t global_scratch_floats(const Call &c, const Plan &p, int32_t *flags);
// Workspace bytes of plan p for c: slice x matrices in flight x 4 for a global plan, else 0.
int64_t global_workspace_bytes(const Call &c, const Plan &p);

struct Route {
  Backend *backend = nullptr;  // never null for a valid call
  Plan plan;
};

// The kernel flags a GPU kernel runs c with: square complete QR and square full_matrices SVD
// are the reduced / thin problems.
int32_t gpu_kernel_flags(int32_t op, int64_t m, int64_t n, int32_t flags);

// The first kernel of the table (in order) whose window covers c in a budget of scratch
// floats per group, and its launch kind under pol:
//  - REGISTER kernels only for max(m, n) <= pol's gpu_small_max_n, SIMD kernels (a simdgroup
//    per matrix, block launch) only for gpu_simd_min_n <= max(m, n) <= gpu_simd_max_n;
//  - a GROUP kernel runs one lane per matrix for max(m, n) <= gpu_lane_max_n and
//    batch >= gpu_lane_min_batch, else a group per matrix;
//  - when no line fits budget_floats: the first GROUP line whose fits() accepts c in
//    kGlobalScratchFloats runs global (Launch::kGlobal) if has_global(k) and max(m, n) <=
//    min(gpu_global_max_n, kGlobalMaxDim) and batch >= gpu_global_min_batch.
// has_kernel(k) (null: all) says which table lines the backend has; has_global(k) (null:
// none) which have a global entry. False when none covers c.
// Blocked algorithms (Launch::kBlocked, when `blocked` and the op has one, blocked.h): for
// max(m, n) >= pol's gpu_blocked_min_n at batch <= gpu_blocked_max_batch (ahead of the
// table), and beyond the shared window before any global launch at any batch, for
// max(m, n) <= kBlockedMaxDim; gpu_blocked_min_n 0 turns them off.
bool gpu_plan(const Call &c, const policy::Resolved &pol, int64_t budget_floats,
              bool (*has_kernel)(int kernel), Plan *out,
              bool (*has_global)(int kernel) = nullptr, bool blocked = false);

// Largest max(m, n) of a blocked plan (32-bit leading dimensions and tile counts stay far
// from overflow; the workspace of one such matrix is a few GB).
constexpr int64_t kBlockedMaxDim = 16384;

// ml_backend's name of a GPU plan: "<backend>:<kernel>", plus "/lane" for a lane launch and
// "/global" for a global launch of a GROUP kernel ("cuda:eigh_tridiag_ql/lane"); a blocked
// plan of op X is "<backend>:blocked_X" ("cuda:blocked_qr"). Per thread, valid until the
// next call.
const char *gpu_plan_name(const char *backend, const Plan &p, int32_t op);

// Where a call with buffers in `memory` runs (device: exec->device for device memory).
// Host memory: a GPU when the policy says the copies pay off (or it is forced), else the CPU.
// Device memory: that memory's backend whenever a kernel covers the shape (for_query: only
// within the policy's gpu_min_batch / gpu_max_n, as ml_plan and ml_backend report it: frontends
// copy to the host when it names the CPU). backend == nullptr: device memory no kernel covers.
Route route(const Call &c, int32_t memory, int32_t device, const policy::Resolved &pol,
            bool for_query);

}  // namespace ml
