// The CUDA entry points of every line of core/kernels/kernel_table.h, generated: a block entry
// (a group of blockDim.x lanes per matrix), a lane entry (one thread per matrix) and a global
// entry (a group per matrix, scratch in device memory) for GROUP lines, the lane entry alone
// for REGISTER lines, the block entry alone for SIMD lines; and their KernelDesc list in table
// order.
// Nothing here is written per kernel.
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/kernel_table.h"
#include "kernel_desc.h"
#include "launch_config.h"

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

// Context of a global launch: one group of blockDim.x lanes (up to 1024) per block, one matrix
// each, the scratch a slice of the caller's device workspace (ML_SHARED is empty on CUDA, so
// the kernels' scratch pointer is a generic one; __syncthreads orders global memory within
// the block as it does shared memory). Block b of the launch uses slice b: a launch never has
// more blocks than the workspace has slices.
#define ML_CUDA_GLOBAL_ENTRY_CONTEXT(ctx, p, ws, ws_stride)                               \
  ml_ctx ctx;                                                                              \
  ctx.lane = static_cast<int>(threadIdx.x);                                                \
  ctx.group_size = static_cast<int>(blockDim.x);                                           \
  ctx.group_id = (p).group_offset + static_cast<ml_i64>(blockIdx.x);                       \
  ctx.scratch = (ws) + static_cast<ml_i64>(blockIdx.x) * (ws_stride)

#define ML_CUDA_BLOCK_ENTRY(name, fn, outs)                                                 \
  __global__ void ml_cuda_##name(ml_params p, const float *a, float *o0, float *o1,         \
                                 float *o2, int *info) {                                    \
    (void)o0, (void)o1, (void)o2;                                                           \
    ML_CUDA_ENTRY_CONTEXT(ctx, p);                                                          \
    fn(ctx, p, a, ML_KERNEL_OUTS_##outs, info);                                             \
  }
#define ML_CUDA_LANE_ENTRY(name, fn, outs)                                                  \
  __global__ void ml_cuda_##name##_lane(ml_params p, const float *a, float *o0, float *o1,  \
                                        float *o2, int *info) {                             \
    (void)o0, (void)o1, (void)o2;                                                           \
    ML_CUDA_LANE_ENTRY_CONTEXT(ctx, p);                                                     \
    fn(ctx, p, a, ML_KERNEL_OUTS_##outs, info);                                             \
  }
#define ML_CUDA_GLOBAL_ENTRY(name, fn, outs)                                                \
  __global__ void __launch_bounds__(1024)                                                   \
      ml_cuda_##name##_global(ml_params p, const float *a, float *o0, float *o1, float *o2, \
                              int *info, float *ws, ml_i64 ws_stride) {                     \
    (void)o0, (void)o1, (void)o2;                                                           \
    ML_CUDA_GLOBAL_ENTRY_CONTEXT(ctx, p, ws, ws_stride);                                    \
    fn(ctx, p, a, ML_KERNEL_OUTS_##outs, info);                                             \
  }
#define ML_CUDA_ENTRIES_GROUP(name, fn, outs)                              \
  ML_CUDA_BLOCK_ENTRY(name, fn, outs) ML_CUDA_LANE_ENTRY(name, fn, outs) \
  ML_CUDA_GLOBAL_ENTRY(name, fn, outs)
#define ML_CUDA_ENTRIES_REGISTER(name, fn, outs) ML_CUDA_LANE_ENTRY(name, fn, outs)
#define ML_CUDA_ENTRIES_SIMD(name, fn, outs) ML_CUDA_BLOCK_ENTRY(name, fn, outs)
#define ML_CUDA_ENTRIES(name, op, fn, outs, kind, scratch, fits, choose) \
  ML_CUDA_ENTRIES_##kind(name, fn, outs)

ML_KERNEL_TABLE(ML_CUDA_ENTRIES)

namespace ml::cuda {
namespace {

// A GROUP or SIMD line without group_size_<name> in launch_config.h does not compile.
#define ML_CUDA_DESC_GROUP(name) \
  {#name, ml_cuda_##name, ml_cuda_##name##_lane, group_size_##name, ml_cuda_##name##_global}
#define ML_CUDA_DESC_REGISTER(name) {#name, nullptr, ml_cuda_##name##_lane, nullptr, nullptr}
#define ML_CUDA_DESC_SIMD(name) {#name, ml_cuda_##name, nullptr, group_size_##name, nullptr}
#define ML_CUDA_DESC(name, op, fn, outs, kind, scratch, fits, choose) ML_CUDA_DESC_##kind(name),

const KernelDesc kKernels[] = {ML_KERNEL_TABLE(ML_CUDA_DESC)};

}  // namespace

const KernelDesc *kernels(int *n) {
  *n = static_cast<int>(sizeof(kKernels) / sizeof(kKernels[0]));
  return kKernels;
}

}  // namespace ml::cuda
