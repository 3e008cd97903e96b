#include "routing.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "blocked.h"
#include "kernel_table.h"
#include "ops.h"

namespace ml {
namespace {

bool shape_in_range(int64_t m, int64_t n, int64_t budget) {
  // Every kernel keeps at least the matrix in shared memory: bound the sizes before calling the
  // kernels' int-typed helpers, which could overflow on absurd shapes.
  return m >= 1 && n >= 1 && m <= budget && n <= budget && m * n <= 4 * budget;
}

// A GPU plan of `gpu` for c, or false.
bool gpu_covers(const Backend *gpu, const Call &c, const policy::Resolved &pol, int32_t device,
                Plan *plan) {
  if (!gpu || pol.force == policy::Force::kCpu || !gpu->available()) return false;
  return gpu->plan(c, pol, device, plan);
}

}  // namespace

int32_t gpu_kernel_flags(int32_t op, int64_t m, int64_t n, int32_t flags) {
  if (op == ML_OP_QR && flags == ML_QR_COMPLETE && m == n) return ML_QR_REDUCED;
  if (op == ML_OP_SVD) return 0;
  return flags;
}

bool gpu_plan(const Call &c, const policy::Resolved &pol, int64_t budget,
              bool (*has_kernel)(int), Plan *out, bool (*has_global)(int), bool blocked) {
  const int64_t m = c.m, n = c.n, big = std::max(m, n);
  if (c.op == ML_OP_SVD && c.flags != 0 && m != n) return false;  // full U/V of non-square
  const int32_t kf = gpu_kernel_flags(c.op, m, n, c.flags);
  const int64_t blocked_min = pol.value[policy::kGpuBlockedMinN];
  const bool blocked_ok = blocked && blocked_min > 0 && m > 0 && n > 0 && big <= kBlockedMaxDim &&
                          blocked::supported(c.op);
  auto take_blocked = [&] {
    out->kernel = -1;
    out->kernel_flags = kf;
    out->launch = Launch::kBlocked;
    return true;
  };
  // Inside the shared window (where a table line covers the shape) the blocked path competes
  // with the kernels: from gpu_blocked_min_n up to the batch gpu_blocked_max_batch (one matrix
  // spreads its products over the GPU, where a large batch fills it with blocks of the table's
  // kernels). Beyond the window it is taken at any batch (below).
  if (blocked_ok && big >= blocked_min && c.batch <= pol.value[policy::kGpuBlockedMaxBatch])
    return take_blocked();
  // The m the kernels' size functions see (nrhs for the ops with a right-hand side, whose
  // kernels take any number of columns in chunks: only A's order bounds them).
  const int64_t km = kernel_rows(c);
  const bool rhs = rhs_op(c);
  if (rhs && (km < 0 || km > INT32_MAX)) return false;
  auto in_range = [&](int64_t bound) {
    return rhs ? shape_in_range(n, n, bound) : shape_in_range(m, n, bound);
  };
  int count = 0;
  const KernelInfo *table = kernel_table(&count);
  // In the window gpu_alt_min_n..gpu_alt_max_n, up to the batch gpu_alt_max_batch, the first
  // GROUP line that covers the shape is passed over for the next one that does (an op's
  // alternative algorithm, listed after its default line: eigh_tridiag_bisect after
  // eigh_tridiag_ql); without one, the first is taken.
  const bool alt = big >= pol.value[policy::kGpuAltMinN] &&
                   big <= pol.value[policy::kGpuAltMaxN] &&
                   c.batch <= pol.value[policy::kGpuAltMaxBatch];
  int passed = -1;
  // The lane fields are timed with one right-hand side (calibrate's inputs), and a lane runs its
  // matrix's right-hand sides one after another where the block launch spreads them over the
  // group: more than one takes the block launch (H200: solve_triangular 8 x16384 with 16
  // right-hand sides, lane 0.200 ms, block 0.090).
  const bool lane_ok = !rhs || km <= 1;
  auto take_group = [&](int i) {
    out->kernel = i;
    out->kernel_flags = kf;
    out->launch = lane_ok && big <= pol.value[policy::kGpuLaneMaxN] &&
                          c.batch >= pol.value[policy::kGpuLaneMinBatch]
                      ? Launch::kLane
                      : Launch::kBlock;
    return true;
  };
  for (int i = 0; i < count; ++i) {
    const KernelInfo &k = table[i];
    if (k.op != c.op || (has_kernel && !has_kernel(i))) continue;
    if (k.kind == KernelKind::kRegister && big > pol.value[policy::kGpuSmallMaxN]) continue;
    if (k.kind == KernelKind::kSimd &&
        (big > pol.value[policy::kGpuSimdMaxN] || big < pol.value[policy::kGpuSimdMinN]))
      continue;
    const bool covers =
        m == 0 || n == 0 ||  // nothing to compute: the backend only writes info
        (in_range(budget) &&
         k.fits(static_cast<int>(km), static_cast<int>(n), kf, static_cast<int>(budget)));
    if (!covers) continue;
    if (k.kind == KernelKind::kGroup) {
      if (alt && passed < 0 && m > 0 && n > 0) {
        passed = i;
        continue;
      }
      return take_group(i);
    }
    out->kernel = i;
    out->kernel_flags = kf;
    out->launch = k.kind == KernelKind::kRegister ? Launch::kRegister : Launch::kBlock;
    return true;
  }
  if (passed >= 0) return take_group(passed);
  // Beyond the shared window: the blocked algorithm, else a GROUP line with its scratch in
  // device memory.
  if (blocked_ok) return take_blocked();
  if (!has_global || m == 0 || n == 0 || big > kGlobalMaxDim ||
      big > pol.value[policy::kGpuGlobalMaxN] || c.batch < pol.value[policy::kGpuGlobalMinBatch])
    return false;
  for (int i = 0; i < count; ++i) {
    const KernelInfo &k = table[i];
    if (k.op != c.op || k.kind != KernelKind::kGroup || (has_kernel && !has_kernel(i)) ||
        !has_global(i))
      continue;
    if (!in_range(kGlobalScratchFloats) ||
        !k.fits(static_cast<int>(km), static_cast<int>(n), kf,
                static_cast<int>(kGlobalScratchFloats)))
      continue;
    out->kernel = i;
    out->kernel_flags = kf;
    out->launch = Launch::kGlobal;
    return true;
  }
  return false;
}

int64_t global_slice_floats(int64_t scratch_floats) { return (scratch_floats + 31) / 32 * 32; }

int64_t global_in_flight(int64_t batch, int64_t slice_floats) {
  const int64_t fit = kGlobalWorkspaceBytes / (std::max<int64_t>(slice_floats, 1) * 4);
  return std::max<int64_t>(1, std::min(batch, fit));
}

int64_t global_scratch_floats(const Call &c, const Plan &p, int32_t *flags) {
  int count = 0;
  const KernelInfo *table = kernel_table(&count);
  if (p.launch != Launch::kGlobal || p.kernel < 0 || p.kernel >= count || c.m <= 0 || c.n <= 0 ||
      std::max(c.m, c.n) > kGlobalMaxDim)
    return 0;
  const KernelInfo &k = table[p.kernel];
  const int m = static_cast<int>(kernel_rows(c)), n = static_cast<int>(c.n);
  const int f = k.choose_flags(m, n, p.kernel_flags, static_cast<int>(kGlobalScratchFloats));
  if (flags) *flags = f;
  return k.scratch(m, n, f);
}

int64_t global_workspace_bytes(const Call &c, const Plan &p) {
  const int64_t scratch = global_scratch_floats(c, p, nullptr);
  if (scratch <= 0 || c.batch <= 0) return 0;
  const int64_t slice = global_slice_floats(scratch);
  return slice * global_in_flight(c.batch, slice) * 4;
}

const char *gpu_plan_name(const char *backend, const Plan &p, int32_t op) {
  static thread_local std::string name;
  if (p.launch == Launch::kBlocked) {
    name = std::string(backend) + ":blocked_" + op_name(op);
    return name.c_str();
  }
  int count = 0;
  const KernelInfo *table = kernel_table(&count);
  name = std::string(backend) + ":" + (p.kernel >= 0 && p.kernel < count ? table[p.kernel].name : "?") +
         (p.launch == Launch::kLane ? "/lane" : p.launch == Launch::kGlobal ? "/global" : "");
  return name.c_str();
}

Route route(const Call &c, int32_t memory, int32_t device, const policy::Resolved &pol,
            bool for_query) {
  Route r;
  if (memory != ML_MEMORY_HOST) {
    Backend *gpu = backend_for_memory(memory);
    Plan p;
    // Device buffers never go to the CPU here; a forced CPU policy is for ml_backend only.
    if (!gpu || !gpu->available() || !gpu->plan(c, pol, device, &p)) {
      if (for_query) r.backend = &cpu_backend();
      return r;
    }
    if (for_query && pol.force != policy::Force::kGpu) {
      const bool fits = pol.force != policy::Force::kCpu &&
                        c.batch >= pol.value[policy::kGpuMinBatch] &&
                        std::max(c.m, c.n) <= pol.value[policy::kGpuMaxN];
      if (!fits) {
        r.backend = &cpu_backend();
        return r;
      }
    }
    r.backend = gpu;
    r.plan = p;
    return r;
  }
  // Host buffers of the linear systems stay with LAPACK on the CPU (the GPU backends' host
  // paths stage one input only).
  if (op_desc(c.op).info_kind == Info::kLapack) {
    r.backend = &cpu_backend();
    return r;
  }
  Backend *gpu = host_gpu_backend();
  Plan p;
  if (gpu_covers(gpu, c, pol, 0, &p)) {
    const int64_t min_work = pol.value[policy::kHostGpuMinWork];
    const bool pays = pol.force == policy::Force::kGpu ||
                      (min_work > 0 && c.batch * c.m * c.n >= min_work &&
                       c.batch >= pol.value[policy::kGpuMinBatch] &&
                       std::max(c.m, c.n) <= pol.value[policy::kGpuMaxN]);
    if (pays) {
      r.backend = gpu;
      r.plan = p;
      return r;
    }
  }
  r.backend = &cpu_backend();
  return r;
}

}  // namespace ml
