// Parameters shared by the host and every kernel dialect (CPU, CUDA, Metal).
// Included on its own by host code and by each compat_*.h. Layout is fixed: a
// static_assert below checks it in every dialect, so a drift fails every build.
#ifndef ML_KERNELS_PARAMS_H
#define ML_KERNELS_PARAMS_H

#if defined(__METAL_VERSION__) || defined(__OPENCL_VERSION__) || defined(__OPENCL_CPP_VERSION__)
typedef int ml_i32;
typedef long ml_i64;
typedef unsigned int ml_u32;
#else
#include <stdint.h>
typedef int32_t ml_i32;
typedef int64_t ml_i64;
typedef uint32_t ml_u32;
#endif

// Per-matrix info bits: identical to metal_linalg.h (macros, so redefinition is harmless).
#ifndef ML_INFO_NOT_CONVERGED
#define ML_INFO_NOT_CONVERGED 0x1
#define ML_INFO_NONFINITE 0x2
#define ML_INFO_RANK_DEFICIENT 0x4
#define ML_INFO_SWEEPS_SHIFT 16
#endif

// Kernel flags, same values as the C API enums (ml_qr_mode, ml_uplo).
#define ML_K_QR_REDUCED 0  // Q (m x k) and R (k x n)
#define ML_K_QR_R 1        // R only
#define ML_K_QR_COMPLETE 2 // Q (m x m) and R (m x n)
#define ML_K_LOWER 0       // eigh: read the lower triangle only
#define ML_K_UPPER 1       // eigh: read the upper triangle only
#define ML_K_SVD_V_SHARED 0x100  // svd: V in shared scratch (ml_svd_bidiag_qr_choose_flags)

// Scratch budgets per group, in floats. Metal entry points declare exactly this
// threadgroup array (Apple GPUs: 32 KB). CUDA: dynamic shared memory up to 227 KB on
// sm_90 (needs cudaFuncSetAttribute MaxDynamicSharedMemorySize above 48 KB).
#define ML_METAL_SCRATCH_FLOATS 8192
#define ML_CUDA_SCRATCH_FLOATS_SM90 58112
#define ML_CUDA_SCRATCH_FLOATS_SM80 41984
#define ML_MAX_GROUP_SIZE 1024
#define ML_SIMD_WIDTH 32

// One launch: `batch` row-major matrices back to back. Group g processes matrix
// group_offset + g (entry points add the offset; kernels see ctx.group_id absolute).
struct ml_params {
  ml_i32 m;          // rows (eigh: n)
  ml_i32 n;          // columns
  ml_i32 flags;      // ML_K_* (qr mode / uplo / svd full_matrices)
  ml_i32 max_iter;   // iteration/sweep cap; 0 = the kernel's default
  ml_i64 batch;      // matrices in the whole call; groups with group_id >= batch return
  ml_i64 group_offset;  // matrix index of group 0 of this launch (chunked launches)
};

// One launch of a step kernel of the blocked algorithms (core/kernels/steps.h): groups
// 0..groups-1 of a launch (group_offset + the launch's group index: entry points add the
// offset), over `batch` matrices whose operands live in one device workspace `ws` at
// off[i] + matrix * stride[i] floats. Each step documents what its fields mean; ld[i] is the
// leading dimension of operand i (column-major unless a step says otherwise).
struct ml_step_params {
  ml_i32 m, n, k, flags;
  ml_i32 ld[4];
  ml_i32 i[4];          // step-specific integers
  float alpha, beta, f0, f1;
  ml_i64 batch;         // matrices of this launch
  ml_i64 groups;        // groups of this launch in all (groups past it return)
  ml_i64 group_offset;  // index of the launch's first group (chunked launches)
  ml_i64 first;         // index of the launch's first matrix in the call's a / outputs / info
  ml_i64 off[4];        // workspace offsets (floats) of operands 0..3 of the first matrix
  ml_i64 stride[4];     // floats between consecutive matrices' operands
};

#if defined(__cplusplus) || defined(__METAL_VERSION__)
static_assert(sizeof(ml_params) == 32, "ml_params layout drifted");
static_assert(sizeof(ml_step_params) == 160, "ml_step_params layout drifted");
#else
_Static_assert(sizeof(struct ml_params) == 32, "ml_params layout drifted");
_Static_assert(sizeof(struct ml_step_params) == 160, "ml_step_params layout drifted");
#endif

#endif  // ML_KERNELS_PARAMS_H
