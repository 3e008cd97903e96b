// Tests of the tridiagonal eigensolver of the blocked algorithms (core/src/blocked_tridiag.cpp,
// core/kernels/tridiag_steps.h) through the CPU runner, with a hand-laid workspace: several
// matrices of one order per call, LAPACK-style ratios against a long double bisection:
//   |w - w_ref| / (n ulp ||T||), ||T Z - Z diag(w)||_1 / (n ulp ||T||), ||I - Z^T Z||_1 / (n ulp)
// Suites: values (eigenvalues only, whole spectrum and subsets), vectors (the hard families with
// eigenvectors), tgk (Golub-Kahan forms of bidiagonals, the positive half as the SVD uses it),
// subset (il / count inside the spectrum, with vectors), limits (orders 1 and 2, zero, identity,
// the halving cap), dc (divide and conquer, tridiag_eig_dc, on the hard families: glued
// Wilkinson, clusters, A^T A, repeated, graded, scaled, Golub-Kahan forms of rank-deficient
// bidiagonals, single matrices and batches, whole spectra and subsets).
// Usage: test_blocked_tridiag <suite>
#include "kernel_runner.h"
#include "kernel_test_util.h"
#include "step_runner.h"
#include "../../core/src/blocked_tridiag.h"

using kt::Report;

namespace {

// Tighter than eigh's kt::kEigLimit: the blocked path is held to QR's threshold.
constexpr double kLimit = kt::kQrLimit;

struct Tri {
  std::string name;
  std::vector<float> d, e;  // e: n - 1 entries
};

// ---- families ----

Tri random_tri(std::mt19937_64 &rng, int n) {
  std::normal_distribution<double> g;
  Tri t{"random", std::vector<float>(n), std::vector<float>(std::max(n - 1, 0))};
  for (auto &x : t.d) x = float(g(rng));
  for (auto &x : t.e) x = float(g(rng));
  return t;
}

// Wilkinson's W+: d_i = |m - i| (m = (n - 1) / 2), e = 1; its top eigenvalues come in pairs
// closer than float can tell apart.
Tri wilkinson(int n) {
  Tri t{"wilkinson", std::vector<float>(n), std::vector<float>(std::max(n - 1, 0), 1.0f)};
  for (int i = 0; i < n; ++i) t.d[i] = float(std::abs((n - 1) / 2 - i));
  return t;
}

// `copies` W+ of order 21 glued by off-diagonal `glue` (n = 21 copies).
Tri glued_wilkinson(int copies, float glue) {
  Tri w = wilkinson(21), t{"glued", {}, {}};
  for (int c = 0; c < copies; ++c) {
    t.d.insert(t.d.end(), w.d.begin(), w.d.end());
    t.e.insert(t.e.end(), w.e.begin(), w.e.end());
    if (c + 1 < copies) t.e.push_back(glue);
  }
  t.name = glue == 0.0f ? "glued0" : "glued";
  return t;
}

// Lanczos (full reorthogonalisation, in double) on diag(lambda) from a random start: a
// tridiagonal with that spectrum; on breakdown (repeated eigenvalues) a new random direction
// and an off-diagonal at the roundoff level (a split).
Tri lanczos(std::mt19937_64 &rng, const std::vector<double> &lam, const std::string &name) {
  const int n = int(lam.size());
  std::normal_distribution<double> g;
  std::vector<std::vector<double>> q;
  Tri t{name, std::vector<float>(n), std::vector<float>(std::max(n - 1, 0))};
  std::vector<double> v(n);
  for (auto &x : v) x = g(rng);
  double beta = 0;
  for (int k = 0; k < n; ++k) {
    for (int pass = 0; pass < 2; ++pass)
      for (auto &qq : q) {
        double s = 0;
        for (int i = 0; i < n; ++i) s += qq[i] * v[i];
        for (int i = 0; i < n; ++i) v[i] -= s * qq[i];
      }
    double nv = 0;
    for (double x : v) nv += x * x;
    nv = std::sqrt(nv);
    if (k > 0) t.e[k - 1] = float(nv);
    if (nv < 1e-12) {  // breakdown: restart in a fresh direction
      for (auto &x : v) x = g(rng);
      for (int pass = 0; pass < 2; ++pass)
        for (auto &qq : q) {
          double s = 0;
          for (int i = 0; i < n; ++i) s += qq[i] * v[i];
          for (int i = 0; i < n; ++i) v[i] -= s * qq[i];
        }
      nv = 0;
      for (double x : v) nv += x * x;
      nv = std::sqrt(nv);
    }
    for (auto &x : v) x /= nv;
    q.push_back(v);
    std::vector<double> av(n);
    for (int i = 0; i < n; ++i) av[i] = lam[i] * v[i];
    double alpha = 0;
    for (int i = 0; i < n; ++i) alpha += av[i] * v[i];
    t.d[k] = float(alpha);
    for (int i = 0; i < n; ++i) av[i] -= alpha * v[i];
    v = av;
    (void)beta;
  }
  return t;
}

// Eigenvalues 1 (within 1e-6 relative) for most, a few spread over [-1, 1].
Tri clustered(std::mt19937_64 &rng, int n) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> lam(n);
  for (int i = 0; i < n; ++i) lam[i] = i % 5 == 4 ? u(rng) : 1.0 + 1e-6 * u(rng);
  return lanczos(rng, lam, "clustered");
}

// Eigenvalues 1, 2, 3 each n / 3 times (and one 0.5 for the rest).
Tri repeated(std::mt19937_64 &rng, int n) {
  std::vector<double> lam(n);
  for (int i = 0; i < n; ++i) lam[i] = i < 3 * (n / 3) ? 1.0 + i % 3 : 0.5;
  return lanczos(rng, lam, "repeated");
}

// Diagonal from 1 down to 1e-6 geometrically, off-diagonals 0.3 of the smaller neighbour.
Tri graded(int n) {
  Tri t{"graded", std::vector<float>(n), std::vector<float>(std::max(n - 1, 0))};
  for (int i = 0; i < n; ++i) t.d[i] = float(std::pow(1e-6, n > 1 ? double(i) / (n - 1) : 0.0));
  for (int i = 0; i + 1 < n; ++i) t.e[i] = 0.3f * t.d[i + 1];
  return t;
}

Tri constant(int n, float dv, float ev, const char *name) {
  return Tri{name, std::vector<float>(n, dv), std::vector<float>(std::max(n - 1, 0), ev)};
}

// Golub-Kahan tridiagonal of the upper bidiagonal (bd, be): zero diagonal, off-diagonal
// bd0, be0, bd1, ..., bd_{k-1} (order 2k).
Tri tgk(const std::vector<float> &bd, const std::vector<float> &be, const std::string &name) {
  const int k = int(bd.size());
  Tri t{name, std::vector<float>(2 * k, 0.0f), std::vector<float>(2 * k - 1)};
  for (int i = 0; i < k; ++i) {
    t.e[2 * i] = bd[i];
    if (i + 1 < k) t.e[2 * i + 1] = be[i];
  }
  return t;
}

// ---- reference and ratios ----

int sturm_ld(const Tri &t, long double x) {
  const int n = int(t.d.size());
  long double q = 1;
  int cnt = 0;
  for (int i = 0; i < n; ++i) {
    const long double b = i > 0 ? t.e[i - 1] : 0.0L;
    q = (t.d[i] - x) - (q != 0 ? b * b / q : 0.0L);
    if (q == 0) q = -1e-4000L;
    cnt += q < 0 ? 1 : 0;
  }
  return cnt;
}

double tnorm(const Tri &t) {  // ||T||_1
  const int n = int(t.d.size());
  double best = 0;
  for (int i = 0; i < n; ++i) {
    const double s = std::fabs(t.d[i]) + (i > 0 ? std::fabs(t.e[i - 1]) : 0.0) +
                     (i + 1 < n ? std::fabs(t.e[i]) : 0.0);
    best = std::max(best, s);
  }
  return best;
}

// The eigenvalue j (0-based, ascending) of t by bisection in long double.
double ref_value(const Tri &t, int j) {
  long double lo = -tnorm(t) - 1, hi = tnorm(t) + 1;
  for (int it = 0; it < 200 && hi - lo > 0; ++it) {
    const long double mid = 0.5L * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (sturm_ld(t, mid) > j) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return double(0.5L * (lo + hi));
}

// Tridiagonal of A^T A for a random n x n A (Householder in double): most eigenvalues near 0,
// clustered relative to ||T||.
Tri ata(std::mt19937_64 &rng, int n) {
  std::normal_distribution<double> g;
  std::vector<double> a(size_t(n) * n), m(size_t(n) * n, 0.0);
  for (auto &x : a) x = g(rng);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double v = 0;
      for (int k = 0; k < n; ++k) v += a[size_t(k) * n + i] * a[size_t(k) * n + j];
      m[size_t(i) * n + j] = v;
    }
  Tri t{"ata", std::vector<float>(n), std::vector<float>(std::max(n - 1, 0))};
  std::vector<double> v(n), p(n);
  for (int k = 0; k + 2 < n; ++k) {  // reflector zeroing column k below row k + 1
    double nx = 0;
    for (int i = k + 1; i < n; ++i) nx += m[size_t(i) * n + k] * m[size_t(i) * n + k];
    nx = std::sqrt(nx);
    if (nx == 0) continue;
    const double x0 = m[size_t(k + 1) * n + k], alpha = x0 > 0 ? -nx : nx;
    std::fill(v.begin(), v.end(), 0.0);
    for (int i = k + 1; i < n; ++i) v[i] = m[size_t(i) * n + k];
    v[k + 1] -= alpha;
    double vv = 0;
    for (int i = k + 1; i < n; ++i) vv += v[i] * v[i];
    // M = H M H with H = I - 2 v v^T / vv.
    for (int i = 0; i < n; ++i) {
      double s2 = 0;
      for (int j = k + 1; j < n; ++j) s2 += m[size_t(i) * n + j] * v[j];
      p[i] = 2 * s2 / vv;
    }
    double pv = 0;
    for (int i = k + 1; i < n; ++i) pv += p[i] * v[i];
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const double q = p[i] - pv / vv * v[i], r = p[j] - pv / vv * v[j];
        m[size_t(i) * n + j] -= v[i] * r + q * v[j];
      }
  }
  for (int i = 0; i < n; ++i) t.d[i] = float(m[size_t(i) * n + i]);
  for (int i = 0; i + 1 < n; ++i) t.e[i] = float(m[size_t(i + 1) * n + i]);
  return t;
}

struct Worst {
  double val = 0, res = 0, orth = 0;
};

// Whether run_case calls the divide-and-conquer solver itself (the dc suite) instead of the
// routed tridiag_eig.
bool g_dc = false;

// One call over `mats` (all of order n): values il .. il + count - 1, vectors when asked, the
// workspace laid out by hand: per matrix stat | d | e | w | Z (ld n + 1) | scratch.
void run_case(Report &rep, Worst &worst, const std::vector<Tri> &mats, int il, int count,
              bool vectors, const ml::blocked::Options &o, const char *suite) {
  const int n = int(mats[0].d.size()), batch = int(mats.size()), ldz = n + 1;
  ml::blocked::Slice s;
  const int64_t ost = s.add(ML_STAT_FLOATS), od = s.add(n), oe = s.add(n), ow = s.add(count);
  const int64_t oz = vectors ? s.add(int64_t(ldz) * count) : -1;
  const int64_t osc = s.add(g_dc ? ml::blocked::tridiag_dc_scratch_floats(n)
                                 : ml::blocked::tridiag_scratch_floats(n, count, vectors));
  const int64_t stride = s.floats;
  kt::CpuStepRunner r;
  r.ws.assign(size_t(stride * batch), std::nanf(""));
  for (int b = 0; b < batch; ++b) {
    float *base = r.ws.data() + b * stride;
    for (int i = 0; i < ML_STAT_FLOATS; ++i) base[ost + i] = 0.0f;
    std::copy(mats[b].d.begin(), mats[b].d.end(), base + od);
    std::copy(mats[b].e.begin(), mats[b].e.end(), base + oe);
  }
  const std::vector<float> before = r.ws;
  const ml::blocked::Chunk ch{r, 0, batch, stride};
  ml_status st;
  {
    kt::Timer tm(suite, n, count, o.max_group);
    st = g_dc ? ml::blocked::tridiag_eig_dc(ch, o, n, il, count, od, oe, ow, oz, ldz, osc, ost)
              : ml::blocked::tridiag_eig(ch, o, n, il, count, od, oe, ow, oz, ldz, osc, ost);
  }
  char hdr[160];
  std::snprintf(hdr, sizeof hdr, "%s n%d il%d count%d%s gs%d", suite, n, il, count,
                vectors ? " vectors" : "", o.max_group);
  rep.expect(st == ML_OK, std::string(hdr) + " status");
  for (int b = 0; b < batch; ++b) {
    const Tri &t = mats[b];
    const std::string at = std::string(hdr) + " " + t.name + " #" + std::to_string(b);
    const float *base = r.ws.data() + b * stride;
    const float *w = base + ow;
    rep.expect(std::memcmp(base + od, before.data() + b * stride + od, 4 * size_t(n)) == 0 &&
                   std::memcmp(base + oe, before.data() + b * stride + oe, 4 * size_t(n - 1)) ==
                       0,
               at + " d, e unchanged");
    rep.expect(base[ost + 2] == 0.0f, at + " stat info 0");
    if (vectors && std::string(suite) == "large") {  // cluster statistics (by hand)
      const float *link = base + osc + ml_tridiag_off_link(n, count);
      int clusters = 0, longest = 0, run = 0, linked = 0;
      for (int i = 0; i < n; ++i) {
        run = link[i] != 0.0f ? run + 1 : 0;
        linked += link[i] != 0.0f;
        clusters += i + 1 < n && link[i] == 0.0f && link[i + 1] != 0.0f;
        longest = std::max(longest, run + 1);
      }
      std::printf("%s: %d clusters of 2 or more, %d values in them, longest %d\n", at.c_str(),
                  clusters, linked + clusters, longest);
    }
    const double tn = tnorm(t);
    bool asc = true;
    for (int j = 0; j + 1 < count; ++j) asc = asc && w[j] <= w[j + 1];
    rep.expect(asc, at + " ascending");
    double dv = 0;
    for (int j = 0; j < count; ++j) {
      const double err = std::fabs(w[j] - (tn > 0 ? ref_value(t, il + j) : 0.0));
      dv = std::max(dv, std::isfinite(w[j]) ? err : 1e300);
    }
    const double scale = n * kt::kUlp * tn;
    const double rv = scale > 0 ? dv / scale : (dv == 0 ? 0 : 1e300);
    rep.ratio(rv, kLimit, at + " values");
    worst.val = std::max(worst.val, rv);
    if (!vectors) continue;
    // Z (n x count) and its ratios in double.
    kt::Mat Z(n, count);
    bool finite = true;
    for (int j = 0; j < count; ++j)
      for (int i = 0; i < n; ++i) {
        Z(i, j) = base[oz + int64_t(j) * ldz + i];
        finite = finite && std::isfinite(Z(i, j));
      }
    rep.expect(finite, at + " Z finite");
    kt::Mat R(n, count);
    for (int j = 0; j < count; ++j)
      for (int i = 0; i < n; ++i) {
        double x = (double(t.d[i]) - double(w[j])) * Z(i, j);
        if (i > 0) x += double(t.e[i - 1]) * Z(i - 1, j);
        if (i + 1 < n) x += double(t.e[i]) * Z(i + 1, j);
        R(i, j) = x;
      }
    const double res = kt::norm1(R);
    const double rr = scale > 0 ? res / scale : (res == 0 ? 0 : 1e300);
    const double ro = kt::orth_defect(Z) / (n * kt::kUlp);
    rep.ratio(rr, kLimit, at + " residual");
    rep.ratio(ro, kLimit, at + " orthogonality");
    worst.res = std::max(worst.res, rr);
    worst.orth = std::max(worst.orth, ro);
  }
}

ml::blocked::Options opts(int group) {
  ml::blocked::Options o;
  o.max_group = group;
  return o;
}

std::vector<Tri> families(std::mt19937_64 &rng, int n) {
  std::vector<Tri> f;
  f.push_back(random_tri(rng, n));
  f.push_back(wilkinson(n));
  f.push_back(clustered(rng, n));
  f.push_back(repeated(rng, n));
  f.push_back(graded(n));
  f.push_back(constant(n, 0.0f, 0.0f, "zero"));
  f.push_back(constant(n, 1.0f, 0.0f, "identity"));
  f.push_back(constant(n, 2.0f, 1.0f, "toeplitz"));
  f.push_back(random_tri(rng, n));
  return f;
}

int finish(const char *suite, const Report &rep, const Worst &w) {
  std::printf("%s: %d checks, %d failures, worst ratio %.3g (%s); values %.3g residual %.3g "
              "orthogonality %.3g\n",
              suite, rep.checks, rep.failures, rep.worst, rep.worst_where.c_str(), w.val, w.res,
              w.orth);
  return rep.failures ? 1 : 0;
}

int suite_values() {
  Report rep;
  Worst w;
  std::mt19937_64 rng(21);
  for (int n : {3, 21, 64, 101, 300}) {
    const auto f = families(rng, n);
    run_case(rep, w, f, 0, n, false, opts(32), "values");
    run_case(rep, w, f, n / 3, n - n / 3 - n / 5, false, opts(32), "values");
  }
  run_case(rep, w, {glued_wilkinson(6, 1e-4f), glued_wilkinson(6, 0.0f)}, 0, 126, false, opts(32),
           "values");
  // Groups of one lane: bisection a lane per value (no multisection).
  for (int n : {101, 300}) {
    const auto f = families(rng, n);
    run_case(rep, w, f, 0, n, false, opts(1), "values");
    run_case(rep, w, f, n / 2, n / 3, false, opts(1), "values");
  }
  return finish("values", rep, w);
}

int suite_vectors() {
  Report rep;
  Worst w;
  std::mt19937_64 rng(22);
  for (int n : {3, 21, 37, 130})
    run_case(rep, w, families(rng, n), 0, n, true, opts(32), "vectors");
  run_case(rep, w, {random_tri(rng, 300), graded(300), wilkinson(300)}, 0, 300, true, opts(32),
           "vectors");
  run_case(rep, w, families(rng, 77), 0, 77, true, opts(1), "vectors");
  run_case(rep, w, {glued_wilkinson(6, 1e-4f), glued_wilkinson(6, 1e-7f), glued_wilkinson(6, 0.0f)},
           0, 126, true, opts(32), "vectors");
  run_case(rep, w, {wilkinson(101), random_tri(rng, 101), clustered(rng, 101)}, 0, 101, true,
           opts(64), "vectors");
  return finish("vectors", rep, w);
}

int suite_tgk() {
  Report rep;
  Worst w;
  std::mt19937_64 rng(23);
  std::normal_distribution<double> g;
  for (int k : {1, 2, 17, 64, 150}) {
    std::vector<Tri> mats;
    std::vector<float> bd(k), be(std::max(k - 1, 0));
    for (auto &x : bd) x = float(g(rng));
    for (auto &x : be) x = float(g(rng));
    mats.push_back(tgk(bd, be, "tgk-random"));
    for (int i = 0; i < k; ++i) bd[i] = float(std::pow(1e-6, k > 1 ? double(i) / (k - 1) : 0.0));
    for (int i = 0; i + 1 < k; ++i) be[i] = 0.5f * bd[i + 1];
    mats.push_back(tgk(bd, be, "tgk-graded"));
    for (auto &x : bd) x = 1.0f;
    for (auto &x : be) x = 0.0f;
    mats.push_back(tgk(bd, be, "tgk-identity"));
    // The positive half (singular values ascending), as the SVD takes it, and everything.
    run_case(rep, w, mats, k, k, true, opts(32), "tgk");
    if (k <= 64) run_case(rep, w, mats, 0, 2 * k, true, opts(32), "tgk");
  }
  return finish("tgk", rep, w);
}

int suite_subset() {
  Report rep;
  Worst w;
  std::mt19937_64 rng(24);
  for (int n : {40, 129}) {
    const auto f = families(rng, n);
    run_case(rep, w, f, 0, 1, true, opts(32), "subset");
    run_case(rep, w, f, n - 1, 1, true, opts(32), "subset");
    run_case(rep, w, f, n / 4, n / 2 + 1, true, opts(32), "subset");
    run_case(rep, w, f, 3, 37, true, opts(16), "subset");
  }
  return finish("subset", rep, w);
}

int suite_limits() {
  Report rep;
  Worst w;
  std::mt19937_64 rng(25);
  for (int n : {1, 2}) {
    auto f = families(rng, n);
    f.push_back(constant(n, -3.0f, 1e-30f, "tiny-e"));
    f.push_back(constant(n, 1e-30f, 1e-30f, "tiny"));
    run_case(rep, w, f, 0, n, true, opts(32), "limits");
    run_case(rep, w, f, n - 1, 1, true, opts(1), "limits");
  }
  // Scaled far from 1 (the copies are scaled by a power of two inside).
  {
    const int n = 30;
    std::vector<Tri> f;
    for (float sc : {1e-30f, 1e30f, 3e-38f}) {
      Tri t = random_tri(rng, n), g = graded(n);
      for (auto *x : {&t, &g}) {
        for (auto &v : x->d) v *= sc;
        for (auto &v : x->e) v *= sc;
        x->name += "-scaled";
        f.push_back(*x);
      }
    }
    run_case(rep, w, f, 0, n, true, opts(32), "limits");
    run_case(rep, w, f, 7, 11, false, opts(32), "limits");
  }
  // Zero and identity: exact values and unit vectors.
  {
    const int n = 33;
    std::vector<Tri> f{constant(n, 0.0f, 0.0f, "zero"), constant(n, 1.0f, 0.0f, "identity")};
    run_case(rep, w, f, 0, n, true, opts(32), "limits");
  }
  // The halving cap: p.k = 2 halvings on a random matrix (not converged), none needed on a
  // diagonal one... every bisection needs more than 2, so both report it.
  {
    const int n = 20;
    Tri t = random_tri(rng, n);
    ml::blocked::Slice s;
    const int64_t ost = s.add(ML_STAT_FLOATS), od = s.add(n), oe = s.add(n), ow = s.add(n);
    const int64_t osc = s.add(ml::blocked::tridiag_scratch_floats(n, n, false));
    kt::CpuStepRunner r;
    r.ws.assign(size_t(s.floats), std::nanf(""));
    for (int i = 0; i < ML_STAT_FLOATS; ++i) r.ws[size_t(ost + i)] = 0.0f;
    std::copy(t.d.begin(), t.d.end(), r.ws.begin() + od);
    std::copy(t.e.begin(), t.e.end(), r.ws.begin() + oe);
    const ml::blocked::Chunk ch{r, 0, 1, s.floats};
    ml_step_params p = ml::blocked::step_params();
    p.n = n;
    p.i[1] = n;
    p.off[0] = osc;
    p.off[1] = od;
    p.off[2] = oe;
    ch.launch(ml::blocked::kStep_tridiag_prep, 1, 32, ML_RED_FLOATS, p);
    p.off[1] = ow;
    p.off[3] = ost;
    p.k = 2;
    ch.launch(ml::blocked::kStep_tridiag_bisect, 1, 32, 0, p);
    rep.expect(r.ws[size_t(ost + 2)] == float(ML_INFO_NOT_CONVERGED), "limits cap: NOT_CONVERGED");
    p.k = 0;
    r.ws[size_t(ost + 2)] = 0.0f;
    ch.launch(ml::blocked::kStep_tridiag_bisect, 1, 32, 0, p);
    rep.expect(r.ws[size_t(ost + 2)] == 0.0f, "limits default cap: converged");
    // Values past the order, a negative il, a short ldz: refused before any launch.
    const int before = r.launches;
    const auto o = opts(32);
    rep.expect(ml::blocked::tridiag_eig(ch, o, n, 5, n - 4, od, oe, ow, -1, 0, osc, ost) ==
                       ML_INVALID_ARGUMENT &&
                   ml::blocked::tridiag_eig(ch, o, n, -1, 2, od, oe, ow, -1, 0, osc, ost) ==
                       ML_INVALID_ARGUMENT &&
                   ml::blocked::tridiag_eig(ch, o, n, 0, 2, od, oe, ow, 0, n - 1, osc, ost) ==
                       ML_INVALID_ARGUMENT &&
                   r.launches == before,
               "limits invalid arguments");
  }
  return finish("limits", rep, w);
}

int suite_dc() {
  Report rep;
  Worst w;
  std::mt19937_64 rng(27);
  std::normal_distribution<double> g;
  g_dc = true;
  const auto o = opts(32);
  // One leaf, a leaf and a row, partial last merges, several levels; batches of families.
  for (int n : {1, 2, 5, 32, 33, 100, 129}) {
    auto f = families(rng, n);
    f.push_back(ata(rng, n));
    run_case(rep, w, f, 0, n, true, o, "dc");
  }
  // The leaves by one-sided Jacobi in a simdgroup of 32 lanes (dc_leaf_jacobi), the same
  // families, A^T A (a clustered low end), glued Wilkinson (pairs closer than ulp), scaled near
  // underflow and overflow; with a group of 7 lanes the QL form runs instead.
  ml::blocked::Options oj = o;
  oj.dc_leaf_jacobi = 1;
  for (int n : {1, 2, 5, 32, 33, 100, 129}) {
    auto f = families(rng, n);
    f.push_back(ata(rng, n));
    run_case(rep, w, f, 0, n, true, oj, "dc");
  }
  run_case(rep, w, {ata(rng, 294), glued_wilkinson(14, 1e-5f)}, 0, 294, true, oj, "dc");
  {
    std::vector<Tri> f;
    for (float sc : {1e-30f, 1e30f, 3e-38f}) {
      Tri t = graded(70), c = clustered(rng, 70);
      for (auto *x : {&t, &c}) {
        for (auto &v : x->d) v *= sc;
        for (auto &v : x->e) v *= sc;
        x->name += "-scaled";
        f.push_back(*x);
      }
    }
    run_case(rep, w, f, 0, 70, true, oj, "dc");
    ml::blocked::Options oj7 = opts(7);
    oj7.dc_leaf_jacobi = 1;
    run_case(rep, w, f, 0, 70, true, oj7, "dc");
  }
  // The deflation's scan staged in shared memory where a merge's arrays fit (the default here)
  // and in device memory where they do not: a budget that stages the merges of 64 rows only.
  {
    ml::blocked::Options small = o;
    small.shared_floats = 5 * 64 + 2 * ML_RED_FLOATS + 4;
    auto f = families(rng, 300);
    f.push_back(ata(rng, 300));
    run_case(rep, w, f, 0, 300, true, small, "dc");
  }
  // Single matrices (the full merges of a level as one batch of products).
  run_case(rep, w, {random_tri(rng, 300)}, 0, 300, true, o, "dc");
  run_case(rep, w, {ata(rng, 256)}, 0, 256, true, o, "dc");
  run_case(rep, w, {glued_wilkinson(14, 1e-5f)}, 0, 294, true, o, "dc");
  run_case(rep, w, {clustered(rng, 257)}, 0, 257, true, o, "dc");
  run_case(rep, w,
           {glued_wilkinson(12, 1e-4f), glued_wilkinson(12, 1e-7f), repeated(rng, 252)},
           0, 252, true, o, "dc");
  // Scaled near underflow and overflow (1e-30 .. 1e30).
  {
    std::vector<Tri> f;
    for (float sc : {1e-30f, 1e30f, 3e-38f}) {
      Tri t = random_tri(rng, 100), gr = graded(100), c = clustered(rng, 100);
      for (auto *x : {&t, &gr, &c}) {
        for (auto &v : x->d) v *= sc;
        for (auto &v : x->e) v *= sc;
        x->name += "-scaled";
        f.push_back(*x);
      }
    }
    run_case(rep, w, f, 0, 100, true, o, "dc");
  }
  // Golub-Kahan forms: random, graded, rank-deficient (zeros on the bidiagonal's diagonal),
  // the positive half as the SVD takes it and the whole spectrum.
  for (int k : {40, 100}) {
    std::vector<Tri> mats;
    std::vector<float> bd(k), be(k - 1);
    for (auto &x : bd) x = float(g(rng));
    for (auto &x : be) x = float(g(rng));
    mats.push_back(tgk(bd, be, "tgk-random"));
    for (int i = 0; i < k; i += 3) bd[i] = 0.0f;
    mats.push_back(tgk(bd, be, "tgk-rankdef"));
    for (int i = 0; i < k; ++i) bd[i] = float(std::pow(1e-6, double(i) / (k - 1)));
    for (int i = 0; i + 1 < k; ++i) be[i] = 0.5f * bd[i + 1];
    mats.push_back(tgk(bd, be, "tgk-graded"));
    run_case(rep, w, mats, k, k, true, o, "dc");
    run_case(rep, w, mats, 0, 2 * k, true, o, "dc");
  }
  // Subsets selected from the whole solution; small groups.
  {
    const auto f = families(rng, 97);
    run_case(rep, w, f, 0, 1, true, o, "dc");
    run_case(rep, w, f, 96, 1, true, o, "dc");
    run_case(rep, w, f, 20, 50, true, o, "dc");
    run_case(rep, w, f, 0, 97, true, opts(1), "dc");
    run_case(rep, w, f, 0, 97, true, opts(7), "dc");  // leaf columns not a multiple of lanes
    // The secular roots a simdgroup each (every level: at most 64 merges over the batch), in
    // groups of one and of two simdgroups.
    for (int group : {32, 64}) {
      ml::blocked::Options so = opts(group);
      so.dc_secular_simd = 64;
      run_case(rep, w, f, 0, 97, true, so, "dc");
    }
  }
  // Non-finite matrices beside a finite one: the call ends, the finite one is unharmed.
  {
    const int n = 100, ldz = n;
    Tri bad = random_tri(rng, n), good = clustered(rng, n);
    bad.d[50] = std::nanf("");
    bad.e[20] = INFINITY;
    ml::blocked::Slice sl;
    const int64_t ost = sl.add(ML_STAT_FLOATS), od = sl.add(n), oe = sl.add(n), ow = sl.add(n);
    const int64_t oz = sl.add(int64_t(ldz) * n);
    const int64_t osc = sl.add(ml::blocked::tridiag_dc_scratch_floats(n));
    kt::CpuStepRunner r;
    r.ws.assign(size_t(sl.floats * 3), std::nanf(""));  // no stale index may be read
    Tri nan_all = constant(n, std::nanf(""), std::nanf(""), "nan");
    for (int b = 0; b < 3; ++b) {
      const Tri &t = b == 0 ? bad : b == 1 ? good : nan_all;
      for (int i = 0; i < ML_STAT_FLOATS; ++i) r.ws[size_t(b * sl.floats + ost + i)] = 0.0f;
      std::copy(t.d.begin(), t.d.end(), r.ws.begin() + b * sl.floats + od);
      std::copy(t.e.begin(), t.e.end(), r.ws.begin() + b * sl.floats + oe);
    }
    const ml::blocked::Chunk ch{r, 0, 3, sl.floats};
    rep.expect(ml::blocked::tridiag_eig_dc(ch, o, n, 0, n, od, oe, ow, oz, ldz, osc, ost) == ML_OK,
               "dc nonfinite status");
    const float *base = r.ws.data() + sl.floats;
    kt::Mat Z(n, n);
    double dv = 0;
    for (int j = 0; j < n; ++j) {
      dv = std::max(dv, std::fabs(base[ow + j] - ref_value(good, j)));
      for (int i = 0; i < n; ++i) Z(i, j) = base[oz + int64_t(j) * ldz + i];
    }
    const double scale = n * kt::kUlp * tnorm(good);
    rep.ratio(dv / scale, kLimit, "dc nonfinite: the finite matrix's values");
    rep.ratio(kt::orth_defect(Z) / (n * kt::kUlp), kLimit, "dc nonfinite: its orthogonality");
  }
  // Routed (values by bisection, vectors by divide and conquer) from the threshold on, lowered
  // to 200 through its environment variable (read once, first here) to keep the suite short.
  setenv("METAL_LINALG_TRIDIAG_DC_MIN_N", "200", 1);
  rep.expect(ml::blocked::tridiag_dc_min_n() == 200, "dc threshold from the environment");
  g_dc = false;
  run_case(rep, w, {glued_wilkinson(12, 1e-5f), ata(rng, 252)}, 0, 252, true, o, "dc-routed");
  run_case(rep, w, {clustered(rng, 252)}, 30, 100, true, o, "dc-routed");
  g_dc = true;
  // No vectors or a short ldz: refused before any launch.
  {
    kt::CpuStepRunner r;
    r.ws.assign(64, 0.0f);
    const ml::blocked::Chunk ch{r, 0, 1, 64};
    rep.expect(ml::blocked::tridiag_eig_dc(ch, o, 8, 0, 8, 0, 8, 16, -1, 8, 24, 60) ==
                       ML_INVALID_ARGUMENT &&
                   ml::blocked::tridiag_eig_dc(ch, o, 8, 0, 8, 0, 8, 16, 24, 7, 32, 60) ==
                       ML_INVALID_ARGUMENT &&
                   ml::blocked::tridiag_eig_dc(ch, o, 8, 4, 5, 0, 8, 16, 24, 8, 32, 60) ==
                       ML_INVALID_ARGUMENT &&
                   r.launches == 0,
               "dc invalid arguments");
  }
  g_dc = false;
  return finish("dc", rep, w);
}

// Larger orders, by hand (not in CI): test_blocked_tridiag large [n].
int suite_large(int n, int argc_group) {
  Report rep;
  Worst w;
  std::mt19937_64 rng(26);
  std::vector<Tri> f{random_tri(rng, n), clustered(rng, n), graded(n), wilkinson(n | 1)};
  f.back().d.resize(n);
  f.back().e.resize(n - 1);
  const int gs = argc_group;  // largest group size
  run_case(rep, w, f, 0, n, true, opts(gs), "large");
  const int copies = n / 21;
  run_case(rep, w, {glued_wilkinson(copies, 1e-4f), glued_wilkinson(copies, 1e-6f)}, 0,
           21 * copies, true, opts(gs), "large");
  return finish("large", rep, w);
}

}  // namespace

int main(int argc, char **argv) {
  const auto large = [&] {
    return suite_large(argc > 2 ? std::atoi(argv[2]) : 1000, argc > 3 ? std::atoi(argv[3]) : 128);
  };
  return kt::run_suite(
      argc, argv, "test_blocked_tridiag values|vectors|tgk|subset|limits|dc|large [n [group]]",
      {{"values", suite_values}, {"vectors", suite_vectors}, {"tgk", suite_tgk},
       {"subset", suite_subset}, {"limits", suite_limits}, {"dc", suite_dc}, {"large", large}});
}
