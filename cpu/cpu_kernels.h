// The portable kernels of core/kernels compiled for the CPU at group size 1:
// one matrix per call, sequential. The CPU backend uses them for small n where
// they beat LAPACK's per-call overhead (see the policy field cpu_kernel_max_n).
#pragma once
#include <cstdint>

namespace ml::cpu_kernels {
// Up to this m and n (per op) the register kernels (core/kernels/*_small.h) run instead.
int64_t small_max_n(int32_t op);
bool small(int32_t op, int64_t m, int64_t n);
// core/kernels header (without .h) the kernel of this op and shape comes from.
const char *name(int32_t op, int64_t m, int64_t n);
// Largest n (and m) each kernel accepts; 0 when the kernel does not exist yet.
int64_t max_n(int32_t op);
// One row-major matrix. Same output conventions as the C API. Returns the info word.
// work: at least scratch_floats(op, m, n) floats. max_iter: the kernels' sweep cap (0: their own).
int64_t scratch_floats(int32_t op, int64_t m, int64_t n);
int32_t run(int32_t op, int64_t m, int64_t n, int32_t flags, const float *a, float *out0,
            float *out1, float *out2, float *work, int32_t max_iter = 0);
}  // namespace ml::cpu_kernels
