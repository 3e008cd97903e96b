// CUDA dialect of the kernel vocabulary (see README.md). Included by the .cu entry points
// in cuda/ (nvcc, no --use_fast_math). Groups are 1-D thread blocks; simdgroups are warps.
#ifndef ML_KERNELS_COMPAT_H
#define ML_KERNELS_COMPAT_H
#define ML_TARGET_CUDA 1

#include "params.h"

#define ML_DEVICE
#define ML_SHARED
#define ML_THREAD
#define ML_CONSTANT
#define ML_FN static __device__ __forceinline__
#define ML_HOST_FN static __host__ __device__ inline
#define ML_CTX const ml_ctx &
#define ML_PARAMS const ml_params &
#define ML_STEP_PARAMS const ml_step_params &
// Full unrolling of a loop with compile-time bounds (the register kernels *_small.h: their
// private arrays must only see constant indices, or they go to local memory).
#define ML_UNROLL _Pragma("unroll")

struct ml_ctx {
  int lane;        // threadIdx.x
  int group_size;  // blockDim.x
  ml_i64 group_id; // params.group_offset + blockIdx.x
  float *scratch;  // dynamic shared memory
};

ML_FN int ml_simd_lane(ML_CTX ctx) { return ctx.lane & 31; }
ML_FN int ml_simd_id(ML_CTX ctx) { return ctx.lane >> 5; }
ML_FN int ml_simd_count(ML_CTX ctx) { return (ctx.group_size + 31) >> 5; }
ML_FN int ml_simd_width(ML_CTX ctx) {
  if (ctx.group_size == 1) return 1;
  int w = ctx.group_size - (ctx.lane & ~31);
  return w < 32 ? w : 32;
}
// First hardware lane of this group's part of the warp: 0, except for blocks of several
// sub-warp groups (blockDim.x a power of two below 32, blockDim.y groups side by side in a
// warp; cuda/ launches them only that way).
ML_FN int ml_simd_base(ML_CTX ctx) {
  return ctx.group_size < 32 ? (int)((threadIdx.y * blockDim.x) & 31u) : 0;
}
// Lanes of this warp that belong to the group (the last warp of a block may be partial).
ML_FN unsigned ml_simd_mask(ML_CTX ctx) {
  int w = ml_simd_width(ctx);
  return w == 32 ? 0xffffffffu : (((1u << w) - 1u) << ml_simd_base(ctx));
}

// A group of at most one warp syncs only its warp: cheaper, and it lets one block run several
// one-warp groups (one matrix each, cuda/ launches them as blockDim.y groups) whose barrier
// counts differ. The condition is group-uniform.
// A group of one lane (the lane-per-matrix launches: blockDim.x == 1, one matrix per thread)
// has nothing to wait for; its lanes run different code paths, so no warp-wide call may be
// made on their behalf. Entry points that build such contexts set group_size to the literal 1,
// so these tests fold away there.
ML_FN void ml_barrier(ML_CTX ctx) {
  if (ctx.group_size == 1) return;
  if (ctx.group_size <= 32)
    __syncwarp(ml_simd_mask(ctx));
  else
    __syncthreads();
}
ML_FN void ml_barrier_device(ML_CTX ctx) { ml_barrier(ctx); }

// Full warps: xor butterfly (every lane ends with bitwise the same value, since each
// stage adds the same two partial sums in either order). Partial warps: tree to lane 0,
// then broadcast, for the same guarantee.
ML_FN float ml_simd_sum(ML_CTX ctx, float x) {
  if (ctx.group_size == 1) return x;
  int w = ml_simd_width(ctx);
  if (w == 32) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
  }
  unsigned mask = ml_simd_mask(ctx);
  int sl = ctx.lane & 31;
  for (int off = 16; off > 0; off >>= 1) {
    float y = __shfl_down_sync(mask, x, off);
    if (sl + off < w) x += y;
  }
  return __shfl_sync(mask, x, ml_simd_base(ctx));
}
ML_FN float ml_simd_max(ML_CTX ctx, float x) {
  if (ctx.group_size == 1) return x;
  int w = ml_simd_width(ctx);
  if (w == 32) {
    for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
  }
  unsigned mask = ml_simd_mask(ctx);
  int sl = ctx.lane & 31;
  for (int off = 16; off > 0; off >>= 1) {
    float y = __shfl_down_sync(mask, x, off);
    if (sl + off < w) x = fmaxf(x, y);
  }
  return __shfl_sync(mask, x, ml_simd_base(ctx));
}
ML_FN float ml_simd_min(ML_CTX ctx, float x) {
  if (ctx.group_size == 1) return x;
  int w = ml_simd_width(ctx);
  if (w == 32) {
    for (int off = 16; off > 0; off >>= 1) x = fminf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
  }
  unsigned mask = ml_simd_mask(ctx);
  int sl = ctx.lane & 31;
  for (int off = 16; off > 0; off >>= 1) {
    float y = __shfl_down_sync(mask, x, off);
    if (sl + off < w) x = fminf(x, y);
  }
  return __shfl_sync(mask, x, ml_simd_base(ctx));
}
// src: simd lane to read (< ml_simd_width).
ML_FN float ml_simd_shuffle(ML_CTX ctx, float x, int src) {
  if (ctx.group_size == 1) return x;
  return __shfl_sync(ml_simd_mask(ctx), x, ml_simd_base(ctx) + src);
}
// Reads lane (simd_lane ^ mask); a partner beyond the warp's width returns x itself.
ML_FN float ml_simd_shuffle_xor(ML_CTX ctx, float x, int mask) {
  if (ctx.group_size == 1) return x;
  float y = __shfl_xor_sync(ml_simd_mask(ctx), x, mask);
  return ((ctx.lane & 31) ^ mask) < ml_simd_width(ctx) ? y : x;
}
ML_FN float ml_simd_broadcast(ML_CTX ctx, float x, int src) {
  if (ctx.group_size == 1) return x;
  return __shfl_sync(ml_simd_mask(ctx), x, ml_simd_base(ctx) + src);
}
// ml_simd_shuffle for a group that is one whole simdgroup of 32 lanes, all of them active at
// the call (a SIMD kernel at group size 32): a constant full mask, so one SHFL, without the
// per-call mask arithmetic and the convergence checks a run-time mask costs.
ML_FN float ml_simd_shuffle_full(ML_CTX, float x, int src) {
  return __shfl_sync(0xffffffffu, x, src);
}
// ml_simd_shuffle_xor with the same contract as ml_simd_shuffle_full (whole simdgroups, every
// lane at the call).
ML_FN float ml_simd_shuffle_xor_full(ML_CTX, float x, int mask) {
  return __shfl_xor_sync(0xffffffffu, x, mask);
}
// Segmented forms for SIMD kernels of GS (16 or 32) lanes whose groups sharing a warp run the
// same control flow, every lane of the warp calling: a constant full mask with the group as
// the shuffle's segment (one SHFL; a half-warp mask would cost a WARPSYNC and mask arithmetic
// per call). src: lane within the group.
template <int GS>
ML_FN float ml_simd_shuffle_seg(ML_CTX, float x, int src) {
  return __shfl_sync(0xffffffffu, x, src, GS);
}
// Bit 0: pred holds on some lane of this group; bit 1: on some lane of the warp (every group
// sharing it). Same calling rule as ml_simd_shuffle_seg.
template <int GS>
ML_FN int ml_simd_vote_seg(ML_CTX ctx, bool pred) {
  const unsigned b = __ballot_sync(0xffffffffu, pred);
  const unsigned own = GS >= 32 ? b : (b >> ml_simd_base(ctx)) & ((1u << (GS & 31)) - 1u);
  return (own != 0u ? 1 : 0) | (b != 0u ? 2 : 0);
}
// Index of this group among the groups sharing its warp (0 for groups of >= 32 lanes).
ML_FN int ml_simd_seg_index(ML_CTX ctx) {
  return ctx.group_size < 32 ? ml_simd_base(ctx) / ctx.group_size : 0;
}

// Words of device memory shared by the groups of one launch (a workspace float slot holding a
// uint): a relaxed fetch-add, a load with acquire and a store with release at device scope, so
// the writes a group made before its release are seen by a group after its acquire. Before
// sm_70 (no acquire/release instructions), volatile accesses with device fences.
ML_FN ml_u32 ml_atomic_add_u32(ML_DEVICE float *w, ml_u32 v) {
  return atomicAdd(reinterpret_cast<unsigned *>(w), v);
}
// A fetch-add with release at device scope (cumulative, as the store below).
ML_FN ml_u32 ml_atomic_add_release_u32(ML_DEVICE float *w, ml_u32 v) {
  unsigned old;
#if __CUDA_ARCH__ >= 700
  asm volatile("atom.release.gpu.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(w), "r"(v) : "memory");
#else
  __threadfence();
  old = atomicAdd(reinterpret_cast<unsigned *>(w), v);
#endif
  return old;
}
ML_FN ml_u32 ml_load_acquire_u32(ML_DEVICE float *w) {
  unsigned v;
#if __CUDA_ARCH__ >= 700
  asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(w) : "memory");
#else
  v = *reinterpret_cast<volatile unsigned *>(w);
  __threadfence();
#endif
  return v;
}
// The release is cumulative: writes of the group's other lanes ordered before it by a barrier
// are released too.
ML_FN void ml_store_release_u32(ML_DEVICE float *w, ml_u32 v) {
#if __CUDA_ARCH__ >= 700
  asm volatile("st.release.gpu.u32 [%0], %1;" : : "l"(w), "r"(v) : "memory");
#else
  __threadfence();
  *reinterpret_cast<volatile unsigned *>(w) = v;
#endif
}

// Called between the polls of a lane waiting on another group's word (compat_cpu.h yields
// there): nothing, the poll's latency is the hand-off's.
ML_FN void ml_spin_relax() {}

// Tagged words: a float and a uint tag in one naturally aligned 64-bit word of device memory
// (w: 8-byte aligned, w[0] the value's bits, w[1] the tag), written and read as one access, so a
// reader sees a value together with the tag written with it, never half of another write. No
// ordering with other memory (relaxed at device scope): a hand-off whose data are the tagged
// words themselves needs no flag and no fence; the reader polls the words it needs until
// their tags say which step wrote them. ML_HAS_TAGGED: the backend has them (Metal: no).
#define ML_HAS_TAGGED 1
ML_FN void ml_store_tagged(ML_DEVICE float *w, float x, ml_u32 tag) {
  const unsigned long long u =
      (static_cast<unsigned long long>(tag) << 32) | __float_as_uint(x);
#if __CUDA_ARCH__ >= 700
  asm volatile("st.relaxed.gpu.u64 [%0], %1;" : : "l"(w), "l"(u) : "memory");
#else
  *reinterpret_cast<volatile unsigned long long *>(w) = u;
#endif
}
ML_FN float ml_load_tagged(ML_DEVICE const float *w, ML_THREAD ml_u32 *tag) {
  unsigned long long u;
#if __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(u) : "l"(w) : "memory");
#else
  u = *reinterpret_cast<const volatile unsigned long long *>(w);
#endif
  *tag = static_cast<unsigned>(u >> 32);
  return __uint_as_float(static_cast<unsigned>(u));
}

// Barrier of the lane's simdgroup alone (its lanes' shared and device accesses ordered), for
// groups of several simdgroups that each run work of their own (core/kernels/sb2st_block.h).
ML_FN void ml_simd_barrier(ML_CTX ctx) {
  if (ctx.group_size == 1) return;
  __syncwarp(ml_simd_mask(ctx));
}
// Words of shared memory shared by the simdgroups of one group: a relaxed fetch-add, a load with
// acquire and a store with release at group (block) scope; they order the lane's device-memory
// accesses too (within a block, device stores reach the block's other threads through the SM's
// L1), and the release is cumulative as ml_store_release_u32's.
ML_FN ml_u32 ml_atomic_add_shared_u32(ML_SHARED float *w, ml_u32 v) {
  return atomicAdd_block(reinterpret_cast<unsigned *>(w), v);
}
ML_FN ml_u32 ml_load_acquire_block_u32(ML_SHARED float *w) {
  unsigned v;
#if __CUDA_ARCH__ >= 700
  asm volatile("ld.acquire.cta.u32 %0, [%1];" : "=r"(v) : "l"(w) : "memory");
#else
  v = *reinterpret_cast<volatile unsigned *>(w);
  __threadfence_block();
#endif
  return v;
}
ML_FN void ml_store_release_block_u32(ML_SHARED float *w, ml_u32 v) {
#if __CUDA_ARCH__ >= 700
  asm volatile("st.release.cta.u32 [%0], %1;" : : "l"(w), "r"(v) : "memory");
#else
  __threadfence_block();
  *reinterpret_cast<volatile unsigned *>(w) = v;
#endif
}

ML_FN ml_u32 ml_float_as_uint(float x) { return __float_as_uint(x); }
ML_FN float ml_uint_as_float(ml_u32 u) { return __uint_as_float(u); }
ML_FN float ml_sqrt(float x) { return __fsqrt_rn(x); }
ML_FN float ml_fabs(float x) { return fabsf(x); }
ML_FN float ml_fmax(float a, float b) { return fmaxf(a, b); }
ML_FN float ml_fmin(float a, float b) { return fminf(a, b); }
ML_FN float ml_copysign(float a, float b) { return copysignf(a, b); }
ML_FN float ml_fma(float a, float b, float c) { return fmaf(a, b, c); }
// rsqrtf (2 ulp) plus one Newton step: ~1 ulp, far shorter latency than sqrt and a division.
ML_FN float ml_rsqrt(float x) {
  const float y = rsqrtf(x);
  return y * (1.5f - 0.5f * x * y * y);
}

#include "compat_common.h"

#endif  // ML_KERNELS_COMPAT_H
