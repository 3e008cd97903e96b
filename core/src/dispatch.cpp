#include "dispatch.h"

#include <algorithm>
#include <string>

#include "checks.h"
#include "cpu_backend.h"
#include "device.h"
#include "errors.h"
#include "ops.h"
#include "policy.h"

namespace ml {
namespace {

const ml_exec kHostExec = {ML_MEMORY_HOST, 0, nullptr, nullptr, 0, {0, 0, 0, 0}};

#if defined(ML_WITH_CUDA)
// GPU kernel for host buffers when the policy says the copies pay off.
const char *host_gpu_kernel(const Call &c, const policy::Resolved &pol) {
  if (pol.force == policy::Force::kCpu || !cuda::available()) return nullptr;
  const char *kernel =
      cuda::kernel_for(c.op, c.m, c.n, c.flags, pol.value[policy::kGpuSmallMaxN]);
  if (!kernel) return nullptr;
  if (pol.force == policy::Force::kGpu) return kernel;
  const int64_t min_work = pol.value[policy::kHostGpuMinWork];
  const bool pays = min_work > 0 && c.batch * c.m * c.n >= min_work &&
                    c.batch >= pol.value[policy::kGpuMinBatch] &&
                    std::max(c.m, c.n) <= pol.value[policy::kGpuMaxN];
  return pays ? kernel : nullptr;
}

// GPU kernel for device buffers; null means the caller should use the CPU.
const char *device_gpu_kernel(const Call &c, const policy::Resolved &pol) {
  if (pol.force == policy::Force::kCpu || !cuda::available()) return nullptr;
  const char *kernel =
      cuda::kernel_for(c.op, c.m, c.n, c.flags, pol.value[policy::kGpuSmallMaxN]);
  if (!kernel || pol.force == policy::Force::kGpu) return kernel;
  const bool fits = c.batch >= pol.value[policy::kGpuMinBatch] &&
                    std::max(c.m, c.n) <= pol.value[policy::kGpuMaxN];
  return fits ? kernel : nullptr;
}

// Launch shape for a GPU call: one lane per matrix for large batches of tiny matrices.
int32_t gpu_variant(const Call &c, const policy::Resolved &pol) {
  return std::max(c.m, c.n) <= pol.value[policy::kGpuLaneMaxN] &&
                 c.batch >= pol.value[policy::kGpuLaneMinBatch] &&
                 cuda::has_lane_variant(c.op, c.m, c.n, c.flags,
                                        pol.value[policy::kGpuSmallMaxN])
             ? 1
             : 0;
}
#endif

}  // namespace

ml_status dispatch(const char *where, const ml_exec *exec_in, const Call &c) {
  clear_error();
  const ml_exec &exec = exec_in ? *exec_in : kHostExec;
  if (ml_status st = check_exec(where, exec)) return st;
  if (ml_status st = check_call(where, c)) return st;
  if (c.batch == 0) return ML_OK;
  const policy::Resolved pol = policy::resolve(c.op);
#if defined(ML_WITH_CUDA)
  if (exec.memory == ML_MEMORY_CUDA) {
    // Device buffers run wherever a kernel covers the shape; the frontends ask
    // ml_backend first and copy to the host when it names the CPU.
    if (!cuda::kernel_for(c.op, c.m, c.n, c.flags, pol.value[policy::kGpuSmallMaxN]))
      return fail(ML_INVALID_ARGUMENT, where,
                  "no CUDA kernel covers %s of %lld x %lld (flags %d); ml_backend() names the "
                  "CPU for this shape: pass host buffers",
                  op_name(c.op), static_cast<long long>(c.m), static_cast<long long>(c.n),
                  c.flags);
    const int64_t need = cuda::workspace_bytes(c);
    if (need > 0 && (!exec.workspace || exec.workspace_bytes < need))
      return fail(ML_INVALID_ARGUMENT, where,
                  "exec->workspace must hold %lld bytes (ml_workspace_size), got %lld",
                  static_cast<long long>(need), static_cast<long long>(exec.workspace_bytes));
    Call gc = c;
    gc.variant = gpu_variant(c, pol);
    gc.small_max_n = static_cast<int32_t>(
        std::min<int64_t>(pol.value[policy::kGpuSmallMaxN], int64_t{1} << 30));
    return cuda::run_device(exec, gc);
  }
  if (host_gpu_kernel(c, pol)) {
    Call gc = c;
    gc.variant = gpu_variant(c, pol);
    gc.small_max_n = static_cast<int32_t>(
        std::min<int64_t>(pol.value[policy::kGpuSmallMaxN], int64_t{1} << 30));
    return cuda::run_host(gc);
  }
#endif
  return cpu::run(c, pol, where);
}

const char *backend_for(int32_t op, int32_t memory, int64_t m, int64_t n, int64_t batch) {
  clear_error();
  if (memory != ML_MEMORY_HOST && memory != ML_MEMORY_CUDA) {
    fail(ML_INVALID_ARGUMENT, "backend", "memory must be ML_MEMORY_HOST or ML_MEMORY_CUDA, got %d",
         memory);
    return "";
  }
  if (check_shape("backend", op, batch, m, n)) return "";
  const policy::Resolved pol = policy::resolve(op);
#if defined(ML_WITH_CUDA)
  Call c{op, batch, m, n, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
  const char *kernel =
      memory == ML_MEMORY_CUDA ? device_gpu_kernel(c, pol) : host_gpu_kernel(c, pol);
  if (kernel) {
    static thread_local std::string name;
    name = std::string("cuda:") + kernel + (gpu_variant(c, pol) ? "/lane" : "");
    return name.c_str();
  }
#endif
  return cpu::backend_name(op, m, n, pol);
}

ml_status workspace_size(const ml_exec *exec_in, const Call &c, int64_t *bytes) {
  clear_error();
  const char *where = "workspace_size";
  if (!bytes) return fail(ML_INVALID_ARGUMENT, where, "bytes is NULL");
  *bytes = 0;
  const ml_exec &exec = exec_in ? *exec_in : kHostExec;
  if (ml_status st = check_exec(where, exec)) return st;
  Call probe = c;
  probe.batch = c.batch < 0 ? c.batch : 0;  // sizes and flags only: no buffers to check
  if (ml_status st = check_call(where, probe)) return st;
#if defined(ML_WITH_CUDA)
  if (exec.memory == ML_MEMORY_CUDA && c.batch > 0 &&
      cuda::kernel_for(c.op, c.m, c.n, c.flags,
                       policy::resolve(c.op).value[policy::kGpuSmallMaxN]))
    *bytes = cuda::workspace_bytes(c);
#endif
  return ML_OK;
}

}  // namespace ml
