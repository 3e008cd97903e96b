// C entries of the CUDA backend outside the public header, for the CUDA tests and
// benchmarks/gemm_bench.py (ctypes): compiled into libmetal_linalg itself so that they stay
// exported. Implemented in cuda_backend.cu.
#include <cstdint>

#include "metal_linalg/metal_linalg.h"

namespace ml::cuda {
ml_status blocked_gemm(int32_t impl, int32_t lanes, int32_t regs, int32_t flags, int32_t m,
                       int32_t n, int32_t k, float alpha, float beta, float *ws, int64_t a,
                       int32_t lda, int64_t b, int32_t ldb, int64_t c, int32_t ldc, int64_t batch,
                       int64_t stride, int64_t part, int64_t part_floats, void *stream);
bool cublas_loaded();
}  // namespace ml::cuda

// The blocked algorithms' product on device memory (see ml::cuda::blocked_gemm).
extern "C" ML_API int32_t ml_cuda_blocked_gemm(int32_t impl, int32_t lanes, int32_t regs,
                                               int32_t flags, int32_t m, int32_t n, int32_t k,
                                               float alpha, float beta, float *ws, int64_t a,
                                               int32_t lda, int64_t b, int32_t ldb, int64_t c,
                                               int32_t ldc, int64_t batch, int64_t stride,
                                               int64_t part, int64_t part_floats, void *stream) {
  return ml::cuda::blocked_gemm(impl, lanes, regs, flags, m, n, k, alpha, beta, ws, a, lda, b,
                                ldb, c, ldc, batch, stride, part, part_floats, stream);
}

// 1 when the CUDA backend found cuBLAS (cuda/cublas_gemm.h), else 0.
extern "C" ML_API int32_t ml_cuda_cublas_available(void) {
  return ml::cuda::cublas_loaded() ? 1 : 0;
}
