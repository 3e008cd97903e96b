// The linear-system kernels (core/kernels/linsys_*.h) through the CPU runner: one call of a
// kernel-table line on a batch, and the LAPACK-style ratios of docs/design.md section 7 in
// double. Shared by test_kernel_table.cpp (every table line) and test_linsys.cpp (the hard
// families, info and pivots against LAPACK).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../../core/kernels/compat_cpu.h"
#include "../../core/kernels/kernel_table.h"
#include "kernel_runner.h"
#include "kernel_test_util.h"
#include "metal_linalg/metal_linalg.h"

namespace lsk {

constexpr double kLimit = kt::kLinsysLimit;  // docs/design.md section 7 (LAPACK's own)

// The arguments every entry of the table receives (as the backends pass them: B in out2).
struct Args {
  ml_params p;
  const float *a;
  float *o0, *o1, *o2;
  int *info;
};

// One line of the table as the tests call it.
struct Line {
  const char *name;
  int op;
  bool simd;  // a SIMD line: one simdgroup (32 lanes, or 16 for n <= 16) per matrix
  int (*scratch)(int, int, int);
  int (*fits)(int, int, int, int);
  int (*choose)(int, int, int, int);
  ml::kernel_runner::Kernel run;
};

constexpr bool is_linsys(int op) {
  return op == ML_OP_CHOLESKY || op == ML_OP_SOLVE || op == ML_OP_INV ||
         op == ML_OP_SOLVE_TRIANGULAR || op == ML_OP_LU_FACTOR;
}

// The linear-system lines only: the other lines' kernels sit in a discarded branch, so a program
// that calls table() compiles none of them (test_kernel_table.cpp runs every line itself).
#define LSK_RUN(op, fn, outs)                                  \
  [](const ml_ctx &ctx, void *u) {                             \
    if constexpr (is_linsys(op)) {                             \
      Args &x = *static_cast<Args *>(u);                       \
      float *o0 = x.o0, *o1 = x.o1, *o2 = x.o2;                \
      (void)o0, (void)o1, (void)o2;                            \
      fn(ctx, x.p, x.a, ML_KERNEL_OUTS_##outs, x.info);        \
    } else {                                                   \
      (void)ctx, (void)u;                                      \
    }                                                          \
  }
#define LSK_SIMD_GROUP false
#define LSK_SIMD_REGISTER false
#define LSK_SIMD_SIMD true
#define LSK_LINE(name, op, fn, outs, kind, scratch, fits, choose) \
  {#name, op, LSK_SIMD_##kind, scratch, fits, choose, LSK_RUN(op, fn, outs)},
inline const std::vector<Line> &table() {
  static const std::vector<Line> all = [] {
    const Line lines[] = {ML_KERNEL_TABLE(LSK_LINE)};
    std::vector<Line> v;
    for (const Line &l : lines)
      if (is_linsys(l.op)) v.push_back(l);
    return v;
  }();
  return all;
}
#undef LSK_LINE
#undef LSK_RUN
#undef LSK_SIMD_GROUP
#undef LSK_SIMD_REGISTER
#undef LSK_SIMD_SIMD

inline bool two_inputs(int op) { return op == ML_OP_SOLVE || op == ML_OP_SOLVE_TRIANGULAR; }

// The lines of op (a linear-system op) in the table, in order.
inline std::vector<const Line *> lines_of(int op) {
  std::vector<const Line *> out;
  for (const Line &l : table())
    if (l.op == op) out.push_back(&l);
  return out;
}

// A call: m x n A (m = n but for lu_factor), nrhs right-hand sides, flags (ml_ls_flag bits).
struct Shape {
  int op, m, n, nrhs, flags;
  int64_t x_floats() const {  // the result per matrix
    if (op == ML_OP_LU_FACTOR || op == ML_OP_CHOLESKY || op == ML_OP_INV) return int64_t(m) * n;
    return int64_t(n) * nrhs;
  }
  int k() const { return std::min(m, n); }
};

struct Out {
  std::vector<float> x;
  std::vector<int> piv, info;
};

// Runs line l on a batch (a: batch m x n, b: batch x_floats) at group size gs, with the flags
// its choose_flags picks for scratch_budget (the backends' sequence).
inline Out run(const Line &l, const Shape &s, const std::vector<float> &a,
               const std::vector<float> &b, int batch, int gs, int scratch_budget) {
  Out o;
  o.x.assign(size_t(batch * s.x_floats()) + 1, -7.f);
  o.piv.assign(size_t(batch * s.k()) + 1, -7);
  o.info.assign(size_t(batch), -1);
  const int km = two_inputs(s.op) ? s.nrhs : s.m;
  const int kflags = l.choose(km, s.n, s.flags, scratch_budget);
  Args x{{km, s.n, kflags, 0, batch, 0},
         a.data(),
         o.x.data(),
         reinterpret_cast<float *>(o.piv.data()),
         two_inputs(s.op) ? const_cast<float *>(b.data()) : nullptr,
         o.info.data()};
  ml::kernel_runner::run(gs, batch, l.scratch(km, s.n, kflags), l.run, &x);
  return o;
}

// ---- ratios in double (1-norms) ----
inline kt::Mat sub(const kt::Mat &a, const kt::Mat &b) {
  kt::Mat o = a;
  for (size_t i = 0; i < o.v.size(); ++i) o.v[i] -= b.v[i];
  return o;
}
// The symmetric matrix the cholesky of flags reads from a.
inline kt::Mat chol_input(const float *a, int n, int flags) {
  return kt::read_symmetric(a, n, !(flags & ML_LS_UPPER));
}
// ||A - L L^T|| / (n ||A|| ulp) with L the output (or U^T under ML_LS_UPPER); -1 when the
// other triangle is not exactly zero.
inline double chol_ratio(const kt::Mat &A, const float *out, int n, int flags) {
  const bool upper = flags & ML_LS_UPPER;
  kt::Mat L(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const double v = out[i * n + j];
      if (upper ? j < i : j > i) {
        if (v != 0.0) return -1;
      } else if (upper) {
        L(j, i) = v;
      } else {
        L(i, j) = v;
      }
    }
  const double an = kt::norm1(A);
  const double r = kt::norm1(sub(A, kt::matmul(L, kt::transpose(L))));
  return an > 0 ? r / (n * an * kt::kUlp) : r;
}
// ||P A - L U|| / (max(m, n) ||A|| ulp), pivots 1-based (LAPACK's).
inline double lu_ratio(const kt::Mat &A, const float *lu, const int *piv, int m, int n) {
  const int k = std::min(m, n);
  kt::Mat PA = A, L(m, k), U(k, n);
  for (int i = 0; i < k; ++i) {
    const int p = piv[i] - 1;
    if (p < i || p >= m) return 1e30;
    for (int j = 0; j < n; ++j) std::swap(PA(i, j), PA(p, j));
  }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double v = lu[i * n + j];
      if (j < i && j < k) L(i, j) = v;
      if (i < k && j >= i) U(i, j) = v;
    }
  for (int i = 0; i < k; ++i) L(i, i) = 1;
  const double an = kt::norm1(A);
  const double r = kt::norm1(sub(PA, kt::matmul(L, U)));
  return an > 0 ? r / (std::max(m, n) * an * kt::kUlp) : r;
}
// ||op(A) X - B|| / (||A|| ||X|| n ulp), op(A) X = A X (or X A under right).
inline double solve_ratio(const kt::Mat &A, const kt::Mat &X, const kt::Mat &B, bool right) {
  const int n = A.r;
  const kt::Mat AX = right ? kt::matmul(X, A) : kt::matmul(A, X);
  const double d = kt::norm1(A) * kt::norm1(X) * n * kt::kUlp;
  const double r = kt::norm1(sub(AX, B));
  return d > 0 ? r / d : r;
}
// ||A X - I|| / (n ||A|| ||X|| ulp).
inline double inv_ratio(const kt::Mat &A, const kt::Mat &X) {
  return solve_ratio(A, X, kt::identity(A.r), false);
}
// The triangle solve_triangular reads from a (unit: ones on the diagonal).
inline kt::Mat triangle(const float *a, int n, int flags) {
  kt::Mat T(n, n);
  const bool upper = flags & ML_LS_UPPER, unit = flags & ML_LS_UNIT;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i == j) T(i, j) = unit ? 1.0 : a[i * n + j];
      else if (upper ? j > i : j < i) T(i, j) = a[i * n + j];
  return T;
}

// Checks matrix `i` of a batch against its input (a_i, b_i: pointers into the batch) given the
// info it should have: 0 -> the op's ratio; otherwise the info and, but for lu_factor's
// singular matrices, an all-NaN result. Returns the ratio (0 for failing matrices).
inline double check(kt::Report &rep, const std::string &at, const Shape &s, const float *a,
                    const float *b, const Out &o, int i, int want_info) {
  const int n = s.n, m = s.m;
  const float *x = o.x.data() + i * s.x_floats();
  const int got = o.info[i];
  rep.expect(got == want_info, at + " info " + std::to_string(got) + " want " +
                                   std::to_string(want_info));
  const bool keep = s.op == ML_OP_LU_FACTOR && want_info != ML_INFO_LS_NONFINITE;
  if (want_info != 0 && !keep) {
    rep.expect(kt::all_nan(x, size_t(s.x_floats())), at + " all NaN");
    if (s.op == ML_OP_LU_FACTOR)
      for (int k = 0; k < s.k(); ++k)
        rep.expect(o.piv[size_t(i) * s.k() + k] == k + 1, at + " pivots 1..k");
    return 0;
  }
  double r = 0;
  const char *what = "";
  switch (s.op) {
    case ML_OP_CHOLESKY:
      r = chol_ratio(chol_input(a, n, s.flags), x, n, s.flags);
      what = " |A-LLt|";
      rep.expect(r >= 0, at + " other triangle zero");
      break;
    case ML_OP_LU_FACTOR:
      r = lu_ratio(kt::from_float(a, m, n), x, o.piv.data() + size_t(i) * s.k(), m, n);
      what = " |PA-LU|";
      break;
    case ML_OP_INV:
      r = inv_ratio(kt::from_float(a, n, n), kt::from_float(x, n, n));
      what = " |AX-I|";
      break;
    default: {
      const bool right = s.flags & ML_LS_RIGHT;
      const int rows = right ? s.nrhs : n, cols = right ? n : s.nrhs;
      const kt::Mat A = s.op == ML_OP_SOLVE ? kt::from_float(a, n, n) : triangle(a, n, s.flags);
      r = solve_ratio(A, kt::from_float(x, rows, cols), kt::from_float(b, rows, cols), right);
      what = right ? " |XA-B|" : " |AX-B|";
    }
  }
  rep.ratio(r, kLimit, at + what);
  return r;
}

}  // namespace lsk
