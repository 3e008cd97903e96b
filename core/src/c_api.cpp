// The exported C functions: thin wrappers that turn C arguments into a Call and
// keep C++ exceptions from crossing the C boundary.
#include <new>
#include <string>

#include "backend.h"
#include "checks.h"
#include "device.h"
#include "dispatch.h"
#include "errors.h"
#include "kernel_table.h"
#include "metal_linalg/metal_linalg.h"
#include "ops.h"
#include "policy.h"

#ifndef ML_VERSION_STRING
#define ML_VERSION_STRING "0.0.0"
#endif

namespace {

template <class F>
ml_status guarded(const char *where, F &&f) {
  try {
    return f();
  } catch (const std::bad_alloc &) {
    return ml::fail(ML_OUT_OF_MEMORY, where, "out of memory");
  } catch (const std::exception &e) {
    return ml::fail(ML_RUNTIME_ERROR, where, "internal error: %s", e.what());
  } catch (...) {
    return ml::fail(ML_RUNTIME_ERROR, where, "internal error");
  }
}

// A Call from ml_run's arguments: outputs in the table's order go to their Call slots.
ml_status run(const ml_exec *exec, int32_t op, const float *const *inputs, const int64_t *sizes,
              int32_t flags, float *const *outputs, int32_t *info) {
  ml::clear_error();
  if (!ml::valid_op(op)) return ml::fail(ML_INVALID_ARGUMENT, "run", "invalid op %d", op);
  const ml::OpDesc &d = ml::op_desc(op);
  if (!inputs || !sizes || !outputs)
    return ml::fail(ML_INVALID_ARGUMENT, d.name, "inputs, sizes or outputs is NULL");
  float *slot[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < d.outputs; ++i) slot[d.out[i].slot] = outputs[i];
  ml::Call c{op, sizes[0], sizes[1], sizes[2], flags, inputs[0], slot[0], slot[1], slot[2],
             info};
  if (d.inputs > 1) {
    c.b = inputs[1];
    c.nrhs = sizes[3];
  }
  return guarded(d.name, [&] { return ml::dispatch(d.name, exec, c); });
}

// A Call of ml_run's sizes without buffers (queries): nrhs from sizes[3] for two inputs.
ml::Call sizes_call(int32_t op, const int64_t *sizes, int32_t flags) {
  ml::Call c{op, sizes[0], sizes[1], sizes[2], flags, nullptr, nullptr, nullptr, nullptr,
             nullptr};
  if (ml::valid_op(op) && ml::op_desc(op).inputs > 1) c.nrhs = sizes[3];
  return c;
}

}  // namespace

extern "C" {

ML_API ml_status ml_run(const ml_exec *exec, int32_t op, const float *const *inputs,
                        const int64_t *sizes, int32_t flags, float *const *outputs,
                        int32_t *info) {
  return run(exec, op, inputs, sizes, flags, outputs, info);
}

ML_API ml_status ml_qr(const ml_exec *exec, const float *a, int64_t batch, int64_t m, int64_t n,
                       int32_t mode, float *q, float *r, int32_t *info) {
  const int64_t sizes[3] = {batch, m, n};
  float *const out[] = {q, r};
  return run(exec, ML_OP_QR, &a, sizes, mode, out, info);
}

ML_API ml_status ml_eigh(const ml_exec *exec, const float *a, int64_t batch, int64_t n,
                         int32_t uplo, float *w, float *v, int32_t *info) {
  const int64_t sizes[3] = {batch, n, n};
  float *const out[] = {w, v};
  return run(exec, ML_OP_EIGH, &a, sizes, uplo, out, info);
}

ML_API ml_status ml_eigvalsh(const ml_exec *exec, const float *a, int64_t batch, int64_t n,
                             int32_t uplo, float *w, int32_t *info) {
  const int64_t sizes[3] = {batch, n, n};
  float *const out[] = {w};
  return run(exec, ML_OP_EIGVALSH, &a, sizes, uplo, out, info);
}

ML_API ml_status ml_svd(const ml_exec *exec, const float *a, int64_t batch, int64_t m, int64_t n,
                        int32_t full_matrices, float *u, float *s, float *vt, int32_t *info) {
  const int64_t sizes[3] = {batch, m, n};
  float *const out[] = {u, s, vt};
  return run(exec, ML_OP_SVD, &a, sizes, full_matrices, out, info);
}

ML_API ml_status ml_svdvals(const ml_exec *exec, const float *a, int64_t batch, int64_t m,
                            int64_t n, float *s, int32_t *info) {
  const int64_t sizes[3] = {batch, m, n};
  float *const out[] = {s};
  return run(exec, ML_OP_SVDVALS, &a, sizes, 0, out, info);
}

ML_API ml_status ml_cholesky(const ml_exec *exec, const float *a, int64_t batch, int64_t n,
                             int32_t flags, float *l, int32_t *info) {
  const int64_t sizes[3] = {batch, n, n};
  float *const out[] = {l};
  return run(exec, ML_OP_CHOLESKY, &a, sizes, flags, out, info);
}

ML_API ml_status ml_solve(const ml_exec *exec, const float *a, const float *b, int64_t batch,
                          int64_t n, int64_t nrhs, int32_t flags, float *x, int32_t *info) {
  const int64_t sizes[4] = {batch, n, n, nrhs};
  const float *const in[] = {a, b};
  float *const out[] = {x};
  return run(exec, ML_OP_SOLVE, in, sizes, flags, out, info);
}

ML_API ml_status ml_inv(const ml_exec *exec, const float *a, int64_t batch, int64_t n, float *x,
                        int32_t *info) {
  const int64_t sizes[3] = {batch, n, n};
  float *const out[] = {x};
  return run(exec, ML_OP_INV, &a, sizes, 0, out, info);
}

ML_API ml_status ml_solve_triangular(const ml_exec *exec, const float *a, const float *b,
                                     int64_t batch, int64_t n, int64_t nrhs, int32_t flags,
                                     float *x, int32_t *info) {
  const int64_t sizes[4] = {batch, n, n, nrhs};
  const float *const in[] = {a, b};
  float *const out[] = {x};
  return run(exec, ML_OP_SOLVE_TRIANGULAR, in, sizes, flags, out, info);
}

ML_API ml_status ml_lu_factor(const ml_exec *exec, const float *a, int64_t batch, int64_t m,
                              int64_t n, float *lu, int32_t *pivots, int32_t *info) {
  const int64_t sizes[3] = {batch, m, n};
  float *const out[] = {lu, reinterpret_cast<float *>(pivots)};
  return run(exec, ML_OP_LU_FACTOR, &a, sizes, 0, out, info);
}

ML_API ml_status ml_plan(const ml_exec *exec, int32_t op, const int64_t *sizes, int32_t flags,
                         int32_t *memory, int64_t *workspace_bytes, const char **name) {
  ml::clear_error();
  if (!sizes) return ml::fail(ML_INVALID_ARGUMENT, "plan", "sizes is NULL");
  return guarded("plan", [&] {
    return ml::plan_query(exec, sizes_call(op, sizes, flags), memory, workspace_bytes, name);
  });
}

ML_API int32_t ml_op_inputs(int32_t op) { return ml::valid_op(op) ? ml::op_desc(op).inputs : 0; }

ML_API int32_t ml_op_kernels(int32_t op) {
  try {
    return ml::valid_op(op) && ml::op_has_kernels(op) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

ML_API int32_t ml_op_linear_system(int32_t op) {
  return ml::valid_op(op) && ml::op_desc(op).info_kind == ml::Info::kLapack ? 1 : 0;
}

ML_API ml_status ml_output_dims(int32_t op, const int64_t *sizes, int32_t flags, int32_t index,
                                int32_t *ndim, int64_t dims[2]) {
  ml::clear_error();
  const char *where = "output_dims";
  if (!ndim || !dims || !sizes)
    return ml::fail(ML_INVALID_ARGUMENT, where, "sizes, ndim or dims is NULL");
  *ndim = 0;
  dims[0] = dims[1] = 0;
  ml::Call probe = sizes_call(op, sizes, flags);
  probe.batch = 0;  // shapes only: no buffers to check
  if (ml_status st = ml::check_call(where, probe)) return st;
  if (index < 0) return ml::fail(ML_INVALID_ARGUMENT, where, "index must be >= 0, got %d", index);
  *ndim = ml::output_shape(op, probe.m, probe.n, flags, index, dims, probe.nrhs);
  return ML_OK;
}

ML_API int32_t ml_op_count(void) { return ML_OP_COUNT; }

ML_API const char *ml_op_name(int32_t op) {
  return ml::valid_op(op) ? ml::op_desc(op).name : nullptr;
}

ML_API int32_t ml_op_by_name(const char *name) { return ml::op_from_name(name); }

ML_API int32_t ml_output_count(int32_t op) {
  return ml::valid_op(op) ? ml::op_desc(op).outputs : 0;
}

ML_API ml_status ml_output_desc(int32_t op, int32_t flags, int32_t index, const char **name,
                                int32_t *ndim, char dims[2], int32_t *dtype) {
  ml::clear_error();
  const char *where = "output_desc";
  if (!ndim) return ml::fail(ML_INVALID_ARGUMENT, where, "ndim is NULL");
  *ndim = 0;
  if (dims) dims[0] = dims[1] = 0;
  if (!ml::valid_op(op)) return ml::fail(ML_INVALID_ARGUMENT, where, "invalid op %d", op);
  if (ml_status st = ml::check_flags(where, op, 1, 1, flags)) return st;
  if (index < 0) return ml::fail(ML_INVALID_ARGUMENT, where, "index must be >= 0, got %d", index);
  if (!ml::has_output(op, flags, index)) return ML_OK;
  const ml::OutputDesc &o = ml::op_desc(op).out[index];
  *ndim = o.cols == ml::Dim::kNone ? 1 : 2;
  if (dims) {
    dims[0] = ml::dim_symbol(o.rows, flags);
    dims[1] = ml::dim_symbol(o.cols, flags);
  }
  if (name) *name = o.name;
  if (dtype) *dtype = o.dtype;
  return ML_OK;
}

ML_API ml_status ml_workspace_size(const ml_exec *exec, int32_t op, int64_t batch, int64_t m,
                                   int64_t n, int32_t flags, int64_t *bytes) {
  return guarded("workspace_size", [&] {
    ml::Call c{op, batch, m, n, flags, nullptr, nullptr, nullptr, nullptr, nullptr};
    return ml::workspace_size(exec, c, bytes);
  });
}

ML_API ml_status ml_output_shape(int32_t op, int64_t m, int64_t n, int32_t flags, int32_t index,
                                 int32_t *ndim, int64_t dims[2]) {
  ml::clear_error();
  const char *where = "output_shape";
  if (!ndim || !dims) return ml::fail(ML_INVALID_ARGUMENT, where, "ndim or dims is NULL");
  *ndim = 0;
  dims[0] = dims[1] = 0;
  const ml::Call probe{op, 0, m, n, flags, nullptr, nullptr, nullptr, nullptr, nullptr};
  if (ml_status st = ml::check_call(where, probe)) return st;
  if (index < 0) return ml::fail(ML_INVALID_ARGUMENT, where, "index must be >= 0, got %d", index);
  if (ml::output_uses_nrhs(op, index))
    return ml::fail(ML_INVALID_ARGUMENT, where,
                    "%s's output %s depends on the right-hand side's columns: use ml_output_dims",
                    ml::op_name(op), ml::op_desc(op).out[index].name);
  *ndim = ml::output_shape(op, m, n, flags, index, dims);
  return ML_OK;
}

ML_API const char *ml_last_error(void) { return ml::last_error(); }

ML_API int32_t ml_api_version(void) { return ML_API_VERSION; }

ML_API const char *ml_version_string(void) { return ML_VERSION_STRING; }

ML_API ml_status ml_take_warnings(char *buf, size_t buf_len, size_t *needed) {
  return guarded("take_warnings", [&] { return ml::take_warnings(buf, buf_len, needed); });
}

ML_API int32_t ml_pending_warnings(void) { return ml::pending_warnings(); }

ML_API ml_status ml_set_iteration_cap(int32_t cap) {
  ml::clear_error();
  if (cap < 0)
    return ml::fail(ML_INVALID_ARGUMENT, "set_iteration_cap", "cap must be >= 0, got %d", cap);
  ml::policy::set_iteration_cap(cap);
  return ML_OK;
}

ML_API const char *ml_device_name(void) {
  try {
    return ml::device_name();
  } catch (...) {
    return "unknown";
  }
}

ML_API int32_t ml_backend_available(const char *backend) {
  try {
    const ml::Backend *b = ml::backend_named(backend);
    return b && b->available() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

ML_API const char *ml_backend(int32_t op, int32_t memory, int64_t m, int64_t n, int64_t batch) {
  try {
    return ml::backend_for(op, memory, m, n, batch);
  } catch (...) {
    ml::fail(ML_RUNTIME_ERROR, "backend", "internal error");
    return "";
  }
}

ML_API const char *ml_backend_rhs(int32_t op, int32_t memory, int64_t n, int64_t nrhs,
                                  int64_t batch) {
  try {
    if (ml::valid_op(op) && ml::op_desc(op).inputs < 2) {
      ml::fail(ML_INVALID_ARGUMENT, "backend_rhs", "%s takes no right-hand side (ml_backend)",
               ml::op_name(op));
      return "";
    }
    return ml::backend_for(op, memory, n, n, batch, nrhs);
  } catch (...) {
    ml::fail(ML_RUNTIME_ERROR, "backend_rhs", "internal error");
    return "";
  }
}

ML_API ml_status ml_policy_get(int32_t op, char *buf, size_t buf_len, size_t *needed) {
  ml::clear_error();
  return guarded("policy_get", [&] { return ml::policy::get(op, buf, buf_len, needed); });
}

ML_API ml_status ml_policy_set(int32_t op, const char *field, int64_t value) {
  ml::clear_error();
  return guarded("policy_set", [&] { return ml::policy::set(op, field, value); });
}

ML_API ml_status ml_policy_reset(int32_t op) {
  ml::clear_error();
  return guarded("policy_reset", [&] { return ml::policy::reset(op); });
}

ML_API const char *ml_policy_source(int32_t op) {
  try {
    return ml::policy::source(op);
  } catch (...) {
    return "";
  }
}

ML_API const char *ml_calibration_status(int32_t op) {
  try {
    return ml::policy::calibration_status(op);
  } catch (...) {
    return "";
  }
}

ML_API const char *ml_policy_file(void) {
  try {
    return ml::policy::file();
  } catch (...) {
    return "";
  }
}

ML_API ml_status ml_policy_reload(void) {
  ml::clear_error();
  return guarded("policy_reload", [&] { return ml::policy::reload(); });
}

ML_API ml_status ml_set_cpu_threads(int32_t n) {
  ml::clear_error();
  if (n < 0) return ml::fail(ML_INVALID_ARGUMENT, "set_cpu_threads", "n must be >= 0, got %d", n);
  ml::cpu_backend().set_threads(n);
  return ML_OK;
}

ML_API int32_t ml_get_cpu_threads(void) { return ml::cpu_backend().threads(); }

ML_API ml_status ml_set_lapack(const char *path, const char *prefix, const char *suffix) {
  ml::clear_error();
  if (!path || !*path) return ml::fail(ML_INVALID_ARGUMENT, "set_lapack", "path is NULL or empty");
  return guarded("set_lapack", [&] { return ml::cpu_backend().set_lapack(path, prefix, suffix); });
}

ML_API const char *ml_lapack_info(void) {
  try {
    return ml::cpu_backend().lapack_info();
  } catch (...) {
    return "none";
  }
}

ML_API void ml_set_cpu_only(int32_t on) { ml::policy::set_cpu_only(on != 0); }

ML_API int32_t ml_cpu_only(void) { return ml::policy::cpu_only() ? 1 : 0; }

ML_API int32_t ml_gpu_core_count(void) {
  try {
    const ml::Backend *gpu = ml::host_gpu_backend();
    return gpu ? gpu->core_count() : 0;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
