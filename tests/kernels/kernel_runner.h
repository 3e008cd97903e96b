// CPU runner for the portable kernels (core/kernels): executes a kernel for a batch of
// groups with one OS thread per lane, real barriers and 32-wide simd operations, so the
// kernels' parallel logic (races, barrier placement, partial simdgroups) is tested on
// machines without a GPU. Group size 1 runs sequentially in the calling thread.
#pragma once
#if defined(ML_CPU_SERIAL)
#error "kernel_runner.h needs the threaded CPU dialect (do not define ML_CPU_SERIAL)"
#endif
#include <cstdint>

#include "../../core/kernels/compat_cpu.h"

namespace ml::kernel_runner {

using Kernel = void (*)(const ml_ctx &ctx, void *user);

// Runs groups 0..groups-1 (ctx.group_id), group_size lanes each (1..1024). Each group gets
// scratch_floats floats of scratch, filled with NaN before it starts so that reads of
// never-written scratch show up in the results. The same threads serve every group.
// A barrier that is not reached by every lane within a timeout aborts the process with a
// message (a kernel with non-uniform barriers would otherwise hang the test).
void run(int group_size, int64_t groups, int64_t scratch_floats, Kernel fn, void *user);

// Seconds a lane may wait at a barrier before the runner declares a deadlock.
void set_barrier_timeout(double seconds);

}  // namespace ml::kernel_runner
