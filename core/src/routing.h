// Routing, decided in one place: which backend, kernel and launch kind run a call.
// dispatch.cpp and the queries call route(); GPU backends answer Backend::plan() with
// gpu_plan(), so no backend keeps routing rules of its own.
#pragma once
#include <cstdint>

#include "backend.h"
#include "policy.h"

namespace ml {

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
//    per matrix, block launch) only for max(m, n) <= gpu_simd_max_n;
//  - a GROUP kernel runs one lane per matrix for max(m, n) <= gpu_lane_max_n and
//    batch >= gpu_lane_min_batch, else a group per matrix.
// has_kernel(k) (null: all) says which table lines the backend has. False when none covers c.
bool gpu_plan(const Call &c, const policy::Resolved &pol, int64_t budget_floats,
              bool (*has_kernel)(int kernel), Plan *out);

// ml_backend's name of a GPU plan: "<backend>:<kernel>", plus "/lane" for a lane launch of a
// GROUP kernel ("cuda:eigh_tridiag_ql/lane"). Per thread, valid until the next call.
const char *gpu_plan_name(const char *backend, const Plan &p);

// Where a call with buffers in `memory` runs (device: exec->device for device memory).
// Host memory: a GPU when the policy says the copies pay off (or it is forced), else the CPU.
// Device memory: that memory's backend whenever a kernel covers the shape (for_query: only
// within the policy's gpu_min_batch / gpu_max_n, as ml_backend reports it: frontends copy to
// the host when it names the CPU). backend == nullptr: device memory no kernel covers.
Route route(const Call &c, int32_t memory, int32_t device, const policy::Resolved &pol,
            bool for_query);

}  // namespace ml
