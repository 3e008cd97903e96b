// Helpers every dialect shares, written in the vocabulary itself. Included at the end of
// each compat_*.h (needs ml_float_as_uint / ml_uint_as_float / ml_sqrt / ml_fabs).
#ifndef ML_KERNELS_COMPAT_COMMON_H
#define ML_KERNELS_COMPAT_COMMON_H

#define ML_FLT_EPS 5.9604645e-08f  // LAPACK's eps for float: 2^-24 (unit roundoff)
#define ML_FLT_ULP 1.1920929e-07f  // 2^-23
#define ML_FLT_MIN 1.17549435e-38f
#define ML_FLT_MAX 3.40282347e+38f

ML_FN int ml_imin(int a, int b) { return a < b ? a : b; }
ML_FN int ml_imax(int a, int b) { return a > b ? a : b; }

// Bit-based so fast-math compilers cannot fold it away.
ML_FN bool ml_isfinite(float x) { return (ml_float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }
ML_FN bool ml_isnan(float x) { return (ml_float_as_uint(x) & 0x7fffffffu) > 0x7f800000u; }
ML_FN float ml_nan() { return ml_uint_as_float(0x7fc00000u); }
ML_FN float ml_inf() { return ml_uint_as_float(0x7f800000u); }

#if ML_HAS_TAGGED
// A lane's poll of the tagged word w (ml_load_tagged) until its tag is want; returns its value.
ML_FN float ml_poll_tagged(ML_DEVICE const float *w, ml_u32 want) {
  for (;;) {
    ml_u32 t;
    const float x = ml_load_tagged(w, &t);
    if (t == want) return x;
    ml_spin_relax();
  }
}
#endif

// 2^e for -126 <= e <= 127, built from bits.
ML_FN float ml_exp2i(int e) { return ml_uint_as_float((ml_u32)(e + 127) << 23); }

// x * 2^e for any e (two exact steps when 2^e is not a normal float).
ML_FN float ml_ldexp(float x, int e) {
  while (e > 127) {
    x *= ml_exp2i(127);
    e -= 127;
  }
  while (e < -126) {
    x *= ml_exp2i(-126);
    e += 126;
  }
  return x * ml_exp2i(e);
}

// Exponent of |x| (floor(log2|x|)) for finite nonzero x, subnormals included; 0 for 0.
ML_FN int ml_ilogb(float x) {
  ml_u32 u = ml_float_as_uint(x) & 0x7fffffffu;
  if (u == 0u) return 0;
  if (u < 0x00800000u) {
    float y = ml_uint_as_float(u) * ml_exp2i(24);
    return (int)(ml_float_as_uint(y) >> 23) - 127 - 24;
  }
  return (int)(u >> 23) - 127;
}

// sqrt(a^2 + b^2) without overflow or harmful underflow.
ML_FN float ml_hypot(float a, float b) {
  a = ml_fabs(a);
  b = ml_fabs(b);
  float big = a > b ? a : b;
  float small = a > b ? b : a;
  if (big == 0.0f) return small;  // 0, or NaN passes through via small
  float r = small / big;
  return big * ml_sqrt(1.0f + r * r);
}

#endif  // ML_KERNELS_COMPAT_COMMON_H
