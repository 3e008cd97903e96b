// The linear systems of small matrices across SIMD lanes: kLanes matrices of a batch are
// interleaved (entry k of lane l at t[k][l]) and factored together, each vector operation doing
// the same step for kLanes matrices. The arithmetic is LAPACK's unblocked algorithms (spotf2,
// sgetf2 with the first largest |pivot|, substitution as strsm / sgetrs), so the info words,
// pivots and failure conventions are those of cpu_linsys.cpp.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_linsys.h"

namespace ml::cpu {
namespace {

typedef float V __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t VI __attribute__((vector_size(kLanes * sizeof(float))));

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline V splat(float x) { return V{} + x; }
inline VI splat_i(int32_t x) { return VI{} + x; }
inline V vabs(V x) { return reinterpret_cast<V>(reinterpret_cast<VI>(x) & 0x7fffffff); }

thread_local std::vector<V> t_lanes;
constexpr size_t kKeepBytes = size_t(4) << 20;

V *lane_scratch(int64_t count) {
  if (static_cast<int64_t>(t_lanes.size()) < count) t_lanes.resize(size_t(count));
  return t_lanes.data();
}

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

// Lane l of rows x cols t from row-major src, transposed when trans (t then cols x rows); a
// missing lane (src null) gets zeros and, where diag, ones on the diagonal.
void load(V *t, int l, const float *src, int rows, int cols, bool trans, bool diag) {
  if (!src) {
    for (int64_t k = 0; k < int64_t(rows) * cols; ++k) t[k][l] = 0.f;
    if (diag)
      for (int k = 0; k < std::min(rows, cols); ++k) t[int64_t(k) * cols + k][l] = 1.f;
  } else if (!trans) {
    for (int64_t k = 0; k < int64_t(rows) * cols; ++k) t[k][l] = src[k];
  } else {
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) t[int64_t(j) * rows + i][l] = src[int64_t(i) * cols + j];
  }
}

void store(const V *t, int l, float *dst, int64_t count) {
  for (int64_t k = 0; k < count; ++k) dst[k] = t[k][l];
}

// spotf2 on the lower triangle of row-major n x n t, in place; the strict upper triangle
// becomes 0. info[l]: the order of the first non-positive (or NaN) leading minor.
void cholesky_lanes(V *t, int n, int32_t *info) {
  const V one = splat(1.f), zero = splat(0.f);
  for (int j = 0; j < n; ++j) {
    V *rj = t + int64_t(j) * n;
    V d = rj[j];
    for (int k = 0; k < j; ++k) d -= rj[k] * rj[k];
    const VI bad = !(d > zero);  // NaN too
    for (int l = 0; l < kLanes; ++l)
      if (bad[l] && !info[l]) info[l] = j + 1;
    d = bad ? one : d;  // a failed lane goes on harmlessly; its output is discarded
    V root;
    for (int l = 0; l < kLanes; ++l) root[l] = std::sqrt(d[l]);
    rj[j] = root;
    const V r = one / root;
    for (int i = j + 1; i < n; ++i) {
      V *ri = t + int64_t(i) * n;
      V x = ri[j];
      for (int k = 0; k < j; ++k) x -= ri[k] * rj[k];
      ri[j] = x * r;
    }
    for (int k = j + 1; k < n; ++k) rj[k] = zero;
  }
}

// sgetf2 on row-major m x n t in place: the pivot is the first entry of largest |.| in the
// column (isamax), rows swapped per lane, a zero pivot leaves its column unscaled. piv[k][l]:
// the row (0-based) swapped with k, k < min(m, n). info[l]: the first zero on U's diagonal.
void lu_lanes(V *t, int m, int n, VI *piv, int32_t *info) {
  const int kmin = std::min(m, n);
  const V zero = splat(0.f), one = splat(1.f);
  for (int k = 0; k < kmin; ++k) {
    V best = vabs(t[int64_t(k) * n + k]);
    VI at = splat_i(k);
    for (int i = k + 1; i < m; ++i) {
      const V v = vabs(t[int64_t(i) * n + k]);
      const VI more = v > best;
      best = more ? v : best;
      at = more ? splat_i(i) : at;
    }
    piv[k] = at;
    for (int l = 0; l < kLanes; ++l) {
      const int p = at[l];
      if (p != k)
        for (int j = 0; j < n; ++j) std::swap(t[int64_t(k) * n + j][l], t[int64_t(p) * n + j][l]);
    }
    V *rk = t + int64_t(k) * n;
    const VI zp = rk[k] == zero;
    for (int l = 0; l < kLanes; ++l)
      if (zp[l] && !info[l]) info[l] = k + 1;
    const V r = zp ? one : one / rk[k];
    for (int i = k + 1; i < m; ++i) {
      V *ri = t + int64_t(i) * n;
      const V lik = ri[k] * r;
      ri[k] = lik;
      for (int j = k + 1; j < n; ++j) ri[j] -= lik * rk[j];
    }
  }
}

// In place on row-major n x r b: L U X = P B (left) from lu_lanes' n x n t and piv.
void lu_solve_left(const V *t, const VI *piv, int n, int r, V *b) {
  for (int k = 0; k < n; ++k)
    for (int l = 0; l < kLanes; ++l) {
      const int p = piv[k][l];
      if (p != k)
        for (int j = 0; j < r; ++j) std::swap(b[int64_t(k) * r + j][l], b[int64_t(p) * r + j][l]);
    }
  for (int i = 1; i < n; ++i)  // unit lower L
    for (int k = 0; k < i; ++k) {
      const V lik = t[int64_t(i) * n + k];
      for (int j = 0; j < r; ++j) b[int64_t(i) * r + j] -= lik * b[int64_t(k) * r + j];
    }
  for (int i = n - 1; i >= 0; --i) {  // U
    for (int k = i + 1; k < n; ++k) {
      const V uik = t[int64_t(i) * n + k];
      for (int j = 0; j < r; ++j) b[int64_t(i) * r + j] -= uik * b[int64_t(k) * r + j];
    }
    const V d = splat(1.f) / t[int64_t(i) * n + i];
    for (int j = 0; j < r; ++j) b[int64_t(i) * r + j] *= d;
  }
}

// In place on row-major r x n b: X A = B with A = P L U is (X P) L U = B: W U = B, Z L = W,
// then X = Z P^T (column swaps in reverse order).
void lu_solve_right(const V *t, const VI *piv, int n, int r, V *b) {
  for (int i = 0; i < r; ++i) {
    V *bi = b + int64_t(i) * n;
    for (int j = 0; j < n; ++j) {  // w U = b
      V x = bi[j];
      for (int k = 0; k < j; ++k) x -= bi[k] * t[int64_t(k) * n + j];
      bi[j] = x / t[int64_t(j) * n + j];
    }
    for (int j = n - 2; j >= 0; --j) {  // z L = w, L unit lower
      V x = bi[j];
      for (int k = j + 1; k < n; ++k) x -= bi[k] * t[int64_t(k) * n + j];
      bi[j] = x;
    }
    for (int k = n - 1; k >= 0; --k)
      for (int l = 0; l < kLanes; ++l) {
        const int p = piv[k][l];
        if (p != k) std::swap(bi[k][l], bi[p][l]);
      }
  }
}

// strsm's substitution on row-major b (left: n x r, A X = B; right: r x n, X A = B) with the
// triangle of row-major n x n a that flags name; the caller has checked the diagonal.
void triangular_lanes(const V *a, int n, int r, int32_t flags, V *b) {
  const bool upper = flags & ML_LS_UPPER, right = flags & ML_LS_RIGHT, unit = flags & ML_LS_UNIT;
  const V one = splat(1.f);
  if (!right) {
    for (int s = 0; s < n; ++s) {
      const int i = upper ? n - 1 - s : s;
      const int k0 = upper ? i + 1 : 0, k1 = upper ? n : i;
      V *bi = b + int64_t(i) * r;
      for (int k = k0; k < k1; ++k) {
        const V aik = a[int64_t(i) * n + k];
        const V *bk = b + int64_t(k) * r;
        for (int j = 0; j < r; ++j) bi[j] -= aik * bk[j];
      }
      if (!unit) {
        const V d = one / a[int64_t(i) * n + i];
        for (int j = 0; j < r; ++j) bi[j] *= d;
      }
    }
    return;
  }
  for (int i = 0; i < r; ++i) {
    V *bi = b + int64_t(i) * n;
    for (int s = 0; s < n; ++s) {
      const int j = upper ? s : n - 1 - s;
      const int k0 = upper ? 0 : j + 1, k1 = upper ? j : n;
      V x = bi[j];
      for (int k = k0; k < k1; ++k) x -= bi[k] * a[int64_t(k) * n + j];
      bi[j] = unit ? x : x / a[int64_t(j) * n + j];
    }
  }
}

}  // namespace

void linsys_lanes(const Call &c, int64_t first) {
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n), r = static_cast<int>(c.nrhs);
  const int count = static_cast<int>(std::min<int64_t>(kLanes, c.batch - first));
  int64_t out_count[3];
  output_floats(c.op, c.m, c.n, c.flags, out_count, c.nrhs);
  const int64_t mn = int64_t(m) * n, nr = int64_t(n) * r;
  const bool upper = c.flags & ML_LS_UPPER, unit = c.flags & ML_LS_UNIT;
  int32_t info[kLanes] = {};
  // The lanes an op reads, checked: a non-finite one computes on the identity instead.
  const float *a[kLanes] = {}, *b[kLanes] = {};
  for (int l = 0; l < count; ++l) {
    const float *al = c.a + (first + l) * mn;
    const float *bl = c.b ? c.b + (first + l) * nr : nullptr;
    bool ok;
    switch (c.op) {
      case ML_OP_CHOLESKY: ok = finite_triangle(al, n, !upper, true); break;
      case ML_OP_SOLVE_TRIANGULAR:
        ok = finite_triangle(al, n, !upper, !unit) && finite_all(bl, nr);
        if (ok && !unit)
          for (int k = 0; k < n; ++k)
            if (al[int64_t(k) * n + k] == 0.f) {
              info[l] = k + 1;
              break;
            }
        break;
      case ML_OP_SOLVE: ok = finite_all(al, mn) && finite_all(bl, nr); break;
      default: ok = finite_all(al, mn); break;
    }
    if (!ok) info[l] = ML_INFO_LS_NONFINITE;
    if (!info[l]) a[l] = al, b[l] = bl;
  }
  const int rb = c.op == ML_OP_INV ? n : r;  // inv solves A X = I
  const int64_t nb = c.op == ML_OP_SOLVE || c.op == ML_OP_SOLVE_TRIANGULAR || c.op == ML_OP_INV
                         ? int64_t(n) * rb
                         : 0;
  V *t = lane_scratch(mn + nb + std::min(m, n));
  V *x = t + mn;
  VI *piv = reinterpret_cast<VI *>(x + nb);
  const bool right = c.flags & ML_LS_RIGHT;
  for (int l = 0; l < kLanes; ++l) {
    // Cholesky of the upper triangle: A^T's lower one, U = L^T.
    load(t, l, a[l], m, n, c.op == ML_OP_CHOLESKY && upper, true);
    if (c.op == ML_OP_INV) load(x, l, nullptr, n, n, false, true);
    else if (nb) load(x, l, b[l], right ? r : n, right ? n : r, false, false);
  }
  switch (c.op) {
    case ML_OP_CHOLESKY: cholesky_lanes(t, n, info); break;
    case ML_OP_LU_FACTOR: lu_lanes(t, m, n, piv, info); break;
    case ML_OP_SOLVE:
    case ML_OP_INV:
      lu_lanes(t, n, n, piv, info);
      if (right && c.op == ML_OP_SOLVE) lu_solve_right(t, piv, n, r, x);
      else lu_solve_left(t, piv, n, rb, x);
      break;
    case ML_OP_SOLVE_TRIANGULAR: triangular_lanes(t, n, r, c.flags, x); break;
    default: break;
  }
  for (int l = 0; l < count; ++l) {
    const int64_t i = first + l;
    float *o = c.out0 + i * out_count[0];
    if (c.op == ML_OP_LU_FACTOR) {
      int32_t *p = reinterpret_cast<int32_t *>(c.out1) + i * out_count[1];
      const bool nonfinite = info[l] == ML_INFO_LS_NONFINITE;
      for (int k = 0; k < std::min(m, n); ++k) p[k] = nonfinite ? k + 1 : piv[k][l] + 1;
      if (nonfinite) std::fill(o, o + out_count[0], kNaN);
      else store(t, l, o, mn);  // a singular matrix keeps its factorization
    } else if (info[l]) {
      std::fill(o, o + out_count[0], kNaN);
    } else if (c.op == ML_OP_CHOLESKY && upper) {
      for (int ii = 0; ii < n; ++ii)
        for (int j = 0; j < n; ++j) o[int64_t(ii) * n + j] = t[int64_t(j) * n + ii][l];
    } else {
      store(c.op == ML_OP_CHOLESKY ? t : x, l, o, out_count[0]);
    }
    if (c.info) c.info[i] = info[l];
  }
  if (t_lanes.capacity() * sizeof(V) > kKeepBytes) std::vector<V>().swap(t_lanes);
}

}  // namespace ml::cpu
