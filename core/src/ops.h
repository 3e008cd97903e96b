// Names of the operations as they appear in messages, policy files and
// environment variables.
#pragma once
#include <cstdint>

#include "metal_linalg/metal_linalg.h"

namespace ml {

inline bool valid_op(int32_t op) { return op >= 0 && op < ML_OP_COUNT; }

// "qr", "eigh", "eigvalsh", "svd", "svdvals"; "?" for an invalid op.
inline const char *op_name(int32_t op) {
  static const char *const names[ML_OP_COUNT] = {"qr", "eigh", "eigvalsh", "svd", "svdvals"};
  return valid_op(op) ? names[op] : "?";
}

// Upper-case form used in environment variable names.
inline const char *op_env_name(int32_t op) {
  static const char *const names[ML_OP_COUNT] = {"QR", "EIGH", "EIGVALSH", "SVD", "SVDVALS"};
  return valid_op(op) ? names[op] : "?";
}

// Op from its lower-case name, or -1.
inline int32_t op_from_name(const char *name) {
  for (int32_t op = 0; op < ML_OP_COUNT; ++op) {
    const char *a = op_name(op);
    const char *b = name;
    while (*a && *a == *b) ++a, ++b;
    if (*a == 0 && *b == 0) return op;
  }
  return -1;
}

}  // namespace ml
