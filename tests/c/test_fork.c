/* fork() while other threads compute, through the C API: one thread loops eigh on a
 * 200 x 200 matrix (LAPACK, on its own threads with two or more CPU threads), another
 * on a batch of small matrices (the portable kernels on the thread pool). The main
 * thread forks; each child computes both and exits; the parent's threads must go on.
 * alarm() bounds every process, so a hang fails the test instead of stalling it. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "metal_linalg/metal_linalg.h"

enum { BIG = 200, SMALL = 6, BATCH = 64, ROUNDS = 4 };

static float big[BIG * BIG], small[BATCH * SMALL * SMALL];
static float ref_big[BIG], ref_small[BATCH * SMALL];
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_stop = 0, g_done[2], g_bad[2]; /* under g_mutex */

static void symmetric(float *a, int n, unsigned seed) {
  int i, j;
  for (i = 0; i < n; ++i)
    for (j = 0; j <= i; ++j) {
      seed = seed * 1103515245u + 12345u;
      a[i * n + j] = a[j * n + i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    }
}

/* Eigenvalues of the big matrix (slot 0) or of the small batch (slot 1), compared bit for bit;
 * w and v hold BATCH * SMALL and BIG * BIG floats. */
static int compute(int slot, float *w, float *v) {
  if (slot == 0)
    return ml_eigh(NULL, big, 1, BIG, ML_LOWER, w, v, NULL) == ML_OK &&
           memcmp(w, ref_big, sizeof ref_big) == 0;
  return ml_eigh(NULL, small, BATCH, SMALL, ML_LOWER, w, v, NULL) == ML_OK &&
         memcmp(w, ref_small, sizeof ref_small) == 0;
}

static int counted(int slot) {
  int n;
  pthread_mutex_lock(&g_mutex);
  n = slot < 0 ? g_stop : g_done[slot];
  pthread_mutex_unlock(&g_mutex);
  return n;
}

static void *loop(void *arg) {
  const int slot = *(const int *)arg;
  float *w = malloc(BATCH * SMALL * sizeof(float)), *v = malloc(BIG * BIG * sizeof(float));
  while (w && v && !counted(-1)) {
    const int ok = compute(slot, w, v);
    pthread_mutex_lock(&g_mutex);
    g_bad[slot] += !ok;
    ++g_done[slot];
    pthread_mutex_unlock(&g_mutex);
  }
  if (!w || !v) g_bad[slot] = -1;
  free(w), free(v);
  return NULL;
}

static void pause_ms(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, NULL);
}

int main(void) {
  static float w[BATCH * SMALL], v[BIG * BIG];
  pthread_t threads[2];
  int slots[2] = {0, 1}, seen[2], i, failures = 0;
  alarm(120);
  symmetric(big, BIG, 1u);
  for (i = 0; i < BATCH; ++i) symmetric(small + i * SMALL * SMALL, SMALL, 7u + (unsigned)i);
  if (ml_eigh(NULL, big, 1, BIG, ML_LOWER, ref_big, v, NULL) != ML_OK ||
      ml_eigh(NULL, small, BATCH, SMALL, ML_LOWER, ref_small, v, NULL) != ML_OK) {
    fprintf(stderr, "reference eigh failed: %s\n", ml_last_error());
    return 1;
  }
  printf("routes: %s, %s; %d CPU threads\n", ml_backend(ML_OP_EIGH, ML_MEMORY_HOST, BIG, BIG, 1),
         ml_backend(ML_OP_EIGH, ML_MEMORY_HOST, SMALL, SMALL, BATCH), ml_get_cpu_threads());
  for (i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, loop, &slots[i]);
  while (counted(0) < 2 || counted(1) < 2) pause_ms(1);

  for (i = 0; i < ROUNDS; ++i) {
    int status = 0;
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      /* More threads than the parent may have had: the child's own pool and LAPACK threads. */
      _exit(compute(0, w, v) && compute(1, w, v) && ml_set_cpu_threads(2) == ML_OK &&
                    compute(1, w, v) && compute(0, w, v)
                ? 0
                : 3);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      fprintf(stderr, "FAIL: child %d: status %d\n", i, status);
      ++failures;
    }
    pause_ms(5);
  }

  seen[0] = counted(0), seen[1] = counted(1);
  while (counted(0) <= seen[0] || counted(1) <= seen[1]) pause_ms(1);
  pthread_mutex_lock(&g_mutex);
  g_stop = 1;
  pthread_mutex_unlock(&g_mutex);
  for (i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  if (g_bad[0] || g_bad[1]) { /* the threads are joined: no lock needed */
    fprintf(stderr, "FAIL: %d and %d results differ\n", g_bad[0], g_bad[1]);
    ++failures;
  }
  printf("%d failures (%d and %d calls in the parent's threads)\n", failures, g_done[0],
         g_done[1]);
  return failures ? 1 : 0;
}
