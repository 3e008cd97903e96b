// Matrix families of the linear-system tests (test_linsys_kernels.cpp, the one-group kernels;
// test_blocked_linsys.cpp, the blocked steps): general, symmetric positive definite and
// triangular batches mixing well and ill conditioned matrices with failing ones (indefinite,
// singular, NaN / Inf in what the op reads and in what it does not), right-hand sides, and
// LAPACK's info and pivots through the library's CPU path.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "linsys_check.h"

namespace lsk {

using kt::Mat;
constexpr float kNaN = __builtin_nanf("");

struct Batch {
  std::vector<std::string> fams;
  std::vector<float> a, b;  // a: batch m x n, b: batch x_floats (two-input ops)
};

inline void push(Batch &bt, const std::string &fam, const std::vector<float> &a) {
  bt.fams.push_back(fam);
  bt.a.insert(bt.a.end(), a.begin(), a.end());
}

inline std::vector<double> abs_spectrum(const char *kind, int n, std::mt19937_64 &rng) {
  auto s = kt::spectrum(kind, n, rng);
  for (double &x : s) x = std::fabs(x);
  std::sort(s.rbegin(), s.rend());
  return s;
}

inline Mat scaled(Mat a, double f) {
  for (double &x : a.v) x *= f;
  return a;
}

// Ties in every pivot column, with exact arithmetic: A = P L U, U upper with small integers
// (diagonal +-1..4), L unit lower with entries in {-1, 0, 1}, P a random row order. Column k of
// the trailing matrix is L(:, k) U(k, k), its nonzeros tied; L(i, k) is left 0 wherever row
// i would sit above row k at step k (the interchanges followed as LAPACK makes them), so the
// first tied position is always row k's: the multipliers are +-1, every update an exact
// integer, and LAPACK's pivots are the kernels' exactly whatever the order of the arithmetic.
inline Mat ties(int n, std::mt19937_64 &rng) {
  std::uniform_int_distribution<int> t(-1, 1), u(-4, 4), d(1, 4), s(0, 1);
  Mat L(n, n), U(n, n), A(n, n);
  std::vector<int> at(n), row(n);  // at[i]: row i's position; row[p]: the row at position p
  for (int i = 0; i < n; ++i) row[i] = i;
  std::shuffle(row.begin(), row.end(), rng);
  for (int p = 0; p < n; ++p) at[row[p]] = p;
  const std::vector<int> init = at;
  for (int k = 0; k < n; ++k) {
    L(k, k) = 1;
    U(k, k) = d(rng) * (s(rng) ? 1 : -1);
    for (int j = k + 1; j < n; ++j) U(k, j) = u(rng);
    for (int i = k + 1; i < n; ++i) L(i, k) = at[i] < at[k] ? 0 : t(rng);
    const int q = row[k], pk = at[k];  // the interchange of step k: rows k and q
    std::swap(row[k], row[pk]);
    at[q] = pk;
    at[k] = k;
  }
  for (int i = 0; i < n; ++i)  // row i of L U at its initial position
    for (int j = 0; j < n; ++j) {
      double v = 0;
      for (int k = 0; k <= std::min(i, j); ++k) v += L(i, k) * U(k, j);
      A(init[i], j) = v;
    }
  return A;
}

// General n x n matrices (LU, solve, inv): well and ill conditioned (to 1/ulp), nearly
// singular, graded, tiny and huge, exactly singular (a zero row, a zero column), NaN and Inf,
// ties in the pivot columns.
inline Batch general_batch(int n, std::mt19937_64 &rng) {
  Batch bt;
  push(bt, "gaussian", kt::to_float(kt::gaussian(rng, n, n)));
  push(bt, "cond1/ulp", kt::to_float(kt::with_singular_values(rng, n, n,
                                                              abs_spectrum("geometric", n, rng))));
  std::vector<double> ns(n, 1.0);
  ns[n - 1] = 1e-6;
  push(bt, "nearsingular", kt::to_float(kt::with_singular_values(rng, n, n, ns)));
  Mat gr = kt::gaussian(rng, n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      gr(i, j) *= std::pow(1e-6, n > 1 ? double(i) / (n - 1) : 0) *
                  std::pow(1e-3, n > 1 ? double(j) / (n - 1) : 0);
  push(bt, "graded", kt::to_float(gr));
  push(bt, "scale1e-30", kt::to_float(scaled(kt::gaussian(rng, n, n), 1e-30)));
  push(bt, "scale1e30", kt::to_float(scaled(kt::gaussian(rng, n, n), 1e30)));
  // Exactly singular whatever the order of the arithmetic: a zero row stays zero (its
  // multipliers are exact zeros) and meets the last pivot; a zero column is a zero pivot.
  // (A repeated row is singular too, but whether rounding leaves an exact zero pivot depends
  // on the order of the operations: LAPACK's blocked sgetrf and these kernels differ there.)
  Mat zr = kt::gaussian(rng, n, n);
  for (int j = 0; j < n; ++j) zr(n / 3, j) = 0;
  push(bt, "zerorow", kt::to_float(zr));
  Mat zc = kt::gaussian(rng, n, n);
  for (int i = 0; i < n; ++i) zc(i, n / 2) = 0;
  push(bt, "zerocolumn", kt::to_float(zc));
  push(bt, "zero", kt::to_float(Mat(n, n)));
  auto nan = kt::to_float(kt::gaussian(rng, n, n));
  nan[size_t(n) * n / 2] = kNaN;
  push(bt, "nan", nan);
  auto inf = kt::to_float(kt::gaussian(rng, n, n));
  inf[size_t(n) * n - 1] = -INFINITY;
  push(bt, "inf", inf);
  push(bt, "identity", kt::to_float(kt::identity(n)));
  push(bt, "ties", kt::to_float(ties(n, rng)));
  return bt;
}

// Right-hand sides for a batch (n x nrhs or nrhs x n), one gaussian block per matrix, one of
// them with a NaN (on a well-conditioned A) and one with an Inf on a singular A.
inline void add_rhs(Batch &bt, int n, int nrhs, std::mt19937_64 &rng, double huge_b = 1e25) {
  bt.b.clear();
  for (size_t i = 0; i < bt.fams.size(); ++i) {
    auto b = kt::to_float(kt::gaussian(rng, n, nrhs));
    if (bt.fams[i] == "scale1e30") b = kt::to_float(scaled(kt::gaussian(rng, n, nrhs), huge_b));
    bt.b.insert(bt.b.end(), b.begin(), b.end());
  }
  const size_t per = size_t(n) * nrhs;
  Batch extra;
  push(extra, "nan-in-b", kt::to_float(kt::gaussian(rng, n, n)));
  auto b = kt::to_float(kt::gaussian(rng, n, nrhs));
  b[per - 1] = kNaN;
  push(extra, "singular+inf-in-b", kt::to_float(Mat(n, n)));
  auto b2 = kt::to_float(kt::gaussian(rng, n, nrhs));
  b2[0] = INFINITY;
  for (size_t i = 0; i < extra.fams.size(); ++i) bt.fams.push_back(extra.fams[i]);
  bt.a.insert(bt.a.end(), extra.a.begin(), extra.a.end());
  bt.b.insert(bt.b.end(), b.begin(), b.end());
  bt.b.insert(bt.b.end(), b2.begin(), b2.end());
}

// Symmetric positive definite and failing matrices for cholesky.
inline Batch spd_batch(int n, int flags, std::mt19937_64 &rng) {
  Batch bt;
  Mat g = kt::gaussian(rng, n, n);
  Mat spd = kt::matmul(g, kt::transpose(g));
  for (int i = 0; i < n; ++i) spd(i, i) += n;
  push(bt, "gaussian", kt::to_float(spd));
  push(bt, "cond1/ulp", kt::to_float(kt::with_spectrum(rng, abs_spectrum("geometric", n, rng))));
  push(bt, "clustered", kt::to_float(kt::with_spectrum(rng, abs_spectrum("clustered", n, rng))));
  Mat gr = spd;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      gr(i, j) *= std::pow(1e-5, n > 1 ? double(i + j) / (n - 1) : 0);
  push(bt, "graded", kt::to_float(gr));
  push(bt, "scale1e-30", kt::to_float(scaled(spd, 1e-30 / n)));
  push(bt, "scale1e30", kt::to_float(scaled(spd, 1e30 / n)));
  push(bt, "identity", kt::to_float(kt::identity(n)));
  // L0 L0^T with L0 lower triangular, Gaussian below a diagonal near its row's norm: the updates
  // from earlier columns carry about half of every later entry (in "gaussian" the added n I
  // dominates), so an error in a trailing update shows in the residual.
  {
    Mat l0 = kt::gaussian(rng, n, n);
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) l0(i, j) = 0;
      l0(i, i) = std::sqrt(double(i) + 1.0) + 1.0;
    }
    push(bt, "lowerproduct", kt::to_float(kt::matmul(l0, kt::transpose(l0))));
  }
  // Indefinite: the pivot of step k = n / 2 made exactly -1 (A[k][k] set to a^T A11^-1 a - 1).
  {
    const int k = n / 2;
    Mat A = spd;
    // Schur complement of the leading k x k block at (k, k), in double by Cholesky.
    Mat L(k, k);
    for (int j = 0; j < k; ++j) {
      double d = A(j, j);
      for (int l = 0; l < j; ++l) d -= L(j, l) * L(j, l);
      L(j, j) = std::sqrt(d);
      for (int i = j + 1; i < k; ++i) {
        double s = A(i, j);
        for (int l = 0; l < j; ++l) s -= L(i, l) * L(j, l);
        L(i, j) = s / L(j, j);
      }
    }
    std::vector<double> y(k);
    for (int i = 0; i < k; ++i) {
      double s = A(k, i);
      for (int l = 0; l < i; ++l) s -= L(i, l) * y[l];
      y[i] = s / L(i, i);
    }
    double q = 0;
    for (double v : y) q += v * v;
    A(k, k) = q - 0.5 * n;
    push(bt, "indefinite", kt::to_float(A));
  }
  push(bt, "zero", kt::to_float(Mat(n, n)));
  if (n >= 2) {
    Mat d = kt::identity(n);
    d(1, 1) = -1;
    push(bt, "diag(1,-1,..)", kt::to_float(d));
  }
  // NaN in the triangle read, and in the one not read (no effect there).
  const bool upper = flags & ML_LS_UPPER;
  auto nan_read = kt::to_float(spd), nan_unread = kt::to_float(spd), inf_diag = kt::to_float(spd);
  if (n >= 2) {
    nan_read[upper ? 1 : size_t(n)] = kNaN;        // (0,1) upper, (1,0) lower
    nan_unread[upper ? size_t(n) : 1] = kNaN;
    push(bt, "nan-read", nan_read);
    push(bt, "nan-unread", nan_unread);
  }
  inf_diag[size_t(n) * n - 1] = INFINITY;
  push(bt, "inf-diag", inf_diag);
  return bt;
}

// Triangular matrices: a random triangle (its other triangle filled with garbage the kernel
// must not read), graded, tiny and huge, a zero on the diagonal, NaN in the triangle, NaN in
// the other triangle (no effect), NaN on the diagonal under ML_LS_UNIT (not read either).
inline Batch triangular_batch(int n, int flags, std::mt19937_64 &rng) {
  const bool upper = flags & ML_LS_UPPER, unit = flags & ML_LS_UNIT;
  auto tri = [&](double scale) {
    Mat a = kt::gaussian(rng, n, n);
    for (int i = 0; i < n; ++i) {
      a(i, i) = (rng() & 1 ? 1 : -1) * (1.0 + std::fabs(a(i, i)));
      for (int j = 0; j < n; ++j) {
        if (upper ? j > i : j < i) a(i, j) *= 1.0 / std::sqrt(double(n));
        a(i, j) *= scale;
      }
    }
    auto f = kt::to_float(a);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (upper ? j < i : j > i) f[size_t(i) * n + j] = (i + j) % 3 ? 1e30f : kNaN;
    return f;
  };
  Batch bt;
  push(bt, "random", tri(1));
  auto gr = tri(1);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) gr[size_t(i) * n + j] *= float(std::pow(1e-4, double(i) / n));
  push(bt, "graded", gr);
  push(bt, "scale1e-30", tri(1e-30));
  if (!unit) push(bt, "scale1e30", tri(1e30));  // unit: X would overflow
  // Ill-conditioned: off-diagonal entries four times the diagonal's size (Gaussian x 4): the
  // condition grows exponentially with n (1-norm about 4e7 at n = 21, 7e15 at 45, 4e18 at 100),
  // X stays finite for Gaussian B.
  {
    auto ic = tri(1);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (upper ? j > i : j < i) ic[size_t(i) * n + j] *= float(4 * std::sqrt(double(n)));
    push(bt, "illcond", ic);
  }
  auto zd = tri(1);
  zd[size_t(n / 2) * n + n / 2] = 0;  // info n/2 + 1 unless unit
  push(bt, "zerodiag", zd);
  auto nd = tri(1);
  nd[size_t(n - 1) * n + (upper ? n - 1 : 0)] = kNaN;  // in the triangle (or diagonal)
  push(bt, "nan", nd);
  auto dg = tri(1);
  dg[0] = kNaN;  // the diagonal: read unless unit
  push(bt, "nan-diag", dg);
  return bt;
}

// LAPACK's info (and pivots) through the library's CPU path.
inline std::vector<int> lapack_info(const lsk::Shape &s, const Batch &bt, int batch,
                             std::vector<int> *pivots) {
  std::vector<int> info(size_t(batch), -1);
  std::vector<float> x(size_t(batch) * s.x_floats() + 1);
  // LAPACK itself, not the CPU backend's kernels across lanes that small n goes to by default.
  ml_status st = ml_policy_set(s.op, "cpu_kernel_max_n", 0);
  if (st == ML_OK) switch (s.op) {
    case ML_OP_CHOLESKY:
      st = ml_cholesky(nullptr, bt.a.data(), batch, s.n, s.flags, x.data(), info.data());
      break;
    case ML_OP_LU_FACTOR:
      pivots->assign(size_t(batch) * s.k() + 1, 0);
      st = ml_lu_factor(nullptr, bt.a.data(), batch, s.m, s.n, x.data(), pivots->data(),
                        info.data());
      break;
    case ML_OP_SOLVE:
      st = ml_solve(nullptr, bt.a.data(), bt.b.data(), batch, s.n, s.nrhs, s.flags, x.data(),
                    info.data());
      break;
    case ML_OP_INV: st = ml_inv(nullptr, bt.a.data(), batch, s.n, x.data(), info.data()); break;
    default:
      st = ml_solve_triangular(nullptr, bt.a.data(), bt.b.data(), batch, s.n, s.nrhs, s.flags,
                               x.data(), info.data());
  }
  if (st == ML_OK) st = ml_policy_reset(s.op);
  if (st != ML_OK) {
    std::printf("LAPACK reference failed: %s\n", ml_last_error());
    std::exit(1);
  }
  return info;
}

// Checks matrix i of batch bt in o against LAPACK's info want[i] (lsk::check: the ratio, or
// the info and an all-NaN result) and lu_factor's pivots against LAPACK's piv, but for the
// ill-conditioned families: there, candidates within rounding of each other are common, and
// LAPACK's blocked sgetrf rounds differently. Returns check's ratio.
inline double check_matrix(kt::Report &rep, const std::string &at, const Shape &s,
                           const Batch &bt, const Out &o, int i, const std::vector<int> &want,
                           const std::vector<int> &piv) {
  const float *a = bt.a.data() + size_t(i) * s.m * s.n;
  const float *b = two_inputs(s.op) ? bt.b.data() + size_t(i) * s.x_floats() : nullptr;
  const double r = check(rep, at, s, a, b, o, i, want[i]);
  const std::string &fam = bt.fams[i];
  const bool near_ties = fam.rfind("cond", 0) == 0 || fam.rfind("nearsing", 0) == 0;
  if (s.op == ML_OP_LU_FACTOR && want[i] != ML_INFO_LS_NONFINITE && !near_ties) {
    bool same = true;
    for (int k = 0; k < s.k(); ++k)
      same = same && o.piv[size_t(i) * s.k() + k] == piv[size_t(i) * s.k() + k];
    rep.expect(same, at + " pivots as LAPACK's");
  }  return r;
}

}  // namespace lsk
