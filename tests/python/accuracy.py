"""The accuracy thresholds of docs/design.md section 7, shared by every Python test suite.

Ratios are LAPACK's (float64, 1-norms, ulp = float32 epsilon); a ratio above its op family's
threshold fails: 60 for the eigensolvers, 35 for the SVD, 30 for QR.
"""

ULP = 2.0**-23  # float32 epsilon
TINY = 2.0**-126  # smallest normal float32
THRESH = {"eig": 60.0, "svd": 35.0, "qr": 30.0}
