// The linear-system kernels (core/kernels/linsys_*.h) through the CPU runner on hard matrix
// families, judged by LAPACK's ratios (docs/design.md section 7) in double; info and
// lu_factor's pivots compared with LAPACK's own (the library's CPU path, host memory). Each
// batch mixes every family with failing matrices (indefinite, singular, NaN/Inf in what the op
// reads) so that a failing matrix's NaN output and info stay its own; NaN in the part an op
// does not read must change nothing. Group sizes: the CUDA and Metal launch configuration's,
// one lane per matrix, an odd 37 (SIMD lines: 8, 16 and 32 lanes); the right-hand sides also in
// chunks narrower than nrhs (the SIMD lines: their own chunks, several at nrhs 11, 19, 21 and
// 16). Past n = 17 the solves run the CUDA launch and the narrow chunk only (the CPU runner's
// thread per lane makes the larger groups slow on CI's two cores).
// Suites: cholesky, lu, solve, inv, triangular.
#include <cstdio>
#include <random>
#include <set>
#include <string>

#include "../../cuda/launch_config.h"
#include "../../metal/launch_config.h"
#include "linsys_check.h"
#include "linsys_families.h"

namespace {

using kt::Mat;
using lsk::Batch;
using lsk::push;
using lsk::kNaN;
constexpr int kH200 = ML_CUDA_SCRATCH_FLOATS_SM90;

// The group sizes a line runs at (CUDA, Metal, lane, odd), with the scratch each gets.
struct Launch {
  int gs, budget;
  const char *what;
};
std::vector<Launch> launches(const lsk::Line &l, int m, int n, int km, int flags) {
  std::vector<Launch> out;
  if (l.simd) {  // one simdgroup per matrix: 32 lanes (CUDA, Metal), 16 or 8 where CUDA uses them
    if (!l.fits(km, n, flags, kH200)) return out;
    const std::string name(l.name);
    const bool lu = name.rfind("lu_factor", 0) == 0 || name.rfind("solve_simd", 0) == 0 ||
                    name.rfind("solve_right", 0) == 0 || name.rfind("inv_simd", 0) == 0;
    const bool right = name.rfind("solve_right", 0) == 0;  // no 8-lane groups
    const int cuda = lu ? ml::cuda::lu_simd_group_size(m, n, !right)
                        : ml::cuda::group_size_cholesky_simd(m, n, 16384, 132);
    out.push_back({cuda, kH200, "cuda-simd"});
    if (cuda == 8) out.push_back({16, kH200, "simd16"});
    if (cuda != 32) out.push_back({32, kH200, "metal-simd"});
    return out;
  }
  int cuda = 0, metal = 0;
  const bool cols = std::string(l.name).rfind("cholesky_cols", 0) == 0;  // both widths
  switch (l.op) {
    case ML_OP_CHOLESKY:
      cuda = cols ? ml::cuda::group_size_cholesky_cols(m, n, 16384, 132)
                  : ml::cuda::group_size_cholesky_group(m, n, 16384, 132);
      metal = cols ? ml::metal::group_size_cholesky_cols(m, n, 16384)
                   : ml::metal::group_size_cholesky_group(m, n, 16384);
      break;
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
  if (l.fits(km, n, flags, 1 << 26)) {  // within the line's window (cholesky_cols: n <= 64)
    out.push_back({1, 1 << 26, "lane"});
    out.push_back({37, 1 << 26, "gs37"});
  }
  return out;
}

// Runs op's line on the batch at every launch (and, with right-hand sides, a chunk width
// below nrhs), checking each matrix against LAPACK's info (and pivots) and the ratios.
// only: that line alone (null: every line of the op).
void run_batch(kt::Report &rep, const lsk::Shape &s, const Batch &bt, bool all_launches,
               const char *only = nullptr) {
  std::vector<const lsk::Line *> lines = lsk::lines_of(s.op);
  rep.expect(!lines.empty(), "a kernel-table line for the op");
  if (only) {
    std::erase_if(lines, [&](const lsk::Line *l) { return std::string(l->name) != only; });
    rep.expect(lines.size() == 1, std::string("the line ") + only);
  }
  const int batch = int(bt.fams.size());
  std::vector<int> piv;
  const std::vector<int> want = lsk::lapack_info(s, bt, batch, &piv);
  const int km = lsk::two_inputs(s.op) ? s.nrhs : s.m;
  for (const lsk::Line *l : lines) {
    std::vector<Launch> ls = launches(*l, s.m, s.n, km, s.flags);
    if (ls.empty()) continue;
    if (!all_launches) ls.resize(1);
    if (!l->simd &&
        (s.op == ML_OP_SOLVE || s.op == ML_OP_INV || s.op == ML_OP_SOLVE_TRIANGULAR)) {
      // A chunk of 3 right-hand sides (the smallest budget that takes 3 columns; SIMD lines
      // hold their columns in registers, no chunk in the flags).
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
        lsk::check_matrix(rep, at, s, bt, o, i, want, piv);
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
      run_batch(rep, {ML_OP_CHOLESKY, n, n, 1, flags}, lsk::spd_batch(n, flags, rng), true);
    }
  // cholesky_cols' register widths (64, 96, 128) at their edges, the CUDA launch only.
  for (int n : {64, 65, 97, 128}) {
    kt::Timer t("cholesky", n, n, 0);
    run_batch(rep, {ML_OP_CHOLESKY, n, n, 1, n == 97 ? int(ML_LS_UPPER) : 0},
              lsk::spd_batch(n, n == 97 ? int(ML_LS_UPPER) : 0, rng), false);
  }
  run_batch(rep, {ML_OP_CHOLESKY, 100, 100, 1, 0}, lsk::spd_batch(100, 0, rng), false);
}

void suite_lu(kt::Report &rep) {
  std::mt19937_64 rng(12);
  for (int n : kSizes) {
    kt::Timer t("lu_factor", n, n, 0);
    run_batch(rep, {ML_OP_LU_FACTOR, n, n, 1, 0}, lsk::general_batch(n, rng), true);
  }
  // Tall and wide: general families cut to shape.
  for (auto mn : {std::pair<int, int>{20, 7}, {7, 20}, {33, 32}, {1, 5}, {5, 1}}) {
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
  run_batch(rep, {ML_OP_LU_FACTOR, 100, 100, 1, 0}, lsk::general_batch(100, rng), false);
}

void suite_solve(kt::Report &rep) {
  std::mt19937_64 rng(13);
  for (int n : kSizes)
    for (int nrhs : {1, 5})
      for (int flags : {0, int(ML_LS_RIGHT)}) {
        kt::Timer t("solve", n, nrhs, 0);
        Batch bt = lsk::general_batch(n, rng);
        lsk::add_rhs(bt, n, nrhs, rng);
        run_batch(rep, {ML_OP_SOLVE, n, n, nrhs, flags}, bt, n <= 17);
      }
  // Several chunks of right-hand sides on the SIMD lines (8 columns a chunk at n <= 8 and
  // 33..64, 16 at 9..32).
  for (auto nr : {std::pair<int, int>{8, 11}, {13, 19}, {32, 21}})
    for (int flags : {0, int(ML_LS_RIGHT)}) {
      Batch bc = lsk::general_batch(nr.first, rng);
      lsk::add_rhs(bc, nr.first, nr.second, rng);
      run_batch(rep, {ML_OP_SOLVE, nr.first, nr.first, nr.second, flags}, bc, true);
    }
  for (int flags : {0, int(ML_LS_RIGHT)}) {
    Batch bt = lsk::general_batch(64, rng);
    lsk::add_rhs(bt, 64, 16, rng);
    run_batch(rep, {ML_OP_SOLVE, 64, 64, 16, flags}, bt, false);
  }
}

void suite_inv(kt::Report &rep) {
  std::mt19937_64 rng(14);
  for (int n : kSizes) {
    kt::Timer t("inv", n, n, 0);
    run_batch(rep, {ML_OP_INV, n, n, n, 0}, lsk::general_batch(n, rng), n <= 17);
  }
  run_batch(rep, {ML_OP_INV, 64, 64, 64, 0}, lsk::general_batch(64, rng), false);
}

void suite_triangular(kt::Report &rep) {
  std::mt19937_64 rng(15);
  for (int n : kSizes)
    for (int flags = 0; flags < 8; ++flags)
      for (int nrhs : {1, 4}) {
        if (n > 17 && nrhs == 1 && (flags & 1)) continue;  // fewer cases at the larger n
        Batch bt = lsk::triangular_batch(n, flags, rng);
        lsk::add_rhs(bt, n, nrhs, rng, 1.0);
        run_batch(rep, {ML_OP_SOLVE_TRIANGULAR, n, n, nrhs, flags}, bt, n <= 17);
      }
  // solve_triangular_simd's row and column widths: 2 and 4 rows a lane, chunks of 8 and 16
  // columns (and a partial one), every flag at n = 100 (that line alone: the group line's
  // thread per lane is slow on the CPU runner at these sizes).
  for (int flags = 0; flags < 8; ++flags)
    for (auto nr : {std::pair<int, int>{64, 7}, {100, 17}}) {
      if (nr.first == 64 && (flags & 4)) continue;
      kt::Timer t("triangular", nr.first, nr.second, 0);
      Batch bt = lsk::triangular_batch(nr.first, flags, rng);
      lsk::add_rhs(bt, nr.first, nr.second, rng, 1.0);
      run_batch(rep, {ML_OP_SOLVE_TRIANGULAR, nr.first, nr.first, nr.second, flags}, bt, false,
                nr.first <= 64 ? "solve_triangular_simd" : "solve_triangular_simd128");
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
