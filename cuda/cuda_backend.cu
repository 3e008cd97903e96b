// The CUDA backend (core/src/backend.h): launches the plans the core routes (core/src/routing.h)
// onto the entry points of cuda/kernels.cu, on the caller's stream, and the synchronous path for
// host buffers. Launch shapes come from launch_config.h.
// A block runs one matrix (or several one-warp groups / lane-per-matrix threads); its scratch is
// dynamic shared memory, raised above 48 KB once per kernel and device. Global plans
// (Launch::kGlobal, shapes beyond the shared window) run one matrix per block with the scratch
// in the caller's device workspace (workspace_bytes); blocked plans (Launch::kBlocked) enqueue
// the step kernels core/src/blocked.cpp sequences, over that workspace too, their products by
// cuBLAS where it is found (cublas_gemm.h; METAL_LINALG_CUDA_GEMM picks); device calls never
// allocate.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "backend.h"
#include "blocked.h"
#include "cublas_gemm.h"
#include "errors.h"
#include "kernel_desc.h"
#include "kernel_table.h"
#include "launch_config.h"
#include "ops.h"
#include "routing.h"

namespace ml::cuda {
namespace {

constexpr int kMaxDevices = 64;
constexpr int kMaxKernels = 96;
static_assert(blocked::kStepCount <= kMaxKernels, "more step kernels than kMaxKernels");

const char *kWhere = "cuda";

// ---- devices ----

struct DeviceInfo {
  bool ok = false;
  int budget_floats = 0;  // dynamic shared floats one block may use
  int units = 0;          // multiprocessors
  std::string name;
};

int device_count() {
  static const int count = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      cudaGetLastError();  // a missing driver is not an error of anyone's later call
      return 0;
    }
    return std::min(c, kMaxDevices);
  }();
  return count;
}

const DeviceInfo &device_info(int dev) {
  static DeviceInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  std::call_once(once[dev], [dev] {
    DeviceInfo &d = infos[dev];
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    d.name = prop.name;
    // The fatbinary holds SASS for the listed real architectures and PTX for the newest one:
    // anything at or above the oldest of them can run it.
    d.ok = prop.major * 10 + prop.minor >= ML_CUDA_MIN_ARCH;
    d.budget_floats = static_cast<int>(prop.sharedMemPerBlockOptin / sizeof(float));
    d.units = prop.multiProcessorCount;
  });
  return infos[dev];
}

// Restores the caller's current device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != dev) {
      if (cudaSetDevice(dev) == cudaSuccess) switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard &) = delete;
  DeviceGuard &operator=(const DeviceGuard &) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

// ---- kernels ----

struct KernelState {
  std::once_flag once;
  cudaError_t err = cudaSuccess;
  int max_threads = 0;
};

// Which entry of a KernelDesc a launch uses.
enum EntryKind { kEntryBlock = 0, kEntryLane = 1, kEntryGlobal = 2 };

const void *entry_of(const KernelDesc &d, int kind) {
  if (kind == kEntryGlobal) return reinterpret_cast<const void *>(d.global_entry);
  return reinterpret_cast<const void *>(kind == kEntryLane ? d.lane_entry : d.entry);
}

// Raises the kernel's dynamic shared-memory limit to the device's budget, once per device
// (global entries use none). Done outside any stream capture in practice: the first call of
// each kernel prepares it.
// The body of prepare() and of the steps' prepare_step(): the shared-memory limit of fn raised
// to device dev's budget (when it uses shared memory), its most threads per block into s.
void prepare_state(KernelState &s, const void *fn, int dev, bool uses_shared) {
  if (uses_shared)
    s.err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 device_info(dev).budget_floats * static_cast<int>(sizeof(float)));
  cudaFuncAttributes attr;
  if (s.err == cudaSuccess) s.err = cudaFuncGetAttributes(&attr, fn);
  if (s.err == cudaSuccess) s.max_threads = attr.maxThreadsPerBlock;
  if (s.err != cudaSuccess) cudaGetLastError();
}

const KernelState &prepare(int k, int dev, int kind) {
  static KernelState states[kMaxDevices][kMaxKernels][3];
  KernelState &s = states[dev][k][kind];
  std::call_once(s.once, [&s, k, dev, kind] {
    int count = 0;
    const KernelDesc &d = kernels(&count)[k];
    prepare_state(s, entry_of(d, kind), dev, kind != kEntryGlobal);
  });
  return s;
}

int env_int(const char *name) {
  const char *env = std::getenv(name);
  return env ? std::atoi(env) : 0;
}

// Experiment overrides of launch_config.h's choices (0: not set).
int forced_group_size() {
  static const int v = env_int("METAL_LINALG_CUDA_GROUP_SIZE");
  return v;
}
int forced_groups_per_block() {
  static const int v = env_int("METAL_LINALG_CUDA_GROUPS_PER_BLOCK");
  return v;
}
int forced_lane_matrices() {
  static const int v = env_int("METAL_LINALG_CUDA_LANE_MATRICES");
  return v;
}
// Matrices in flight of a global launch, at most (tests: several chunks on a small batch).
int forced_global_matrices() {
  static const int v = env_int("METAL_LINALG_CUDA_GLOBAL_MATRICES");
  return v;
}

// Slice floats (in *slice) and matrices in flight of global plan pl for c (0 if pl is not
// one): routing.h's bound, or fewer when forced. The workspace is their product x 4 bytes.
int64_t global_matrices(const Call &c, const Plan &pl, int64_t *slice) {
  const int64_t scratch = global_scratch_floats(c, pl, nullptr);
  *slice = global_slice_floats(scratch);
  if (scratch <= 0 || c.batch <= 0) return 0;
  int64_t in_flight = global_in_flight(c.batch, *slice);
  if (forced_global_matrices() > 0)
    in_flight = std::min<int64_t>(in_flight, forced_global_matrices());
  return in_flight;
}

bool usable() {
  static const bool ok = device_count() > 0 && device_info(0).ok;
  return ok;
}

// Options of the blocked algorithms on CUDA; METAL_LINALG_BLOCKED_NB / _NB_OUTER / _GEMM_LANES /
// _QR_TSQR_ROWS / _QR_TSQR_MAX_BATCH / _QR_TSQR_MIN_ROWS / _QR_TSQR_MIN_RATIO / _QR_PANEL_SPLIT /
// _QR_PANEL_LANES / _SVD_FIX_LANES override the panel widths, the product's lanes, the spread QR
// panels, the panels' warps and the SVD vector fix's lanes (experiments).
const blocked::Options &blocked_options() {
  static const blocked::Options o = [] {
    blocked::Options x;
    x.nb = 32;
    x.gemm_lanes = 16;
    x.gemm_regs = 8;  // METAL_LINALG_BLOCKED_GEMM_REGS=4: 64 x 64 tiles at most (experiments)
    if (env_int("METAL_LINALG_BLOCKED_GEMM_REGS") == 4) x.gemm_regs = 4;
    x.max_group = 1024;
    // Measured on the H200 (benchmarks/results/nvidia-h200-qr.md): panels spread over row blocks
    // win on tall matrices only (4096x1024 x1 14.8 -> 13.1 ms, 3000x500 6.2 -> 5.8; square 4096
    // 48.6 -> 56, 1024x512 3.3 -> 5.5), so only panels of >= 1536 rows of m >= 4 n at batch <= 8;
    // brd_tgk_fix a warp per column over 1024 lanes (svd 4096 x1 483 -> 374 ms).
    x.qr_tsqr_rows = 256;
    x.qr_tsqr_min_rows = 1536;
    x.qr_tsqr_min_ratio = 4;
    x.qr_tsqr_max_batch = 8;
    x.svd_fix_lanes = 1024;
    // eigh's tridiagonalisation a launch per panel up to batch 64 (benchmarks/results/
    // nvidia-h200-sytrd-panel.md: 2048 x1 45.0 -> 38.5 ms, 4096 x1 126.9 -> 120.9, 2048 x8
    // 102.9 -> 85.8, 512 x64 23.1 -> 20.2).
    x.trd_panel_groups = -1;
    x.trd_panel_max_batch = 64;
    // Its y from A22's lower triangle, items of 32 columns by 1024 rows, for chunks of up to 8
    // matrices (H200, benchmarks/results/nvidia-h200-trd-tri/head-vs-tri.md, against the code
    // before it in the same call: eigvalsh 4096 x1 69.2 -> 64.0 ms, eigh 4096 x1 79.9 -> 75.5,
    // 3000 x1 41.2 -> 39.0, 2048 x8 68.9 -> 68.0; slower at batch 64: 1024 x64 90.7 -> 93.1, 512
    // x64 16.6 -> 19.3).
    x.trd_tri_rows = 1024;
    x.trd_tri_max_batch = 8;
    // The tridiagonalisation's columns resident in shared memory (trd_res), one group per
    // multiprocessor (groups / batch per matrix), for chunks of up to 64 matrices (H200,
    // benchmarks/results/nvidia-h200-trd-res/trd-res-batch.md, up to 8 -> up to 132: eigh 256 x64
    // 6.88 -> 5.98 ms, eigvalsh 256 x64 4.46 -> 3.58, eigh 512 x16 10.64 -> 8.02, 1024 x32
    // 50.6 -> 48.9; 256 x8 unchanged; batches past 64 not measured).
    x.trd_res_max_batch = 64;
    x.trd_res_lanes = 512;
    // At least 8 columns a group (H200, benchmarks/results/nvidia-h200-trd-res-wide/groups.md,
    // groups in all 132 -> 32 at batch 1: eigh 256 x1 1.98 -> 1.84 ms, 512 x1 3.92 -> 3.66; 64
    // at 1024 x1 8.26 -> 8.03; 2048 and 4096 slower with fewer groups, untouched by this bound).
    x.trd_res_min_cols = 8;
    // Its hand-offs as tagged words (sytrd_resident.h).
    x.trd_res_tagged = 1;
    // eigh's back-transformation in blocks of 64 reflectors, their T in one launch (H200,
    // benchmarks/results/nvidia-h200-trd-back/: against 32 with T a panel at a time, eigh 4096
    // x1 88.8 -> 83.5 ms, 2048 x1 22.3 -> 20.5, 2048 x8 76.8 -> 71.0, 1024 x1 9.70 -> 8.96).
    x.trd_back_nb = 64;
    // The bidiagonalisation's rows resident in shared memory (brd_res), one group per
    // multiprocessor, for chunks of up to 8 matrices (H200, benchmarks/results/
    // nvidia-h200-brd-res/brd-res.md, panels -> resident: svd 2048 x1 99.3 -> 41.5 ms, 4096 x1
    // 346 -> 267, 2048 x8 372 -> 244, 3000x500 x1 21.3 -> 8.8, 256 x1 7.8 -> 4.2; svdvals 2048 x1
    // 81.9 -> 24.1, 4096 x1 274 -> 194, 512 x4 15.1 -> 4.9; accuracy ratios unchanged).
    x.brd_res_max_batch = 8;
    x.brd_res_lanes = 512;
    x.brd_res_tagged = 1;
    if (usable()) {  // device 0's shared memory and multiprocessors (all devices alike)
      x.shared_floats = device_info(0).budget_floats;
      x.parallel_groups = 2 * device_info(0).units;
      x.trd_res_groups = device_info(0).units;
      x.brd_res_groups = device_info(0).units;
    }
    const int nb = env_int("METAL_LINALG_BLOCKED_NB");
    if (nb >= 1 && nb <= 64) x.nb = nb;
    const char *outer = std::getenv("METAL_LINALG_BLOCKED_NB_OUTER");
    if (outer) x.nb_outer = std::max(0, std::min(64, std::atoi(outer)));
    const char *tsqr = std::getenv("METAL_LINALG_BLOCKED_QR_TSQR_ROWS");
    if (tsqr) x.qr_tsqr_rows = std::max(0, std::atoi(tsqr));
    const char *tsqr_batch = std::getenv("METAL_LINALG_BLOCKED_QR_TSQR_MAX_BATCH");
    if (tsqr_batch) x.qr_tsqr_max_batch = std::atoi(tsqr_batch);
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_TSQR_MIN_ROWS"))
      x.qr_tsqr_min_rows = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_TSQR_MIN_RATIO"))
      x.qr_tsqr_min_ratio = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_PANEL_SPLIT"))
      x.qr_panel_split = std::atoi(v) != 0;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_PANEL_LANES"))
      x.qr_panel_lanes = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_PANEL_FUSED"))
      x.qr_panel_fused = std::atoi(v) != 0;
    // The QR panels in registers from 2048 rows: H200, benchmarks/results/nvidia-h200-qr-reg.md
    // (qr 2048 x1 17.7 -> 15.1 ms, 4096 x1 48.8 -> 41.1, 3000x500 x1 5.8 -> 4.6, 4096x1024 x1
    // 13.1 -> 11.1, 2048 x8 24.7 -> 22.2; 1024 x1 6.2 -> 6.8 and 512 x1 2.8 -> 3.2 slower).
    // Below that, register panels of at most 16 columns, one level at batch 1 (H200,
    // benchmarks/results/nvidia-h200-qr-larft.md: 256 x1 1.27 -> 1.14 ms, 512 x1 2.64 -> 2.22,
    // 1024 x1 6.14 -> 5.39, 1024x512 3.35 -> 2.71, 1024 x8 7.76 -> 6.72, 512 x64 4.77 -> 4.53;
    // at 2048 one level of 16 columns was slower, 12.2 -> 14.4).
    x.qr_panel_reg = 2048;
    x.qr_panel_reg_small = 16;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_PANEL_REG"))
      x.qr_panel_reg = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_PANEL_REG_SMALL"))
      x.qr_panel_reg_small = std::max(0, std::atoi(v));
    // Thin block reflectors in one step (larfb_cols) on at most 64 columns (a QR outer panel's
    // inner updates) or up to 2^23 batch x rows x columns x reflectors (the trailing updates
    // of small one-level QRs). H200 (benchmarks/results/nvidia-h200-larfb-cols.md): qr 4096 x1
    // 37.8 -> 32.5 ms, 4096x1024 8.9 -> 8.2, 3000x500 4.1 -> 3.7 at 64 columns; 512 x1 3.0 ->
    // 2.75, 1024 x1 6.6 -> 6.2 at 256 columns, which slowed the tall ones and batch 8 (their
    // outer updates: 64 reflectors over thousands of rows re-read per group).
    x.larfb_cols = 64;
    x.larfb_work = int64_t{1} << 23;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_LARFB_COLS"))
      x.larfb_cols = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_LARFB_WORK"))
      x.larfb_work = std::max<int64_t>(0, std::atoll(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_FUSED_LANES"))
      x.qr_fused_lanes = std::max(0, std::atoi(v));
    // An outer panel's T by rows (qr_larft): 2048 x1 12.23 -> 11.97 ms, 4096 x1 30.96 -> 30.29,
    // 2048 x8 20.50 -> 20.32 on the H200 (nvidia-h200-qr-larft.md); no point slower.
    x.qr_row_larft = 1;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_ROW_LARFT"))
      x.qr_row_larft = std::atoi(v) != 0;
    // The register panels' rotating form in its class's own kernel (no spill), at most 2 rows
    // a lane (up to 512 lanes), and lookahead for one-level runs from 1024 columns: H200,
    // benchmarks/results/nvidia-h200-qr-lookahead/ (qr 1024 x1 4.45 -> 3.55 ms, 4096 x1 30.7
    // -> 27.8, 256 x1 0.89 -> 0.65, 3000x500 x1 3.48 -> 3.32; lookahead slowed 256 x1 and every
    // two-level run).
    x.qr_panel_reg_form = 3;
    x.qr_panel_reg_rows = 2;
    x.qr_lookahead = 1;
    x.qr_lookahead_min_k = 1024;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_LOOKAHEAD"))
      x.qr_lookahead = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_LOOKAHEAD_MIN_K"))
      x.qr_lookahead_min_k = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_PANEL_REG_ROWS"))
      x.qr_panel_reg_rows = std::max(0, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_QR_OUTER_MIN_BATCH"))
      x.qr_outer_min_batch = std::max(1, std::atoi(v));
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_BRD_X_LANES"))
      x.brd_x_lanes = std::max(0, std::atoi(v));
    // The secular roots a simdgroup each in levels of at most 64 merges over the chunk (H200,
    // benchmarks/results/nvidia-h200-dc-simd/dc-simd.md, a lane per root -> 64: eigh 2048 x1
    // 26.4 -> 24.0 ms, 4096 x1 96.6 -> 92.0, 1024 x8 18.2 -> 17.0; 4 merges: 24.1, 92.6, 18.1).
    x.dc_secular_simd = 64;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_DC_SECULAR_SIMD"))
      x.dc_secular_simd = std::max(0, std::atoi(v));
    // Divide and conquer's leaves by Jacobi in a simdgroup (H200, benchmarks/results/
    // nvidia-h200-dc-leaf/: against QL, eigh 256 x1 2.20 -> 1.94 ms, 256 x64 3.24 -> 3.02, 1024 x1
    // 8.60 -> 8.26; METAL_LINALG_DC_LEAF_JACOBI=0 restores QL).
    x.dc_leaf_jacobi = 1;
    // eigh's values from divide and conquer's roots, no bisection launch (measured below).
    x.dc_values = 1;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_DC_VALUES"))
      x.dc_values = std::atoi(v) != 0 ? 1 : 0;
    if (const char *v = std::getenv("METAL_LINALG_BLOCKED_SVD_FIX_LANES"))
      x.svd_fix_lanes = std::max(0, std::atoi(v));
    const int gl = env_int("METAL_LINALG_BLOCKED_GEMM_LANES");
    if (gl == 4 || gl == 8 || gl == 16 || gl == 32) x.gemm_lanes = gl;
    // eigvalsh by two stages where it measured faster than one stage on the H200
    // (benchmarks/results/nvidia-h200-twostage.md): n 1024..2048 at batches from 64. From 512
    // since that run, until the resident one-stage reduction's wide forms made one stage the
    // faster at 512 x64 (benchmarks/results/nvidia-h200-jacobi-group/eigh2.md: 11.8 vs 14.4 ms;
    // 1024 x64 70.0 vs 41.7, so two stages stay there).
    // METAL_LINALG_EIGH_TWO_STAGE_MIN_N (0: never) drops that window unless _MAX_N /
    // _MIN_BATCH set it too; then the band, the chase's tasks per launch and lanes.
    x.eigh_two_stage_min_n = 1024;
    x.eigh_two_stage_max_n = 2048;
    x.eigh_two_stage_min_batch = 64;
    // The band stays 16 (Options' default): in the routed window band 16 measured faster than 8
    // (benchmarks/results/nvidia-h200-blocked-variants.md: 1024 x64 41.7 vs 55.5 ms, 2048 x64
    // 230 vs 332), band 8 only at batch 1 and 8, where one stage is faster than either.
    if (const char *ts = std::getenv("METAL_LINALG_EIGH_TWO_STAGE_MIN_N")) {
      x.eigh_two_stage_min_n = std::max(0, std::atoi(ts));
      x.eigh_two_stage_max_n = std::max(0, env_int("METAL_LINALG_EIGH_TWO_STAGE_MAX_N"));
      x.eigh_two_stage_min_batch = std::max(1, env_int("METAL_LINALG_EIGH_TWO_STAGE_MIN_BATCH"));
    }
    const int band = env_int("METAL_LINALG_EIGH_BAND");
    if (band >= 2 && band <= 64) x.eigh_band = band;
    if (const char *tasks = std::getenv("METAL_LINALG_EIGH_CHASE_TASKS"))
      x.eigh_chase_tasks = std::clamp(std::atoi(tasks), 0, 2);
    const int chase_lanes = env_int("METAL_LINALG_EIGH_CHASE_LANES");
    if (chase_lanes >= 1 && chase_lanes <= 1024) x.eigh_chase_lanes = chase_lanes;
    // eigh by two stages (off until measured faster): METAL_LINALG_EIGH_VEC_TWO_STAGE_MIN_N
    // (0: never), _MAX_N, _MIN_BATCH as eigvalsh's; the chase's back-transformation's blocks
    // of METAL_LINALG_EIGH_BACK_SWEEPS sweeps on METAL_LINALG_EIGH_BACK_COLS columns.
    if (const char *ts = std::getenv("METAL_LINALG_EIGH_VEC_TWO_STAGE_MIN_N")) {
      x.eigh_vec_two_stage_min_n = std::max(0, std::atoi(ts));
      x.eigh_vec_two_stage_max_n = std::max(0, env_int("METAL_LINALG_EIGH_VEC_TWO_STAGE_MAX_N"));
      x.eigh_vec_two_stage_min_batch =
          std::max(1, env_int("METAL_LINALG_EIGH_VEC_TWO_STAGE_MIN_BATCH"));
    }
    x.eigh_back_sweeps = std::clamp(env_int("METAL_LINALG_EIGH_BACK_SWEEPS"), 0, 64);
    x.eigh_back_cols = std::clamp(env_int("METAL_LINALG_EIGH_BACK_COLS"), 0, 256);
    // The linear systems (blocked_linsys.cpp): LU's panels in registers inside each panel (up
    // to 32 columns) from 2048 rows, the interchanges composed by blocks of 64, and solve /
    // solve_triangular's right-hand sides in passes of up to n columns (at most 2^23 floats more
    // a matrix). H200 (benchmarks/results/nvidia-h200-linsys-large2.md against
    // nvidia-h200-linsys-large.md, all three on): lu_factor 4096 x1 99.4 -> 35.9 ms, 2048 x1
    // 23.1 -> 16.5, solve 4096 x1 103 -> 39.9, inv 2048 x1 27.0 -> 20.5, solve_triangular 4096
    // with 4096 right-hand sides 60.0 -> 10.2; at 1024 the register panels were slower
    // (lu_factor 5.94 -> 7.89), hence ls_lu_ib_min_m. The former paths:
    // METAL_LINALG_LS_LU_IB=0, METAL_LINALG_LS_LASWP_BLK=0, METAL_LINALG_LS_RHS_WIDE=0;
    // METAL_LINALG_LS_LU_IB_MIN_M the rows from which the register panels run;
    // METAL_LINALG_LS_NB the blocks' width (1..64), METAL_LINALG_LS_LU_NB LU's panels' alone.
    x.ls_lu_ib = 32;
    x.ls_lu_ib_min_m = 2048;
    if (const char *v = std::getenv("METAL_LINALG_LS_LU_IB_MIN_M"))
      x.ls_lu_ib_min_m = std::max(0, std::atoi(v));
    x.ls_laswp_blk = 1;
    x.ls_rhs_wide = 1;
    // LU's panels as leaves in one launch each (ls_lu_leaf_r*) and the lookahead of the trailing
    // updates on the side stream: off until measured on a GPU (benchmarks/h200_lu_large.sh A/Bs
    // them); METAL_LINALG_LS_LU_LEAF=1 and METAL_LINALG_LS_LU_LOOKAHEAD=1 turn them on per call.
    x.ls_lu_leaf = 0;
    x.ls_lu_lookahead = 0;
    // The narrow register panels fused (factorisation, interchanges on the panel's other columns
    // and block row of U in one launch, ls_getf2_fused_r*): on. H100, one run against the
    // three-launch form (benchmarks/results/nvidia-h100-linsys-lu-fuse): lu_factor 1024 x1 5.87
    // -> 3.50 ms, 2048 x1 8.36 -> 7.88, 4096 x1 21.8 -> 20.2, 2048 x8 11.4 -> 10.9, solve 4096
    // x1 23.8 -> 22.1, inv 2048 x1 10.0 -> 9.53. METAL_LINALG_LS_LU_FUSE=0 per call: three
    // launches. The triangular solves a vector a lane (ls_trsm_lane) stay off: slower in the
    // same run (lu_factor 4096 x1 21.8 -> 23.5 ms).
    x.ls_lu_fuse = 1;
    if (const char *v = std::getenv("METAL_LINALG_LS_LU_IB"))
      x.ls_lu_ib = std::clamp(std::atoi(v), 0, 32);
    if (const char *v = std::getenv("METAL_LINALG_LS_LASWP_BLK"))
      x.ls_laswp_blk = std::atoi(v) != 0;
    if (const char *v = std::getenv("METAL_LINALG_LS_RHS_WIDE"))
      x.ls_rhs_wide = std::atoi(v) != 0;
    // The Cholesky's diagonal blocks by sub-blocks of 32 in one simdgroup's registers
    // (ls_potrf_reg), in two levels of outer panels of 256 columns (ls_chol_outer) with the
    // stripes past the next outer panel on the side stream (ls_chol_lookahead);
    // METAL_LINALG_LS_POTRF_REG (0: ls_potrf_inv, 1 registers, 2 shared memory),
    // METAL_LINALG_LS_CHOL_OUTER (0: one level), METAL_LINALG_LS_CHOL_LOOKAHEAD, read per call by
    // blocked_linsys.cpp. H200 (benchmarks/results/nvidia-h200-linsys-chol/, before / after in one
    // call): cholesky 4096 x1 9.36 -> 3.61 ms, 2048 x8 5.98 -> 2.51, 1024 x1 2.05 -> 0.92.
    x.ls_potrf_reg = 1;
    x.ls_chol_outer = 256;
    x.ls_chol_lookahead = 1;
    const int ls_nb = env_int("METAL_LINALG_LS_NB");
    if (ls_nb >= 1 && ls_nb <= 64) x.ls_nb = ls_nb;
    // LU's panel width (its trailing products' k; 0: METAL_LINALG_LS_NB's).
    x.ls_lu_nb = std::clamp(env_int("METAL_LINALG_LS_LU_NB"), 0, 1024);
    // The chase of each matrix in one block of this many lanes (0: off; sb2st_block.h).
    const int chase_block = env_int("METAL_LINALG_EIGH_CHASE_BLOCK");
    if (chase_block >= 0 && chase_block <= 1024) x.eigh_chase_block = chase_block;
    return x;
  }();
  return o;
}

// Who computes the blocked algorithms' products: METAL_LINALG_CUDA_GEMM=dialect (the gemm
// step) or cublas (cuBLAS for all, where it loads); unset, each product where it measured
// faster (benchmarks/results/nvidia-h200-gemm.md): the step for thin products (min(m, n) <= 32)
// it may split over k (32x4096x4096: 11.5 TFLOP/s vs cuBLAS 8.3 without a workspace), cuBLAS
// for the rest (4096^3: 51 vs 38); the step alone without cuBLAS.
enum class GemmImpl { kDialect, kCublas, kAuto };
GemmImpl gemm_impl() {
  static const GemmImpl g = [] {
    const char *env = std::getenv("METAL_LINALG_CUDA_GEMM");
    if (env && std::strcmp(env, "dialect") == 0) return GemmImpl::kDialect;
    if (!cublas::available()) return GemmImpl::kDialect;
    return env && std::strcmp(env, "cublas") == 0 ? GemmImpl::kCublas : GemmImpl::kAuto;
  }();
  return g;
}

// cuBLAS's workspace in a blocked plan's device workspace, after the steps' part: with one,
// cuBLAS may split a thin product's k (torch gives it 32 MiB on Hopper; without one it cannot).
// METAL_LINALG_CUBLAS_WORKSPACE_MB overrides the size (0: none); none when cuBLAS does not serve.
int64_t cublas_work_bytes() {
  static const int64_t b = [] {
    if (gemm_impl() == GemmImpl::kDialect) return int64_t{0};
    const char *env = std::getenv("METAL_LINALG_CUBLAS_WORKSPACE_MB");
    const int mb = env ? std::atoi(env) : 32;
    return int64_t{mb >= 0 && mb <= 1024 ? mb : 32} << 20;
  }();
  return b;
}

// cuBLAS's workspace shared with the side queue (METAL_LINALG_CUBLAS_SIDE_WORKSPACE=1): while
// the side queue's work is in flight (from Runner::side_begin to Runner::join), the main
// stream's products take the first half of cuBLAS's part and the side queue's the second, so
// that both may split k; otherwise the main stream takes all of it and the side queue none.
// Off: H200 (benchmarks/results/nvidia-h200-qr-lookahead2/), qr 1024 x1 (one-level lookahead)
// 3.48 -> 3.47 ms; with two-level lookahead 4096 x1 27.5 -> 27.8, residual ratio 0.0043 -> 0.0037
// (0.0022 without lookahead), so neither is on.
bool cublas_side_work() {
  static const bool on = env_int("METAL_LINALG_CUBLAS_SIDE_WORKSPACE") != 0;
  return on;
}

// The steps' part of a blocked plan's workspace, rounded up to where cuBLAS's part starts.
int64_t blocked_steps_bytes(const Call &c, const Plan &pl) {
  return (blocked::workspace_bytes(c, pl.kernel_flags, blocked_options()) + 255) / 256 * 256;
}

// Device workspace bytes of plan pl for c: global and blocked plans.
int64_t global_bytes(const Call &c, const Plan &pl) {
  if (pl.launch == Launch::kBlocked) return blocked_steps_bytes(c, pl) + cublas_work_bytes();
  int64_t slice = 0;
  const int64_t in_flight = global_matrices(c, pl, &slice);
  return in_flight * slice * 4;
}

ml_status cuda_fail(ml_status st, const char *what, cudaError_t err) {
  return fail(st, kWhere, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

// Enqueues global plan pl for c: one matrix per block, block b's scratch the b-th slice of the
// workspace (global_bytes(c, pl) bytes at ws, checked by the caller); batches with
// more matrices than slices run as launches of at most that many blocks, one after another on
// the stream, each reusing the workspace (stream order keeps them apart).
ml_status launch_global(const Plan &pl, int dev, const Call &c, cudaStream_t stream, float *ws) {
  int count = 0;
  const KernelDesc &k = kernels(&count)[pl.kernel];
  if (!k.global_entry) return fail(ML_RUNTIME_ERROR, kWhere, "%s has no global entry", k.name);
  const KernelState &st = prepare(pl.kernel, dev, kEntryGlobal);
  if (st.err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, k.name, st.err);
  const KernelArgs ka = kernel_args(c);
  ml_params p;
  std::memset(&p, 0, sizeof p);
  p.m = static_cast<int>(ka.m);
  p.n = static_cast<int>(c.n);
  p.flags = pl.kernel_flags;
  global_scratch_floats(c, pl, &p.flags);
  p.max_iter = policy::iteration_cap();
  p.batch = c.batch;
  ml_i64 stride = 0;
  const int64_t in_flight = global_matrices(c, pl, &stride);
  if (in_flight <= 0 || !ws)
    return fail(ML_RUNTIME_ERROR, kWhere, "%s: global launch without a workspace", k.name);
  const int threads =
      threads_per_group(group_size_global(p.m, p.n), forced_group_size(), st.max_threads);
  const float *a = ka.a;
  float *o0 = ka.out[0], *o1 = ka.out[1], *o2 = ka.out[2];
  int *info = c.info;
  void *args[] = {&p, &a, &o0, &o1, &o2, &info, &ws, &stride};
  for (int64_t off = 0; off < c.batch; off += in_flight) {
    p.group_offset = off;
    const unsigned blocks = static_cast<unsigned>(std::min(in_flight, c.batch - off));
    const cudaError_t err = cudaLaunchKernel(entry_of(k, kEntryGlobal), dim3(blocks),
                                             dim3(threads, 1), args, 0, stream);
    if (err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, k.name, err);
  }
  return ML_OK;
}

// The side queue of the blocked plans (Runner::side_begin) on one device for the calling
// thread: a non-blocking stream (the caller's stream may be the legacy default stream, which
// would wait on a blocking one) and the events of its fork and its end, made once.
struct SideQueue {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, done = nullptr;
  bool tried = false, ok = false;
};
SideQueue &side_queue(int dev) {
  thread_local SideQueue queues[kMaxDevices];
  SideQueue &q = queues[dev];
  if (!q.tried) {
    q.tried = true;
    q.ok = cudaStreamCreateWithFlags(&q.stream, cudaStreamNonBlocking) == cudaSuccess &&
           cudaEventCreateWithFlags(&q.fork, cudaEventDisableTiming) == cudaSuccess &&
           cudaEventCreateWithFlags(&q.done, cudaEventDisableTiming) == cudaSuccess;
    if (!q.ok) (void)cudaGetLastError();
  }
  return q;
}

// Enqueues the step kernels of a blocked plan on a stream: one launch per step, a group per
// block, chunked when a step has more groups than a grid takes. The side queue is a second
// stream (none while the caller's stream is being captured: then one stream, in order); its
// products take no cuBLAS workspace (the main stream's may be in use at the same time), or,
// with cublas_side_work(), the second half of it while the main stream's take the first.
class StepRunner final : public blocked::Runner {
 public:
  StepRunner(int dev, const Call &c, cudaStream_t stream, float *ws,
             GemmImpl gemm = gemm_impl(), void *work = nullptr, size_t work_bytes = 0)
      : dev_(dev), c_(c), stream_(stream), ws_(ws), gemm_(gemm), work_(work),
        work_bytes_(work_bytes), split_work_(work && work_bytes >= 512 && cublas_side_work()) {}
  bool gemm(const blocked::GemmCall &g, ml_status *st) override {
    if (gemm_ == GemmImpl::kDialect || g.batch > INT32_MAX) return false;
    const bool splittable = g.part_floats >= 2 * int64_t{g.m} * g.n && g.k >= 128;
    if (gemm_ == GemmImpl::kAuto && std::min(g.m, g.n) <= 32 && splittable) return false;
    const char *what = "";
    // cuBLAS's workspace for this queue: the side queue's work is ordered after the main
    // stream's earlier products (the fork) and before its products after the join, so the
    // halves only apply from side_begin to join.
    void *work = side_ ? nullptr : work_;
    size_t work_bytes = side_ ? 0 : work_bytes_;
    if (split_work_ && (side_ || waiting_)) {
      const size_t half = work_bytes_ / 2 / 256 * 256;
      work = side_ ? static_cast<char *>(work_) + half : work_;
      work_bytes = side_ ? work_bytes_ - half : half;
    }
    const bool ta = (g.flags & blocked::kGemmTransA) != 0;
    const bool tb = (g.flags & blocked::kGemmTransB) != 0;
    const int err = cublas::sgemm_strided_batched(
        dev_, queue(), ta, tb, g.m, g.n, g.k, g.alpha, ws_ + g.a, g.lda, g.stride, ws_ + g.b,
        g.ldb, g.stride, g.beta, ws_ + g.c, g.ldc, g.stride, static_cast<int>(g.batch),
        work, work_bytes, &what);
    *st = err == 0 ? ML_OK
                   : fail(ML_RUNTIME_ERROR, kWhere, "%s failed (cuBLAS status %d)", what, err);
    return true;
  }
  ml_status launch(const blocked::StepLaunch &l) override {
    int count = 0;
    const StepFn *all = steps(&count);
    if (l.step < 0 || l.step >= count || l.step >= kMaxKernels)
      return fail(ML_RUNTIME_ERROR, kWhere, "unknown step %d", l.step);
    const char *name = blocked::step_name(l.step);
    const KernelState &st = prepare_step(l.step);
    if (st.err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, name, st.err);
    if (l.group_size > st.max_threads)
      return fail(ML_RUNTIME_ERROR, kWhere, "step %s: %d lanes, at most %d", name, l.group_size,
                  st.max_threads);
    ml_step_params p = l.p;
    // The product's vector loads need a 16-byte aligned workspace (every allocator gives one).
    if (l.step == blocked::kStep_gemm && reinterpret_cast<uintptr_t>(ws_) % 16 != 0)
      blocked::gemm_scalar_access(p);
    const float *a = c_.a;
    // The ops with a right-hand side: B in the out2 slot (kernel_args, core/src/backend.h).
    const KernelArgs ka = kernel_args(c_);
    float *o0 = ka.out[0], *o1 = ka.out[1], *o2 = ka.out[2], *ws = ws_;
    int *info = c_.info;
    void *args[] = {&p, &ws, &a, &o0, &o1, &o2, &info};
    const size_t smem = static_cast<size_t>(l.shared_floats) * sizeof(float);
    constexpr int64_t kMaxGrid = int64_t{1} << 30;
    for (int64_t off = 0; off < l.p.groups; off += kMaxGrid) {
      p.group_offset = off;
      const unsigned blocks = static_cast<unsigned>(std::min(kMaxGrid, l.p.groups - off));
      const cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void *>(all[l.step]),
                                               dim3(blocks), dim3(l.group_size), args, smem,
                                               queue());
      if (err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, name, err);
    }
    return ML_OK;
  }
  ml_status side_begin() override {
    side_ = false;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &cs) != cudaSuccess) {
      (void)cudaGetLastError();
      return ML_OK;
    }
    if (cs != cudaStreamCaptureStatusNone) return ML_OK;
    SideQueue &q = side_queue(dev_);
    if (!q.ok) return ML_OK;
    cudaError_t err = cudaEventRecord(q.fork, stream_);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(q.stream, q.fork, 0);
    if (err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, "side queue", err);
    side_ = true;
    return ML_OK;
  }
  ml_status side_end() override {
    if (!side_) return ML_OK;
    side_ = false;
    const cudaError_t err = cudaEventRecord(side_queue(dev_).done, side_queue(dev_).stream);
    if (err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, "side queue", err);
    waiting_ = true;
    return ML_OK;
  }
  ml_status join() override {
    if (!waiting_) return ML_OK;
    waiting_ = false;
    const cudaError_t err = cudaStreamWaitEvent(stream_, side_queue(dev_).done, 0);
    return err == cudaSuccess ? ML_OK : cuda_fail(ML_RUNTIME_ERROR, "side queue", err);
  }
  ~StepRunner() override { (void)join(); }

 private:
  // Raises the step's dynamic shared-memory limit to the device's budget once per device.
  const KernelState &prepare_step(int step) const {
    static KernelState states[kMaxDevices][kMaxKernels];
    KernelState &s = states[dev_][step];
    const int dev = dev_;
    std::call_once(s.once, [&s, step, dev] {
      int count = 0;
      prepare_state(s, reinterpret_cast<const void *>(steps(&count)[step]), dev, true);
    });
    return s;
  }

  cudaStream_t queue() const { return side_ ? side_queue(dev_).stream : stream_; }

  int dev_;
  const Call &c_;
  cudaStream_t stream_;
  bool side_ = false;     // launches go to the side queue
  bool waiting_ = false;  // the side queue's last work not yet joined
  float *ws_;
  GemmImpl gemm_;
  void *work_;
  size_t work_bytes_;
  bool split_work_;  // cuBLAS's workspace halved between the queues (cublas_side_work)
};

// Enqueues plan pl for c (device pointers) on stream; the current device is already set.
// ws: the device workspace of a global plan (global_bytes), else unused.
ml_status launch(const Plan &pl, int dev, const Call &c, cudaStream_t stream, float *ws) {
  if (c.m == 0 || c.n == 0) {
    if (!c.info) return ML_OK;
    const cudaError_t err = cudaMemsetAsync(c.info, 0, c.batch * sizeof(int32_t), stream);
    return err == cudaSuccess ? ML_OK : cuda_fail(ML_RUNTIME_ERROR, "cudaMemsetAsync", err);
  }
  if (pl.launch == Launch::kGlobal) return launch_global(pl, dev, c, stream, ws);
  if (pl.launch == Launch::kBlocked) {
    if (!ws && global_bytes(c, pl) > 0)
      return fail(ML_RUNTIME_ERROR, kWhere, "blocked plan without a workspace");
    const int64_t work = cublas_work_bytes();
    StepRunner r(dev, c, stream, ws, gemm_impl(),
                 work ? reinterpret_cast<char *>(ws) + blocked_steps_bytes(c, pl) : nullptr,
                 static_cast<size_t>(work));
    return blocked::run(c, pl.kernel_flags, blocked_options(), r);
  }
  int count = 0;
  const KernelDesc &k = kernels(&count)[pl.kernel];
  const KernelInfo &kt = kernel_table(&count)[pl.kernel];
  const bool lane = pl.launch != Launch::kBlock;
  const KernelState &st = prepare(pl.kernel, dev, lane ? kEntryLane : kEntryBlock);
  if (st.err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, k.name, st.err);
  const KernelArgs ka = kernel_args(c);  // the ops with a right-hand side: nrhs, B in out2
  const int m = static_cast<int>(ka.m), n = static_cast<int>(c.n);
  const int budget = device_info(dev).budget_floats;
  ml_params p;
  std::memset(&p, 0, sizeof p);
  p.m = m;
  p.n = n;
  // A lane-per-matrix block shares the budget among its matrices: offer each a warp's share.
  p.flags = kt.choose_flags(m, n, pl.kernel_flags, lane ? lane_budget(budget) : budget);
  p.max_iter = policy::iteration_cap();
  p.batch = c.batch;
  const int scratch = kt.scratch(m, n, p.flags);
  int threads, groups;
  size_t smem;
  if (lane) {
    // The kernel derives each matrix's slice from the launch's dynamic shared-memory size:
    // an odd slice keeps the threads of a warp, at equal offsets in their slices, on distinct
    // banks.
    const int stride = scratch | 1;
    threads = 1;
    groups = lane_matrices(c.batch, stride, budget, st.max_threads, forced_lane_matrices());
    smem = static_cast<size_t>(groups) * stride * sizeof(float);
  } else {
    threads = threads_per_group(k.group_size(m, n, c.batch, device_info(dev).units),
                                forced_group_size(), st.max_threads);
    const int forced = forced_groups_per_block();
    groups = groups_per_block(threads, scratch, budget, st.max_threads,
                              forced > 0 || kt.kind != KernelKind::kSimd ? forced
                                                                         : simd_groups_per_block());
    // Each group's slice starts on a 128-byte boundary; the kernel derives the slice size from
    // the launch's dynamic shared-memory size.
    smem = static_cast<size_t>(groups > 1 ? groups * ((scratch + 31) / 32 * 32) : scratch) *
           sizeof(float);
  }
  const float *a = ka.a;
  float *o0 = ka.out[0], *o1 = ka.out[1], *o2 = ka.out[2];
  int *info = c.info;
  void *args[] = {&p, &a, &o0, &o1, &o2, &info};
  constexpr int64_t kMaxGrid = int64_t{1} << 30;  // gridDim.x allows 2^31 - 1
  const int64_t per_launch = kMaxGrid * groups;
  for (int64_t off = 0; off < c.batch; off += per_launch) {
    p.group_offset = off;
    const int64_t todo = std::min(per_launch, c.batch - off);
    const unsigned blocks = static_cast<unsigned>((todo + groups - 1) / groups);
    const cudaError_t err =
        cudaLaunchKernel(reinterpret_cast<const void *>(lane ? k.lane_entry : k.entry),
                         dim3(blocks), dim3(threads, groups), args, smem, stream);
    if (err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, k.name, err);
  }
  return ML_OK;
}

// Device buffer and stream of the host path (device 0), grown on demand and kept.
struct HostPath {
  std::mutex mu;
  void *buf = nullptr;
  size_t bytes = 0;
  cudaStream_t stream = nullptr;
};

HostPath &host_path() {
  static HostPath *h = new HostPath;  // never destroyed: no CUDA calls at process exit
  return *h;
}


// The synchronous path for host buffers: copy to device 0, run, copy back.
ml_status run_host_buffers(const Call &c, const Plan &pl) {
  if (c.m == 0 || c.n == 0) {
    if (c.info) std::memset(c.info, 0, c.batch * sizeof(int32_t));
    return ML_OK;
  }
  DeviceGuard guard(0);
  HostPath &h = host_path();
  std::lock_guard<std::mutex> lock(h.mu);
  cudaError_t err = cudaSuccess;
  if (!h.stream && (err = cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking)))
    return cuda_fail(ML_RUNTIME_ERROR, "cudaStreamCreate", err);

  int64_t sz[3];
  output_floats(c.op, c.m, c.n, c.flags, sz);
  const int64_t in_f = c.m * c.n;
  const int64_t per = (in_f + sz[0] + sz[1] + sz[2] + 1) * int64_t{4};  // + info word
  // Chunks of at most 256 MiB on the device (or one matrix), so huge host batches stream through.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(c.batch, (int64_t{256} << 20) / per));
  Call probe = c;
  probe.batch = chunk;
  const int64_t ws_bytes = global_bytes(probe, pl);  // 0 unless a global or blocked plan
  const size_t need = static_cast<size_t>(chunk * per + ws_bytes + 256 * 6);
  if (need > h.bytes) {
    if (h.buf) cudaFree(h.buf);
    h.buf = nullptr;
    h.bytes = 0;
    if ((err = cudaMalloc(&h.buf, need))) {
      cudaGetLastError();
      return cuda_fail(ML_OUT_OF_MEMORY, "cudaMalloc", err);
    }
    h.bytes = need;
  }
  // Carve the buffer: a, out0, out1, out2, info, workspace, each 256-byte aligned.
  auto align = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
  char *base = static_cast<char *>(h.buf);
  float *da = reinterpret_cast<float *>(base);
  base += align(chunk * in_f * 4);
  float *dout[3];
  for (int i = 0; i < 3; ++i) {
    dout[i] = reinterpret_cast<float *>(base);
    base += align(chunk * sz[i] * 4);
  }
  int32_t *dinfo = reinterpret_cast<int32_t *>(base);
  base += align(chunk * 4);
  float *dws = reinterpret_cast<float *>(base);
  float *hout[3] = {c.out0, c.out1, c.out2};

  for (int64_t off = 0; off < c.batch; off += chunk) {
    const int64_t nb = std::min(chunk, c.batch - off);
    if ((err = cudaMemcpyAsync(da, c.a + off * in_f, nb * in_f * 4, cudaMemcpyHostToDevice,
                               h.stream)))
      return cuda_fail(ML_RUNTIME_ERROR, "cudaMemcpyAsync", err);
    Call dc = c;
    dc.batch = nb;
    dc.a = da;
    dc.out0 = sz[0] && hout[0] ? dout[0] : nullptr;
    dc.out1 = sz[1] && hout[1] ? dout[1] : nullptr;
    dc.out2 = sz[2] && hout[2] ? dout[2] : nullptr;
    dc.info = c.info ? dinfo : nullptr;
    if (ml_status st = launch(pl, 0, dc, h.stream, dws)) return st;
    for (int i = 0; i < 3; ++i) {
      if (!sz[i] || !hout[i]) continue;
      if ((err = cudaMemcpyAsync(hout[i] + off * sz[i], dout[i], nb * sz[i] * 4,
                                 cudaMemcpyDeviceToHost, h.stream)))
        return cuda_fail(ML_RUNTIME_ERROR, "cudaMemcpyAsync", err);
    }
    if (c.info && (err = cudaMemcpyAsync(c.info + off, dinfo, nb * 4, cudaMemcpyDeviceToHost,
                                         h.stream)))
      return cuda_fail(ML_RUNTIME_ERROR, "cudaMemcpyAsync", err);
  }
  if ((err = cudaStreamSynchronize(h.stream)))
    return cuda_fail(ML_RUNTIME_ERROR, "kernel execution", err);
  return ML_OK;
}

// Experiment override: METAL_LINALG_CUDA_SKIP_KERNELS, comma-separated table line names the
// router passes over, so that an alternative line of an op listed after the default one (e.g.
// eigvalsh_tridiag_bisect after eigvalsh_tridiag_ql) can be measured against it in one build.
bool skipped_by_env(const char *name) {
  static const std::string list = [] {
    const char *env = std::getenv("METAL_LINALG_CUDA_SKIP_KERNELS");
    return std::string(env ? env : "");
  }();
  const size_t len = std::strlen(name);
  for (size_t pos = 0; pos < list.size();) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    if (end - pos == len && list.compare(pos, len, name) == 0) return true;
    pos = end + 1;
  }
  return false;
}

bool has_kernel(int k) {
  int count = 0;
  const KernelDesc *all = kernels(&count);
  return k < count && k < kMaxKernels &&
         (all[k].lane_entry != nullptr || all[k].entry != nullptr) && !skipped_by_env(all[k].name);
}

bool has_global(int k) {
  int count = 0;
  const KernelDesc *all = kernels(&count);
  return k < count && k < kMaxKernels && all[k].global_entry != nullptr;
}

class CudaBackend final : public Backend {
 public:
  const char *name() const override { return "cuda"; }
  int32_t memory() const override { return ML_MEMORY_CUDA; }
  bool available() const override { return usable(); }
  const char *device_name() const override { return usable() ? device_info(0).name.c_str() : ""; }
  int32_t core_count() const override { return usable() ? device_info(0).units : 0; }
  int64_t scratch_budget(int32_t device) const override {
    if (device < 0 || device >= device_count() || !device_info(device).ok) return 0;
    return device_info(device).budget_floats;
  }
  bool plan(const Call &c, const policy::Resolved &pol, int32_t device, Plan *out) const override {
    const int64_t budget = scratch_budget(device);
    return budget > 0 && gpu_plan(c, pol, budget, has_kernel, out, has_global, true);
  }
  const char *plan_name(const Call &c, const Plan &p, const policy::Resolved &) const override {
    return gpu_plan_name("cuda", p, c.op);
  }
  int64_t workspace_bytes(const Call &c, const Plan &p) const override {
    return global_bytes(c, p);
  }
  ml_status run_host(const Call &c, const Plan &p, const policy::Resolved &,
                     const char *) override {
    return run_host_buffers(c, p);
  }
  ml_status run_device(const ml_exec &exec, const Call &c, const Plan &p,
                       const char *) override {
    if (exec.device < 0 || exec.device >= device_count() || !device_info(exec.device).ok)
      return fail(ML_INVALID_ARGUMENT, kWhere, "exec->device %d is not a usable CUDA device",
                  exec.device);
    DeviceGuard guard(exec.device);
    return launch(p, exec.device, c, static_cast<cudaStream_t>(exec.stream),
                  static_cast<float *>(exec.workspace));
  }
};

}  // namespace
}  // namespace ml::cuda

namespace ml {

Backend &cuda_backend() {
  static cuda::CudaBackend b;
  return b;
}

}  // namespace ml

namespace ml::cuda {

// The blocked algorithms' product alone, on device memory: the CUDA tests and
// benchmarks/gemm_bench.py compare the dialect step and cuBLAS with it (exported as
// ml_cuda_blocked_gemm by cuda_exports.cpp; not in the public header). impl: 0 as routed
// (METAL_LINALG_CUDA_GEMM), 1 the dialect step, 2 cuBLAS; lanes / regs > 0: the step's Options
// (core/src/blocked.h) instead of the backend's (regs 8: 128-wide tiles whatever the tile count,
// no split k); operands at float offsets of ws, `stride` floats apart over `batch` matrices;
// part / part_floats: split-k scratch (0: none). Enqueued on stream (a cudaStream_t) of the
// current device.
ml_status blocked_gemm(int32_t impl, int32_t lanes, int32_t regs, int32_t flags, int32_t m,
                       int32_t n, int32_t k, float alpha, float beta, float *ws, int64_t a,
                       int32_t lda, int64_t b, int32_t ldb, int64_t c, int32_t ldc, int64_t batch,
                       int64_t stride, int64_t part, int64_t part_floats, void *stream) {
  const char *where = "ml_cuda_blocked_gemm";
  if (!cuda::usable()) return fail(ML_RUNTIME_ERROR, where, "no usable CUDA device");
  if (impl < 0 || impl > 2 || m < 0 || n < 0 || k < 0 || batch < 0 || !ws)
    return fail(ML_INVALID_ARGUMENT, where, "bad arguments");
  if (impl == 2 && !cuda::cublas::available())
    return fail(ML_RUNTIME_ERROR, where, "cuBLAS not available: %s", cuda::cublas::describe());
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return fail(ML_RUNTIME_ERROR, where, "cudaGetDevice");
  blocked::Options o = cuda::blocked_options();
  if (lanes > 0) o.gemm_lanes = lanes;
  if (regs > 0) o.gemm_regs = regs;
  if (regs == 8) o.parallel_groups = 1;  // 128 x 128 tiles for every product that is not thin
  const cuda::GemmImpl g = impl == 0   ? cuda::gemm_impl()
                           : impl == 1 ? cuda::GemmImpl::kDialect
                                       : cuda::GemmImpl::kCublas;
  const Call none{};
  cuda::StepRunner r(dev, none, static_cast<cudaStream_t>(stream), ws, g);
  blocked::GemmCall call;
  call.flags = flags;
  call.m = m;
  call.n = n;
  call.k = k;
  call.alpha = alpha;
  call.beta = beta;
  call.a = a;
  call.b = b;
  call.c = c;
  call.lda = lda;
  call.ldb = ldb;
  call.ldc = ldc;
  call.batch = batch;
  call.stride = stride;
  return blocked::product(r, o, call, part, part_floats);
}

bool cublas_loaded() { return cublas::available(); }

}  // namespace ml::cuda
