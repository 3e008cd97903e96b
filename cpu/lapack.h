// The LAPACK provider, loaded at run time with dlopen so the library links to no
// particular LAPACK (scipy-openblas32 on Linux, Accelerate on macOS).
#pragma once
#include <cstddef>

#include "metal_linalg/metal_linalg.h"

namespace ml::lapack {

// Fortran entry points; character arguments carry hidden lengths at the end.
using sgeqrf_fn = void (*)(const int *m, const int *n, float *a, const int *lda, float *tau,
                           float *work, const int *lwork, int *info);
using sorgqr_fn = void (*)(const int *m, const int *n, const int *k, float *a, const int *lda,
                           const float *tau, float *work, const int *lwork, int *info);
using ssyevd_fn = void (*)(const char *jobz, const char *uplo, const int *n, float *a,
                           const int *lda, float *w, float *work, const int *lwork, int *iwork,
                           const int *liwork, int *info, size_t jobz_len, size_t uplo_len);
using sgesdd_fn = void (*)(const char *jobz, const int *m, const int *n, float *a, const int *lda,
                           float *s, float *u, const int *ldu, float *vt, const int *ldvt,
                           float *work, const int *lwork, int *iwork, int *info, size_t jobz_len);

// Pieces of the drivers, called directly for the value-only ops (they skip
// the drivers' norm, scaling and dispatch overhead, which dominates small n).
using sgebrd_fn = void (*)(const int *m, const int *n, float *a, const int *lda, float *d, float *e,
                           float *tauq, float *taup, float *work, const int *lwork, int *info);
using slasq1_fn = void (*)(const int *n, float *d, float *e, float *work, int *info);
using ssytrd_fn = void (*)(const char *uplo, const int *n, float *a, const int *lda, float *d,
                           float *e, float *tau, float *work, const int *lwork, int *info,
                           size_t uplo_len);
using ssterf_fn = void (*)(const int *n, float *d, float *e, int *info);

// The linear systems (cpu_linsys.cpp); strsm is BLAS, exported by the same providers.
using spotrf_fn = void (*)(const char *uplo, const int *n, float *a, const int *lda, int *info,
                           size_t uplo_len);
using sgetrf_fn = void (*)(const int *m, const int *n, float *a, const int *lda, int *ipiv,
                           int *info);
using sgetrs_fn = void (*)(const char *trans, const int *n, const int *nrhs, const float *a,
                           const int *lda, const int *ipiv, float *b, const int *ldb, int *info,
                           size_t trans_len);
using sgetri_fn = void (*)(const int *n, float *a, const int *lda, const int *ipiv, float *work,
                           const int *lwork, int *info);
using strsm_fn = void (*)(const char *side, const char *uplo, const char *transa, const char *diag,
                          const int *m, const int *n, const float *alpha, const float *a,
                          const int *lda, float *b, const int *ldb, size_t side_len,
                          size_t uplo_len, size_t transa_len, size_t diag_len);

struct Provider {
  sgeqrf_fn sgeqrf;
  sorgqr_fn sorgqr;
  ssyevd_fn ssyevd;
  sgesdd_fn sgesdd;
  // Optional (null when the provider lacks one; the drivers are used then).
  sgebrd_fn sgebrd;
  slasq1_fn slasq1;
  ssytrd_fn ssytrd;
  ssterf_fn ssterf;
  // The linear systems' routines (null when the provider lacks one: those ops then fail
  // with a message naming it).
  spotrf_fn spotrf;
  sgetrf_fn sgetrf;
  sgetrs_fn sgetrs;
  sgetri_fn sgetri;
  strsm_fn strsm;
  // OpenBLAS thread control (process-wide); null for providers without it.
  void (*set_threads)(int);
  int (*get_threads)();
  // OpenBLAS's own thread count when it was loaded (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS,
  // else its cores), before set_threads(1); 0 for providers without thread control.
  int threads_at_load;
  // MKL thread control for the calling thread only (returns the previous
  // setting); null for providers without it.
  int (*set_threads_local)(int);
  char description[512];
};

// The current provider, loading the default one on first use. Null (with the
// reason in the last error, attributed to `where`) when none could be loaded.
const Provider *get(const char *where);
ml_status set(const char *path, const char *prefix, const char *suffix);
const char *info();

// Around fork() (cpu_backend.cpp): the loader's lock held, so a child never inherits it locked.
void lock_for_fork();
void unlock_after_fork();

}  // namespace ml::lapack
