#include "checks.h"

#include <algorithm>
#include <cstdint>

#include "errors.h"
#include "ops.h"

namespace ml {
namespace {

// LAPACK indexes a matrix with 32-bit integers.
constexpr int64_t kMaxMatrixElements = INT32_MAX;

bool mul_fits(int64_t a, int64_t b, int64_t limit) { return a == 0 || b <= limit / a; }

}  // namespace

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

ml_status check_shape(const char *where, int32_t op, int64_t batch, int64_t m, int64_t n) {
  if (!valid_op(op)) return fail(ML_INVALID_ARGUMENT, where, "invalid op %d", op);
  if (batch < 0)
    return fail(ML_INVALID_ARGUMENT, where, "batch must be >= 0, got %lld",
                static_cast<long long>(batch));
  if (m <= 0 || n <= 0)
    return fail(ML_INVALID_ARGUMENT, where,
                "matrix sizes must be positive, got %lld x %lld (callers handle empty matrices)",
                static_cast<long long>(m), static_cast<long long>(n));
  if ((op == ML_OP_EIGH || op == ML_OP_EIGVALSH) && m != n)
    return fail(ML_INVALID_ARGUMENT, where, "%s needs a square matrix, got %lld x %lld",
                op_name(op), static_cast<long long>(m), static_cast<long long>(n));
  // Largest per-matrix buffer: a complete Q is m x m.
  const int64_t big = std::max(m, n);
  if (!mul_fits(m, n, kMaxMatrixElements) || !mul_fits(big, big, kMaxMatrixElements))
    return fail(ML_INVALID_ARGUMENT, where, "matrix of %lld x %lld is too large (max %lld elements)",
                static_cast<long long>(m), static_cast<long long>(n),
                static_cast<long long>(kMaxMatrixElements));
  if (!mul_fits(batch, big * big, INT64_MAX / 4))
    return fail(ML_INVALID_ARGUMENT, where, "batch %lld of %lld x %lld overflows 64-bit sizes",
                static_cast<long long>(batch), static_cast<long long>(m),
                static_cast<long long>(n));
  return ML_OK;
}

ml_status check_call(const char *where, const Call &c) {
  if (ml_status st = check_shape(where, c.op, c.batch, c.m, c.n)) return st;
  switch (c.op) {
    case ML_OP_QR:
      if (c.flags != ML_QR_REDUCED && c.flags != ML_QR_R && c.flags != ML_QR_COMPLETE)
        return fail(ML_INVALID_ARGUMENT, where,
                    "mode must be ML_QR_REDUCED (0), ML_QR_R (1) or ML_QR_COMPLETE (2), got %d",
                    c.flags);
      if (c.flags == ML_QR_R && c.out0)
        return fail(ML_INVALID_ARGUMENT, where, "q must be NULL for mode ML_QR_R");
      break;
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH:
      if (c.flags != ML_LOWER && c.flags != ML_UPPER)
        return fail(ML_INVALID_ARGUMENT, where, "uplo must be ML_LOWER (0) or ML_UPPER (1), got %d",
                    c.flags);
      break;
    case ML_OP_SVD:
      if (c.flags != 0 && c.flags != 1)
        return fail(ML_INVALID_ARGUMENT, where, "full_matrices must be 0 or 1, got %d", c.flags);
      if (c.flags == 1 && c.m != c.n)
        return fail(ML_INVALID_ARGUMENT, where,
                    "full_matrices=1 for a non-square matrix (%lld x %lld) is not implemented",
                    static_cast<long long>(c.m), static_cast<long long>(c.n));
      break;
    default: break;
  }
  // Empty batches touch no memory: their pointers may be anything.
  if (c.batch == 0) return ML_OK;
  if (!c.a) return fail(ML_INVALID_ARGUMENT, where, "a is NULL");
  const char *missing = nullptr;
  switch (c.op) {
    case ML_OP_QR:
      if (c.flags != ML_QR_R && !c.out0) missing = "q";
      if (!c.out1) missing = "r";
      break;
    case ML_OP_EIGH:
      if (!c.out0) missing = "w";
      if (!c.out1) missing = "v";
      break;
    case ML_OP_EIGVALSH:
      if (!c.out0) missing = "w";
      break;
    case ML_OP_SVD:
      if (!c.out0) missing = "u";
      if (!c.out1) missing = "s";
      if (!c.out2) missing = "vt";
      break;
    default:
      if (!c.out1) missing = "s";
      break;
  }
  if (missing) return fail(ML_INVALID_ARGUMENT, where, "%s is NULL", missing);
  return ML_OK;
}

}  // namespace ml
