// Test of the group Jacobi SVD kernels (core/kernels/svd_jacobi_group.h) through the CPU runner
// in each of their inner forms: two pairs a simdgroup with 1 or 2 rows a lane in registers
// (whole simdgroups: the CUDA and Metal launch configurations' group sizes, and one lane per
// matrix for M <= 2), and the row loops (partial simdgroups, more than 2 rows a lane).
// The kernel table's test runs every line only up to 33 x 33; here square, tall and wide shapes
// up to 200 rows, on the SVD families (graded, clustered, rank-deficient, scaled to 1e-30 and
// 1e37, ...) with a NaN matrix and an Inf matrix in each batch: LAPACK's ratios in double,
// svdvals bitwise svd's values and info, NaN only for the non-finite matrices.
// Usage: test_svd_group check. KT_TIMING=1 prints the time per shape.
#include "kernel_runner.h"
#include "../../core/kernels/svd_jacobi_group.h"
#include "../../cuda/launch_config.h"
#include "../../metal/launch_config.h"
#include "kernel_test_util.h"

namespace {

KT_SVD_ENTRY(svd_entry, ml_svd_jacobi_group)
KT_SVDVALS_ENTRY(svdvals_entry, ml_svdvals_jacobi_group)

const char *kFamilies[] = {"gaussian", "zero",  "clustered", "rankdef",   "graded",
                           "ones",     "shift", "scale1e37", "geometric1e-30"};

// The families above (+ a NaN and an Inf matrix) of m x n at group size gs.
void run_shape(kt::Report &rep, int m, int n, int gs, const char *form) {
  std::mt19937_64 rng(977 + 31 * m + n);
  const kt::Families all = kt::svd_families(m, n, rng, true);
  std::vector<kt::Mat> mats;
  std::vector<std::string> fams;
  for (const char *f : kFamilies)
    for (const auto &x : all)
      if (x.first == f) {
        mats.push_back(x.second);
        fams.push_back(f);
      }
  rep.expect(mats.size() == sizeof kFamilies / sizeof kFamilies[0], "families found");
  const int good = int(mats.size());
  mats.push_back(kt::gaussian(rng, m, n));
  mats.push_back(kt::gaussian(rng, m, n));
  fams.push_back("nan");
  fams.push_back("inf");
  const int batch = int(mats.size());
  std::vector<float> a;
  for (const kt::Mat &x : mats) {
    const auto f = kt::to_float(x);
    a.insert(a.end(), f.begin(), f.end());
  }
  a[size_t(good) * m * n + (m * n) / 2] = std::nanf("");
  a[size_t(good + 1) * m * n] = INFINITY;
  kt::SvdOut o(m, n, batch);
  kt::Timer t("svd_jacobi_group", m, n, gs);
  kt::SvdArgs x = o.svd_args(a.data(), 0), x2 = o.svdvals_args(a.data(), 0);
  ml::kernel_runner::run(gs, batch, ml_svd_jacobi_group_scratch_floats_flags(m, n, 0), svd_entry,
                         &x);
  ml::kernel_runner::run(gs, batch, ml_svdvals_jacobi_group_scratch_floats_flags(m, n, 0),
                         svdvals_entry, &x2);
  for (int b = 0; b < batch; ++b) {
    char at[160];
    std::snprintf(at, sizeof at, "svd_jacobi_group %s gs=%d %dx%d %s", form, gs, m, n,
                  fams[b].c_str());
    kt::check_svd_matrix(rep, at, fams[b], b >= good, mats[b], o, b);
  }
}

void check(kt::Report &rep) {
  struct Shape {
    int m, n, gs;
    const char *form;
  };
  const int cuda_64 = ml::cuda::group_size_svd_jacobi_group(64, 64, 1, 132);
  const int cuda_128 = ml::cuda::group_size_svd_jacobi_group(128, 100, 1, 132);
  const int metal_200 = ml::metal::group_size_svd_jacobi_group(90, 200, 1);
  const Shape shapes[] = {
      {64, 64, cuda_64, "2 rows a lane"},
      {33, 64, 64, "2 rows a lane, wide, odd"},
      {32, 20, 32, "1 row a lane, tall"},
      {2, 2, 1, "lane per matrix, registers"},
      {7, 5, 1, "lane per matrix, row loops"},
      {128, 100, cuda_128, "row loops, 4 rows a lane"},
      {90, 200, metal_200, "row loops, wide"},
      {70, 61, 37, "row loops, partial simdgroup"},
  };
  for (const Shape &s : shapes) run_shape(rep, s.m, s.n, s.gs, s.form);
}

}  // namespace

int main(int argc, char **argv) {
  return kt::run_report_suite(argc, argv, "usage: test_svd_group check", {{"check", check}});
}
