// The kernels of core/kernels/kernel_table.h as the host sees them: names, ops, kinds and the
// windows the core routes by (routing.cpp). Index i is line i of the table in every backend.
#pragma once
#include <cstdint>

namespace ml {

// The kind of a table line (core/kernels/kernel_table.h).
enum class KernelKind : int32_t {
  kGroup = 0,     // block entry (a group per matrix) + lane entry (a thread per matrix)
  kRegister = 1,  // lane entry only: a thread per matrix in registers
  kSimd = 2,      // block entry only: one simdgroup per matrix in registers
};

struct KernelInfo {
  const char *name;  // "qr_householder"
  int32_t op;        // ml_op
  KernelKind kind;
  int (*scratch)(int m, int n, int flags);
  int (*fits)(int m, int n, int flags, int scratch_floats);
  int (*choose_flags)(int m, int n, int flags, int scratch_floats);
};

// The table, in its order; count in *n.
const KernelInfo *kernel_table(int *n);

// Whether the table has a line of op (ml_op_kernels): an op without one runs on the CPU only.
bool op_has_kernels(int32_t op);

}  // namespace ml
