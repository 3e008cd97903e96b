// The list of step kernels (see steps.h), alone so that host code can number the steps
// without including kernel code. X(name, fn); order is the step id (core/src/blocked.h).
#ifndef ML_KERNELS_STEP_LIST_H
#define ML_KERNELS_STEP_LIST_H

// clang-format off
#define ML_STEP_TABLE(X)                \
  X(scan, ml_step_scan)                 \
  X(load, ml_step_load)                 \
  X(eye, ml_step_eye)                   \
  X(store, ml_step_store)               \
  X(info, ml_step_info)                 \
  X(gemm, ml_step_gemm)                 \
  X(qr_panel, ml_step_qr_panel)         \
  X(larft, ml_step_larft)               \
  X(trd_update, ml_step_trd_update)     \
  X(trd_symv, ml_step_trd_symv)
// clang-format on

#endif  // ML_KERNELS_STEP_LIST_H
