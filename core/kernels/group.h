// Group-wide helpers built on the vocabulary. Include after compat_<target>.h.
#ifndef ML_KERNELS_GROUP_H
#define ML_KERNELS_GROUP_H

// Scratch floats reserved for reductions: two ping-pong buffers of 32 slots.
#define ML_RED_FLOATS 64

// Sum of x over the whole group; every lane gets bitwise the same value. Contains exactly
// one ml_barrier (so it also orders shared-memory writes made before it). red: 32 floats.
// The buffer of one call may be written again only after another barrier: alternate two
// buffers (red, red + 32) between consecutive calls, or put an ml_barrier in between.
ML_FN float ml_group_sum(ML_CTX ctx, float x, ML_SHARED float *red) {
  float s = ml_simd_sum(ctx, x);
  if (ml_simd_lane(ctx) == 0) red[ml_simd_id(ctx)] = s;
  ml_barrier(ctx);
  int ns = ml_simd_count(ctx);
  float t = red[0];
  for (int i = 1; i < ns; ++i) t += red[i];
  return t;
}

// Same contract as ml_group_sum, for max.
ML_FN float ml_group_max(ML_CTX ctx, float x, ML_SHARED float *red) {
  float s = ml_simd_max(ctx, x);
  if (ml_simd_lane(ctx) == 0) red[ml_simd_id(ctx)] = s;
  ml_barrier(ctx);
  int ns = ml_simd_count(ctx);
  float t = red[0];
  for (int i = 1; i < ns; ++i) t = ml_fmax(t, red[i]);
  return t;
}

// Sequential dot product of two shared-memory vectors by one lane. Four partial sums: more
// independent work per lane on GPUs and SIMD-vectorisable at group size 1 on CPUs.
ML_FN float ml_dot(ML_SHARED const float *x, ML_SHARED const float *y, int len) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  int i = 0;
  for (; i + 4 <= len; i += 4) {
    s0 += x[i] * y[i];
    s1 += x[i + 1] * y[i + 1];
    s2 += x[i + 2] * y[i + 2];
    s3 += x[i + 3] * y[i + 3];
  }
  for (; i < len; ++i) s0 += x[i] * y[i];
  return (s0 + s2) + (s1 + s3);
}

// Row stride for an n-column matrix in shared memory: odd, so that lanes walking down a
// column hit distinct banks (32 banks of 4 bytes on CUDA and Apple GPUs).
ML_HOST_FN int ml_shared_ld(int n) { return n | 1; }

#endif  // ML_KERNELS_GROUP_H
