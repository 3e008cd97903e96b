#include "lapack.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "errors.h"

namespace ml::lapack {
namespace {

std::atomic<const Provider *> g_provider{nullptr};
std::mutex g_load_mutex;
bool g_default_tried = false;
std::string g_default_failure;
// Providers replaced by ml_set_lapack: never freed (calls in flight on other threads may
// still use them) and kept reachable from this list, so leak checkers see them as held.
struct Retired {
  const Provider *provider;
  Retired *next;
};
Retired *g_retired = nullptr;

void *find(void *handle, const std::string &name) { return dlsym(handle, name.c_str()); }

// True when sgeqrf takes 64-bit integers (an ILP64 build, e.g. symbols ending in
// _64_): every argument of this workspace query reads the same at either width,
// but only an ILP64 library writes the upper half of the 8 bytes given as info.
// `info_out` gets the query's info (not 0: the query itself failed).
bool is_ilp64(sgeqrf_fn sgeqrf, int &info_out) {
  int one[2] = {1, 0}, query[2] = {-1, -1}, info[2] = {-7, -7};
  float a[2] = {1.f, 0.f}, tau[2] = {0.f, 0.f}, work[2] = {0.f, 0.f};
  sgeqrf(one, one, a, one, tau, work, query, info);
  info_out = info[0];
  return info[1] != -7;
}

// Opens `path` and resolves every entry point; on failure fills `why`.
const Provider *load(const char *path, const char *prefix, const char *suffix, std::string &why) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    why = std::string("cannot load LAPACK '") + path + "': " + (err ? err : "unknown error");
    return nullptr;
  }
  const std::string pre = prefix ? prefix : "";
  const std::string suf = suffix ? suffix : "";
  auto *p = new Provider{};
  p->sgeqrf = reinterpret_cast<sgeqrf_fn>(find(handle, pre + "sgeqrf" + suf));
  p->sorgqr = reinterpret_cast<sorgqr_fn>(find(handle, pre + "sorgqr" + suf));
  p->ssyevd = reinterpret_cast<ssyevd_fn>(find(handle, pre + "ssyevd" + suf));
  p->sgesdd = reinterpret_cast<sgesdd_fn>(find(handle, pre + "sgesdd" + suf));
  if (!p->sgeqrf || !p->sorgqr || !p->ssyevd || !p->sgesdd) {
    why = std::string("'") + path + "' lacks " + pre + "sgeqrf" + suf + " / sorgqr / ssyevd / sgesdd";
    delete p;
    dlclose(handle);
    return nullptr;
  }
  int probe_info = 0;
  if (is_ilp64(p->sgeqrf, probe_info) || probe_info != 0) {
    why = probe_info != 0
              ? std::string("'") + path + "': the workspace query of " + pre + "sgeqrf" + suf +
                    " failed (info " + std::to_string(probe_info) + ")"
              : std::string("'") + path + "' is an ILP64 LAPACK (64-bit integers, as symbols "
                    "ending in _64_ have): metal-linalg needs one with 32-bit integers (LP64), "
                    "such as scipy-openblas32";
    // Left mapped: a BLAS that ran may have started threads that unloading would pull
    // the code from under.
    delete p;
    return nullptr;
  }
  p->sgebrd = reinterpret_cast<sgebrd_fn>(find(handle, pre + "sgebrd" + suf));
  p->slasq1 = reinterpret_cast<slasq1_fn>(find(handle, pre + "slasq1" + suf));
  p->ssytrd = reinterpret_cast<ssytrd_fn>(find(handle, pre + "ssytrd" + suf));
  p->ssterf = reinterpret_cast<ssterf_fn>(find(handle, pre + "ssterf" + suf));
  p->spotrf = reinterpret_cast<spotrf_fn>(find(handle, pre + "spotrf" + suf));
  p->sgetrf = reinterpret_cast<sgetrf_fn>(find(handle, pre + "sgetrf" + suf));
  p->sgetrs = reinterpret_cast<sgetrs_fn>(find(handle, pre + "sgetrs" + suf));
  p->sgetri = reinterpret_cast<sgetri_fn>(find(handle, pre + "sgetri" + suf));
  p->strsm = reinterpret_cast<strsm_fn>(find(handle, pre + "strsm" + suf));
  if (!p->sgebrd || !p->slasq1) p->sgebrd = nullptr, p->slasq1 = nullptr;
  if (!p->ssytrd || !p->ssterf) p->ssytrd = nullptr, p->ssterf = nullptr;
  p->set_threads = reinterpret_cast<void (*)(int)>(find(handle, pre + "openblas_set_num_threads"));
  p->get_threads = reinterpret_cast<int (*)()>(find(handle, pre + "openblas_get_num_threads"));
  if (!p->set_threads || !p->get_threads) p->set_threads = nullptr, p->get_threads = nullptr;
  // MKL (e.g. the copy inside libtorch_cpu): the by-value C entry point (the
  // lower-case names are Fortran ones taking a pointer).
  p->set_threads_local =
      reinterpret_cast<int (*)(int)>(find(handle, "MKL_Set_Num_Threads_Local"));
  // Batches run one matrix per worker thread, so OpenBLAS's own threads stay off
  // except around a lone large matrix (cpu_backend.cpp), and then at most as many as it had.
  if (p->set_threads) {
    p->threads_at_load = p->get_threads();
    p->set_threads(1);
  }
  std::snprintf(p->description, sizeof p->description, "%s (symbols %ssgeqrf%s)", path, pre.c_str(),
                suf.c_str());
  return p;
}

// Candidates tried when no provider was set: the one found at build time, then
// METAL_LINALG_LAPACK, then the platform's usual LAPACK.
const Provider *load_default(std::string &why) {
  struct Candidate {
    std::string path, prefix, suffix;
  };
  Candidate candidates[4];
  int count = 0;
#if defined(ML_DEFAULT_LAPACK)
  candidates[count++] = {ML_DEFAULT_LAPACK, ML_DEFAULT_LAPACK_PREFIX, ML_DEFAULT_LAPACK_SUFFIX};
#endif
  if (const char *env = std::getenv("METAL_LINALG_LAPACK"); env && *env) {
    const char *pre = std::getenv("METAL_LINALG_LAPACK_PREFIX");
    const char *suf = std::getenv("METAL_LINALG_LAPACK_SUFFIX");
    // The scipy-openblas wheels prefix their symbols; plain LAPACKs do not.
    const bool scipy = std::string(env).find("scipy_openblas") != std::string::npos;
    candidates[count++] = {env, pre ? pre : (scipy ? "scipy_" : ""), suf ? suf : "_"};
  }
#if defined(__APPLE__)
  candidates[count++] = {"/System/Library/Frameworks/Accelerate.framework/Accelerate", "", "_"};
#else
  candidates[count++] = {"libopenblas.so.0", "", "_"};
  candidates[count++] = {"liblapack.so.3", "", "_"};
#endif
  std::string reasons;
  for (int i = 0; i < count; ++i) {
    std::string one;
    if (const Provider *p = load(candidates[i].path.c_str(), candidates[i].prefix.c_str(),
                                 candidates[i].suffix.c_str(), one))
      return p;
    reasons += (reasons.empty() ? "" : "; ") + one;
  }
  why = "no LAPACK provider found (call ml_set_lapack or set METAL_LINALG_LAPACK): " + reasons;
  return nullptr;
}

}  // namespace

const Provider *get(const char *where) {
  if (const Provider *p = g_provider.load(std::memory_order_acquire)) return p;
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (const Provider *p = g_provider.load(std::memory_order_acquire)) return p;
  if (!g_default_tried) {
    g_default_tried = true;
    if (const Provider *p = load_default(g_default_failure)) {
      g_provider.store(p, std::memory_order_release);
      return p;
    }
  }
  fail(ML_RUNTIME_ERROR, where, "%s", g_default_failure.c_str());
  return nullptr;
}

ml_status set(const char *path, const char *prefix, const char *suffix) {
  std::string why;
  const Provider *p = load(path, prefix, suffix, why);
  if (!p) return fail(ML_INVALID_ARGUMENT, "set_lapack", "%s", why.c_str());
  std::lock_guard<std::mutex> lock(g_load_mutex);
  // The previous provider stays mapped: calls in flight on other threads may use it.
  if (const Provider *old = g_provider.load(std::memory_order_acquire))
    g_retired = new Retired{old, g_retired};
  g_provider.store(p, std::memory_order_release);
  g_default_tried = true;
  return ML_OK;
}

const char *info() {
  const Provider *p = g_provider.load(std::memory_order_acquire);
  if (!p) {
    std::lock_guard<std::mutex> lock(g_load_mutex);
    if (!g_default_tried) {
      g_default_tried = true;
      if ((p = load_default(g_default_failure))) g_provider.store(p, std::memory_order_release);
    }
  }
  return p ? p->description : "none";
}

void lock_for_fork() { g_load_mutex.lock(); }

void unlock_after_fork() { g_load_mutex.unlock(); }

}  // namespace ml::lapack
