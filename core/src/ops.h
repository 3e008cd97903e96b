// What the core derives from the op table (op_table.h): names, output shapes and sizes.
#pragma once
#include <cstdint>
#include <cstring>

#include "metal_linalg/metal_linalg.h"
#include "op_table.h"

namespace ml {

// "qr", "eigh", ...; "?" for an invalid op.
inline const char *op_name(int32_t op) { return valid_op(op) ? op_desc(op).name : "?"; }

// Upper-case form used in environment variable names.
inline const char *op_env_name(int32_t op) { return valid_op(op) ? op_desc(op).env : "?"; }

// Op from its name, or -1.
inline int32_t op_from_name(const char *name) {
  if (!name) return -1;
  for (int32_t op = 0; op < ML_OP_COUNT; ++op)
    if (std::strcmp(op_desc(op).name, name) == 0) return op;
  return -1;
}

// Per-matrix shape of output `index` of op (0-based, in the table's order): 1 (a vector of
// dims[0]), 2 (dims[0] x dims[1]) or 0 (no such output: qr mode R has no q). nrhs: the
// right-hand side's columns of the ops with two inputs.
inline int output_shape(int32_t op, int64_t m, int64_t n, int32_t flags, int index,
                        int64_t dims[2], int64_t nrhs = 1) {
  dims[0] = dims[1] = 0;
  if (!has_output(op, flags, index)) return 0;
  const OutputDesc &o = op_desc(op).out[index];
  dims[0] = dim_value(o.rows, m, n, flags, nrhs);
  if (o.cols == Dim::kNone) return 1;
  dims[1] = dim_value(o.cols, m, n, flags, nrhs);
  return 2;
}

// Whether an output of op has a dimension of the right-hand side's (nrhs).
inline bool output_uses_nrhs(int32_t op, int index) {
  if (!valid_op(op) || index < 0 || index >= op_desc(op).outputs) return false;
  const OutputDesc &o = op_desc(op).out[index];
  const auto rhs = [](Dim d) { return d == Dim::kRhsRows || d == Dim::kRhsCols; };
  return rhs(o.rows) || rhs(o.cols);
}

// Elements per matrix of each output of a Call, in Call's slots out0, out1, out2.
inline void output_floats(int32_t op, int64_t m, int64_t n, int32_t flags, int64_t sz[3],
                          int64_t nrhs = 1) {
  sz[0] = sz[1] = sz[2] = 0;
  if (!valid_op(op)) return;
  for (int i = 0; i < op_desc(op).outputs; ++i) {
    int64_t d[2];
    const int nd = output_shape(op, m, n, flags, i, d, nrhs);
    sz[op_desc(op).out[i].slot] = nd == 0 ? 0 : nd == 1 ? d[0] : d[0] * d[1];
  }
}

// Name of a memory kind in messages ("ML_MEMORY_CUDA"), "?" for others.
inline const char *memory_name(int32_t memory) {
  switch (memory) {
    case ML_MEMORY_HOST: return "ML_MEMORY_HOST";
    case ML_MEMORY_CUDA: return "ML_MEMORY_CUDA";
    case ML_MEMORY_METAL: return "ML_MEMORY_METAL";
    default: return "?";
  }
}

}  // namespace ml
