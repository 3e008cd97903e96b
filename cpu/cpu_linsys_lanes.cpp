// The linear systems of small matrices across SIMD lanes: kLanes matrices of a batch are
// interleaved (entry k of lane l at t[k][l]) and factored together, each vector operation doing
// the same step for kLanes matrices. The arithmetic is LAPACK's unblocked algorithms (spotf2,
// sgetf2 with the first largest |pivot|, substitution as strsm / sgetrs), so the info words,
// pivots and failure conventions are those of cpu_linsys.cpp.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu_linsys.h"

namespace ml::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr size_t kKeepBytes = size_t(4) << 20;
constexpr int kRhsChunk = 32;  // right-hand sides per pass through the lanes

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
