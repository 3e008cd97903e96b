// The backend interface: what the backend-neutral core (core/src) knows of a backend.
// A backend (cpu/, cuda/, metal/) is one object registered in registry.cpp; dispatch,
// policy and the queries talk to it only through this interface. The core validates
// arguments and resolves the policy first: a backend never sees invalid arguments.
#pragma once
#include <cstdint>

#include "metal_linalg/metal_linalg.h"
#include "op_table.h"
#include "policy.h"

namespace ml {

// One call as the core hands it to a backend. Pointers live in exec->memory (for Metal
// device memory: MTL::Buffer handles, see metal/metal_backend.cpp).
// Outputs by op: qr: out0 = q (may be null for ML_QR_R), out1 = r
//                eigh: out0 = w, out1 = v;  eigvalsh: out0 = w
//                svd: out0 = u, out1 = s, out2 = vt;  svdvals: out1 = s
//                cholesky, solve, inv, solve_triangular: out0 = the result
//                lu_factor: out0 = lu, out1 = pivots (int32)
// Floats per matrix of each: output_floats() (ops.h).
// flags: qr mode / eigh uplo / svd full_matrices / the linear systems' ml_ls_flag bits.
// The ops with two inputs (op_desc(op).inputs == 2) also have b, the right-hand sides
// (n x nrhs, nrhs x n under ML_LS_RIGHT); queries that take no nrhs leave it 1.
struct Call {
  int32_t op;
  int64_t batch, m, n;
  int32_t flags;
  const float *a;
  float *out0, *out1, *out2;
  int32_t *info;
  const float *b = nullptr;
  int64_t nrhs = 1;
};

// What a kernel-table entry receives for c (docs/design.md section 5.1): ml_params.m and the
// pointers a, out0, out1, out2. The ops with a right-hand side pass nrhs as m (A is n x n)
// and B in the out2 slot (their one output is out0; the table's outs code O0B); every other
// op passes the Call as it is.
struct KernelArgs {
  int64_t m;
  const float *a;
  float *out[3];
};
inline bool rhs_op(const Call &c) { return valid_op(c.op) && op_desc(c.op).inputs > 1; }
inline KernelArgs kernel_args(const Call &c) {
  if (rhs_op(c)) return {c.nrhs, c.a, {c.out0, c.out1, const_cast<float *>(c.b)}};
  return {c.m, c.a, {c.out0, c.out1, c.out2}};
}
// The m a kernel's size functions (scratch, fits, choose_flags) see for c: kernel_args' m.
inline int64_t kernel_rows(const Call &c) { return rhs_op(c) ? c.nrhs : c.m; }

// How a GPU kernel of core/kernels/kernel_table.h runs a call (routing.h decides).
enum class Launch : int32_t {
  kBlock = 0,     // a group of lanes per matrix (GROUP kernels)
  kLane = 1,      // one thread per matrix in its own slice of shared scratch (GROUP kernels)
  kRegister = 2,  // one thread per matrix in registers (REGISTER kernels)
  kGlobal = 3,    // a group of up to 1024 lanes per matrix, scratch in the caller's device
                  // workspace instead of shared memory (GROUP kernels, shapes beyond the
                  // shared window; routing.h: global_workspace_floats)
  kBlocked = 4,   // the op's blocked algorithm: a sequence of step kernels over a device
                  // workspace (core/src/blocked.h); kernel is -1
};

// The routing decision for one call on one backend.
struct Plan {
  int32_t kernel = -1;  // index into kernel_table(); -1: the CPU backend's own choice
  Launch launch = Launch::kBlock;
  int32_t kernel_flags = 0;  // ML_K_* flags the kernel runs with (before its choose_flags)
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "cuda", "metal" (ml_backend_available, the prefix of ml_backend's names).
  virtual const char *name() const = 0;
  // The ml_memory kind of this backend's device buffers (ML_MEMORY_HOST for the CPU).
  virtual int32_t memory() const = 0;
  // Built, and a device and driver are usable (checked once, cached).
  virtual bool available() const = 0;
  // Device name policies are keyed by ("NVIDIA H200", "Apple M2 Max"), "" when unavailable.
  virtual const char *device_name() const = 0;
  // Compute units of the device policies are keyed by (CUDA: multiprocessors); 0: unknown.
  virtual int32_t core_count() const { return 0; }
  // Scratch floats one group may use on `device` (GPU backends; 0 for the CPU).
  virtual int64_t scratch_budget(int32_t device) const = 0;
  // Which kernel covers c on `device` under pol, false when none (GPU backends call
  // routing::gpu_plan; the CPU covers every call).
  virtual bool plan(const Call &c, const policy::Resolved &pol, int32_t device,
                    Plan *out) const = 0;
  // ml_backend's name of a plan: "cuda:eigh_tridiag_ql/lane", "cpu:lapack".
  virtual const char *plan_name(const Call &c, const Plan &p,
                                const policy::Resolved &pol) const = 0;
  // Device workspace bytes of a device-memory call (nonzero only for global and blocked plans).
  virtual int64_t workspace_bytes(const Call &c, const Plan &p) const = 0;
  // Host buffers: runs synchronously (copies or wraps as the backend needs).
  virtual ml_status run_host(const Call &c, const Plan &p, const policy::Resolved &pol,
                             const char *where) = 0;
  // Device buffers on exec's device and queue: enqueues, no host synchronisation.
  virtual ml_status run_device(const ml_exec &exec, const Call &c, const Plan &p,
                               const char *where) = 0;
  // Host settings of the C API (the CPU backend's; others keep the defaults): threads a batch
  // may use (ml_set_cpu_threads, 0 = all cores) and the LAPACK provider (ml_set_lapack).
  virtual void set_threads(int32_t) {}
  virtual int32_t threads() const { return 0; }
  virtual ml_status set_lapack(const char *, const char *, const char *) {
    return ML_INVALID_ARGUMENT;
  }
  virtual const char *lapack_info() const { return "none"; }
};

// ---- registry (registry.cpp: the one place that knows which backends are built) ----
// The CPU backend (always present).
Backend &cpu_backend();
// Every built backend, CPU first; count in *n.
Backend *const *backends(int *n);
// The built backend named `name`, or nullptr.
Backend *backend_named(const char *name);
// The built backend whose device buffers are `memory` (not ML_MEMORY_HOST), or nullptr.
Backend *backend_for_memory(int32_t memory);
// The GPU backend host buffers may be sent to: the first available one, or nullptr.
Backend *host_gpu_backend();

}  // namespace ml
