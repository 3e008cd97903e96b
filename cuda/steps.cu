// The CUDA entry points of every step kernel of core/kernels/steps.h (the blocked algorithms'
// pieces, sequenced by core/src/blocked*.cpp), generated, and their list in step order.
// One group per block (blockDim.x lanes, up to 1024), its shared scratch the launch's dynamic
// shared memory; the workspace and the call's buffers are plain device pointers.
#include "../core/kernels/compat_cuda.h"
#include "../core/kernels/steps.h"
#include "kernel_desc.h"

// Launch bounds per step: 1024 lanes, except where a step's register blocking needs more
// registers per lane than 1024 lanes leave (the product: 256 lanes, two groups per SM).
#define ML_CUDA_STEP_ID(name, fn) ml_cuda_step_id_##name,
enum { ML_STEP_TABLE(ML_CUDA_STEP_ID) };
#undef ML_CUDA_STEP_ID
template <int S>
struct ml_cuda_step_bounds {
  static constexpr int lanes = 1024, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_gemm> {
  static constexpr int lanes = 256, groups = 2;
};
// The chase's tasks in registers (core/kernels/sb2st.h, ml_sb_task_w) need more than the 64
// registers a thread gets under a bound of 1024 lanes; its groups have at most 256
// (blocked_eigh2.cpp, chase_lanes).
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_sb_chase> {
  static constexpr int lanes = 256, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_sb_sweeps> {
  static constexpr int lanes = 256, groups = 1;
};
// The chase in one group (sb2st_block.h): up to 512 lanes with the registers sb_sweeps' groups
// get (128 a lane), sb_block_wide up to 1024 (64 a lane: fewer registers, more simdgroups).
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_sb_block> {
  static constexpr int lanes = 512, groups = 1;
};

// The QR panel in registers (core/kernels/qr_panel_reg.h; the rotating form's classes apart in
// qr_panel_rot*): 64 floats of the panel a lane plus its partial sums, 128 registers a lane at
// 512 lanes.
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_qr_panel_reg> {
  static constexpr int lanes = ML_QRR_MAX_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_qr_panel_rot8> {
  static constexpr int lanes = ML_QRR_MAX_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_qr_panel_rot16> {
  static constexpr int lanes = ML_QRR_MAX_LANES, groups = 1;
};

// The LU panels in registers (core/kernels/linsys_blocked.h, ls_getf2_r*, the leaves
// ls_lu_leaf_r* and the fused panels ls_getf2_fused_r* around them): 64 floats of the panel a
// lane, at most 512 lanes.
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_getf2_r8> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_getf2_r16> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_getf2_r32> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_lu_leaf_r8> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_lu_leaf_r16> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_lu_leaf_r32> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_getf2_fused_r8> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_getf2_fused_r16> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_getf2_fused_r32> {
  static constexpr int lanes = ML_LSB_REG_LANES, groups = 1;
};

// The resident reductions (core/kernels/sytrd_resident.h, gebrd_resident.h): groups of at most
// ML_RES_MAX_LANES lanes (the host caps them), 128 registers a lane.
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_trd_res> {
  static constexpr int lanes = ML_RES_MAX_LANES, groups = 1;
};
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_brd_res> {
  static constexpr int lanes = ML_RES_MAX_LANES, groups = 1;
};

// The divide-and-conquer leaves (core/kernels/tridiag_dc.h): one simdgroup a leaf, the Jacobi
// form's 32 rows a lane in registers.
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_dc_leaf> {
  static constexpr int lanes = 32, groups = 8;
};

// The thin block reflector (core/kernels/larfb_cols.h): up to 64 sums a lane in registers.
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_larfb_cols> {
  static constexpr int lanes = 256, groups = 2;
};

// The Cholesky's diagonal block by sub-blocks in registers (core/kernels/linsys_blocked.h,
// ls_potrf_reg): a 32-float row of the factor and one of its inverse a lane, groups of at most
// 256 lanes (blocked_linsys.cpp, ls_lanes).
template <>
struct ml_cuda_step_bounds<ml_cuda_step_id_ls_potrf_reg> {
  static constexpr int lanes = 256, groups = 1;
};

#define ML_CUDA_STEP_ENTRY(name, fn)                                                       \
  __global__ void __launch_bounds__(ml_cuda_step_bounds<ml_cuda_step_id_##name>::lanes,    \
                                    ml_cuda_step_bounds<ml_cuda_step_id_##name>::groups)   \
      ml_cuda_step_##name(ml_step_params p, float *ws, const float *a, float *o0, float *o1, \
                          float *o2, int *info) {                                          \
    extern __shared__ float ml_cuda_step_scratch[];                                        \
    ml_ctx ctx;                                                                            \
    ctx.lane = static_cast<int>(threadIdx.x);                                              \
    ctx.group_size = static_cast<int>(blockDim.x);                                         \
    ctx.group_id = p.group_offset + static_cast<ml_i64>(blockIdx.x);                       \
    ctx.scratch = ml_cuda_step_scratch;                                                    \
    fn(ctx, p, ws, a, o0, o1, o2, info);                                                   \
  }

ML_STEP_TABLE(ML_CUDA_STEP_ENTRY)

namespace ml::cuda {
namespace {

#define ML_CUDA_STEP_PTR(name, fn) ml_cuda_step_##name,
const StepFn kSteps[] = {ML_STEP_TABLE(ML_CUDA_STEP_PTR)};

}  // namespace

const StepFn *steps(int *n) {
  *n = static_cast<int>(sizeof(kSteps) / sizeof(kSteps[0]));
  return kSteps;
}

}  // namespace ml::cuda
