// What the host runtime (cuda_backend.cu) knows about each CUDA entry point (cuda/<kernel>.cu).
// File rules for cuda/: a <kernel>.cu file is thin (compat_cuda.h + one kernel header, the
// __global__ wrapper and its KernelDesc); all host logic (routing, launch, copies) lives in
// cuda_backend.cu.
#pragma once
#include <cstdint>

#include "../core/kernels/params.h"

namespace ml::cuda {

// Every __global__ wrapper has this signature; outputs a kernel does not produce are null.
// Outputs follow ml::Call: qr (q, r), eigh (w, v), eigvalsh (w), svd (u, s, vt), svdvals (-, s).
using EntryFn = void (*)(ml_params, const float *, float *, float *, float *, int *);

struct KernelDesc {
  const char *name;  // as reported by ml_backend(): "cuda:<name>"
  int32_t op;        // ml_op
  EntryFn entry;
  // Shared floats a launch of this shape and flags needs.
  int (*scratch_floats)(int m, int n, int flags);
  // Whether the shape (m, n >= 1) and flags run in a budget of shared floats.
  bool (*fits)(int m, int n, int flags, int budget_floats);
  // Threads per block the kernel suggests for this shape.
  int (*group_size)(int m, int n);
  // Optional: the same knowing the batch and the device's multiprocessor count (null: use
  // group_size).
  int (*group_size_batch)(int m, int n, int64_t batch, int units) = nullptr;
  // Optional: the lane-per-matrix entry (ML_CUDA_LANE_ENTRY_CONTEXT: one thread per matrix,
  // blockDim = (1, matrices per block)), same signature and scratch per matrix.
  EntryFn lane_entry = nullptr;
  // Optional: kernel flags for a launch given the shared floats one matrix may use (a kernel
  // may pick a faster layout that needs more scratch); null keeps the flags.
  int (*choose_flags)(int m, int n, int flags, int budget_floats) = nullptr;
};
// A kernel with entry == nullptr has only lane_entry: a small-matrix kernel working in the
// thread's registers (no group), routed only where max(m, n) <= the policy's gpu_small_max_n.

}  // namespace ml::cuda

// Bytes of dynamic shared memory this launch was given (a PTX special register).
__device__ __forceinline__ unsigned ml_cuda_dynamic_smem_bytes() {
  unsigned r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}

// Context of the group this thread belongs to. A block holds blockDim.y groups of blockDim.x
// lanes (several only for one-warp groups), one matrix each, with equal slices of the dynamic
// shared memory as their scratch.
#define ML_CUDA_ENTRY_CONTEXT(ctx, p)                                                      \
  extern __shared__ float ml_cuda_scratch[];                                               \
  ml_ctx ctx;                                                                              \
  ctx.lane = static_cast<int>(threadIdx.x);                                                \
  ctx.group_size = static_cast<int>(blockDim.x);                                           \
  ctx.group_id = (p).group_offset + static_cast<ml_i64>(blockIdx.x) * blockDim.y + threadIdx.y; \
  ctx.scratch = ml_cuda_scratch +                                                          \
                threadIdx.y * (ml_cuda_dynamic_smem_bytes() / sizeof(float) / blockDim.y)

// Context of a lane-per-matrix launch: every thread is a group of one lane with its own
// matrix and its own slice of the dynamic shared memory (the launch makes the slice an odd
// number of floats, so threads touching the same offset of their slices hit distinct banks).
// group_size is the literal 1, which folds every barrier and simd call of the kernel away.
#define ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p)                                                 \
  extern __shared__ float ml_cuda_scratch[];                                               \
  ml_ctx ctx;                                                                              \
  ctx.lane = 0;                                                                            \
  ctx.group_size = 1;                                                                      \
  ctx.group_id = (p).group_offset + static_cast<ml_i64>(blockIdx.x) * blockDim.y + threadIdx.y; \
  ctx.scratch = ml_cuda_scratch +                                                          \
                threadIdx.y * (ml_cuda_dynamic_smem_bytes() / sizeof(float) / blockDim.y)
