#include "cpu_linsys.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace ml::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Per-thread scratch, kept between matrices up to kKeepBytes.
struct Scratch {
  std::vector<float> f;
  std::vector<int> i;
};
thread_local Scratch t_scratch;
constexpr size_t kKeepBytes = size_t(4) << 20;

float *floats(int64_t count) {
  if (static_cast<int64_t>(t_scratch.f.size()) < count) t_scratch.f.resize(size_t(count));
  return t_scratch.f.data();
}

int *ints(int64_t count) {
  if (static_cast<int64_t>(t_scratch.i.size()) < count) t_scratch.i.resize(size_t(count));
  return t_scratch.i.data();
}

// Row-major A is column-major A^T, and row-major B (n x r) is column-major B^T (r x n): the
// routines work on the column-major view of the caller's buffers where the transpose is the
// problem itself (cholesky, solve_triangular), and factor a column-major copy of A itself
// where LAPACK's info must be that of A's LU (solve, inv: torch's info).

// The column-major copy of row-major rows x cols src.
void to_column_major(const float *src, int64_t rows, int64_t cols, float *dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i + j * rows] = src[i * cols + j];
}

// The row-major copy of column-major rows x cols src.
void to_row_major(const float *src, int64_t rows, int64_t cols, float *dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i + j * rows];
}

// A = L L^T from the lower triangle (row-major) is A^T = U^T U from the column-major upper
// one, and row-major reading of that U is L: spotrf('U') in place; the upper flag likewise
// with 'L'.
int32_t cholesky(const lapack::Provider &lp, const float *a, int n, bool upper, float *l,
                 std::atomic<int> &rejected) {
  if (!finite_triangle(a, n, !upper, true)) return ML_INFO_LS_NONFINITE;
  const int64_t nn = int64_t(n) * n;
  std::copy(a, a + nn, l);
  const char uplo = upper ? 'L' : 'U';
  int info = 0;
  lp.spotrf(&uplo, &n, l, &n, &info, 1);
  if (info < 0) rejected.store(info);
  if (info != 0) return info;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (upper ? j < i : j > i) l[i * n + j] = 0.f;
  return 0;
}

// After sgetrf's info k > 0: the first exact zero on U's diagonal (LAPACK's documented info;
// a provider's blocked or recursive sgetrf may report another one), 1-based.
int first_zero_pivot(const float *lu, int n, int info) {
  for (int k = 0; k < n; ++k)
    if (lu[int64_t(k) * n + k] == 0.f) return k + 1;
  return info;
}

// A = P L U (sgetrf of the column-major copy). A X = B: sgetrs('N') on the column-major copy
// of B. X A = B is A^T X^T = B^T: sgetrs('T') on the caller's B as it lies (column-major B^T).
int32_t solve(const lapack::Provider &lp, const float *a, const float *b, int n, int r,
              bool right, float *x, std::atomic<int> &rejected) {
  const int64_t nn = int64_t(n) * n, nr = int64_t(n) * r;
  if (!finite_all(a, nn) || !finite_all(b, nr)) return ML_INFO_LS_NONFINITE;
  float *lu = floats(nn + (right ? 0 : nr));
  int *ipiv = ints(n);
  to_column_major(a, n, n, lu);
  int info = 0;
  lp.sgetrf(&n, &n, lu, &n, ipiv, &info);
  if (info < 0) rejected.store(info);
  if (info != 0) return info < 0 ? info : first_zero_pivot(lu, n, info);
  if (right) {
    std::copy(b, b + nr, x);
    lp.sgetrs("T", &n, &r, lu, &n, ipiv, x, &n, &info, 1);
  } else {
    float *t = lu + nn;
    to_column_major(b, n, r, t);
    lp.sgetrs("N", &n, &r, lu, &n, ipiv, t, &n, &info, 1);
    to_row_major(t, n, r, x);
  }
  if (info < 0) rejected.store(info);
  return info;
}

// sgetrf and sgetri of the column-major copy of A, written back row-major.
int32_t inv(const lapack::Provider &lp, const float *a, int n, int lwork, float *x,
            std::atomic<int> &rejected) {
  const int64_t nn = int64_t(n) * n;
  if (!finite_all(a, nn)) return ML_INFO_LS_NONFINITE;
  float *t = floats(nn + lwork);
  float *work = t + nn;
  int *ipiv = ints(n);
  to_column_major(a, n, n, t);
  int info = 0;
  lp.sgetrf(&n, &n, t, &n, ipiv, &info);
  if (info < 0) rejected.store(info);
  if (info != 0) return info < 0 ? info : first_zero_pivot(t, n, info);
  lp.sgetri(&n, t, &n, ipiv, work, &lwork, &info);
  if (info < 0) rejected.store(info);
  to_row_major(t, n, n, x);
  return info;
}

// A = P L U of the column-major copy of m x n A, written back row-major; pivots as LAPACK's.
// A singular matrix keeps its factorization (info: the first zero on U's diagonal).
int32_t lu_factor(const lapack::Provider &lp, const float *a, int m, int n, float *lu,
                  int32_t *pivots, std::atomic<int> &rejected) {
  const int64_t mn = int64_t(m) * n;
  const int k = std::min(m, n);
  if (!finite_all(a, mn)) {
    for (int i = 0; i < k; ++i) pivots[i] = i + 1;
    return ML_INFO_LS_NONFINITE;
  }
  float *t = floats(mn);
  int *ipiv = ints(k);
  to_column_major(a, m, n, t);
  int info = 0;
  lp.sgetrf(&m, &n, t, &m, ipiv, &info);
  if (info < 0) rejected.store(info);
  to_row_major(t, m, n, lu);
  for (int i = 0; i < k; ++i) pivots[i] = ipiv[i];
  if (info > 0)
    for (int i = 0; i < k; ++i)
      if (t[int64_t(i) * m + i] == 0.f) return i + 1;
  return info;
}

// A X = B is X^T A^T = B^T: strsm from the right on the caller's B (r x n column-major) with
// the column-major A^T, whose triangle is the other one; X A = B is A^T X^T = B^T, from the
// left. An exact zero on A's diagonal is reported as k (strtrs' info) instead of dividing.
int32_t solve_triangular(const lapack::Provider &lp, const float *a, const float *b, int n, int r,
                         int32_t flags, float *x) {
  const bool upper = flags & ML_LS_UPPER, right = flags & ML_LS_RIGHT, unit = flags & ML_LS_UNIT;
  const int64_t nr = int64_t(n) * r;
  if (!finite_triangle(a, n, !upper, !unit) || !finite_all(b, nr)) return ML_INFO_LS_NONFINITE;
  if (!unit)
    for (int k = 0; k < n; ++k)
      if (a[int64_t(k) * n + k] == 0.f) return k + 1;
  std::copy(b, b + nr, x);
  const char side = right ? 'L' : 'R', uplo = upper ? 'L' : 'U', trans = 'N',
             diag = unit ? 'U' : 'N';
  const int rows = right ? n : r, cols = right ? r : n, ldb = rows;
  const float one = 1.f;
  lp.strsm(&side, &uplo, &trans, &diag, &rows, &cols, &one, a, &n, x, &ldb, 1, 1, 1, 1);
  return 0;
}

}  // namespace

namespace {

// Whether any of count floats is NaN or +-Inf: its magnitude's bits at or above the exponent's
// all-ones (an integer compare and or per float, which the compiler vectorises; the float
// compare with a bool accumulator it did not).
int32_t nonfinite_bits(const float *p, int64_t count) {
  int32_t bad = 0;
  for (int64_t k = 0; k < count; ++k) {
    int32_t bits;
    std::memcpy(&bits, p + k, sizeof bits);
    bad |= (bits & 0x7fffffff) > 0x7f7fffff;
  }
  return bad;
}

}  // namespace

bool finite_all(const float *p, int64_t count) { return !nonfinite_bits(p, count); }

// The row-major triangle of an n x n matrix an op reads: lower (j <= i) or upper (j >= i),
// without the diagonal when !diag.
bool finite_triangle(const float *a, int64_t n, bool lower, bool diag) {
  int32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j0 = lower ? 0 : (diag ? i : i + 1), j1 = lower ? (diag ? i + 1 : i) : n;
    bad |= nonfinite_bits(a + i * n + j0, j1 - j0);
  }
  return !bad;
}


const char *linsys_missing(const lapack::Provider &lp, int32_t op) {
  switch (op) {
    case ML_OP_CHOLESKY: return lp.spotrf ? nullptr : "spotrf";
    case ML_OP_SOLVE: return !lp.sgetrf ? "sgetrf" : !lp.sgetrs ? "sgetrs" : nullptr;
    case ML_OP_INV: return !lp.sgetrf ? "sgetrf" : !lp.sgetri ? "sgetri" : nullptr;
    case ML_OP_SOLVE_TRIANGULAR: return lp.strsm ? nullptr : "strsm";
    case ML_OP_LU_FACTOR: return lp.sgetrf ? nullptr : "sgetrf";
    default: return nullptr;
  }
}

int linsys_lwork(const lapack::Provider &lp, const Call &c, int *rejected) {
  *rejected = 0;
  if (c.op != ML_OP_INV) return 1;
  const int n = static_cast<int>(c.n), minus1 = -1;
  int info = 0, ipiv = 0;
  float q = 0.f, dummy = 0.f;
  lp.sgetri(&n, &dummy, &n, &ipiv, &q, &minus1, &info);
  if (info < 0) *rejected = info;
  // The queried size, within a 32-bit int and at least the documented minimum n.
  const double v = static_cast<double>(q) + 1;
  const int64_t want = v > 0 && v < 2.0e9 ? static_cast<int64_t>(v) : 0;
  return static_cast<int>(std::max<int64_t>(want, std::max<int64_t>(n, 1)));
}

void linsys_matrix(const lapack::Provider &lp, const Call &c, int64_t i, int lwork,
                   std::atomic<int> &rejected) {
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n), r = static_cast<int>(c.nrhs);
  int64_t out_count[3];
  output_floats(c.op, c.m, c.n, c.flags, out_count, c.nrhs);
  const float *a = c.a + i * int64_t(m) * n;
  const float *b = c.b ? c.b + i * int64_t(n) * r : nullptr;
  float *x = c.out0 + i * out_count[0];
  int32_t info = 0;
  switch (c.op) {
    case ML_OP_CHOLESKY:
      info = cholesky(lp, a, n, c.flags & ML_LS_UPPER, x, rejected);
      break;
    case ML_OP_SOLVE: info = solve(lp, a, b, n, r, c.flags & ML_LS_RIGHT, x, rejected); break;
    case ML_OP_INV: info = inv(lp, a, n, lwork, x, rejected); break;
    case ML_OP_SOLVE_TRIANGULAR: info = solve_triangular(lp, a, b, n, r, c.flags, x); break;
    case ML_OP_LU_FACTOR: {
      int32_t *pivots = reinterpret_cast<int32_t *>(c.out1) + i * out_count[1];
      info = lu_factor(lp, a, m, n, x, pivots, rejected);
      break;
    }
    default: break;
  }
  // A singular matrix's LU is a factorization all the same (LAPACK's, torch's lu_factor_ex).
  const bool keep = c.op == ML_OP_LU_FACTOR && info != ML_INFO_LS_NONFINITE;
  if (info != 0 && !keep) std::fill(x, x + out_count[0], kNaN);
  if (c.info) c.info[i] = info < 0 ? 0 : info;
}

void linsys_trim_scratch() {
  if (t_scratch.f.capacity() * sizeof(float) > kKeepBytes) std::vector<float>().swap(t_scratch.f);
  if (t_scratch.i.capacity() * sizeof(int) > kKeepBytes) std::vector<int>().swap(t_scratch.i);
}

}  // namespace ml::cpu
