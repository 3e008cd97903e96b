// See cublas_gemm.h. cuBLAS's handle type and enums are declared here (their values are the
// library's ABI), so no cuBLAS header is needed to build.
#include "cublas_gemm.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace ml::cuda::cublas {
namespace {

using Handle = void *;
constexpr int kOpN = 0, kOpT = 1, kDefaultMath = 0;
constexpr int kMaxDevices = 64;

struct Api {
  void *lib = nullptr;
  std::string what;
  int (*create)(Handle *) = nullptr;
  int (*set_stream)(Handle, void *) = nullptr;
  int (*set_workspace)(Handle, void *, size_t) = nullptr;
  int (*set_math_mode)(Handle, int) = nullptr;
  int (*sgemm)(Handle, int, int, int, int, int, const float *, const float *, int, long long,
               const float *, int, long long, const float *, float *, int, long long,
               int) = nullptr;
};

template <typename F>
bool bind(void *lib, const char *name, F *f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

const Api &api() {
  static const Api a = [] {
    Api x;
    std::string tried;
    const auto try_open = [&x, &tried](const std::string &path) {
      if (x.lib || path.empty()) return;
      x.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (x.lib) x.what = path;
      else tried += (tried.empty() ? "" : ", ") + path;
    };
    if (const char *p = std::getenv("METAL_LINALG_CUBLAS")) try_open(p);
    try_open("libcublas.so.13");
    try_open("libcublas.so.12");
    const char *roots[] = {std::getenv("CUDA_HOME"), std::getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (const char *root : roots) {
      if (!root) continue;
      try_open(std::string(root) + "/lib64/libcublas.so.13");
      try_open(std::string(root) + "/lib64/libcublas.so.12");
    }
    if (!x.lib) {
      x.what = "libcublas not found (tried " + tried + ")";
      return x;
    }
    const bool ok = bind(x.lib, "cublasCreate_v2", &x.create) &&
                    bind(x.lib, "cublasSetStream_v2", &x.set_stream) &&
                    bind(x.lib, "cublasSetWorkspace_v2", &x.set_workspace) &&
                    bind(x.lib, "cublasSetMathMode", &x.set_math_mode) &&
                    bind(x.lib, "cublasSgemmStridedBatched", &x.sgemm);
    if (!ok) {
      x.what += ": missing symbols";
      x.sgemm = nullptr;
    }
    return x;
  }();
  return a;
}

// One handle per device, created on first use (with the device current); the stream is set
// per call, under a lock, so concurrent callers never race on a handle.
struct DeviceHandle {
  std::once_flag once;
  std::mutex lock;
  Handle h = nullptr;
  int status = 0;
};

}  // namespace

bool available() { return api().sgemm != nullptr; }

const char *describe() { return api().what.c_str(); }

int sgemm_strided_batched(int dev, void *stream, bool trans_a, bool trans_b, int m, int n,
                          int k, float alpha, const float *a, int lda, int64_t stride_a,
                          const float *b, int ldb, int64_t stride_b, float beta, float *c,
                          int ldc, int64_t stride_c, int batch, void *work, size_t work_bytes,
                          const char **what) {
  const Api &x = api();
  *what = "cublas";
  if (!x.sgemm) return -1;
  static DeviceHandle handles[kMaxDevices];
  if (dev < 0 || dev >= kMaxDevices) return -1;
  DeviceHandle &d = handles[dev];
  std::call_once(d.once, [&d, &x] {
    d.status = x.create(&d.h);
    if (d.status == 0) d.status = x.set_math_mode(d.h, kDefaultMath);
  });
  if (d.status != 0) {
    *what = "cublasCreate";
    return d.status;
  }
  std::lock_guard<std::mutex> g(d.lock);
  int st = x.set_stream(d.h, stream);
  // cublasSetStream resets the workspace to cuBLAS's default pool: the caller's slice instead.
  if (st == 0) st = x.set_workspace(d.h, work_bytes ? work : nullptr, work ? work_bytes : 0);
  if (st != 0) {
    *what = "cublasSetStream";
    return st;
  }
  *what = "cublasSgemmStridedBatched";
  return x.sgemm(d.h, trans_a ? kOpT : kOpN, trans_b ? kOpT : kOpN, m, n, k, &alpha, a, lda,
                 stride_a, b, ldb, stride_b, &beta, c, ldc, stride_c, batch);
}

}  // namespace ml::cuda::cublas
