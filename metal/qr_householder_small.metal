// Metal entry point of core/kernels/qr_householder_small.h (matrices up to 8 x 8, one thread
// per matrix, in registers). Buffers follow backend_gpu.h's Call: 0 a, 1 out0 (q), 2 out1 (r),
// 4 info, 5 params. Any threadgroup shape: thread gid of the grid runs matrix group_offset + gid.
#include "../core/kernels/compat_metal.h"
#include "../core/kernels/qr_householder_small.h"

kernel void ml_qr_householder_small_kernel(device const float *a [[buffer(0)]],
                                           device float *q [[buffer(1)]],
                                           device float *r [[buffer(2)]],
                                           device int *info [[buffer(4)]],
                                           constant ml_params &p [[buffer(5)]],
                                           uint gid [[thread_position_in_grid]]) {
  ml_ctx ctx;
  ctx.lane = 0;
  ctx.group_size = 1;
  ctx.group_id = p.group_offset + (ml_i64)gid;
  ctx.scratch = nullptr;
  ml_qr_householder_small(ctx, p, a, q, r, info);
}
