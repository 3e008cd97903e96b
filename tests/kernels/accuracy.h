// The accuracy thresholds of docs/design.md section 7, shared by every kernel test (the Python
// suites' are tests/python/accuracy.py; tests/python/torch/test_accuracy_tables.py checks that
// both state the design document's table). Ratios are LAPACK's, in double, with ulp = float32
// epsilon; a ratio above its op's threshold fails.
#pragma once

namespace kt {

constexpr double kUlp = 1.1920928955078125e-07;  // float32 epsilon, 2^-23
constexpr double kEigLimit = 60;   // eigh / eigvalsh
constexpr double kSvdLimit = 35;   // svd / svdvals
constexpr double kQrLimit = 30;    // qr
constexpr double kLinsysLimit = 30;  // cholesky, lu_factor, solve, solve_triangular, inv
// The blocked products (core/kernels/gemm.h): |C - C_ref| / (k ulp (|alpha| |A| |B| + |beta C|)),
// entrywise.
constexpr double kGemmLimit = 4;

}  // namespace kt
