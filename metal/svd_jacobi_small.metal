// Metal entry points of core/kernels/svd_jacobi_small.h (matrices up to 8 x 8, one thread per
// matrix, in registers). Buffers follow backend_gpu.h's Call: 0 a, 1 out0 (u), 2 out1 (s),
// 3 out2 (vt), 4 info, 5 params. Any threadgroup shape: thread gid of the grid runs matrix
// group_offset + gid.
#include "../core/kernels/compat_metal.h"
#include "../core/kernels/svd_jacobi_small.h"

kernel void ml_svd_jacobi_small_kernel(device const float *a [[buffer(0)]],
                                       device float *u [[buffer(1)]],
                                       device float *s [[buffer(2)]],
                                       device float *vt [[buffer(3)]],
                                       device int *info [[buffer(4)]],
                                       constant ml_params &p [[buffer(5)]],
                                       uint gid [[thread_position_in_grid]]) {
  ml_ctx ctx;
  ctx.lane = 0;
  ctx.group_size = 1;
  ctx.group_id = p.group_offset + (ml_i64)gid;
  ctx.scratch = nullptr;
  ml_svd_jacobi_small(ctx, p, a, u, s, vt, info);
}

kernel void ml_svdvals_jacobi_small_kernel(device const float *a [[buffer(0)]],
                                           device float *s [[buffer(2)]],
                                           device int *info [[buffer(4)]],
                                           constant ml_params &p [[buffer(5)]],
                                           uint gid [[thread_position_in_grid]]) {
  ml_ctx ctx;
  ctx.lane = 0;
  ctx.group_size = 1;
  ctx.group_id = p.group_offset + (ml_i64)gid;
  ctx.scratch = nullptr;
  ml_svdvals_jacobi_small(ctx, p, a, s, info);
}
