// The host copy of core/kernels/kernel_table.h: the kernels' ML_HOST_FN size functions are the
// same integer code in every dialect, compiled here as plain C++.
#define ML_CPU_SERIAL 1
#include "kernel_table.h"

#include "../kernels/compat_cpu.h"
#include "../kernels/kernel_table.h"
#include "metal_linalg/metal_linalg.h"

namespace ml {
namespace {

#define ML_KT_GROUP KernelKind::kGroup
#define ML_KT_REGISTER KernelKind::kRegister
#define ML_KT_SIMD KernelKind::kSimd
#define ML_KT_ROW(name, op, fn, outs, kind, scratch, fits, choose) \
  {#name, op, ML_KT_##kind, scratch, fits, choose},
const KernelInfo kTable[] = {ML_KERNEL_TABLE(ML_KT_ROW)};
#undef ML_KT_ROW

}  // namespace

const KernelInfo *kernel_table(int *n) {
  *n = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));
  return kTable;
}

bool op_has_kernels(int32_t op) {
  for (const KernelInfo &k : kTable)
    if (k.op == op) return true;
  return false;
}

}  // namespace ml
