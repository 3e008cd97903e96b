// Tests of the blocked QR with its panels spread over many groups (core/kernels/qr_tsqr.h,
// sequenced by core/src/blocked_qr.cpp) through the CPU runner, at reduced sizes: row blocks of
// a few dozen rows so that panels split into 2..9 blocks, the last block short, panels that
// fall back to one group once their rows drop below two blocks, and a shared budget that
// caps the number of blocks. LAPACK-style ratios (docs/design.md section 7) on the hard
// families plus zero and graded columns, NaN/Inf isolation in a batch, info bits, R against
// the unblocked group kernel up to the signs of its rows.
// Usage: test_blocked_qr tsqr|split|fused|reg
#include "kernel_runner.h"  // first: the dialect of the kernel headers below

#include "../../core/kernels/qr_householder.h"
#include "kernel_test_util.h"
#include "step_runner.h"

using kt::Mat;
using kt::Report;

namespace {

using kt::where;

using kt::kQrLimit;
constexpr double kAgreeLimit = 60;  // R vs the unblocked kernel, as test_blocked scales it

// Counts the spread-panel launches of a run on the CPU step runner.
class CountingRunner final : public ml::blocked::Runner {
 public:
  kt::CpuStepRunner inner;
  int leaves = 0, fused = 0, unfused = 0, reg = 0;
  ml_status launch(const ml::blocked::StepLaunch &l) override {
    if (l.step == ml::blocked::kStep_tsqr_leaf) ++leaves;
    if (l.step == ml::blocked::kStep_qr_panel_reg || l.step == ml::blocked::kStep_qr_panel_rot8 ||
        l.step == ml::blocked::kStep_qr_panel_rot16)
      ++reg;
    if (l.step == ml::blocked::kStep_qr_panel) ++((l.p.flags & ML_QR_FUSED) ? fused : unfused);
    return inner.launch(l);
  }
  ml_status side_begin() override { return inner.side_begin(); }
  ml_status side_end() override { return inner.side_end(); }
  ml_status join() override { return inner.join(); }
  ml_status run(const ml::Call &c, int32_t kf, const ml::blocked::Options &o) {
    return inner.run(c, kf, o, this);
  }
};

KT_QR_ENTRY(qr_group_entry, ml_qr_householder)

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
// spread: whether the run must have spread panels; reg: whether its one-group panels must be
// in registers (qr_panel_reg: all of them, or none); side (>= 0): whether it must use the
// runner's side queue (lookahead).
void qr_case(Report &rep, kt::QrWorst &worst, int m, int n, int mode,
             const ml::blocked::Options &o, bool spread, std::mt19937_64 &rng,
             bool reg = false, int side = -1) {
  const kt::QrShape s(m, n, mode);
  const kt::NamedBatch in = kt::nan_inf_batch(families(m, n, rng), m, n,
                                              std::numeric_limits<float>::infinity(), rng);
  kt::QrOut out(s, in.size()), ref(s, in.size());
  CountingRunner run;
  rep.expect(kt::run_blocked_qr(run, s, in, out, o) == ML_OK, where(s.op, m, n, "run", mode));
  rep.expect((run.leaves > 0) == spread, where(s.op, m, n, spread ? "spread" : "not spread", 0));
  // The one-group panels take the fused factorisation exactly when o asks for it.
  const bool want_fused = o.qr_panel_fused != 0 && o.max_group >= 32;
  rep.expect(want_fused || reg ? run.unfused == 0 : run.fused == 0,
             where(s.op, m, n, want_fused ? "fused panels" : "unfused panels", 0));
  rep.expect(reg ? run.reg > 0 && run.fused == 0 : run.reg == 0,
             where(s.op, m, n, reg ? "register panels" : "no register panels", 0));
  // Lookahead: side-queue launches exactly where asked for (side >= 0).
  if (side >= 0)
    rep.expect((run.inner.side_count > 0) == (side > 0),
               where(s.op, m, n, side ? "side queue" : "no side queue", 0));
  kt::run_qr_kernel(qr_group_entry, 32, in.size(), ml_qr_householder_scratch_floats(m, n), s, in,
                    ref, true);

  const auto at_b = [&](const std::string &fam, int b) { return where(s.op, m, n, fam, b); };
  kt::each_qr_matrix(rep, s, in, out, at_b, [&](int b, const std::string &at, const Mat &A,
                                                const Mat &R) {
    const std::string &fam = in.name[b];
    const int info = out.info[b];
    if (fam == "zero" || fam == "zerocols")
      rep.expect(info == ML_INFO_RANK_DEFICIENT, at + " info RANK_DEFICIENT");
    if (fam == "gaussian" || fam == "identity") rep.expect(info == 0, at + " info 0");
    if (fam == "gaussian" || fam == "scale1e-30" || fam == "scale1e37") {
      // R is unique up to the signs of its rows for a matrix of full rank.
      const Mat R0 = kt::from_float(ref.r.data() + size_t(b) * s.r_floats(), s.rrows, n);
      const double d = kt::r_distance(R0, R, kt::norm1(A), s.mx, true);
      rep.ratio(d, kAgreeLimit, at + " R vs unblocked");
      worst.agree = std::max(worst.agree, d);
    }
    const float *qb = out.q.data() + size_t(b) * s.q_floats();
    if (s.want_q) worst.add(kt::check_q_factor(rep, at, s, A, qb, R, s.mx));
  });
}

// Prints the suite's summary; its exit status.
int finish(const char *suite, const Report &rep, const kt::QrWorst &worst) {
  std::printf(
      "%s: %d checks, %d failures; worst |A-QR| %.3g, |I-Q^TQ| %.3g, R vs unblocked "
      "%.3g (limits %g, %g)\n",
      suite, rep.checks, rep.failures, worst.resid, worst.orth, worst.agree, kQrLimit,
      kAgreeLimit);
  return rep.failures ? 1 : 0;
}

int suite_tsqr() {
  Report rep;
  kt::QrWorst worst;
  std::mt19937_64 rng(29);
  ml::blocked::Options o = kt::blocked_options(8, 4, 32);
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
  ml::blocked::Options big = kt::blocked_options(32, 8, 64);
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
  return finish("tsqr", rep, worst);
}

// Panel columns split over several warps (Options::qr_panel_split): groups of 2, 3 and 4 warps
// so that the last columns of a panel take 1..4 warps each, one-group and spread panels.
int suite_split() {
  Report rep;
  kt::QrWorst worst;
  std::mt19937_64 rng(31);
  ml::blocked::Options o = kt::blocked_options(8, 4, 128);
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
  return finish("split", rep, worst);
}

// The fused panel factorisation (core/kernels/qr_blocked.h ml_qr_factor_fused) with 1..4
// simdgroups (rows dealt round-robin, so owned rows start anywhere), panels of 8, 16 and 40
// columns (a lane owning two columns), one-group and narrowed panels, against the same
// families with the fused factorisation off; graded and zero columns take its second
// reduction.
int suite_fused() {
  Report rep;
  kt::QrWorst worst;
  std::mt19937_64 rng(37);
  struct Case {
    int m, n, mode, nb, lanes;
  };
  const Case cases[] = {{70, 23, ML_K_QR_REDUCED, 8, 32},   {40, 57, ML_K_QR_COMPLETE, 16, 64},
                        {97, 45, ML_K_QR_REDUCED, 40, 96},  {130, 70, ML_K_QR_REDUCED, 16, 128},
                        {64, 64, ML_K_QR_R, 40, 64},        {33, 90, ML_K_QR_REDUCED, 8, 128}};
  for (const Case &x : cases) {
    ml::blocked::Options o = kt::blocked_options(x.nb, 4, 128);
    o.qr_panel_fused = 1;  // off by default (slower on the H200); this suite tests it
    o.qr_row_larft = 1;
    o.qr_fused_lanes = x.lanes;
    kt::Timer t("qr fused", x.m, x.n, x.lanes);
    qr_case(rep, worst, x.m, x.n, x.mode, o, false, rng);
  }
  // Lanes from the rows (sqrt(r) simdgroups), and a shared budget that narrows the panels
  // (two levels).
  ml::blocked::Options a = kt::blocked_options(16, 4, 256);
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
  return finish("fused", rep, worst);
}

// The panels in registers (Options::qr_panel_reg, core/kernels/qr_panel_reg.h): every register
// class (32, 16 and 8 columns) up to its most rows per lane (2, 4, 8; groups of 32 lanes stand in
// for the GPU's 512), panel widths below the class, one and two levels, every mode, wide and
// tall shapes; before spread panels; a matrix too tall for the registers, or below the rows
// the option names, keeps the shared-memory panels.
void reg_cases(Report &rep, kt::QrWorst &worst, int form) {
  std::mt19937_64 rng(41 + form);
  struct Case {
    int m, n, mode, nb, lanes;
  };
  const Case cases[] = {
      {64, 40, ML_K_QR_REDUCED, 32, 32},    // class 32, 2 rows a lane, a panel of 8 last
      {30, 30, ML_K_QR_COMPLETE, 32, 64},   // class 32, one row a lane, idle lanes
      {100, 37, ML_K_QR_REDUCED, 32, 32},   // class 16, 4 rows a lane: two levels
      {200, 30, ML_K_QR_R, 32, 32},         // class 8, 8 rows a lane: two levels
      {45, 70, ML_K_QR_COMPLETE, 12, 32},   // wide, width 12 in class 16
      {120, 40, ML_K_QR_COMPLETE, 20, 96},  // width 20 in class 32, 2 rows a lane, 3 simdgroups
      {400, 40, ML_K_QR_R, 32, 512},        // class 32, 2 rows a lane, 7 simdgroups
      {500, 36, ML_K_QR_REDUCED, 16, 512},  // class 16, 4 rows a lane, 4 simdgroups
      {600, 20, ML_K_QR_R, 8, 512},         // class 8, 8 rows a lane, 3 simdgroups
  };
  for (const Case &x : cases) {
    // Form 3 at class 32: qr_panel_reg's rotating form, as form 1.
    if (form == 3 && ml_qrr_class(ml_qrr_width(x.m, x.nb, x.lanes)) == 32) continue;
    ml::blocked::Options o = kt::blocked_options(x.nb, 4, x.lanes);
    o.qr_panel_reg_form = form;
    o.qr_panel_reg = 1;
    kt::Timer t("qr reg", x.m, x.n, x.lanes);
    qr_case(rep, worst, x.m, x.n, x.mode, o, false, rng, true);
  }
  // Form 3 runs form 1's code (classes 8 and 16 in their own kernels): the classes above
  // suffice.
  if (form == 3) return;
  // One level where the width needs no narrowing; the fused and the spread panels asked for too
  // (the register panels take precedence); too many rows for the registers, and fewer rows than
  // the option names (shared-memory panels).
  ml::blocked::Options one = kt::blocked_options(16, 4, 64);
  one.qr_panel_reg_form = form;
  one.qr_panel_reg = 1;
  one.nb_outer = 0;
  qr_case(rep, worst, 120, 50, ML_K_QR_REDUCED, one, false, rng, true);
  ml::blocked::Options both = one;
  both.qr_panel_fused = 1;
  both.qr_tsqr_rows = 16;
  qr_case(rep, worst, 110, 17, ML_K_QR_REDUCED, both, false, rng, true);
  ml::blocked::Options tall = kt::blocked_options(8, 4, 32);
  tall.qr_panel_reg_form = form;
  tall.qr_panel_reg = 1;
  qr_case(rep, worst, 300, 12, ML_K_QR_REDUCED, tall, false, rng, false);
  ml::blocked::Options below = one;
  below.qr_panel_reg = 100;
  qr_case(rep, worst, 60, 30, ML_K_QR_COMPLETE, below, false, rng, false);
  // Every block reflector by the larfb_cols step (the inner and outer updates and Q), with
  // register and shared-memory panels.
  ml::blocked::Options cols = kt::blocked_options(32, 4, 32);
  cols.qr_panel_reg_form = form;
  cols.qr_panel_reg = 1;
  cols.larfb_cols = 1 << 20;
  qr_case(rep, worst, 100, 37, ML_K_QR_COMPLETE, cols, false, rng, true);
  ml::blocked::Options cols_shared = kt::blocked_options(8, 4, 32);
  cols_shared.qr_panel_reg_form = form;
  cols_shared.larfb_cols = 1 << 20;
  qr_case(rep, worst, 90, 50, ML_K_QR_REDUCED, cols_shared, false, rng, false);
  // Below qr_panel_reg rows: register panels of at most qr_panel_reg_small columns, one level
  // below qr_outer_min_batch (here every batch: one level) and two levels from it.
  ml::blocked::Options small = kt::blocked_options(32, 4, 32);
  small.qr_panel_reg_form = form;
  small.qr_panel_reg = 1000;
  small.qr_panel_reg_small = 16;
  small.qr_outer_min_batch = 1 << 20;
  qr_case(rep, worst, 100, 37, ML_K_QR_COMPLETE, small, false, rng, true);
  small.qr_outer_min_batch = 1;
  qr_case(rep, worst, 41, 90, ML_K_QR_REDUCED, small, false, rng, true);
}

int suite_reg() {
  Report rep;
  kt::QrWorst worst;
  // Forms 0-2 in qr_panel_reg, 3 the rotating form in the class kernels (qr_panel_rot8 and
  // rot16; class 32 in qr_panel_reg).
  for (int form = 0; form < 4; ++form) reg_cases(rep, worst, form);
  // More lanes than the rows need (Options::qr_panel_reg_rows: at most 2 rows a lane, or 1;
  // 300 rows of class 16 fit 96 lanes): fewer rows a lane, idle lanes in the last panels.
  std::mt19937_64 rng(47);
  for (int form : {1, 3}) {
    ml::blocked::Options o = kt::blocked_options(16, 4, 512);
    o.qr_panel_reg_form = form;
    o.qr_panel_reg = 1;
    o.qr_panel_reg_rows = form == 1 ? 2 : 1;
    kt::Timer t("qr reg rows", 300, 40, 512);
    qr_case(rep, worst, 300, 40, ML_K_QR_REDUCED, o, false, rng, true);
  }
  return finish("reg", rep, worst);
}

// Lookahead (Options::qr_lookahead): the next panel's columns updated first, the rest on the
// runner's side queue, which the CPU runner holds back until the join (after the next panel
// or outer panel): one level (register and shared-memory panels, square, tall, wide), two
// levels (register panels too tall for one level; shared-memory panels at a batch that asks
// for two), every block reflector by the larfb_cols step; no side queue for one panel, below
// qr_lookahead_min_k columns, or for two levels at qr_lookahead 1.
int suite_ahead() {
  Report rep;
  kt::QrWorst worst;
  std::mt19937_64 rng(53);
  ml::blocked::Options one = kt::blocked_options(8, 4, 32);
  one.qr_lookahead = 1;
  one.qr_panel_reg = 1;
  one.qr_panel_reg_form = 3;
  one.nb_outer = 0;
  qr_case(rep, worst, 70, 70, ML_K_QR_COMPLETE, one, false, rng, true, 1);
  qr_case(rep, worst, 90, 30, ML_K_QR_REDUCED, one, false, rng, true, 1);
  qr_case(rep, worst, 30, 75, ML_K_QR_REDUCED, one, false, rng, true, 1);
  qr_case(rep, worst, 40, 8, ML_K_QR_COMPLETE, one, false, rng, true, 0);
  ml::blocked::Options shared = one;
  shared.qr_panel_reg = 0;
  qr_case(rep, worst, 64, 50, ML_K_QR_R, shared, false, rng, false, 1);
  // Fewer columns than qr_lookahead_min_k: none.
  ml::blocked::Options few = one;
  few.qr_lookahead_min_k = 71;
  qr_case(rep, worst, 70, 70, ML_K_QR_REDUCED, few, false, rng, true, 0);
  ml::blocked::Options two = kt::blocked_options(32, 4, 32);
  two.qr_lookahead = 2;
  two.qr_panel_reg = 1;
  two.nb_outer = 16;
  qr_case(rep, worst, 200, 60, ML_K_QR_COMPLETE, two, false, rng, true, 1);
  two.larfb_cols = 1 << 20;
  qr_case(rep, worst, 150, 45, ML_K_QR_REDUCED, two, false, rng, true, 1);
  two.qr_lookahead = 1;  // one-level runs only
  qr_case(rep, worst, 150, 45, ML_K_QR_REDUCED, two, false, rng, true, 0);
  ml::blocked::Options two_shared = kt::blocked_options(8, 4, 32);
  two_shared.qr_lookahead = 2;
  two_shared.nb_outer = 16;
  two_shared.qr_outer_min_batch = 1;
  qr_case(rep, worst, 60, 60, ML_K_QR_COMPLETE, two_shared, false, rng, false, 1);
  return finish("ahead", rep, worst);
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_suite(argc, argv, "test_blocked_qr tsqr|split|fused|reg|ahead",
                       {{"tsqr", suite_tsqr},
                        {"split", suite_split},
                        {"fused", suite_fused},
                        {"reg", suite_reg},
                        {"ahead", suite_ahead}});
}
