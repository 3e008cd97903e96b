// Householder QR of one m x n matrix per SIMDGROUP (1 <= m, n <= 64), the matrix in registers:
// lane l holds columns l, l + gs (gs = the group size, 16 or 32; two columns per lane when more
// than gs columns are held), each as a private array of 32 or 64 floats (the entry's row limit)
// indexed by compile-time constants only (ML_UNROLL), so it stays in registers. No barriers, no
// scratch: every exchange is a simd shuffle.
// Same contract as qr_householder.h (outputs, modes, info bits, NaN handling) and the same
// algorithm: the matrix scaled by a power of two (max |a| in [1, 2)), then for k = 0..min(m,n)-1
// the reflector of column k by ml_house's rule (LAPACK's slarfg: rescaled sum of squares when it
// underflows, beta = -sign(alpha) ||[alpha; x]||, tau = (beta - alpha) / beta), applied to the
// columns right of k; then Q = H_0 ... H_{k-1} applied backwards to the first columns of I, in
// place (column j's reflector is replaced by Q's column j once nothing needs it).
// Step k: the lane owning column k sums its own column's squares; alpha and the sum go to every
// lane (2 shuffles), which all compute the same scalars (tau, beta, scale); the owner's entries
// below the diagonal are then shuffled row by row (one shuffle per row), and every lane updates
// its own column(s) with a local dot product and axpy. The owner keeps its reflector unscaled
// (x, with v = scale * x): scale enters the dot product and the axpy factor instead, so nobody
// multiplies the rows by it. Rows are processed in 8 blocks (ML_QRW_BLOCK); each step is
// instantiated per block of its row k, so the blocks above it are skipped at compile time and
// those at/after row m by a uniform branch: an m-row matrix costs about m - k rows per step
// whatever the array size, with no per-block work for the rows above k.
#ifndef ML_KERNELS_QR_HOUSEHOLDER_SIMD_H
#define ML_KERNELS_QR_HOUSEHOLDER_SIMD_H

#include "householder.h"  // ML_HOUSE_TINY / UP / DOWN: the same reflector rule

// Rows per block: the R rows of a lane's column are 8 blocks (4 rows for R = 32, 8 for 64).
#define ML_QRW_BLOCK(R) ((R) / 8)

// Two entries, the same code at two array sizes (registers are allocated per entry, so the
// smaller one keeps the occupancy of shapes up to 32 x 32):
//   ml_qr_householder_simd    m, n <= 32: one column per lane, 32 rows per lane;
//   ml_qr_householder_simd64  m, n <= 64: one or two columns per lane, 64 rows per lane.
// Columns held: Q's m columns for complete mode of a tall matrix, else n.
ML_HOST_FN int ml_qr_householder_simd_cols(int m, int n, int flags) {
  return (flags == ML_K_QR_COMPLETE && m > n) ? m : n;
}
ML_HOST_FN int ml_qrw_mode_ok(int flags) {
  return flags == ML_K_QR_REDUCED || flags == ML_K_QR_R || flags == ML_K_QR_COMPLETE;
}
// Shapes and modes handled at group size 32. At group size 16 (CUDA sub-warp groups, which the
// launch configuration uses for max(m, n) <= 16 only) each entry handles what fits at 32 with
// half the columns: max(m, n) <= 16 for the first, held columns <= 32 for the second.
ML_HOST_FN int ml_qr_householder_simd_fits(int m, int n, int flags) {
  return m >= 1 && n >= 1 && m <= 32 && n <= 32 && ml_qrw_mode_ok(flags);
}
ML_HOST_FN int ml_qr_householder_simd64_fits(int m, int n, int flags) {
  return m >= 1 && n >= 1 && m <= 64 && n <= 64 && ml_qrw_mode_ok(flags);
}
// The table windows are disjoint: the 64-row entry takes the shapes the 32-row one does not
// (it computes the smaller ones too, with more registers).
ML_HOST_FN int ml_qr_householder_simd64_window(int m, int n, int flags) {
  return ml_qr_householder_simd64_fits(m, n, flags) && !ml_qr_householder_simd_fits(m, n, flags);
}
// The kernel-table forms (kernel_table.h): registers only, no scratch.
ML_HOST_FN int ml_qr_householder_simd_scratch_floats_flags(int /*m*/, int /*n*/, int /*flags*/) {
  return 0;
}
ML_HOST_FN int ml_qr_householder_simd_fits_flags(int m, int n, int flags, int /*scratch_floats*/) {
  return ml_qr_householder_simd_fits(m, n, flags);
}
ML_HOST_FN int ml_qr_householder_simd64_fits_flags(int m, int n, int flags,
                                                    int /*scratch_floats*/) {
  return ml_qr_householder_simd64_window(m, n, flags);
}

// 2^e as two factors (each a normal float for -252 <= e <= 254): x * f1 * f2 scales by 2^e
// with one rounding at most (none unless the result is subnormal).
ML_FN float ml_qrw_pow2_lo(int e) { return ml_exp2i(e / 2); }
ML_FN float ml_qrw_pow2_hi(int e) { return ml_exp2i(e - e / 2); }

// A shuffle within the group of GS lanes: at 32 (a whole simdgroup, every lane active at each
// call, since all branches around the calls are group-uniform) the constant-mask form.
template <int GS>
ML_FN float ml_qrw_shfl(ML_CTX ctx, float x, int src) {
  return GS == 32 ? ml_simd_shuffle_full(ctx, x, src) : ml_simd_shuffle(ctx, x, src);
}

// Rows b .. b + B - 1 of a block below the diagonal's: the owner's (lane own, slot KS) column
// there into xv, by shuffles, and this lane's dot products with it for slots KS.. into d0 (even
// rows) and d1 (odd rows): two FMA chains.
template <int R, int CPL, int KS, int GS>
ML_FN void ml_qrw_dots_block(ML_CTX ctx, ML_THREAD float (*a)[R], int b, int own,
                             ML_THREAD float *xv, ML_THREAD float *d0, ML_THREAD float *d1) {
  const int B = ML_QRW_BLOCK(R);
  ML_UNROLL for (int r = 0; r < B; r += 2) {
    const float x0 = ml_qrw_shfl<GS>(ctx, a[KS][b + r], own);
    const float x1 = ml_qrw_shfl<GS>(ctx, a[KS][b + r + 1], own);
    xv[b + r] = x0;
    xv[b + r + 1] = x1;
    ML_UNROLL for (int s = KS; s < CPL; ++s) {
      d0[s] = ml_fma(x0, a[s][b + r], d0[s]);
      d1[s] = ml_fma(x1, a[s][b + r + 1], d1[s]);
    }
  }
}

// The rank-1 update of the same rows: a[s][i] -= xv[i] ws[s] for slots KS...
template <int R, int CPL, int KS>
ML_FN void ml_qrw_update_block(ML_THREAD float (*a)[R], int b, ML_THREAD const float *xv,
                               ML_THREAD const float *ws) {
  const int B = ML_QRW_BLOCK(R);
  ML_UNROLL for (int r = 0; r < B; ++r) {
    ML_UNROLL for (int s = KS; s < CPL; ++s) a[s][b + r] = ml_fma(-xv[b + r], ws[s], a[s][b + r]);
  }
}

// Reflector k of the factorisation, KS = the owner's slot (k / gs). a[s][i]: row i of this
// lane's column lane + s * gs. tau_s / scl_s: this lane's reflectors (tau, scale) per slot.
template <int R, int CPL, int KS, int GS, int KB>
ML_FN void ml_qrw_factor_step(ML_CTX ctx, ML_THREAD float (*a)[R],
                              ML_THREAD float *tau_s, ML_THREAD float *scl_s, int m, int k) {
  const int B = ML_QRW_BLOCK(R), gs = GS, lane = ctx.lane;
  const int ko = k - KS * gs;  // owner lane
  // alpha = a[k][k] and sigma = sum_{i > k} a[i][k]^2, each lane over its own slot-KS column;
  // the owner's values are the ones used.
  float alpha = 0.0f, s0 = 0.0f, s1 = 0.0f;
  ML_UNROLL for (int b = KB * B; b < R; b += B) {
    if (b >= m) break;
    if (b > KB * B) {
      ML_UNROLL for (int r = 0; r < B; r += 2) {
        s0 = ml_fma(a[KS][b + r], a[KS][b + r], s0);
        s1 = ml_fma(a[KS][b + r + 1], a[KS][b + r + 1], s1);
      }
    } else {
      ML_UNROLL for (int r = 0; r < B; ++r) {
        const float x = a[KS][b + r];
        alpha = b + r == k ? x : alpha;
        s0 = ml_fma(b + r > k ? x : 0.0f, x, s0);
      }
    }
  }
  alpha = ml_qrw_shfl<GS>(ctx, alpha, ko);
  float sigma = ml_qrw_shfl<GS>(ctx, s0 + s1, ko);
  float up = 1.0f;
  if (sigma < ML_HOUSE_TINY) {  // uniform: squares underflowed (or the column is 0)
    s0 = 0.0f;
    ML_UNROLL for (int b = KB * B; b < R; b += B) {
      if (b >= m) break;
      ML_UNROLL for (int r = 0; r < B; ++r) {
        const float x = a[KS][b + r] * ML_HOUSE_UP;
        s0 = ml_fma(b + r > k ? x : 0.0f, x, s0);
      }
    }
    sigma = ml_qrw_shfl<GS>(ctx, s0, ko);
    up = ML_HOUSE_UP;
  }
  float t = 0.0f, sc = 1.0f, beta = alpha;
  if (sigma >= ML_HOUSE_TINY) {
    const float as = alpha * up;
    const float bs = -ml_copysign(ml_hypot(as, ml_sqrt(sigma)), as);
    t = (bs - as) / bs;
    sc = up / (as - bs);
    beta = up == 1.0f ? bs : bs * ML_HOUSE_DOWN;
  }
  const bool owner = lane == ko;
  if (owner) {
    tau_s[KS] = t;
    scl_s[KS] = sc;
  }
  if (t != 0.0f) {  // uniform; tau = 0: H = I
    // w_c = tau (a[k][c] + sc sum_{i>k} x_i a[i][c]) for this lane's columns c > k.
    float xv[R];
    float d0[CPL], d1[CPL], hk[CPL];
    ML_UNROLL for (int s = 0; s < CPL; ++s) d0[s] = d1[s] = hk[s] = 0.0f;
    ML_UNROLL for (int b = KB * B; b < R; b += B) {
      if (b >= m) break;
      if (b > KB * B) {
        ml_qrw_dots_block<R, CPL, KS, GS>(ctx, a, b, ko, xv, d0, d1);
      } else {
        ML_UNROLL for (int r = 0; r < B; ++r) {
          const float x = ml_qrw_shfl<GS>(ctx, a[KS][b + r], ko);
          const float xs = b + r > k ? x : 0.0f;
          xv[b + r] = xs;
          ML_UNROLL for (int s = KS; s < CPL; ++s) {
            d0[s] = ml_fma(xs, a[s][b + r], d0[s]);
            hk[s] = b + r == k ? a[s][b + r] : hk[s];
          }
        }
      }
    }
    float w[CPL], ws[CPL];
    ML_UNROLL for (int s = KS; s < CPL; ++s) {
      const int c = lane + s * gs;
      w[s] = c > k ? t * ml_fma(sc, d0[s] + d1[s], hk[s]) : 0.0f;
      ws[s] = w[s] * sc;
    }
    ML_UNROLL for (int b = KB * B; b < R; b += B) {
      if (b >= m) break;
      if (b > KB * B) {
        ml_qrw_update_block<R, CPL, KS>(a, b, xv, ws);
      } else {
        ML_UNROLL for (int r = 0; r < B; ++r) {
          ML_UNROLL for (int s = KS; s < CPL; ++s) {
            const float y = ml_fma(-xv[b + r], ws[s], a[s][b + r]);
            a[s][b + r] = b + r == k ? a[s][b + r] - w[s] : y;
          }
        }
      }
    }
  }
  // The owner's diagonal entry becomes beta (R's); its rows below keep x (unscaled v).
  ML_UNROLL for (int r = 0; r < B; ++r)
    a[KS][KB * B + r] = (owner && KB * B + r == k) ? beta : a[KS][KB * B + r];
}

// Step j of forming Q backwards: H_j applied to the Q columns c > j (c < qcols) held by this
// lane, then the owner's column j becomes e_j - tau_j v_j. Rows <= j of Q columns c > j are 0.
template <int R, int CPL, int KS, int GS, int KB>
ML_FN void ml_qrw_q_step(ML_CTX ctx, ML_THREAD float (*a)[R],
                         ML_THREAD const float *tau_s, ML_THREAD const float *scl_s, int m,
                         int qcols, int j) {
  const int B = ML_QRW_BLOCK(R), gs = GS, lane = ctx.lane;
  const int jo = j - KS * gs;
  const float t = ml_qrw_shfl<GS>(ctx, tau_s[KS], jo);
  const float sc = ml_qrw_shfl<GS>(ctx, scl_s[KS], jo);
  const bool owner = lane == jo;
  if (t != 0.0f) {  // uniform
    float xv[R];
    float d0[CPL], d1[CPL];
    ML_UNROLL for (int s = 0; s < CPL; ++s) d0[s] = d1[s] = 0.0f;
    ML_UNROLL for (int b = KB * B; b < R; b += B) {
      if (b >= m) break;
      if (b > KB * B) {
        ml_qrw_dots_block<R, CPL, KS, GS>(ctx, a, b, jo, xv, d0, d1);
      } else {
        ML_UNROLL for (int r = 0; r < B; ++r) {
          const float x = ml_qrw_shfl<GS>(ctx, a[KS][b + r], jo);
          const float xs = b + r > j ? x : 0.0f;
          xv[b + r] = xs;
          ML_UNROLL for (int s = KS; s < CPL; ++s) d0[s] = ml_fma(xs, a[s][b + r], d0[s]);
        }
      }
    }
    float w[CPL], ws[CPL];
    bool act[CPL];
    ML_UNROLL for (int s = KS; s < CPL; ++s) {
      const int c = lane + s * gs;
      act[s] = c > j && c < qcols;
      w[s] = act[s] ? t * (sc * (d0[s] + d1[s])) : 0.0f;  // Q[j][c] is 0
      ws[s] = w[s] * sc;
    }
    ML_UNROLL for (int b = KB * B; b < R; b += B) {
      if (b >= m) break;
      if (b > KB * B) {
        ml_qrw_update_block<R, CPL, KS>(a, b, xv, ws);
      } else {
        ML_UNROLL for (int r = 0; r < B; ++r) {
          ML_UNROLL for (int s = KS; s < CPL; ++s) {
            const float y = ml_fma(-xv[b + r], ws[s], a[s][b + r]);
            a[s][b + r] = b + r == j ? (act[s] ? -w[s] : a[s][b + r]) : y;
          }
        }
      }
    }
  }
  // Owner: column j = e_j - tau v_j (rows < j were cleared before the loop).
  if (owner) {
    const float ts = -t * sc;
    ML_UNROLL for (int b = KB * B; b < R; b += B) {
      if (b >= m) break;
      ML_UNROLL for (int r = 0; r < B; ++r) {
        const int i = b + r;
        a[KS][i] = i > j ? ts * a[KS][i] : (i == j ? 1.0f - t : a[KS][i]);
      }
    }
  }
}

// The steps of row block KB (k / B, one of 8): the blocks above it are skipped at compile time
// and only the diagonal block tests rows against k, so a step costs its rows k..m-1 plus one
// uniform test per block. The owner's column slot k / gs follows from KB (B divides gs).
#define ML_QRW_SLOT(R, CPL, GS, KB) ((CPL) > 1 && (KB) * ML_QRW_BLOCK(R) >= (GS) ? 1 : 0)
#define ML_QRW_CASES(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

// One matrix with CPL column slots per lane (CPL * gs >= the columns held).
template <int R, int CPL, int GS>
ML_FN void ml_qrw_impl(ML_CTX ctx, int m, int n, int mode, ML_DEVICE const float *am,
                       ML_DEVICE float *qm, ML_DEVICE float *rm, ML_DEVICE int *info, ml_i64 g) {
  const int B = ML_QRW_BLOCK(R), gs = GS, lane = ctx.lane;
  const int kr = m < n ? m : n;
  const int qcols = mode == ML_K_QR_COMPLETE ? m : kr;  // Q's columns = R's rows
  float a[CPL][R];
  float tau_s[CPL], scl_s[CPL];
  float amax = 0.0f;
  ML_UNROLL for (int s = 0; s < CPL; ++s) {
    tau_s[s] = 0.0f;
    scl_s[s] = 1.0f;
    const int c = lane + s * gs;
    ML_UNROLL for (int i = 0; i < R; ++i) a[s][i] = 0.0f;
    if (c >= n) continue;
    ML_UNROLL for (int b = 0; b < R; b += B) {
      if (b >= m) continue;
      ML_UNROLL for (int r = 0; r < B; ++r) {
        const int i = b + r;
        if (i < m) {
          const float x = am[(ml_i64)i * n + c];
          a[s][i] = x;
          amax = ml_isfinite(x) ? ml_fmax(amax, ml_fabs(x)) : ml_inf();
        }
      }
    }
  }
  amax = ml_simd_max(ctx, amax);
  if (!ml_isfinite(amax)) {
    const float qnan = ml_nan();
    for (int t = lane; t < qcols * n; t += gs) rm[t] = qnan;
    if (mode != ML_K_QR_R)
      for (int t = lane; t < m * qcols; t += gs) qm[t] = qnan;
    if (info && lane == 0) info[g] = ML_INFO_NONFINITE;
    return;
  }
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  if (ex != 0) {
    const float f1 = ml_qrw_pow2_lo(-ex), f2 = ml_qrw_pow2_hi(-ex);
    ML_UNROLL for (int s = 0; s < CPL; ++s) {
      ML_UNROLL for (int b = 0; b < R; b += B) {
        if (b >= m) continue;
        ML_UNROLL for (int r = 0; r < B; ++r) a[s][b + r] = a[s][b + r] * f1 * f2;
      }
    }
  }

  // Factor.
  for (int k = 0; k < kr; ++k) {
    switch (k / B) {
#define ML_QRW_FACTOR_CASE(KB)                                                                   \
  case KB:                                                                                       \
    ml_qrw_factor_step<R, CPL, ML_QRW_SLOT(R, CPL, GS, KB), GS, KB>(ctx, a, tau_s, scl_s, m, k); \
    break;
      ML_QRW_CASES(ML_QRW_FACTOR_CASE)
#undef ML_QRW_FACTOR_CASE
    }
  }

  // R (qcols x n), scaled back; rows >= kr (complete tall) are zero. Rank-deficiency: an
  // exactly zero diagonal entry, as the CPU backend.
  bool zero_diag = false;
  {
    const float g1 = ml_qrw_pow2_lo(ex), g2 = ml_qrw_pow2_hi(ex);
    ML_UNROLL for (int s = 0; s < CPL; ++s) {
      const int c = lane + s * gs;
      if (c >= n) continue;
      ML_UNROLL for (int b = 0; b < R; b += B) {
        if (b >= qcols) continue;
        ML_UNROLL for (int r = 0; r < B; ++r) {
          const int i = b + r;
          if (i < qcols) rm[(ml_i64)i * n + c] = (i < kr && c >= i) ? a[s][i] * g1 * g2 : 0.0f;
          zero_diag = zero_diag || (i == c && i < kr && a[s][i] == 0.0f);
        }
      }
    }
  }
  if (info) {  // uniform
    const float any = ml_simd_max(ctx, zero_diag ? 1.0f : 0.0f);
    if (lane == 0) info[g] = any > 0.0f ? ML_INFO_RANK_DEFICIENT : 0;
  }
  if (mode == ML_K_QR_R) return;

  // Q: columns c < kr keep only their reflector below the diagonal (R is stored); columns
  // kr <= c < qcols (complete tall) start as e_c.
  ML_UNROLL for (int s = 0; s < CPL; ++s) {
    const int c = lane + s * gs;
    ML_UNROLL for (int i = 0; i < R; ++i)
      a[s][i] = c < kr ? (i < c ? 0.0f : a[s][i]) : (i == c ? 1.0f : 0.0f);
  }
  for (int j = kr - 1; j >= 0; --j) {
    switch (j / B) {
#define ML_QRW_Q_CASE(KB)                                                                 \
  case KB:                                                                                \
    ml_qrw_q_step<R, CPL, ML_QRW_SLOT(R, CPL, GS, KB), GS, KB>(ctx, a, tau_s, scl_s, m, \
                                                               qcols, j);               \
    break;
      ML_QRW_CASES(ML_QRW_Q_CASE)
#undef ML_QRW_Q_CASE
    }
  }
  ML_UNROLL for (int s = 0; s < CPL; ++s) {
    const int c = lane + s * gs;
    if (c >= qcols) continue;
    ML_UNROLL for (int b = 0; b < R; b += B) {
      if (b >= m) continue;
      ML_UNROLL for (int r = 0; r < B; ++r) {
        const int i = b + r;
        if (i < m) qm[(ml_i64)i * qcols + c] = a[s][i];
      }
    }
  }
}

// Matrix ctx.group_id with R rows per lane and up to MAXCPL columns per lane; shapes with more
// rows or held columns are left untouched. (info_out: tools/check_kernel_table.py takes a
// function ending in `int *info` for a kernel that needs a table line.)
template <int R, int MAXCPL>
ML_FN void ml_qrw_entry(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *q,
                        ML_DEVICE float *r, ML_DEVICE int *info_out) {
  ML_DEVICE int *info = info_out;
  if (ctx.group_id >= p.batch) return;
  const int m = p.m, n = p.n, mode = p.flags;
  const int nc = ml_qr_householder_simd_cols(m, n, mode);
  if (m < 1 || n < 1 || m > R || !ml_qrw_mode_ok(mode) || nc > MAXCPL * ctx.group_size) return;
  const int kr = m < n ? m : n;
  const int qcols = mode == ML_K_QR_COMPLETE ? m : kr;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *rm = r + g * (ml_i64)qcols * n;
  ML_DEVICE float *qm = mode == ML_K_QR_R ? q : q + g * (ml_i64)m * qcols;
  // The group size as a template constant: lane arithmetic folds, and at 32 every shuffle is
  // one instruction (a run-time mask costs several more per call on CUDA).
  if (ctx.group_size == 32) {
    if (MAXCPL == 1 || nc <= 32)
      ml_qrw_impl<R, 1, 32>(ctx, m, n, mode, am, qm, rm, info, g);
    else
      ml_qrw_impl<R, (MAXCPL > 1 ? 2 : 1), 32>(ctx, m, n, mode, am, qm, rm, info, g);
  } else {
    if (MAXCPL == 1 || nc <= 16)
      ml_qrw_impl<R, 1, 16>(ctx, m, n, mode, am, qm, rm, info, g);
    else
      ml_qrw_impl<R, (MAXCPL > 1 ? 2 : 1), 16>(ctx, m, n, mode, am, qm, rm, info, g);
  }
}

// q: m x k (reduced) or m x m (complete), unused (may be null) in R mode; r: k x n (m x n
// complete). ctx.group_size must be 16 or 32 and equal to ml_simd_width(ctx) (a SIMD line's
// launch). Shapes outside the entry's fits() (at group size 16: more than 16 held columns) are
// left untouched.
ML_FN void ml_qr_householder_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                  ML_DEVICE float *q, ML_DEVICE float *r, ML_DEVICE int *info) {
  ml_qrw_entry<32, 1>(ctx, p, a, q, r, info);
}
// As ml_qr_householder_simd for m, n <= 64 (at group size 16: held columns <= 32).
ML_FN void ml_qr_householder_simd64(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                    ML_DEVICE float *q, ML_DEVICE float *r, ML_DEVICE int *info) {
  ml_qrw_entry<64, 2>(ctx, p, a, q, r, info);
}

#endif  // ML_KERNELS_QR_HOUSEHOLDER_SIMD_H
