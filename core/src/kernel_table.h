// The kernels of core/kernels/kernel_table.h as the host sees them: names, ops, kinds and the
// windows the core routes by (routing.cpp). Index i is line i of the table in every backend.
#pragma once
#include <cstdint>

namespace ml {

struct KernelInfo {
  const char *name;  // "qr_householder"
  int32_t op;        // ml_op
  bool group;        // GROUP (block + lane entries) or REGISTER (lane entry, registers only)
  int (*scratch)(int m, int n, int flags);
  int (*fits)(int m, int n, int flags, int scratch_floats);
  int (*choose_flags)(int m, int n, int flags, int scratch_floats);
};

// The table, in its order; count in *n.
const KernelInfo *kernel_table(int *n);

}  // namespace ml
