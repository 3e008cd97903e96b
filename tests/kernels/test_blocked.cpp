// Tests of the blocked algorithms for large matrices (core/src/blocked.cpp, step kernels of
// core/kernels/steps.h) through the CPU runner, at reduced sizes with small panels and groups
// so that panel and tile boundaries fall inside the matrices (odd sizes, a panel of one
// column, wide and tall shapes).
// Suites: gemm (the product step against double), qr (LAPACK-style ratios on the general
// families, NaN/Inf isolation in a batch, info bits, agreement with the group kernel), larft
// (T by a product and the larft_gram step against the larft step and double), larfb (a block
// reflector on a few columns by the larfb_cols step and by three products against double).
// Usage: test_blocked <suite>
#include "kernel_runner.h"
#include "../../core/kernels/qr_householder.h"
#include "blocked_impl.h"
#include "kernel_test_util.h"
#include "step_runner.h"

using kt::Mat;
using kt::Report;

namespace {

using kt::where;

using kt::kGemmLimit;
using kt::kQrLimit;
constexpr double kAgreeLimit = 60;  // blocked vs unblocked QR, as test_qr_small scales it

// ---- gemm ----

// Entry (i, j) of alpha op(A) op(B) + beta C0 in double (column-major operands, leading
// dimensions lda, ldb, ldc; C0 read only where beta != 0), and its scale |alpha| sum_l |a_il
// b_lj| + |beta c0|, the products' error bound.
struct RefEntry {
  double value, scale;
};
RefEntry ref_entry(const float *A, int lda, bool ta, const float *B, int ldb, bool tb,
                   const float *C0, int ldc, int i, int j, int k, double alpha, double beta) {
  double s = 0, sa = 0;
  for (int l = 0; l < k; ++l) {
    const double x = ta ? A[size_t(i) * lda + l] : A[size_t(l) * lda + i];
    const double y = tb ? B[size_t(l) * ldb + j] : B[size_t(j) * ldb + l];
    s += x * y;
    sa += std::fabs(x * y);
  }
  const double c0 = beta != 0 ? C0[size_t(j) * ldc + i] : 0.0;
  return {alpha * s + beta * c0, std::fabs(alpha) * sa + std::fabs(beta * c0)};
}

// One product of a batch of 2 or 3 through the step (lanes x lanes groups, regs x regs per lane)
// against double; beta == 0 leaves NaN in C, which must not reach the result. vec: leading
// dimensions and offsets multiples of 4 (the vector loads and stores, also over tails of m, n
// and k that are not), else odd ones (the scalar paths).
void gemm_case(Report &rep, std::mt19937_64 &rng, int m, int n, int k, int flags, int lanes,
               int regs, float alpha, float beta, int split = 1, bool vec = false) {
  const bool ta = flags & ML_GEMM_TRANS_A, tb = flags & ML_GEMM_TRANS_B;
  const int batch = lanes == 16 ? 2 : 3;  // 256-lane groups cost the CPU runner most
  // Stored shapes (column-major) with padded leading dimensions.
  const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  const auto ld = [vec](int rows, int pad) { return vec ? (rows + 3) / 4 * 4 + 4 : rows + pad; };
  const int lda = ld(ar, 3), ldb = ld(br, 1), ldc = ld(m, 2);
  const int64_t sa = int64_t(lda) * ac, sb = int64_t(ldb) * bc, sc = int64_t(ldc) * n;
  const int64_t oa = vec ? 4 : 5, ob = oa + batch * sa, oc = ob + batch * sb, op = oc + batch * sc;
  const int64_t sp = int64_t(split) * m * n;  // partial products per matrix (split k)
  kt::CpuStepRunner r;
  const int64_t end = op + batch * sp;  // then 8 guard floats
  r.ws.assign(size_t(end + 8), std::nanf(""));
  std::normal_distribution<double> g;
  for (int64_t i = 0; i < batch * sa; ++i) r.ws[size_t(oa + i)] = float(g(rng));
  for (int64_t i = 0; i < batch * sb; ++i) r.ws[size_t(ob + i)] = float(g(rng));
  if (beta != 0)
    for (int64_t i = 0; i < batch * sc; ++i) r.ws[size_t(oc + i)] = float(g(rng));
  const std::vector<float> before = r.ws;
  const auto aligned = [](int64_t off, int64_t ld, int64_t st) {
    return off % 4 == 0 && ld % 4 == 0 && st % 4 == 0;
  };
  ml::blocked::StepLaunch l{};
  l.step = ml::blocked::kStep_gemm;
  l.group_size = lanes * lanes;
  l.shared_floats = ml_gemm_shared_floats(lanes, regs);
  l.p.m = m;
  l.p.n = n;
  l.p.k = k;
  l.p.flags = flags;
  l.p.alpha = alpha;
  l.p.beta = beta;
  ML_GEMM_LANES(l.p) = lanes;
  ML_GEMM_REGS(l.p) = regs;
  ML_GEMM_VEC(l.p) = (aligned(oa, lda, sa) ? ML_GEMM_VEC_A : 0) |
                     (aligned(ob, ldb, sb) ? ML_GEMM_VEC_B : 0) |
                     (aligned(oc, ldc, sc) ? ML_GEMM_VEC_C : 0) |
                     (aligned(op, m, sp) ? ML_GEMM_VEC_PART : 0);
  l.p.batch = batch;
  l.p.groups = ml_gemm_groups(m, n, lanes, regs, batch) * split;
  ML_GEMM_SPLIT(l.p) = split;
  l.p.off[ML_GEMM_PART] = op;
  l.p.stride[ML_GEMM_PART] = sp;
  l.p.off[ML_GEMM_A] = oa;
  l.p.off[ML_GEMM_B] = ob;
  l.p.off[ML_GEMM_C] = oc;
  l.p.stride[ML_GEMM_A] = sa;
  l.p.stride[ML_GEMM_B] = sb;
  l.p.stride[ML_GEMM_C] = sc;
  l.p.ld[ML_GEMM_A] = lda;
  l.p.ld[ML_GEMM_B] = ldb;
  l.p.ld[ML_GEMM_C] = ldc;
  r.launch(l);
  if (split > 1) {  // the sum of the slices' partial products into C
    l.step = ml::blocked::kStep_gemm_sum;
    l.group_size = 64;
    l.shared_floats = 0;
    l.p.groups = batch * ((int64_t(m) * n + 63) / 64);
    r.launch(l);
  }
  char at[200];
  std::snprintf(at, sizeof at, "gemm m%d n%d k%d flags%d L%d R%d alpha%g beta%g split%d vec%d", m,
                n, k, flags, lanes, regs, alpha, beta, split, ML_GEMM_VEC(l.p));
  double worst = 0;
  bool padding_kept = true;
  for (int b = 0; b < batch; ++b) {
    const float *A = before.data() + oa + b * sa, *B = before.data() + ob + b * sb;
    const float *C0 = before.data() + oc + b * sc, *C = r.ws.data() + oc + b * sc;
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        const RefEntry e = ref_entry(A, lda, ta, B, ldb, tb, C0, ldc, i, j, k, alpha, beta);
        const double err = std::fabs(C[size_t(j) * ldc + i] - e.value);
        const double ratio = e.scale > 0 ? err / (std::max(k, 1) * kt::kUlp * e.scale) : err;
        worst = std::max(worst, std::isfinite(C[size_t(j) * ldc + i]) ? ratio : 1e30);
      }
      for (int i = m; i < ldc; ++i)  // the padding rows are not C's: untouched
        padding_kept = padding_kept &&
                       std::memcmp(&C[size_t(j) * ldc + i], &C0[size_t(j) * ldc + i], 4) == 0;
    }
  }
  // Nothing before the operands or after the partial products was written.
  bool tail_kept = true;
  for (int64_t i = end; i < end + 8; ++i)
    tail_kept = tail_kept && std::memcmp(&r.ws[size_t(i)], &before[size_t(i)], 4) == 0;
  for (int64_t i = 0; i < oa; ++i)
    tail_kept = tail_kept && std::memcmp(&r.ws[size_t(i)], &before[size_t(i)], 4) == 0;
  rep.ratio(worst, kGemmLimit, at);
  rep.expect(padding_kept && tail_kept, std::string(at) + " leaves the padding");
}

// One product through blocked::product (the host's tile choice, vector flags and split k) over
// a batch of 2 whose operands share each matrix's workspace slice, against double.
void product_case(Report &rep, std::mt19937_64 &rng, const ml::blocked::Options &o, int m, int n,
                  int k, int flags, float alpha, float beta, bool scratch) {
  const bool ta = flags & ML_GEMM_TRANS_A, tb = flags & ML_GEMM_TRANS_B;
  const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  const int64_t oa = 0, ob = oa + int64_t(ar) * ac, oc = ob + int64_t(br) * bc;
  const int64_t op = oc + int64_t(m) * n, part_floats = scratch ? 16 * int64_t(m) * n : 0;
  const int64_t stride = (op + part_floats + 31) / 32 * 32;
  const int batch = 2;
  kt::CpuStepRunner r;
  r.ws.assign(size_t(batch * stride), std::nanf(""));
  std::normal_distribution<double> g;
  for (int b = 0; b < batch; ++b)
    for (int64_t i = 0; i < op; ++i)
      if (i < oc || beta != 0) r.ws[size_t(b * stride + i)] = float(g(rng));
  const std::vector<float> before = r.ws;
  ml::blocked::GemmCall c;
  c.flags = flags;
  c.m = m;
  c.n = n;
  c.k = k;
  c.alpha = alpha;
  c.beta = beta;
  c.a = oa;
  c.b = ob;
  c.c = oc;
  c.lda = ar;
  c.ldb = br;
  c.ldc = m;
  c.batch = batch;
  c.stride = stride;
  const ml_status st = ml::blocked::product(r, o, c, scratch ? op : 0, part_floats);
  char at[160];
  std::snprintf(at, sizeof at, "product m%d n%d k%d flags%d L%d R%d scratch%d", m, n, k, flags,
                o.gemm_lanes, o.gemm_regs, scratch ? 1 : 0);
  rep.expect(st == ML_OK, std::string(at) + " enqueued");
  double worst = 0;
  for (int b = 0; b < batch; ++b) {
    const float *A = before.data() + b * stride + oa, *B = before.data() + b * stride + ob;
    const float *C0 = before.data() + b * stride + oc, *C = r.ws.data() + b * stride + oc;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        const RefEntry e = ref_entry(A, ar, ta, B, br, tb, C0, m, i, j, k, alpha, beta);
        const double got = C[size_t(j) * m + i];
        const double err = std::fabs(got - e.value);
        worst = std::max(worst, std::isfinite(got) ? err / (k * kt::kUlp * e.scale) : 1e30);
      }
  }
  rep.ratio(worst, kGemmLimit, at);
}

int suite_gemm() {
  Report rep;
  std::mt19937_64 rng(11);
  // Small tiles (T = 16, 32, 64 with 4 x 4 per lane): tails in m, n and k, k below a slice.
  const int shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {16, 16, 16}, {33, 17, 40}, {70, 65, 9},
                           {3, 50, 70}};
  for (auto &s : shapes)
    for (int flags = 0; flags < 4; ++flags)
      for (int lanes : {4, 8}) {
        gemm_case(rep, rng, s[0], s[1], s[2], flags, lanes, 4, 1.0f, 0.0f);
        gemm_case(rep, rng, s[0], s[1], s[2], flags, lanes, 4, -1.0f, 1.0f);
        gemm_case(rep, rng, s[0], s[1], s[2], flags, lanes, 4, 0.5f, 2.0f);
      }
  // The large tiles (256 lanes: 64 x 64 with 4 x 4, 128 x 128 with 8 x 8): one full tile and
  // tails, with aligned operands (vector paths) and unaligned ones.
  for (int flags = 0; flags < 4; ++flags) {
    gemm_case(rep, rng, 128, 128, 24, flags, 16, 8, 1.0f, 0.0f, 1, true);
    for (int regs : {4, 8}) {
      gemm_case(rep, rng, 131, 67, 21, flags, 16, regs, -1.0f, 1.0f, 1, true);
      gemm_case(rep, rng, 64, 203, 37, flags, 16, regs, 0.5f, 0.0f);
    }
  }
  // Vector paths of the small tiles, m, n, k multiples of 4 or not.
  for (int flags = 0; flags < 4; ++flags) {
    gemm_case(rep, rng, 36, 20, 44, flags, 8, 4, 1.0f, 0.0f, 1, true);
    gemm_case(rep, rng, 39, 21, 45, flags, 4, 4, -1.0f, 0.0f, 1, true);
    gemm_case(rep, rng, 17, 35, 7, flags, 4, 4, 1.0f, 0.0f, 1, true);
  }
  // Split k: slices of whole ML_GEMM_BK steps, a last slice shorter or empty.
  for (int flags = 0; flags < 4; ++flags)
    for (int split : {2, 3, 7}) {
      gemm_case(rep, rng, 9, 70, 100, flags, 4, 4, 1.0f, 0.0f, split);
      gemm_case(rep, rng, 33, 5, 129, flags, 8, 4, -1.0f, 1.0f, split);
      if (split == 2)
        gemm_case(rep, rng, 131, 9, 83, flags, 16, 8, 2.0f, -1.0f, split, true);
      else
        gemm_case(rep, rng, 132, 40, 100, flags, 16, split == 3 ? 8 : 4, 1.0f, 0.0f, split, true);
    }
  // Through the host's planning: the device-sized Options pick 128-wide tiles (few groups
  // wanted), 64-wide ones (many wanted), 32-wide thin tiles split over k when scratch is given.
  ml::blocked::Options wide;
  wide.gemm_regs = 8;
  wide.parallel_groups = 2;
  ml::blocked::Options narrow = wide;
  narrow.parallel_groups = 64;
  for (int flags = 0; flags < 4; ++flags) {
    product_case(rep, rng, wide, 140, 131, 36, flags, -1.0f, 1.0f, false);
    product_case(rep, rng, narrow, 140, 131, 36, flags, 1.0f, 0.0f, false);
    product_case(rep, rng, narrow, 20, 70, 300, flags, 1.0f, 0.0f, true);
    product_case(rep, rng, narrow, 67, 9, 257, flags, 0.5f, 2.0f, true);
  }
  std::printf("gemm: %d checks, %d failures, worst ratio %.3g (%s)\n", rep.checks, rep.failures,
              rep.worst, rep.worst_where.c_str());
  return rep.failures ? 1 : 0;
}

// ---- qr ----

KT_QR_ENTRY(qr_group_entry, ml_qr_householder)

void qr_case(Report &rep, kt::QrWorst &worst, int m, int n, int mode,
             const ml::blocked::Options &o, std::mt19937_64 &rng) {
  const kt::QrShape s(m, n, mode);
  // + a NaN matrix in the middle and an Inf one at the end
  const kt::NamedBatch in = kt::nan_inf_batch(kt::general_families(m, n, rng), m, n,
                                              -std::numeric_limits<float>::infinity(), rng);
  kt::QrOut out(s, in.size()), ref(s, in.size());
  kt::CpuStepRunner run;
  rep.expect(kt::run_blocked_qr(run, s, in, out, o) == ML_OK, where("qr run", m, n, "", mode));
  // The unblocked group kernel on the same input (its own Householder vectors are the same).
  kt::run_qr_kernel(qr_group_entry, 32, in.size(), ml_qr_householder_scratch_floats(m, n), s, in,
                    ref, true);

  const auto at_b = [&](const std::string &fam, int b) { return where(s.op, m, n, fam, b); };
  kt::each_qr_matrix(rep, s, in, out, at_b, [&](int b, const std::string &at, const Mat &A,
                                                const Mat &R) {
    const std::string &fam = in.name[b];
    const int info = out.info[b];
    if (fam != "rankdef" && fam != "clustered" && fam != "geometric" && fam != "repeated")
      rep.expect(info == ref.info[b], at + " info as the group kernel");
    if (fam == "zero") rep.expect(info == ML_INFO_RANK_DEFICIENT, at + " info RANK_DEFICIENT");
    if (fam == "gaussian" || fam == "identity") rep.expect(info == 0, at + " info 0");
    if (fam == "gaussian" || fam == "identity" || fam == "scale1e-30" || fam == "scale1e37" ||
        fam == "zero") {
      const Mat R0 = kt::from_float(ref.r.data() + size_t(b) * s.r_floats(), s.rrows, n);
      const double d = kt::r_distance(R0, R, kt::norm1(A), s.mx, false);
      rep.ratio(d, kAgreeLimit, at + " R vs unblocked");
      worst.agree = std::max(worst.agree, d);
    }
    const float *qb = out.q.data() + size_t(b) * s.q_floats();
    if (s.want_q) worst.add(kt::check_q_factor(rep, at, s, A, qb, R, s.mx));
  });
}

int suite_qr() {
  Report rep;
  kt::QrWorst worst;
  std::mt19937_64 rng(23);
  ml::blocked::Options o = kt::blocked_options(8, 4, 32);
  // Panel boundaries inside the matrix, a last panel of one column (17, 33), wide and tall.
  const int shapes[][2] = {{1, 1}, {5, 3}, {3, 5}, {8, 8}, {17, 17}, {40, 24},
                           {24, 40}, {33, 33}, {67, 45}};
  for (auto &s : shapes)
    for (int mode : {ML_K_QR_REDUCED, ML_K_QR_R, ML_K_QR_COMPLETE}) {
      kt::Timer t("qr blocked", s[0], s[1], o.max_group);
      qr_case(rep, worst, s[0], s[1], mode, o, rng);
    }
  // One larger matrix with the GPU's panel width and bigger groups.
  ml::blocked::Options big = kt::blocked_options(32, 8, 64);
  qr_case(rep, worst, 130, 97, ML_K_QR_REDUCED, big, rng);
  // Panels narrowed by a small shared-memory budget (as Metal's 32 KB narrows them), and a
  // tall matrix whose V^T X products split k.
  ml::blocked::Options narrow = o;
  narrow.shared_floats = 1200;
  qr_case(rep, worst, 90, 70, ML_K_QR_COMPLETE, narrow, rng);
  ml::blocked::Options split = o;
  split.parallel_groups = 64;
  qr_case(rep, worst, 300, 24, ML_K_QR_REDUCED, split, rng);
  // One level (no outer panels): each panel's T straight from the panel step.
  ml::blocked::Options one = o;
  one.nb_outer = 0;
  qr_case(rep, worst, 67, 45, ML_K_QR_REDUCED, one, rng);
  qr_case(rep, worst, 40, 50, ML_K_QR_COMPLETE, one, rng);
  // A workspace bound that forces one matrix per chunk.
  ml::blocked::Options chunked = o;
  chunked.max_workspace_bytes = 1;
  qr_case(rep, worst, 20, 13, ML_K_QR_REDUCED, chunked, rng);
  std::printf("qr: %d checks, %d failures; worst |A-QR| %.3g, |I-Q^TQ| %.3g, vs unblocked %.3g "
              "(limits %g, %g)\n",
              rep.checks, rep.failures, worst.resid, worst.orth, worst.agree, kQrLimit,
              kAgreeLimit);
  return rep.failures ? 1 : 0;
}

// ---- larft ----

constexpr double kLarftLimit = 8;  // |T - T_ref| / (r eps max(1, |T_ref|)), entrywise max

// T of jb random Householder reflectors (r rows, ld ldv, tau = 2 / |v|^2) for a batch of 2:
// ml::blocked::larft (product + larft_gram, split k when `split`) against the larft step and
// double. V's top block holds NaN on and above its diagonal (neither may read it); T's slots
// start as NaN, so every entry must be written.
void larft_case(Report &rep, std::mt19937_64 &rng, int r, int jb, int nb, int ldv, int lanes,
                bool split) {
  const int batch = 2;
  ml::blocked::Slice sl;
  const int64_t ov = sl.add(int64_t(ldv) * jb), otau = sl.add(jb), told = sl.add(nb * nb),
                tnew = sl.add(nb * nb), part = split ? sl.add(16 * jb * jb) : 0;
  const int64_t stride = sl.floats;
  kt::CpuStepRunner run;
  run.ws.assign(size_t(stride * batch), std::nanf(""));
  std::normal_distribution<double> g;
  std::vector<std::vector<double>> vd(batch, std::vector<double>(size_t(r) * jb, 0.0));
  std::vector<std::vector<double>> taud(batch, std::vector<double>(jb, 0.0));
  for (int b = 0; b < batch; ++b) {
    float *V = run.ws.data() + b * stride + ov;
    for (int c = 0; c < jb; ++c) {
      double nrm = 1;
      for (int i = c + 1; i < r; ++i) {
        const float x = float(g(rng) * (b == 0 ? 1.0 : 1e-3));  // second: near-trivial
        V[int64_t(c) * ldv + i] = x;
        vd[b][size_t(c) * r + i] = x;
        nrm += double(x) * x;
      }
      vd[b][size_t(c) * r + c] = 1;
      const float t = float(2 / nrm);
      run.ws[size_t(b * stride + otau + c)] = t;
      taud[b][c] = t;
    }
  }
  ml::blocked::StepLaunch l{};
  l.step = ml::blocked::kStep_larft;
  l.group_size = lanes;
  l.shared_floats = ml_larft_step_shared_floats(nb);
  l.p.batch = batch;
  l.p.groups = batch;
  l.p.m = r;
  ML_LARFT_COUNT(l.p) = jb;
  ML_LARFT_LDT(l.p) = nb;
  l.p.off[ML_LARFT_V] = ov;
  l.p.ld[ML_LARFT_V] = ldv;
  l.p.off[ML_LARFT_TAU] = otau;
  l.p.off[ML_LARFT_T] = told;
  for (int i = 0; i < 4; ++i) l.p.stride[i] = stride;
  run.launch(l);
  ml::blocked::Options o;
  o.max_group = 1024;
  const ml::blocked::Chunk ch{run, 0, batch, stride};
  const ml_status st = ml::blocked::larft(ch, o, ov, ldv, otau, r, jb, nb, tnew, lanes, part,
                                          split ? 16 * jb * jb : 0);
  char w[160];
  std::snprintf(w, sizeof w, "larft r %d jb %d nb %d ldv %d lanes %d split %d", r, jb, nb, ldv,
                lanes, int(split));
  rep.expect(st == ML_OK, std::string(w) + " status");
  const double eps = std::ldexp(1.0, -24);
  for (int b = 0; b < batch; ++b) {
    // T in double: the same recurrence on the exact Gram matrix.
    std::vector<double> Td(size_t(nb) * nb, 0.0);
    for (int c = 0; c < jb; ++c) {
      Td[size_t(c) * nb + c] = taud[b][c];
      for (int q = 0; q < c; ++q) {
        double t = 0;
        for (int p = q; p < c; ++p) {
          double gpc = 0;
          for (int i = 0; i < r; ++i) gpc += vd[b][size_t(p) * r + i] * vd[b][size_t(c) * r + i];
          t += Td[size_t(p) * nb + q] * gpc;
        }
        Td[size_t(c) * nb + q] = -taud[b][c] * t;
      }
    }
    double tmax = 1, e_new = 0, e_old = 0, e_pair = 0;
    for (double x : Td) tmax = std::max(tmax, std::abs(x));
    bool zeros = true;
    for (int e = 0; e < nb * nb; ++e) {
      const int c = e / nb, q = e - c * nb;
      const double tn = run.ws[size_t(b * stride + tnew + e)];
      const double to = run.ws[size_t(b * stride + told + e)];
      if (q > c || c >= jb) zeros = zeros && tn == 0;
      const double d = std::abs(tn - Td[size_t(e)]);
      e_new = std::isnan(d) ? INFINITY : std::max(e_new, d);
      e_old = std::max(e_old, std::abs(to - Td[size_t(e)]));
      const double dp = std::abs(tn - to);
      e_pair = std::isnan(dp) ? INFINITY : std::max(e_pair, dp);
    }
    const double scale = r * eps * tmax;
    std::snprintf(w, sizeof w, "larft r %d jb %d nb %d ldv %d lanes %d split %d #%d", r, jb, nb,
                  ldv, lanes, int(split), b);
    rep.expect(zeros, std::string(w) + " zeros outside the triangle");
    rep.ratio(e_new / scale, kLarftLimit, std::string(w) + " vs double");
    rep.ratio(e_pair / scale, kLarftLimit, std::string(w) + " vs larft step");
    rep.ratio(e_old / scale, kLarftLimit, std::string(w) + " larft step vs double");
  }
}

int suite_larft() {
  std::mt19937_64 rng(71);
  Report rep;
  larft_case(rep, rng, 50, 7, 8, 50, 64, false);
  larft_case(rep, rng, 37, 5, 16, 40, 32, false);   // ld past the rows
  larft_case(rep, rng, 20, 20, 32, 20, 32, false);  // no rows below the top block
  larft_case(rep, rng, 21, 20, 32, 23, 64, false);  // one row below it
  larft_case(rep, rng, 300, 32, 32, 301, 128, true);
  larft_case(rep, rng, 260, 64, 64, 260, 256, true);
  std::printf("larft: %d checks, %d failures; worst ratio %.3g at %s (limit %g)\n", rep.checks,
              rep.failures, rep.worst, rep.worst_where.c_str(), kLarftLimit);
  return rep.failures ? 1 : 0;
}

// ---- larfb ----

constexpr double kLarfbLimit = 4;  // error / (eps (r + count) componentwise bound)

// C := H C or H^T C (H = I - V T V^T, count reflectors over r rows, ncols columns) for a batch
// of 2 by ml::blocked::larfb with the larfb_cols step (o.larfb_cols) and with the three
// products, against double: the componentwise ratio |err| / (eps (r + count) (|C| + |V| |op(T)|
// |V^T| |C|)). Matrix 1's C has a NaN in column nan_col: that column must come back all NaN,
// the others as in double; V and C have leading dimensions past their rows; T random upper
// triangular (zeros below, as larft writes it: the products read all of T).
void larfb_case(Report &rep, std::mt19937_64 &rng, int r, int count, int ncols, bool trans,
                int nan_col) {
  const int batch = 2, ldv = r + 3, ldt = count + 1, ldc = r + 5;
  ml::blocked::Slice sl;
  const int64_t ov = sl.add(int64_t(ldv) * count), ot = sl.add(int64_t(ldt) * count),
                oc = sl.add(int64_t(ldc) * ncols), ox1 = sl.add(int64_t(64) * ncols),
                ox2 = sl.add(int64_t(64) * ncols);
  const int64_t stride = sl.floats;
  std::normal_distribution<double> g;
  std::vector<float> init(size_t(stride * batch), std::nanf(""));
  for (int b = 0; b < batch; ++b) {
    float *V = init.data() + b * stride + ov;
    float *T = init.data() + b * stride + ot;
    float *C = init.data() + b * stride + oc;
    for (int q = 0; q < count; ++q) {
      for (int i = 0; i < r; ++i)
        V[int64_t(q) * ldv + i] = i < q ? 0.0f : i == q ? 1.0f : float(g(rng));
      for (int l = 0; l < count; ++l) T[int64_t(q) * ldt + l] = l <= q ? float(g(rng) * 0.3) : 0.0f;
    }
    for (int j = 0; j < ncols; ++j)
      for (int i = 0; i < r; ++i) C[int64_t(j) * ldc + i] = float(g(rng) * (b ? 1e3 : 1.0));
    if (b == 1 && nan_col >= 0) C[int64_t(nan_col) * ldc + r / 2] = std::nanf("");
  }
  // The reference and its bound in double.
  std::vector<double> ref(size_t(batch) * r * ncols), bound(ref.size());
  for (int b = 0; b < batch; ++b) {
    const float *V = init.data() + b * stride + ov;
    const float *T = init.data() + b * stride + ot;
    const float *C = init.data() + b * stride + oc;
    auto t = [&](int q, int l) {  // op(T)[q][l]
      const int row = trans ? l : q, col = trans ? q : l;
      return row <= col ? double(T[int64_t(col) * ldt + row]) : 0.0;
    };
    for (int j = 0; j < ncols; ++j) {
      std::vector<double> x(count), xa(count), y(count), ya(count);
      for (int q = 0; q < count; ++q)
        for (int i = 0; i < r; ++i) {
          x[q] += double(V[int64_t(q) * ldv + i]) * C[int64_t(j) * ldc + i];
          xa[q] += std::abs(double(V[int64_t(q) * ldv + i]) * C[int64_t(j) * ldc + i]);
        }
      for (int q = 0; q < count; ++q)
        for (int l = 0; l < count; ++l) {
          y[q] += t(q, l) * x[l];
          ya[q] += std::abs(t(q, l)) * xa[l];
        }
      for (int i = 0; i < r; ++i) {
        double v = C[int64_t(j) * ldc + i], a = std::abs(v);
        for (int q = 0; q < count; ++q) {
          v -= double(V[int64_t(q) * ldv + i]) * y[q];
          a += std::abs(double(V[int64_t(q) * ldv + i])) * ya[q];
        }
        ref[(size_t(b) * ncols + j) * r + i] = v;
        bound[(size_t(b) * ncols + j) * r + i] = a;
      }
    }
  }
  const double eps = std::ldexp(1.0, -24);
  for (int fused = 0; fused < 2; ++fused) {
    kt::CpuStepRunner run;
    run.ws = init;
    ml::blocked::Options o;
    o.max_group = 1024;
    o.parallel_groups = 8;  // a few columns per group where ncols allows
    o.larfb_cols = fused ? ncols : 0;
    const ml::blocked::Chunk ch{run, 0, batch, stride};
    const ml::blocked::BlockReflector h{ov, ldv, ot, ldt, r, count};
    const ml::blocked::LarfbWork w{ox1, ox2, 64, 0, 0};
    char at[160];
    std::snprintf(at, sizeof at, "larfb %s r %d count %d ncols %d trans %d", fused ? "step" : "products",
                  r, count, ncols, int(trans));
    rep.expect(ml::blocked::larfb(ch, o, h, trans, oc, ldc, ncols, w) == ML_OK,
               std::string(at) + " status");
    for (int b = 0; b < batch; ++b) {
      const float *C = run.ws.data() + b * stride + oc;
      for (int j = 0; j < ncols; ++j) {
        const bool nan_here = b == 1 && j == nan_col;
        bool all_nan = true;
        double worst = 0;
        for (int i = 0; i < r; ++i) {
          const float x = C[int64_t(j) * ldc + i];
          all_nan = all_nan && std::isnan(x);
          const size_t e = (size_t(b) * ncols + j) * r + i;
          if (!nan_here)
            worst = std::max(worst, std::isfinite(x) ? std::abs(x - ref[e]) /
                                                           (eps * (r + count) * bound[e] + 1e-300)
                                                     : 1e300);
        }
        if (nan_here) {
          rep.expect(all_nan, std::string(at) + " NaN column all NaN");
        } else {
          char wj[200];
          std::snprintf(wj, sizeof wj, "%s b %d col %d", at, b, j);
          rep.ratio(worst, kLarfbLimit, wj);
        }
      }
      // Nothing past the rows of C written (its ld's padding keeps its NaN).
      for (int j = 0; j < ncols; ++j)
        rep.expect(std::isnan(C[int64_t(j) * ldc + r]), std::string(at) + " padding untouched");
    }
  }
}

int suite_larfb() {
  std::mt19937_64 rng(73);
  Report rep;
  // Every register class (8, 16, 32, 64 reflectors), partial classes, columns per group 1..8
  // (parallel_groups 8 above), a column block cut short, rows below and above one group's lanes.
  larfb_case(rep, rng, 40, 8, 70, true, 3);
  larfb_case(rep, rng, 300, 5, 9, false, 8);
  larfb_case(rep, rng, 33, 13, 17, true, 0);
  larfb_case(rep, rng, 600, 16, 3, false, 1);
  larfb_case(rep, rng, 64, 30, 40, false, 39);
  larfb_case(rep, rng, 290, 32, 5, true, 2);
  larfb_case(rep, rng, 70, 50, 11, true, 10);
  larfb_case(rep, rng, 64, 64, 2, false, 0);
  larfb_case(rep, rng, 7, 1, 1, true, 0);
  std::printf("larfb: %d checks, %d failures; worst ratio %.3g at %s (limit %g)\n", rep.checks,
              rep.failures, rep.worst, rep.worst_where.c_str(), kLarfbLimit);
  return rep.failures ? 1 : 0;
}


}  // namespace

int main(int argc, char **argv) {
  return kt::run_suite(argc, argv, "test_blocked gemm|qr|larft|larfb",
                       {{"gemm", suite_gemm},
                        {"qr", suite_qr},
                        {"larft", suite_larft},
                        {"larfb", suite_larfb}});
}
