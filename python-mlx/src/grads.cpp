// vjp and jvp of the five decompositions, with the formulas torch.linalg uses for real input
// (eigh and svd as in torch's linalg_eig_backward/_jvp and svd_backward/linalg_svd_jvp, qr as
// linalg_qr_backward/_jvp, M < N included), written with MLX ops on the primitive's stream so they
// compose with mx.compile, mx.vmap and further differentiation. The linear systems' (cholesky,
// solve, inv, solve_triangular, lu_factor for square A, and tri_inv / cholesky_inv) follow
// torch's cholesky_backward/_jvp, linalg_solve_jvp, solve_triangular's and
// linalg_lu_backward/lu_factor_ex_jvp; their triangular solves and solves, and qr's, are this
// package's own nodes (build_node), so they run on the primitive's stream (a GPU-stream graph
// never falls back to the CPU) and are differentiable again.
//
// Conventions (as torch): eigh/eigvalsh differentiate the function of a symmetric matrix (the
// gradient is symmetric; a tangent is used as given); svd is the thin one; qr's mode='r'
// differentiates through a reduced factorization of the primal, which gives Q (a tall complete Q
// has no derivative: the Python layer refuses it). Where the gradient is undefined (repeated
// eigen/singular values with a cotangent on the vectors) it is infinite or NaN, as in torch; a
// zero cotangent contributes zero, also through the S^-1 terms of a non-square svd at a zero
// singular value.
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "mlx/ops.h"
#include "core_call.h"
#include "primitive.h"

namespace mlext {
namespace {

using mx::array;

struct G {
  mx::Stream s;

  array mT(const array &x) const { return mx::swapaxes(x, -1, -2, s); }
  array mm(const array &a, const array &b) const { return mx::matmul(a, b, s); }
  array eye(int n) const { return mx::eye(n, mx::float32, s); }
  array diag(const array &x) const { return mx::diagonal(x, 0, -2, -1, s); }
  array diag_embed(const array &v) const {
    return mx::multiply(mx::expand_dims(v, -1, s), eye(v.shape(-1)), s);
  }
  array row(const array &v) const { return mx::expand_dims(v, -2, s); }  // [..., 1, k]
  array col(const array &v) const { return mx::expand_dims(v, -1, s); }  // [..., k, 1]
  array add(const array &a, const array &b) const { return mx::add(a, b, s); }
  array sub(const array &a, const array &b) const { return mx::subtract(a, b, s); }
  array mul(const array &a, const array &b) const { return mx::multiply(a, b, s); }
  array div(const array &a, const array &b) const { return mx::divide(a, b, s); }
  array scale(const array &a, float f) const { return mx::multiply(a, array(f), s); }
  // E_ij = x_j - x_i with ones on the diagonal (the eigen/singular value gaps).
  array gaps(const array &x) const {
    return add(sub(row(x), col(x)), eye(x.shape(-1)));
  }
  // num / den, exactly zero where num is zero (a zero cotangent or tangent contributes zero
  // even across repeated values, as an undefined cotangent does in torch).
  array safe_div(const array &num, const array &den) const {
    return mx::where(mx::equal(num, array(0.0f), s), array(0.0f), div(num, den), s);
  }
  // X R^{-1} for upper-triangular R: this package's triangular solve (X R = B) on the
  // primitive's stream, so a GPU-stream graph stays on the GPU (MLX's solve_triangular runs
  // on the CPU only).
  array solve_right_upper(const array &x, const array &r) const {
    return tri_solve_node(r, x, ML_LS_UPPER | ML_LS_RIGHT);
  }
  // X R^{-T} for upper-triangular R: X R^T = B, R^T lower.
  array solve_right_upper_t(const array &x, const array &r) const {
    return tri_solve_node(mT(r), x, ML_LS_RIGHT);
  }
  array tri_solve_node(const array &a, const array &b, int flags) const {
    return build_node({a, b}, Spec{ML_OP_SOLVE_TRIANGULAR, flags, false}, s)[0];
  }
};

[[noreturn]] void unsupported(const Spec &spec, const std::string &why) {
  throw std::invalid_argument(std::string("[metal_linalg.") + spec_name(spec) + "] " + why);
}

// Tangents (dQ, dR) of A = Q R for M >= N (R square): torch's linalg_qr_jvp.
std::pair<array, array> qr_jvp_tall(const G &g, const array &q, const array &r,
                                    const array &da) {
  const array dar = g.solve_right_upper(da, r);
  const array qtdar = g.mm(g.mT(q), dar);
  const array y = mx::triu(g.add(qtdar, g.mT(qtdar)), 0, g.s);
  const array drr = g.sub(y, g.scale(g.diag_embed(g.diag(y)), 0.5f));
  return {g.sub(dar, g.mm(q, drr)), g.mm(drr, r)};
}

// The cotangent of A = Q R for M >= N (R square) from those of Q (none: zero) and R:
// torch's linalg_qr_backward.
array qr_vjp_tall(const G &g, const array &q, const array &r, const std::optional<array> &gq,
                  const array &gr) {
  array mmat = g.mm(gr, g.mT(r));
  if (gq) mmat = g.sub(mmat, g.mm(g.mT(q), *gq));
  const array b = mx::triu(mmat, 0, g.s);
  const array sym = g.sub(g.add(b, g.mT(b)), g.diag_embed(g.diag(b)));
  const array qsym = g.mm(q, sym);
  return g.solve_right_upper_t(gq ? g.add(*gq, qsym) : qsym, r);
}

// Columns [0, k) and [k, n) of x.
std::pair<array, array> split_cols(const array &x, int k, const mx::Stream &s) {
  auto parts = mx::split(x, mx::Shape{k}, -1, s);
  return {parts[0], parts[1]};
}

Spec plain(int op, int flags) { return Spec{op, flags, false}; }

// Tangents of the thin SVD of a tall (M >= N) matrix: (dU, dS, dVt).
std::vector<array> svd_jvp_tall(const G &g, const array &u, const array &sv, const array &vt,
                                const array &da) {
  const int m = u.shape(-2), n = vt.shape(-1);
  const array v = g.mT(vt);
  const array dp = g.mm(g.mT(u), g.mm(da, v));
  const array ds = g.diag(dp);
  const array dpo = g.sub(dp, g.diag_embed(ds));
  const array e = g.gaps(g.mul(sv, sv));
  auto sym = [&g](const array &x) { return g.add(x, g.mT(x)); };
  array du = g.mm(u, g.safe_div(sym(g.mul(dpo, g.row(sv))), e));
  const array dv = g.mm(v, g.safe_div(sym(g.mul(dpo, g.col(sv))), e));
  if (m > n) {
    const array davsinv = g.mm(da, g.div(v, g.row(sv)));
    du = g.add(du, g.sub(davsinv, g.mm(u, g.mm(g.mT(u), davsinv))));
  }
  return {du, ds, g.mT(dv)};
}

std::vector<array> svd_jvp(const G &g, const array &u, const array &sv, const array &vt,
                           const array &da) {
  if (u.shape(-2) >= vt.shape(-1)) return svd_jvp_tall(g, u, sv, vt, da);
  // A^T = V S U^T: the tall case with the roles of U and V swapped.
  auto t = svd_jvp_tall(g, g.mT(vt), sv, g.mT(u), g.mT(da));
  return {g.mT(t[2]), t[1], g.mT(t[0])};
}


// ---- the linear systems ----

bool linear_system(const Spec &spec) {
  return spec.variant != kCore || ml_op_linear_system(spec.op) != 0;
}

array tril(const array &x, int k, const mx::Stream &s) { return mx::tril(x, k, s); }
array triu(const array &x, int k, const mx::Stream &s) { return mx::triu(x, k, s); }

// X with A X = B (flags ML_LS_*) through this package's nodes.
array solve_node(const array &a, const array &b, int flags, const mx::Stream &s) {
  return build_node({a, b}, Spec{ML_OP_SOLVE, flags, false}, s)[0];
}
array tri_solve(const array &a, const array &b, int flags, const mx::Stream &s) {
  return build_node({a, b}, Spec{ML_OP_SOLVE_TRIANGULAR, flags, false}, s)[0];
}

// The triangle solve_triangular reads under flags (its strict part for a unit diagonal).
array triangle(const array &x, int flags, const mx::Stream &s) {
  const int unit = (flags & ML_LS_UNIT) ? 1 : 0;
  return (flags & ML_LS_UPPER) ? triu(x, unit, s) : tril(x, -unit, s);
}

array zeros_of(const mx::Shape &shape, mx::Dtype dtype, const mx::Stream &s) {
  return mx::zeros(shape, dtype, s);
}

mx::Shape batch_shape(const array &x) { return mx::Shape(x.shape().begin(), x.shape().end() - 2); }

void check_lu_differentiable(const Spec &spec, const mx::Shape &in) {
  const int m = in[in.size() - 2], n = in[in.size() - 1];
  if (m != n)
    unsupported(spec, "gradients of lu_factor are implemented for square matrices only, got " +
                          std::to_string(m) + " x " + std::to_string(n));
}

// perm with (P^T X)[i] = X[perm[i]] for lu_factor's pivots, out of the differentiated graph.
array lu_permutation(const array &pivots, int m, const mx::Stream &s) {
  return mx::stop_gradient(pivots_to_permutation(pivots, m, s), s);
}

// X's rows gathered by index (rows[..., i] is the row of X that becomes row i).
array take_rows(const array &x, const array &rows, const mx::Stream &s) {
  const array idx = mx::broadcast_to(mx::expand_dims(rows, -1, s), x.shape(), s);
  return mx::take_along_axis(x, idx, -2, s);
}

// The tangents of a linear-system node: one per output (int32 outputs and info get zeros).
std::vector<array> linsys_jvp(LinalgPrimitive &prim, const std::vector<array> &primals,
                              const std::vector<array> &tangents, const std::vector<int> &argnums) {
  const Spec &spec = prim.spec();
  const mx::Stream s = prim.stream();
  const G g{s};
  // The tangent of input i, or none.
  auto tangent = [&](int i) -> std::optional<array> {
    for (size_t j = 0; j < argnums.size(); ++j)
      if (argnums[j] == i) return mx::astype(tangents[j], mx::float32, s);
    return std::nullopt;
  };
  const Spec base{spec.op, spec.flags, false, spec.variant};
  std::vector<array> out;
  const array &a = primals[0];
  if (spec.variant == kCholeskyInv) {
    // X = Uf^-1 Lf^-1 and Z = Lf^-1 (= Uf^-T at the point: Uf = Lf^T):
    // dX = -Uf^-1 dUf X - X dLf Z.
    const array x = build_node(primals, base, s)[0];
    const array z = tri_solve(primals[0], primals[2], 0, s);
    std::optional<array> dx;
    if (auto dl = tangent(0)) dx = g.mm(x, g.mm(tril(*dl, 0, s), z));
    if (auto du = tangent(1)) {
      const array t = g.mm(g.mT(z), g.mm(triu(*du, 0, s), x));
      dx = dx ? g.add(*dx, t) : t;
    }
    out.push_back(dx ? mx::negative(*dx, s) : mx::zeros_like(x, s));
  } else {
    switch (spec.op) {
      case ML_OP_CHOLESKY: {
        // dL = L Phi(L^-1 dA L^-T), Phi: the lower triangle with the diagonal halved.
        const bool upper = (spec.flags & ML_LS_UPPER) != 0;
        const array l = build(a, base, s)[0];
        const array ll = upper ? g.mT(l) : l;
        array d = tri_solve(ll, *tangent(0), 0, s);
        d = tri_solve(g.mT(ll), d, ML_LS_UPPER | ML_LS_RIGHT, s);
        d = g.sub(tril(d, 0, s), g.scale(g.diag_embed(g.diag(d)), 0.5f));
        d = g.mm(ll, d);
        out.push_back(upper ? g.mT(d) : d);
        break;
      }
      case ML_OP_INV: {
        const array x = build(a, base, s)[0];
        out.push_back(mx::negative(g.mm(x, g.mm(*tangent(0), x)), s));
        break;
      }
      case ML_OP_SOLVE:
      case ML_OP_SOLVE_TRIANGULAR: {
        // A X = B: dX = A^-1 (dB - dA X); X A = B: dX = (dB - X dA) A^-1 (dA: the triangle read).
        const bool left = (spec.flags & ML_LS_RIGHT) == 0;
        const bool tri = spec.op == ML_OP_SOLVE_TRIANGULAR;
        const array x = build_node(primals, base, s)[0];
        std::optional<array> rhs;
        if (auto da = tangent(0)) {
          const array dam = tri ? triangle(*da, spec.flags, s) : *da;
          rhs = mx::negative(left ? g.mm(dam, x) : g.mm(x, dam), s);
        }
        if (auto db = tangent(1)) rhs = rhs ? g.add(*rhs, *db) : *db;
        if (!rhs) {
          out.push_back(mx::zeros_like(x, s));
        } else {
          const array xb = mx::broadcast_to(*rhs, x.shape(), s);
          out.push_back(tri ? tri_solve(a, xb, spec.flags, s) : solve_node(a, xb, spec.flags, s));
        }
        break;
      }
      case ML_OP_LU_FACTOR: {
        // A = P L U: F = L^-1 P^T dA U^-1, dL = L tril(F, -1), dU = triu(F) U.
        check_lu_differentiable(spec, a.shape());
        const auto lup = build(a, base, s);
        const array &lu = lup[0], &piv = lup[1];
        const int n = a.shape(-1);
        const array perm = lu_permutation(piv, n, s);
        array f = take_rows(*tangent(0), perm, s);
        f = tri_solve(lu, f, ML_LS_UNIT, s);
        f = tri_solve(lu, f, ML_LS_UPPER | ML_LS_RIGHT, s);
        const array l = g.add(tril(lu, -1, s), g.eye(n));
        out.push_back(g.add(g.mm(l, tril(f, -1, s)), g.mm(triu(f, 0, s), triu(lu, 0, s))));
        out.push_back(zeros_of(piv.shape(), mx::int32, s));
        break;
      }
      default:
        unsupported(spec, "internal error: no derivative for this op");
    }
  }
  if (spec.with_info) out.push_back(zeros_of(batch_shape(out[0]), mx::int32, s));
  return out;
}

std::vector<array> linsys_vjp(LinalgPrimitive &prim, const std::vector<array> &primals,
                              const std::vector<array> &cotangents, const std::vector<int> &argnums,
                              const std::vector<array> &outputs) {
  const Spec &spec = prim.spec();
  const mx::Stream s = prim.stream();
  const G g{s};
  auto cot = [&](size_t i) { return mx::astype(cotangents[i], mx::float32, s); };
  // The gradient of each node input (those not set stay zero).
  std::vector<std::optional<array>> grads(primals.size());
  const array &a = primals[0];
  if (spec.variant == kCholeskyInv) {
    // X = Uf^-1 Z, Z = Lf^-1: gLf = tril(-X^T G Z^T), gUf = triu(-Uf^-T G X^T), Uf^-T = Z.
    const array &x = outputs[0];
    const array gx = cot(0);
    const array z = tri_solve(primals[0], primals[2], 0, s);
    grads[0] = tril(mx::negative(g.mm(g.mT(x), g.mm(gx, g.mT(z))), s), 0, s);
    grads[1] = triu(mx::negative(g.mm(z, g.mm(gx, g.mT(x))), s), 0, s);
  } else {
    switch (spec.op) {
      case ML_OP_CHOLESKY: {
        // gA = L^-T Phi(L^T gL) L^-1, symmetric (torch's cholesky_backward).
        const bool upper = (spec.flags & ML_LS_UPPER) != 0;
        const array ll = upper ? g.mT(outputs[0]) : outputs[0];
        const array gl = upper ? g.mT(cot(0)) : cot(0);
        array p = tril(g.mm(g.mT(ll), gl), 0, s);
        p = g.scale(g.add(p, g.mT(tril(p, -1, s))), 0.5f);
        p = tri_solve(g.mT(ll), p, ML_LS_UPPER, s);
        grads[0] = tri_solve(ll, p, ML_LS_RIGHT, s);
        break;
      }
      case ML_OP_INV: {
        const array xt = g.mT(outputs[0]);
        grads[0] = mx::negative(g.mm(xt, g.mm(cot(0), xt)), s);
        break;
      }
      case ML_OP_SOLVE:
      case ML_OP_SOLVE_TRIANGULAR: {
        // A X = B: gB = A^-T gX, gA = -gB X^T; X A = B: gB = gX A^-T, gA = -X^T gB.
        const bool left = (spec.flags & ML_LS_RIGHT) == 0;
        const bool tri = spec.op == ML_OP_SOLVE_TRIANGULAR;
        const array &x = outputs[0];
        const array at = g.mT(a);
        const array gb = tri ? tri_solve(at, cot(0), spec.flags ^ ML_LS_UPPER, s)
                             : solve_node(at, cot(0), spec.flags, s);
        const array ga = mx::negative(left ? g.mm(gb, g.mT(x)) : g.mm(g.mT(x), gb), s);
        grads[0] = tri ? triangle(ga, spec.flags, s) : ga;
        grads[1] = gb;
        break;
      }
      case ML_OP_LU_FACTOR: {
        // gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T (torch's linalg_lu_backward).
        check_lu_differentiable(spec, a.shape());
        const array &lu = outputs[0], &piv = outputs[1];
        const int n = a.shape(-1);
        const array glu = cot(0);
        const array l = g.add(tril(lu, -1, s), g.eye(n));
        const array u = triu(lu, 0, s);
        array phi = g.add(tril(g.mm(g.mT(l), tril(glu, -1, s)), -1, s),
                          triu(g.mm(triu(glu, 0, s), g.mT(u)), 0, s));
        const array lut = g.mT(lu);
        phi = tri_solve(lut, phi, ML_LS_UPPER | ML_LS_UNIT, s);
        phi = tri_solve(lut, phi, ML_LS_RIGHT, s);
        const array perm = lu_permutation(piv, n, s);
        grads[0] = take_rows(phi, mx::argsort(perm, -1, s), s);
        break;
      }
      default:
        unsupported(spec, "internal error: no derivative for this op");
    }
  }
  std::vector<array> out;
  for (int i : argnums)
    out.push_back(grads[i] ? mx::astype(*grads[i], primals[i].dtype(), s)
                           : mx::zeros_like(primals[i], s));
  return out;
}

}  // namespace

std::vector<mx::array> LinalgPrimitive::jvp(const std::vector<mx::array> &primals,
                                            const std::vector<mx::array> &tangents,
                                            const std::vector<int> &argnums) {
  if (linear_system(spec_)) return linsys_jvp(*this, primals, tangents, argnums);
  const G g{stream()};
  const array &a = primals[0];
  const array da = mx::astype(tangents[0], mx::float32, stream());
  std::vector<array> out;
  switch (spec_.op) {
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH: {
      auto wv = build(a, plain(ML_OP_EIGH, spec_.flags), stream());
      const array &w = wv[0], &v = wv[1];
      const array dp = g.mm(g.mT(v), g.mm(da, v));
      out.push_back(g.diag(dp));
      if (spec_.op == ML_OP_EIGH) {
        const array off = g.sub(dp, g.diag_embed(g.diag(dp)));
        out.push_back(g.mm(v, g.safe_div(off, g.gaps(w))));
      }
      break;
    }
    case ML_OP_SVD:
    case ML_OP_SVDVALS: {
      auto usv = build(a, plain(ML_OP_SVD, 0), stream());
      auto t = svd_jvp(g, usv[0], usv[1], usv[2], da);
      if (spec_.op == ML_OP_SVD)
        out = t;
      else
        out.push_back(t[1]);
      break;
    }
    case ML_OP_QR: {
      // mode='r' computes no Q: the reduced factorization of the primal gives Q (and R).
      const bool r_only = spec_.flags == ML_QR_R;
      auto qr = build(a, plain(ML_OP_QR, r_only ? ML_QR_REDUCED : spec_.flags), stream());
      const array &q = qr[0], &r = qr[1];
      const int m = a.shape(-2), n = a.shape(-1);
      array dq = q, dr = r;
      if (m >= n) {
        std::tie(dq, dr) = qr_jvp_tall(g, q, r, da);
      } else {
        // A = [X | Y], X square: X = Q U, Y = Q V; dV = Q^T (dY - dQ V).
        const auto [u, v] = split_cols(r, m, stream());
        const auto [dx, dy] = split_cols(da, m, stream());
        const auto [dq_x, du] = qr_jvp_tall(g, q, u, dx);
        const array dv = g.mm(g.mT(q), g.sub(dy, g.mm(dq_x, v)));
        dq = dq_x;
        dr = mx::concatenate({du, dv}, -1, stream());
      }
      if (!r_only) out.push_back(dq);
      out.push_back(dr);
      break;
    }
  }
  if (spec_.with_info) {
    mx::Shape batch(a.shape().begin(), a.shape().end() - 2);
    out.push_back(mx::zeros(batch, mx::int32, stream()));
  }
  return out;
}

std::vector<mx::array> LinalgPrimitive::vjp(const std::vector<mx::array> &primals,
                                            const std::vector<mx::array> &cotangents,
                                            const std::vector<int> &argnums,
                                            const std::vector<mx::array> &outputs) {
  if (linear_system(spec_)) return linsys_vjp(*this, primals, cotangents, argnums, outputs);
  const G g{stream()};
  const array &a = primals[0];
  auto cot = [&](size_t i) { return mx::astype(cotangents[i], mx::float32, stream()); };
  array ga = mx::zeros_like(a, stream());
  switch (spec_.op) {
    case ML_OP_EIGH: {
      const array &w = outputs[0], &v = outputs[1];
      const array vtgv = g.mm(g.mT(v), cot(1));
      const array skew = g.scale(g.sub(vtgv, g.mT(vtgv)), 0.5f);
      const array inner = g.add(g.safe_div(skew, g.gaps(w)), g.diag_embed(cot(0)));
      ga = g.mm(v, g.mm(inner, g.mT(v)));
      break;
    }
    case ML_OP_EIGVALSH: {
      auto wv = build(a, plain(ML_OP_EIGH, spec_.flags), stream());
      const array &v = wv[1];
      ga = g.mm(g.mul(v, g.row(cot(0))), g.mT(v));
      break;
    }
    case ML_OP_SVDVALS: {
      auto usv = build(a, plain(ML_OP_SVD, 0), stream());
      ga = g.mm(g.mul(usv[0], g.row(cot(0))), usv[2]);
      break;
    }
    case ML_OP_SVD: {
      const array &u = outputs[0], &sv = outputs[1], &vt = outputs[2];
      const array gu = cot(0), gs = cot(1), gvt = cot(2);
      const int m = u.shape(-2), n = vt.shape(-1);
      const array v = g.mT(vt), gv = g.mT(gvt);
      const array utgu = g.mm(g.mT(u), gu);
      const array vtgv = g.mm(g.mT(v), gv);
      const array uhgu = g.sub(utgu, g.mT(utgu));
      const array vhgv = g.sub(vtgv, g.mT(vtgv));
      const array e = g.gaps(g.mul(sv, sv));
      array inner = g.safe_div(g.add(g.mul(uhgu, g.row(sv)), g.mul(g.col(sv), vhgv)), e);
      inner = g.add(inner, g.diag_embed(gs));
      if (m > n) {
        array t = g.mm(u, inner);
        // A zero cotangent of U contributes zero also at a zero singular value.
        const array gusinv = g.safe_div(gu, g.row(sv));
        t = g.add(t, g.sub(gusinv, g.mm(u, g.mm(g.mT(u), gusinv))));
        ga = g.mm(t, vt);
      } else if (m < n) {
        array t = g.mm(inner, vt);
        const array sinvgvt = g.safe_div(gvt, g.col(sv));
        t = g.add(t, g.sub(sinvgvt, g.mm(g.mm(sinvgvt, v), vt)));
        ga = g.mm(u, t);
      } else {
        ga = g.mm(u, g.mm(inner, vt));
      }
      break;
    }
    case ML_OP_QR: {
      // mode='r' computes no Q: the reduced factorization of the primal gives Q (and R), and
      // R's cotangent is the only one (Q's is zero).
      const bool r_only = spec_.flags == ML_QR_R;
      const std::vector<array> qr = r_only
                                        ? build(a, plain(ML_OP_QR, ML_QR_REDUCED), stream())
                                        : std::vector<array>{outputs[0], outputs[1]};
      const array &q = qr[0], &r = qr[1];
      std::optional<array> gq;
      if (!r_only) gq = cot(0);
      const array gr = cot(r_only ? 0 : 1);
      const int m = a.shape(-2), n = a.shape(-1);
      if (m >= n) {
        ga = qr_vjp_tall(g, q, r, gq, gr);
      } else {
        // A = [X | Y], X square, R = [U | V]: gY = Q gV, gX = the square rule with Q's
        // cotangent gQ + Y gV^T (torch's linalg_qr_backward for M < N).
        const auto [u, v] = split_cols(r, m, stream());
        const auto [gu, gv] = split_cols(gr, m, stream());
        const array y = split_cols(mx::astype(a, mx::float32, stream()), m, stream()).second;
        const array ygv = g.mm(y, g.mT(gv));
        const array gx = qr_vjp_tall(g, q, u, gq ? g.add(*gq, ygv) : ygv, gu);
        ga = mx::concatenate({gx, g.mm(q, gv)}, -1, stream());
      }
      break;
    }
  }
  std::vector<array> out;
  for (size_t i = 0; i < argnums.size(); ++i) out.push_back(ga);
  return out;
}

}  // namespace mlext
