// The core alone, from C: microseconds of process CPU time per ml_run (checks, routing, the
// kernel) and per ml_plan (checks and routing, no kernel) of one op on preallocated host buffers. call_overhead.py
// --breakdown builds and runs it against the torch package's libmetal_linalg.so:
//
//   c++ -O2 -std=c++17 -Icore/include benchmarks/call_overhead_core.cpp LIB -o core_bench
//   ./core_bench CALLS REPEATS BATCHxNxN...
//
// Prints one line per op and size: "<op> <batch>x<n>x<n> <ml_run us> <ml_plan us> <backend>",
// each the best of REPEATS rounds of CALLS calls.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "metal_linalg/metal_linalg.h"

namespace {

// CPU time of the whole process: a batch the core spreads over its worker threads counts them.
double cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s CALLS REPEATS BATCHxNxN...\n", argv[0]);
    return 2;
  }
  const int calls = std::atoi(argv[1]), repeats = std::atoi(argv[2]);
  if (calls < 1 || repeats < 1) {
    std::fprintf(stderr, "CALLS and REPEATS must be positive\n");
    return 2;
  }
  std::mt19937 gen(0);
  std::normal_distribution<float> normal;
  for (int arg = 3; arg < argc; ++arg) {
    long long batch = 0, m = 0, n = 0;
    if (std::sscanf(argv[arg], "%lldx%lldx%lld", &batch, &m, &n) != 3 || batch < 1 || m < 1 ||
        m != n) {
      std::fprintf(stderr, "expected BATCHxNxN with a positive batch, got %s\n", argv[arg]);
      return 2;
    }
    // A symmetric input serves every op (eigh reads one triangle).
    std::vector<float> a(batch * n * n);
    for (long long b = 0; b < batch; ++b)
      for (long long i = 0; i < n; ++i)
        for (long long j = 0; j <= i; ++j)
          a[(b * n + i) * n + j] = a[(b * n + j) * n + i] = normal(gen);
    std::vector<float> out[3];
    for (auto &o : out) o.resize(batch * n * n);
    const int64_t sizes[3] = {batch, n, n};
    const float *inputs[1] = {a.data()};
    for (int op = 0; op < ml_op_count(); ++op) {
      float *outputs[3] = {nullptr, nullptr, nullptr};
      for (int i = 0; i < ml_output_count(op) && i < 3; ++i) outputs[i] = out[i].data();
      double run = 1e300, plan = 1e300;
      for (int r = 0; r < repeats; ++r) {
        const double t0 = cpu_us();
        for (int i = 0; i < calls; ++i) {
          if (ml_run(nullptr, op, inputs, sizes, 0, outputs, nullptr) != ML_OK) {
            std::fprintf(stderr, "%s: %s\n", ml_op_name(op), ml_last_error());
            return 1;
          }
        }
        const double t1 = cpu_us();
        for (int i = 0; i < calls; ++i) ml_plan(nullptr, op, sizes, 0, nullptr, nullptr, nullptr);
        const double t2 = cpu_us();
        run = std::min(run, (t1 - t0) / calls);
        plan = std::min(plan, (t2 - t1) / calls);
      }
      std::printf("%s %lldx%lldx%lld %.3f %.3f %s\n", ml_op_name(op), batch, n, n, run, plan,
                  ml_backend(op, ML_MEMORY_HOST, n, n, batch));
    }
  }
  return 0;
}
