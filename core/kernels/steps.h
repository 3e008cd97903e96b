// The step kernels (the list itself: step_list.h): the pieces the blocked algorithms for large matrices
// (core/src/blocked*.cpp) enqueue one after another on the device queue, every operand in one
// device workspace. Generated from this list like the kernel table (kernel_table.h):
//   cuda/steps.cu        the __global__ entries ml_cuda_step_<name>,
//   metal/kernels.metal  the Metal entries ml_metal_step_<name>,
//   core/src/blocked.*   the step ids the host sequences,
//   tests/kernels        the CPU runner's list (test_blocked.cpp runs the algorithms).
// X(name, fn): fn(ctx, p, ws, a, o0, o1, o2, info) with p an ml_step_params; a and o0..o2
// are the call's input and outputs (Call in core/src/backend.h), info its info words.
// A step's groups run independently (no order between them); steps of one call run in
// enqueue order, each seeing everything the earlier ones wrote.
#ifndef ML_KERNELS_STEPS_H
#define ML_KERNELS_STEPS_H

#include "blocked_common.h"
#include "gebrd_blocked.h"
#include "gebrd_resident.h"
#include "gemm.h"
#include "larfb_cols.h"
#include "larft.h"
#include "linsys_blocked.h"
#include "qr_blocked.h"
#include "qr_panel_reg.h"
#include "qr_tsqr.h"
#include "sb2st.h"
#include "sb2st_back.h"
#include "sb2st_block.h"
#include "tridiag_steps.h"
#include "tridiag_dc.h"
#include "sytrd_blocked.h"
#include "sytrd_resident.h"

#include "step_list.h"

#endif  // ML_KERNELS_STEPS_H
