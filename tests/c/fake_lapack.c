/* A LAPACK provider whose eigen- and singular value drivers always report that
 * their iteration failed to converge (info > 0), for test_not_converged.c:
 * real LAPACKs reach that outcome too rarely to test. Workspace queries
 * (lwork = -1) answer 1; sgeqrf/sorgqr succeed without computing anything. */
#include <stddef.h>

void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work,
             const int *lwork, int *info) {
  (void)m, (void)n, (void)a, (void)lda, (void)tau;
  if (*lwork == -1) work[0] = 1.0f;
  *info = 0;
}

void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau,
             float *work, const int *lwork, int *info) {
  (void)m, (void)n, (void)k, (void)a, (void)lda, (void)tau;
  if (*lwork == -1) work[0] = 1.0f;
  *info = 0;
}

void ssyevd_(const char *jobz, const char *uplo, const int *n, float *a, const int *lda, float *w,
             float *work, const int *lwork, int *iwork, const int *liwork, int *info,
             size_t jobz_len, size_t uplo_len) {
  (void)jobz, (void)uplo, (void)a, (void)lda, (void)liwork, (void)jobz_len, (void)uplo_len;
  if (*lwork == -1) {
    work[0] = 1.0f;
    iwork[0] = 1;
    *info = 0;
    return;
  }
  w[0] = 1.0f; /* garbage that must not reach the caller */
  *info = *n;  /* "the algorithm failed to converge" */
}

void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s,
             float *u, const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork,
             int *iwork, int *info, size_t jobz_len) {
  (void)jobz, (void)m, (void)n, (void)a, (void)lda, (void)u, (void)ldu, (void)vt, (void)ldvt;
  (void)iwork, (void)jobz_len;
  if (*lwork == -1) {
    work[0] = 1.0f;
    *info = 0;
    return;
  }
  s[0] = 1.0f;
  *info = 1; /* "the updating process of SBDSDC did not converge" */
}
