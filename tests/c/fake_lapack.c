/* Fake LAPACK providers for the C API tests; real LAPACKs reach these outcomes too
 * rarely (or, for a wrong integer width, too destructively) to test.
 *
 * Default (test_not_converged.c): the eigen- and singular value drivers always
 * report that their iteration failed to converge (info > 0). Workspace queries
 * (lwork = -1) answer 1; sgeqrf/sorgqr succeed without computing anything.
 *
 * FAKE_LAPACK_ILP64 (test_lapack_checks.c): the same with 64-bit integers, as an
 * ILP64 build (symbols ending in _64_) has; the core must refuse it at load.
 *
 * FAKE_LAPACK_ILLEGAL (test_lapack_checks.c): every computation reports an illegal
 * argument (info = -4), and ssyevd's workspace query one too (info = -8). */
#include <stddef.h>

#if defined(FAKE_LAPACK_ILP64)
typedef long long lint;
#else
typedef int lint;
#endif

#if defined(FAKE_LAPACK_ILLEGAL)
enum { kComputeInfo = -4, kQueryInfo = -8 };
#endif

/* QR's routines: a workspace query (lwork -1) answers one float; the computation does nothing
 * (info 0, or kComputeInfo where illegal arguments are reported). */
static void qr_routine(const lint *lwork, float *work, lint *info) {
  *info = 0;
  if (*lwork == -1) {
    work[0] = 1.0f;
    return;
  }
#if defined(FAKE_LAPACK_ILLEGAL)
  *info = kComputeInfo;
#endif
}

void sgeqrf_(const lint *m, const lint *n, float *a, const lint *lda, float *tau, float *work,
             const lint *lwork, lint *info) {
  (void)m, (void)n, (void)a, (void)lda, (void)tau;
  qr_routine(lwork, work, info);
}

void sorgqr_(const lint *m, const lint *n, const lint *k, float *a, const lint *lda,
             const float *tau, float *work, const lint *lwork, lint *info) {
  (void)m, (void)n, (void)k, (void)a, (void)lda, (void)tau;
  qr_routine(lwork, work, info);
}

void ssyevd_(const char *jobz, const char *uplo, const lint *n, float *a, const lint *lda,
             float *w, float *work, const lint *lwork, lint *iwork, const lint *liwork,
             lint *info, size_t jobz_len, size_t uplo_len) {
  (void)jobz, (void)uplo, (void)a, (void)lda, (void)liwork, (void)jobz_len, (void)uplo_len;
  if (*lwork == -1) {
    work[0] = 1.0f;
    iwork[0] = 1;
#if defined(FAKE_LAPACK_ILLEGAL)
    *info = kQueryInfo;
#else
    *info = 0;
#endif
    return;
  }
  w[0] = 1.0f; /* garbage that must not reach the caller */
#if defined(FAKE_LAPACK_ILLEGAL)
  *info = kComputeInfo;
#else
  *info = *n; /* "the algorithm failed to converge" */
#endif
}

void sgesdd_(const char *jobz, const lint *m, const lint *n, float *a, const lint *lda, float *s,
             float *u, const lint *ldu, float *vt, const lint *ldvt, float *work,
             const lint *lwork, lint *iwork, lint *info, size_t jobz_len) {
  (void)jobz, (void)m, (void)n, (void)a, (void)lda, (void)u, (void)ldu, (void)vt, (void)ldvt;
  (void)iwork, (void)jobz_len;
  if (*lwork == -1) {
    work[0] = 1.0f;
    *info = 0;
    return;
  }
  s[0] = 1.0f;
#if defined(FAKE_LAPACK_ILLEGAL)
  *info = kComputeInfo;
#else
  *info = 1; /* "the updating process of SBDSDC did not converge" */
#endif
}
