/* The linear systems through the C API (strict C99): the op table's rows, argument checks,
 * the host route of device memory, and the CPU path's results (LAPACK's test ratios,
 * docs/design.md section 7: threshold 30 as LAPACK's own tests), with a NaN matrix, a
 * singular or indefinite matrix in each batch: NaN for that matrix only, its info set. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metal_linalg/metal_linalg.h"

static int g_failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      ++g_failures;                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "  [%s]\n", #cond);                  \
    }                                                      \
  } while (0)

#define EPS ((double)FLT_EPSILON)
#define THRESH 30.0
#define N 7
#define R 3
#define B 4
#define LANES "cpu:kernel:linsys_lanes"

static unsigned long g_seed = 777u;
static float rnd(void) { /* uniform in [-1, 1) */
  g_seed = g_seed * 1103515245u + 12345u;
  return (float)((g_seed >> 8) & 0xFFFFFu) / (float)0x80000 - 1.0f;
}

static void expect(ml_status got, ml_status want, const char *what) {
  CHECK(got == want, "%s: status %d, want %d (%s)\n", what, (int)got, (int)want, ml_last_error());
}

/* 1-norm of a rows x cols row-major double matrix. */
static double norm1(const double *a, int rows, int cols) {
  double best = 0;
  int i, j;
  for (j = 0; j < cols; ++j) {
    double s = 0;
    for (i = 0; i < rows; ++i) s += fabs(a[i * cols + j]);
    if (s > best) best = s;
  }
  return best;
}

static double norm1f(const float *a, int rows, int cols) {
  double t[N * N];
  int i;
  for (i = 0; i < rows * cols; ++i) t[i] = a[i];
  return norm1(t, rows, cols);
}

/* c = op(a) * op(b) in double, a rows x inner, b inner x cols (row-major floats). */
static void matmul(const float *a, const float *b, int rows, int inner, int cols, double *c) {
  int i, j, p;
  for (i = 0; i < rows; ++i)
    for (j = 0; j < cols; ++j) {
      double s = 0;
      for (p = 0; p < inner; ++p) s += (double)a[i * inner + p] * b[p * cols + j];
      c[i * cols + j] = s;
    }
}

static int all_nan(const float *x, int count) {
  int i;
  for (i = 0; i < count; ++i)
    if (x[i] == x[i]) return 0;
  return 1;
}

static int any_nan(const float *x, int count) {
  int i;
  for (i = 0; i < count; ++i)
    if (x[i] != x[i]) return 1;
  return 0;
}

/* Symmetric positive definite: G G^T + n I. */
static void spd(float *a) {
  float g[N * N];
  double t[N * N];
  int i;
  for (i = 0; i < N * N; ++i) g[i] = rnd();
  for (i = 0; i < N; ++i) {
    int j, p;
    for (j = 0; j < N; ++j) {
      double s = i == j ? N : 0;
      for (p = 0; p < N; ++p) s += (double)g[i * N + p] * g[j * N + p];
      t[i * N + j] = s;
    }
  }
  for (i = 0; i < N * N; ++i) a[i] = (float)t[i];
}

static void test_table(void) {
  const char *name;
  int32_t nd, dtype, memory;
  char dims[2];
  int64_t d2[2], ws = -1;
  const int64_t sizes[4] = {5, N, N, R};
  const char *plan = NULL;
  int op;
  for (op = ML_OP_CHOLESKY; op <= ML_OP_LU_FACTOR; ++op) {
    /* GPU kernels (core/kernels/linsys_*.h) for device memory; LAPACK's info words. */
    CHECK(ml_op_kernels(op) == 1 && ml_op_linear_system(op) == 1, "op %d: kernels\n", op);
    /* Small host matrices: the kernels across SIMD lanes by default (up to n = 64 for
     * cholesky, 96 for solve_triangular, 128 for the others), LAPACK beyond, and below the
     * batch from which a lane group pays (any up to n = 16, 4 up to 32, 8 up to 64, 16
     * beyond); cpu_kernel_max_n moves the bound, 0 turns them off. Without a CUDA backend,
     * device memory is served through the host (the frontends copy). */
    {
      const int cap = op == ML_OP_CHOLESKY ? 64 : op == ML_OP_SOLVE_TRIANGULAR ? 96 : 128;
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, N, N, 100), LANES) == 0, "op %d: %s\n", op,
            ml_backend(op, ML_MEMORY_HOST, N, N, 100));
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 16, 16, 1), LANES) == 0, "op %d: 16\n", op);
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 17, 17, 3), "cpu:lapack") == 0, "op %d 17\n",
            op);
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 32, 32, 4), LANES) == 0, "op %d: 32\n", op);
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 33, 33, 7), "cpu:lapack") == 0, "op %d 33\n",
            op);
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 33, 33, 8), LANES) == 0, "op %d: 33\n", op);
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, cap, cap, 16), LANES) == 0, "op %d cap\n", op);
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, cap + 1, cap + 1, 1000), "cpu:lapack") == 0,
            "op %d above the cap\n", op);
    }
    CHECK(strcmp(ml_backend(op, ML_MEMORY_CUDA, N, N, 100), LANES) == 0, "op %d cuda\n", op);
    /* ml_backend_rhs: the route with nrhs columns of B, as ml_plan names it; ops without a
     * right-hand side and nrhs < 1 are refused. */
    if (ml_op_inputs(op) > 1) {
      int64_t r;
      for (r = 1; r <= 64; r *= 4) {
        const int64_t rs[4] = {100, 40, 40, r};
        char want[64];
        snprintf(want, sizeof want, "%s", ml_backend_rhs(op, ML_MEMORY_HOST, 40, r, 100));
        expect(ml_plan(NULL, op, rs, 0, NULL, NULL, &plan), ML_OK, "plan nrhs");
        CHECK(strcmp(want, plan) == 0 && strcmp(want, LANES) == 0, "op %d nrhs %lld: %s / %s\n",
              op, (long long)r, want, plan);
      }
      CHECK(strcmp(ml_backend_rhs(op, ML_MEMORY_HOST, 40, 1, 100),
                   ml_backend(op, ML_MEMORY_HOST, 40, 40, 100)) == 0,
            "op %d: one right-hand side as ml_backend\n", op);
      CHECK(ml_backend_rhs(op, ML_MEMORY_HOST, 40, 0, 100)[0] == '\0' &&
                strstr(ml_last_error(), "nrhs") != NULL,
            "op %d: nrhs 0 refused: %s\n", op, ml_last_error());
    } else {
      CHECK(ml_backend_rhs(op, ML_MEMORY_HOST, N, 1, 100)[0] == '\0' &&
                strstr(ml_last_error(), "no right-hand side") != NULL,
            "op %d: no right-hand side: %s\n", op, ml_last_error());
    }
    memory = -1;
    expect(ml_plan(NULL, op, sizes, 0, &memory, &ws, &plan), ML_OK, "plan");
    CHECK(memory == ML_MEMORY_HOST && ws == 0 && strcmp(plan, LANES) == 0, "plan %d %s\n",
          memory, plan);
    expect(ml_policy_set(op, "cpu_kernel_max_n", 8), ML_OK, "policy 8");
    CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 8, 8, 1000), LANES) == 0, "op %d: 8\n", op);
    CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 9, 9, 1000), "cpu:lapack") == 0, "op %d 9\n", op);
    expect(ml_policy_set(op, "cpu_kernel_max_n", 0), ML_OK, "policy 0");
    CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 2, 2, 1000), "cpu:lapack") == 0, "op %d 0\n", op);
    expect(ml_policy_set(op, "cpu_kernel_max_n", 1000), ML_OK, "policy 1000");
    CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, 129, 129, 1000), "cpu:lapack") == 0,
          "op %d cap\n", op);
    expect(ml_policy_reset(op), ML_OK, "policy reset");
  }
  CHECK(ml_op_kernels(ML_OP_QR) == 1 && ml_op_kernels(-1) == 0, "qr has kernels\n");
  CHECK(ml_op_linear_system(ML_OP_QR) == 0 && ml_op_linear_system(-1) == 0 &&
            ml_op_linear_system(ML_OP_COUNT) == 0,
        "qr is no linear system\n");
  CHECK(ml_op_inputs(ML_OP_SOLVE) == 2 && ml_op_inputs(ML_OP_SOLVE_TRIANGULAR) == 2 &&
            ml_op_inputs(ML_OP_CHOLESKY) == 1 && ml_op_inputs(ML_OP_INV) == 1 &&
            ml_op_inputs(ML_OP_QR) == 1 && ml_op_inputs(ML_OP_COUNT) == 0,
        "inputs\n");
  CHECK(ml_op_by_name("solve_triangular") == ML_OP_SOLVE_TRIANGULAR, "by name\n");
  CHECK(strcmp(ml_op_name(ML_OP_CHOLESKY), "cholesky") == 0, "name\n");
  expect(ml_output_desc(ML_OP_SOLVE, 0, 0, &name, &nd, dims, &dtype), ML_OK, "desc solve");
  CHECK(nd == 2 && dims[0] == 'n' && dims[1] == 'r' && strcmp(name, "x") == 0 &&
            dtype == ML_DTYPE_FLOAT32,
        "solve x %c%c\n", dims[0], dims[1]);
  expect(ml_output_desc(ML_OP_SOLVE_TRIANGULAR, ML_LS_RIGHT | ML_LS_UNIT, 0, NULL, &nd, dims,
                        NULL),
         ML_OK, "desc right");
  CHECK(nd == 2 && dims[0] == 'r' && dims[1] == 'n', "right x %c%c\n", dims[0], dims[1]);
  expect(ml_output_dims(ML_OP_SOLVE, sizes, ML_LS_RIGHT, 0, &nd, d2), ML_OK, "dims");
  CHECK(nd == 2 && d2[0] == R && d2[1] == N, "dims %ld %ld\n", (long)d2[0], (long)d2[1]);
  expect(ml_output_dims(ML_OP_CHOLESKY, sizes, ML_LS_UPPER, 0, &nd, d2), ML_OK, "dims chol");
  CHECK(nd == 2 && d2[0] == N && d2[1] == N, "chol dims\n");
  expect(ml_output_shape(ML_OP_SOLVE, N, N, 0, 0, &nd, d2), ML_INVALID_ARGUMENT, "shape solve");
  CHECK(strstr(ml_last_error(), "ml_output_dims") != NULL, "message '%s'\n", ml_last_error());
  expect(ml_output_desc(ML_OP_LU_FACTOR, 0, 1, &name, &nd, dims, &dtype), ML_OK, "desc piv");
  CHECK(nd == 1 && dims[0] == 'k' && strcmp(name, "pivots") == 0 && dtype == ML_DTYPE_INT32,
        "pivots %c %s %d\n", dims[0], name, dtype);
  expect(ml_output_shape(ML_OP_LU_FACTOR, 5, 3, 0, 1, &nd, d2), ML_OK, "shape pivots");
  CHECK(nd == 1 && d2[0] == 3, "pivots of 5 x 3: %ld\n", (long)d2[0]);
  expect(ml_output_shape(ML_OP_INV, N, N, 0, 0, &nd, d2), ML_OK, "shape inv");
  CHECK(nd == 2 && d2[0] == N && d2[1] == N, "inv shape\n");
}

static void test_checks(void) {
  float a[N * N], b[N * R + 1], x[N * N];
  int32_t info[1];
  const int64_t bad_sizes[4] = {1, N, N, 0};
  const float *in[2];
  float *out[1];
  int i;
  for (i = 0; i < N * N; ++i) a[i] = rnd();
  for (i = 0; i <= N * R; ++i) b[i] = rnd();
  in[0] = a;
  in[1] = b;
  out[0] = x;
  expect(ml_cholesky(NULL, a, 1, N, 2, x, info), ML_INVALID_ARGUMENT, "cholesky flags 2");
  CHECK(strstr(ml_last_error(), "ML_LS_UPPER (1)") != NULL, "message '%s'\n", ml_last_error());
  expect(ml_solve(NULL, a, b, 1, N, R, ML_LS_UPPER, x, info), ML_INVALID_ARGUMENT, "solve upper");
  CHECK(strstr(ml_last_error(), "ML_LS_RIGHT (2)") != NULL, "message '%s'\n", ml_last_error());
  expect(ml_solve_triangular(NULL, a, b, 1, N, R, 8, x, info), ML_INVALID_ARGUMENT, "trsm 8");
  expect(ml_inv(NULL, a, 1, N, x, info), ML_OK, "inv");
  expect(ml_run(NULL, ML_OP_INV, in, bad_sizes, 1, out, info), ML_INVALID_ARGUMENT, "inv flags 1");
  expect(ml_run(NULL, ML_OP_SOLVE, in, bad_sizes, 0, out, info), ML_INVALID_ARGUMENT, "nrhs 0");
  CHECK(strstr(ml_last_error(), "nrhs") != NULL, "message '%s'\n", ml_last_error());
  expect(ml_solve(NULL, a, NULL, 1, N, R, 0, x, info), ML_INVALID_ARGUMENT, "b NULL");
  expect(ml_solve(NULL, a, b + 1, 1, N, R, 0, x, info), ML_OK, "b aligned");
  expect(ml_solve(NULL, a, (const float *)((const char *)b + 2), 1, N, R, 0, x, info),
         ML_INVALID_ARGUMENT, "b misaligned");
  expect(ml_solve(NULL, a, NULL, 0, N, R, 0, NULL, NULL), ML_OK, "empty batch");
  expect(ml_cholesky(NULL, a, 1, 0, 0, x, info), ML_INVALID_ARGUMENT, "n 0");
}

static void test_cholesky(void) {
  float a[B * N * N], l[B * N * N];
  int32_t info[B];
  int k, i, j, upper;
  for (upper = 0; upper <= 1; ++upper) {
    for (k = 0; k < B; ++k) spd(a + k * N * N);
    /* Matrix 1: the unread triangle holds garbage and NaN; matrix 2: indefinite at order 3
     * (its read triangle); matrix 3: NaN in the read triangle. */
    for (i = 0; i < N; ++i)
      for (j = 0; j < N; ++j)
        if (upper ? j < i : j > i) a[1 * N * N + i * N + j] = (i + j) % 2 ? NAN : 1e30f;
    a[2 * N * N + 2 * N + 2] = -50.f;
    a[3 * N * N + 4 * N + 4] = NAN;
    expect(ml_cholesky(NULL, a, B, N, upper ? ML_LS_UPPER : 0, l, info), ML_OK, "cholesky");
    CHECK(info[0] == 0 && info[1] == 0 && info[2] == 3 && info[3] == ML_INFO_LS_NONFINITE,
          "infos %d %d %d %d\n", info[0], info[1], info[2], info[3]);
    CHECK(all_nan(l + 2 * N * N, N * N) && all_nan(l + 3 * N * N, N * N), "failed not NaN\n");
    for (k = 0; k < 2; ++k) {
      const float *ak = a + k * N * N, *lk = l + k * N * N;
      float lt[N * N], sym[N * N];
      double prod[N * N], diff[N * N];
      for (i = 0; i < N; ++i)
        for (j = 0; j < N; ++j) {
          lt[i * N + j] = lk[j * N + i];
          /* The symmetric matrix of the read triangle. */
          sym[i * N + j] = (upper ? j >= i : j <= i) ? ak[i * N + j] : ak[j * N + i];
          CHECK((upper ? j < i : j > i) ? lk[i * N + j] == 0.f : 1, "triangle %d %d\n", i, j);
        }
      /* A = L L^T, or U^T U */
      if (upper)
        matmul(lt, lk, N, N, N, prod);
      else
        matmul(lk, lt, N, N, N, prod);
      for (i = 0; i < N * N; ++i) diff[i] = prod[i] - sym[i];
      CHECK(norm1(diff, N, N) / (N * norm1f(sym, N, N) * EPS) < THRESH, "potrf ratio %g\n",
            norm1(diff, N, N) / (N * norm1f(sym, N, N) * EPS));
    }
  }
}

/* ||A X - B|| / (||A|| ||X|| n eps) for left, ||X A - B|| for right. */
static double solve_ratio(const float *a, const float *x, const float *b, int right) {
  double ax[N * R], diff[N * R];
  int i, rows = right ? R : N, cols = right ? N : R;
  if (right)
    matmul(x, a, R, N, N, ax);
  else
    matmul(a, x, N, N, R, ax);
  for (i = 0; i < N * R; ++i) diff[i] = ax[i] - b[i];
  return norm1(diff, rows, cols) / (norm1f(a, N, N) * norm1f(x, rows, cols) * N * EPS);
}

static void test_solve(void) {
  float a[B * N * N], b[B * N * R], x[B * N * R];
  int32_t info[B];
  int k, i, right;
  for (right = 0; right <= 1; ++right) {
    for (i = 0; i < B * N * N; ++i) a[i] = rnd();
    for (i = 0; i < B * N * R; ++i) b[i] = rnd();
    /* Matrix 1: exactly singular (a zero column: an exact zero pivot); matrix 2: NaN in B. */
    for (i = 0; i < N; ++i) a[1 * N * N + i * N + 3] = 0.f;
    b[2 * N * R + 4] = NAN;
    expect(ml_solve(NULL, a, b, B, N, R, right ? ML_LS_RIGHT : 0, x, info), ML_OK, "solve");
    CHECK(info[0] == 0 && info[1] == 4 && info[2] == ML_INFO_LS_NONFINITE &&
              info[3] == 0,
          "infos %d %d %d %d\n", info[0], info[1], info[2], info[3]);
    CHECK(all_nan(x + N * R, N * R) && all_nan(x + 2 * N * R, N * R), "failed not NaN\n");
    for (k = 0; k < B; k += 3) {
      const double ratio = solve_ratio(a + k * N * N, x + k * N * R, b + k * N * R, right);
      CHECK(ratio < THRESH && !any_nan(x + k * N * R, N * R), "solve ratio %g (right %d)\n",
            ratio, right);
    }
  }
}

static void test_inv(void) {
  float a[B * N * N], x[B * N * N];
  int32_t info[B];
  int k, i;
  for (i = 0; i < B * N * N; ++i) a[i] = rnd();
  for (i = 0; i < N; ++i) a[2 * N * N + i * N + 1] = 0.f; /* a zero column: singular */
  a[3 * N * N + 8] = INFINITY;
  expect(ml_inv(NULL, a, B, N, x, info), ML_OK, "inv");
  /* The first zero pivot, U(2,2), whichever one the provider's sgetrf reports. */
  CHECK(info[0] == 0 && info[1] == 0 && info[2] == 2 && info[3] == ML_INFO_LS_NONFINITE,
        "infos %d %d %d %d\n", info[0], info[1], info[2], info[3]);
  CHECK(all_nan(x + 2 * N * N, N * N) && all_nan(x + 3 * N * N, N * N), "failed not NaN\n");
  for (k = 0; k < 2; ++k) {
    double ax[N * N];
    const float *ak = a + k * N * N, *xk = x + k * N * N;
    matmul(ak, xk, N, N, N, ax);
    for (i = 0; i < N; ++i) ax[i * N + i] -= 1.0;
    CHECK(norm1(ax, N, N) / (N * norm1f(ak, N, N) * norm1f(xk, N, N) * EPS) < THRESH,
          "inverse ratio %g\n", norm1(ax, N, N) / (N * norm1f(ak, N, N) * norm1f(xk, N, N) * EPS));
  }
}

static void test_solve_triangular(void) {
  float a[B * N * N], b[B * N * R], x[B * N * R];
  int32_t info[B];
  int flags, k, i, j;
  for (flags = 0; flags < 8; ++flags) {
    const int upper = flags & ML_LS_UPPER, right = flags & ML_LS_RIGHT, unit = flags & ML_LS_UNIT;
    for (i = 0; i < B * N * N; ++i) a[i] = rnd();
    for (i = 0; i < B * N * R; ++i) b[i] = rnd();
    for (k = 0; k < B; ++k)
      for (i = 0; i < N; ++i) a[k * N * N + i * N + i] = unit ? NAN : 2.f + rnd();
    /* The unread triangle: NaN in matrix 0 (ignored); matrix 1: NaN in the read one,
     * matrix 2: a zero on the diagonal (unless unit: then it is not read). */
    for (i = 0; i < N; ++i)
      for (j = 0; j < N; ++j)
        if (upper ? j < i : j > i) a[i * N + j] = NAN;
    a[1 * N * N + (upper ? 1 : N)] = NAN;
    a[2 * N * N + 4 * N + 4] = 0.f;
    expect(ml_solve_triangular(NULL, a, b, B, N, R, flags, x, info), ML_OK, "trsm");
    CHECK(info[0] == 0 && info[1] == ML_INFO_LS_NONFINITE && info[2] == (unit ? 0 : 5) &&
              info[3] == 0,
          "flags %d infos %d %d %d %d\n", flags, info[0], info[1], info[2], info[3]);
    CHECK(all_nan(x + N * R, N * R), "failed not NaN\n");
    for (k = 0; k < B; k += (unit ? 1 : 3)) {
      float t[N * N];
      if (k == 1) continue;
      for (i = 0; i < N; ++i)
        for (j = 0; j < N; ++j)
          t[i * N + j] = i == j ? (unit ? 1.f : a[k * N * N + i * N + j])
                                : (upper ? j > i : j < i) ? a[k * N * N + i * N + j] : 0.f;
      CHECK(solve_ratio(t, x + k * N * R, b + k * N * R, right) < THRESH,
            "trsm flags %d matrix %d ratio %g\n", flags, k,
            solve_ratio(t, x + k * N * R, b + k * N * R, right));
    }
  }
}

/* P L U = A: the rows of A interchanged as the pivots say, against L U. */
static void test_lu_factor(void) {
  static const int shapes[3][2] = {{6, 6}, {7, 4}, {4, 7}};
  float a[B * N * N], lu[B * N * N];
  int32_t piv[B * N], info[B];
  int s, k, i, j, p;
  for (s = 0; s < 3; ++s) {
    const int m = shapes[s][0], n = shapes[s][1], kk = m < n ? m : n;
    for (i = 0; i < B * m * n; ++i) a[i] = rnd();
    for (i = 0; i < m; ++i) a[1 * m * n + i * n + 1] = 0.f; /* U(2,2) = 0: info 2, kept */
    a[2 * m * n + 3] = NAN;
    expect(ml_lu_factor(NULL, a, B, m, n, lu, piv, info), ML_OK, "lu_factor");
    CHECK(info[0] == 0 && info[1] == 2 && info[2] == ML_INFO_LS_NONFINITE && info[3] == 0,
          "%dx%d infos %d %d %d %d\n", m, n, info[0], info[1], info[2], info[3]);
    CHECK(all_nan(lu + 2 * m * n, m * n), "NaN input: LU not NaN\n");
    for (i = 0; i < kk; ++i) CHECK(piv[2 * kk + i] == i + 1, "NaN input pivots\n");
    for (k = 0; k < B; ++k) {
      double pa[N * N], prod[N * N];
      const float *f = lu + k * m * n;
      if (k == 2) continue;
      for (i = 0; i < m * n; ++i) pa[i] = a[k * m * n + i];
      for (i = 0; i < kk; ++i) { /* LAPACK's interchanges, in order */
        const int r = piv[k * kk + i] - 1;
        CHECK(r >= i && r < m, "pivot %d of row %d\n", r, i);
        for (j = 0; j < n; ++j) {
          const double t = pa[i * n + j];
          pa[i * n + j] = pa[r * n + j];
          pa[r * n + j] = t;
        }
      }
      for (i = 0; i < m; ++i)
        for (j = 0; j < n; ++j) {
          double sum = 0;
          for (p = 0; p <= (i < j ? i : j) && p < kk; ++p)
            sum += (p == i ? 1.0 : (double)f[i * n + p]) * (p <= j ? f[p * n + j] : 0.0);
          prod[i * n + j] = sum - pa[i * n + j];
        }
      CHECK(norm1(prod, m, n) / (n * norm1f(a + k * m * n, m, n) * EPS) < THRESH,
            "%dx%d matrix %d: LU ratio %g\n", m, n, k,
            norm1(prod, m, n) / (n * norm1f(a + k * m * n, m, n) * EPS));
    }
  }
}

/* Every linear system through LAPACK (lapack != 0) or the default routing. */
static void route_lapack(int lapack) {
  int op;
  for (op = ML_OP_CHOLESKY; op <= ML_OP_LU_FACTOR; ++op)
    expect(lapack ? ml_policy_set(op, "cpu_kernel_max_n", 0) : ml_policy_reset(op), ML_OK,
           "policy");
}

/* Batches of more than one lane group (and a partial last one) at n = 1, 8, 32, 64, 96 and
 * 128, each op up to its bound: the lanes' pivots and info words equal LAPACK's, their values
 * agree to a few eps of the conditioning (solve_triangular: X A = B, and A X = B with the lower,
 * upper and unit upper triangle). */
#define BL 19
#define NL 128
static void test_lanes_vs_lapack(void) {
  static float a[BL * NL * NL], b[BL * NL * (NL + 3)], x[2][BL * NL * (NL + 3)];
  static int32_t piv[2][BL * NL], info[2][BL];
  static const int ns[6] = {1, 8, 32, 64, 96, NL};
  /* op, flags, right-hand sides (0: n + 3; at n = 32 in two passes) */
  static const int cases[10][3] = {{ML_OP_CHOLESKY, 0, 0},
                                   {ML_OP_SOLVE, 0, 0},
                                   {ML_OP_INV, 0, 0},
                                   {ML_OP_SOLVE_TRIANGULAR, ML_LS_RIGHT, 0},
                                   {ML_OP_SOLVE_TRIANGULAR, 0, 0},
                                   {ML_OP_SOLVE_TRIANGULAR, ML_LS_UPPER, 0},
                                   {ML_OP_SOLVE_TRIANGULAR, ML_LS_UPPER | ML_LS_UNIT, 0},
                                   {ML_OP_SOLVE_TRIANGULAR, 0, 1},
                                   {ML_OP_SOLVE_TRIANGULAR, ML_LS_UPPER, 3},
                                   {ML_OP_LU_FACTOR, 0, 0}};
  int s, i, k, path, op, bad, v;
  for (s = 0; s < 6; ++s) {
    const int n = ns[s], nn = n * n;
    for (v = 0; v < 10; ++v) {
      const int flags = cases[v][1], r = cases[v][2] ? cases[v][2] : n + 3;
      op = cases[v][0];
      if (n > (op == ML_OP_CHOLESKY ? 64 : op == ML_OP_SOLVE_TRIANGULAR ? 96 : 128)) continue;
      CHECK(strcmp(ml_backend(op, ML_MEMORY_HOST, n, n, BL), LANES) == 0, "op %d n %d: %s\n",
            op, n, ml_backend(op, ML_MEMORY_HOST, n, n, BL));
      for (i = 0; i < BL * nn; ++i) a[i] = rnd();
      for (i = 0; i < BL * n * r; ++i) b[i] = rnd();
      for (k = 0; k < BL; ++k)
        for (i = 0; i < n; ++i) a[k * nn + i * n + i] += op == ML_OP_LU_FACTOR ? 0.f : 2.f * n;
      if (op == ML_OP_CHOLESKY)
        for (k = 0; k < BL; ++k)
          for (i = 0; i < nn; ++i) a[k * nn + i] = a[k * nn + (i % n) * n + i / n];
      /* matrix 17: NaN (the last group's second) where the op reads it */
      if (n > 1) a[17 * nn + (flags & ML_LS_UPPER ? n - 1 : nn - 1)] = NAN;
      for (path = 0; path < 2; ++path) {
        route_lapack(path);
        for (i = 0; i < BL * NL * (NL + 3); ++i) x[path][i] = 7.f;
        switch (op) {
          case ML_OP_CHOLESKY:
            expect(ml_cholesky(NULL, a, BL, n, 0, x[path], info[path]), ML_OK, "chol");
            break;
          case ML_OP_SOLVE:
            expect(ml_solve(NULL, a, b, BL, n, r, 0, x[path], info[path]), ML_OK, "solve");
            break;
          case ML_OP_INV: expect(ml_inv(NULL, a, BL, n, x[path], info[path]), ML_OK, "inv"); break;
          case ML_OP_SOLVE_TRIANGULAR:
            expect(ml_solve_triangular(NULL, a, b, BL, n, r, flags, x[path], info[path]),
                   ML_OK, "trsm");
            break;
          default:
            expect(ml_lu_factor(NULL, a, BL, n, n, x[path], piv[path], info[path]), ML_OK, "lu");
        }
      }
      route_lapack(0);
      {
        const int count = BL * (op == ML_OP_SOLVE || op == ML_OP_SOLVE_TRIANGULAR ? r * n : nn);
        double err = 0, scale = 0;
        bad = 0;
        for (k = 0; k < BL; ++k) bad |= info[0][k] != info[1][k];
        if (op == ML_OP_LU_FACTOR)
          for (i = 0; i < BL * n; ++i) bad |= piv[0][i] != piv[1][i];
        CHECK(!bad, "op %d (%d) n %d: info or pivots differ\n", op, v, n);
        CHECK(n == 1 || (info[0][17] == ML_INFO_LS_NONFINITE && all_nan(x[0] + 17 * count / BL,
                                                                         count / BL)),
              "op %d (%d) n %d: NaN matrix\n", op, v, n);
        for (i = 0; i < count; ++i) {
          if (n > 1 && i / (count / BL) == 17) continue;
          err = fmax(err, fabs((double)x[0][i] - x[1][i]));
          scale = fmax(scale, fabs((double)x[1][i]));
        }
        CHECK(err <= 64 * n * EPS * scale && scale > 0,
              "op %d (%d) n %d: lanes vs LAPACK %g of %g\n", op, v, n, err, scale);
      }
    }
  }
}

int main(void) {
  int path;
  test_table();
  test_checks();
  for (path = 0; path < 2; ++path) { /* the lanes (default), then LAPACK */
    route_lapack(path);
    test_lu_factor();
    test_cholesky();
    test_solve();
    test_inv();
    test_solve_triangular();
  }
  route_lapack(0);
  test_lanes_vs_lapack();
  printf("%d failures (LAPACK: %s)\n", g_failures, ml_lapack_info());
  return g_failures ? 1 : 0;
}
