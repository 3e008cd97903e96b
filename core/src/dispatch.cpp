#include "dispatch.h"

#include "checks.h"
#include "errors.h"
#include "kernel_table.h"
#include "ops.h"
#include "policy.h"
#include "routing.h"

namespace ml {
namespace {

const ml_exec kHostExec = {ML_MEMORY_HOST, 0, nullptr, nullptr, 0, {0, 0, 0, 0}};

}  // namespace

ml_status dispatch(const char *where, const ml_exec *exec_in, const Call &c) {
  clear_error();
  const ml_exec &exec = exec_in ? *exec_in : kHostExec;
  if (ml_status st = check_exec(where, exec)) return st;
  if (ml_status st = check_call(where, c)) return st;
  if (c.batch == 0) return ML_OK;
  const policy::Resolved pol = policy::resolve(c.op);
  const Route r = route(c, exec.memory, exec.device, pol, false);
  if (exec.memory == ML_MEMORY_HOST) return r.backend->run_host(c, r.plan, pol, where);
  // Device buffers run wherever a kernel covers the shape; the frontends ask ml_backend
  // first and copy to the host when it names the CPU.
  const Backend *gpu = backend_for_memory(exec.memory);
  if (!r.backend && !op_has_kernels(c.op))
    return fail(ML_INVALID_ARGUMENT, where,
                "%s has no GPU kernels yet (it runs through LAPACK on the CPU): ml_plan answers "
                "ML_MEMORY_HOST for it; pass host buffers",
                op_name(c.op));
  if (!r.backend && gpu->scratch_budget(exec.device) <= 0)
    return fail(ML_INVALID_ARGUMENT, where, "exec->device %d is not a usable %s device",
                exec.device, gpu->name());
  if (!r.backend)
    return fail(ML_INVALID_ARGUMENT, where,
                "no %s kernel covers %s of %lld x %lld (flags %d); ml_backend() names the "
                "CPU for this shape: pass host buffers",
                gpu->name(), op_name(c.op),
                static_cast<long long>(c.m), static_cast<long long>(c.n), c.flags);
  const int64_t need = r.backend->workspace_bytes(c, r.plan);
  if (need > 0 && (!exec.workspace || exec.workspace_bytes < need))
    return fail(ML_INVALID_ARGUMENT, where,
                "exec->workspace must hold %lld bytes (ml_workspace_size), got %lld",
                static_cast<long long>(need), static_cast<long long>(exec.workspace_bytes));
  return r.backend->run_device(exec, c, r.plan, where);
}

const char *backend_for(int32_t op, int32_t memory, int64_t m, int64_t n, int64_t batch,
                        int64_t nrhs) {
  clear_error();
  if (memory != ML_MEMORY_HOST && memory != ML_MEMORY_CUDA && memory != ML_MEMORY_METAL) {
    fail(ML_INVALID_ARGUMENT, "backend",
         "memory must be ML_MEMORY_HOST, ML_MEMORY_CUDA or ML_MEMORY_METAL, got %d", memory);
    return "";
  }
  if (check_shape("backend", op, batch, m, n, 0, nrhs)) return "";
  const policy::Resolved pol = policy::resolve(op);
  Call c{op, batch, m, n, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
  c.nrhs = nrhs;
  const Route r = route(c, memory, 0, pol, true);
  return r.backend->plan_name(c, r.plan, pol);
}

ml_status plan_query(const ml_exec *exec_in, const Call &c, int32_t *memory, int64_t *bytes,
                     const char **name) {
  clear_error();
  const char *where = "plan";
  if (memory) *memory = ML_MEMORY_HOST;
  if (bytes) *bytes = 0;
  if (name) *name = "";
  const ml_exec &exec = exec_in ? *exec_in : kHostExec;
  if (ml_status st = check_exec(where, exec)) return st;
  Call probe = c;
  probe.batch = c.batch < 0 ? c.batch : 0;  // sizes and flags only: no buffers to check
  if (ml_status st = check_call(where, probe)) return st;
  const policy::Resolved pol = policy::resolve(c.op);
  // The query route: device memory the policy keeps off the GPU runs on the host.
  const Route r = route(c, exec.memory, exec.device, pol, true);
  const bool on_device = exec.memory != ML_MEMORY_HOST && r.backend->memory() == exec.memory;
  if (memory) *memory = on_device ? exec.memory : ML_MEMORY_HOST;
  if (bytes && on_device && c.batch > 0) *bytes = r.backend->workspace_bytes(c, r.plan);
  if (name) *name = r.backend->plan_name(c, r.plan, pol);
  return ML_OK;
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
  if (exec.memory == ML_MEMORY_HOST || c.batch <= 0) return ML_OK;
  const Route r = route(c, exec.memory, exec.device, policy::resolve(c.op), false);
  if (r.backend) *bytes = r.backend->workspace_bytes(c, r.plan);
  return ML_OK;
}

}  // namespace ml
