// cuBLAS's SGEMM for the blocked algorithms' products on CUDA, loaded at run time (dlopen), so
// that the library loads and runs where cuBLAS is absent (the dialect product serves then).
// Where it looks: METAL_LINALG_CUBLAS (a path), then libcublas.so.13 / .so.12 by the loader's
// search (an already loaded copy first: torch's nvidia-cublas wheel), then $CUDA_HOME/lib64
// and /usr/local/cuda/lib64. Products run in CUBLAS_DEFAULT_MATH (fp32 FMA, no TF32). cuBLAS's
// workspace is a slice of the caller's device workspace (or none): nothing is allocated per
// call, so the products are safe under graph capture.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ml::cuda::cublas {

// Whether libcublas was found and has what we call (loaded once).
bool available();
// The library loaded, or why none was ("" before the first available()).
const char *describe();
// C = alpha op(A) op(B) + beta C (column-major; trans_a / trans_b) for `batch` matrices
// stride_* floats apart, on `stream` of device `dev` (the current device), cuBLAS's workspace
// `work` of `work_bytes` device bytes (nullptr / 0: none; cuBLAS then cannot split k). 0 when
// enqueued, else a cuBLAS status (or -1: not available); *what names the failing call.
int sgemm_strided_batched(int dev, void *stream, bool trans_a, bool trans_b, int m, int n,
                          int k, float alpha, const float *a, int lda, int64_t stride_a,
                          const float *b, int ldb, int64_t stride_b, float beta, float *c,
                          int ldc, int64_t stride_c, int batch, void *work, size_t work_bytes,
                          const char **what);

}  // namespace ml::cuda::cublas
