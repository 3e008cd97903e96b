#include "checks.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "errors.h"
#include "ops.h"

namespace ml {
namespace {

// 32-bit LAPACK addresses every array (and its workspace) with int indices.
constexpr int64_t kLapackMax = INT32_MAX;

bool mul_fits(int64_t a, int64_t b, int64_t limit) { return a == 0 || b <= limit / a; }

// Saturating a * b for positive sizes (the callers compare the result with kLapackMax).
int64_t mul_sat(int64_t a, int64_t b) { return mul_fits(a, b, INT64_MAX) ? a * b : INT64_MAX; }

// A size formula evaluated in double (exact far beyond kLapackMax), saturated to int64.
int64_t sat(double v) { return v >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(v); }

}  // namespace

LapackSizes lapack_sizes(int32_t op, int32_t flags, int64_t m, int64_t n, int64_t nrhs) {
  const int64_t k = std::min(m, n), big = std::max(m, n);
  const double kd = static_cast<double>(k), nd = static_cast<double>(n);
  const double bigd = static_cast<double>(big);
  LapackSizes s{};
  switch (op) {
    case ML_OP_QR:
      // The column-major copy of A, widened to m x m when a complete Q is formed in it.
      s.array = mul_sat(m, flags == ML_QR_COMPLETE ? big : n);
      s.array_what = flags == ML_QR_COMPLETE ? "the m x max(m, n) array of a complete Q" : "A";
      s.min_lwork = flags == ML_QR_COMPLETE ? big : n;  // sgeqrf: n; sorgqr: Q's columns
      break;
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH:
      s.array = mul_sat(n, n);
      s.array_what = "A";
      // ssyevd (jobz = 'V'): 1 + 6n + 2n^2; eigenvalues only: 2n + 1.
      s.min_lwork = sat(op == ML_OP_EIGH ? 1 + 6 * nd + 2 * nd * nd : 2 * nd + 1);
      break;
    case ML_OP_SVD:
      s.array = mul_sat(m, n);
      s.array_what = "A";
      // sgesdd (jobz = 'S'): 4k^2 + 7k, plus max(m, n) on the path without a QR first.
      s.min_lwork = sat(4 * kd * kd + 7 * kd + bigd);
      break;
    case ML_OP_SVDVALS:
      s.array = mul_sat(m, n);
      s.array_what = "A";
      // sgesdd (jobz = 'N'): 3k + max(max(m, n), 7k); sgebrd + slasq1 need less.
      s.min_lwork = sat(3 * kd + std::max(bigd, 7 * kd));
      break;
    case ML_OP_SOLVE:
    case ML_OP_SOLVE_TRIANGULAR:
      // A (n x n) and the right-hand sides (n x nrhs), each its own array.
      s.array = std::max(mul_sat(n, n), mul_sat(n, nrhs));
      s.array_what = mul_sat(n, nrhs) > mul_sat(n, n) ? "B" : "A";
      s.min_lwork = 0;
      break;
    default:  // cholesky (spotrf), inv (sgetrf; sgetri: a workspace of n), lu_factor (sgetrf)
      s.array = mul_sat(m, n);
      s.array_what = "A";
      s.min_lwork = op == ML_OP_INV ? n : 0;
      break;
  }
  return s;
}

ml_status check_exec(const char *where, const ml_exec &exec) {
  for (int i = 0; i < 4; ++i)
    if (exec.reserved[i] != 0)
      return fail(ML_INVALID_ARGUMENT, where, "exec->reserved[%d] must be zero", i);
  if (exec.memory == ML_MEMORY_HOST) return ML_OK;
  if (exec.memory == ML_MEMORY_CUDA || exec.memory == ML_MEMORY_METAL) {
    const Backend *b = backend_for_memory(exec.memory);
    if (!b || !b->available())
      return fail(ML_INVALID_ARGUMENT, where, "exec->memory is %s but the %s backend is %s",
                  memory_name(exec.memory), exec.memory == ML_MEMORY_CUDA ? "CUDA" : "Metal",
                  b ? "not usable (no device or driver)" : "not built into this library");
    if (exec.device < 0)
      return fail(ML_INVALID_ARGUMENT, where, "exec->device must be >= 0, got %d", exec.device);
    if (exec.workspace_bytes < 0)
      return fail(ML_INVALID_ARGUMENT, where, "exec->workspace_bytes must be >= 0");
    return ML_OK;
  }
  return fail(ML_INVALID_ARGUMENT, where,
              "exec->memory must be ML_MEMORY_HOST (0), ML_MEMORY_CUDA (1) or ML_MEMORY_METAL (2), "
              "got %d",
              exec.memory);
}

ml_status check_lapack_sizes(const char *where, int32_t op, int32_t flags, int64_t m, int64_t n,
                             int64_t nrhs) {
  const LapackSizes s = lapack_sizes(op, flags, m, n, nrhs);
  if (s.array > kLapackMax)
    return fail(ML_INVALID_ARGUMENT, where,
                "%s of %lld x %lld: %s would have %lld elements, more than 32-bit LAPACK "
                "addresses (%lld)",
                op_name(op), static_cast<long long>(m), static_cast<long long>(n), s.array_what,
                static_cast<long long>(s.array), static_cast<long long>(kLapackMax));
  if (s.min_lwork > kLapackMax)
    return fail(ML_INVALID_ARGUMENT, where,
                "%s of %lld x %lld needs a LAPACK workspace of at least %lld floats, more than "
                "32-bit LAPACK addresses (%lld)",
                op_name(op), static_cast<long long>(m), static_cast<long long>(n),
                static_cast<long long>(s.min_lwork), static_cast<long long>(kLapackMax));
  return ML_OK;
}

ml_status check_shape(const char *where, int32_t op, int64_t batch, int64_t m, int64_t n,
                      int32_t flags, int64_t nrhs) {
  if (!valid_op(op)) return fail(ML_INVALID_ARGUMENT, where, "invalid op %d", op);
  const OpDesc &d = op_desc(op);
  if (batch < 0)
    return fail(ML_INVALID_ARGUMENT, where, "batch must be >= 0, got %lld",
                static_cast<long long>(batch));
  if (m <= 0 || n <= 0)
    return fail(ML_INVALID_ARGUMENT, where,
                "matrix sizes must be positive, got %lld x %lld (callers handle empty matrices)",
                static_cast<long long>(m), static_cast<long long>(n));
  if (d.square && m != n)
    return fail(ML_INVALID_ARGUMENT, where, "%s needs a square matrix, got %lld x %lld",
                op_name(op), static_cast<long long>(m), static_cast<long long>(n));
  if (d.inputs > 1 && nrhs <= 0)
    return fail(ML_INVALID_ARGUMENT, where,
                "nrhs (the right-hand side's columns, sizes[3]) must be positive, got %lld",
                static_cast<long long>(nrhs));
  if (ml_status st = check_lapack_sizes(where, op, flags, m, n, nrhs)) return st;
  // The largest per-matrix buffer the call reads or writes, times batch, in 64-bit bytes.
  int64_t per = std::max(mul_sat(m, n), d.inputs > 1 ? mul_sat(n, nrhs) : 0);
  for (int i = 0; i < d.outputs; ++i) {
    int64_t dims[2];
    const int nd = output_shape(op, m, n, flags, i, dims, nrhs);
    if (nd > 0) per = std::max(per, nd == 1 ? dims[0] : mul_sat(dims[0], dims[1]));
  }
  if (!mul_fits(batch, per, INT64_MAX / 4))
    return fail(ML_INVALID_ARGUMENT, where, "batch %lld of %lld x %lld overflows 64-bit sizes",
                static_cast<long long>(batch), static_cast<long long>(m),
                static_cast<long long>(n));
  return ML_OK;
}

ml_status check_flags(const char *where, int32_t op, int64_t m, int64_t n, int32_t flags) {
  const OpDesc &d = op_desc(op);
  const FlagKindDesc &k = flag_kind_desc(d.flag_kind);
  if (k.bits != 0) {
    if ((flags & ~k.bits) == 0) return ML_OK;
    // "flags must be 0 or a combination of ML_LS_UPPER (1), ML_LS_RIGHT (2), ..., got 9"
    std::string allowed;
    for (int32_t bit = 1; bit <= k.bits; bit <<= 1) {
      if (!(k.bits & bit)) continue;
      if (!allowed.empty()) allowed += ", ";
      allowed += std::string(ls_flag_name(bit)) + " (" + std::to_string(bit) + ")";
    }
    return fail(ML_INVALID_ARGUMENT, where, "%s of %s must be 0 or a bitwise or of %s, got %d",
                k.arg, d.name, allowed.c_str(), flags);
  }
  if (flags < 0 || flags >= k.count) {
    // "mode must be ML_QR_REDUCED (0), ML_QR_R (1) or ML_QR_COMPLETE (2), got 7"
    std::string allowed;
    for (int v = 0; v < k.count; ++v) {
      if (v > 0) allowed += v + 1 == k.count ? " or " : ", ";
      allowed += k.values[v];
      if (std::strcmp(k.values[v], std::to_string(v).c_str()) != 0)
        allowed += " (" + std::to_string(v) + ")";
    }
    return fail(ML_INVALID_ARGUMENT, where, "%s must be %s, got %d", k.arg, allowed.c_str(),
                flags);
  }
  if (flags == d.square_flag && m != n)
    return fail(ML_INVALID_ARGUMENT, where,
                "%s=%s for a non-square matrix (%lld x %lld) is not implemented", k.arg,
                k.values[flags], static_cast<long long>(m), static_cast<long long>(n));
  return ML_OK;
}

ml_status check_call(const char *where, const Call &c) {
  if (ml_status st = check_shape(where, c.op, c.batch, c.m, c.n, c.flags, c.nrhs)) return st;
  if (ml_status st = check_flags(where, c.op, c.m, c.n, c.flags)) return st;
  const OpDesc &d = op_desc(c.op);
  float *const slots[3] = {c.out0, c.out1, c.out2};
  for (int i = 0; i < d.outputs; ++i)
    if (!has_output(c.op, c.flags, i) && slots[d.out[i].slot])
      return fail(ML_INVALID_ARGUMENT, where, "%s must be NULL for %s %s", d.out[i].name,
                  flag_kind_desc(d.flag_kind).arg, flag_kind_desc(d.flag_kind).values[c.flags]);
  // Empty batches touch no memory: their pointers may be anything.
  if (c.batch == 0) return ML_OK;
  if (!c.a) return fail(ML_INVALID_ARGUMENT, where, "a is NULL");
  if (d.inputs > 1 && !c.b) return fail(ML_INVALID_ARGUMENT, where, "b is NULL");
  for (int i = 0; i < d.outputs; ++i)
    if (has_output(c.op, c.flags, i) && !slots[d.out[i].slot])
      return fail(ML_INVALID_ARGUMENT, where, "%s is NULL", d.out[i].name);
  // Host buffers are read as floats and int32s; CUDA ones likewise by the kernels.
  const struct {
    const void *p;
    const char *name;
  } bufs[] = {{c.a, "a"}, {c.b, "b"}, {c.out0, "first output"}, {c.out1, "second output"},
              {c.out2, "third output"}, {c.info, "info"}};
  for (const auto &b : bufs)
    if (reinterpret_cast<uintptr_t>(b.p) % 4 != 0)
      return fail(ML_INVALID_ARGUMENT, where, "%s (%p) is not aligned to 4 bytes", b.name, b.p);
  return ML_OK;
}

}  // namespace ml
