// The CPU backend as the core sees it (core/src/backend.h): covers every call on host
// buffers, LAPACK or the portable kernels per the policy (cpu_backend.cpp does the work).
#include "backend.h"
#include "cpu_backend.h"
#include "errors.h"
#include "lapack.h"
#include "thread_pool.h"

namespace ml {
namespace {

class CpuBackend final : public Backend {
 public:
  const char *name() const override { return "cpu"; }
  int32_t memory() const override { return ML_MEMORY_HOST; }
  bool available() const override { return true; }
  // The core names the CPU model itself (device.cpp): it is the fallback of every device.
  const char *device_name() const override { return ""; }
  int64_t scratch_budget(int32_t) const override { return 0; }
  bool plan(const Call &, const policy::Resolved &, int32_t, Plan *out) const override {
    *out = Plan{};
    return true;
  }
  const char *plan_name(const Call &c, const Plan &, const policy::Resolved &pol) const override {
    return cpu::backend_name(c.op, c.m, c.n, c.batch, pol);
  }
  int64_t workspace_bytes(const Call &, const Plan &) const override { return 0; }
  ml_status run_host(const Call &c, const Plan &, const policy::Resolved &pol,
                     const char *where) override {
    return cpu::run(c, pol, where);
  }
  ml_status run_device(const ml_exec &, const Call &, const Plan &, const char *where) override {
    return fail(ML_INVALID_ARGUMENT, where, "the CPU backend has no device memory");
  }
  void set_threads(int32_t n) override { set_cpu_threads(n); }
  int32_t threads() const override { return cpu_threads(); }
  ml_status set_lapack(const char *path, const char *prefix, const char *suffix) override {
    return lapack::set(path, prefix, suffix);
  }
  const char *lapack_info() const override { return lapack::info(); }
};

}  // namespace

Backend &cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace ml
