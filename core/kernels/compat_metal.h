// Metal Shading Language dialect of the kernel vocabulary (see README.md). Included by the
// .metal entry points in metal/. Build the library with -fno-fast-math; ml_isfinite is
// bit-based regardless. tools/check_metal.sh compiles this file with clang-14 as C++ for
// OpenCL (stub <metal_stdlib> in tools/metal_check/), which checks address spaces only.
#ifndef ML_KERNELS_COMPAT_H
#define ML_KERNELS_COMPAT_H
#define ML_TARGET_METAL 1

#include <metal_stdlib>

#include "params.h"

#define ML_DEVICE device
#define ML_SHARED threadgroup
#define ML_THREAD thread
#define ML_CONSTANT constant
#define ML_FN inline
#define ML_HOST_FN inline
#define ML_CTX thread const ml_ctx &
#define ML_PARAMS constant const ml_params &
#define ML_STEP_PARAMS constant const ml_step_params &
// Full unrolling of a loop with compile-time bounds (the register kernels *_small.h: their
// private arrays must only see constant indices).
#define ML_UNROLL _Pragma("unroll")

struct ml_ctx {
  int lane;         // [[thread_position_in_threadgroup]] (1-D groups)
  int group_size;   // [[threads_per_threadgroup]]
  ml_i64 group_id;  // params.group_offset + [[threadgroup_position_in_grid]]
  threadgroup float *scratch;
};

ML_FN int ml_simd_lane(ML_CTX ctx) { return ctx.lane & 31; }
ML_FN int ml_simd_id(ML_CTX ctx) { return ctx.lane >> 5; }
ML_FN int ml_simd_count(ML_CTX ctx) { return (ctx.group_size + 31) >> 5; }
ML_FN int ml_simd_width(ML_CTX ctx) {
  if (ctx.group_size == 1) return 1;
  int w = ctx.group_size - (ctx.lane & ~31);
  return w < 32 ? w : 32;
}

// A group of one lane (lane-per-matrix entry points: one matrix per thread, group_size the
// literal 1) waits for nobody, and its simdgroup's other threads run other matrices: no
// barrier or simd_* call may be made for it.
ML_FN void ml_barrier(ML_CTX ctx) {
  if (ctx.group_size == 1) return;
  metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);
}
ML_FN void ml_barrier_device(ML_CTX ctx) {
  if (ctx.group_size == 1) return;
  metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup | metal::mem_flags::mem_device);
}

// simd_* reduce over the active threads of the simdgroup, so partial ones work as is.
ML_FN float ml_simd_sum(ML_CTX ctx, float x) {
  return ctx.group_size == 1 ? x : metal::simd_sum(x);
}
ML_FN float ml_simd_max(ML_CTX ctx, float x) {
  return ctx.group_size == 1 ? x : metal::simd_max(x);
}
ML_FN float ml_simd_min(ML_CTX ctx, float x) {
  return ctx.group_size == 1 ? x : metal::simd_min(x);
}
ML_FN float ml_simd_shuffle(ML_CTX ctx, float x, int src) {
  if (ctx.group_size == 1) return x;
  return metal::simd_shuffle(x, (ushort)src);
}
ML_FN float ml_simd_shuffle_xor(ML_CTX ctx, float x, int mask) {
  if (ctx.group_size == 1) return x;
  float y = metal::simd_shuffle_xor(x, (ushort)mask);
  return ((ctx.lane & 31) ^ mask) < ml_simd_width(ctx) ? y : x;
}
ML_FN float ml_simd_broadcast(ML_CTX ctx, float x, int src) {
  if (ctx.group_size == 1) return x;
  return metal::simd_broadcast(x, (ushort)src);
}
// ml_simd_shuffle for a group that is one whole simdgroup of 32 lanes, all active.
ML_FN float ml_simd_shuffle_full(ML_CTX, float x, int src) {
  return metal::simd_shuffle(x, (ushort)src);
}
ML_FN float ml_simd_shuffle_xor_full(ML_CTX, float x, int mask) {
  return metal::simd_shuffle_xor(x, (ushort)mask);
}
// Segmented forms (compat_cuda.h): Metal groups are never below 32 lanes, so the group is the
// segment and both vote bits are the simdgroup's.
template <int GS>
ML_FN float ml_simd_shuffle_seg(ML_CTX, float x, int src) {
  return metal::simd_shuffle(x, (ushort)src);
}
template <int GS>
ML_FN int ml_simd_vote_seg(ML_CTX, bool pred) {
  return metal::simd_max(pred ? 1.0f : 0.0f) > 0.0f ? 3 : 0;
}
ML_FN int ml_simd_seg_index(ML_CTX) { return 0; }

ML_FN ml_u32 ml_float_as_uint(float x) { return metal::as_type<ml_u32>(x); }
ML_FN float ml_uint_as_float(ml_u32 u) { return metal::as_type<float>(u); }
ML_FN float ml_sqrt(float x) { return metal::precise::sqrt(x); }
ML_FN float ml_fabs(float x) { return metal::fabs(x); }
ML_FN float ml_fmax(float a, float b) { return metal::fmax(a, b); }
ML_FN float ml_fmin(float a, float b) { return metal::fmin(a, b); }
ML_FN float ml_copysign(float a, float b) { return metal::copysign(a, b); }
ML_FN float ml_fma(float a, float b, float c) { return metal::fma(a, b, c); }
ML_FN float ml_rsqrt(float x) { return metal::precise::rsqrt(x); }

// Words of device memory shared by the groups of one dispatch (a workspace float slot holding a
// uint). MSL 3.0 atomics are relaxed only and it has no device-scope fence: callers order their
// threadgroup's device accesses around these by ml_barrier_device (threadgroup_barrier with
// mem_device), one lane between two such barriers, as the chase does.
ML_FN ml_u32 ml_atomic_add_u32(ML_DEVICE float *w, ml_u32 v) {
  return metal::atomic_fetch_add_explicit((device metal::atomic_uint *)w, v,
                                          metal::memory_order_relaxed);
}
ML_FN ml_u32 ml_atomic_add_release_u32(ML_DEVICE float *w, ml_u32 v) {
  return metal::atomic_fetch_add_explicit((device metal::atomic_uint *)w, v,
                                          metal::memory_order_relaxed);
}
ML_FN ml_u32 ml_load_acquire_u32(ML_DEVICE float *w) {
  return metal::atomic_load_explicit((device metal::atomic_uint *)w, metal::memory_order_relaxed);
}
ML_FN void ml_store_release_u32(ML_DEVICE float *w, ml_u32 v) {
  metal::atomic_store_explicit((device metal::atomic_uint *)w, v, metal::memory_order_relaxed);
}

// Called between the polls of a lane waiting on another group's word (compat_cpu.h yields
// there): nothing.
ML_FN void ml_spin_relax() {}

// Tagged words (compat_cuda.h): MSL 3.0 has no 64-bit atomic load and store, so none here;
// steps that use them keep a flag-and-fence path for Metal.
#define ML_HAS_TAGGED 0

// Barrier of the lane's simdgroup alone (compat_cuda.h), its threadgroup and device accesses
// ordered.
ML_FN void ml_simd_barrier(ML_CTX ctx) {
  if (ctx.group_size == 1) return;
  metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup | metal::mem_flags::mem_device);
}
// Words of threadgroup memory shared by the simdgroups of one threadgroup (compat_cuda.h):
// relaxed threadgroup atomics, the acquire and release made by fences at threadgroup scope
// over device and threadgroup memory (atomic_thread_fence, MSL 3.2).
ML_FN ml_u32 ml_atomic_add_shared_u32(threadgroup float *w, ml_u32 v) {
  return metal::atomic_fetch_add_explicit((threadgroup metal::atomic_uint *)w, v,
                                          metal::memory_order_relaxed);
}
ML_FN ml_u32 ml_load_acquire_block_u32(threadgroup float *w) {
  const ml_u32 v =
      metal::atomic_load_explicit((threadgroup metal::atomic_uint *)w, metal::memory_order_relaxed);
  metal::atomic_thread_fence(metal::mem_flags::mem_device | metal::mem_flags::mem_threadgroup,
                             metal::memory_order_seq_cst, metal::thread_scope_threadgroup);
  return v;
}
ML_FN void ml_store_release_block_u32(threadgroup float *w, ml_u32 v) {
  metal::atomic_thread_fence(metal::mem_flags::mem_device | metal::mem_flags::mem_threadgroup,
                             metal::memory_order_seq_cst, metal::thread_scope_threadgroup);
  metal::atomic_store_explicit((threadgroup metal::atomic_uint *)w, v,
                               metal::memory_order_relaxed);
}

// Slice of a threadgroup's scratch for thread t of a lane-per-matrix entry (every thread a
// group of one with its own matrix): an odd number of floats, so threads at equal offsets of
// their slices hit distinct banks.
ML_FN threadgroup float *ml_lane_slice(threadgroup float *scratch, int total, int threads,
                                       int t) {
  int slice = total / threads;
  slice -= (slice & 1) ? 0 : 1;
  return scratch + t * slice;
}

#include "compat_common.h"

#endif  // ML_KERNELS_COMPAT_H
