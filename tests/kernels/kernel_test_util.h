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
#include "kernel_runner.h"

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

// Runner entries (ml::kernel_runner::Kernel) named name that call kernel with the fields of
// QrArgs, EigArgs (eigenvalues only: KT_EIGVALS_ENTRY) or SvdArgs (values only:
// KT_SVDVALS_ENTRY); the _OFFSET forms add p.group_offset to the group id first, as an entry
// point does.
#define KT_ARGS_ENTRY(name, type, kernel, ...)        \
  void name(const ml_ctx &ctx, void *u) {             \
    auto &x = *static_cast<kt::type *>(u);            \
    kernel(ctx, x.p, x.a, __VA_ARGS__, x.info);       \
  }
#define KT_OFFSET_ENTRY(name, type, kernel, ...)      \
  void name(const ml_ctx &ctx, void *u) {             \
    auto &x = *static_cast<kt::type *>(u);            \
    ml_ctx c = ctx;                                   \
    c.group_id += x.p.group_offset;                   \
    kernel(c, x.p, x.a, __VA_ARGS__, x.info);         \
  }
#define KT_QR_ENTRY(name, kernel) KT_ARGS_ENTRY(name, QrArgs, kernel, x.q, x.r)
#define KT_EIG_ENTRY(name, kernel) KT_ARGS_ENTRY(name, EigArgs, kernel, x.w, x.v)
#define KT_EIGVALS_ENTRY(name, kernel) KT_ARGS_ENTRY(name, EigArgs, kernel, x.w)
#define KT_EIG_OFFSET_ENTRY(name, kernel) KT_OFFSET_ENTRY(name, EigArgs, kernel, x.w, x.v)
#define KT_EIGVALS_OFFSET_ENTRY(name, kernel) KT_OFFSET_ENTRY(name, EigArgs, kernel, x.w)
#define KT_SVD_ENTRY(name, kernel) KT_ARGS_ENTRY(name, SvdArgs, kernel, x.u, x.s, x.vt)
#define KT_SVDVALS_ENTRY(name, kernel) KT_ARGS_ENTRY(name, SvdArgs, kernel, x.s)

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

// A test program's suites, by the name of its first argument: runs that one and returns its
// exit status; none or an unknown name: the usage line, exit status 2.
struct Suite {
  const char *name;
  std::function<int()> run;
};
inline int run_suite(int argc, char **argv, const char *usage,
                     std::initializer_list<Suite> suites) {
  const std::string s = argc > 1 ? argv[1] : "";
  for (const Suite &x : suites)
    if (s == x.name) return x.run();
  std::fprintf(stderr, "usage: %s\n", usage);
  return 2;
}
// The same for suites that report into one Report: prints its summary; exit status 0 only when
// the suite made checks and none failed.
struct ReportSuite {
  const char *name;
  void (*run)(Report &);
};
inline int run_report_suite(int argc, char **argv, const char *usage,
                            std::initializer_list<ReportSuite> suites) {
  const std::string s = argc > 1 ? argv[1] : "";
  for (const ReportSuite &x : suites) {
    if (s != x.name) continue;
    Report rep;
    x.run(rep);
    std::printf("%s: %d checks, %d failures, worst ratio %.3g (%s)\n", x.name, rep.checks,
                rep.failures, rep.worst, rep.worst_where.c_str());
    return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
  }
  std::printf("usage: %s\n", usage);
  return 2;
}

// "op mxn fam #idx": where a check of matrix idx (of family fam) of an m x n batch ran.
inline std::string where(const char *op, int m, int n, const std::string &fam, int idx) {
  char b[200];
  std::snprintf(b, sizeof b, "%s %dx%d %s #%d", op, m, n, fam.c_str(), idx);
  return b;
}

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
// U diag(s) V^T over the first k columns of U and V (U m x >= k, V n x >= k).
inline Mat scaled_product(const Mat &u, const std::vector<double> &s, const Mat &v, int k) {
  Mat o(u.r, v.r);
  for (int i = 0; i < u.r; ++i)
    for (int j = 0; j < v.r; ++j) {
      double t = 0;
      for (int l = 0; l < k; ++l) t += u(i, l) * s[l] * v(j, l);
      o(i, j) = t;
    }
  return o;
}
// Q diag(d) Q^T.
inline Mat with_spectrum(std::mt19937_64 &rng, const std::vector<double> &d) {
  const Mat q = random_orthogonal(rng, int(d.size()));
  return scaled_product(q, d, q, int(d.size()));
}
// U diag(s) V^T with m x n shape.
inline Mat with_singular_values(std::mt19937_64 &rng, int m, int n, const std::vector<double> &s) {
  const Mat u = random_orthogonal(rng, m), v = random_orthogonal(rng, n);
  return scaled_product(u, s, v, std::min(m, n));
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

// The families of the Jacobi eigh kernels' tests: symmetric_families plus all ones and graded
// positive definite matrices D B D (B = I + small symmetric, so well conditioned; D = 1 ..
// 10^-g) whose small eigenvalues are determined to high relative accuracy. split_powers: D_i D_j
// as the product of two powers, else as one power of i + j.
inline Families eig_kernel_families(int n, std::mt19937_64 &rng, bool split_powers) {
  Families out = symmetric_families(n, rng, true);
  Mat ones(n, n);
  for (double &x : ones.v) x = 1;
  out.push_back({"ones", ones});
  for (double grade : {1e-6, 1e-15}) {
    Mat b = identity(n), e = gaussian(rng, n, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) b(i, j) += 0.05 * (e(i, j) + e(j, i));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        if (split_powers) {
          const double di = std::pow(grade, n > 1 ? double(i) / (n - 1) : 0);
          const double dj = std::pow(grade, n > 1 ? double(j) / (n - 1) : 0);
          b(i, j) *= di * dj;
        } else {
          b(i, j) *= std::pow(grade, n > 1 ? double(i + j) / (n - 1) : 0);
        }
      }
    out.push_back({grade > 1e-10 ? "graded_pd1e-6" : "graded_pd1e-15", b});
  }
  return out;
}

// group_offset and a null info of an eigh kernel whose entry adds p.group_offset, on three
// randlog n x n matrices: the batch at group size gs over groups groups (past the batch: finite
// outputs), then with group_offset 2 at gs_off over groups_off (matrix 2 bitwise as before, 0
// and 1 untouched).
inline void check_eig_offset(Report &rep, int n, std::mt19937_64 &rng,
                             ml::kernel_runner::Kernel entry, int gs, int64_t groups, int gs_off,
                             int64_t groups_off) {
  const int batch = 3;
  std::vector<float> a;
  for (int b = 0; b < batch; ++b) {
    auto v = to_float(with_spectrum(rng, spectrum("randlog", n, rng)));
    a.insert(a.end(), v.begin(), v.end());
  }
  std::vector<float> w(size_t(batch) * n, -7.f), v(size_t(batch) * n * n, -7.f);
  EigArgs args{{n, n, ML_K_LOWER, 0, batch, 0}, a.data(), w.data(), v.data(), nullptr};
  ml::kernel_runner::run(gs, groups, 0, entry, &args);
  rep.expect(all_finite(w.data(), w.size()) && all_finite(v.data(), v.size()), "info=null");
  std::vector<float> w2(w.size(), -7.f), v2(v.size(), -7.f);
  EigArgs off{{n, n, ML_K_LOWER, 0, batch, 2}, a.data(), w2.data(), v2.data(), nullptr};
  ml::kernel_runner::run(gs_off, groups_off, 0, entry, &off);
  rep.expect(std::memcmp(w2.data() + 2 * n, w.data() + 2 * n, sizeof(float) * n) == 0 &&
                 std::memcmp(v2.data() + 2 * n * n, v.data() + 2 * n * n,
                             sizeof(float) * n * n) == 0 &&
                 w2[0] == -7.f && w2[n] == -7.f,
             "group_offset");
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
// The rank-deficiency bit of an SVD's info where the family fam decides it unambiguously
// (k = min(m, n)).
inline void expect_svd_rank_bit(Report &rep, const std::string &at, const std::string &fam, int k,
                                int info) {
  const bool rd = (info & ML_INFO_RANK_DEFICIENT) != 0;
  if (fam == "zero") rep.expect(rd, at + " zero is rank-deficient");
  if (fam == "identity") rep.expect(!rd, at + " identity has full rank");
  if (fam == "rankdef" && k >= 2) rep.expect(rd, at + " rankdef flagged");
  if (fam == "ones" && k >= 2) rep.expect(rd, at + " ones flagged");
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
  expect_svd_rank_bit(rep, at, fam, std::min(A.r, A.c), info);
  return x;
}

// A batch's svd outputs (u m x k, s k, vt k x n, info; k = min(m, n)) and svdvals outputs (s2,
// info2), every entry -7 and every info -1 before a run.
struct SvdOut {
  int m, n, k;
  std::vector<float> u, s, vt, s2;
  std::vector<int> info, info2;
  SvdOut(int m_, int n_, int batch)
      : m(m_), n(n_), k(std::min(m_, n_)), u(size_t(batch) * m * k, -7.f),
        s(size_t(batch) * k, -7.f), vt(size_t(batch) * k * n, -7.f), s2(size_t(batch) * k, -7.f),
        info(batch, -1), info2(batch, -1) {}
  int64_t batch() const { return int64_t(info.size()); }
  SvdArgs svd_args(const float *a, int flags) {
    return SvdArgs{{m, n, flags, 0, batch(), 0}, a, u.data(), s.data(), vt.data(), info.data()};
  }
  SvdArgs svdvals_args(const float *a, int flags) {
    return SvdArgs{{m, n, flags, 0, batch(), 0}, a, nullptr, s2.data(), nullptr, info2.data()};
  }
  const float *ub(int b) const { return u.data() + size_t(b) * m * k; }
  const float *sb(int b) const { return s.data() + size_t(b) * k; }
  const float *vb(int b) const { return vt.data() + size_t(b) * k * n; }
  const float *s2b(int b) const { return s2.data() + size_t(b) * k; }
};
// The checks of matrix b of an SVD batch (A: its input): non-finite input (nonfinite) by
// expect_svd_nonfinite (returns false); else expect_svd_outputs, a sweep counted on gaussian
// (k >= 2) and check_svd_ratios against kSvdLimit, whose ratios it returns in x.
inline bool check_svd_matrix(Report &rep, const std::string &at, const std::string &fam,
                             bool nonfinite, const Mat &A, const SvdOut &o, int b,
                             SvdRatios *x = nullptr) {
  if (nonfinite) {
    expect_svd_nonfinite(rep, at, o.m, o.n, o.ub(b), o.sb(b), o.vb(b), o.s2b(b), o.info[b],
                         o.info2[b]);
    return false;
  }
  expect_svd_outputs(rep, at, o.m, o.n, o.ub(b), o.sb(b), o.vb(b), o.s2b(b), o.info[b],
                     o.info2[b]);
  if (fam == "gaussian" && o.k >= 2)
    rep.expect((o.info[b] >> ML_INFO_SWEEPS_SHIFT) > 0, at + " sweeps counted");
  const SvdRatios r = check_svd_ratios(rep, at, fam, A, o.ub(b), o.sb(b), o.vb(b), o.info[b],
                                       kSvdLimit);
  if (x) *x = r;
  return true;
}
// Exact zero columns (column 0) and rows (the last, when m > 2) of a Gaussian m x n matrix:
// rank-deficient U and V ("zero_cols").
inline void push_zero_cols(Families &fams, int m, int n, std::mt19937_64 &rng) {
  Mat zc = gaussian(rng, m, n);
  for (int i = 0; i < m; ++i) zc(i, 0) = 0;
  if (m > 2)
    for (int j = 0; j < n; ++j) zc(m - 1, j) = 0;
  fams.push_back({"zero_cols", zc});
}
// The rank-deficiency bit on push_zero_cols' matrix (a zero column, or a zero row of a wide
// one).
inline void expect_zero_cols_flagged(Report &rep, const std::string &at, int m, int n,
                                     const std::string &fam, int info) {
  const bool rd = (info & ML_INFO_RANK_DEFICIENT) != 0;
  if (fam == "zero_cols" && (n <= m || m > 2)) rep.expect(rd, at + " zero_cols flagged");
}

// The iteration cap of an SVD (max_iter = 1) on a matrix that needs more: NOT_CONVERGED with one
// sweep counted, every output NaN (u, vt n x n, s n).
inline void expect_svd_capped(Report &rep, const std::string &at, int n, const float *u,
                              const float *s, const float *vt, int info) {
  rep.expect((info & ML_INFO_NOT_CONVERGED) && (info >> ML_INFO_SWEEPS_SHIFT) == 1,
             at + " sweep cap");
  rep.expect(all_nan(u, size_t(n) * n) && all_nan(s, n) && all_nan(vt, size_t(n) * n),
             at + " capped: NaN outputs");
}
// n singular values finite, descending from first to last, the last > 0.
inline bool positive_descending_ends(const float *s, int n) {
  return all_finite(s, n) && s[0] >= s[n - 1] && s[n - 1] > 0;
}
// Of matrix b of an eigh + eigvalsh batch (w n, v n x n; w2 from eigvalsh): non-finite input
// (poisoned): every output NaN and both infos NONFINITE (returns false); else finite outputs,
// both infos converged.
inline bool check_eig_outputs(Report &rep, const std::string &at, int n, bool poisoned,
                              const float *wb, const float *vb, const float *w2b, int info,
                              int info2) {
  if (poisoned) {
    rep.expect(all_nan(wb, n) && all_nan(vb, size_t(n) * n), at + " all NaN");
    rep.expect(all_nan(w2b, n), at + " eigvalsh all NaN");
    rep.expect(info == ML_INFO_NONFINITE && info2 == ML_INFO_NONFINITE, at + " info");
    return false;
  }
  rep.expect(all_finite(wb, n) && all_finite(vb, size_t(n) * n), at + " finite");
  rep.expect((info & 0xffff) == 0 && (info2 & 0xffff) == 0, at + " info converged");
  return true;
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

// ---- batches with non-finite matrices ----
// The families in order plus two Gaussian m x n matrices with one non-finite entry each: a NaN
// at batch index nf / 2 (named "nan") and `inf` (+Inf or -Inf) at the end (named "inf").
struct NamedBatch {
  std::vector<std::string> name;
  std::vector<float> a;  // the matrices back to back, row-major
  int size() const { return int(name.size()); }
  bool nonfinite(int b) const {
    return name[b] == "nan" || name[b] == "inf" || name[b] == "nonfinite";
  }
};
inline NamedBatch nan_inf_batch(const Families &fams, int m, int n, float inf,
                                std::mt19937_64 &rng) {
  const int nf = int(fams.size()), batch = nf + 2, bad_nan = nf / 2;
  NamedBatch out;
  for (int b = 0, f = 0; b < batch; ++b) {
    std::vector<float> v;
    if (b == bad_nan || b == batch - 1) {
      v = to_float(gaussian(rng, m, n));
      v[size_t(rng() % v.size())] = b == bad_nan ? std::numeric_limits<float>::quiet_NaN() : inf;
      out.name.push_back(b == bad_nan ? "nan" : "inf");
    } else {
      v = to_float(fams[f].second);
      out.name.push_back(fams[f++].first);
    }
    out.a.insert(out.a.end(), v.begin(), v.end());
  }
  return out;
}

// The families of the small QR kernels' tests: general_families plus exact zero columns (R's
// diagonal exactly 0) and a power-of-two scaled matrix; with tiny_below, two with entries below
// the diagonal 1e-20 (1e-36) of those above: every reflector's sum of squares underflows the
// unscaled test, so each step takes the rescaled path (the tau = 0 path).
inline Families qr_kernel_families(int m, int n, std::mt19937_64 &rng, bool tiny_below) {
  Families out = general_families(m, n, rng);
  Mat zc = gaussian(rng, m, n);  // column 0 (and the last when n > 2) exactly zero
  for (int i = 0; i < m; ++i) {
    zc(i, 0) = 0;
    if (n > 2) zc(i, n - 1) = 0;
  }
  out.push_back({"zero_cols", zc});
  Mat one = gaussian(rng, m, n);  // a 2^k-scaled copy of gaussian: exercises the scaling
  for (double &x : one.v) x = std::ldexp(std::round(x * 8), 90);
  out.push_back({"pow2_1e27", one});
  if (!tiny_below) return out;
  for (double f : {1e-20, 1e-36}) {
    Mat t = gaussian(rng, m, n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < std::min(i, n); ++j) t(i, j) *= f;
    out.push_back({f > 1e-30 ? "tiny_below" : "tinier_below", t});
  }
  return out;
}
// The families in order with one Gaussian m x n matrix inserted at batch index at (named
// "nonfinite") that has one entry NaN or `inf` (a random bit chooses).
inline NamedBatch poisoned_batch(const Families &fams, int m, int n, int at, float inf,
                                 std::mt19937_64 &rng) {
  NamedBatch out;
  for (int b = 0, f = 0; b < int(fams.size()) + 1; ++b) {
    std::vector<float> v;
    if (b == at) {
      v = to_float(gaussian(rng, m, n));
      v[size_t(rng() % v.size())] = (rng() & 1) ? std::numeric_limits<float>::quiet_NaN() : inf;
      out.name.push_back("nonfinite");
    } else {
      v = to_float(fams[f].second);
      out.name.push_back(fams[f++].first);
    }
    out.a.insert(out.a.end(), v.begin(), v.end());
  }
  return out;
}

// ---- QR batches and their checks ----
// A QR of m x n in mode (ML_K_QR_*): Q m x qcols (not computed in mode R), R rrows x n.
struct QrShape {
  int m, n, mode, qcols, rrows, mx;
  bool want_q;
  const char *op;
  QrShape(int m_, int n_, int mode_)
      : m(m_), n(n_), mode(mode_), qcols(mode_ == ML_K_QR_COMPLETE ? m_ : std::min(m_, n_)),
        rrows(qcols), mx(std::max(m_, n_)), want_q(mode_ != ML_K_QR_R),
        op(mode_ == ML_K_QR_R ? "qr-r" : mode_ == ML_K_QR_COMPLETE ? "qr-complete" : "qr") {}
  size_t q_floats() const { return size_t(m) * qcols; }
  size_t r_floats() const { return size_t(rrows) * n; }
};
// A batch's QR outputs, every entry -7 and every info -1 before a run.
struct QrOut {
  std::vector<float> q, r;
  std::vector<int> info;
  QrOut(const QrShape &s, int batch)
      : q(size_t(batch) * s.q_floats(), -7.f), r(size_t(batch) * s.r_floats(), -7.f),
        info(batch, -1) {}
  // The kernel arguments over the whole batch (Q null where with_q is false).
  QrArgs args(const QrShape &s, const float *a, bool with_q) {
    return QrArgs{{s.m, s.n, s.mode, 0, int64_t(info.size()), 0}, a,
                  with_q ? q.data() : nullptr, r.data(), info.data()};
  }
};
// Runs the QR kernel entry (QrArgs) on in's matrices into out: groups groups of gs lanes with
// scratch floats each; Q written where with_q.
inline void run_qr_kernel(ml::kernel_runner::Kernel entry, int gs, int64_t groups,
                          int64_t scratch, const QrShape &s, const NamedBatch &in, QrOut &out,
                          bool with_q) {
  QrArgs args = out.args(s, in.a.data(), with_q);
  ml::kernel_runner::run(gs, groups, scratch, entry, &args);
}
// Non-finite input: R (and Q where computed) all NaN, info NONFINITE.
inline void expect_qr_nonfinite(Report &rep, const std::string &at, const QrShape &s,
                                const float *rb, const float *qb, int info) {
  rep.expect(all_nan(rb, s.r_floats()), at + " R all NaN");
  if (s.want_q) rep.expect(all_nan(qb, s.q_floats()), at + " Q all NaN");
  rep.expect(info == ML_INFO_NONFINITE, at + " info NONFINITE");
}
// Finite input: R finite and exactly upper triangular.
inline void expect_r_upper(Report &rep, const std::string &at, const QrShape &s, const float *rb) {
  rep.expect(all_finite(rb, s.r_floats()), at + " R finite");
  bool tri = true;
  for (int i = 0; i < s.rrows; ++i)
    for (int j = 0; j < std::min(i, s.n); ++j) tri = tri && rb[size_t(i) * s.n + j] == 0.f;
  rep.expect(tri, at + " R upper triangular");
}
using Where = std::function<std::string(const std::string &fam, int b)>;
// The checks of every QR batch on in's matrices: the non-finite ones by expect_qr_nonfinite,
// the others by expect_r_upper and then check(b, at, A, R) (A and R in double). where(fam, b)
// names matrix b.
template <class Check>
inline void each_qr_matrix(Report &rep, const QrShape &s, const NamedBatch &in, const QrOut &out,
                           const Where &where, Check &&check) {
  for (int b = 0; b < in.size(); ++b) {
    const std::string at = where(in.name[b], b);
    const float *rb = out.r.data() + size_t(b) * s.r_floats();
    if (in.nonfinite(b)) {
      expect_qr_nonfinite(rep, at, s, rb, out.q.data() + size_t(b) * s.q_floats(), out.info[b]);
      continue;
    }
    expect_r_upper(rep, at, s, rb);
    check(b, at, from_float(in.a.data() + size_t(b) * s.m * s.n, s.m, s.n),
          from_float(rb, s.rrows, s.n));
  }
}
// Q finite, then qr_ratios (residual scaled by dim) against kQrLimit.
inline QrRatios check_q_factor(Report &rep, const std::string &at, const QrShape &s, const Mat &A,
                               const float *qb, const Mat &R, int dim) {
  rep.expect(all_finite(qb, s.q_floats()), at + " Q finite");
  const QrRatios x = qr_ratios(A, from_float(qb, s.m, s.qcols), R, dim);
  rep.ratio(x.resid, kQrLimit, at + " |A-QR|");
  rep.ratio(x.orth, kQrLimit, at + " |I-QtQ|");
  return x;
}
// |R0 - R|_1 / (mx |A|_1 ulp) (|R0 - R|_1 when |A|_1 = an = 0); row_signs: R0's rows first
// take the signs of R's diagonal (R is unique up to them for a matrix of full rank).
inline double r_distance(Mat R0, const Mat &R, double an, int mx, bool row_signs) {
  if (row_signs) {
    for (int i = 0; i < std::min(R0.r, R0.c); ++i) {
      const double s = (R0(i, i) < 0) == (R(i, i) < 0) ? 1 : -1;
      for (int j = 0; j < R0.c; ++j) R0(i, j) -= s * R(i, j);
    }
  } else {
    for (size_t i = 0; i < R.v.size(); ++i) R0.v[i] -= R.v[i];
  }
  return an > 0 ? norm1(R0) / (mx * an * kUlp) : norm1(R0);
}
struct QrWorst {
  double resid = 0, orth = 0, rtr = 0, agree = 0;
  void add(const QrRatios &x) {
    resid = std::max(resid, x.resid);
    orth = std::max(orth, x.orth);
  }
};
// 1-norm condition number of the leading k x k block of the upper triangular R (1 when a
// diagonal entry is 0: only the zero matrix among the families compared).
inline double leading_cond(const Mat &R, int k) {
  Mat t(k, k), inv(k, k);
  for (int i = 0; i < k; ++i)
    for (int j = i; j < k; ++j) t(i, j) = R(i, j);
  for (int i = 0; i < k; ++i)
    if (t(i, i) == 0) return 1.0;
  for (int c = 0; c < k; ++c)  // back substitution, column c of the inverse
    for (int i = k - 1; i >= 0; --i) {
      double x = i == c ? 1.0 : 0.0;
      for (int j = i + 1; j < k; ++j) x -= t(i, j) * inv(j, c);
      inv(i, c) = x / t(i, i);
    }
  return std::max(1.0, norm1(t) * norm1(inv));
}
// The checks of a QR kernel's outputs (out) on a nan_inf_batch (in) against the group kernel's
// on the same input (ref), which computes the same reflectors: non-finite matrices all NaN with
// info NONFINITE; R finite and upper triangular; the info word (the rank-deficiency bit on zero
// and exact zero columns, equal to the group kernel's where the families decide it); on the
// well-conditioned families R and Q within agree_limit of the group kernel's, with the same
// signs of R's diagonal (cond_scaled: the distances in units of leading_cond); then R^T R =
// A^T A (mode R) or Q's ratios. where(fam, b) names matrix b.
inline void check_qr_vs_group(Report &rep, QrWorst &worst, const QrShape &s, const NamedBatch &in,
                              const QrOut &out, const QrOut &ref, double agree_limit,
                              bool cond_scaled, const Where &where) {
  const int m = s.m, n = s.n, kr = std::min(m, n);
  each_qr_matrix(rep, s, in, out, where, [&](int b, const std::string &at, const Mat &A,
                                             const Mat &R) {
    const std::string &fam = in.name[b];
    const int info = out.info[b];
    const float *rb = out.r.data() + size_t(b) * s.r_floats();
    const float *qb = out.q.data() + size_t(b) * s.q_floats();
    rep.expect((info & ~ML_INFO_RANK_DEFICIENT) == 0, at + " info");
    if (fam == "zero" || fam == "zero_cols")
      rep.expect(info == ML_INFO_RANK_DEFICIENT, at + " info RANK_DEFICIENT");
    if (fam == "identity" || fam == "gaussian") rep.expect(info == 0, at + " info full rank");
    if (fam == "zero" || fam == "identity" || fam == "gaussian" || fam == "zero_cols")
      rep.expect(info == ref.info[b], at + " info as the group kernel");
    // Agreement with the group kernel on well-conditioned inputs (unique QR up to signs, and
    // the signs must match): |R - R0| / (max(m,n) ||A|| ulp), |Q - Q0| / (max(m,n) ulp).
    const bool unique = fam == "gaussian" || fam == "identity" || fam == "pow2_1e27" ||
                        fam == "scale1e-30" || fam == "scale1e37" || fam == "zero" ||
                        fam == "tiny_below" || fam == "tinier_below";
    if (unique) {
      const float *r0b = ref.r.data() + size_t(b) * s.r_floats();
      Mat R0 = from_float(r0b, s.rrows, n);
      // Two correctly rounded QRs of A differ by up to about cond(A) eps: where cond_scaled,
      // the agreement is measured in units of the leading kr x kr block's condition number.
      const double kappa = cond_scaled ? leading_cond(R0, kr) : 1.0;
      const double d = r_distance(R0, R, norm1(A), s.mx, false) / kappa;
      rep.ratio(d, agree_limit, at + " R vs group kernel");
      worst.agree = std::max(worst.agree, d);
      for (int i = 0; i < kr; ++i)
        rep.expect(std::signbit(rb[size_t(i) * n + i]) == std::signbit(r0b[size_t(i) * n + i]),
                   at + " sign of R's diagonal as the group kernel");
      if (s.want_q) {
        Mat Q0 = from_float(ref.q.data() + size_t(b) * s.q_floats(), m, s.qcols);
        Mat Q1 = from_float(qb, m, s.qcols);
        for (size_t i = 0; i < Q1.v.size(); ++i) Q0.v[i] -= Q1.v[i];
        const double dq = norm1(Q0) / (s.mx * kUlp) / kappa;
        rep.ratio(dq, agree_limit, at + " Q vs group kernel");
        worst.agree = std::max(worst.agree, dq);
      }
    }
    if (!s.want_q) {  // R^T R = A^T A (Q-less check), scaled by max(m, n)
      const double x = rtr_ratio(A, R, s.mx);
      rep.ratio(x, kQrLimit, at + " |AtA-RtR|");
      worst.rtr = std::max(worst.rtr, x);
      return;
    }
    worst.add(check_q_factor(rep, at, s, A, qb, R, s.mx));
  });
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

// eig_ratios of (w, v) on A, the residual and the orthogonality checked against limit.
inline EigRatios check_eig_ratios(Report &rep, const std::string &at, const Mat &A, const float *w,
                                  const float *v, double limit) {
  const EigRatios x = eig_ratios(A, w, v);
  rep.ratio(x.resid, limit, at + " |A-VWVt|");
  rep.ratio(x.orth, limit, at + " |I-VtV|");
  return x;
}
// max_i |w_i - ref_i| over n values.
inline double max_abs_diff(const float *w, const std::vector<double> &ref, int n) {
  double err = 0;
  for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(w[i] - ref[i]));
  return err;
}

}  // namespace kt
