// CPU runner for the portable kernels (core/kernels): executes a kernel for a batch of groups
// with every lane its own flow of control (its own stack), real barriers and 32-wide simd
// operations, so the kernels' parallel logic (races, barrier placement, partial simdgroups) is
// tested on machines without a GPU. Group size 1 runs sequentially in the calling thread.
//
// Where the lanes run (set_workers, or the environment variable ML_KERNEL_RUNNER):
//  - fibers (the default, ML_KERNEL_RUNNER=1): user-space stacks on the calling thread,
//    switched at every barrier, simd op and poll of a shared word (ml_load_acquire_*). Each
//    lane runs to its next such point in turn, the lanes' order reversed from one turn to the
//    next, so a value read without the barrier that should order it after its write comes out
//    wrong (NaN scratch, stale data) in one of the two orders;
//  - fibers on n threads (ML_KERNEL_RUNNER=n, 2..64): the same, the lanes dealt out to n OS
//    threads that run at once (whole simdgroups in turn; a group of one simdgroup split in
//    two), so lanes of a group also race for real;
//  - threads (ML_KERNEL_RUNNER=threads, and always under ThreadSanitizer or where fibers are not
//    implemented, i.e. outside x86-64 Linux): a fresh OS thread per lane, for ThreadSanitizer.
// Every mode gives the same results to the bit for a kernel free of races.
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
// never-written scratch show up in the results. The same lanes serve every group.
// A barrier that is not reached by every lane aborts the process with a message (a kernel
// with non-uniform barriers would otherwise hang the test): at once where the lanes share one
// thread, after the barrier timeout otherwise. Calls from several threads at once run
// independently (each calling thread keeps its own fibers and worker threads).
void run(int group_size, int64_t groups, int64_t scratch_floats, Kernel fn, void *user);

// Seconds a lane may wait at a barrier before the runner declares a deadlock.
void set_barrier_timeout(double seconds);

// The mode of later runs: 0 a thread per lane, n >= 1 fibers on n threads (see above; 0
// wherever fibers are not implemented). workers(): the mode in effect.
void set_workers(int n);
int workers();

}  // namespace ml::kernel_runner
