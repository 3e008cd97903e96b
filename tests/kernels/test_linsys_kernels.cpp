// The linear-system kernels (core/kernels/linsys_*.h) through the CPU runner on hard matrix
// families, judged by LAPACK's ratios (docs/design.md section 7) in double; info and
// lu_factor's pivots compared with LAPACK's own (the library's CPU path, host memory). Each
// batch mixes every family with failing matrices (indefinite, singular, NaN/Inf in what the op
// reads) so that a failing matrix's NaN output and info stay its own; NaN in the part an op
// does not read must change nothing. Group sizes: the CUDA and Metal launch configuration's,
// one lane per matrix, an odd 37 (SIMD lines: 16 and 32 lanes); the right-hand sides also in
// chunks narrower than nrhs. Past n = 17 the solves run the CUDA launch and the narrow chunk
// only (the CPU runner's thread per lane makes the larger groups slow on CI's two cores).
// Suites: cholesky, lu, solve, inv, triangular.
#include <cstdio>
#include <random>
#include <set>

#include "../../cuda/launch_config.h"
#include "../../metal/launch_config.h"
#include "linsys_check.h"

namespace {

using kt::Mat;
constexpr int kH200 = ML_CUDA_SCRATCH_FLOATS_SM90;
constexpr float kNaN = __builtin_nanf("");

struct Batch {
  std::vector<std::string> fams;
  std::vector<float> a, b;  // a: batch m x n, b: batch x_floats (two-input ops)
};

void push(Batch &bt, const std::string &fam, const std::vector<float> &a) {
  bt.fams.push_back(fam);
  bt.a.insert(bt.a.end(), a.begin(), a.end());
}

std::vector<double> abs_spectrum(const char *kind, int n, std::mt19937_64 &rng) {
  auto s = kt::spectrum(kind, n, rng);
  for (double &x : s) x = std::fabs(x);
  std::sort(s.rbegin(), s.rend());
  return s;
}

Mat scaled(Mat a, double f) {
  for (double &x : a.v) x *= f;
  return a;
}

// General n x n matrices (LU, solve, inv): well and ill conditioned (to 1/ulp), nearly
// singular, graded, tiny and huge, exactly singular (a zero row, a zero column), NaN and Inf.
Batch general_batch(int n, std::mt19937_64 &rng) {
  Batch bt;
  push(bt, "gaussian", kt::to_float(kt::gaussian(rng, n, n)));
  push(bt, "cond1/ulp", kt::to_float(kt::with_singular_values(rng, n, n,
                                                              abs_spectrum("geometric", n, rng))));
  std::vector<double> ns(n, 1.0);
  ns[n - 1] = 1e-6;
  push(bt, "nearsingular", kt::to_float(kt::with_singular_values(rng, n, n, ns)));
  Mat gr = kt::gaussian(rng, n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      gr(i, j) *= std::pow(1e-6, n > 1 ? double(i) / (n - 1) : 0) *
                  std::pow(1e-3, n > 1 ? double(j) / (n - 1) : 0);
  push(bt, "graded", kt::to_float(gr));
  push(bt, "scale1e-30", kt::to_float(scaled(kt::gaussian(rng, n, n), 1e-30)));
  push(bt, "scale1e30", kt::to_float(scaled(kt::gaussian(rng, n, n), 1e30)));
  // Exactly singular whatever the order of the arithmetic: a zero row stays zero (its
  // multipliers are exact zeros) and meets the last pivot; a zero column is a zero pivot.
  // (A repeated row is singular too, but whether rounding leaves an exact zero pivot depends
  // on the order of the operations: LAPACK's blocked sgetrf and these kernels differ there.)
  Mat zr = kt::gaussian(rng, n, n);
  for (int j = 0; j < n; ++j) zr(n / 3, j) = 0;
  push(bt, "zerorow", kt::to_float(zr));
  Mat zc = kt::gaussian(rng, n, n);
  for (int i = 0; i < n; ++i) zc(i, n / 2) = 0;
  push(bt, "zerocolumn", kt::to_float(zc));
  push(bt, "zero", kt::to_float(Mat(n, n)));
  auto nan = kt::to_float(kt::gaussian(rng, n, n));
  nan[size_t(n) * n / 2] = kNaN;
  push(bt, "nan", nan);
  auto inf = kt::to_float(kt::gaussian(rng, n, n));
  inf[size_t(n) * n - 1] = -INFINITY;
  push(bt, "inf", inf);
  push(bt, "identity", kt::to_float(kt::identity(n)));
  return bt;
}

// Right-hand sides for a batch (n x nrhs or nrhs x n), one gaussian block per matrix, one of
// them with a NaN (on a well-conditioned A) and one with an Inf on a singular A.
void add_rhs(Batch &bt, int n, int nrhs, std::mt19937_64 &rng, double huge_b = 1e25) {
  bt.b.clear();
  for (size_t i = 0; i < bt.fams.size(); ++i) {
    auto b = kt::to_float(kt::gaussian(rng, n, nrhs));
    if (bt.fams[i] == "scale1e30") b = kt::to_float(scaled(kt::gaussian(rng, n, nrhs), huge_b));
    bt.b.insert(bt.b.end(), b.begin(), b.end());
  }
  const size_t per = size_t(n) * nrhs;
  Batch extra;
  push(extra, "nan-in-b", kt::to_float(kt::gaussian(rng, n, n)));
  auto b = kt::to_float(kt::gaussian(rng, n, nrhs));
  b[per - 1] = kNaN;
  push(extra, "singular+inf-in-b", kt::to_float(Mat(n, n)));
  auto b2 = kt::to_float(kt::gaussian(rng, n, nrhs));
  b2[0] = INFINITY;
  for (size_t i = 0; i < extra.fams.size(); ++i) bt.fams.push_back(extra.fams[i]);
  bt.a.insert(bt.a.end(), extra.a.begin(), extra.a.end());
  bt.b.insert(bt.b.end(), b.begin(), b.end());
  bt.b.insert(bt.b.end(), b2.begin(), b2.end());
}

// Symmetric positive definite and failing matrices for cholesky.
Batch spd_batch(int n, int flags, std::mt19937_64 &rng) {
  Batch bt;
  Mat g = kt::gaussian(rng, n, n);
  Mat spd = kt::matmul(g, kt::transpose(g));
  for (int i = 0; i < n; ++i) spd(i, i) += n;
  push(bt, "gaussian", kt::to_float(spd));
  push(bt, "cond1/ulp", kt::to_float(kt::with_spectrum(rng, abs_spectrum("geometric", n, rng))));
  push(bt, "clustered", kt::to_float(kt::with_spectrum(rng, abs_spectrum("clustered", n, rng))));
  Mat gr = spd;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      gr(i, j) *= std::pow(1e-5, n > 1 ? double(i + j) / (n - 1) : 0);
  push(bt, "graded", kt::to_float(gr));
  push(bt, "scale1e-30", kt::to_float(scaled(spd, 1e-30 / n)));
  push(bt, "scale1e30", kt::to_float(scaled(spd, 1e30 / n)));
  push(bt, "identity", kt::to_float(kt::identity(n)));
  // Indefinite: the pivot of step k = n / 2 made exactly -1 (A[k][k] set to a^T A11^-1 a - 1).
  {
    const int k = n / 2;
    Mat A = spd;
    // Schur complement of the leading k x k block at (k, k), in double by Cholesky.
    Mat L(k, k);
    for (int j = 0; j < k; ++j) {
      double d = A(j, j);
      for (int l = 0; l < j; ++l) d -= L(j, l) * L(j, l);
      L(j, j) = std::sqrt(d);
      for (int i = j + 1; i < k; ++i) {
        double s = A(i, j);
        for (int l = 0; l < j; ++l) s -= L(i, l) * L(j, l);
        L(i, j) = s / L(j, j);
      }
    }
    std::vector<double> y(k);
    for (int i = 0; i < k; ++i) {
      double s = A(k, i);
      for (int l = 0; l < i; ++l) s -= L(i, l) * y[l];
      y[i] = s / L(i, i);
    }
    double q = 0;
    for (double v : y) q += v * v;
    A(k, k) = q - 0.5 * n;
    push(bt, "indefinite", kt::to_float(A));
  }
  push(bt, "zero", kt::to_float(Mat(n, n)));
  if (n >= 2) {
    Mat d = kt::identity(n);
    d(1, 1) = -1;
    push(bt, "diag(1,-1,..)", kt::to_float(d));
  }
  // NaN in the triangle read, and in the one not read (no effect there).
  const bool upper = flags & ML_LS_UPPER;
  auto nan_read = kt::to_float(spd), nan_unread = kt::to_float(spd), inf_diag = kt::to_float(spd);
  if (n >= 2) {
    nan_read[upper ? 1 : size_t(n)] = kNaN;        // (0,1) upper, (1,0) lower
    nan_unread[upper ? size_t(n) : 1] = kNaN;
    push(bt, "nan-read", nan_read);
    push(bt, "nan-unread", nan_unread);
  }
  inf_diag[size_t(n) * n - 1] = INFINITY;
  push(bt, "inf-diag", inf_diag);
  return bt;
}

// The group sizes a line runs at (CUDA, Metal, lane, odd), with the scratch each gets.
struct Launch {
  int gs, budget;
  const char *what;
};
std::vector<Launch> launches(const lsk::Line &l, int m, int n, int km, int flags) {
  std::vector<Launch> out;
  if (l.simd) {  // one simdgroup per matrix: 32 lanes (CUDA, Metal), 16 where CUDA uses them
    if (!l.fits(km, n, flags, 0)) return out;
    out.push_back({ml::cuda::group_size_cholesky_simd(m, n, 16384, 132), 0, "cuda-simd"});
    if (out.back().gs != 32) out.push_back({32, 0, "metal-simd"});
    return out;
  }
  int cuda = 0, metal = 0;
  switch (l.op) {
    case ML_OP_CHOLESKY: cuda = ml::cuda::group_size_cholesky_group(m, n, 16384, 132);
      metal = ml::metal::group_size_cholesky_group(m, n, 16384); break;
    case ML_OP_LU_FACTOR: cuda = ml::cuda::group_size_lu_factor_group(m, n, 16384, 132);
      metal = ml::metal::group_size_lu_factor_group(m, n, 16384); break;
    case ML_OP_SOLVE: cuda = ml::cuda::group_size_solve_group(m, n, 16384, 132);
      metal = ml::metal::group_size_solve_group(m, n, 16384); break;
    case ML_OP_INV: cuda = ml::cuda::group_size_inv_group(m, n, 16384, 132);
      metal = ml::metal::group_size_inv_group(m, n, 16384); break;
    default: cuda = ml::cuda::group_size_solve_triangular_group(m, n, 16384, 132);
      metal = ml::metal::group_size_solve_triangular_group(m, n, 16384);
  }
  if (l.fits(km, n, flags, kH200)) out.push_back({cuda, kH200, "cuda"});
  if (l.fits(km, n, flags, ML_METAL_SCRATCH_FLOATS))
    out.push_back({metal, ML_METAL_SCRATCH_FLOATS, "metal"});
  out.push_back({1, 1 << 26, "lane"});
  out.push_back({37, 1 << 26, "gs37"});
  return out;
}

// LAPACK's info (and pivots) through the library's CPU path.
std::vector<int> lapack_info(const lsk::Shape &s, const Batch &bt, int batch,
                             std::vector<int> *pivots) {
  std::vector<int> info(size_t(batch), -1);
  std::vector<float> x(size_t(batch) * s.x_floats() + 1);
  ml_status st = ML_OK;
  switch (s.op) {
    case ML_OP_CHOLESKY:
      st = ml_cholesky(nullptr, bt.a.data(), batch, s.n, s.flags, x.data(), info.data());
      break;
    case ML_OP_LU_FACTOR:
      pivots->assign(size_t(batch) * s.k() + 1, 0);
      st = ml_lu_factor(nullptr, bt.a.data(), batch, s.m, s.n, x.data(), pivots->data(),
                        info.data());
      break;
    case ML_OP_SOLVE:
      st = ml_solve(nullptr, bt.a.data(), bt.b.data(), batch, s.n, s.nrhs, s.flags, x.data(),
                    info.data());
      break;
    case ML_OP_INV: st = ml_inv(nullptr, bt.a.data(), batch, s.n, x.data(), info.data()); break;
    default:
      st = ml_solve_triangular(nullptr, bt.a.data(), bt.b.data(), batch, s.n, s.nrhs, s.flags,
                               x.data(), info.data());
  }
  if (st != ML_OK) {
    std::printf("LAPACK reference failed: %s\n", ml_last_error());
    std::exit(1);
  }
  return info;
}

// Runs op's line on the batch at every launch (and, with right-hand sides, a chunk width
// below nrhs), checking each matrix against LAPACK's info (and pivots) and the ratios.
void run_batch(kt::Report &rep, const lsk::Shape &s, const Batch &bt, bool all_launches) {
  const std::vector<const lsk::Line *> lines = lsk::lines_of(s.op);
  rep.expect(!lines.empty(), "a kernel-table line for the op");
  const int batch = int(bt.fams.size());
  std::vector<int> piv;
  const std::vector<int> want = lapack_info(s, bt, batch, &piv);
  const int km = lsk::two_inputs(s.op) ? s.nrhs : s.m;
  for (const lsk::Line *l : lines) {
    std::vector<Launch> ls = launches(*l, s.m, s.n, km, s.flags);
    if (ls.empty()) continue;
    if (!all_launches) ls.resize(1);
    if (s.op == ML_OP_SOLVE || s.op == ML_OP_INV || s.op == ML_OP_SOLVE_TRIANGULAR) {
      // A chunk of 3 right-hand sides (the smallest budget that takes 3 columns).
      int budget = 1;
      while (l->choose(km, s.n, s.flags, budget) >> ML_K_LS_CHUNK_SHIFT < std::min(3, km))
        ++budget;
      ls.push_back({ls[0].gs, budget, "chunk3"});
    }
    for (const Launch &L : ls) {
      const lsk::Out o = lsk::run(*l, s, bt.a, bt.b, batch, L.gs, L.budget);
      for (int i = 0; i < batch; ++i) {
        char at[200];
        std::snprintf(at, sizeof at, "%s %dx%d nrhs=%d flags=%d %s gs=%d %s #%d", l->name, s.m,
                      s.n, s.nrhs, s.flags, L.what, L.gs, bt.fams[i].c_str(), i);
        const float *a = bt.a.data() + size_t(i) * s.m * s.n;
        const float *b = lsk::two_inputs(s.op) ? bt.b.data() + size_t(i) * s.x_floats() : nullptr;
        lsk::check(rep, at, s, a, b, o, i, want[i]);
        // Pivots as LAPACK's, but for the ill-conditioned families: there, candidates within
        // rounding of each other are common, and LAPACK's blocked sgetrf rounds differently.
        const std::string &fam = bt.fams[i];
        const bool near_ties = fam.rfind("cond", 0) == 0 || fam.rfind("nearsing", 0) == 0;
        if (s.op == ML_OP_LU_FACTOR && want[i] != ML_INFO_LS_NONFINITE && !near_ties) {
          bool same = true;
          for (int k = 0; k < s.k(); ++k)
            same = same && o.piv[size_t(i) * s.k() + k] == piv[size_t(i) * s.k() + k];
          rep.expect(same, std::string(at) + " pivots as LAPACK's");
        }
      }
    }
  }
}

const int kSizes[] = {1, 2, 3, 8, 17, 32, 45};

void suite_cholesky(kt::Report &rep) {
  std::mt19937_64 rng(11);
  for (int n : kSizes)
    for (int flags : {0, int(ML_LS_UPPER)}) {
      kt::Timer t("cholesky", n, n, 0);
      run_batch(rep, {ML_OP_CHOLESKY, n, n, 1, flags}, spd_batch(n, flags, rng), true);
    }
  run_batch(rep, {ML_OP_CHOLESKY, 100, 100, 1, 0}, spd_batch(100, 0, rng), false);
}

void suite_lu(kt::Report &rep) {
  std::mt19937_64 rng(12);
  for (int n : kSizes) {
    kt::Timer t("lu_factor", n, n, 0);
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, general_batch(n, rng), true);
  }
  // Tall and wide: general families cut to shape.
  for (auto mn : {std::pair<int, int>{20, 7}, {7, 20}, {33, 32}, {1, 5}, {5, 1}, {64, 50},
                  {50, 64}, {17, 16}, {16, 17}}) {
    const int m = mn.first, n = mn.second;
    Batch bt;
    push(bt, "gaussian", kt::to_float(kt::gaussian(rng, m, n)));
    Mat gr = kt::gaussian(rng, m, n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) gr(i, j) *= std::pow(1e-4, double(i + j) / (m + n));
    push(bt, "graded", kt::to_float(gr));
    Mat zc = kt::gaussian(rng, m, n);
    for (int i = 0; i < m; ++i) zc(i, 0) = 0;
    push(bt, "zerocolumn", kt::to_float(zc));
    auto nan = kt::to_float(kt::gaussian(rng, m, n));
    nan.back() = kNaN;
    push(bt, "nan", nan);
    run_batch(rep, {ML_OP_LU_FACTOR, m, n, 1, 0}, bt, true);
  }
  run_batch(rep, {ML_OP_LU_FACTOR, 100, 100, 1, 0}, general_batch(100, rng), false);
}

void suite_solve(kt::Report &rep) {
  std::mt19937_64 rng(13);
  for (int n : kSizes)
    for (int nrhs : {1, 5})
      for (int flags : {0, int(ML_LS_RIGHT)}) {
        kt::Timer t("solve", n, nrhs, 0);
        Batch bt = general_batch(n, rng);
        add_rhs(bt, n, nrhs, rng);
        run_batch(rep, {ML_OP_SOLVE, n, n, nrhs, flags}, bt, n <= 17);
      }
  Batch bt = general_batch(64, rng);
  add_rhs(bt, 64, 16, rng);
  run_batch(rep, {ML_OP_SOLVE, 64, 64, 16, 0}, bt, false);
  // Right-hand sides in several chunks (the SIMD lines hold 16, or 8 past n = 32, at a time).
  for (int n : {5, 17, 40, 64})
    for (int flags : {0, int(ML_LS_RIGHT)}) {
      kt::Timer t("solve", n, 20, 0);
      Batch bc = general_batch(n, rng);
      add_rhs(bc, n, 20, rng);
      run_batch(rep, {ML_OP_SOLVE, n, n, 20, flags}, bc, n <= 17);
    }
}

void suite_inv(kt::Report &rep) {
  std::mt19937_64 rng(14);
  for (int n : kSizes) {
    kt::Timer t("inv", n, n, 0);
    run_batch(rep, {ML_OP_INV, n, n, n, 0}, general_batch(n, rng), n <= 17);
  }
  run_batch(rep, {ML_OP_INV, 64, 64, 64, 0}, general_batch(64, rng), false);
  run_batch(rep, {ML_OP_INV, 57, 57, 57, 0}, general_batch(57, rng), false);
}

// Triangular matrices: a random triangle (its other triangle filled with garbage the kernel
// must not read), graded, tiny and huge, a zero on the diagonal, NaN in the triangle, NaN in
// the other triangle (no effect), NaN on the diagonal under ML_LS_UNIT (not read either).
void suite_triangular(kt::Report &rep) {
  std::mt19937_64 rng(15);
  for (int n : {1, 2, 3, 8, 17, 32, 45, 64})
    for (int flags = 0; flags < 8; ++flags)
      for (int nrhs : {1, 4, 19}) {
        if (n > 17 && nrhs == 1 && (flags & 1)) continue;  // fewer cases at the larger n
        if (nrhs == 19 && (n > 45 || n < 17 || (flags & 4))) continue;  // a few multi-chunk
        const bool upper = flags & ML_LS_UPPER, unit = flags & ML_LS_UNIT;
        auto tri = [&](double scale) {
          Mat a = kt::gaussian(rng, n, n);
          for (int i = 0; i < n; ++i) {
            a(i, i) = (rng() & 1 ? 1 : -1) * (1.0 + std::fabs(a(i, i)));
            for (int j = 0; j < n; ++j) {
              if (upper ? j > i : j < i) a(i, j) *= 1.0 / std::sqrt(double(n));
              a(i, j) *= scale;
            }
          }
          auto f = kt::to_float(a);
          for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j)
              if (upper ? j < i : j > i) f[size_t(i) * n + j] = (i + j) % 3 ? 1e30f : kNaN;
          return f;
        };
        Batch bt;
        push(bt, "random", tri(1));
        auto gr = tri(1);
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) gr[size_t(i) * n + j] *= float(std::pow(1e-4, double(i) / n));
        push(bt, "graded", gr);
        push(bt, "scale1e-30", tri(1e-30));
        if (!unit) push(bt, "scale1e30", tri(1e30));  // unit: X would overflow
        auto zd = tri(1);
        zd[size_t(n / 2) * n + n / 2] = 0;  // info n/2 + 1 unless unit
        push(bt, "zerodiag", zd);
        auto nd = tri(1);
        nd[size_t(n - 1) * n + (upper ? n - 1 : 0)] = kNaN;  // in the triangle (or diagonal)
        push(bt, "nan", nd);
        auto dg = tri(1);
        dg[0] = kNaN;  // the diagonal: read unless unit
        push(bt, "nan-diag", dg);
        add_rhs(bt, n, nrhs, rng, 1.0);
        run_batch(rep, {ML_OP_SOLVE_TRIANGULAR, n, n, nrhs, flags}, bt, n <= 17);
      }
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_report_suite(argc, argv, "test_linsys_kernels cholesky|lu|solve|inv|triangular",
                              {{"cholesky", suite_cholesky},
                               {"lu", suite_lu},
                               {"solve", suite_solve},
                               {"inv", suite_inv},
                               {"triangular", suite_triangular}});
}
