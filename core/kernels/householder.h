// Householder reflector generation shared by the kernels (QR, tridiagonalisation, and
// bidiagonalisation for the SVD). Include after compat_<target>.h.
#ifndef ML_KERNELS_HOUSEHOLDER_H
#define ML_KERNELS_HOUSEHOLDER_H

#include "group.h"

// H = I - tau [1; v] [1; v]^T with v = X * scale maps [alpha; X] to [beta; 0].
struct ml_house_t {
  float beta;
  float tau;
  float scale;
};

// Below this the sum of squares has lost precision to underflow: redo it scaled.
#define ML_HOUSE_TINY 7.8886091e-31f  // 2^-100
#define ML_HOUSE_UP 1.1529215e+18f    // 2^60
#define ML_HOUSE_DOWN 8.6736174e-19f  // 2^-60

// The reflector from alpha and sigma = sum of (X[i] * up)^2, up 1 or ML_HOUSE_UP (the
// rescaled sum when the plain one fell below ML_HOUSE_TINY). Shared by ml_house and the
// kernels that sum X themselves (the blocked steps, whose X is in device memory).
ML_FN void ml_house_finish(float alpha, float sigma, float up, ML_THREAD ml_house_t *h) {
  if (!(sigma >= ML_HOUSE_TINY)) {
    h->beta = alpha;
    h->tau = 0.0f;
    h->scale = 1.0f;
    return;
  }
  float as = alpha * up;
  float bs = -ml_copysign(ml_hypot(as, ml_sqrt(sigma)), as);
  h->tau = (bs - as) / bs;
  h->scale = up / (as - bs);
  h->beta = up == 1.0f ? bs : bs * ML_HOUSE_DOWN;
}

// Reflector for x = [alpha; X], X[i] = base[i * stride], i < count, in shared memory that
// every lane can already see. Every lane gets the same result in *h. Contains one ml_barrier
// (two when the rescaled path runs), using red[0..31] and red[32..63]. The caller scales
// X by .scale itself (after this returns; nothing here writes shared memory but red).
// Like LAPACK's slarfg: tau = 0 (H = I) when X is zero (or below ~1e-33 of unit scale).
ML_FN void ml_house(ML_CTX ctx, float alpha, ML_SHARED const float *base, int stride, int count,
                    ML_SHARED float *red, ML_THREAD ml_house_t *h) {
  float part = 0.0f;
  for (int i = ctx.lane; i < count; i += ctx.group_size) {
    float x = base[i * stride];
    part += x * x;
  }
  float sigma = ml_group_sum(ctx, part, red);
  float up = 1.0f;
  if (sigma < ML_HOUSE_TINY) {
    // Squares of tiny entries underflowed (or X is 0): redo in a scaled frame.
    part = 0.0f;
    for (int i = ctx.lane; i < count; i += ctx.group_size) {
      float x = base[i * stride] * ML_HOUSE_UP;
      part += x * x;
    }
    sigma = ml_group_sum(ctx, part, red + 32);
    up = ML_HOUSE_UP;
  }
  ml_house_finish(alpha, sigma, up, h);
}

#endif  // ML_KERNELS_HOUSEHOLDER_H
