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

// c with the op's GPU launch policy filled in (Call::small_max_n, lane_max_n, lane_min_batch).
Call with_gpu_policy(const Call &c, const policy::Resolved &pol) {
  Call g = c;
  g.small_max_n = pol.value[policy::kGpuSmallMaxN];
  g.lane_max_n = pol.value[policy::kGpuLaneMaxN];
  g.lane_min_batch = pol.value[policy::kGpuLaneMinBatch];
  return g;
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
    return cuda::run_device(exec, with_gpu_policy(c, pol));
  }
  if (host_gpu_kernel(c, pol)) return cuda::run_host(with_gpu_policy(c, pol));
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
    name = std::string("cuda:") + cuda::launch_name(with_gpu_policy(c, pol));
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
