// Sequencing of the tridiagonal eigensolver (blocked_tridiag.h, core/kernels/tridiag_steps.h).
#include "blocked_tridiag.h"

#include <cstdlib>

#include "errors.h"

namespace ml::blocked {

namespace {

// Lanes of the lane-per-value steps, and of the cluster groups.
int value_lanes(const Options &o) { return std::max(1, std::min(128, o.max_group)); }
int cluster_lanes(const Options &o) { return std::max(1, std::min(256, o.max_group)); }
// Gram-Schmidt coefficients held at once in a cluster group's shared memory.
constexpr int kClusterCoef = 1024;
// Values a cluster group looks at (most are not the head of a cluster: fewer, fuller groups;
// at most 2 of 4 can head one).
constexpr int kClusterValues = 4;
// Lanes the bisection aims to fill (about what an H200 holds at once): below that, up to 32
// lanes share each value (multisection).
constexpr int64_t kBisectLanes = int64_t{1} << 17;

// Lanes per value of the bisection step: a power of two <= 32 dividing the group size gs.
int sections(int64_t values, int gs) {
  int sec = 1;
  while (sec < 32 && values * sec * 2 <= kBisectLanes && gs % (sec * 2) == 0) sec *= 2;
  return sec;
}

// Order from which eigenvectors come from divide and conquer (docs/routing.md).
constexpr int kTridiagDcMinN = 128;

}  // namespace

int tridiag_dc_min_n() {
  static const int v = [] {
    const char *s = std::getenv("METAL_LINALG_TRIDIAG_DC_MIN_N");
    return s && *s ? std::atoi(s) : kTridiagDcMinN;
  }();
  return v;
}

namespace {
bool use_dc(int64_t n, bool vectors) {
  const int m = tridiag_dc_min_n();
  return vectors && m > 0 && n >= m;
}
}  // namespace

int64_t tridiag_scratch_floats(int64_t n, int64_t count, bool vectors) {
  const int64_t old =
      ml_tridiag_scratch(static_cast<int>(n), static_cast<int>(count), vectors ? 1 : 0);
  return use_dc(n, vectors) ? std::max(old, tridiag_dc_scratch_floats(n)) : old;
}

ml_step_params tridiag_params(int n, int64_t scratch, int64_t d, int64_t e, int64_t stat) {
  ml_step_params p = step_params();
  p.n = n;
  p.off[0] = scratch;
  p.off[1] = d;
  p.off[2] = e;
  p.off[3] = stat;
  return p;
}

ml_status tridiag_prep(const Chunk &ch, const Options &o, const ml_step_params &p) {
  const int pg = std::max(1, std::min(256, o.max_group));
  return ch.launch(kStep_tridiag_prep, ch.batch, pg, ML_RED_FLOATS, p);
}

ml_status tridiag_eig(const Chunk &ch, const Options &o, int n, int il, int count, int64_t d,
                      int64_t e, int64_t w, int64_t z, int ldz, int64_t scratch, int64_t stat) {
  if (n <= 0 || count <= 0 || ch.batch <= 0) return ML_OK;
  const bool vectors = z >= 0;
  if (il < 0 || count > n - il || (vectors && ldz < n))
    return fail(ML_INVALID_ARGUMENT, "tridiag_eig", "values %d..%d of order %d, ldz %d", il,
                il + count - 1, n, ldz);
  // Divide and conquer: the values by bisection as without vectors, then its vectors; or
  // (Options::dc_values) the values from its roots too, no bisection.
  const bool dc = use_dc(n, vectors);
  if (dc && o.dc_values)
    return tridiag_eig_dc(ch, o, n, il, count, d, e, w, z, ldz, scratch, stat);
  ml_status st;
  ml_step_params p = tridiag_params(n, scratch, d, e, stat);
  p.i[0] = il;
  p.i[1] = count;
  p.i[3] = vectors && !dc ? 1 : 0;
  if ((st = tridiag_prep(ch, o, p))) return st;
  const int vl = value_lanes(o);
  const int64_t vgroups = ch.batch * ((count + vl - 1) / vl);
  p.off[1] = w;
  p.off[2] = vectors && !dc ? z : 0;
  p.ld[2] = ldz;
  const int sec = sections(ch.batch * count, vl);
  const int vpg = vl / sec;
  p.i[2] = sec;
  if ((st = ch.launch(kStep_tridiag_bisect, ch.batch * ((count + vpg - 1) / vpg), vl, 0, p)))
    return st;
  p.i[2] = 0;
  if (!vectors) return ML_OK;
  if (dc) return tridiag_eig_dc(ch, o, n, il, count, d, e, -1, z, ldz, scratch, stat);
  if ((st = ch.launch(kStep_tridiag_link, vgroups, vl, 0, p)) ||
      (st = ch.launch(kStep_tridiag_zero, ch.batch * count, plain_lanes(o), 0, p)) ||
      (st = ch.launch(kStep_tridiag_invit, vgroups, vl, 0, p)))
    return st;
  p.k = kClusterCoef;
  p.i[2] = kClusterValues;
  return ch.launch(kStep_tridiag_cluster,
                   ch.batch * ((count + kClusterValues - 1) / kClusterValues), cluster_lanes(o),
                   ml_tridiag_cluster_shared_floats(kClusterCoef), p);
}

}  // namespace ml::blocked
