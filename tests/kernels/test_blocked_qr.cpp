// Tests of the blocked QR with its panels spread over many groups (core/kernels/qr_tsqr.h,
// sequenced by core/src/blocked_qr.cpp) through the CPU runner, at reduced sizes: row blocks of
// a few dozen rows so that panels split into 2..9 blocks, the last block short, panels that
// fall back to one group once their rows drop below two blocks, and a shared budget that
// caps the number of blocks. LAPACK-style ratios (docs/design.md section 7) on the hard
// families plus zero and graded columns, NaN/Inf isolation in a batch, info bits, R against
// the unblocked group kernel up to the signs of its rows.
// Usage: test_blocked_qr tsqr|split|fused
#include "kernel_runner.h"  // first: the dialect of the kernel headers below

#include "../../core/kernels/qr_householder.h"
#include "kernel_test_util.h"
#include "step_runner.h"

using kt::Mat;
using kt::Report;

namespace {

using kt::kQrLimit;
constexpr double kAgreeLimit = 60;  // R vs the unblocked kernel, as test_blocked scales it

// Counts the spread-panel launches of a run on the CPU step runner.
class CountingRunner final : public ml::blocked::Runner {
 public:
  kt::CpuStepRunner inner;
  int leaves = 0, fused = 0, unfused = 0;
  ml_status launch(const ml::blocked::StepLaunch &l) override {
    if (l.step == ml::blocked::kStep_tsqr_leaf) ++leaves;
    if (l.step == ml::blocked::kStep_qr_panel) ++((l.p.flags & ML_QR_FUSED) ? fused : unfused);
    return inner.launch(l);
  }
  ml_status run(const ml::Call &c, int32_t kf, const ml::blocked::Options &o) {
    const int64_t bytes = ml::blocked::workspace_bytes(c, kf, o);
    inner.ws.assign(static_cast<size_t>(bytes / 4), std::nanf(""));
    inner.a = c.a;
    inner.o0 = c.out0;
    inner.o1 = c.out1;
    inner.o2 = c.out2;
    inner.info = c.info;
    return ml::blocked::run(c, kf, o, *this);
  }
};

void qr_group_entry(const ml_ctx &ctx, void *u) {
  auto &x = *static_cast<kt::QrArgs *>(u);
  ml_qr_householder(ctx, x.p, x.a, x.q, x.r, x.info);
}

std::string where(const char *op, int m, int n, const std::string &fam, int idx) {
  char b[160];
  std::snprintf(b, sizeof b, "%s %dx%d %s #%d", op, m, n, fam.c_str(), idx);
  return b;
}

struct Worst {
  double resid = 0, orth = 0, agree = 0;
};

kt::Families families(int m, int n, std::mt19937_64 &rng) {
  kt::Families f = kt::general_families(m, n, rng);
  // Zero columns inside and at the start of panels, and columns graded over 1e-12.
  Mat z = kt::gaussian(rng, m, n), g = kt::gaussian(rng, m, n);
  for (int j = 0; j < n; j += 3)
    for (int i = 0; i < m; ++i) z(i, j) = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) g(i, j) *= std::pow(1e-12, n > 1 ? double(j) / (n - 1) : 0);
  f.push_back({"zerocols", z});
  f.push_back({"gradedcols", g});
  return f;
}

// One batch of the families (plus a NaN and an Inf matrix) through the blocked QR under o;
// spread: whether the run must have spread panels.
void qr_case(Report &rep, Worst &worst, int m, int n, int mode, const ml::blocked::Options &o,
             bool spread, std::mt19937_64 &rng) {
  kt::Families fams = families(m, n, rng);
  const int k = std::min(m, n);
  const int qcols = mode == ML_K_QR_COMPLETE ? m : k, rrows = qcols;
  const int nf = int(fams.size());
  const int batch = nf + 2;
  const int bad_nan = nf / 2;
  std::vector<std::string> name;
  std::vector<float> a;
  for (int b = 0, f = 0; b < batch; ++b) {
    std::vector<float> v;
    if (b == bad_nan || b == batch - 1) {
      v = kt::to_float(kt::gaussian(rng, m, n));
      v[size_t(rng() % v.size())] = b == bad_nan ? std::numeric_limits<float>::quiet_NaN()
                                                 : std::numeric_limits<float>::infinity();
      name.push_back(b == bad_nan ? "nan" : "inf");
    } else {
      v = kt::to_float(fams[f].second);
      name.push_back(fams[f].first);
      ++f;
    }
    a.insert(a.end(), v.begin(), v.end());
  }
  const bool want_q = mode != ML_K_QR_R;
  std::vector<float> q(size_t(batch) * m * qcols, -7.f), r(size_t(batch) * rrows * n, -7.f);
  std::vector<int> info(batch, -1);
  ml::Call c{ML_OP_QR, batch, m, n, mode, a.data(), nullptr, r.data(), nullptr, info.data()};
  if (want_q) c.out0 = q.data();
  CountingRunner run;
  const ml_status st = run.run(c, mode, o);
  const char *op = mode == ML_K_QR_R ? "qr-r" : mode == ML_K_QR_COMPLETE ? "qr-complete" : "qr";
  rep.expect(st == ML_OK, where(op, m, n, "run", mode));
  rep.expect((run.leaves > 0) == spread, where(op, m, n, spread ? "spread" : "not spread", 0));
  // The one-group panels take the fused factorisation exactly when o asks for it.
  const bool want_fused = o.qr_panel_fused != 0 && o.max_group >= 32;
  rep.expect(want_fused ? run.unfused == 0 : run.fused == 0,
             where(op, m, n, want_fused ? "fused panels" : "unfused panels", 0));
  std::vector<float> q0(size_t(batch) * m * qcols), r0(size_t(batch) * rrows * n);
  std::vector<int> info0(batch, -1);
  kt::QrArgs ref{{m, n, mode, 0, batch, 0}, a.data(), q0.data(), r0.data(), info0.data()};
  ml::kernel_runner::run(32, batch, ml_qr_householder_scratch_floats(m, n), qr_group_entry, &ref);

  const int mx = std::max(m, n);
  for (int b = 0; b < batch; ++b) {
    const std::string &fam = name[b];
    const std::string at = where(op, m, n, fam, b);
    const float *rb = r.data() + size_t(b) * rrows * n;
    const float *qb = q.data() + size_t(b) * m * qcols;
    if (fam == "nan" || fam == "inf") {
      rep.expect(kt::all_nan(rb, size_t(rrows) * n), at + " R all NaN");
      if (want_q) rep.expect(kt::all_nan(qb, size_t(m) * qcols), at + " Q all NaN");
      rep.expect(info[b] == ML_INFO_NONFINITE, at + " info NONFINITE");
      continue;
    }
    rep.expect(kt::all_finite(rb, size_t(rrows) * n), at + " R finite");
    bool tri = true;
    for (int i = 0; i < rrows; ++i)
      for (int j = 0; j < std::min(i, n); ++j) tri = tri && rb[size_t(i) * n + j] == 0.f;
    rep.expect(tri, at + " R upper triangular");
    if (fam == "zero" || fam == "zerocols")
      rep.expect(info[b] == ML_INFO_RANK_DEFICIENT, at + " info RANK_DEFICIENT");
    if (fam == "gaussian" || fam == "identity") rep.expect(info[b] == 0, at + " info 0");
    Mat A = kt::from_float(a.data() + size_t(b) * m * n, m, n);
    Mat R = kt::from_float(rb, rrows, n);
    const double an = kt::norm1(A);
    if (fam == "gaussian" || fam == "scale1e-30" || fam == "scale1e37") {
      // R is unique up to the signs of its rows for a matrix of full rank.
      Mat R0 = kt::from_float(r0.data() + size_t(b) * rrows * n, rrows, n);
      for (int i = 0; i < std::min(rrows, n); ++i) {
        const double s = (R0(i, i) < 0) == (R(i, i) < 0) ? 1 : -1;
        for (int j = 0; j < n; ++j) R0(i, j) -= s * R(i, j);
      }
      const double d = an > 0 ? kt::norm1(R0) / (mx * an * kt::kUlp) : kt::norm1(R0);
      rep.ratio(d, kAgreeLimit, at + " R vs unblocked");
      worst.agree = std::max(worst.agree, d);
    }
    if (!want_q) continue;
    rep.expect(kt::all_finite(qb, size_t(m) * qcols), at + " Q finite");
    const kt::QrRatios x = kt::qr_ratios(A, kt::from_float(qb, m, qcols), R, mx);
    rep.ratio(x.orth, kQrLimit, at + " |I - Q^T Q|");
    worst.orth = std::max(worst.orth, x.orth);
    rep.ratio(x.resid, kQrLimit, at + " |A - QR|");
    worst.resid = std::max(worst.resid, x.resid);
  }
}

int suite_tsqr() {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(29);
  ml::blocked::Options o;
  o.nb = 8;
  o.gemm_lanes = 4;
  o.max_group = 32;
  o.qr_tsqr_rows = 16;
  // Tall (9 and 6 blocks at first, the last panel one column), square (the last panels on one
  // group), wide (panels of the first rows only), a single panel.
  const int shapes[][3] = {{150, 17, ML_K_QR_REDUCED}, {100, 17, ML_K_QR_COMPLETE},
                           {48, 48, ML_K_QR_REDUCED},  {40, 57, ML_K_QR_COMPLETE},
                           {96, 8, ML_K_QR_R},         {33, 33, ML_K_QR_REDUCED}};
  for (auto &s : shapes) {
    kt::Timer t("qr tsqr", s[0], s[1], o.max_group);
    qr_case(rep, worst, s[0], s[1], s[2], o, true, rng);
  }
  // The GPU's panel width with bigger groups and blocks.
  ml::blocked::Options big;
  big.nb = 32;
  big.gemm_lanes = 8;
  big.max_group = 64;
  big.qr_tsqr_rows = 40;
  qr_case(rep, worst, 130, 70, ML_K_QR_REDUCED, big, true, rng);
  // A shared budget that holds the stack of 5 R factors only (fewer, taller blocks), and one
  // that holds no spread panel (narrowed one-group panels throughout).
  ml::blocked::Options capped = o;
  capped.shared_floats = ml_tsqr_leaf_shared_floats(40, o.nb);
  qr_case(rep, worst, 150, 20, ML_K_QR_REDUCED, capped, true, rng);
  ml::blocked::Options none = o;
  none.shared_floats = 500;
  qr_case(rep, worst, 150, 20, ML_K_QR_COMPLETE, none, false, rng);
  // Spread only matrices with m >= 4 n: a tall one spreads, a square one does not.
  ml::blocked::Options ratio = o;
  ratio.qr_tsqr_min_ratio = 4;
  qr_case(rep, worst, 150, 17, ML_K_QR_REDUCED, ratio, true, rng);
  qr_case(rep, worst, 48, 48, ML_K_QR_REDUCED, ratio, false, rng);
  // Batches above qr_tsqr_max_batch and qr_tsqr_rows = 0: one group per panel.
  ml::blocked::Options off = o;
  off.qr_tsqr_max_batch = 2;
  qr_case(rep, worst, 70, 20, ML_K_QR_REDUCED, off, false, rng);
  off = o;
  off.qr_tsqr_rows = 0;
  qr_case(rep, worst, 70, 20, ML_K_QR_REDUCED, off, false, rng);
  // A workspace bound that forces one matrix per chunk, split products.
  ml::blocked::Options chunked = o;
  chunked.max_workspace_bytes = 1;
  chunked.parallel_groups = 64;
  qr_case(rep, worst, 60, 20, ML_K_QR_REDUCED, chunked, true, rng);
  std::printf(
      "tsqr: %d checks, %d failures; worst |A-QR| %.3g, |I-Q^TQ| %.3g, R vs unblocked "
      "%.3g (limits %g, %g)\n",
      rep.checks, rep.failures, worst.resid, worst.orth, worst.agree, kQrLimit, kAgreeLimit);
  return rep.failures ? 1 : 0;
}

// Panel columns split over several warps (Options::qr_panel_split): groups of 2, 3 and 4 warps
// so that the last columns of a panel take 1..4 warps each, one-group and spread panels.
int suite_split() {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(31);
  ml::blocked::Options o;
  o.nb = 8;
  o.gemm_lanes = 4;
  o.max_group = 128;
  o.qr_panel_split = 1;
  o.qr_panel_fused = 0;  // the split applies to the unfused factorisation
  const int shapes[][3] = {{70, 23, ML_K_QR_REDUCED}, {40, 57, ML_K_QR_COMPLETE}};
  for (auto &s : shapes) {
    kt::Timer t("qr split", s[0], s[1], o.max_group);
    qr_case(rep, worst, s[0], s[1], s[2], o, false, rng);
  }
  ml::blocked::Options spread = o;
  spread.qr_tsqr_rows = 24;
  {
    kt::Timer t("qr split spread", 120, 17, o.max_group);
    qr_case(rep, worst, 120, 17, ML_K_QR_REDUCED, spread, true, rng);
  }
  // Only the first panels (>= 100 rows) spread, the rest on one group.
  spread.qr_tsqr_min_rows = 100;
  qr_case(rep, worst, 120, 40, ML_K_QR_COMPLETE, spread, true, rng);
  ml::blocked::Options three = o;
  three.max_group = 96;
  three.nb = 16;
  {
    kt::Timer t("qr split", 64, 40, three.max_group);
    qr_case(rep, worst, 64, 40, ML_K_QR_REDUCED, three, false, rng);
  }
  std::printf(
      "split: %d checks, %d failures; worst |A-QR| %.3g, |I-Q^TQ| %.3g, R vs unblocked "
      "%.3g (limits %g, %g)\n",
      rep.checks, rep.failures, worst.resid, worst.orth, worst.agree, kQrLimit, kAgreeLimit);
  return rep.failures ? 1 : 0;
}

// The fused panel factorisation (core/kernels/qr_blocked.h ml_qr_factor_fused) with 1..4
// simdgroups (rows dealt round-robin, so owned rows start anywhere), panels of 8, 16 and 40
// columns (a lane owning two columns), one-group and narrowed panels, against the same
// families with the fused factorisation off; graded and zero columns take its second
// reduction.
int suite_fused() {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(37);
  struct Case {
    int m, n, mode, nb, lanes;
  };
  const Case cases[] = {{70, 23, ML_K_QR_REDUCED, 8, 32},   {40, 57, ML_K_QR_COMPLETE, 16, 64},
                        {97, 45, ML_K_QR_REDUCED, 40, 96},  {130, 70, ML_K_QR_REDUCED, 16, 128},
                        {64, 64, ML_K_QR_R, 40, 64},        {33, 90, ML_K_QR_REDUCED, 8, 128}};
  for (const Case &x : cases) {
    ml::blocked::Options o;
    o.nb = x.nb;
    o.gemm_lanes = 4;
    o.max_group = 128;
    o.qr_panel_fused = 1;  // off by default (slower on the H200); this suite tests it
    o.qr_row_larft = 1;
    o.qr_fused_lanes = x.lanes;
    kt::Timer t("qr fused", x.m, x.n, x.lanes);
    qr_case(rep, worst, x.m, x.n, x.mode, o, false, rng);
  }
  // Lanes from the rows (sqrt(r) simdgroups), and a shared budget that narrows the panels
  // (two levels).
  ml::blocked::Options a;
  a.nb = 16;
  a.gemm_lanes = 4;
  a.max_group = 256;
  a.qr_panel_fused = 1;
  a.qr_row_larft = 1;
  qr_case(rep, worst, 120, 50, ML_K_QR_REDUCED, a, false, rng);
  ml::blocked::Options narrow = a;
  narrow.max_group = 64;
  narrow.shared_floats = ml_qr_panel_shared_floats(100, 6, 64);
  qr_case(rep, worst, 100, 40, ML_K_QR_COMPLETE, narrow, false, rng);
  ml::blocked::Options off = a;
  off.max_group = 64;
  off.qr_panel_fused = 0;
  qr_case(rep, worst, 70, 23, ML_K_QR_REDUCED, off, false, rng);
  // The outer panels' T by larft_gram instead of qr_larft, and outer panels of 40 (T's rows
  // across both register slots of qr_larft at 64) with 96 lanes (3 rows per simdgroup).
  off = a;
  off.qr_row_larft = 0;
  qr_case(rep, worst, 90, 70, ML_K_QR_REDUCED, off, false, rng);
  ml::blocked::Options outer = a;
  outer.nb = 8;
  outer.nb_outer = 40;
  outer.max_group = 96;
  qr_case(rep, worst, 90, 70, ML_K_QR_COMPLETE, outer, false, rng);
  std::printf(
      "fused: %d checks, %d failures; worst |A-QR| %.3g, |I-Q^TQ| %.3g, R vs unblocked "
      "%.3g (limits %g, %g)\n",
      rep.checks, rep.failures, worst.resid, worst.orth, worst.agree, kQrLimit, kAgreeLimit);
  return rep.failures ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string s = argc > 1 ? argv[1] : "";
  if (s == "tsqr") return suite_tsqr();
  if (s == "split") return suite_split();
  if (s == "fused") return suite_fused();
  std::fprintf(stderr, "usage: test_blocked_qr tsqr|split|fused\n");
  return 2;
}
