"""Settings for the MLX tests, applied before MLX is imported."""

import os

# MLX's CUDA backend multiplies float32 matrices in TF32 unless told otherwise; the gradient
# formulas are matrix products, so their comparisons with float64 references need full float32.
os.environ.setdefault("MLX_ENABLE_TF32", "0")
