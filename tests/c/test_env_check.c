/* Settings that would fail silently warn once, at the first use of the core: an unknown
 * METAL_LINALG_* variable (naming the closest valid one) and a policy file that does not exist.
 * Usage: test_env_check <dir for a policy file> [clean]; clean: only valid settings and an
 * existing policy file, so no warning at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metal_linalg/metal_linalg.h"
#include "check.h"

int setenv(const char *name, const char *value, int overwrite); /* POSIX, hidden by -std=c99 */


static int count(const char *text, const char *needle) {
  int n = 0;
  const char *p = text;
  while ((p = strstr(p, needle)) != NULL) ++n, p += strlen(needle);
  return n;
}

/* The core's first use (the warnings are taken before it, to claim them, and after it, into
 * buf). */
static void first_use(char *buf, size_t size) {
  CHECK(ml_take_warnings(buf, size, NULL) == ML_OK, "claim\n");
  CHECK(ml_device_name() != NULL, "device name\n");
  CHECK(ml_take_warnings(buf, size, NULL) == ML_OK, "take\n");
}

int main(int argc, char **argv) {
  static char buf[16384];
  char missing[1024], present[1024];
  FILE *f;
  if (argc < 2) {
    fprintf(stderr, "usage: test_env_check <dir> [clean]\n");
    return 2;
  }
  snprintf(missing, sizeof missing, "%s/no-such-dir/m.policy", argv[1]);
  snprintf(present, sizeof present, "%s/env_check_present.policy", argv[1]);
  f = fopen(present, "w");
  CHECK(f != NULL, "cannot write %s\n", present);
  if (f) fclose(f);

  if (argc > 2 && strcmp(argv[2], "clean") == 0) {
    setenv("METAL_LINALG_QR_BACKEND", "cpu", 1);
    setenv("METAL_LINALG_EIGVALSH_GPU_LANE_MAX_N", "0", 1);
    setenv("METAL_LINALG_POLICY_FILE", present, 1);
    first_use(buf, sizeof buf);
    CHECK(!strstr(buf, "is not a metal_linalg setting") && !strstr(buf, "does not exist"),
          "warned about valid settings:\n%s", buf);
    if (g_failures == 0) printf("0 failures\n");
    return g_failures ? 1 : 0;
  }

  /* Before the core's first use: a typo, a name far from any setting, valid names. */
  setenv("METAL_LINALG_EIGH_CPU_KERNEL_MAXN", "4", 1);
  setenv("METAL_LINALG_CPU_THREAD", "2", 1);
  setenv("METAL_LINALG_QR_BACKEND", "cpu", 1);
  setenv("METAL_LINALG_SVD_GPU_BLOCKED_MIN_N", "0", 1);
  setenv("METAL_LINALG_NO_CALIBRATION_NOTICE", "1", 1);
  setenv("METAL_LINALG_POLICY_FILE", missing, 1);
  first_use(buf, sizeof buf);
  CHECK(strstr(buf, "METAL_LINALG_EIGH_CPU_KERNEL_MAXN is not a metal_linalg setting") &&
            strstr(buf, "closest is METAL_LINALG_EIGH_CPU_KERNEL_MAX_N)"),
        "typo not named with its correction:\n%s", buf);
  CHECK(strstr(buf, "METAL_LINALG_CPU_THREAD is not") &&
            strstr(buf, "closest is METAL_LINALG_CPU_THREADS)"),
        "second typo:\n%s", buf);
  CHECK(!strstr(buf, "METAL_LINALG_QR_BACKEND") && !strstr(buf, "SVD_GPU_BLOCKED_MIN_N") &&
            !strstr(buf, "NO_CALIBRATION_NOTICE is not"),
        "a valid setting was reported:\n%s", buf);
  CHECK(count(buf, "does not exist") == 1 && strstr(buf, missing),
        "missing policy file not reported once:\n%s", buf);

  /* Once per process: reloading the policy or a second look repeats none of it. */
  CHECK(ml_policy_reload() == ML_OK, "reload\n");
  CHECK(ml_take_warnings(buf, sizeof buf, NULL) == ML_OK, "take again\n");
  CHECK(!strstr(buf, "is not a metal_linalg setting") && !strstr(buf, "does not exist"),
        "repeated:\n%s", buf);
  if (g_failures == 0) printf("0 failures\n");
  return g_failures ? 1 : 0;
}
