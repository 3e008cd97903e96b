// What the CUDA host runtime (cuda_backend.cu) knows of each entry point of cuda/kernels.cu:
// one KernelDesc per line of core/kernels/kernel_table.h, in table order.
#pragma once
#include <cstdint>

#include "../core/kernels/params.h"

namespace ml::cuda {

// Every __global__ entry has this signature; outputs a kernel does not produce are null.
// Outputs follow ml::Call: qr (q, r), eigh (w, v), eigvalsh (w), svd (u, s, vt), svdvals (-, s).
using EntryFn = void (*)(ml_params, const float *, float *, float *, float *, int *);
// A global entry takes the device workspace too: block b's scratch is ws + b * ws_stride.
using GlobalEntryFn = void (*)(ml_params, const float *, float *, float *, float *, int *,
                               float *ws, ml_i64 ws_stride);

struct KernelDesc {
  const char *name;
  // Block entry (ML_CUDA_ENTRY_CONTEXT: blockDim = (threads, groups)); null for REGISTER lines.
  // SIMD lines have only this one (threads = 32, or 16 as sub-warp groups).
  EntryFn entry;
  // Lane-per-matrix entry (ML_CUDA_LANE_ENTRY_CONTEXT: one thread per matrix, blockDim =
  // (1, matrices per block)); REGISTER lines have only this one, SIMD lines none.
  EntryFn lane_entry;
  // Threads per group (launch_config.h), null for REGISTER lines.
  int (*group_size)(int m, int n, int64_t batch, int units);
  // Global entry (ML_CUDA_GLOBAL_ENTRY_CONTEXT: blockDim = (threads, 1), scratch in the
  // caller's workspace); GROUP lines only, null for the others.
  GlobalEntryFn global_entry;
};

// The table in order (cuda/kernels.cu); count in *n.
const KernelDesc *kernels(int *n);

// A step kernel's entry (cuda/steps.cu): (params, workspace, a, out0, out1, out2, info).
using StepFn = void (*)(ml_step_params, float *, const float *, float *, float *, float *, int *);
// The step kernels in step order (core/kernels/step_list.h); count in *n.
const StepFn *steps(int *n);

}  // namespace ml::cuda
