// A persistent pool of std::threads that spreads the matrices of a batch over
// the cores, one matrix per task. The calling thread works too.
#pragma once
#include <cstdint>

namespace ml {

// Threads a batch may use: ml_set_cpu_threads, else METAL_LINALG_CPU_THREADS,
// else every core.
int32_t cpu_threads();
// n = 0 restores the default.
void set_cpu_threads(int32_t n);

// Runs task(i) for i in [0, count) on up to cpu_threads() threads and returns
// when all are done. task must not throw. While another caller's batch occupies
// the pool the batch runs on the calling thread alone, so concurrent callers
// never wait on each other.
void parallel_for(int64_t count, void (*task)(void *ctx, int64_t i), void *ctx);

}  // namespace ml
