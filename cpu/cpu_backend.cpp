#include "cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include <pthread.h>

#include "checks.h"
#include "cpu_kernels.h"
#include "cpu_linsys.h"
#include "errors.h"
#include "lapack.h"
#include "ops.h"
#include "thread_pool.h"

namespace ml::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kEps = FLT_EPSILON;
// Matrices at least this large may use OpenBLAS's own threads (see run()).
constexpr int64_t kLoneThreadedN = 128;

// Floats per matrix of the input and of each output (out0, out1, out2 as in Call).
struct Sizes {
  int64_t in, out0, out1, out2;
};

Sizes sizes_of(const Call &c) {
  int64_t out[3];
  output_floats(c.op, c.m, c.n, c.flags, out, c.nrhs);
  return {c.m * c.n, out[0], out[1], out[2]};
}

// Power-of-two scaling that brings the largest |a| into [1, 2): exact in both
// directions, so tiny and huge matrices keep full relative accuracy.
struct Scale {
  int e = 0;           // a is multiplied by 2^e
  float up = 1.f;      // 2^e when representable as a float
  double up_d = 1.0;   // 2^e for e > 127
  bool wide = false;
  float down = 1.f;    // 2^-e (always representable: -e in [-149, 127])

  explicit Scale(float maxabs) {
    if (maxabs > 0.f) e = -std::ilogb(maxabs);
    wide = e > 127;
    up = wide ? 1.f : std::ldexp(1.f, e);
    up_d = std::ldexp(1.0, e);
    down = std::ldexp(1.f, -e);
  }
  float apply(float x) const { return wide ? static_cast<float>(x * up_d) : x * up; }
};

// Largest |a| over the matrix; false when any entry is NaN or Inf.
bool scan(const float *a, int64_t count, float &maxabs) {
  float mx = 0.f;
  bool finite = true;
  for (int64_t i = 0; i < count; ++i) {
    const float v = std::fabs(a[i]);
    finite &= v <= FLT_MAX;  // false for NaN too
    mx = v > mx ? v : mx;
  }
  maxabs = mx;
  return finite;
}

// The same over the triangle eigh reads (row-major lower: j <= i).
bool scan_triangle(const float *a, int64_t n, bool lower, float &maxabs) {
  float mx = 0.f;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j0 = lower ? 0 : i, j1 = lower ? i + 1 : n;
    for (int64_t j = j0; j < j1; ++j) {
      const float v = std::fabs(a[i * n + j]);
      finite &= v <= FLT_MAX;
      mx = v > mx ? v : mx;
    }
  }
  maxabs = mx;
  return finite;
}

void fill_nan(float *p, int64_t count) {
  if (p) std::fill(p, p + count, kNaN);
}

void scale_values(float *p, int64_t count, float factor) {
  if (factor != 1.f)
    for (int64_t i = 0; i < count; ++i) p[i] *= factor;
}

// ---- LAPACK workspace sizes, queried once per provider and shape ----

struct Lwork {
  int lwork = 1, liwork = 1;
  int rejected = 0;  // a query's info < 0: the argument LAPACK rejected (never cached)
};

using LworkKey = std::tuple<const void *, int32_t, int32_t, int64_t, int64_t>;
std::mutex g_lwork_mutex;
std::map<LworkKey, Lwork> g_lwork;
constexpr size_t kLworkCacheMax = 256;

// Singular values of a tall rows x cols matrix: reduce to R first when that
// is cheaper than bidiagonalising the whole matrix (LAPACK's own crossover).
bool qr_first(int rows, int cols) { return int64_t(rows) * 6 >= int64_t(cols) * 11; }

// A size returned by a workspace query, in 64-bit. Some LAPACKs round the
// float-returned size down; a little slack is cheap.
int64_t from_query(float q) {
  const double v = static_cast<double>(q) * (1.0 + 4 * kEps) + 1;
  return v > 9.0e18 || !(v > 0) ? 0 : static_cast<int64_t>(v);
}

// The workspace handed to LAPACK: the query's (optimal) size when it fits a
// 32-bit int and is at least the documented minimum, else the minimum. A
// 32-bit LAPACK computes the optimal size in int and can wrap it (ssyevd at
// n >= 32767): such an answer falls below the minimum and is not used. The
// minimum itself always fits: larger sizes fail check_lapack_sizes().
int lwork_from(int64_t queried, int64_t minimum) {
  const int64_t v = queried >= minimum && queried <= INT32_MAX ? queried : minimum;
  return static_cast<int>(std::clamp<int64_t>(v, 1, INT32_MAX));
}

Lwork query(const lapack::Provider &lp, const Call &c) {
  const LworkKey key{&lp, c.op, c.flags, c.m, c.n};
  {
    std::lock_guard<std::mutex> lock(g_lwork_mutex);
    auto it = g_lwork.find(key);
    if (it != g_lwork.end()) return it->second;
  }
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n), k = std::min(m, n);
  const int minus1 = -1;
  int info = 0;
  float q = 0.f, dummy[2] = {0.f, 0.f};
  Lwork w;
  int64_t lw = 1;  // the largest queried size, in 64-bit
  const auto note = [&] {
    if (info < 0 && !w.rejected) w.rejected = info;
  };
  switch (c.op) {
    case ML_OP_QR: {
      lp.sgeqrf(&m, &n, dummy, &m, dummy, &q, &minus1, &info);
      note();
      lw = from_query(q);
      if (c.flags != ML_QR_R) {
        const int qcols = c.flags == ML_QR_COMPLETE ? m : k;
        lp.sorgqr(&m, &qcols, &k, dummy, &m, dummy, &q, &minus1, &info);
        note();
        lw = std::max(lw, from_query(q));
      }
      break;
    }
    case ML_OP_EIGVALSH:
      if (lp.ssytrd) {
        const char uplo = 'L';
        lp.ssytrd(&uplo, &n, dummy, &n, dummy, dummy, dummy, &q, &minus1, &info, 1);
        note();
        lw = from_query(q);
        break;
      }
      [[fallthrough]];
    case ML_OP_EIGH: {
      const char jobz = c.op == ML_OP_EIGH ? 'V' : 'N', uplo = 'L';
      int iq = 0;
      lp.ssyevd(&jobz, &uplo, &n, dummy, &n, dummy, &q, &minus1, &iq, &minus1, &info, 1, 1);
      note();
      lw = from_query(q);
      w.liwork = std::max(iq, 3 + 5 * n);  // ssyevd's documented minimum for jobz = 'V'
      break;
    }
    case ML_OP_SVDVALS:
      if (lp.sgebrd) {
        const int rows = std::max(m, n), cols = k;
        if (qr_first(rows, cols)) {
          lp.sgeqrf(&rows, &cols, dummy, &rows, dummy, &q, &minus1, &info);
          note();
          lw = from_query(q);
          lp.sgebrd(&cols, &cols, dummy, &cols, dummy, dummy, dummy, dummy, &q, &minus1, &info);
          note();
        } else {
          lp.sgebrd(&rows, &cols, dummy, &rows, dummy, dummy, dummy, dummy, &q, &minus1, &info);
          note();
        }
        lw = std::max({lw, from_query(q), 4 * int64_t(cols)});  // slasq1 needs 4k
        break;
      }
      [[fallthrough]];
    default: {
      // The row-major m x n matrix is the column-major n x m matrix A^T.
      const char jobz = c.op == ML_OP_SVD ? 'S' : 'N';
      const int ldu = c.op == ML_OP_SVD ? n : 1, ldvt = c.op == ML_OP_SVD ? k : 1;
      int iw[1];
      lp.sgesdd(&jobz, &n, &m, dummy, &n, dummy, dummy, &ldu, dummy, &ldvt, &q, &minus1, iw, &info,
                1);
      note();
      lw = from_query(q);
      w.liwork = 8 * k;
      break;
    }
  }
  w.lwork = lwork_from(lw, lapack_sizes(c.op, c.flags, c.m, c.n).min_lwork);
  if (w.rejected) return w;
  std::lock_guard<std::mutex> lock(g_lwork_mutex);
  // Bounded: many distinct shapes must not grow the cache without end.
  if (g_lwork.size() >= kLworkCacheMax) g_lwork.clear();
  g_lwork[key] = w;
  return w;
}

// ---- per-thread scratch, kept between calls ----

struct Scratch {
  std::vector<float> f;
  std::vector<int> i;
  float *floats(int64_t count) {
    if (static_cast<int64_t>(f.size()) < count) f.resize(static_cast<size_t>(count));
    return f.data();
  }
  int *ints(int64_t count) {
    if (static_cast<int64_t>(i.size()) < count) i.resize(static_cast<size_t>(count));
    return i.data();
  }
};

Scratch &scratch() {
  thread_local Scratch s;
  return s;
}

// Scratch a thread keeps between matrices; larger buffers (matrices of n >~ 500,
// whose O(n^3) work dwarfs an allocation) are freed after each matrix, so many
// distinct large shapes do not pin memory in every worker.
constexpr size_t kScratchKeepBytes = size_t(4) << 20;

void trim_scratch() {
  Scratch &s = scratch();
  if (s.f.capacity() * sizeof(float) > kScratchKeepBytes) std::vector<float>().swap(s.f);
  if (s.i.capacity() * sizeof(int) > kScratchKeepBytes) std::vector<int>().swap(s.i);
}

// ---- one matrix ----

struct Job {
  const Call *c;
  Sizes sz;
  bool kernel;  // the portable kernels, not LAPACK
  bool small;   // among them the register kernel
  const lapack::Provider *lp;
  Lwork lw;
  std::atomic<int> failed{0};  // ml_status of the first failure
  std::atomic<int> lapack_info{0};
  bool lapack_threaded = false;  // LAPACK may use its own threads (few large matrices)
};

// Copies the used triangle of a symmetric matrix into both halves of dst, scaled.
void symmetrize_scaled(const float *a, float *dst, int64_t n, bool lower, const Scale &sc) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      const float v = sc.apply(lower ? a[i * n + j] : a[j * n + i]);
      dst[i * n + j] = v;
      dst[j * n + i] = v;
    }
}

int32_t run_kernel(const Call &c, bool small, const float *a, const Scale &sc, float *o0,
                   float *o1, float *o2) {
  const int64_t m = c.m, n = c.n, k = std::min(m, n);
  Scratch &s = scratch();
  const int64_t in = m * n;
  float *as = s.floats(in + (small ? 0 : cpu_kernels::scratch_floats(c.op, m, n)));
  float *work = as + in;
  if (c.op == ML_OP_EIGH || c.op == ML_OP_EIGVALSH)
    symmetrize_scaled(a, as, n, c.flags == ML_LOWER, sc);
  else
    for (int64_t i = 0; i < in; ++i) as[i] = sc.apply(a[i]);
  const int32_t info = cpu_kernels::run(c.op, m, n, c.flags, as, o0, o1, o2, work, small,
                                         policy::iteration_cap());
  switch (c.op) {
    case ML_OP_QR: scale_values(o1, (c.flags == ML_QR_COMPLETE ? m : k) * n, sc.down); break;
    case ML_OP_EIGH:
    case ML_OP_EIGVALSH: scale_values(o0, n, sc.down); break;
    default: break;  // singular values are unscaled by the caller after the rank check
  }
  return info;
}

int32_t run_qr(Job &job, const float *a, const Scale &sc, float *q, float *r) {
  const Call &c = *job.c;
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n), k = std::min(m, n);
  const bool complete = c.flags == ML_QR_COMPLETE;
  const int cols = complete && m > n ? m : n;
  Scratch &s = scratch();
  float *buf = s.floats(int64_t(m) * cols + k + job.lw.lwork);
  float *tau = buf + int64_t(m) * cols;
  float *work = tau + k;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) buf[i + int64_t(j) * m] = sc.apply(a[int64_t(i) * n + j]);
  int info = 0;
  job.lp->sgeqrf(&m, &n, buf, &m, tau, work, &job.lw.lwork, &info);
  if (info < 0) job.lapack_info.store(info);
  const int rrows = complete ? m : k;
  for (int i = 0; i < rrows; ++i)
    for (int j = 0; j < n; ++j)
      r[int64_t(i) * n + j] = j >= i ? buf[i + int64_t(j) * m] * sc.down : 0.f;
  if (q) {
    const int qcols = complete ? m : k;
    job.lp->sorgqr(&m, &qcols, &k, buf, &m, tau, work, &job.lw.lwork, &info);
    if (info < 0) job.lapack_info.store(info);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < qcols; ++j) q[int64_t(i) * qcols + j] = buf[i + int64_t(j) * m];
  }
  return 0;
}

int32_t run_eigh(Job &job, const float *a, const Scale &sc, float *w, float *v) {
  const Call &c = *job.c;
  const int n = static_cast<int>(c.n);
  Scratch &s = scratch();
  float *buf = s.floats(int64_t(n) * n + job.lw.lwork);
  float *work = buf + int64_t(n) * n;
  int *iwork = s.ints(job.lw.liwork);
  symmetrize_scaled(a, buf, n, c.flags == ML_LOWER, sc);
  const char jobz = v ? 'V' : 'N', uplo = 'L';
  int info = 0;
  job.lp->ssyevd(&jobz, &uplo, &n, buf, &n, w, work, &job.lw.lwork, iwork, &job.lw.liwork, &info,
                 1, 1);
  if (info < 0) job.lapack_info.store(info);
  scale_values(w, n, sc.down);
  if (v)  // LAPACK's column-major eigenvector columns -> row-major columns
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) v[int64_t(i) * n + j] = buf[i + int64_t(j) * n];
  return info > 0 ? ML_INFO_NOT_CONVERGED : 0;
}

int32_t run_svd(Job &job, const float *a, const Scale &sc, float *u, float *s_out, float *vt) {
  const Call &c = *job.c;
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n), k = std::min(m, n);
  Scratch &s = scratch();
  float *buf = s.floats(int64_t(m) * n + job.lw.lwork);
  float *work = buf + int64_t(m) * n;
  int *iwork = s.ints(job.lw.liwork);
  for (int64_t i = 0, e = int64_t(m) * n; i < e; ++i) buf[i] = sc.apply(a[i]);
  // Row-major A (m x n) is column-major A^T (n x m) = U' S VT'. Then A = VT'^T S U'^T,
  // and column-major U' (n x k) is exactly row-major vt, column-major VT' (k x m) is
  // exactly row-major u: LAPACK writes the outputs in place, no transposes.
  const bool vectors = u != nullptr;
  const char jobz = vectors ? 'S' : 'N';
  const int ldu = vectors ? n : 1, ldvt = vectors ? k : 1;
  float dummy[1];
  int info = 0;
  job.lp->sgesdd(&jobz, &n, &m, buf, &n, s_out, vectors ? vt : dummy, &ldu, vectors ? u : dummy,
                 &ldvt, work, &job.lw.lwork, iwork, &info, 1);
  if (info < 0) job.lapack_info.store(info);
  return info > 0 ? ML_INFO_NOT_CONVERGED : 0;
}

// Eigenvalues only: tridiagonalise and run the root-free QL/QR (what ssyevd
// does for jobz = 'N', without its wrapper costs).
int32_t run_eigvalsh(Job &job, const float *a, const Scale &sc, float *w) {
  const Call &c = *job.c;
  const int n = static_cast<int>(c.n);
  Scratch &s = scratch();
  float *buf = s.floats(int64_t(n) * n + 2 * int64_t(n) + job.lw.lwork);
  float *e = buf + int64_t(n) * n, *tau = e + n, *work = tau + n;
  symmetrize_scaled(a, buf, n, c.flags == ML_LOWER, sc);
  const char uplo = 'L';
  int info = 0;
  job.lp->ssytrd(&uplo, &n, buf, &n, w, e, tau, work, &job.lw.lwork, &info, 1);
  if (info < 0) job.lapack_info.store(info);
  job.lp->ssterf(&n, w, e, &info);
  if (info < 0) job.lapack_info.store(info);
  scale_values(w, n, sc.down);
  return info > 0 ? ML_INFO_NOT_CONVERGED : 0;
}

// Singular values only: bidiagonalise (after a QR for tall shapes) and run dqds
// (slasq1), the path sgesdd takes for jobz = 'N', without its wrapper costs.
int32_t run_svdvals(Job &job, const float *a, const Scale &sc, float *s_out) {
  const Call &c = *job.c;
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n);
  const int rows = std::max(m, n), cols = std::min(m, n);
  const bool qr = qr_first(rows, cols);
  Scratch &s = scratch();
  const int64_t tall = int64_t(rows) * cols, square = qr ? int64_t(cols) * cols : 0;
  float *buf = s.floats(tall + square + 3 * int64_t(cols) + job.lw.lwork);
  float *r = buf + tall, *e = r + square, *tauq = e + cols, *taup = tauq + cols;
  float *work = taup + cols;
  // A and A^T share singular values: lay the matrix out tall, column-major.
  if (n >= m)
    for (int64_t i = 0; i < tall; ++i) buf[i] = sc.apply(a[i]);  // row-major A = col-major A^T
  else
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) buf[i + int64_t(j) * m] = sc.apply(a[int64_t(i) * n + j]);
  int info = 0;
  float *bid = buf;
  int brows = rows;
  if (qr) {
    job.lp->sgeqrf(&rows, &cols, buf, &rows, tauq, work, &job.lw.lwork, &info);
    if (info < 0) job.lapack_info.store(info);
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < cols; ++i) r[i + int64_t(j) * cols] = i <= j ? buf[i + int64_t(j) * rows] : 0.f;
    bid = r;
    brows = cols;
  }
  job.lp->sgebrd(&brows, &cols, bid, &brows, s_out, e, tauq, taup, work, &job.lw.lwork, &info);
  if (info < 0) job.lapack_info.store(info);
  job.lp->slasq1(&cols, s_out, e, work, &info);
  if (info < 0) job.lapack_info.store(info);
  return info > 0 ? ML_INFO_NOT_CONVERGED : 0;
}

void one_matrix(Job &job, int64_t i) {
  const Call &c = *job.c;
  // MKL keeps its thread count per calling thread: one matrix per worker, one thread each.
  if (job.lp && job.lp->set_threads_local && !job.lapack_threaded) job.lp->set_threads_local(1);
  if (is_linsys(c.op)) {  // cpu_linsys.cpp: LAPACK's info, no scaling
    try {
      linsys_matrix(*job.lp, c, i, job.lw.lwork, job.lapack_info);
    } catch (...) {
      int expected = 0;
      job.failed.compare_exchange_strong(expected, ML_OUT_OF_MEMORY);
      return;
    }
    linsys_trim_scratch();
    return;
  }
  const Sizes &sz = job.sz;
  const float *a = c.a + i * sz.in;
  float *o0 = c.out0 ? c.out0 + i * sz.out0 : nullptr;
  float *o1 = c.out1 ? c.out1 + i * sz.out1 : nullptr;
  float *o2 = c.out2 ? c.out2 + i * sz.out2 : nullptr;
  const bool symmetric = c.op == ML_OP_EIGH || c.op == ML_OP_EIGVALSH;
  float maxabs = 0.f;
  const bool finite = symmetric ? scan_triangle(a, c.n, c.flags == ML_LOWER, maxabs)
                                : scan(a, sz.in, maxabs);
  int32_t info = 0;
  if (!finite) {
    fill_nan(o0, sz.out0);
    fill_nan(o1, sz.out1);
    fill_nan(o2, sz.out2);
    info = ML_INFO_NONFINITE;
  } else {
    const Scale sc(maxabs);
    try {
      if (job.kernel) {
        info = run_kernel(c, job.small, a, sc, o0, o1, o2);
      } else {
        switch (c.op) {
          case ML_OP_QR: info = run_qr(job, a, sc, o0, o1); break;
          case ML_OP_EIGH: info = run_eigh(job, a, sc, o0, o1); break;
          case ML_OP_EIGVALSH:
            info = job.lp->ssytrd ? run_eigvalsh(job, a, sc, o0) : run_eigh(job, a, sc, o0, nullptr);
            break;
          case ML_OP_SVD: info = run_svd(job, a, sc, o0, o1, o2); break;
          default:
            info = job.lp->sgebrd ? run_svdvals(job, a, sc, o1)
                                  : run_svd(job, a, sc, nullptr, o1, nullptr);
            break;
        }
      }
    } catch (...) {
      // Only scratch growth can throw; workers must not let it escape.
      int expected = 0;
      job.failed.compare_exchange_strong(expected, ML_OUT_OF_MEMORY);
      return;
    }
    const int64_t k = std::min(c.m, c.n);
    if (info & ML_INFO_NOT_CONVERGED) {
      // An unconverged result is not an answer: mark the whole matrix, as for NaN input.
      fill_nan(o0, sz.out0);
      fill_nan(o1, sz.out1);
      fill_nan(o2, sz.out2);
    } else if (c.op == ML_OP_QR) {
      for (int64_t d = 0; d < k; ++d)
        if (o1[d * c.n + d] == 0.f) info |= ML_INFO_RANK_DEFICIENT;
    } else if (c.op == ML_OP_SVD || c.op == ML_OP_SVDVALS) {
      // Judged before unscaling, so an underflowing tiny matrix is not flagged.
      if (o1[k - 1] <= static_cast<float>(std::max(c.m, c.n)) * kEps * o1[0])
        info |= ML_INFO_RANK_DEFICIENT;
      scale_values(o1, k, sc.down);
    }
  }
  if (c.info) c.info[i] = info;
  trim_scratch();
}

void task(void *ctx, int64_t i) { one_matrix(*static_cast<Job *>(ctx), i); }

// Floating-point operations of a linear-system batch (LAPACK's counts, leading terms), below
// kSerialFlops of which the call runs on the calling thread alone: waking the pool's threads
// costs 10-50 us (2-core AMD EPYC: 2 LAPACK solves of 32 x 32 took 64 us through the pool, 64
// 8 x 8 solves across the lanes 51 us, against 5-15 us on the calling thread).
constexpr double kSerialFlops = double(1 << 18);

double linsys_flops(const Call &c) {
  const double n = double(c.n), m = double(c.m), r = double(c.nrhs), k = double(std::min(c.m, c.n));
  double one = 0;
  switch (c.op) {
    case ML_OP_CHOLESKY: one = n * n * n / 3; break;
    case ML_OP_LU_FACTOR: one = m * n * k - (m + n) * k * k / 2 + k * k * k / 3; break;
    case ML_OP_SOLVE: one = 2 * n * n * n / 3 + 2 * n * n * r; break;
    case ML_OP_INV: one = 2 * n * n * n; break;
    case ML_OP_SOLVE_TRIANGULAR: one = n * n * r; break;
    default: one = n * n * n; break;
  }
  return double(c.batch) * one;
}

// kLanes matrices of a linear-system batch, starting at matrix i * kLanes (cpu_linsys_lanes.cpp).
void lanes_task(void *ctx, int64_t i) {
  Job &job = *static_cast<Job *>(ctx);
  try {
    linsys_lanes(*job.c, i * kLanes);
  } catch (...) {
    int expected = 0;
    job.failed.compare_exchange_strong(expected, ML_OUT_OF_MEMORY);
  }
}

// Batches enter it shared; a call that turns OpenBLAS's threads on (few large
// matrices) enters alone, so no batch worker sees a threaded OpenBLAS, and so
// does fork(). Unlike std::shared_mutex, a waiting exclusive entrant holds back
// new shared ones: a stream of batches cannot put off a fork without end.
class Gate {
 public:
  void enter_shared() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return !exclusive_ && waiting_ == 0; });
    ++shared_;
  }
  void leave_shared() {
    std::lock_guard<std::mutex> lock(m_);
    if (--shared_ == 0) cv_.notify_all();
  }
  void enter_exclusive() {
    std::unique_lock<std::mutex> lock(m_);
    ++waiting_;
    cv_.wait(lock, [&] { return !exclusive_ && shared_ == 0; });
    --waiting_;
    exclusive_ = true;
  }
  void leave_exclusive() {
    std::lock_guard<std::mutex> lock(m_);
    exclusive_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int shared_ = 0, waiting_ = 0;
  bool exclusive_ = false;
};

// Replaced (never freed) in a forked child: the old one may have waiters that
// exist only in the parent.
Gate *g_gate = new Gate;

class GateEntry {
 public:
  GateEntry(Gate &g, bool exclusive) : g_(g), exclusive_(exclusive) {
    exclusive ? g.enter_exclusive() : g.enter_shared();
  }
  ~GateEntry() { exclusive_ ? g_.leave_exclusive() : g_.leave_shared(); }
  GateEntry(const GateEntry &) = delete;
  GateEntry &operator=(const GateEntry &) = delete;

 private:
  Gate &g_;
  bool exclusive_;
};

// ---- fork ----
// A forked child has only the thread that forked: a lock another thread held
// stays locked there for ever, and a threaded OpenBLAS call in flight when
// OpenBLAS's own fork handler stops its workers never returns in the parent.
// So before fork() every batch and LAPACK call in flight finishes (new ones
// wait) and the core's locks are taken; both sides release them after. The
// child's thread pool starts afresh (thread_pool.cpp).

// Handlers registered more than once run more than once: only the outermost acts.
thread_local int t_fork_depth = 0;

void before_fork() {
  if (t_fork_depth++ > 0) return;
  g_gate->enter_exclusive();
  // The order the core nests them in: loader and policy before the warning queue.
  lapack::lock_for_fork();
  policy::lock_for_fork();
  g_lwork_mutex.lock();
  lock_warnings_for_fork();
}

void unlock_after_fork() {
  unlock_warnings_after_fork();
  g_lwork_mutex.unlock();
  policy::unlock_after_fork();
  lapack::unlock_after_fork();
}

void after_fork_in_parent() {
  if (--t_fork_depth > 0) return;
  unlock_after_fork();
  g_gate->leave_exclusive();
}

void after_fork_in_child() {
  if (--t_fork_depth > 0) return;
  unlock_after_fork();
  g_gate = new Gate;
}

// Prepare handlers run last registered first, and OpenBLAS registers its own
// when loaded: ours is registered again once a newly loaded provider is used,
// so it still runs first (before OpenBLAS stops its workers).
void ensure_fork_handlers(const lapack::Provider *lp) {
  static std::atomic<bool> registered{false};
  static std::atomic<const lapack::Provider *> after{nullptr};
  // Loads first: every call passes here, and a write each time would bounce the cache line.
  bool now = !registered.load(std::memory_order_acquire) && !registered.exchange(true);
  if (lp && after.load(std::memory_order_acquire) != lp && after.exchange(lp) != lp) now = true;
  if (now) pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

// The lanes factor kLanes matrices together: a batch smaller than a group leaves lanes idle,
// which LAPACK's one matrix at a time does not pay, so a linear system of order n takes the
// lanes from this batch on (2-core AMD EPYC through the torch package, ms lanes vs LAPACK: at
// n = 32 one matrix 0.010-0.022 vs 0.008-0.013, four 0.011-0.023 vs 0.009-0.039; at 64 four
// 0.017-0.125 vs 0.011-0.101, eight 0.012-0.127 vs 0.014-0.172; at 96 twelve 0.040-0.462 vs
// 0.027-0.421, sixteen 0.029-0.452 vs 0.034-0.563, solve, inv and lu_factor ahead).
int64_t lanes_min_batch(int64_t n) { return n <= 16 ? 1 : n <= 32 ? 4 : n <= 64 ? 8 : 16; }

// The policy's routing of an m x n call: the portable kernels (else LAPACK), and among them the
// register kernel where it fits.
bool kernel_route(int32_t op, int64_t m, int64_t n, int64_t batch, const policy::Resolved &pol) {
  const int64_t big = std::max(m, n);
  if (big > policy::cpu_kernel_max_n(op, pol)) return false;
  return !is_linsys(op) || batch >= lanes_min_batch(big);
}
bool small_route(int32_t op, int64_t m, int64_t n, const policy::Resolved &pol) {
  return std::max(m, n) <= pol.value[policy::kCpuSmallMaxN] && cpu_kernels::small_fits(op, m, n);
}

}  // namespace

const char *backend_name(int32_t op, int64_t m, int64_t n, int64_t batch,
                         const policy::Resolved &pol) {
  if (!kernel_route(op, m, n, batch, pol)) return "cpu:lapack";
  if (is_linsys(op)) return "cpu:kernel:linsys_lanes";
  // Named after the core/kernels header each op's portable kernel comes from.
  static thread_local std::string out;
  out = std::string("cpu:kernel:") + cpu_kernels::name(op, small_route(op, m, n, pol));
  return out.c_str();
}

ml_status run(const Call &c, const policy::Resolved &pol, const char *where) {
  Job job;
  job.c = &c;
  job.sz = sizes_of(c);
  job.kernel = kernel_route(c.op, c.m, c.n, c.batch, pol);
  job.small = job.kernel && small_route(c.op, c.m, c.n, pol);
  job.lp = nullptr;
  if (!job.kernel) {
    job.lp = lapack::get(where);
    if (!job.lp) return ML_RUNTIME_ERROR;
  }
  ensure_fork_handlers(job.lp);
  // A linear-system call of less work than waking the pool's threads costs runs on the calling
  // thread, across the lanes or through LAPACK.
  const bool serial = is_linsys(c.op) && linsys_flops(c) < kSerialFlops;
  if (is_linsys(c.op) && job.kernel) {
    try {
      GateEntry entry(*g_gate, false);
      const int64_t groups = (c.batch + kLanes - 1) / kLanes;
      if (serial) {
        for (int64_t i = 0; i < groups; ++i) lanes_task(&job, i);
      } else {
        parallel_for(groups, lanes_task, &job);
      }
    } catch (const std::system_error &e) {
      return fail(ML_RUNTIME_ERROR, where, "cannot start worker threads: %s", e.what());
    }
    if (const int st = job.failed.load())
      return fail(static_cast<ml_status>(st), where, "out of memory for the CPU workspace");
    return ML_OK;
  }
  if (is_linsys(c.op)) {
    if (const char *missing = linsys_missing(*job.lp, c.op))
      return fail(ML_RUNTIME_ERROR, where, "the LAPACK provider %s lacks %s, which %s needs",
                  job.lp->description, missing, op_name(c.op));
    job.lw.lwork = linsys_lwork(*job.lp, c, &job.lw.rejected);
  } else if (!job.kernel) {
    job.lw = query(*job.lp, c);
  }
  if (job.lw.rejected)
    return fail(ML_RUNTIME_ERROR, where,
                "LAPACK rejected argument %d of a workspace query (%s, %lld x %lld)",
                -job.lw.rejected, op_name(c.op), static_cast<long long>(c.m),
                static_cast<long long>(c.n));
  try {
    // Few large matrices (a lone one on a small machine) would leave cores idle
    // with one matrix per worker: run them in turn on OpenBLAS's threads instead.
    const int32_t threads = cpu_threads();
    const bool few_large = !job.kernel && std::max(c.m, c.n) >= kLoneThreadedN && threads > 1 &&
                           c.batch * 2 <= threads;
    if (few_large && job.lp->set_threads_local) {
      job.lapack_threaded = true;
      GateEntry entry(*g_gate, false);  // MKL's setting is per thread: batches may run beside it
      const int previous = job.lp->set_threads_local(threads);
      for (int64_t i = 0; i < c.batch; ++i) one_matrix(job, i);
      job.lp->set_threads_local(previous);
    } else if (few_large && job.lp->set_threads && job.lp->threads_at_load > 1) {
      // Never more threads than OpenBLAS had at load (its own setting, e.g.
      // OPENBLAS_NUM_THREADS): more would make it start threads inside the call, and when
      // pthread_create fails there (a capped address space) OpenBLAS raises SIGINT.
      job.lapack_threaded = true;
      GateEntry entry(*g_gate, true);
      job.lp->set_threads(std::min<int32_t>(threads, job.lp->threads_at_load));
      for (int64_t i = 0; i < c.batch; ++i) one_matrix(job, i);
      job.lp->set_threads(1);
    } else if (serial) {
      GateEntry entry(*g_gate, false);
      for (int64_t i = 0; i < c.batch; ++i) one_matrix(job, i);
    } else {
      GateEntry entry(*g_gate, false);
      parallel_for(c.batch, task, &job);
    }
  } catch (const std::system_error &e) {
    return fail(ML_RUNTIME_ERROR, where, "cannot start worker threads: %s", e.what());
  }
  if (const int st = job.failed.load())
    return fail(static_cast<ml_status>(st), where, "out of memory for the CPU workspace");
  if (const int li = job.lapack_info.load())
    return fail(ML_RUNTIME_ERROR, where, "LAPACK rejected argument %d (%s, %lld x %lld)", -li,
                op_name(c.op), static_cast<long long>(c.m), static_cast<long long>(c.n));
  return ML_OK;
}

}  // namespace ml::cpu
