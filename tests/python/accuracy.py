"""The accuracy thresholds of docs/design.md section 7, shared by every Python test suite (the
kernel tests' are tests/kernels/accuracy.h; tools/check_accuracy.py keeps the three agreeing).

Ratios are LAPACK's (float64, 1-norms, ulp = float32 epsilon); a ratio above its op family's
threshold fails: 60 for the eigensolvers, 35 for the SVD, 30 for QR, 30 for the linear
systems (Cholesky, solve, inverse, triangular solve: LAPACK's own test threshold for them).
"""

ULP = 2.0**-23  # float32 epsilon
TINY = 2.0**-126  # smallest normal float32
THRESH = {"eig": 60.0, "svd": 35.0, "qr": 30.0, "linsys": 30.0}
# The blocked products: |C - C_ref| / (k ulp (|alpha| |A| |B| + |beta C|)), entrywise (the
# kernel tests' kGemmLimit, tests/kernels/accuracy.h).
GEMM_LIMIT = 4.0
