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

struct Provider {
  sgeqrf_fn sgeqrf;
  sorgqr_fn sorgqr;
  ssyevd_fn ssyevd;
  sgesdd_fn sgesdd;
  // OpenBLAS thread control; null for providers without it.
  void (*set_threads)(int);
  int (*get_threads)();
  char description[512];
};

// The current provider, loading the default one on first use. Null (with the
// reason in the last error, attributed to `where`) when none could be loaded.
const Provider *get(const char *where);
ml_status set(const char *path, const char *prefix, const char *suffix);
const char *info();

}  // namespace ml::lapack
