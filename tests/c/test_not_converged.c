/* LAPACK's "did not converge" (info > 0) through the C API: with a provider that
 * always reports it (fake_lapack.c, path in argv[1]), every matrix of eigh,
 * eigvalsh, svd and svdvals must come back NaN with ML_INFO_NOT_CONVERGED. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "metal_linalg/metal_linalg.h"
#include "check.h"

enum { B = 2, N = 40 };

static void check_infos(const int32_t *info, const char *what) {
  int i;
  for (i = 0; i < B; ++i)
    CHECK(info[i] & ML_INFO_NOT_CONVERGED, "%s: info[%d] = %d\n", what, i, info[i]);
}

static float a[B * N * N], v[B * N * N], u[B * N * N], vt[B * N * N], w[B * N], s[B * N];

int main(int argc, char **argv) {
  int32_t info[B];
  int i;
  if (argc < 2) {
    fprintf(stderr, "usage: test_not_converged <fake LAPACK library>\n");
    return 2;
  }
  CHECK(ml_set_lapack(argv[1], "", "_") == ML_OK, "set_lapack: %s\n", ml_last_error());
  fake_lapack_setup(a, B * N * N);
  for (i = 0; i < B * N * N; ++i) { /* symmetric: a[j][k] = a[k][j] */
    const int m = i / (N * N), j = (i / N) % N, k = i % N;
    if (k < j) a[i] = a[m * N * N + k * N + j];
  }

  CHECK(ml_eigh(NULL, a, B, N, ML_LOWER, w, v, info) == ML_OK, "eigh: %s\n", ml_last_error());
  check_infos(info, "eigh");
  CHECK(all_nan(w, B * N) && all_nan(v, B * N * N), "eigh outputs not NaN\n");

  CHECK(ml_eigvalsh(NULL, a, B, N, ML_UPPER, w, info) == ML_OK, "eigvalsh: %s\n", ml_last_error());
  check_infos(info, "eigvalsh");
  CHECK(all_nan(w, B * N), "eigvalsh outputs not NaN\n");

  CHECK(ml_svd(NULL, a, B, N, N, 0, u, s, vt, info) == ML_OK, "svd: %s\n", ml_last_error());
  check_infos(info, "svd");
  CHECK(all_nan(u, B * N * N) && all_nan(s, B * N) && all_nan(vt, B * N * N),
        "svd outputs not NaN\n");

  CHECK(ml_svdvals(NULL, a, B, N, N, s, info) == ML_OK, "svdvals: %s\n", ml_last_error());
  check_infos(info, "svdvals");
  CHECK(all_nan(s, B * N), "svdvals outputs not NaN\n");

  printf("%d failures (LAPACK: %s)\n", g_failures, ml_lapack_info());
  return g_failures ? 1 : 0;
}
