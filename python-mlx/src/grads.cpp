// vjp and jvp of the five decompositions, with the formulas torch.linalg uses for real input
// (eigh and svd as in torch's linalg_eig_backward/_jvp and svd_backward/linalg_svd_jvp, qr as
// linalg_qr_backward/_jvp for M >= N), written with MLX ops on the primitive's stream so they
// compose with mx.compile, mx.vmap and further differentiation.
//
// Conventions (as torch): eigh/eigvalsh differentiate the function of a symmetric matrix (the
// gradient is symmetric; a tangent is used as given); svd is the thin one; qr needs Q (not
// mode='r') and M >= N. Where the gradient is undefined (repeated eigen/singular values with a
// cotangent on the vectors) it is infinite or NaN, as in torch; a zero cotangent contributes zero,
// also through the S^-1 terms of a non-square svd at a zero singular value.
#include <stdexcept>
#include <string>

#include "mlx/linalg.h"
#include "mlx/ops.h"
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
  // X R^{-1} for upper-triangular R (right solve), on the CPU where MLX has its triangular solve.
  array solve_right_upper(const array &x, const array &r) const {
    const mx::StreamOrDevice cpu = mx::Device(mx::Device::cpu);
    return mT(mx::linalg::solve_triangular(mT(r), mT(x), /*upper=*/false, cpu));
  }
  // X R^{-T} for upper-triangular R.
  array solve_right_upper_t(const array &x, const array &r) const {
    const mx::StreamOrDevice cpu = mx::Device(mx::Device::cpu);
    return mT(mx::linalg::solve_triangular(r, mT(x), /*upper=*/true, cpu));
  }
};

[[noreturn]] void unsupported(const Spec &spec, const std::string &why) {
  throw std::invalid_argument(std::string("[metal_linalg.") + op_name(spec.op) + "] " + why);
}

void check_qr_differentiable(const Spec &spec, const mx::Shape &in) {
  if (spec.flags == ML_QR_R)
    unsupported(spec,
                "the derivative of qr depends on Q, which mode='r' does not compute; use "
                "mode='reduced'");
  const int m = in[in.size() - 2], n = in[in.size() - 1];
  if (m < n)
    unsupported(spec, "gradients of qr are implemented for M >= N only, got " +
                          std::to_string(m) + " x " + std::to_string(n));
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

}  // namespace

std::vector<mx::array> LinalgPrimitive::jvp(const std::vector<mx::array> &primals,
                                            const std::vector<mx::array> &tangents,
                                            const std::vector<int> &argnums) {
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
      check_qr_differentiable(spec_, a.shape());
      auto qr = build(a, plain(ML_OP_QR, spec_.flags), stream());
      const array &q = qr[0], &r = qr[1];
      const array dar = g.solve_right_upper(da, r);
      const array qtdar = g.mm(g.mT(q), dar);
      const array y = mx::triu(g.add(qtdar, g.mT(qtdar)), 0, stream());
      const array drr = g.sub(y, g.scale(g.diag_embed(g.diag(y)), 0.5f));
      out.push_back(g.sub(dar, g.mm(q, drr)));
      out.push_back(g.mm(drr, r));
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
      check_qr_differentiable(spec_, a.shape());
      const array &q = outputs[0], &r = outputs[1];
      const array gq = cot(0), gr = cot(1);
      const array mmat = g.sub(g.mm(gr, g.mT(r)), g.mm(g.mT(q), gq));
      const array b = mx::triu(mmat, 0, stream());
      const array sym = g.sub(g.add(b, g.mT(b)), g.diag_embed(g.diag(b)));
      ga = g.solve_right_upper_t(g.add(gq, g.mm(q, sym)), r);
      break;
    }
  }
  std::vector<array> out;
  for (size_t i = 0; i < argnums.size(); ++i) out.push_back(ga);
  return out;
}

}  // namespace mlext
