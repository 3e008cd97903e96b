/* LAPACK providers the core must not trust, through the C API (fake_lapack.c):
 * argv[1], an ILP64 build, is refused by ml_set_lapack with a clear error and the
 * provider in use is kept; argv[2], one that reports illegal arguments (info < 0,
 * in a workspace query or in the computation), makes every op an error, never
 * ML_OK. */
#include <stdio.h>
#include <string.h>

#include "metal_linalg/metal_linalg.h"
#include "check.h"

enum { B = 2, N = 40 };

static float a[B * N * N], out0[B * N * N], out1[B * N * N], out2[B * N * N];

/* An op must fail with ML_RUNTIME_ERROR and name the rejected argument. */
static void expect_rejected(ml_status st, const char *what) {
  CHECK(st == ML_RUNTIME_ERROR, "%s: status %d (%s)\n", what, (int)st, ml_last_error());
  CHECK(strstr(ml_last_error(), "LAPACK rejected argument") != NULL, "%s: message '%s'\n", what,
        ml_last_error());
}

int main(int argc, char **argv) {
  char before[1024];
  int32_t info[B];
  if (argc < 3) {
    fprintf(stderr, "usage: test_lapack_checks <ILP64 fake> <illegal-argument fake>\n");
    return 2;
  }
  fake_lapack_setup(a, B * N * N);

  sprintf(before, "%.1000s", ml_lapack_info());
  CHECK(ml_set_lapack(argv[1], "", "_") == ML_INVALID_ARGUMENT, "ILP64 accepted: %s\n",
        ml_lapack_info());
  CHECK(strstr(ml_last_error(), "ILP64") != NULL && strstr(ml_last_error(), argv[1]) != NULL,
        "ILP64 message: '%s'\n", ml_last_error());
  CHECK(strcmp(ml_lapack_info(), before) == 0, "provider changed to %s\n", ml_lapack_info());

  CHECK(ml_set_lapack(argv[2], "", "_") == ML_OK, "set_lapack: %s\n", ml_last_error());
  CHECK(strstr(ml_lapack_info(), argv[2]) != NULL, "provider: %s\n", ml_lapack_info());
  expect_rejected(ml_qr(NULL, a, B, N, N, ML_QR_REDUCED, out0, out1, info), "qr");
  expect_rejected(ml_qr(NULL, a, B, N, N, ML_QR_R, NULL, out1, info), "qr r");
  expect_rejected(ml_eigh(NULL, a, B, N, ML_LOWER, out0, out1, info), "eigh");
  CHECK(strstr(ml_last_error(), "workspace query") != NULL, "eigh message '%s'\n",
        ml_last_error());
  expect_rejected(ml_eigvalsh(NULL, a, B, N, ML_UPPER, out0, info), "eigvalsh");
  expect_rejected(ml_svd(NULL, a, B, N, N, 0, out0, out1, out2, info), "svd");
  expect_rejected(ml_svdvals(NULL, a, B, N, N, out1, info), "svdvals");
  /* A lone matrix takes another route (LAPACK's own threads where it has them). */
  expect_rejected(ml_svdvals(NULL, a, 1, N, N, out1, info), "svdvals of one matrix");

  printf("%d failures (LAPACK: %s)\n", g_failures, ml_lapack_info());
  return g_failures ? 1 : 0;
}
