// Names of the operations as they appear in messages, policy files and
// environment variables.
#pragma once
#include <algorithm>
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

// Per-matrix shape of output `index` of op (0-based, in the C function's output argument
// order: qr q, r; eigh w, v; eigvalsh w; svd u, s, vt; svdvals s): 1 (a vector of dims[0]),
// 2 (dims[0] x dims[1]) or 0 (no such output: qr mode R has no q). The one definition of the
// output sizes: the backends, ml_output_shape and the frontends (through it) use it.
inline int output_shape(int32_t op, int64_t m, int64_t n, int32_t flags, int index,
                        int64_t dims[2]) {
  const int64_t k = std::min(m, n);
  dims[0] = dims[1] = 0;
  auto mat = [dims](int64_t r, int64_t c) {
    dims[0] = r;
    dims[1] = c;
    return 2;
  };
  auto vec = [dims](int64_t len) {
    dims[0] = len;
    return 1;
  };
  switch (op) {
    case ML_OP_QR: {
      const bool complete = flags == ML_QR_COMPLETE;
      if (index == 0) return flags == ML_QR_R ? 0 : mat(m, complete ? m : k);
      if (index == 1) return mat(complete ? m : k, n);
      return 0;
    }
    case ML_OP_EIGH: return index == 0 ? vec(n) : index == 1 ? mat(n, n) : 0;
    case ML_OP_EIGVALSH: return index == 0 ? vec(n) : 0;
    case ML_OP_SVD: return index == 0 ? mat(m, k) : index == 1 ? vec(k) : index == 2 ? mat(k, n) : 0;
    case ML_OP_SVDVALS: return index == 0 ? vec(k) : 0;
    default: return 0;
  }
}

// Floats per matrix of each output of a Call, in Call's slots out0, out1, out2 (svdvals'
// s is out1).
inline void output_floats(int32_t op, int64_t m, int64_t n, int32_t flags, int64_t sz[3]) {
  for (int i = 0; i < 3; ++i) {
    int64_t d[2];
    const int nd = output_shape(op, m, n, flags, i, d);
    sz[i] = nd == 0 ? 0 : nd == 1 ? d[0] : d[0] * d[1];
  }
  if (op == ML_OP_SVDVALS) {
    sz[1] = sz[0];
    sz[0] = 0;
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
