// Shared helpers for the kernel tests: matrix families, LAPACK-style ratios in double, a
// double-precision Jacobi reference, and a tiny check/report harness.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kt {

constexpr double kUlp = 1.1920928955078125e-07;  // float32 eps (DESIGN.md 3)

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

// ---- double-precision symmetric eigenvalues (cyclic Jacobi), ascending ----
inline std::vector<double> jacobi_eigenvalues(Mat a) {
  const int n = a.r;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, tot = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) (i == j ? tot : off) += a(i, j) * a(i, j);
    if (off <= 1e-32 * (tot + off) || off == 0) break;
    for (int p = 0; p < n - 1; ++p)
      for (int q = p + 1; q < n; ++q) {
        const double apq = a(p, q);
        if (apq == 0) continue;
        const double theta = (a(q, q) - a(p, p)) / (2 * apq);
        const double t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // columns p, q
          const double akp = a(k, p), akq = a(k, q);
          a(k, p) = c * akp - s * akq;
          a(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // rows p, q
          const double apk = a(p, k), aqk = a(q, k);
          a(p, k) = c * apk - s * aqk;
          a(q, k) = s * apk + c * aqk;
        }
      }
  }
  std::vector<double> w(n);
  for (int i = 0; i < n; ++i) w[i] = a(i, i);
  std::sort(w.begin(), w.end());
  return w;
}

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

}  // namespace kt
