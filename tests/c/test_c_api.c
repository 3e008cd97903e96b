/* Test of the metal-linalg C API, compiled as strict C99: every function, its
 * error paths, and the correctness of every decomposition on small matrices
 * (LAPACK's test ratios, docs/design.md section 7). Exits non-zero on any failure. */
#define _POSIX_C_SOURCE 200112L /* setenv/unsetenv for the environment overrides */

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metal_linalg/metal_linalg.h"
#include "check.h"

#define EPS ((double)FLT_EPSILON)
/* The outcome bits of an info word, without the sweep count. */
#define FLAGS(info) ((info) & ((1 << ML_INFO_SWEEPS_SHIFT) - 1))

/* ---- small helpers ---- */

static unsigned long g_seed = 12345u;
static float rnd(void) { /* uniform in [-1, 1) */
  g_seed = g_seed * 1103515245u + 12345u;
  return (float)((g_seed >> 8) & 0xFFFFFu) / (float)0x80000 - 1.0f;
}

static float *alloc_f(size_t count) {
  float *p = (float *)malloc((count ? count : 1) * sizeof(float));
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static void fill_random(float *a, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) a[i] = rnd();
}

/* Symmetric matrix from the lower triangle of random data. */
static void fill_symmetric(float *a, int64_t n) {
  int64_t i, j;
  for (i = 0; i < n; ++i)
    for (j = 0; j <= i; ++j) a[i * n + j] = a[j * n + i] = rnd();
}

static double frob(const float *a, int64_t count) {
  double s = 0;
  int64_t i;
  for (i = 0; i < count; ++i) s += (double)a[i] * a[i];
  return sqrt(s);
}

/* ||I - G||_F for the Gram matrix G of k vectors of len floats each, vector i's element r at
 * x[i * vec_stride + r * elem_stride]. */
static double orth_defect(const float *x, int64_t k, int64_t len, int64_t vec_stride,
                          int64_t elem_stride) {
  double s = 0;
  int64_t i, j, r;
  for (i = 0; i < k; ++i)
    for (j = 0; j < k; ++j) {
      double d = (i == j) ? 1.0 : 0.0;
      for (r = 0; r < len; ++r)
        d -= (double)x[i * vec_stride + r * elem_stride] * x[j * vec_stride + r * elem_stride];
      s += d * d;
    }
  return sqrt(s);
}

/* ||I - X^T X||_F for X of rows x cols (columns orthonormal). */
static double orth_cols(const float *x, int64_t rows, int64_t cols) {
  return orth_defect(x, cols, rows, 1, cols);
}

/* ||I - X X^T||_F for X of rows x cols (rows orthonormal). */
static double orth_rows(const float *x, int64_t rows, int64_t cols) {
  return orth_defect(x, rows, cols, cols, 1);
}

/* ||A - U diag(s) W||_F for A rows x cols (row-major), U rows x k (leading dimension ldu) and
 * W k x cols with entry (l, j) at w[l * w_row + j * w_col]. */
static double usw_residual(const float *a, int64_t rows, int64_t cols, int64_t k, const float *u,
                           int64_t ldu, const float *s, const float *w, int64_t w_row,
                           int64_t w_col) {
  double res = 0;
  int64_t i, j, l;
  for (i = 0; i < rows; ++i)
    for (j = 0; j < cols; ++j) {
      double d = a[i * cols + j];
      for (l = 0; l < k; ++l) d -= (double)u[i * ldu + l] * s[l] * w[l * w_row + j * w_col];
      res += d * d;
    }
  return sqrt(res);
}

static int all_finite(const float *p, int64_t count) {
  int64_t i;
  for (i = 0; i < count; ++i)
    if (!(fabsf(p[i]) <= FLT_MAX)) return 0;
  return 1;
}

static int starts_with(const char *s, const char *prefix) {
  return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* An error return: INVALID_ARGUMENT with a message naming the library. */
static void expect_invalid(ml_status st, const char *what) {
  const char *msg = ml_last_error();
  CHECK(st == ML_INVALID_ARGUMENT, "%s: status %d, expected ML_INVALID_ARGUMENT\n", what, (int)st);
  CHECK(msg && strlen(msg) > 0, "%s: empty ml_last_error()\n", what);
  CHECK(starts_with(msg, "[metal_linalg::"), "%s: message '%s'\n", what, msg ? msg : "(null)");
}

static void expect_ok(ml_status st, const char *what) {
  CHECK(st == ML_OK, "%s: status %d: %s\n", what, (int)st, ml_last_error());
  CHECK(strcmp(ml_last_error(), "") == 0, "%s: ml_last_error() not cleared: '%s'\n", what,
        ml_last_error());
}

/* ---- QR ---- */

/* Ratios of one QR: ||A - QR|| / (m ||A|| eps), ||I - Q^T Q|| / (m eps); R triangular. */
static void check_qr_one(const float *a, int64_t m, int64_t n, int32_t mode, const float *q,
                         const float *r, const char *label) {
  const int64_t k = m < n ? m : n;
  const int64_t qc = mode == ML_QR_COMPLETE ? m : k; /* columns of Q, rows of R */
  double res = 0, na = frob(a, m * n);
  int64_t i, j, l;
  for (i = 0; i < qc; ++i)
    for (j = 0; j < n && j < i; ++j)
      CHECK(r[i * n + j] == 0.0f, "%s: R[%ld][%ld] = %g below the diagonal\n", label, (long)i,
            (long)j, r[i * n + j]);
  if (!q) return;
  for (i = 0; i < m; ++i)
    for (j = 0; j < n; ++j) {
      double d = a[i * n + j];
      for (l = 0; l < qc; ++l) d -= (double)q[i * qc + l] * r[l * n + j];
      res += d * d;
    }
  res = sqrt(res) / ((double)m * (na > 0 ? na : 1) * EPS);
  CHECK(res < 30, "%s: QR residual ratio %g\n", label, res);
  res = orth_cols(q, m, qc) / ((double)m * EPS);
  CHECK(res < 30, "%s: Q orthogonality ratio %g\n", label, res);
}

static void test_qr_shape(int64_t batch, int64_t m, int64_t n) {
  const int64_t k = m < n ? m : n;
  float *a = alloc_f((size_t)(batch * m * n));
  float *q = alloc_f((size_t)(batch * m * m));
  float *r = alloc_f((size_t)(batch * m * (n > m ? n : m)));
  float *r_only = alloc_f((size_t)(batch * k * n));
  int32_t *info = (int32_t *)malloc((size_t)batch * sizeof(int32_t));
  char label[96];
  int64_t b;
  int32_t mode;
  fill_random(a, (size_t)(batch * m * n));
  for (mode = 0; mode <= 2; ++mode) {
    const int64_t qc = mode == ML_QR_COMPLETE ? m : k;
    sprintf(label, "qr %ldx%ld batch %ld mode %d", (long)m, (long)n, (long)batch, mode);
    if (mode == ML_QR_R) {
      expect_ok(ml_qr(NULL, a, batch, m, n, ML_QR_R, NULL, r_only, info), label);
      continue;
    }
    expect_ok(ml_qr(NULL, a, batch, m, n, mode, q, r, info), label);
    for (b = 0; b < batch; ++b) {
      check_qr_one(a + b * m * n, m, n, mode, q + b * m * qc, r + b * qc * n, label);
      CHECK((info[b] & (ML_INFO_NONFINITE | ML_INFO_NOT_CONVERGED)) == 0, "%s: info %d\n", label,
            info[b]);
    }
    if (mode == ML_QR_REDUCED) {
      /* R alone is the R of the reduced factorization. */
      double diff = 0;
      int64_t i;
      expect_ok(ml_qr(NULL, a, batch, m, n, ML_QR_R, NULL, r_only, NULL), label);
      for (i = 0; i < batch * k * n; ++i) diff = fmax(diff, fabs((double)r_only[i] - r[i]));
      CHECK(diff <= 1e-5, "%s: R-only differs from reduced R by %g\n", label, diff);
    }
  }
  free(a), free(q), free(r), free(r_only), free(info);
}

static void test_qr(void) {
  test_qr_shape(1, 1, 1);
  test_qr_shape(3, 5, 5);
  test_qr_shape(17, 8, 8);
  test_qr_shape(4, 9, 4);  /* tall */
  test_qr_shape(4, 4, 9);  /* wide */
  test_qr_shape(2, 40, 40);
  test_qr_shape(2, 70, 33);
  test_qr_shape(1, 150, 150); /* a lone large matrix: LAPACK's own threads */
  test_qr_shape(64, 20, 20);  /* spread over the thread pool */
}

/* ---- eigh / eigvalsh ---- */

static void check_eigh_one(const float *sym, int64_t n, const float *w, const float *v,
                           const char *label) {
  double res, na = frob(sym, n * n);
  int64_t i;
  for (i = 1; i < n; ++i) CHECK(w[i - 1] <= w[i], "%s: eigenvalues not ascending at %ld\n", label, (long)i);
  res = usw_residual(sym, n, n, n, v, n, w, v, 1, n) / ((na > 0 ? na : 1) * (double)n * EPS);
  CHECK(res < 60, "%s: eigh residual ratio %g\n", label, res);
  res = orth_cols(v, n, n) / ((double)n * EPS);
  CHECK(res < 60, "%s: eigenvector orthogonality ratio %g\n", label, res);
}

static void test_eigh_shape(int64_t batch, int64_t n) {
  float *a = alloc_f((size_t)(batch * n * n));
  float *sym = alloc_f((size_t)(batch * n * n));
  float *w = alloc_f((size_t)(batch * n)), *w2 = alloc_f((size_t)(batch * n));
  float *v = alloc_f((size_t)(batch * n * n));
  int32_t *info = (int32_t *)malloc((size_t)batch * sizeof(int32_t));
  char label[96];
  int64_t b, i, j;
  int32_t uplo;
  for (b = 0; b < batch; ++b) fill_symmetric(sym + b * n * n, n);
  for (uplo = 0; uplo <= 1; ++uplo) {
    /* The unused triangle holds garbage: only the named one may be read. */
    for (b = 0; b < batch; ++b)
      for (i = 0; i < n; ++i)
        for (j = 0; j < n; ++j) {
          const int used = uplo == ML_LOWER ? j <= i : j >= i;
          a[b * n * n + i * n + j] = used ? sym[b * n * n + i * n + j] : 1e3f * (float)(i + 7 * j + 1);
        }
    sprintf(label, "eigh n=%ld batch %ld uplo %d", (long)n, (long)batch, uplo);
    expect_ok(ml_eigh(NULL, a, batch, n, uplo, w, v, info), label);
    for (b = 0; b < batch; ++b) {
      check_eigh_one(sym + b * n * n, n, w + b * n, v + b * n * n, label);
      CHECK((info[b] & (ML_INFO_NONFINITE | ML_INFO_NOT_CONVERGED)) == 0, "%s: info %d\n", label,
            info[b]);
    }
    expect_ok(ml_eigvalsh(NULL, a, batch, n, uplo, w2, info), label);
    for (i = 0; i < batch * n; ++i) {
      const double tol = 60 * n * EPS * (frob(sym + (i / n) * n * n, n * n) + 1e-30);
      CHECK(fabs((double)w2[i] - w[i]) <= tol, "%s: eigvalsh %g vs eigh %g\n", label, w2[i], w[i]);
    }
  }
  free(a), free(sym), free(w), free(w2), free(v), free(info);
}

static void test_eigh(void) {
  test_eigh_shape(1, 1);
  test_eigh_shape(5, 4);
  test_eigh_shape(33, 8);
  test_eigh_shape(3, 33);
  test_eigh_shape(1, 130);
  test_eigh_shape(64, 16);
}

/* ---- svd / svdvals ---- */

static void check_svd_one(const float *a, int64_t m, int64_t n, const float *u, const float *s,
                          const float *vt, const char *label) {
  const int64_t k = m < n ? m : n;
  const int64_t mx = m > n ? m : n;
  double res, na = frob(a, m * n);
  int64_t i;
  for (i = 0; i < k; ++i) {
    CHECK(s[i] >= 0, "%s: negative singular value %g\n", label, s[i]);
    if (i) CHECK(s[i - 1] >= s[i], "%s: singular values not descending at %ld\n", label, (long)i);
  }
  res = usw_residual(a, m, n, k, u, k, s, vt, n, 1) / ((na > 0 ? na : 1) * (double)mx * EPS);
  CHECK(res < 35, "%s: SVD residual ratio %g\n", label, res);
  res = orth_cols(u, m, k) / ((double)m * EPS);
  CHECK(res < 35, "%s: U orthogonality ratio %g\n", label, res);
  res = orth_rows(vt, k, n) / ((double)n * EPS);
  CHECK(res < 35, "%s: V orthogonality ratio %g\n", label, res);
}

static void test_svd_shape(int64_t batch, int64_t m, int64_t n) {
  const int64_t k = m < n ? m : n;
  float *a = alloc_f((size_t)(batch * m * n));
  float *u = alloc_f((size_t)(batch * m * k)), *vt = alloc_f((size_t)(batch * k * n));
  float *s = alloc_f((size_t)(batch * k)), *s2 = alloc_f((size_t)(batch * k));
  int32_t *info = (int32_t *)malloc((size_t)batch * sizeof(int32_t));
  char label[96];
  int64_t b, i;
  int32_t full;
  fill_random(a, (size_t)(batch * m * n));
  for (full = 0; full <= (m == n ? 1 : 0); ++full) {
    sprintf(label, "svd %ldx%ld batch %ld full %d", (long)m, (long)n, (long)batch, full);
    expect_ok(ml_svd(NULL, a, batch, m, n, full, u, s, vt, info), label);
    for (b = 0; b < batch; ++b) {
      check_svd_one(a + b * m * n, m, n, u + b * m * k, s + b * k, vt + b * k * n, label);
      CHECK((info[b] & (ML_INFO_NONFINITE | ML_INFO_NOT_CONVERGED)) == 0, "%s: info %d\n", label,
            info[b]);
    }
  }
  expect_ok(ml_svdvals(NULL, a, batch, m, n, s2, info), label);
  for (i = 0; i < batch * k; ++i) {
    const double tol = 35 * (double)(m > n ? m : n) * EPS * (s[(i / k) * k] + 1e-30);
    CHECK(fabs((double)s2[i] - s[i]) <= tol, "%s: svdvals %g vs svd %g\n", label, s2[i], s[i]);
  }
  free(a), free(u), free(vt), free(s), free(s2), free(info);
}

static void test_svd(void) {
  test_svd_shape(1, 1, 1);
  test_svd_shape(5, 6, 6);
  test_svd_shape(33, 8, 8);
  test_svd_shape(4, 9, 4); /* tall */
  test_svd_shape(4, 4, 9); /* wide */
  test_svd_shape(2, 1, 5);
  test_svd_shape(2, 5, 1);
  test_svd_shape(2, 70, 40);
  test_svd_shape(1, 140, 140);
  test_svd_shape(64, 12, 12);
}

/* ---- non-finite isolation, scaling, rank, empty batches ---- */

static void test_nonfinite(void) {
  const int64_t n = 6, batch = 4, per = 6 * 6;
  float a[4 * 36], sym[4 * 36], w[4 * 6], v[4 * 36], q[4 * 36], r[4 * 36], u[4 * 36], s[4 * 6],
      vt[4 * 36];
  int32_t info[4];
  int64_t b;
  const char *label = "non-finite isolation";
  fill_random(a, (size_t)(batch * per));
  for (b = 0; b < batch; ++b) fill_symmetric(sym + b * per, n);
  a[1 * per + 7] = (float)NAN;
  a[3 * per + 20] = (float)INFINITY;
  sym[1 * per + 0] = (float)NAN; /* diagonal: read by both triangles */
  sym[3 * per + 1 * n + 0] = sym[3 * per + 0 * n + 1] = -(float)INFINITY;

  expect_ok(ml_eigh(NULL, sym, batch, n, ML_LOWER, w, v, info), label);
  for (b = 0; b < batch; ++b) {
    const int bad = b == 1 || b == 3;
    CHECK(((info[b] & ML_INFO_NONFINITE) != 0) == bad, "eigh: matrix %ld info %d\n", (long)b, info[b]);
    if (bad)
      CHECK(all_nan(w + b * n, n) && all_nan(v + b * per, per), "eigh: matrix %ld not all NaN\n",
            (long)b);
    else
      check_eigh_one(sym + b * per, n, w + b * n, v + b * per, "eigh next to NaN");
  }
  expect_ok(ml_qr(NULL, a, batch, n, n, ML_QR_REDUCED, q, r, info), label);
  for (b = 0; b < batch; ++b) {
    const int bad = b == 1 || b == 3;
    CHECK(((info[b] & ML_INFO_NONFINITE) != 0) == bad, "qr: matrix %ld info %d\n", (long)b, info[b]);
    if (bad)
      CHECK(all_nan(q + b * per, per) && all_nan(r + b * per, per), "qr: matrix %ld not NaN\n", (long)b);
    else
      check_qr_one(a + b * per, n, n, ML_QR_REDUCED, q + b * per, r + b * per, "qr next to NaN");
  }
  expect_ok(ml_svd(NULL, a, batch, n, n, 0, u, s, vt, info), label);
  for (b = 0; b < batch; ++b) {
    const int bad = b == 1 || b == 3;
    CHECK(((info[b] & ML_INFO_NONFINITE) != 0) == bad, "svd: matrix %ld info %d\n", (long)b, info[b]);
    if (bad)
      CHECK(all_nan(u + b * per, per) && all_nan(s + b * n, n) && all_nan(vt + b * per, per),
            "svd: matrix %ld not NaN\n", (long)b);
    else
      check_svd_one(a + b * per, n, n, u + b * per, s + b * n, vt + b * per, "svd next to NaN");
  }
  expect_ok(ml_svdvals(NULL, a, batch, n, n, s, info), label);
  CHECK(all_nan(s + n, n) && all_finite(s, n) && all_nan(s + 3 * n, n) && all_finite(s + 2 * n, n),
        "svdvals: NaN not isolated\n");
  expect_ok(ml_eigvalsh(NULL, sym, batch, n, ML_UPPER, w, info), label);
  CHECK(all_nan(w + n, n) && all_finite(w, n) && all_finite(w + 2 * n, n) && all_nan(w + 3 * n, n),
        "eigvalsh: NaN not isolated\n");
}

/* Results for scale * A equal scale * (results for A) to float accuracy, for
 * scales near underflow and overflow: the library scales by powers of two. */
static void test_scaling(void) {
  const int64_t n = 7, per = 49;
  const float scales[2] = {1e-30f, 1e37f};
  float a[49], sym[49], as[49], syms[49], w[7], ws[7], v[49], s[7], ss[7], u[49], vt[49], q[49],
      r[49], rs[49];
  int32_t info[1];
  int i, t;
  fill_random(a, (size_t)per);
  fill_symmetric(sym, n);
  expect_ok(ml_eigvalsh(NULL, sym, 1, n, ML_LOWER, w, NULL), "scaling base");
  expect_ok(ml_svdvals(NULL, a, 1, n, n, s, NULL), "scaling base");
  expect_ok(ml_qr(NULL, a, 1, n, n, ML_QR_R, NULL, r, NULL), "scaling base");
  for (t = 0; t < 2; ++t) {
    const float c = scales[t];
    char label[64];
    sprintf(label, "scale %g", (double)c);
    for (i = 0; i < per; ++i) as[i] = a[i] * c, syms[i] = sym[i] * c;
    expect_ok(ml_eigh(NULL, syms, 1, n, ML_LOWER, ws, v, info), label);
    CHECK((FLAGS(info[0]) & ~ML_INFO_RANK_DEFICIENT) == 0, "%s: eigh info %d\n", label, info[0]);
    for (i = 0; i < n; ++i)
      CHECK(fabs((double)ws[i] / c - w[i]) <= 60 * n * EPS * fabs((double)w[n - 1]) + 60 * n * EPS * fabs((double)w[0]),
            "%s: eigenvalue %d: %g vs %g\n", label, i, ws[i] / c, w[i]);
    {
      /* Vectors are scale-free: check them against the scaled matrix in double. */
      float back[49];
      for (i = 0; i < per; ++i) back[i] = syms[i] / c;
      for (i = 0; i < n; ++i) ws[i] /= c;
      check_eigh_one(back, n, ws, v, label);
    }
    expect_ok(ml_svd(NULL, as, 1, n, n, 0, u, ss, vt, info), label);
    CHECK((FLAGS(info[0]) & ~ML_INFO_RANK_DEFICIENT) == 0, "%s: svd info %d\n", label, info[0]);
    for (i = 0; i < n; ++i)
      CHECK(fabs((double)ss[i] / c - s[i]) <= 35 * n * EPS * s[0], "%s: singular value %d: %g vs %g\n",
            label, i, ss[i] / c, s[i]);
    CHECK(ss[0] > 0 && ss[n - 1] > 0, "%s: singular values lost (underflow/overflow)\n", label);
    expect_ok(ml_qr(NULL, as, 1, n, n, ML_QR_REDUCED, q, rs, info), label);
    for (i = 0; i < per; ++i)
      CHECK(fabs((double)rs[i] / c - r[i]) <= 30 * n * EPS * frob(r, per), "%s: R[%d] %g vs %g\n", label,
            i, rs[i] / c, r[i]);
    CHECK(orth_cols(q, n, n) / (n * EPS) < 30, "%s: Q not orthogonal\n", label);
  }
}

static void test_rank_and_empty(void) {
  float a[12], q[12], r[12], u[12], s[3], vt[9], w[4];
  int32_t info[2] = {-1, -1};
  int i;
  /* A 4 x 3 matrix whose middle column is zero: R has an exact zero diagonal. */
  fill_random(a, 12);
  for (i = 0; i < 4; ++i) a[i * 3 + 1] = 0.0f;
  expect_ok(ml_qr(NULL, a, 1, 4, 3, ML_QR_REDUCED, q, r, info), "rank qr");
  CHECK(info[0] & ML_INFO_RANK_DEFICIENT, "qr of a rank-deficient matrix: info %d\n", info[0]);
  expect_ok(ml_svd(NULL, a, 1, 4, 3, 0, u, s, vt, info), "rank svd");
  CHECK(info[0] & ML_INFO_RANK_DEFICIENT, "svd of a rank-deficient matrix: info %d\n", info[0]);
  fill_random(a, 12);
  expect_ok(ml_svdvals(NULL, a, 1, 4, 3, s, info), "rank svdvals");
  CHECK((info[0] & ML_INFO_RANK_DEFICIENT) == 0, "full-rank svdvals flagged: info %d\n", info[0]);
  expect_ok(ml_qr(NULL, a, 1, 4, 3, ML_QR_REDUCED, q, r, info), "rank qr full");
  CHECK(FLAGS(info[0]) == 0, "full-rank qr: info %d\n", info[0]);
  /* The zero matrix. */
  memset(a, 0, sizeof a);
  expect_ok(ml_svdvals(NULL, a, 1, 3, 3, s, info), "zero svdvals");
  CHECK(s[0] == 0 && s[1] == 0 && s[2] == 0, "zero matrix: s = %g %g %g\n", s[0], s[1], s[2]);
  expect_ok(ml_eigvalsh(NULL, a, 1, 2, ML_LOWER, w, info), "zero eigvalsh");
  CHECK(w[0] == 0 && w[1] == 0, "zero matrix: w = %g %g\n", w[0], w[1]);

  /* Empty batches are a no-op and may pass NULL buffers. */
  expect_ok(ml_qr(NULL, NULL, 0, 3, 3, ML_QR_REDUCED, NULL, NULL, NULL), "empty qr");
  expect_ok(ml_eigh(NULL, NULL, 0, 3, ML_LOWER, NULL, NULL, NULL), "empty eigh");
  expect_ok(ml_eigvalsh(NULL, NULL, 0, 3, ML_UPPER, NULL, NULL), "empty eigvalsh");
  expect_ok(ml_svd(NULL, NULL, 0, 3, 5, 0, NULL, NULL, NULL, NULL), "empty svd");
  expect_ok(ml_svdvals(NULL, NULL, 0, 5, 3, NULL, NULL), "empty svdvals");
  /* info untouched for an empty batch. */
  info[0] = 77;
  expect_ok(ml_svdvals(NULL, a, 0, 3, 3, s, info), "empty svdvals with info");
  CHECK(info[0] == 77, "empty batch wrote info\n");
}

/* ---- bad arguments ---- */

static void test_bad_arguments(void) {
  float a[16], o1[16], o2[16], o3[16];
  int32_t info[1];
  ml_exec ex;
  memset(a, 0, sizeof a);
  a[0] = a[5] = a[10] = a[15] = 1.0f;

  expect_invalid(ml_qr(NULL, NULL, 1, 4, 4, 0, o1, o2, info), "qr a NULL");
  expect_invalid(ml_qr(NULL, a, 1, 4, 4, 0, NULL, o2, info), "qr q NULL");
  expect_invalid(ml_qr(NULL, a, 1, 4, 4, 0, o1, NULL, info), "qr r NULL");
  expect_invalid(ml_qr(NULL, a, 1, 4, 4, ML_QR_R, o1, o2, info), "qr q given for mode r");
  expect_invalid(ml_qr(NULL, a, 1, 4, 4, 3, o1, o2, info), "qr mode 3");
  expect_invalid(ml_qr(NULL, a, 1, 4, 4, -1, o1, o2, info), "qr mode -1");
  expect_invalid(ml_qr(NULL, a, -1, 4, 4, 0, o1, o2, info), "qr batch -1");
  expect_invalid(ml_qr(NULL, a, 1, 0, 4, 0, o1, o2, info), "qr m 0");
  expect_invalid(ml_qr(NULL, a, 1, 4, 0, 0, o1, o2, info), "qr n 0");
  expect_invalid(ml_qr(NULL, a, 1, -4, 4, 0, o1, o2, info), "qr m -4");
  expect_invalid(ml_qr(NULL, a, 1, 4, -1, 0, o1, o2, info), "qr n -1");
  expect_invalid(ml_qr(NULL, a, (int64_t)1 << 40, (int64_t)1 << 15, (int64_t)1 << 15, 0, o1, o2, info),
                 "qr overflowing sizes");

  expect_invalid(ml_eigh(NULL, NULL, 1, 4, 0, o1, o2, info), "eigh a NULL");
  expect_invalid(ml_eigh(NULL, a, 1, 4, 0, NULL, o2, info), "eigh w NULL");
  expect_invalid(ml_eigh(NULL, a, 1, 4, 0, o1, NULL, info), "eigh v NULL");
  expect_invalid(ml_eigh(NULL, a, 1, 4, 2, o1, o2, info), "eigh uplo 2");
  expect_invalid(ml_eigh(NULL, a, 1, 0, 0, o1, o2, info), "eigh n 0");
  expect_invalid(ml_eigh(NULL, a, -3, 4, 0, o1, o2, info), "eigh batch -3");
  expect_invalid(ml_eigvalsh(NULL, a, 1, 4, -1, o1, info), "eigvalsh uplo -1");
  expect_invalid(ml_eigvalsh(NULL, a, 1, 4, 0, NULL, info), "eigvalsh w NULL");
  expect_invalid(ml_eigvalsh(NULL, NULL, 1, 4, 0, o1, info), "eigvalsh a NULL");
  expect_invalid(ml_eigvalsh(NULL, a, 1, -2, 0, o1, info), "eigvalsh n -2");

  expect_invalid(ml_svd(NULL, NULL, 1, 4, 4, 0, o1, o2, o3, info), "svd a NULL");
  expect_invalid(ml_svd(NULL, a, 1, 4, 4, 0, NULL, o2, o3, info), "svd u NULL");
  expect_invalid(ml_svd(NULL, a, 1, 4, 4, 0, o1, NULL, o3, info), "svd s NULL");
  expect_invalid(ml_svd(NULL, a, 1, 4, 4, 0, o1, o2, NULL, info), "svd vt NULL");
  expect_invalid(ml_svd(NULL, a, 1, 4, 4, 2, o1, o2, o3, info), "svd full_matrices 2");
  expect_invalid(ml_svd(NULL, a, 1, 4, 2, 1, o1, o2, o3, info), "svd full_matrices non-square");
  CHECK(strstr(ml_last_error(), "not implemented") != NULL, "full_matrices message: %s\n",
        ml_last_error());
  expect_invalid(ml_svd(NULL, a, 1, 0, 4, 0, o1, o2, o3, info), "svd m 0");
  expect_invalid(ml_svdvals(NULL, a, 1, 4, 4, NULL, info), "svdvals s NULL");
  expect_invalid(ml_svdvals(NULL, NULL, 1, 4, 4, o1, info), "svdvals a NULL");
  expect_invalid(ml_svdvals(NULL, a, 1, 4, -4, o1, info), "svdvals n -4");

  /* Execution descriptor. */
  memset(&ex, 0, sizeof ex);
  expect_ok(ml_svdvals(&ex, a, 1, 4, 4, o1, info), "zeroed exec");
  ex.memory = 7;
  expect_invalid(ml_svdvals(&ex, a, 1, 4, 4, o1, info), "exec memory 7");
  ex.memory = -1;
  expect_invalid(ml_qr(&ex, a, 1, 4, 4, 0, o1, o2, info), "exec memory -1");
  ex.memory = ML_MEMORY_HOST;
  ex.reserved[2] = 1;
  expect_invalid(ml_eigh(&ex, a, 1, 4, 0, o1, o2, info), "exec reserved");
  ex.reserved[2] = 0;
  if (!ml_backend_available("cuda")) {
    ex.memory = ML_MEMORY_CUDA;
    expect_invalid(ml_eigvalsh(&ex, a, 1, 4, 0, o1, info), "CUDA memory without CUDA");
    expect_invalid(ml_svd(&ex, a, 1, 4, 4, 0, o1, o2, o3, info), "CUDA memory without CUDA (svd)");
  }
  if (!ml_backend_available("metal")) {
    ml_metal_stream ms;
    memset(&ms, 0, sizeof ms);
    ex.memory = ML_MEMORY_METAL;
    ex.stream = &ms;
    expect_invalid(ml_qr(&ex, a, 1, 4, 4, 0, o1, o2, info), "Metal memory without Metal");
    CHECK(strstr(ml_last_error(), "ML_MEMORY_METAL") != NULL, "Metal error names the memory: %s\n",
          ml_last_error());
    ex.stream = NULL;
  }
  ex.memory = ML_MEMORY_HOST;

  /* A failure is reported; the next success clears the message. */
  expect_invalid(ml_svdvals(NULL, a, 1, 4, 4, NULL, info), "svdvals s NULL again");
  expect_ok(ml_svdvals(NULL, a, 1, 4, 4, o1, info), "success after failure");
}

/* ---- queries ---- */

/* ml_output_shape: every op's outputs, in the functions' argument order. */
static void expect_shape(int32_t op, int64_t m, int64_t n, int32_t flags, int32_t index,
                         int32_t ndim, int64_t d0, int64_t d1) {
  int32_t got = -1;
  int64_t dims[2] = {-1, -1};
  expect_ok(ml_output_shape(op, m, n, flags, index, &got, dims), "output_shape");
  CHECK(got == ndim && dims[0] == d0 && dims[1] == d1,
        "output_shape(op %d, %ldx%ld, flags %d, #%d) = %d [%ld, %ld], expected %d [%ld, %ld]\n",
        op, (long)m, (long)n, flags, index, got, (long)dims[0], (long)dims[1], ndim, (long)d0,
        (long)d1);
}

static void test_output_shape(void) {
  int32_t nd;
  int64_t dims[2];
  expect_shape(ML_OP_QR, 5, 3, ML_QR_REDUCED, 0, 2, 5, 3);
  expect_shape(ML_OP_QR, 5, 3, ML_QR_REDUCED, 1, 2, 3, 3);
  expect_shape(ML_OP_QR, 5, 3, ML_QR_COMPLETE, 0, 2, 5, 5);
  expect_shape(ML_OP_QR, 5, 3, ML_QR_COMPLETE, 1, 2, 5, 3);
  expect_shape(ML_OP_QR, 5, 3, ML_QR_R, 0, 0, 0, 0);
  expect_shape(ML_OP_QR, 5, 3, ML_QR_R, 1, 2, 3, 3);
  expect_shape(ML_OP_EIGH, 4, 4, ML_UPPER, 0, 1, 4, 0);
  expect_shape(ML_OP_EIGH, 4, 4, ML_LOWER, 1, 2, 4, 4);
  expect_shape(ML_OP_EIGVALSH, 4, 4, 0, 0, 1, 4, 0);
  expect_shape(ML_OP_EIGVALSH, 4, 4, 0, 1, 0, 0, 0);
  expect_shape(ML_OP_SVD, 2, 7, 0, 0, 2, 2, 2);
  expect_shape(ML_OP_SVD, 2, 7, 0, 1, 1, 2, 0);
  expect_shape(ML_OP_SVD, 2, 7, 0, 2, 2, 2, 7);
  expect_shape(ML_OP_SVD, 6, 6, 1, 0, 2, 6, 6);
  expect_shape(ML_OP_SVDVALS, 7, 2, 0, 0, 1, 2, 0);
  expect_shape(ML_OP_SVDVALS, 7, 2, 0, 1, 0, 0, 0);
  expect_invalid(ml_output_shape(ML_OP_QR, 5, 3, 9, 0, &nd, dims), "output_shape bad qr mode");
  expect_invalid(ml_output_shape(ML_OP_EIGH, 5, 3, 0, 0, &nd, dims), "output_shape eigh 5x3");
  expect_invalid(ml_output_shape(ML_OP_SVD, 5, 3, 1, 0, &nd, dims), "output_shape full non-square");
  expect_invalid(ml_output_shape(ML_OP_COUNT, 5, 3, 0, 0, &nd, dims), "output_shape op count");
  expect_invalid(ml_output_shape(ML_OP_QR, 0, 3, 0, 0, &nd, dims), "output_shape m 0");
  expect_invalid(ml_output_shape(ML_OP_QR, 5, 3, 0, -1, &nd, dims), "output_shape index -1");
  expect_invalid(ml_output_shape(ML_OP_QR, 5, 3, 0, 0, NULL, dims), "output_shape ndim NULL");
}

/* The op table through the C API, and ml_run against the per-op functions (the same call:
 * bitwise equal results on the CPU). */
/* ml_backend of a qr call of 8 m x n host matrices is want. */
static void expect_cpu_route(int64_t m, int64_t n, const char *want, const char *what) {
  const char *got = ml_backend(ML_OP_QR, ML_MEMORY_HOST, m, n, 8);
  CHECK(strcmp(got, want) == 0, "%s: '%s', want '%s'\n", what, got, want);
}

static void test_op_table_and_run(void) {
  const int64_t b = 3, m = 6, n = 4;
  const int64_t sizes[3] = {b, m, n}, sq[3] = {b, n, n};
  float *a = alloc_f((size_t)(b * m * n)), *sym = alloc_f((size_t)(b * n * n));
  float *x[3], *y[3];
  const float *in[1];
  int32_t op, i, nd, dtype, memory;
  int64_t ws;
  char dims[2];
  const char *name;
  for (i = 0; i < 3; ++i) {
    x[i] = alloc_f((size_t)(b * m * m));
    y[i] = alloc_f((size_t)(b * m * m));
  }
  fill_random(a, (size_t)(b * m * n));
  for (i = 0; i < b; ++i) fill_symmetric(sym + i * n * n, n);
  CHECK(ml_op_count() == ML_OP_COUNT, "op count %d\n", ml_op_count());
  for (op = 0; op < ML_OP_COUNT; ++op) {
    CHECK(ml_op_name(op) && ml_op_by_name(ml_op_name(op)) == op, "op %d name round trip\n", op);
    CHECK(ml_output_count(op) >= 1 && ml_output_count(op) <= 3, "op %d outputs\n", op);
  }
  CHECK(strcmp(ml_op_name(ML_OP_SVDVALS), "svdvals") == 0, "svdvals name\n");
  CHECK(ml_op_name(-1) == NULL && ml_op_name(ML_OP_COUNT) == NULL, "invalid op names\n");
  CHECK(ml_op_by_name("no_such_op") == -1 && ml_op_by_name(NULL) == -1, "unknown op name\n");
  expect_ok(ml_output_desc(ML_OP_SVDVALS, 0, 0, &name, &nd, dims, &dtype), "desc svdvals s");
  CHECK(nd == 1 && dims[0] == 'k' && strcmp(name, "s") == 0 && dtype == ML_DTYPE_FLOAT32,
        "svdvals output 0: %d %c %s\n", nd, dims[0], name);
  expect_ok(ml_output_desc(ML_OP_QR, ML_QR_COMPLETE, 0, &name, &nd, dims, NULL), "desc qr q");
  CHECK(nd == 2 && dims[0] == 'm' && dims[1] == 'm' && strcmp(name, "q") == 0, "complete q\n");
  expect_ok(ml_output_desc(ML_OP_QR, ML_QR_REDUCED, 1, NULL, &nd, dims, NULL), "desc qr r");
  CHECK(nd == 2 && dims[0] == 'k' && dims[1] == 'n', "reduced r %c %c\n", dims[0], dims[1]);
  expect_ok(ml_output_desc(ML_OP_QR, ML_QR_R, 0, NULL, &nd, dims, NULL), "desc qr mode r q");
  CHECK(nd == 0, "mode R has no q\n");
  expect_ok(ml_output_desc(ML_OP_SVD, 0, 3, NULL, &nd, dims, NULL), "desc svd #3");
  CHECK(nd == 0, "svd has 3 outputs\n");
  expect_invalid(ml_output_desc(ML_OP_SVDVALS, 1, 0, NULL, &nd, dims, NULL), "desc svdvals 1");
  expect_invalid(ml_output_desc(ML_OP_COUNT, 0, 0, NULL, &nd, dims, NULL), "desc op count");

  in[0] = a;
  expect_ok(ml_qr(NULL, a, b, m, n, ML_QR_REDUCED, x[0], x[1], NULL), "qr");
  expect_ok(ml_run(NULL, ML_OP_QR, in, sizes, ML_QR_REDUCED, y, NULL), "run qr");
  CHECK(memcmp(x[0], y[0], (size_t)(b * m * n) * 4) == 0 &&
            memcmp(x[1], y[1], (size_t)(b * n * n) * 4) == 0, "run qr differs\n");
  expect_ok(ml_svd(NULL, a, b, m, n, 0, x[0], x[1], x[2], NULL), "svd");
  expect_ok(ml_run(NULL, ML_OP_SVD, in, sizes, 0, y, NULL), "run svd");
  CHECK(memcmp(x[1], y[1], (size_t)(b * n) * 4) == 0 &&
            memcmp(x[2], y[2], (size_t)(b * n * n) * 4) == 0, "run svd differs\n");
  /* svdvals: s is the first output at the boundary. */
  expect_ok(ml_svdvals(NULL, a, b, m, n, x[0], NULL), "svdvals");
  {
    float *out1[1];
    out1[0] = y[0];
    expect_ok(ml_run(NULL, ML_OP_SVDVALS, in, sizes, 0, out1, NULL), "run svdvals");
  }
  CHECK(memcmp(x[0], y[0], (size_t)(b * n) * 4) == 0, "run svdvals differs\n");
  in[0] = sym;
  expect_ok(ml_eigh(NULL, sym, b, n, ML_UPPER, x[0], x[1], NULL), "eigh");
  expect_ok(ml_run(NULL, ML_OP_EIGH, in, sq, ML_UPPER, y, NULL), "run eigh");
  CHECK(memcmp(x[0], y[0], (size_t)(b * n) * 4) == 0 &&
            memcmp(x[1], y[1], (size_t)(b * n * n) * 4) == 0, "run eigh differs\n");
  {
    float *rq[2];
    rq[0] = NULL;
    rq[1] = y[1];
    in[0] = a;
    expect_ok(ml_run(NULL, ML_OP_QR, in, sizes, ML_QR_R, rq, NULL), "run qr mode R");
    rq[0] = y[0];
    expect_invalid(ml_run(NULL, ML_OP_QR, in, sizes, ML_QR_R, rq, NULL), "run qr R with q");
    CHECK(strstr(ml_last_error(), "q must be NULL") != NULL, "message: %s\n", ml_last_error());
  }
  expect_invalid(ml_run(NULL, ML_OP_QR, NULL, sizes, 0, y, NULL), "run inputs NULL");
  expect_invalid(ml_run(NULL, ML_OP_QR, in, NULL, 0, y, NULL), "run sizes NULL");
  expect_invalid(ml_run(NULL, ML_OP_QR, in, sizes, 0, NULL, NULL), "run outputs NULL");
  expect_invalid(ml_run(NULL, 11, in, sizes, 0, y, NULL), "run op 11");
  expect_invalid(ml_run(NULL, ML_OP_EIGVALSH, in, sizes, 0, y, NULL), "run eigvalsh 6x4");
  expect_invalid(ml_run(NULL, ML_OP_SVDVALS, in, sizes, 2, y, NULL), "run svdvals flags 2");

  /* ml_plan: one query for where, the workspace and the plan name. */
  memory = -1;
  ws = -1;
  name = NULL;
  expect_ok(ml_plan(NULL, ML_OP_EIGH, sq, ML_LOWER, &memory, &ws, &name), "plan eigh");
  CHECK(memory == ML_MEMORY_HOST && ws == 0 && name != NULL, "plan eigh: %d %ld\n", memory,
        (long)ws);
  {
    char plan_name[128];
    /* valid until the next call: copied before ml_backend */
    snprintf(plan_name, sizeof plan_name, "%s", name ? name : "");
    CHECK(strcmp(plan_name, ml_backend(ML_OP_EIGH, ML_MEMORY_HOST, n, n, b)) == 0,
          "plan eigh name %s\n", plan_name);
  }
  expect_ok(ml_plan(NULL, ML_OP_SVD, sizes, 0, NULL, NULL, NULL), "plan all NULL");
  expect_invalid(ml_plan(NULL, ML_OP_SVD, sizes, 1, &memory, &ws, &name), "plan full 6x4");
  expect_invalid(ml_plan(NULL, ML_OP_SVD, NULL, 0, &memory, &ws, &name), "plan sizes NULL");
  for (i = 0; i < 3; ++i) {
    free(x[i]);
    free(y[i]);
  }
  free(a);
  free(sym);
}

static void test_versions_and_devices(void) {
  const char *name = ml_device_name();
  const char *lapack = ml_lapack_info();
  CHECK(ml_api_version() == ML_API_VERSION, "api version %d\n", ml_api_version());
  CHECK(ml_version_string() && strlen(ml_version_string()) >= 5, "version string '%s'\n",
        ml_version_string());
  CHECK(name && strlen(name) > 0, "empty device name\n");
  CHECK(ml_backend_available("cpu") == 1, "cpu backend unavailable\n");
  CHECK(ml_backend_available("metal") == 0, "metal reported available\n");
  CHECK(ml_backend_available("cuda") == 0 || ml_backend_available("cuda") == 1, "cuda answer\n");
  CHECK(ml_backend_available("tpu") == 0, "unknown backend reported available\n");
  CHECK(ml_backend_available(NULL) == 0, "NULL backend reported available\n");
  CHECK(lapack && strcmp(lapack, "none") != 0, "no LAPACK found: %s\n", lapack ? lapack : "(null)");
}

static void test_workspace_and_backend(void) {
  int64_t bytes = -1;
  int32_t op;
  ml_exec ex;
  memset(&ex, 0, sizeof ex);
  for (op = 0; op < ML_OP_COUNT; ++op) {
    const int64_t m = (op == ML_OP_QR || op == ML_OP_SVD || op == ML_OP_SVDVALS) ? 12 : 8;
    const char *be;
    bytes = -1;
    expect_ok(ml_workspace_size(NULL, op, 10, m, 8, 0, &bytes), "workspace host");
    CHECK(bytes == 0, "host workspace %ld bytes (host calls keep their own scratch)\n", (long)bytes);
    expect_ok(ml_workspace_size(&ex, op, 10, m, 8, 0, &bytes), "workspace host exec");
    be = ml_backend(op, ML_MEMORY_HOST, m, 8, 100);
    CHECK(starts_with(be, "cpu:lapack") || starts_with(be, "cpu:kernel:") || starts_with(be, "cuda:"),
          "backend of op %d: '%s'\n", op, be);
    be = ml_backend(op, ML_MEMORY_HOST, 600, 600, 1);
    CHECK(starts_with(be, "cpu:lapack") || starts_with(be, "cuda:"), "600x600 op %d: '%s'\n", op, be);
  }
  expect_invalid(ml_workspace_size(NULL, ML_OP_QR, 1, 4, 4, 0, NULL), "workspace bytes NULL");
  expect_invalid(ml_workspace_size(NULL, ML_OP_COUNT, 1, 4, 4, 0, &bytes), "workspace op count");
  expect_invalid(ml_workspace_size(NULL, ML_OP_QR, 1, 4, 4, 5, &bytes), "workspace qr mode 5");
  expect_invalid(ml_workspace_size(NULL, ML_OP_SVD, 1, 0, 4, 0, &bytes), "workspace m 0");
  expect_invalid(ml_workspace_size(NULL, ML_OP_EIGH, -1, 4, 4, 0, &bytes), "workspace batch -1");
  ex.reserved[0] = 3;
  expect_invalid(ml_workspace_size(&ex, ML_OP_QR, 1, 4, 4, 0, &bytes), "workspace reserved");

  CHECK(strcmp(ml_backend(-1, ML_MEMORY_HOST, 4, 4, 1), "") == 0, "backend of op -1\n");
  CHECK(strlen(ml_last_error()) > 0, "backend of op -1: no message\n");
  CHECK(strcmp(ml_backend(ML_OP_QR, 5, 4, 4, 1), "") == 0, "backend of memory 5\n");
  CHECK(strcmp(ml_backend(ML_OP_QR, ML_MEMORY_HOST, 0, 4, 1), "") == 0, "backend of m 0\n");
  CHECK(strcmp(ml_backend(ML_OP_EIGH, ML_MEMORY_HOST, 4, 5, 1), "") == 0, "backend of 4x5 eigh\n");
}

static void set_env(const char *name, const char *value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
}

static void test_policy(void) {
  char buf[512], small[8];
  size_t needed = 0, needed2 = 0;
  int32_t op;
  const char *dev = ml_device_name();
  char tuned_source[300];
  sprintf(tuned_source, "tuned:%.280s", dev);

  for (op = 0; op < ML_OP_COUNT; ++op) {
    const char *src = ml_policy_source(op);
    const char *cal = ml_calibration_status(op);
    expect_ok(ml_policy_get(op, buf, sizeof buf, &needed), "policy get");
    CHECK(needed == strlen(buf) + 1, "needed %lu for '%s'\n", (unsigned long)needed, buf);
    CHECK(strstr(buf, "cpu_kernel_max_n=") && strstr(buf, "gpu_min_batch=") &&
              strstr(buf, "gpu_max_n=") && strstr(buf, "host_gpu_min_work="),
          "policy text '%s'\n", buf);
    CHECK(strcmp(src, "default:untuned-device") == 0 || strcmp(src, tuned_source) == 0,
          "op %d source '%s'\n", op, src);
    /* A measured table exists exactly when the source is tuned. */
    CHECK(strcmp(cal, strcmp(src, tuned_source) == 0 ? "tuned" : "untuned") == 0,
          "op %d calibration '%s' with source '%s'\n", op, cal, src);
    /* Truncation: NUL-terminated prefix, full length in needed. */
    expect_ok(ml_policy_get(op, small, sizeof small, &needed2), "policy get small");
    CHECK(needed2 == needed && strlen(small) == sizeof small - 1 && strncmp(small, buf, 7) == 0,
          "truncated policy '%s'\n", small);
    expect_ok(ml_policy_get(op, NULL, 0, &needed2), "policy size query");
    CHECK(needed2 == needed, "size query %lu vs %lu\n", (unsigned long)needed2, (unsigned long)needed);
  }

  /* User settings win, show up in get and source, and steer the backend. */
  expect_ok(ml_policy_set(ML_OP_EIGH, "cpu_kernel_max_n", 0), "policy set");
  expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "policy get after set");
  CHECK(strstr(buf, "cpu_kernel_max_n=0;") != NULL, "after set: '%s'\n", buf);
  CHECK(strcmp(ml_policy_source(ML_OP_EIGH), "user") == 0, "source after set: '%s'\n",
        ml_policy_source(ML_OP_EIGH));
  CHECK(strcmp(ml_backend(ML_OP_EIGH, ML_MEMORY_HOST, 8, 8, 64), "cpu:lapack") == 0 ||
            starts_with(ml_backend(ML_OP_EIGH, ML_MEMORY_HOST, 8, 8, 64), "cuda:"),
        "cpu_kernel_max_n=0 but backend '%s'\n", ml_backend(ML_OP_EIGH, ML_MEMORY_HOST, 8, 8, 64));
  expect_ok(ml_policy_set(ML_OP_EIGH, "gpu_min_batch", 123456), "policy set 2");
  expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "policy get after set 2");
  CHECK(strstr(buf, "gpu_min_batch=123456") != NULL, "after set 2: '%s'\n", buf);
  expect_ok(ml_policy_get(ML_OP_QR, buf, sizeof buf, NULL), "other op unaffected");
  CHECK(strstr(buf, "gpu_min_batch=123456") == NULL, "set leaked into qr: '%s'\n", buf);
  expect_ok(ml_policy_reset(ML_OP_EIGH), "policy reset");
  CHECK(strcmp(ml_policy_source(ML_OP_EIGH), "user") != 0, "source after reset: '%s'\n",
        ml_policy_source(ML_OP_EIGH));
  expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "policy get after reset");
  CHECK(strstr(buf, "gpu_min_batch=123456") == NULL, "reset kept the value: '%s'\n", buf);

  /* The CPU backend's kernel choice follows the policy alone: the register kernel up to
     cpu_small_max_n where it fits (max(m, n) <= 8), the group kernel beyond, LAPACK past
     cpu_kernel_max_n, which core/src/policy.cpp bounds per op (qr: 16). */
  expect_ok(ml_policy_set(ML_OP_QR, "host_gpu_min_work", 0), "qr host data on the CPU");
  expect_ok(ml_policy_set(ML_OP_QR, "cpu_kernel_max_n", 16), "qr kernels to 16");
  expect_cpu_route(6, 6, "cpu:kernel:qr_householder_small", "qr 6x6 by default");
  expect_ok(ml_policy_set(ML_OP_QR, "cpu_small_max_n", 0), "qr register kernels off");
  expect_cpu_route(6, 6, "cpu:kernel:qr_householder", "qr 6x6, cpu_small_max_n 0");
  expect_ok(ml_policy_set(ML_OP_QR, "cpu_small_max_n", 100), "qr register kernels to 100");
  expect_cpu_route(8, 3, "cpu:kernel:qr_householder_small", "qr 8x3, cpu_small_max_n 100");
  expect_cpu_route(12, 12, "cpu:kernel:qr_householder", "qr 12x12, past the register kernel");
  expect_ok(ml_policy_set(ML_OP_QR, "cpu_kernel_max_n", 1000), "qr kernels to 1000");
  expect_cpu_route(20, 20, "cpu:lapack", "qr 20x20, past the kernels' bound");
  expect_ok(ml_policy_get(ML_OP_QR, buf, sizeof buf, NULL), "policy get cpu_small_max_n");
  CHECK(strstr(buf, "cpu_small_max_n=100") != NULL, "cpu_small_max_n missing: '%s'\n", buf);
  expect_ok(ml_policy_reset(ML_OP_QR), "qr policy reset");

  /* The global launch's fields: a device query of a shape beyond every shared-memory window
     names the CPU with gpu_global_max_n 0 and the global plan with it on (CUDA builds), and a
     host workspace query is 0 whatever they say. */
  expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "policy get global");
  CHECK(strstr(buf, ";gpu_global_max_n=") && strstr(buf, ";gpu_global_min_batch="),
        "global fields missing: '%s'\n", buf);
  expect_ok(ml_policy_set(ML_OP_EIGH, "gpu_global_max_n", 0), "global off");
  CHECK(strcmp(ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 300, 300, 4), "cpu:lapack") == 0,
        "global off, eigh 300 device query: '%s'\n",
        ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 300, 300, 4));
  expect_ok(ml_policy_set(ML_OP_EIGH, "gpu_global_max_n", 4096), "global on");
  expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "policy get global on");
  CHECK(strstr(buf, "gpu_global_max_n=4096") != NULL, "after global set: '%s'\n", buf);
  {
    const char *b = ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 300, 300, 4);
    int64_t bytes = -1;
    /* With a CUDA backend the plan is global; without one the CPU. */
    const char *want = ml_backend_available("cuda") ? "cuda:eigh_tridiag_ql/global" : "cpu:lapack";
    CHECK(strcmp(b, want) == 0, "global on, eigh 300 device query: '%s'\n", b);
    expect_ok(ml_workspace_size(NULL, ML_OP_EIGH, 4, 300, 300, 0, &bytes), "host workspace");
    CHECK(bytes == 0, "host workspace with global on: %lld\n", (long long)bytes);
  }
  expect_ok(ml_policy_reset(ML_OP_EIGH), "policy reset global");

  /* gpu_blocked_max_batch: no bound by default (the largest int64), settable per op, and
     with gpu_blocked_min_n it bounds the batch of the blocked path inside the shared window
     (CUDA builds: eigh 100 x1 blocked, x64 the table's kernel). */
  expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "policy get blocked batch");
  CHECK(strstr(buf, ";gpu_blocked_max_batch=") != NULL, "gpu_blocked_max_batch missing: '%s'\n",
        buf);
  expect_ok(ml_policy_get(ML_OP_SVDVALS, buf, sizeof buf, NULL), "policy get blocked batch 2");
  CHECK(strstr(buf, ";gpu_blocked_max_batch=9223372036854775807") != NULL,
        "svdvals gpu_blocked_max_batch not unbounded: '%s'\n", buf);
  expect_ok(ml_policy_set(ML_OP_EIGH, "gpu_blocked_min_n", 64), "blocked from 64");
  expect_ok(ml_policy_set(ML_OP_EIGH, "gpu_blocked_max_batch", 8), "blocked up to batch 8");
  expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "policy get blocked batch set");
  CHECK(strstr(buf, ";gpu_blocked_max_batch=8") != NULL && strstr(buf, "gpu_blocked_min_n=64;"),
        "after gpu_blocked_max_batch set: '%s'\n", buf);
  CHECK(strcmp(ml_policy_source(ML_OP_EIGH), "user") == 0, "blocked batch source '%s'\n",
        ml_policy_source(ML_OP_EIGH));
  if (ml_backend_available("cuda")) {
    CHECK(strcmp(ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 100, 100, 1), "cuda:blocked_eigh") == 0,
          "eigh 100 x1 device: '%s'\n", ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 100, 100, 1));
    CHECK(strcmp(ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 100, 100, 64), "cuda:eigh_tridiag_ql") ==
              0,
          "eigh 100 x64 device: '%s'\n", ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 100, 100, 64));
  }
  expect_ok(ml_policy_reset(ML_OP_EIGH), "policy reset blocked batch");
  set_env("METAL_LINALG_QR_GPU_BLOCKED_MAX_BATCH", "16");
  expect_ok(ml_policy_reload(), "reload with blocked batch env");
  expect_ok(ml_policy_get(ML_OP_QR, buf, sizeof buf, NULL), "get with blocked batch env");
  CHECK(strstr(buf, ";gpu_blocked_max_batch=16") != NULL, "blocked batch env missing: '%s'\n",
        buf);
  CHECK(strcmp(ml_policy_source(ML_OP_QR), "env:METAL_LINALG_QR_GPU_BLOCKED_MAX_BATCH") == 0,
        "blocked batch env source '%s'\n", ml_policy_source(ML_OP_QR));
  set_env("METAL_LINALG_QR_GPU_BLOCKED_MAX_BATCH", NULL);
  expect_ok(ml_policy_reload(), "reload without blocked batch env");

  expect_invalid(ml_policy_set(ML_OP_SVD, "no_such_field", 1), "unknown policy field");
  CHECK(strstr(ml_last_error(), "no_such_field") != NULL, "message names the field: %s\n",
        ml_last_error());
  expect_invalid(ml_policy_set(ML_OP_SVD, NULL, 1), "NULL policy field");
  expect_invalid(ml_policy_set(ML_OP_SVD, "gpu_max_n", -5), "negative policy value");
  expect_invalid(ml_policy_set(ML_OP_COUNT, "gpu_max_n", 5), "policy set op count");
  expect_invalid(ml_policy_get(-1, buf, sizeof buf, &needed), "policy get op -1");
  expect_invalid(ml_policy_get(ML_OP_QR, NULL, 16, &needed), "policy get NULL buf");
  expect_invalid(ml_policy_reset(ML_OP_COUNT), "policy reset op count");
  CHECK(strcmp(ml_policy_source(99), "") == 0 && strlen(ml_last_error()) > 0, "source of op 99\n");
  CHECK(strcmp(ml_calibration_status(-2), "") == 0 && strlen(ml_last_error()) > 0,
        "calibration of op -2\n");

  /* Environment overrides, read at reload. */
  set_env("METAL_LINALG_SVDVALS_GPU_MAX_N", "77");
  expect_ok(ml_policy_reload(), "reload with env");
  expect_ok(ml_policy_get(ML_OP_SVDVALS, buf, sizeof buf, NULL), "get with env");
  CHECK(strstr(buf, "gpu_max_n=77") != NULL, "env override missing: '%s'\n", buf);
  CHECK(strcmp(ml_policy_source(ML_OP_SVDVALS), "env:METAL_LINALG_SVDVALS_GPU_MAX_N") == 0,
        "env source '%s'\n", ml_policy_source(ML_OP_SVDVALS));
  expect_ok(ml_policy_set(ML_OP_SVDVALS, "gpu_max_n", 5), "user over env");
  CHECK(strcmp(ml_policy_source(ML_OP_SVDVALS), "user") == 0, "user over env source '%s'\n",
        ml_policy_source(ML_OP_SVDVALS));
  expect_ok(ml_policy_reset(ML_OP_SVDVALS), "reset over env");
  CHECK(strcmp(ml_policy_source(ML_OP_SVDVALS), "env:METAL_LINALG_SVDVALS_GPU_MAX_N") == 0,
        "env source after reset '%s'\n", ml_policy_source(ML_OP_SVDVALS));
  set_env("METAL_LINALG_SVDVALS_GPU_MAX_N", NULL);
  set_env("METAL_LINALG_QR_BACKEND", "cpu");
  expect_ok(ml_policy_reload(), "reload with backend env");
  CHECK(starts_with(ml_backend(ML_OP_QR, ML_MEMORY_HOST, 16, 16, 100000), "cpu:"),
        "forced cpu backend: '%s'\n", ml_backend(ML_OP_QR, ML_MEMORY_HOST, 16, 16, 100000));
  CHECK(strcmp(ml_policy_source(ML_OP_QR), "env:METAL_LINALG_QR_BACKEND") == 0,
        "backend env source '%s'\n", ml_policy_source(ML_OP_QR));
  set_env("METAL_LINALG_QR_BACKEND", NULL);
  /* Forcing the GPU without one leaves the CPU in charge, and calls still work. */
  set_env("METAL_LINALG_SVDVALS_BACKEND", "gpu");
  expect_ok(ml_policy_reload(), "reload with gpu backend env");
  if (!ml_backend_available("cuda")) {
    float a[4] = {0, 2, 0, 0}, s[2];
    CHECK(starts_with(ml_backend(ML_OP_SVDVALS, ML_MEMORY_HOST, 2, 2, 1), "cpu:"),
          "gpu forced without a GPU: '%s'\n", ml_backend(ML_OP_SVDVALS, ML_MEMORY_HOST, 2, 2, 1));
    expect_ok(ml_svdvals(NULL, a, 1, 2, 2, s, NULL), "svdvals with gpu forced");
    CHECK(s[0] == 2 && s[1] == 0, "svdvals with gpu forced: %g %g\n", s[0], s[1]);
  }
  set_env("METAL_LINALG_SVDVALS_BACKEND", NULL);
  expect_ok(ml_policy_reload(), "reload without env");

  /* The per-machine policy file. */
  {
    const char *path = "test_c_api_tmp.policy";
    FILE *f = fopen(path, "w");
    const char *saved = getenv("METAL_LINALG_POLICY_FILE");
    char saved_copy[1024] = "";
    if (saved) sprintf(saved_copy, "%.1000s", saved);
    CHECK(f != NULL, "cannot write %s\n", path);
    if (f) {
      /* Comments (whole lines, after a value, one naming a device in passing), blank lines and
       * CRLF line ends are fine: the file applies whole. */
      fprintf(f, "# device: %s\n# measured by hand for this test\n\n   \n", dev);
      fprintf(f, "# tuned on device: another machine\neigh gpu_min_batch 4242\r\n");
      fprintf(f, "eigh cpu_kernel_max_n 3   # trailing comment\n\t# indented comment\n");
      fclose(f);
      set_env("METAL_LINALG_POLICY_FILE", path);
      expect_ok(ml_policy_reload(), "reload of a file with comments");
      CHECK(strcmp(ml_policy_file(), path) == 0, "policy file '%s'\n", ml_policy_file());
      expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "get from file");
      CHECK(strstr(buf, "gpu_min_batch=4242") && strstr(buf, "cpu_kernel_max_n=3;"),
            "file values missing: '%s'\n", buf);
      CHECK(strcmp(ml_policy_source(ML_OP_EIGH), tuned_source) == 0, "file source '%s'\n",
            ml_policy_source(ML_OP_EIGH));
      CHECK(strcmp(ml_calibration_status(ML_OP_EIGH), "tuned") == 0, "file calibration '%s'\n",
            ml_calibration_status(ML_OP_EIGH));
      /* A malformed line: the reload fails, names the line and changes nothing (all or none). */
      f = fopen(path, "w");
      if (f) {
        fprintf(f, "eigh gpu_min_batch 777\neigh cpu_kernel_max_n 5\nbogus line here\n");
        fclose(f);
      }
      expect_invalid(ml_policy_reload(), "reload of a file with a malformed line");
      CHECK(strstr(ml_last_error(), "malformed") && strstr(ml_last_error(), "line 3") &&
                strstr(ml_last_error(), "bogus line here"),
            "reload message: %s\n", ml_last_error());
      expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "get after failed reload");
      CHECK(strstr(buf, "gpu_min_batch=4242") && strstr(buf, "cpu_kernel_max_n=3;"),
            "failed reload changed the policy: '%s'\n", buf);
      /* A table for another device is ignored. */
      f = fopen(path, "w");
      if (f) {
        fprintf(f, "# device: Some Other Device 9000\neigh gpu_min_batch 4242\n");
        fclose(f);
      }
      expect_ok(ml_policy_reload(), "reload of another device's file");
      expect_ok(ml_policy_get(ML_OP_EIGH, buf, sizeof buf, NULL), "get other device");
      CHECK(strstr(buf, "gpu_min_batch=4242") == NULL, "other device's table applied: '%s'\n", buf);
      remove(path);
    }
    set_env("METAL_LINALG_POLICY_FILE", saved ? saved_copy : NULL);
    expect_ok(ml_policy_reload(), "reload restored");
  }
  CHECK(strlen(ml_policy_file()) > 0, "empty policy file path\n");
}

static void test_threads(void) {
  const int64_t n = 10, batch = 40, per = 100;
  float *a = alloc_f((size_t)(batch * per)), *w1 = alloc_f((size_t)(batch * n)),
        *w2 = alloc_f((size_t)(batch * n)), *v1 = alloc_f((size_t)(batch * per)),
        *v2 = alloc_f((size_t)(batch * per));
  const int32_t initial = ml_get_cpu_threads();
  int64_t b;
  CHECK(initial >= 1, "cpu threads %d\n", initial);
  for (b = 0; b < batch; ++b) fill_symmetric(a + b * per, n);
  expect_ok(ml_set_cpu_threads(1), "threads 1");
  CHECK(ml_get_cpu_threads() == 1, "threads after set 1: %d\n", ml_get_cpu_threads());
  expect_ok(ml_eigh(NULL, a, batch, n, ML_LOWER, w1, v1, NULL), "eigh 1 thread");
  expect_ok(ml_set_cpu_threads(3), "threads 3");
  CHECK(ml_get_cpu_threads() == 3, "threads after set 3: %d\n", ml_get_cpu_threads());
  expect_ok(ml_eigh(NULL, a, batch, n, ML_LOWER, w2, v2, NULL), "eigh 3 threads");
  /* One matrix per task: the thread count cannot change any result. */
  CHECK(memcmp(w1, w2, (size_t)(batch * n) * sizeof(float)) == 0 &&
            memcmp(v1, v2, (size_t)(batch * per) * sizeof(float)) == 0,
        "results depend on the thread count\n");
  expect_invalid(ml_set_cpu_threads(-1), "threads -1");
  expect_ok(ml_set_cpu_threads(0), "threads 0");
  CHECK(ml_get_cpu_threads() == initial, "threads 0 did not restore the default: %d\n",
        ml_get_cpu_threads());
  free(a), free(w1), free(w2), free(v1), free(v2);
}

static void test_lapack_provider(void) {
  float a[4] = {2, 0, 0, 3}, s[2];
  char saved[1024];
  sprintf(saved, "%.1000s", ml_lapack_info());
  expect_invalid(ml_set_lapack("/no/such/liblapack.so", "", "_"), "set_lapack bad path");
  CHECK(strstr(ml_last_error(), "/no/such/liblapack.so") != NULL, "message names the path: %s\n",
        ml_last_error());
  expect_invalid(ml_set_lapack(NULL, "", "_"), "set_lapack NULL");
  expect_invalid(ml_set_lapack("", "", "_"), "set_lapack empty");
  /* A failed switch keeps the working provider. */
  CHECK(strcmp(ml_lapack_info(), saved) == 0, "provider changed: %s\n", ml_lapack_info());
  expect_ok(ml_svdvals(NULL, a, 1, 2, 2, s, NULL), "svdvals after failed set_lapack");
  CHECK(s[0] == 3 && s[1] == 2, "diag(2,3) singular values %g %g\n", s[0], s[1]);
}

/* Runs the small-matrix tests once more with the portable CPU kernels off, so
 * both CPU paths (kernel and LAPACK) meet the same checks. */
static void set_kernels(int on) {
  int32_t op;
  for (op = 0; op < ML_OP_COUNT; ++op) {
    if (on)
      expect_ok(ml_policy_reset(op), "kernels on");
    else
      expect_ok(ml_policy_set(op, "cpu_kernel_max_n", 0), "kernels off");
  }
}

/* ---- size limits follow each op's arrays and 32-bit LAPACK's reach ---- */

static void test_size_limits(void) {
  const int64_t m = 100000, n = 3;
  float *a = alloc_f((size_t)(m * n)), *q = alloc_f((size_t)(m * n)), *r = alloc_f(9);
  float *u = alloc_f((size_t)(m * n)), *s = alloc_f(3), *vt = alloc_f(9), *s2 = alloc_f(3);
  int64_t bytes = 0;
  int32_t info[1];
  fill_random(a, (size_t)(m * n));
  /* Tall-skinny: 100000 x 3 stores 300000 floats, far within LAPACK's int. */
  expect_ok(ml_qr(NULL, a, 1, m, n, ML_QR_REDUCED, q, r, info), "qr 100000x3");
  check_qr_one(a, m, n, ML_QR_REDUCED, q, r, "qr 100000x3");
  expect_ok(ml_svd(NULL, a, 1, m, n, 0, u, s, vt, info), "svd 100000x3");
  check_svd_one(a, m, n, u, s, vt, "svd 100000x3");
  expect_ok(ml_svdvals(NULL, a, 1, m, n, s2, info), "svdvals 100000x3");
  CHECK(fabsf(s2[0] - s[0]) <= 1e-4f * s[0] && fabsf(s2[2] - s[2]) <= 1e-4f * s[0],
        "svdvals %g %g vs svd %g %g\n", s2[0], s2[2], s[0], s[2]);
  /* The wide transpose (3 x 100000) too. */
  expect_ok(ml_svdvals(NULL, a, 1, n, m, s2, info), "svdvals 3x100000");
  expect_ok(ml_workspace_size(NULL, ML_OP_QR, 1, 1000000, 3, ML_QR_REDUCED, &bytes),
            "workspace qr 10^6 x 3");
  CHECK(strcmp(ml_backend(ML_OP_SVD, ML_MEMORY_HOST, 1000000, 3, 1), "cpu:lapack") == 0,
        "backend of svd 10^6 x 3: %s\n", ml_backend(ML_OP_SVD, ML_MEMORY_HOST, 1000000, 3, 1));
  /* A complete Q of 100000 x 100000 is beyond LAPACK's int: rejected, naming the reason. */
  expect_invalid(ml_qr(NULL, a, 1, m, n, ML_QR_COMPLETE, q, r, info), "qr complete 100000x3");
  CHECK(strstr(ml_last_error(), "32-bit LAPACK") != NULL, "message: %s\n", ml_last_error());
  /* Arrays of more than INT32_MAX elements. */
  expect_invalid(ml_workspace_size(NULL, ML_OP_QR, 1, 46341, 46341, 0, &bytes), "qr 46341^2");
  expect_invalid(ml_workspace_size(NULL, ML_OP_SVD, 1, 3, 1000000000, 0, &bytes), "svd 3x10^9");
  /* Workspaces a 32-bit LAPACK cannot address even though the matrix fits: ssyevd needs
   * 1 + 6n + 2n^2 floats (its own query wraps at n = 32767), sgesdd 4k^2 + 7k + max(m, n). */
  expect_ok(ml_workspace_size(NULL, ML_OP_EIGH, 1, 32766, 32766, 0, &bytes), "eigh 32766");
  expect_invalid(ml_workspace_size(NULL, ML_OP_EIGH, 1, 32767, 32767, 0, &bytes), "eigh 32767");
  CHECK(strstr(ml_last_error(), "workspace") != NULL, "message: %s\n", ml_last_error());
  expect_ok(ml_workspace_size(NULL, ML_OP_EIGVALSH, 1, 40000, 40000, 0, &bytes), "eigvalsh 40000");
  expect_invalid(ml_workspace_size(NULL, ML_OP_SVD, 1, 27000, 27000, 0, &bytes), "svd 27000");
  expect_ok(ml_workspace_size(NULL, ML_OP_SVDVALS, 1, 27000, 27000, 0, &bytes), "svdvals 27000");
  free(a), free(q), free(r), free(u), free(s), free(vt), free(s2);
}

/* Misaligned buffers are refused (they would be misaligned float accesses). */
static void test_alignment(void) {
  float storage[40], w[4];
  const float *bad = (const float *)(const void *)((const char *)storage + 2);
  memset(storage, 0, sizeof storage);
  expect_invalid(ml_eigvalsh(NULL, bad, 1, 4, ML_LOWER, w, NULL), "misaligned a");
  CHECK(strstr(ml_last_error(), "aligned") != NULL, "message: %s\n", ml_last_error());
  expect_invalid(ml_eigvalsh(NULL, storage, 1, 4, ML_LOWER, (float *)((char *)w + 1), NULL),
                 "misaligned w");
}

/* A matrix whose iteration does not converge gives NaN and ML_INFO_NOT_CONVERGED,
 * its neighbours are untouched (the iteration cap is lowered to reach it). */
static void test_not_converged(void) {
  enum { B = 3, N = 12 };
  float a[B * N * N], w[B * N], v[B * N * N], w_ok[B * N], u[B * N * N], s[B * N], vt[B * N * N];
  int32_t info[B], i;
  for (i = 0; i < B; ++i) fill_symmetric(a + i * N * N, N);
  expect_ok(ml_policy_set(ML_OP_EIGH, "cpu_kernel_max_n", 24), "eigh kernels on");
  expect_ok(ml_policy_set(ML_OP_SVD, "cpu_kernel_max_n", 24), "svd kernels on");
  expect_ok(ml_eigh(NULL, a, B, N, ML_LOWER, w_ok, v, info), "eigh default cap");
  for (i = 0; i < B; ++i) CHECK(FLAGS(info[i]) == 0, "eigh converged: info %d\n", info[i]);
  expect_invalid(ml_set_iteration_cap(-1), "iteration cap -1");
  expect_ok(ml_set_iteration_cap(1), "iteration cap 1");
  expect_ok(ml_eigh(NULL, a, B, N, ML_LOWER, w, v, info), "eigh cap 1");
  for (i = 0; i < B; ++i) {
    CHECK(info[i] & ML_INFO_NOT_CONVERGED, "eigh cap 1: info %d\n", info[i]);
    CHECK(all_nan(w + i * N, N) && all_nan(v + i * N * N, N * N), "eigh cap 1: not NaN\n");
  }
  expect_ok(ml_svd(NULL, a, B, N, N, 0, u, s, vt, info), "svd cap 1");
  for (i = 0; i < B; ++i) {
    CHECK(info[i] & ML_INFO_NOT_CONVERGED, "svd cap 1: info %d\n", info[i]);
    CHECK(all_nan(u + i * N * N, N * N) && all_nan(s + i * N, N) && all_nan(vt + i * N * N, N * N),
          "svd cap 1: not NaN\n");
  }
  expect_ok(ml_set_iteration_cap(0), "iteration cap default");
  expect_ok(ml_eigh(NULL, a, B, N, ML_LOWER, w, v, info), "eigh default cap again");
  CHECK(memcmp(w, w_ok, sizeof w) == 0, "eigenvalues differ after the cap is restored\n");
  expect_ok(ml_policy_reset(ML_OP_EIGH), "eigh policy reset");
  expect_ok(ml_policy_reset(ML_OP_SVD), "svd policy reset");
}

/* Settings that are ignored or adjusted warn once, where they take effect; broken policy
 * files (a FIFO, a device, more than 256 valid lines) neither hang nor are misread. */
static void test_warnings(void) {
  char buf[4096], path[256], old_file[1024];
  size_t needed = 0;
  const char *prev = getenv("METAL_LINALG_POLICY_FILE");
  FILE *f;
  int i;
  sprintf(old_file, "%.1000s", prev ? prev : "");
  expect_ok(ml_take_warnings(buf, sizeof buf, &needed), "take warnings (claim)");
  expect_invalid(ml_take_warnings(NULL, 8, &needed), "take warnings NULL buf");
  CHECK(ml_pending_warnings() == 0, "pending %d\n", ml_pending_warnings());

  set_env("METAL_LINALG_QR_GPU_MAX_N", "3abc");
  set_env("METAL_LINALG_SVD_BACKEND", "gpx");
  expect_ok(ml_policy_reload(), "reload with garbage env");
  CHECK(ml_pending_warnings() == 2, "pending %d\n", ml_pending_warnings());
  expect_ok(ml_take_warnings(buf, sizeof buf, &needed), "take warnings");
  CHECK(strstr(buf, "METAL_LINALG_QR_GPU_MAX_N='3abc'") && strstr(buf, "METAL_LINALG_SVD_BACKEND"),
        "warnings: %s\n", buf);
  CHECK(needed > strlen(buf), "needed %lu\n", (unsigned long)needed);
  CHECK(ml_pending_warnings() == 0, "pending after take %d\n", ml_pending_warnings());
  set_env("METAL_LINALG_QR_GPU_MAX_N", NULL);
  set_env("METAL_LINALG_SVD_BACKEND", NULL);
  if (!ml_backend_available("cuda")) {
    set_env("METAL_LINALG_EIGH_BACKEND", "gpu");
    expect_ok(ml_policy_reload(), "reload with BACKEND=gpu");
    expect_ok(ml_take_warnings(buf, sizeof buf, &needed), "take warnings gpu");
    CHECK(strstr(buf, "METAL_LINALG_EIGH_BACKEND=gpu") && strstr(buf, "CPU"), "warning: %s\n", buf);
    set_env("METAL_LINALG_EIGH_BACKEND", NULL);
  }

  /* A FIFO: opening it must not wait for a writer. */
  sprintf(path, "/tmp/ml_test_fifo_%ld", (long)getpid());
  unlink(path);
  if (mkfifo(path, 0600) == 0) {
    set_env("METAL_LINALG_POLICY_FILE", path);
    expect_ok(ml_policy_reload(), "reload FIFO");
    expect_ok(ml_take_warnings(buf, sizeof buf, &needed), "take warnings FIFO");
    CHECK(strstr(buf, "not a regular file") != NULL, "FIFO warning: %s\n", buf);
    unlink(path);
  }
  set_env("METAL_LINALG_POLICY_FILE", "/dev/zero");
  expect_ok(ml_policy_reload(), "reload /dev/zero");
  expect_ok(ml_take_warnings(buf, sizeof buf, &needed), "take warnings /dev/zero");
  CHECK(strstr(buf, "/dev/zero is not a regular file") != NULL, "/dev/zero warning: %s\n", buf);

  /* A file for another device is ignored, with a warning that names both devices. */
  sprintf(path, "/tmp/ml_test_policy_%ld", (long)getpid());
  f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s\n", path);
  if (f) {
    fprintf(f, "# device: Some Other Device 9000\nsvdvals gpu_min_batch 4242\n");
    fclose(f);
    set_env("METAL_LINALG_POLICY_FILE", path);
    expect_ok(ml_policy_reload(), "reload another device's file");
    expect_ok(ml_take_warnings(buf, sizeof buf, &needed), "take warnings other device");
    CHECK(strstr(buf, "is for device 'Some Other Device 9000'") != NULL, "warning: %s\n", buf);
    expect_ok(ml_policy_get(ML_OP_SVDVALS, buf, sizeof buf, &needed), "policy get other device");
    CHECK(strstr(buf, "gpu_min_batch=4242") == NULL, "other device's file applied: %s\n", buf);
    unlink(path);
  }

  /* 300 valid lines: all applied, none called malformed; the last one wins. */
  sprintf(path, "/tmp/ml_test_policy_%ld", (long)getpid());
  f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s\n", path);
  if (f) {
    for (i = 0; i < 300; ++i) fprintf(f, "svdvals gpu_min_batch %d\n", i + 1);
    fclose(f);
    set_env("METAL_LINALG_POLICY_FILE", path);
    expect_ok(ml_policy_reload(), "reload 300 lines");
    expect_ok(ml_policy_get(ML_OP_SVDVALS, buf, sizeof buf, &needed), "policy get 300");
    CHECK(strstr(buf, "gpu_min_batch=300;") != NULL, "policy after 300 lines: %s\n", buf);
    unlink(path);
  }
  set_env("METAL_LINALG_POLICY_FILE", old_file[0] ? old_file : NULL);
  expect_ok(ml_policy_reload(), "reload restored");
  expect_ok(ml_take_warnings(buf, sizeof buf, &needed), "drain");
}

/* Thread counts above 4 x the cores are capped, with a warning. */
static void test_thread_cap(void) {
  char buf[1024];
  const int32_t before = ml_get_cpu_threads();
  expect_ok(ml_take_warnings(buf, sizeof buf, NULL), "drain");
  expect_ok(ml_set_cpu_threads(100000), "threads 100000");
  CHECK(ml_get_cpu_threads() < 100000 && ml_get_cpu_threads() >= 4, "threads %d\n",
        ml_get_cpu_threads());
  expect_ok(ml_take_warnings(buf, sizeof buf, NULL), "take thread warning");
  CHECK(strstr(buf, "set_cpu_threads(100000)") != NULL, "warning: %s\n", buf);
  expect_ok(ml_set_cpu_threads(0), "threads 0");
  CHECK(ml_get_cpu_threads() == before, "threads %d vs %d\n", ml_get_cpu_threads(), before);
}

// CPU-only mode: every memory space names a CPU kernel while on, and results stay right.
static void test_cpu_only(void) {
  const int gpu = ml_backend_available("cuda") || ml_backend_available("metal");
  char before[64];
  snprintf(before, sizeof before, "%s", ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 8, 8, 1024));
  CHECK(ml_cpu_only() == 0, "cpu_only starts on\n");
  ml_set_cpu_only(1);
  CHECK(ml_cpu_only() == 1, "cpu_only did not turn on\n");
  for (int mem = ML_MEMORY_HOST; mem <= ML_MEMORY_METAL; ++mem)
    for (int op = 0; op < ML_OP_COUNT; ++op) {
      const char *name = ml_backend(op, mem, 64, 64, 16384);
      CHECK(starts_with(name, "cpu:"), "cpu_only: op %d memory %d runs %s\n", op, mem, name);
    }
  float a[4] = {2, 1, 1, 2}, w[2], v[4];
  expect_ok(ml_eigh(NULL, a, 1, 2, ML_LOWER, w, v, NULL), "eigh under cpu_only");
  CHECK(fabsf(w[0] - 1) < 1e-5f && fabsf(w[1] - 3) < 1e-5f, "eigh w %g %g\n", w[0], w[1]);
  ml_set_cpu_only(0);
  CHECK(ml_cpu_only() == 0, "cpu_only did not turn off\n");
  const char *after = ml_backend(ML_OP_EIGH, ML_MEMORY_CUDA, 8, 8, 1024);
  CHECK(strcmp(before, after) == 0, "route %s before, %s after\n", before, after);
  CHECK(gpu || ml_gpu_core_count() == 0, "gpu_core_count %d without a GPU\n",
        ml_gpu_core_count());
  CHECK(!ml_backend_available("cuda") || ml_gpu_core_count() > 0, "no SM count on CUDA\n");
}

int main(void) {
  int pass;
  test_versions_and_devices();
  for (pass = 0; pass < 2; ++pass) {
    set_kernels(pass == 0);
    test_qr();
    test_eigh();
    test_svd();
    test_nonfinite();
    test_scaling();
    test_rank_and_empty();
  }
  set_kernels(1);
  test_bad_arguments();
  test_workspace_and_backend();
  test_output_shape();
  test_op_table_and_run();
  test_policy();
  test_threads();
  test_lapack_provider();
  test_size_limits();
  test_alignment();
  test_not_converged();
  test_warnings();
  test_thread_cap();
  test_cpu_only();
  printf("%d checks, %d failures (device: %s; LAPACK: %s)\n", g_checks, g_failures,
         ml_device_name(), ml_lapack_info());
  return g_failures ? 1 : 0;
}
