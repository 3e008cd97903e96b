// The linear systems of small matrices across SIMD lanes: kLanes matrices of a batch are
// interleaved (entry k of lane l at t[k][l]) and factored together, each vector operation doing
// the same step for kLanes matrices. The arithmetic is LAPACK's unblocked algorithms (spotf2,
// sgetf2 with the first largest |pivot|, substitution as strsm / sgetrs), so the info words,
// pivots and failure conventions are those of cpu_linsys.cpp.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu_linsys.h"

namespace ml::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr size_t kKeepBytes = size_t(4) << 20;
constexpr int kRhsChunk = 32;  // right-hand sides per pass through the lanes

bool finite_all(const float *p, int64_t count) {
  bool ok = true;
  for (int64_t k = 0; k < count; ++k) ok &= std::fabs(p[k]) <= FLT_MAX;
  return ok;
}

bool finite_triangle(const float *a, int64_t n, bool lower, bool diag) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j0 = lower ? 0 : (diag ? i : i + 1), j1 = lower ? (diag ? i + 1 : i) : n;
    for (int64_t j = j0; j < j1; ++j) ok &= std::fabs(a[i * n + j]) <= FLT_MAX;
  }
  return ok;
}

}  // namespace

// GCC vector extensions: without AVX the 8-lane vectors are pairs of SSE registers.
namespace lanes_base {
namespace {
#include "cpu_linsys_lanes.inc"
}  // namespace
}  // namespace lanes_base

// x86-64 with GCC: the same code for AVX2 and FMA (contracted multiply-adds), chosen at run
// time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ML_LANES_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("fp-contract=fast")
namespace lanes_avx2 {
namespace {
#include "cpu_linsys_lanes.inc"
}  // namespace
}  // namespace lanes_avx2
#pragma GCC pop_options
#endif

void linsys_lanes(const Call &c, int64_t first) {
#ifdef ML_LANES_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) {
    lanes_avx2::group(c, first);
    lanes_avx2::trim();
    return;
  }
#endif
  lanes_base::group(c, first);
  lanes_base::trim();
}

}  // namespace ml::cpu
