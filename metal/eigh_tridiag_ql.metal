// Metal entry points of core/kernels/eigh_tridiag_ql.h. Buffers follow backend_gpu.h's Call:
// 0 a, 1 out0 (w), 2 out1 (v, eigh only), 4 info, 5 params. One threadgroup per matrix.
#include "../core/kernels/compat_metal.h"
#include "../core/kernels/eigh_tridiag_ql.h"

kernel void ml_eigh_tridiag_ql_kernel(device const float *a [[buffer(0)]],
                                      device float *w [[buffer(1)]],
                                      device float *v [[buffer(2)]],
                                      device int *info [[buffer(4)]],
                                      constant ml_params &p [[buffer(5)]],
                                      uint lane [[thread_position_in_threadgroup]],
                                      uint group_size [[threads_per_threadgroup]],
                                      uint group [[threadgroup_position_in_grid]]) {
  threadgroup float scratch[ML_METAL_SCRATCH_FLOATS];
  ml_ctx ctx;
  ctx.lane = (int)lane;
  ctx.group_size = (int)group_size;
  ctx.group_id = p.group_offset + (ml_i64)group;
  ctx.scratch = scratch;
  ml_eigh_tridiag_ql(ctx, p, a, w, v, info);
}

kernel void ml_eigvalsh_tridiag_ql_kernel(device const float *a [[buffer(0)]],
                                          device float *w [[buffer(1)]],
                                          device int *info [[buffer(4)]],
                                          constant ml_params &p [[buffer(5)]],
                                          uint lane [[thread_position_in_threadgroup]],
                                          uint group_size [[threads_per_threadgroup]],
                                          uint group [[threadgroup_position_in_grid]]) {
  threadgroup float scratch[ML_METAL_SCRATCH_FLOATS];
  ml_ctx ctx;
  ctx.lane = (int)lane;
  ctx.group_size = (int)group_size;
  ctx.group_id = p.group_offset + (ml_i64)group;
  ctx.scratch = scratch;
  ml_eigvalsh_tridiag_ql(ctx, p, a, w, info);
}

// Lane-per-matrix entry: each thread of the threadgroup runs one matrix in its own slice of the
// scratch (large batches of tiny matrices; the host sizes threadgroups so each slice fits).
kernel void ml_eigh_tridiag_ql_lane_kernel(device const float *a [[buffer(0)]], device float *w [[buffer(1)]], device float *v [[buffer(2)]], device int *info [[buffer(4)]],
    constant ml_params &p [[buffer(5)]],
    uint lane [[thread_position_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint group [[threadgroup_position_in_grid]]) {
  threadgroup float scratch[ML_METAL_SCRATCH_FLOATS];
  ml_ctx ctx;
  ctx.lane = 0;
  ctx.group_size = 1;
  ctx.group_id = p.group_offset + (ml_i64)group * (ml_i64)threads + (ml_i64)lane;
  ctx.scratch = ml_lane_slice(scratch, ML_METAL_SCRATCH_FLOATS, (int)threads, (int)lane);
  ml_eigh_tridiag_ql(ctx, p, a, w, v, info);
}

// Lane-per-matrix entry: each thread of the threadgroup runs one matrix in its own slice of the
// scratch (large batches of tiny matrices; the host sizes threadgroups so each slice fits).
kernel void ml_eigvalsh_tridiag_ql_lane_kernel(device const float *a [[buffer(0)]], device float *w [[buffer(1)]], device int *info [[buffer(4)]],
    constant ml_params &p [[buffer(5)]],
    uint lane [[thread_position_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint group [[threadgroup_position_in_grid]]) {
  threadgroup float scratch[ML_METAL_SCRATCH_FLOATS];
  ml_ctx ctx;
  ctx.lane = 0;
  ctx.group_size = 1;
  ctx.group_id = p.group_offset + (ml_i64)group * (ml_i64)threads + (ml_i64)lane;
  ctx.scratch = ml_lane_slice(scratch, ML_METAL_SCRATCH_FLOATS, (int)threads, (int)lane);
  ml_eigvalsh_tridiag_ql(ctx, p, a, w, info);
}
