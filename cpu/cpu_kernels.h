// The portable kernels of core/kernels compiled for the CPU at group size 1:
// one matrix per call, sequential. The CPU backend runs them where the policy says
// (policy.h: cpu_kernel_max_n, cpu_small_max_n); nothing here chooses between them.
#pragma once
#include <cstdint>

namespace ml::cpu_kernels {
// Whether op's register kernel (core/kernels/*_small.h) covers an m x n matrix.
bool small_fits(int32_t op, int64_t m, int64_t n);
// core/kernels header (without .h) of op's register kernel (small) or group kernel.
const char *name(int32_t op, bool small);
// One row-major matrix. Same output conventions as the C API. Returns the info word.
// small: the register kernel (small_fits must hold; no scratch), else the group kernel, with
// work of at least scratch_floats(op, m, n) floats. max_iter: the kernels' sweep cap (0: their
// own).
int64_t scratch_floats(int32_t op, int64_t m, int64_t n);
int32_t run(int32_t op, int64_t m, int64_t n, int32_t flags, const float *a, float *out0,
            float *out1, float *out2, float *work, bool small, int32_t max_iter = 0);
}  // namespace ml::cpu_kernels
