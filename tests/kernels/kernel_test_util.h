// Shared helpers for the kernel tests: matrix families, LAPACK-style ratios in double, Jacobi
// references in double / long double, and a tiny check/report harness.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../core/kernels/params.h"  // ml_params, ML_INFO_*
#include "accuracy.h"  // kUlp and the thresholds

namespace kt {

// Kernel arguments the tests pass through the runner's void *user (outputs a launch does not
// produce are null).
struct QrArgs {
  ml_params p;
  const float *a;
  float *q, *r;
  int *info;
};
struct EigArgs {
  ml_params p;
  const float *a;
  float *w, *v;
  int *info;
};
struct SvdArgs {
  ml_params p;
  const float *a;
  float *u, *s, *vt;
  int *info;
};

// ---- reporting ----
struct Report {
  int checks = 0, failures = 0;
  double worst = 0;  // worst ratio seen
  std::string worst_where;
  void ratio(double r, double limit, const std::string &where) {
    ++checks;
    if (std::isfinite(r) && r > worst) {
      worst = r;
      worst_where = where;
    }
    if (!(r <= limit)) {
      ++failures;
      if (failures <= 40) std::printf("FAIL %s: ratio %.3g > %.3g\n", where.c_str(), r, limit);
    }
  }
  void expect(bool ok, const std::string &where) {
    ++checks;
    if (!ok) {
      ++failures;
      if (failures <= 40) std::printf("FAIL %s\n", where.c_str());
    }
  }
};

// Prints the wall time of a scope when KT_TIMING is set (to keep the suites' run time in check).
struct Timer {
  const char *what;
  int m, n, gs;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  Timer(const char *w, int m_, int n_, int gs_) : what(w), m(m_), n(n_), gs(gs_) {}
  ~Timer() {
    if (!std::getenv("KT_TIMING")) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("time %s %dx%d gs=%d: %.3f s\n", what, m, n, gs, s);
  }
};

inline bool all_nan(const float *p, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!std::isnan(p[i])) return false;
  return true;
}
inline bool all_finite(const float *p, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// ---- dense double matrices (row-major) ----
struct Mat {
  int r = 0, c = 0;
  std::vector<double> v;
  Mat() = default;
  Mat(int r_, int c_) : r(r_), c(c_), v(size_t(r_) * c_, 0.0) {}
  double &operator()(int i, int j) { return v[size_t(i) * c + j]; }
  double operator()(int i, int j) const { return v[size_t(i) * c + j]; }
};

inline Mat matmul(const Mat &a, const Mat &b) {
  Mat o(a.r, b.c);
  for (int i = 0; i < a.r; ++i)
    for (int k = 0; k < a.c; ++k) {
      const double x = a(i, k);
      if (x == 0) continue;
      for (int j = 0; j < b.c; ++j) o(i, j) += x * b(k, j);
    }
  return o;
}
inline Mat transpose(const Mat &a) {
  Mat o(a.c, a.r);
  for (int i = 0; i < a.r; ++i)
    for (int j = 0; j < a.c; ++j) o(j, i) = a(i, j);
  return o;
}
// LAPACK's matrix 1-norm (max column sum).
inline double norm1(const Mat &a) {
  double best = 0;
  for (int j = 0; j < a.c; ++j) {
    double s = 0;
    for (int i = 0; i < a.r; ++i) s += std::fabs(a(i, j));
    best = std::max(best, s);
  }
  return best;
}
inline Mat from_float(const float *p, int r, int c) {
  Mat o(r, c);
  for (size_t i = 0; i < o.v.size(); ++i) o.v[i] = p[i];
  return o;
}
inline Mat identity(int n) {
  Mat o(n, n);
  for (int i = 0; i < n; ++i) o(i, i) = 1;
  return o;
}
// ||I - X^T X||_1 for X with orthonormal columns.
inline double orth_defect(const Mat &x) {
  Mat g = matmul(transpose(x), x);
  for (int i = 0; i < g.r; ++i) g(i, i) -= 1.0;
  return norm1(g);
}

// ---- random orthogonal matrices and families ----
inline Mat gaussian(std::mt19937_64 &rng, int r, int c) {
  std::normal_distribution<double> nd;
  Mat o(r, c);
  for (double &x : o.v) x = nd(rng);
  return o;
}
// Orthogonal n x n from modified Gram-Schmidt (twice) on a Gaussian matrix.
inline Mat random_orthogonal(std::mt19937_64 &rng, int n) {
  Mat g = gaussian(rng, n, n);
  for (int pass = 0; pass < 2; ++pass)
    for (int j = 0; j < n; ++j) {
      for (int k = 0; k < j; ++k) {
        double d = 0;
        for (int i = 0; i < n; ++i) d += g(i, k) * g(i, j);
        for (int i = 0; i < n; ++i) g(i, j) -= d * g(i, k);
      }
      double s = 0;
      for (int i = 0; i < n; ++i) s += g(i, j) * g(i, j);
      s = std::sqrt(s);
      for (int i = 0; i < n; ++i) g(i, j) /= s;
    }
  return g;
}
// Q diag(d) Q^T.
inline Mat with_spectrum(std::mt19937_64 &rng, const std::vector<double> &d) {
  const int n = int(d.size());
  Mat q = random_orthogonal(rng, n), o(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += q(i, k) * d[k] * q(j, k);
      o(i, j) = s;
    }
  return o;
}
// U diag(s) V^T with m x n shape.
inline Mat with_singular_values(std::mt19937_64 &rng, int m, int n, const std::vector<double> &s) {
  Mat u = random_orthogonal(rng, m), v = random_orthogonal(rng, n), o(m, n);
  const int k = std::min(m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double t = 0;
      for (int l = 0; l < k; ++l) t += u(i, l) * s[l] * v(j, l);
      o(i, j) = t;
    }
  return o;
}

// Spectra of LAPACK's latms modes (values in [ulp, 1]), plus repeated/rank-deficient.
inline std::vector<double> spectrum(const std::string &kind, int n, std::mt19937_64 &rng) {
  std::vector<double> d(n);
  const double u = kUlp;
  for (int i = 0; i < n; ++i) {
    const double t = n > 1 ? double(i) / (n - 1) : 0.0;
    if (kind == "clustered") d[i] = i == 0 ? 1.0 : u;                       // 1, ulp, ..., ulp
    else if (kind == "clustered1") d[i] = i == n - 1 ? u : 1.0;             // 1, ..., 1, ulp
    else if (kind == "geometric") d[i] = std::pow(u, t);                   // 1 .. ulp
    else if (kind == "arithmetic") d[i] = 1.0 - t * (1.0 - u);             // 1 .. ulp
    else if (kind == "randlog") d[i] = std::exp(std::log(u) * std::uniform_real_distribution<>(0, 1)(rng));
    else if (kind == "repeated") d[i] = double(1 + (i % 3));                // 1,2,3,1,2,3,...
    else if (kind == "rankdef") d[i] = i < (n + 1) / 2 ? 1.0 + i : 0.0;     // half zero
    else d[i] = 1.0;
  }
  // Random signs for symmetric indefinite cases, except where the family means positive.
  if (kind == "geometric" || kind == "arithmetic" || kind == "randlog")
    for (double &x : d)
      if (rng() & 1) x = -x;
  return d;
}

inline std::vector<float> to_float(const Mat &a, double scale = 1.0) {
  std::vector<float> o(a.v.size());
  for (size_t i = 0; i < o.size(); ++i) o[i] = float(a.v[i] * scale);
  return o;
}

// ---- Jacobi references ----
// One two-sided Jacobi rotation of the symmetric n x n matrix at(i, j) (T&), chosen to zero
// a_pq (a_pq != 0), applied to columns p, q and then rows p, q, in T arithmetic.
template <class T, class At>
inline void jacobi_rotate(At &&at, int n, int p, int q) {
  const T apq = at(p, q);
  const T theta = (at(q, q) - at(p, p)) / (2 * apq);
  const T t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
  const T c = 1 / std::sqrt(t * t + 1), s = t * c;
  for (int k = 0; k < n; ++k) {  // columns p, q
    const T akp = at(k, p), akq = at(k, q);
    at(k, p) = c * akp - s * akq;
    at(k, q) = s * akp + c * akq;
  }
  for (int k = 0; k < n; ++k) {  // rows p, q
    const T apk = at(p, k), aqk = at(q, k);
    at(p, k) = c * apk - s * aqk;
    at(q, k) = s * apk + c * aqk;
  }
}

// Double-precision symmetric eigenvalues (cyclic Jacobi, stopping on the off-diagonal norm
// relative to the whole matrix), ascending.
inline std::vector<double> jacobi_eigenvalues(Mat a) {
  const int n = a.r;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, tot = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) (i == j ? tot : off) += a(i, j) * a(i, j);
    if (off <= 1e-32 * (tot + off) || off == 0) break;
    for (int p = 0; p < n - 1; ++p)
      for (int q = p + 1; q < n; ++q) {
        if (a(p, q) == 0) continue;
        jacobi_rotate<double>([&](int i, int j) -> double & { return a(i, j); }, n, p, q);
      }
  }
  std::vector<double> w(n);
  for (int i = 0; i < n; ++i) w[i] = a(i, i);
  std::sort(w.begin(), w.end());
  return w;
}

// Long-double cyclic Jacobi with a relative test per pair (|a_pq| <= 1e-19 sqrt|a_pp a_qq|
// skips it): the small eigenvalues of graded matrices to high relative accuracy, which the
// norm-wise stopping test of jacobi_eigenvalues does not give. Ascending.
inline std::vector<double> jacobi_eigenvalues_relative(const Mat &m) {
  const int n = m.r;
  std::vector<long double> a(size_t(n) * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = m.v[i];
  auto A = [&](int i, int j) -> long double & { return a[size_t(i) * n + j]; };
  const long double eps = 1e-19L;
  for (int sweep = 0; sweep < 60; ++sweep) {
    bool rotated = false;
    for (int p = 0; p < n - 1; ++p)
      for (int q = p + 1; q < n; ++q) {
        const long double apq = A(p, q);
        if (std::fabs(apq) <= eps * std::sqrt(std::fabs(A(p, p) * A(q, q))) || apq == 0) continue;
        rotated = true;
        jacobi_rotate<long double>(A, n, p, q);
        A(p, q) = A(q, p) = 0;
      }
    if (!rotated) break;
  }
  std::vector<double> w(n);
  for (int i = 0; i < n; ++i) w[i] = double(A(i, i));
  std::sort(w.begin(), w.end());
  return w;
}

// Singular values of a in double by one-sided (Hestenes) Jacobi, descending.
inline std::vector<double> reference_singular_values(const Mat &a) {
  const bool tall = a.r >= a.c;
  const int rows = tall ? a.r : a.c, cols = tall ? a.c : a.r;
  std::vector<double> x(size_t(rows) * cols);  // column j at x[j*rows]
  for (int i = 0; i < a.r; ++i)
    for (int j = 0; j < a.c; ++j)
      x[tall ? size_t(j) * rows + i : size_t(i) * rows + j] = a(i, j);
  for (int sweep = 0; sweep < 80; ++sweep) {
    bool rotated = false;
    for (int p = 0; p + 1 < cols; ++p)
      for (int q = p + 1; q < cols; ++q) {
        double *xp = &x[size_t(p) * rows], *xq = &x[size_t(q) * rows];
        double al = 0, be = 0, ga = 0;
        for (int i = 0; i < rows; ++i) {
          al += xp[i] * xp[i];
          be += xq[i] * xq[i];
          ga += xp[i] * xq[i];
        }
        if (ga == 0 || std::fabs(ga) <= 1e-17 * std::sqrt(al * be)) continue;
        rotated = true;
        const double zeta = (be - al) / (2 * ga);
        const double t = (zeta >= 0 ? 1 : -1) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (int i = 0; i < rows; ++i) {
          const double u = xp[i], v = xq[i];
          xp[i] = c * u - s * v;
          xq[i] = s * u + c * v;
        }
      }
    if (!rotated) break;
  }
  std::vector<double> sv(cols);
  for (int j = 0; j < cols; ++j) {
    double t = 0;
    for (int i = 0; i < rows; ++i) t += x[size_t(j) * rows + i] * x[size_t(j) * rows + i];
    sv[j] = std::sqrt(t);
  }
  std::sort(sv.rbegin(), sv.rend());
  return sv;
}

// ---- matrix families (docs/design.md section 7), named; rng consumed in a fixed order ----
using Families = std::vector<std::pair<std::string, Mat>>;

// m x n with ones on the diagonal.
inline Mat rect_identity(int m, int n) {
  Mat o(m, n);
  for (int i = 0; i < std::min(m, n); ++i) o(i, i) = 1;
  return o;
}
// U diag(s) V^T for each kind, s = |spectrum(kind)| sorted descending.
inline void push_singular_families(Families &out, std::initializer_list<const char *> kinds, int m,
                                   int n, std::mt19937_64 &rng) {
  const int k = std::min(m, n);
  for (const char *kind : kinds) {
    auto s = spectrum(kind, k, rng);
    for (double &x : s) x = std::fabs(x);
    std::sort(s.rbegin(), s.rend());
    out.push_back({kind, with_singular_values(rng, m, n, s)});
  }
}
// "graded": D1 A D2 for a Gaussian A, D = 1 .. 1e-6 geometric; then "scale1e-30" and
// "scale1e37": Gaussian matrices scaled by those factors.
inline void push_graded_and_scaled(Families &out, int m, int n, std::mt19937_64 &rng) {
  Mat gr = gaussian(rng, m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      gr(i, j) *= std::pow(1e-6, m > 1 ? double(i) / (m - 1) : 0) *
                  std::pow(1e-6, n > 1 ? double(j) / (n - 1) : 0);
  out.push_back({"graded", gr});
  Mat tiny = gaussian(rng, m, n), huge = gaussian(rng, m, n);
  for (double &x : tiny.v) x *= 1e-30;
  for (double &x : huge.v) x *= 1e37;
  out.push_back({"scale1e-30", tiny});
  out.push_back({"scale1e37", huge});
}

// General m x n families of the QR tests.
inline Families general_families(int m, int n, std::mt19937_64 &rng) {
  Families out;
  out.push_back({"gaussian", gaussian(rng, m, n)});
  out.push_back({"zero", Mat(m, n)});
  out.push_back({"identity", rect_identity(m, n)});
  push_singular_families(out, {"clustered", "geometric", "rankdef", "repeated"}, m, n, rng);
  push_graded_and_scaled(out, m, n, rng);
  return out;
}

// m x n families of the SVD tests (all = false: gaussian only).
inline Families svd_families(int m, int n, std::mt19937_64 &rng, bool all) {
  Families out;
  const int k = std::min(m, n);
  out.push_back({"gaussian", gaussian(rng, m, n)});
  if (!all) return out;
  out.push_back({"zero", Mat(m, n)});
  out.push_back({"identity", rect_identity(m, n)});
  push_singular_families(
      out, {"clustered", "clustered1", "geometric", "arithmetic", "randlog", "rankdef", "repeated"},
      m, n, rng);
  Mat shift(m, n), ones(m, n);  // shift: zero diagonal, exercises the zero-d chase
  for (int i = 0; i < m && i + 1 < n; ++i) shift(i, i + 1) = 1;
  for (double &x : ones.v) x = 1;
  out.push_back({"shift", shift});
  out.push_back({"ones", ones});
  push_graded_and_scaled(out, m, n, rng);
  auto gs = spectrum("geometric", k, rng);
  for (double &x : gs) x = std::fabs(x) * 1e-30;
  std::sort(gs.rbegin(), gs.rend());
  out.push_back({"geometric1e-30", with_singular_values(rng, m, n, gs)});
  return out;
}

// Symmetric n x n families of the eigh tests ("scale1e37" only when huge_ok).
inline Families symmetric_families(int n, std::mt19937_64 &rng, bool huge_ok) {
  Families out;
  Mat g = gaussian(rng, n, n), sym(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) sym(i, j) = 0.5 * (g(i, j) + g(j, i));
  out.push_back({"gaussian", sym});
  out.push_back({"zero", Mat(n, n)});
  out.push_back({"identity", identity(n)});
  Mat dg(n, n);
  for (int i = 0; i < n; ++i) dg(i, i) = std::normal_distribution<>()(rng);
  out.push_back({"diagonal", dg});
  for (const char *kind : {"clustered", "clustered1", "geometric", "arithmetic", "randlog", "repeated", "rankdef"})
    out.push_back({kind, with_spectrum(rng, spectrum(kind, n, rng))});
  Mat gr = sym;  // graded D A D, D = 1 .. 1e-5 geometric
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      gr(i, j) *= std::pow(1e-5, n > 1 ? double(i + j) / (n - 1) : 0);
  out.push_back({"graded", gr});
  Mat wil(n, n);  // Wilkinson-like tridiagonal: close eigenvalue pairs
  for (int i = 0; i < n; ++i) {
    wil(i, i) = std::fabs(i - (n - 1) / 2.0);
    if (i + 1 < n) wil(i, i + 1) = wil(i + 1, i) = 1;
  }
  out.push_back({"wilkinson", wil});
  // Already nearly tridiagonal: the reflectors see columns of ~1e-20 below the subdiagonal, the
  // rescaled path of the tridiagonalisation.
  Mat fill = wil;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i - 1; ++j) fill(i, j) = fill(j, i) = 1e-20 * sym(i, j);
  out.push_back({"tridiag_fill", fill});
  // Rows/columns exactly zero and ~1e-36 (tiny and zero reflector columns).
  Mat zc = sym;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i % 3 == 1 || j % 3 == 1) zc(i, j) = 0;
      else if (i % 3 == 2 || j % 3 == 2) zc(i, j) *= 1e-36;
    }
  out.push_back({"zero_cols", zc});
  Mat tiny = sym;
  for (double &x : tiny.v) x *= 1e-30;
  out.push_back({"scale1e-30", tiny});
  if (huge_ok) {
    Mat huge = sym;
    for (double &x : huge.v) x *= 1e37;
    out.push_back({"scale1e37", huge});
  }
  return out;
}

// A batch of symmetric matrices as an eigh kernel reads it: the families in order, a poisoned
// copy of the first one (NaN / +-Inf at a random entry of the read triangle) in the middle and
// a poisoned identity at the end; NaN in every entry of the unread triangle (uplo: ML_K_LOWER
// or ML_K_UPPER).
struct EigBatch {
  std::vector<std::pair<std::string, Mat>> items;
  std::vector<int> poison;  // 0 none, 1 NaN, 2 Inf, 3 -Inf
  std::vector<float> a;     // the matrices back to back, row-major
};
inline EigBatch eig_batch(const Families &fams, int n, int uplo, std::mt19937_64 &rng) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EigBatch eb;
  const size_t mid = fams.size() / 2;
  for (size_t f = 0; f < fams.size(); ++f) {
    if (f == mid) {
      eb.items.push_back({"nonfinite", fams[0].second});
      eb.poison.push_back(1 + int(rng() % 3));
    }
    eb.items.push_back(fams[f]);
    eb.poison.push_back(0);
  }
  eb.items.push_back({"nonfinite", identity(n)});
  eb.poison.push_back(1 + int(rng() % 3));
  for (size_t b = 0; b < eb.items.size(); ++b) {
    auto v = to_float(eb.items[b].second);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const bool read = uplo == ML_K_LOWER ? i >= j : i <= j;
        if (!read) v[size_t(i) * n + j] = qnan;
      }
    if (eb.poison[b]) {
      const int i = int(rng() % n), j = int(rng() % n);
      v[uplo == ML_K_LOWER ? size_t(std::max(i, j)) * n + std::min(i, j)
                           : size_t(std::min(i, j)) * n + std::max(i, j)] =
          eb.poison[b] == 1 ? qnan : eb.poison[b] == 2 ? inf : -inf;
    }
    eb.a.insert(eb.a.end(), v.begin(), v.end());
  }
  return eb;
}

// ---- LAPACK-style ratios in double ----
// Of a thin SVD (u m x k, s k, vt k x n, k = min(m, n)) of the m x n matrix A:
// |A - U S Vt|_1 / (|A|_1 max(m,n) ulp), |I - Ut U|_1 / (m ulp), |I - V Vt|_1 / (n ulp), and
// max_i |s_i - s_ref_i| / (s_ref_0 max(m,n) ulp) against reference_singular_values (the
// residual and the error absolute when |A| or s_ref_0 is 0).
struct SvdRatios {
  double resid, orth_u, orth_v, sval;
};
inline SvdRatios svd_ratios(const Mat &A, const float *u, const float *s, const float *vt) {
  const int m = A.r, n = A.c, k = std::min(m, n), big = std::max(m, n);
  Mat U = from_float(u, m, k), Vt = from_float(vt, k, n);
  Mat us = U;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < k; ++j) us(i, j) *= s[j];
  Mat r = matmul(us, Vt);
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i] -= A.v[i];
  const double an = norm1(A);
  SvdRatios o;
  o.resid = an > 0 ? norm1(r) / (an * big * kUlp) : norm1(r);
  o.orth_u = orth_defect(U) / (m * kUlp);
  o.orth_v = orth_defect(transpose(Vt)) / (n * kUlp);
  const auto ref = reference_singular_values(A);
  double err = 0;
  for (int i = 0; i < k; ++i) err = std::max(err, std::fabs(s[i] - ref[i]));
  o.sval = ref[0] > 0 ? err / (ref[0] * big * kUlp) : err;
  return o;
}

// The checks of one matrix of an svd + svdvals batch (u m x k, s k, vt k x n from svd; s2 and
// info2 from svdvals on the same input). Non-finite input: every output NaN, info NONFINITE.
inline void expect_svd_nonfinite(Report &rep, const std::string &at, int m, int n, const float *u,
                                 const float *s, const float *vt, const float *s2, int info,
                                 int info2) {
  const int k = std::min(m, n);
  rep.expect(all_nan(u, size_t(m) * k) && all_nan(vt, size_t(k) * n) && all_nan(s, k) &&
                 all_nan(s2, k),
             at + " all NaN");
  rep.expect(info == ML_INFO_NONFINITE && info2 == ML_INFO_NONFINITE, at + " info NONFINITE");
}
// Finite input: finite outputs, s descending and >= 0, svdvals bitwise svd with the same info,
// converged.
inline void expect_svd_outputs(Report &rep, const std::string &at, int m, int n, const float *u,
                               const float *s, const float *vt, const float *s2, int info,
                               int info2) {
  const int k = std::min(m, n);
  rep.expect(all_finite(u, size_t(m) * k) && all_finite(vt, size_t(k) * n) && all_finite(s, k),
             at + " finite");
  bool ordered = true;
  for (int i = 0; i < k; ++i) ordered = ordered && s[i] >= 0 && (i == 0 || s[i] <= s[i - 1]);
  rep.expect(ordered, at + " s descending, >= 0");
  rep.expect(std::memcmp(s, s2, sizeof(float) * k) == 0 && info == info2,
             at + " svdvals == svd values, same info");
  rep.expect((info & (ML_INFO_NOT_CONVERGED | ML_INFO_NONFINITE)) == 0, at + " info");
}
// svd_ratios of A's outputs, each checked against limit; then the rank-deficiency bit where the
// family fam decides it unambiguously. Returns the ratios.
inline SvdRatios check_svd_ratios(Report &rep, const std::string &at, const std::string &fam,
                                  const Mat &A, const float *u, const float *s, const float *vt,
                                  int info, double limit) {
  const SvdRatios x = svd_ratios(A, u, s, vt);
  rep.ratio(x.resid, limit, at + " |A-USVt|");
  rep.ratio(x.orth_u, limit, at + " |I-UtU|");
  rep.ratio(x.orth_v, limit, at + " |I-VVt|");
  rep.ratio(x.sval, limit, at + " s vs double");
  const int k = std::min(A.r, A.c);
  const bool rd = (info & ML_INFO_RANK_DEFICIENT) != 0;
  if (fam == "zero") rep.expect(rd, at + " zero is rank-deficient");
  if (fam == "identity") rep.expect(!rd, at + " identity has full rank");
  if (fam == "rankdef" && k >= 2) rep.expect(rd, at + " rankdef flagged");
  if (fam == "ones" && k >= 2) rep.expect(rd, at + " ones flagged");
  return x;
}

// The n x n symmetric matrix an eigh kernel sees in a (row-major): the read triangle (lower
// when lower, else upper), mirrored.
inline Mat read_symmetric(const float *a, int n, bool lower) {
  Mat A(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const bool read = lower ? i >= j : i <= j;
      A(i, j) = a[read ? size_t(i) * n + j : size_t(j) * n + i];
    }
  return A;
}
// Of a QR factorisation A = Q R (A m x n, Q m x q, R q x n): resid = |A - Q R|_1 / (dim |A|_1
// ulp) (|A - Q R|_1 when A = 0), orth = |I - Q^T Q|_1 / (m ulp). dim: the residual's size
// factor (max(m, n), or m as docs/design.md states it).
struct QrRatios {
  double resid, orth;
};
inline QrRatios qr_ratios(const Mat &A, const Mat &Q, const Mat &R, int dim) {
  const double an = norm1(A);
  Mat qr = matmul(Q, R);
  for (size_t i = 0; i < qr.v.size(); ++i) qr.v[i] -= A.v[i];
  QrRatios o;
  o.resid = an > 0 ? norm1(qr) / (dim * an * kUlp) : norm1(qr);
  o.orth = orth_defect(Q) / (A.r * kUlp);
  return o;
}
// The Q-less check of R: |A^T A - R^T R|_1 / (dim |A|_1^2 ulp) (|A|_1 taken as 1 when A = 0).
inline double rtr_ratio(const Mat &A, const Mat &R, int dim) {
  const double an = norm1(A);
  Mat d = matmul(transpose(A), A), rr = matmul(transpose(R), R);
  for (size_t i = 0; i < d.v.size(); ++i) d.v[i] -= rr.v[i];
  return norm1(d) / (dim * (an > 0 ? an * an : 1.0) * kUlp);
}

// Of an eigendecomposition (w n, v n x n, eigenvector j in column j) of A: scale = |A|_1 n ulp
// (1 when A = 0), resid = |A - V W Vt|_1 / scale, orth = |I - Vt V|_1 / (n ulp).
struct EigRatios {
  double scale, resid, orth;
};
inline EigRatios eig_ratios(const Mat &A, const float *w, const float *v) {
  const int n = A.r;
  const double an = norm1(A);
  Mat V = from_float(v, n, n), VW = V;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) VW(i, j) *= w[j];
  Mat R = matmul(VW, transpose(V));
  for (size_t i = 0; i < R.v.size(); ++i) R.v[i] -= A.v[i];
  EigRatios o;
  o.scale = an > 0 ? an * n * kUlp : 1.0;
  o.resid = norm1(R) / o.scale;
  o.orth = orth_defect(V) / (n * kUlp);
  return o;
}

}  // namespace kt
