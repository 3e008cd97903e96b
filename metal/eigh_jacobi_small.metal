// Metal entry points of core/kernels/eigh_jacobi_small.h: eigh / eigvalsh of n x n matrices,
// n <= 8, one thread per matrix (registers only). Buffers follow backend_gpu.h's Call:
// 0 a, 1 out0 (w), 2 out1 (v, eigh only), 4 info, 5 params. Dispatch one thread per matrix
// (any threadgroup shape); threads past p.batch return at once.
#include "../core/kernels/compat_metal.h"
#include "../core/kernels/eigh_jacobi_small.h"

kernel void ml_eigh_jacobi_small_kernel(device const float *a [[buffer(0)]],
                                        device float *w [[buffer(1)]],
                                        device float *v [[buffer(2)]],
                                        device int *info [[buffer(4)]],
                                        constant ml_params &p [[buffer(5)]],
                                        uint gid [[thread_position_in_grid]]) {
  ml_ctx ctx;
  ctx.lane = 0;
  ctx.group_size = 1;
  ctx.group_id = p.group_offset + (ml_i64)gid;
  ctx.scratch = nullptr;
  ml_eigh_jacobi_small(ctx, p, a, w, v, info);
}

kernel void ml_eigvalsh_jacobi_small_kernel(device const float *a [[buffer(0)]],
                                            device float *w [[buffer(1)]],
                                            device int *info [[buffer(4)]],
                                            constant ml_params &p [[buffer(5)]],
                                            uint gid [[thread_position_in_grid]]) {
  ml_ctx ctx;
  ctx.lane = 0;
  ctx.group_size = 1;
  ctx.group_id = p.group_offset + (ml_i64)gid;
  ctx.scratch = nullptr;
  ml_eigvalsh_jacobi_small(ctx, p, a, w, info);
}
