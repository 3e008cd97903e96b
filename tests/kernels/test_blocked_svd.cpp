// Tests of the blocked SVD (core/src/blocked_svd.cpp, core/kernels/gebrd_blocked.h) through the
// CPU runner, at reduced sizes with small panels and groups so that panel, row-block and
// column-block boundaries fall inside the matrices (odd sizes, tall, wide).
// Suites:
//   brd  the bidiagonalisation and the back-transformations on their own: Q and P formed from
//        identities, |A - Q B P^T|, orthogonality of Q and P, the singular values of B (double)
//        against those of A, a non-finite matrix in the batch (zeros, flagged, the others
//        unaffected);
//   svd     svd and svdvals end to end (needs the blocked tridiagonal eigensolver linked in);
//   svdref  the same with the tridiagonal eigenproblem solved on the host in double instead:
//           everything around the solver (the Golub-Kahan set-up and read-out, the
//           back-transformations, the stores, wide inputs, non-finite isolation);
//   brdres  the bidiagonalisation with the rows resident in the groups' shared memory (brd_res,
//           core/kernels/gebrd_resident.h), its groups on concurrent threads: the brd checks
//           with every column resident and after panels, N = 1 .. 3, tall and wide, more
//           groups than rows late in the reduction, a non-finite matrix in each batch, the
//           panels' ratios on the same batches alongside; svd and svdvals end to end with it.
// Usage: test_blocked_svd <suite>
#include "kernel_runner.h"
#include "kernel_test_util.h"
#include "step_runner.h"
#include "blocked_svd.h"

using kt::Mat;
using kt::Report;

namespace {

using kt::where;

// Tighter than kt::kSvdLimit: the blocked SVD is held to QR's threshold.
constexpr double kLimit = kt::kQrLimit;

// r x c column-major (ld) floats as a double matrix.
Mat col_major(const float *p, int r, int c, int ld) {
  Mat o(r, c);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) o(i, j) = p[size_t(j) * ld + i];
  return o;
}

// The families of the resident bidiagonalisation's cases (its groups are threads: the batch
// sets the run time): random, zero, rank-deficient, graded, tiny and huge.
bool few_family(const std::string &f) {
  return f == "gaussian" || f == "zero" || f == "rankdef" || f == "graded" ||
         f == "geometric1e-30" || f == "scale1e37";
}

// The batch of a case: the SVD families (kt::svd_families; those of few_family when few)
// row-major back to back, with a Gaussian matrix holding a NaN or -Inf in the middle
// ("nonfinite"); returns the batch size.
int make_batch(int m, int n, std::mt19937_64 &rng, std::vector<std::string> &name,
               std::vector<float> &a, bool few = false) {
  kt::Families fams = kt::svd_families(m, n, rng, true);
  if (few) {
    kt::Families keep;
    for (auto &f : fams)
      if (few_family(f.first)) keep.push_back(f);
    fams = keep;
  }
  const int nf = int(fams.size()), batch = nf + 1, bad = nf / 2;
  for (int b = 0, f = 0; b < batch; ++b) {
    std::vector<float> v;
    if (b == bad) {
      v = kt::to_float(kt::gaussian(rng, m, n));
      v[size_t(rng() % v.size())] = rng() % 2 ? std::numeric_limits<float>::quiet_NaN()
                                              : -std::numeric_limits<float>::infinity();
      name.push_back("nonfinite");
    } else {
      v = kt::to_float(fams[f].second);
      name.push_back(fams[f].first);
      ++f;
    }
    a.insert(a.end(), v.begin(), v.end());
  }
  return batch;
}

struct Worst {
  double resid = 0, orth_q = 0, orth_p = 0, sval = 0;
};

// ---- brd ----

// The resident bidiagonalisation's groups wait on each other both ways: with brd_res on, its
// groups run on concurrent threads.
void thread_res(kt::CpuStepRunner &r, const ml::blocked::Options &o) {
  if (o.brd_res_groups > 0 && o.brd_res_max_batch > 0)
    r.threaded_step = ml::blocked::kStep_brd_res;
}

// res_k0 >= 0: brd_res is on in o and takes the columns from res_k0 (checked: the panel steps
// ran for the columns before it, then brd_res's two launches); few: few_family's batch.
void brd_case(Report &rep, Worst &worst, int m, int n, const ml::blocked::Options &o,
              std::mt19937_64 &rng, int res_k0 = -1, bool few = false) {
  std::vector<std::string> name;
  std::vector<float> a;
  const int batch = make_batch(m, n, rng, name, a, few);
  namespace mb = ml::blocked;
  const mb::BrdLayout L = mb::brd_layout(m, n, true, false, o);
  kt::CpuStepRunner r;
  thread_res(r, o);
  r.ws.assign(size_t(L.per * batch), std::nanf(""));
  r.a = a.data();
  const mb::Chunk ch{r, 0, batch, L.per};
  const int M = L.M, N = L.N;
  ml_status st = mb::brd_load(ch, o, L);
  if (!st) st = mb::brd_bidiagonalize(ch, o, L);
  const int launches_brd = r.launches;
  ml_step_params p = mb::step_params();
  p.m = M;
  p.n = N;
  p.off[0] = L.uf;
  p.ld[0] = M;
  if (!st) st = ch.launch(mb::kStep_eye, batch * N, 32, 0, p);
  p.m = N;
  p.off[0] = L.vf;
  p.ld[0] = N;
  if (!st) st = ch.launch(mb::kStep_eye, batch * N, 32, 0, p);
  if (!st) st = mb::brd_apply_q(ch, o, L, L.uf, N);
  if (!st) st = mb::brd_apply_p(ch, o, L, L.vf, N);
  rep.expect(st == ML_OK, where("brd run", m, n, "", 0));
  if (res_k0 >= 0) {
    const auto count = [&](int step) { return std::count(r.steps.begin(), r.steps.end(), step); };
    rep.expect(mb::brd_res_k0(o, L, batch) == res_k0 && count(mb::kStep_brd_res) == 2 &&
                   count(mb::kStep_brd_col) == res_k0,
               where("brd_res launches", m, n, "k0 " + std::to_string(res_k0), 0));
  }
  if (std::getenv("KT_LAUNCHES"))
    std::printf("launches %dx%d nb %d: bidiagonalisation %d, with Q and P %d\n", m, n, L.nb,
                launches_brd, r.launches);

  for (int b = 0; b < batch; ++b) {
    const std::string at = where(L.wide ? "brd(A^T)" : "brd", m, n, name[b], b);
    const float *slice = r.ws.data() + size_t(b) * L.per;
    const float *vec = slice + L.vec;
    const float *d = vec + ml_brd_vec(N, ML_BRD_D), *e = vec + ml_brd_vec(N, ML_BRD_E);
    if (name[b] == "nonfinite") {
      bool zero = vec[1] == 1.0f;
      for (int i = 0; i < N; ++i) zero = zero && d[i] == 0.0f && (i == N - 1 || e[i] == 0.0f);
      rep.expect(zero, at + " flagged, B = 0");
      continue;
    }
    rep.expect(vec[1] == 0.0f, at + " not flagged");
    // The scaled problem the kernels see: 2^-e A (or its transpose), exact.
    const double scale = std::ldexp(1.0, -int(vec[0]));
    Mat A(M, N);
    const float *ab = a.data() + size_t(b) * m * n;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        (L.wide ? A(j, i) : A(i, j)) = double(ab[size_t(i) * n + j]) * scale;
    Mat B(N, N);
    bool finite = true;
    for (int i = 0; i < N; ++i) {
      B(i, i) = d[i];
      if (i + 1 < N) B(i, i + 1) = e[i];
      finite = finite && std::isfinite(d[i]) && (i + 1 == N || std::isfinite(e[i]));
    }
    Mat Q = col_major(slice + L.uf, M, N, M), P = col_major(slice + L.vf, N, N, N);
    finite = finite && kt::all_finite(slice + L.vf, size_t(N) * N);
    for (double x : Q.v) finite = finite && std::isfinite(x);
    rep.expect(finite, at + " finite");
    if (!finite) continue;
    Mat R = kt::matmul(kt::matmul(Q, B), kt::transpose(P));
    for (size_t i = 0; i < R.v.size(); ++i) R.v[i] -= A.v[i];
    const double an = kt::norm1(A);
    const double res = an > 0 ? kt::norm1(R) / (an * M * kt::kUlp) : kt::norm1(R);
    const double oq = kt::orth_defect(Q) / (M * kt::kUlp);
    const double op = kt::orth_defect(P) / (N * kt::kUlp);
    rep.ratio(res, kLimit, at + " |A - Q B P^T|");
    rep.ratio(oq, kLimit, at + " |I - Q^T Q|");
    rep.ratio(op, kLimit, at + " |I - P^T P|");
    const auto sa = kt::reference_singular_values(A), sb = kt::reference_singular_values(B);
    double err = 0;
    for (int i = 0; i < N; ++i) err = std::max(err, std::fabs(sa[i] - sb[i]));
    const double sv = sa[0] > 0 ? err / (sa[0] * M * kt::kUlp) : err;
    rep.ratio(sv, kLimit, at + " sigma(B) vs sigma(A)");
    worst.resid = std::max(worst.resid, res);
    worst.orth_q = std::max(worst.orth_q, oq);
    worst.orth_p = std::max(worst.orth_p, op);
    worst.sval = std::max(worst.sval, sv);
  }
}

// Panel width, lanes of the products, largest group: small ones put block boundaries inside
// small matrices (options(8, 4, 32)); options(32, 8, 64) is the GPU's panel width.
ml::blocked::Options options(int nb, int gemm_lanes, int max_group) {
  ml::blocked::Options o = kt::blocked_options(nb, gemm_lanes, max_group);
  return o;
}

// Panel boundaries inside the matrix (nb 8), a last panel of one column (17), wide and tall,
// more rows than one row block of 32 lanes (90x21: three).
constexpr int kShapes[][2] = {{1, 1}, {2, 1}, {1, 3}, {5, 3}, {3, 5}, {8, 8}, {17, 17},
                              {40, 24}, {24, 40}, {45, 67}, {90, 21}};

int suite_brd() {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(31);
  const ml::blocked::Options o = options(8, 4, 32);
  for (auto &s : kShapes) {
    kt::Timer t("brd", s[0], s[1], o.max_group);
    brd_case(rep, worst, s[0], s[1], o, rng);
  }
  {
    // The GPU's panel width: a last panel of one column, rows over three row blocks of 32.
    kt::Timer t("brd nb32", 70, 33, 64);
    brd_case(rep, worst, 70, 33, options(32, 8, 64), rng);
  }
  std::printf("brd: %d checks, %d failures; worst |A-QBP^T| %.3g, |I-Q^TQ| %.3g, |I-P^TP| %.3g, "
              "sigma(B) %.3g (limit %g)\n",
              rep.checks, rep.failures, worst.resid, worst.orth_q, worst.orth_p, worst.sval,
              kLimit);
  return rep.failures ? 1 : 0;
}

// ---- svd (end to end) ----

// Eigenvalues (ascending) and eigenvectors (columns of Z) of the symmetric matrix A in double by
// cyclic Jacobi.
void jacobi_eig(Mat A, std::vector<double> &w, Mat &Z) {
  const int n = A.r;
  Mat V = kt::identity(n);
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, all = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) (i == j ? all : off) += A(i, j) * A(i, j);
    if (off <= 1e-32 * (all + off)) break;
    for (int p = 0; p + 1 < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        if (A(p, q) == 0) continue;
        const double th = (A(q, q) - A(p, p)) / (2 * A(p, q));
        const double t = (th >= 0 ? 1 : -1) / (std::fabs(th) + std::sqrt(th * th + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {
          const double kp = A(k, p), kq = A(k, q);
          A(k, p) = c * kp - s * kq;
          A(k, q) = s * kp + c * kq;
        }
        for (int k = 0; k < n; ++k) {
          const double pk = A(p, k), qk = A(q, k);
          A(p, k) = c * pk - s * qk;
          A(q, k) = s * pk + c * qk;
        }
        for (int k = 0; k < n; ++k) {
          const double kp = V(k, p), kq = V(k, q);
          V(k, p) = c * kp - s * kq;
          V(k, q) = s * kp + c * kq;
        }
      }
  }
  std::vector<int> idx(n);
  for (int i = 0; i < n; ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](int x, int y) { return A(x, x) < A(y, y); });
  w.resize(n);
  Z = Mat(n, n);
  for (int j = 0; j < n; ++j) {
    w[j] = A(idx[j], idx[j]);
    for (int i = 0; i < n; ++i) Z(i, j) = V(i, idx[j]);
  }
}

// Runs c like the blocked SVD does, with the tridiagonal eigenproblem solved on the host in
// double (Jacobi) in place of the blocked eigensolver: everything else of the SVD is the
// library's sequence (brd_svd_front, brd_svd_back).
ml_status run_reference_solver(kt::CpuStepRunner &r, const ml::Call &c,
                               const ml::blocked::Options &o) {
  namespace mb = ml::blocked;
  const mb::BrdLayout L = mb::brd_layout(c.m, c.n, c.op == ML_OP_SVD, true, o);
  r.ws.assign(size_t(L.per * c.batch), std::nanf(""));
  thread_res(r, o);
  r.a = c.a;
  r.o0 = c.out0;
  r.o1 = c.out1;
  r.o2 = c.out2;
  r.info = c.info;
  const mb::Chunk ch{r, 0, c.batch, L.per};
  if (ml_status st = mb::brd_svd_front(ch, o, L)) return st;
  const int N = L.N, n2 = 2 * N;
  for (int64_t b = 0; b < c.batch; ++b) {
    float *sl = r.ws.data() + size_t(b) * L.per;
    Mat T(n2, n2);
    for (int i = 0; i < n2; ++i) {
      T(i, i) = sl[L.td + i];
      if (i + 1 < n2) T(i, i + 1) = T(i + 1, i) = sl[L.te + i];
    }
    std::vector<double> w;
    Mat Z;
    jacobi_eig(T, w, Z);
    for (int t = 0; t < N; ++t) {
      sl[L.tw + t] = float(w[size_t(N + t)]);
      if (L.tz >= 0)
        for (int i = 0; i < n2; ++i) sl[L.tz + size_t(t) * n2 + i] = float(Z(i, N + t));
    }
  }
  return mb::brd_svd_back(c, ch, o, L);
}


void svd_case(Report &rep, Worst &worst, int m, int n, const ml::blocked::Options &o,
              std::mt19937_64 &rng, bool reference, bool few = false) {
  std::vector<std::string> name;
  std::vector<float> a;
  const int batch = make_batch(m, n, rng, name, a, few), k = std::min(m, n);
  std::vector<float> u(size_t(batch) * m * k, -7.f), s(size_t(batch) * k, -7.f),
      vt(size_t(batch) * k * n, -7.f), s2(size_t(batch) * k, -7.f);
  std::vector<int> info(batch, -1), info2(batch, -1);
  ml::Call c{ML_OP_SVD, batch, m, n, 0, a.data(), u.data(), s.data(), vt.data(), info.data()};
  ml::Call c2{ML_OP_SVDVALS, batch, m, n, 0, a.data(), nullptr, s2.data(), nullptr,
              info2.data()};
  kt::CpuStepRunner run, run2;
  thread_res(run, o);
  thread_res(run2, o);
  if (reference) {
    rep.expect(run_reference_solver(run, c, o) == ML_OK, where("svd run", m, n, "", 0));
    rep.expect(run_reference_solver(run2, c2, o) == ML_OK, where("svdvals run", m, n, "", 0));
  } else {
    rep.expect(run.run(c, 0, o) == ML_OK, where("svd run", m, n, "", 0));
    rep.expect(run2.run(c2, 0, o) == ML_OK, where("svdvals run", m, n, "", 0));
  }
  if (std::getenv("KT_LAUNCHES"))
    std::printf("launches %dx%d nb %d: svd %d, svdvals %d\n", m, n, o.nb, run.launches,
                run2.launches);
  for (int b = 0; b < batch; ++b) {
    const std::string at = where("svd", m, n, name[b], b);
    const float *ub = u.data() + size_t(b) * m * k, *sb = s.data() + size_t(b) * k;
    const float *vb = vt.data() + size_t(b) * k * n, *s2b = s2.data() + size_t(b) * k;
    if (name[b] == "nonfinite") {
      kt::expect_svd_nonfinite(rep, at, m, n, ub, sb, vb, s2b, info[b], info2[b]);
      continue;
    }
    kt::expect_svd_outputs(rep, at, m, n, ub, sb, vb, s2b, info[b], info2[b]);
    const Mat A = kt::from_float(a.data() + size_t(b) * m * n, m, n);
    const kt::SvdRatios x = kt::check_svd_ratios(rep, at, name[b], A, ub, sb, vb, info[b], kLimit);
    worst.resid = std::max(worst.resid, x.resid);
    worst.orth_q = std::max(worst.orth_q, x.orth_u);
    worst.orth_p = std::max(worst.orth_p, x.orth_v);
    worst.sval = std::max(worst.sval, x.sval);
  }
}

// Fewer shapes end to end (the bidiagonalisation's own suite covers more).
constexpr int kSvdShapes[][2] = {{1, 1}, {2, 1}, {1, 3}, {5, 3}, {3, 5}, {8, 8},
                                 {17, 17}, {40, 24}, {24, 40}, {21, 70}};

int suite_svd(bool reference) {
  Report rep;
  Worst worst;
  std::mt19937_64 rng(37);
  const ml::blocked::Options o = options(8, 4, 32);
  for (auto &s : kSvdShapes) {
    kt::Timer t("svd", s[0], s[1], o.max_group);
    svd_case(rep, worst, s[0], s[1], o, rng, reference);
  }
  {
    // The GPU's panel width: a last panel of one column, rows past one row block of 32 lanes.
    kt::Timer t("svd nb32", 40, 33, 64);
    svd_case(rep, worst, 40, 33, options(32, 8, 64), rng, reference);
  }
  ml::blocked::Options chunked = o;  // one matrix per chunk
  chunked.max_workspace_bytes = 1;
  if (!reference) svd_case(rep, worst, 20, 13, chunked, rng, reference);
  // brd_tgk_fix's projections a warp per column (groups of 2 and 3 warps): a tall shape in
  // groups of 2, a wide one in groups of 3 (every other step in groups of up to 96 lanes, the
  // slowest in the thread-per-lane runner).
  for (const int lanes : {64, 96}) {
    ml::blocked::Options fix = options(8, 4, 96);
    fix.svd_fix_lanes = lanes;
    const int m = lanes == 64 ? 40 : 17, n = lanes == 64 ? 24 : 33;
    kt::Timer t("svd fix", m, n, lanes);
    svd_case(rep, worst, m, n, fix, rng, reference);
  }
  std::printf("%s: %d checks, %d failures; worst |A-USVt| %.3g, |I-UtU| %.3g, |I-VVt| %.3g, "
              "s %.3g (limit %g)\n",
              reference ? "svdref" : "svd", rep.checks, rep.failures, worst.resid, worst.orth_q,
              worst.orth_p, worst.sval, kLimit);
  return rep.failures ? 1 : 0;
}

// ---- brdres ----

// o with brd_res on: g groups per matrix of `lanes` lanes for batches of up to 8 matrices.
ml::blocked::Options res_options(ml::blocked::Options o, int g, int lanes, int batch) {
  o.brd_res_groups = g * batch;
  o.brd_res_max_batch = 8;
  o.brd_res_lanes = lanes;
  return o;
}

// Batch of few_family's matrices and the non-finite one.
constexpr int kFewBatch = 7;

// The same batch through the panels (worst_p) and through brd_res (worst_r).
void brd_pair(Report &rep, Worst &worst_p, Worst &worst_r, int m, int n,
              const ml::blocked::Options &panels, const ml::blocked::Options &res, int res_k0,
              std::mt19937_64 &rng) {
  kt::Timer t("brdres", m, n, res.brd_res_lanes);
  std::mt19937_64 same = rng;
  Worst wp, wr;
  brd_case(rep, wp, m, n, panels, same, -1, true);
  brd_case(rep, wr, m, n, res, rng, res_k0, true);
  if (std::getenv("KT_TIMING"))
    std::printf("  %dx%d panels %.3g %.3g %.3g %.3g, brd_res %.3g %.3g %.3g %.3g\n", m, n,
                wp.resid, wp.orth_q, wp.orth_p, wp.sval, wr.resid, wr.orth_q, wr.orth_p,
                wr.sval);
  for (auto [w, x] : {std::pair{&worst_p, &wp}, {&worst_r, &wr}}) {
    w->resid = std::max(w->resid, x->resid);
    w->orth_q = std::max(w->orth_q, x->orth_q);
    w->orth_p = std::max(w->orth_p, x->orth_p);
    w->sval = std::max(w->sval, x->sval);
  }
}

int suite_brdres() {
  Report rep;
  Worst worst, panels, ends;
  std::mt19937_64 rng(41);
  const ml::blocked::Options o = options(8, 4, 32);
  // Every column resident, three groups per matrix of one simdgroup: N = 1, 2, 3 (the last two
  // columns: a row reflector of one entry, then none), square, tall, wide (the transpose), more
  // groups than rows late in every matrix (5 x 3: four groups of rows 0..4).
  const ml::blocked::Options res3 = res_options(o, 3, 32, kFewBatch);
  for (const auto &s : {std::pair{2, 1}, {2, 2}, {3, 3}, {7, 3}, {17, 17}, {40, 24}, {24, 40}})
    brd_pair(rep, panels, worst, s.first, s.second, o, res3, 0, rng);
  brd_pair(rep, panels, worst, 5, 3, o, res_options(o, 4, 32, kFewBatch), 0, rng);
  // A shared budget that leaves the first panels to the panel steps (k0 = 16 at 67 x 40: 17
  // rows of 24 columns a group fit 800 floats, 20 of 32 do not), groups of two simdgroups
  // (the rows' dot products over both).
  ml::blocked::Options mixed = res3;
  mixed.shared_floats = 800;
  brd_pair(rep, panels, worst, 67, 40, o, mixed, 16, rng);
  ml::blocked::Options mixed64 = res_options(options(8, 4, 64), 2, 64, kFewBatch);
  mixed64.shared_floats = 800;
  brd_pair(rep, panels, worst, 45, 30, options(8, 4, 64), mixed64, 8, rng);
  // The GPU's panel width with groups of 64 lanes.
  brd_pair(rep, panels, worst, 70, 33, options(32, 8, 64),
           res_options(options(32, 8, 64), 2, 64, kFewBatch), 0, rng);
  // The same with the hand-offs as tagged words (two buffers of each by parity).
  {
    const auto tagged = [](ml::blocked::Options t) {
      t.brd_res_tagged = 1;
      return t;
    };
    for (const auto &s : {std::pair{2, 1}, {3, 3}, {17, 17}, {40, 24}, {24, 40}})
      brd_pair(rep, panels, worst, s.first, s.second, o, tagged(res3), 0, rng);
    brd_pair(rep, panels, worst, 67, 40, o, tagged(mixed), 16, rng);
    brd_pair(rep, panels, worst, 45, 30, options(8, 4, 64), tagged(mixed64), 8, rng);
    brd_pair(rep, panels, worst, 70, 33, options(32, 8, 64),
             tagged(res_options(options(32, 8, 64), 2, 64, kFewBatch)), 0, rng);
  }
  // Off past brd_res_max_batch: the panels throughout.
  {
    ml::blocked::Options big = res3;
    big.brd_res_max_batch = kFewBatch - 1;
    const ml::blocked::BrdLayout L = ml::blocked::brd_layout(17, 17, true, false, big);
    rep.expect(ml::blocked::brd_res_k0(big, L, kFewBatch) == 17, "brd_res off past max_batch");
  }
  // End to end (svd and svdvals, the blocked tridiagonal eigensolver): square, wide, tall with
  // the panels first, and one matrix per chunk (every group on one matrix).
  if (!ml::blocked::supported(ML_OP_SVD)) {
    std::printf("FAIL brdres: no blocked SVD in this build\n");
    return 1;
  }
  for (const auto &s : {std::pair{17, 17}, {21, 45}}) {
    kt::Timer t("brdres svd", s.first, s.second, 32);
    svd_case(rep, ends, s.first, s.second, res3, rng, false, true);
  }
  {
    kt::Timer t("brdres svd mixed", 67, 40, 32);
    svd_case(rep, ends, 67, 40, mixed, rng, false, true);
  }
  ml::blocked::Options chunked = res_options(o, 5, 32, 1);
  chunked.max_workspace_bytes = 1;
  {
    kt::Timer t("brdres svd chunked", 20, 13, 32);
    svd_case(rep, ends, 20, 13, chunked, rng, false, true);
    chunked.brd_res_tagged = 1;
    svd_case(rep, ends, 20, 13, chunked, rng, false, true);
    ml::blocked::Options res3t = res3;
    res3t.brd_res_tagged = 1;
    svd_case(rep, ends, 21, 45, res3t, rng, false, true);
  }
  std::printf("brdres: %d checks, %d failures; brd_res worst |A-QBP^T| %.3g, |I-Q^TQ| %.3g, "
              "|I-P^TP| %.3g, sigma(B) %.3g; the panels on the same batches %.3g, %.3g, %.3g, "
              "%.3g; svd end to end |A-USVt| %.3g, |I-UtU| %.3g, |I-VVt| %.3g, s %.3g "
              "(limit %g)\n",
              rep.checks, rep.failures, worst.resid, worst.orth_q, worst.orth_p, worst.sval,
              panels.resid, panels.orth_q, panels.orth_p, panels.sval, ends.resid, ends.orth_q,
              ends.orth_p, ends.sval, kLimit);
  return rep.failures ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  const auto svd = [] { return suite_svd(false); };
  const auto svdref = [] { return suite_svd(true); };
  return kt::run_suite(argc, argv, "test_blocked_svd brd|svd|svdref|brdres",
                       {{"brd", suite_brd}, {"svd", svd}, {"svdref", svdref},
                        {"brdres", suite_brdres}});
}
