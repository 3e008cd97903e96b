// The Metal entry points of every line of core/kernels/kernel_table.h, generated (nothing here
// is written per kernel). Buffers follow core/src/backend.h's Call: 0 a, 1 out0, 2 out1,
// 3 out2, 4 info, 5 params; an entry declares only the outputs its kernel takes (the ops with
// a right-hand side take B at 3, the out2 slot: kernel_table.h's O0B).
//  ml_metal_<name>       GROUP lines: one threadgroup per matrix, its lanes cooperating in the
//                        threadgroup scratch (ML_METAL_SCRATCH_FLOATS, 32 KB);
//  ml_metal_<name>_lane  GROUP lines: one thread per matrix, each in its own odd-sized slice of
//                        the threadgroup scratch (large batches of tiny matrices);
//                        REGISTER lines: one thread per matrix in registers (any threadgroup
//                        shape; thread gid of the grid runs matrix group_offset + gid).
//  ml_metal_<name>       SIMD lines: one simdgroup (a threadgroup of 32 threads) per matrix,
//                        the matrix in registers (the block entry's form; no lane entry).
// Threads past p.batch return at once (the kernels check ctx.group_id).
#include "../core/kernels/compat_metal.h"
#include "../core/kernels/kernel_table.h"

#define ML_METAL_OUT_ARGS_O01 device float *o0 [[buffer(1)]], device float *o1 [[buffer(2)]],
#define ML_METAL_OUT_ARGS_O0 device float *o0 [[buffer(1)]],
#define ML_METAL_OUT_ARGS_O012 \
  device float *o0 [[buffer(1)]], device float *o1 [[buffer(2)]], device float *o2 [[buffer(3)]],
#define ML_METAL_OUT_ARGS_O1 device float *o1 [[buffer(2)]],
// The ops with a right-hand side: X in out0, B (read only) in the out2 slot.
#define ML_METAL_OUT_ARGS_O0B \
  device float *o0 [[buffer(1)]], device const float *o2 [[buffer(3)]],

#define ML_METAL_BLOCK_ENTRY(name, fn, outs)                                                  \
  kernel void ml_metal_##name(device const float *a [[buffer(0)]], ML_METAL_OUT_ARGS_##outs   \
                              device int *info [[buffer(4)]],                                 \
                              constant ml_params &p [[buffer(5)]],                            \
                              uint lane [[thread_position_in_threadgroup]],                   \
                              uint group_size [[threads_per_threadgroup]],                    \
                              uint group [[threadgroup_position_in_grid]]) {                  \
    threadgroup float scratch[ML_METAL_SCRATCH_FLOATS];                                       \
    ml_ctx ctx;                                                                               \
    ctx.lane = (int)lane;                                                                     \
    ctx.group_size = (int)group_size;                                                         \
    ctx.group_id = p.group_offset + (ml_i64)group;                                            \
    ctx.scratch = scratch;                                                                    \
    fn(ctx, p, a, ML_KERNEL_OUTS_##outs, info);                                               \
  }

#define ML_METAL_SLICE_LANE_ENTRY(name, fn, outs)                                             \
  kernel void ml_metal_##name##_lane(device const float *a [[buffer(0)]],                     \
                                     ML_METAL_OUT_ARGS_##outs device int *info [[buffer(4)]], \
                                     constant ml_params &p [[buffer(5)]],                     \
                                     uint lane [[thread_position_in_threadgroup]],            \
                                     uint threads [[threads_per_threadgroup]],                \
                                     uint group [[threadgroup_position_in_grid]]) {           \
    threadgroup float scratch[ML_METAL_SCRATCH_FLOATS];                                       \
    ml_ctx ctx;                                                                               \
    ctx.lane = 0;                                                                             \
    ctx.group_size = 1;                                                                       \
    ctx.group_id = p.group_offset + (ml_i64)group * (ml_i64)threads + (ml_i64)lane;           \
    ctx.scratch = ml_lane_slice(scratch, ML_METAL_SCRATCH_FLOATS, (int)threads, (int)lane);   \
    fn(ctx, p, a, ML_KERNEL_OUTS_##outs, info);                                               \
  }

#define ML_METAL_REGISTER_LANE_ENTRY(name, fn, outs)                                          \
  kernel void ml_metal_##name##_lane(device const float *a [[buffer(0)]],                     \
                                     ML_METAL_OUT_ARGS_##outs device int *info [[buffer(4)]], \
                                     constant ml_params &p [[buffer(5)]],                     \
                                     uint gid [[thread_position_in_grid]]) {                  \
    ml_ctx ctx;                                                                               \
    ctx.lane = 0;                                                                             \
    ctx.group_size = 1;                                                                       \
    ctx.group_id = p.group_offset + (ml_i64)gid;                                              \
    ctx.scratch = nullptr;                                                                    \
    fn(ctx, p, a, ML_KERNEL_OUTS_##outs, info);                                               \
  }

#define ML_METAL_ENTRIES_GROUP(name, fn, outs) \
  ML_METAL_BLOCK_ENTRY(name, fn, outs) ML_METAL_SLICE_LANE_ENTRY(name, fn, outs)
#define ML_METAL_ENTRIES_REGISTER(name, fn, outs) ML_METAL_REGISTER_LANE_ENTRY(name, fn, outs)
#define ML_METAL_ENTRIES_SIMD(name, fn, outs) ML_METAL_BLOCK_ENTRY(name, fn, outs)
#define ML_METAL_ENTRIES(name, op, fn, outs, kind, scratch, fits, choose) \
  ML_METAL_ENTRIES_##kind(name, fn, outs)

ML_KERNEL_TABLE(ML_METAL_ENTRIES)

// ---- step kernels of the blocked algorithms (core/kernels/steps.h) ----
// ml_metal_step_<name>: one threadgroup per group of the step, its scratch a static threadgroup
// array of ML_METAL_SCRATCH_FLOATS. Buffers: 0 the workspace, 1 a, 2..4 the call's outputs as
// stored (out0, out1, out2), 5 info, 6 the step's parameters (set_bytes). The host binds the
// workspace in place of an absent buffer; the steps touch only what their parameters name.
#include "../core/kernels/steps.h"

#define ML_METAL_STEP_ENTRY(name, fn)                                                         \
  kernel void ml_metal_step_##name(device float *ws [[buffer(0)]],                            \
                                   device const float *a [[buffer(1)]],                       \
                                   device float *o0 [[buffer(2)]],                            \
                                   device float *o1 [[buffer(3)]],                            \
                                   device float *o2 [[buffer(4)]],                            \
                                   device int *info [[buffer(5)]],                            \
                                   constant ml_step_params &p [[buffer(6)]],                  \
                                   uint lane [[thread_position_in_threadgroup]],              \
                                   uint group_size [[threads_per_threadgroup]],               \
                                   uint group [[threadgroup_position_in_grid]]) {             \
    threadgroup float scratch[ML_METAL_SCRATCH_FLOATS];                                       \
    ml_ctx ctx;                                                                               \
    ctx.lane = (int)lane;                                                                     \
    ctx.group_size = (int)group_size;                                                         \
    ctx.group_id = p.group_offset + (ml_i64)group;                                            \
    ctx.scratch = scratch;                                                                    \
    fn(ctx, p, ws, a, o0, o1, o2, info);                                                      \
  }

ML_STEP_TABLE(ML_METAL_STEP_ENTRY)
