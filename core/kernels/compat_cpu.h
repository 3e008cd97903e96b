// CPU dialect of the kernel vocabulary (see README.md).
// Two modes:
//  - default: lanes of the CPU runner (tests/kernels/kernel_runner.h: fibers or threads,
//    each lane its own stack); barriers and simd ops go through the runner's group state
//    (function pointers, so a TU that never runs threaded groups does not need the runner
//    linked in);
//  - ML_CPU_SERIAL defined before inclusion: group size 1, lane 0, every sync op is a
//    no-op and constant-folds (cpu/cpu_kernels.cpp). The context type is renamed so
//    both modes can live in one program.
// Kernel functions are `static inline` here so the two modes never clash at link time.
#ifndef ML_KERNELS_COMPAT_H
#define ML_KERNELS_COMPAT_H
#define ML_TARGET_CPU 1

#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>

#include "params.h"

#define ML_DEVICE
#define ML_SHARED
#define ML_THREAD
#define ML_CONSTANT
#define ML_FN static inline
#define ML_HOST_FN static inline
#define ML_CTX const ml_ctx &
#define ML_PARAMS const ml_params &
#define ML_STEP_PARAMS const ml_step_params &
// Full unrolling of a loop with compile-time bounds (the register kernels *_small.h: their
// private arrays must only see constant indices). GCC and clang both take this spelling.
#define ML_UNROLL _Pragma("GCC unroll 64")

#if defined(ML_CPU_SERIAL)
#define ml_ctx ml_ctx_serial
struct ml_ctx_serial {
  static constexpr int lane = 0;
  static constexpr int group_size = 1;
  ml_i64 group_id;
  float *scratch;
};
#else
// Runner callbacks. state: the runner's per-group object.
struct ml_cpu_group_ops {
  void (*barrier)(void *state, int lane);
  // op: 0 sum, 1 max, 2 min, 3 shuffle (src = lane to read), 4 shuffle_xor (src = mask)
  float (*simd)(void *state, int lane, int op, float x, int src);
};
struct ml_ctx {
  int lane;
  int group_size;
  ml_i64 group_id;
  float *scratch;
  void *state;
  const ml_cpu_group_ops *ops;
};
#endif

ML_FN int ml_simd_lane(ML_CTX ctx) { return ctx.lane & 31; }
ML_FN int ml_simd_id(ML_CTX ctx) { return ctx.lane >> 5; }
ML_FN int ml_simd_count(ML_CTX ctx) { return (ctx.group_size + 31) >> 5; }
ML_FN int ml_simd_width(ML_CTX ctx) {
  int w = ctx.group_size - (ctx.lane & ~31);
  return w < 32 ? w : 32;
}

#if defined(ML_CPU_SERIAL)
ML_FN void ml_barrier(ML_CTX) {}
ML_FN void ml_barrier_device(ML_CTX) {}
ML_FN float ml_simd_sum(ML_CTX, float x) { return x; }
ML_FN float ml_simd_max(ML_CTX, float x) { return x; }
ML_FN float ml_simd_min(ML_CTX, float x) { return x; }
ML_FN float ml_simd_shuffle(ML_CTX, float x, int) { return x; }
ML_FN float ml_simd_shuffle_xor(ML_CTX, float x, int) { return x; }
ML_FN float ml_simd_broadcast(ML_CTX, float x, int) { return x; }
ML_FN float ml_simd_shuffle_full(ML_CTX, float x, int) { return x; }
ML_FN float ml_simd_shuffle_xor_full(ML_CTX, float x, int) { return x; }
template <int GS>
ML_FN float ml_simd_shuffle_seg(ML_CTX, float x, int) {
  return x;
}
template <int GS>
ML_FN int ml_simd_vote_seg(ML_CTX, bool pred) {
  return pred ? 3 : 0;
}
#else
ML_FN void ml_barrier(ML_CTX ctx) {
  if (ctx.group_size > 1) ctx.ops->barrier(ctx.state, ctx.lane);
}
ML_FN void ml_barrier_device(ML_CTX ctx) { ml_barrier(ctx); }
ML_FN float ml_cpu_simd(ML_CTX ctx, int op, float x, int src) {
  if (ctx.group_size == 1) return x;
  return ctx.ops->simd(ctx.state, ctx.lane, op, x, src);
}
ML_FN float ml_simd_sum(ML_CTX ctx, float x) { return ml_cpu_simd(ctx, 0, x, 0); }
ML_FN float ml_simd_max(ML_CTX ctx, float x) { return ml_cpu_simd(ctx, 1, x, 0); }
ML_FN float ml_simd_min(ML_CTX ctx, float x) { return ml_cpu_simd(ctx, 2, x, 0); }
ML_FN float ml_simd_shuffle(ML_CTX ctx, float x, int src) { return ml_cpu_simd(ctx, 3, x, src); }
ML_FN float ml_simd_shuffle_xor(ML_CTX ctx, float x, int mask) {
  return ml_cpu_simd(ctx, 4, x, mask);
}
ML_FN float ml_simd_broadcast(ML_CTX ctx, float x, int src) { return ml_cpu_simd(ctx, 3, x, src); }
// ml_simd_shuffle for a group that is one whole simdgroup of 32 lanes, all active.
ML_FN float ml_simd_shuffle_full(ML_CTX ctx, float x, int src) {
  return ml_cpu_simd(ctx, 3, x, src);
}
ML_FN float ml_simd_shuffle_xor_full(ML_CTX ctx, float x, int mask) {
  return ml_cpu_simd(ctx, 4, x, mask);
}
// Segmented forms (compat_cuda.h): a runner group never shares its simdgroup, so the group is
// the segment and both vote bits are the group's.
template <int GS>
ML_FN float ml_simd_shuffle_seg(ML_CTX ctx, float x, int src) {
  return ml_cpu_simd(ctx, 3, x, src);
}
template <int GS>
ML_FN int ml_simd_vote_seg(ML_CTX ctx, bool pred) {
  return ml_cpu_simd(ctx, 1, pred ? 1.0f : 0.0f, 0) > 0.0f ? 3 : 0;
}
#endif
ML_FN int ml_simd_seg_index(ML_CTX) { return 0; }

// Words of device memory shared by the groups of one launch (a workspace float slot holding a
// uint; the runner's lanes run concurrently): a relaxed fetch-add, an acquire load, a release
// store.
#if !defined(ML_CPU_SERIAL)
// The runner's lanes may be fibers sharing an OS thread (kernel_runner.cpp): a lane that polls
// a word lets the other lanes of its thread run first, so a lane spinning on a word that
// another lane sets never starves it. Null: nothing to do.
inline void (*ml_cpu_poll_hook)() = nullptr;
#endif
ML_FN ml_u32 ml_atomic_add_u32(ML_DEVICE float *w, ml_u32 v) {
  return __atomic_fetch_add(reinterpret_cast<ml_u32 *>(w), v, __ATOMIC_RELAXED);
}
ML_FN ml_u32 ml_atomic_add_release_u32(ML_DEVICE float *w, ml_u32 v) {
  return __atomic_fetch_add(reinterpret_cast<ml_u32 *>(w), v, __ATOMIC_RELEASE);
}
ML_FN ml_u32 ml_load_acquire_u32(ML_DEVICE float *w) {
#if !defined(ML_CPU_SERIAL)
  if (ml_cpu_poll_hook) ml_cpu_poll_hook();
#endif
  return __atomic_load_n(reinterpret_cast<ml_u32 *>(w), __ATOMIC_ACQUIRE);
}
ML_FN void ml_store_release_u32(ML_DEVICE float *w, ml_u32 v) {
  __atomic_store_n(reinterpret_cast<ml_u32 *>(w), v, __ATOMIC_RELEASE);
}
// Called between the polls of a lane waiting on another group's word: the runner's groups are
// threads that may share a core with the one waited for.
ML_FN void ml_spin_relax() { std::this_thread::yield(); }

// Tagged words (compat_cuda.h): one relaxed 64-bit atomic access each.
#define ML_HAS_TAGGED 1
ML_FN void ml_store_tagged(ML_DEVICE float *w, float x, ml_u32 tag) {
  ml_u32 b;
  std::memcpy(&b, &x, sizeof b);
  const uint64_t u = (uint64_t{tag} << 32) | b;
  __atomic_store_n(reinterpret_cast<uint64_t *>(w), u, __ATOMIC_RELAXED);
}
ML_FN float ml_load_tagged(ML_DEVICE const float *w, ML_THREAD ml_u32 *tag) {
#if !defined(ML_CPU_SERIAL)
  if (ml_cpu_poll_hook) ml_cpu_poll_hook();
#endif
  const uint64_t u = __atomic_load_n(reinterpret_cast<const uint64_t *>(w), __ATOMIC_RELAXED);
  *tag = static_cast<ml_u32>(u >> 32);
  const ml_u32 b = static_cast<ml_u32>(u);
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Barrier of the lane's simdgroup alone (compat_cuda.h): the runner's simdgroup barrier.
#if defined(ML_CPU_SERIAL)
ML_FN void ml_simd_barrier(ML_CTX) {}
#else
ML_FN void ml_simd_barrier(ML_CTX ctx) {
  if (ctx.group_size > 1) (void)ctx.ops->simd(ctx.state, ctx.lane, 1, 0.0f, 0);
}
#endif
// Words of shared memory shared by the simdgroups of one group (compat_cuda.h); the runner's
// lanes may run on different threads, so these are the device words' atomics.
ML_FN ml_u32 ml_atomic_add_shared_u32(ML_SHARED float *w, ml_u32 v) {
  return ml_atomic_add_u32(w, v);
}
ML_FN ml_u32 ml_load_acquire_block_u32(ML_SHARED float *w) { return ml_load_acquire_u32(w); }
ML_FN void ml_store_release_block_u32(ML_SHARED float *w, ml_u32 v) {
  ml_store_release_u32(w, v);
}

// Math shims. No fast math on the CPU build, but isfinite stays bit-based everywhere.
ML_FN ml_u32 ml_float_as_uint(float x) {
  ml_u32 u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
ML_FN float ml_uint_as_float(ml_u32 u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
ML_FN float ml_sqrt(float x) { return std::sqrt(x); }
ML_FN float ml_fabs(float x) { return std::fabs(x); }
ML_FN float ml_fmax(float a, float b) { return std::fmax(a, b); }
ML_FN float ml_fmin(float a, float b) { return std::fmin(a, b); }
ML_FN float ml_copysign(float a, float b) { return std::copysign(a, b); }
ML_FN float ml_fma(float a, float b, float c) { return std::fma(a, b, c); }
ML_FN float ml_rsqrt(float x) { return 1.0f / std::sqrt(x); }

#include "compat_common.h"

#endif  // ML_KERNELS_COMPAT_H
