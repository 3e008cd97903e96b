// The CUDA backend (core/src/backend_gpu.h): routing to the kernels of cuda/<kernel>.cu, launches
// on the caller's stream, and the synchronous path for host buffers.
// One block runs one matrix; its scratch is dynamic shared memory, raised above 48 KB once per
// kernel and device. No kernel needs global workspace, so device calls never allocate.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "backend_gpu.h"
#include "errors.h"
#include "kernel_desc.h"

namespace ml::cuda {

#if defined(ML_CUDA_HAVE_QR_HOUSEHOLDER_SMALL)
extern const KernelDesc kQrHouseholderSmall;
#endif
#if defined(ML_CUDA_HAVE_QR_HOUSEHOLDER)
extern const KernelDesc kQrHouseholder;
#endif
#if defined(ML_CUDA_HAVE_EIGH_JACOBI_SMALL)
extern const KernelDesc kEighJacobiSmall;
extern const KernelDesc kEigvalshJacobiSmall;
#endif
#if defined(ML_CUDA_HAVE_EIGH_TRIDIAG_QL)
extern const KernelDesc kEighTridiagQl;
extern const KernelDesc kEigvalshTridiagQl;
#endif
#if defined(ML_CUDA_HAVE_SVD_JACOBI_SMALL)
extern const KernelDesc kSvdJacobiSmall;
extern const KernelDesc kSvdvalsJacobiSmall;
#endif
#if defined(ML_CUDA_HAVE_SVD_BIDIAG_QR)
extern const KernelDesc kSvdBidiagQr;
extern const KernelDesc kSvdvalsBidiagQr;
#endif

namespace {

// Candidates per op, in order of preference; the first whose window covers the shape wins.
const KernelDesc *const kKernels[] = {
#if defined(ML_CUDA_HAVE_QR_HOUSEHOLDER_SMALL)
    &kQrHouseholderSmall,
#endif
#if defined(ML_CUDA_HAVE_QR_HOUSEHOLDER)
    &kQrHouseholder,
#endif
#if defined(ML_CUDA_HAVE_EIGH_JACOBI_SMALL)
    &kEighJacobiSmall,
    &kEigvalshJacobiSmall,
#endif
#if defined(ML_CUDA_HAVE_EIGH_TRIDIAG_QL)
    &kEighTridiagQl,
    &kEigvalshTridiagQl,
#endif
#if defined(ML_CUDA_HAVE_SVD_JACOBI_SMALL)
    &kSvdJacobiSmall,
    &kSvdvalsJacobiSmall,
#endif
#if defined(ML_CUDA_HAVE_SVD_BIDIAG_QR)
    &kSvdBidiagQr,
    &kSvdvalsBidiagQr,
#endif
    nullptr,
};
constexpr int kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]) - 1;
constexpr int kMaxDevices = 64;

const char *kWhere = "cuda";

// ---- devices ----

struct DeviceInfo {
  bool ok = false;
  int budget_floats = 0;  // dynamic shared floats one block may use
  int units = 0;          // multiprocessors
  std::string name;
};

int device_count() {
  static const int count = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      cudaGetLastError();  // a missing driver is not an error of anyone's later call
      return 0;
    }
    return std::min(c, kMaxDevices);
  }();
  return count;
}

const DeviceInfo &device_info(int dev) {
  static DeviceInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  std::call_once(once[dev], [dev] {
    DeviceInfo &d = infos[dev];
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    d.name = prop.name;
    // The fatbinary holds SASS for the listed real architectures and PTX for the newest one:
    // anything at or above the oldest of them can run it.
    d.ok = prop.major * 10 + prop.minor >= ML_CUDA_MIN_ARCH;
    d.budget_floats = static_cast<int>(prop.sharedMemPerBlockOptin / sizeof(float));
    d.units = prop.multiProcessorCount;
  });
  return infos[dev];
}

// Restores the caller's current device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != dev) {
      if (cudaSetDevice(dev) == cudaSuccess) switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard &) = delete;
  DeviceGuard &operator=(const DeviceGuard &) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

// ---- kernels ----

bool shape_in_range(int64_t m, int64_t n, int budget) {
  // Every kernel keeps at least the matrix in shared memory: bound the sizes before calling the
  // kernels' int-typed helpers, which could overflow on absurd shapes.
  return m >= 1 && n >= 1 && m <= budget && n <= budget && m * n <= 4LL * budget;
}

int32_t kernel_flags(int32_t op, int64_t m, int64_t n, int32_t flags) {
  // Square complete QR and square full_matrices SVD are the reduced/thin problems.
  if (op == ML_OP_QR && flags == ML_QR_COMPLETE && m == n) return ML_QR_REDUCED;
  if (op == ML_OP_SVD) return 0;
  return flags;
}

const KernelDesc *pick(int32_t op, int64_t m, int64_t n, int32_t flags, int budget,
                       int64_t small_max_n) {
  if (op == ML_OP_SVD && flags != 0 && m != n) return nullptr;  // full U/V of non-square
  const int32_t kf = kernel_flags(op, m, n, flags);
  for (int i = 0; i < kNumKernels; ++i) {
    const KernelDesc *k = kKernels[i];
    if (k->op != op) continue;
    if (!k->entry && std::max(m, n) > small_max_n) continue;  // register kernels: by policy
    if (m == 0 || n == 0) return k;  // nothing to compute; run_* only writes info
    if (shape_in_range(m, n, budget) &&
        k->fits(static_cast<int>(m), static_cast<int>(n), kf, budget))
      return k;
  }
  return nullptr;
}

struct KernelState {
  std::once_flag once;
  cudaError_t err = cudaSuccess;
  int max_threads = 0;
};

// Raises the kernel's dynamic shared-memory limit to the device's budget, once per device.
// Done outside any stream capture in practice: the first call of each kernel prepares it.
const KernelState &prepare(int k, int dev, bool lane) {
  static KernelState states[kMaxDevices][kNumKernels > 0 ? kNumKernels : 1][2];
  KernelState &s = states[dev][k][lane ? 1 : 0];
  std::call_once(s.once, [&s, k, dev, lane] {
    const void *fn =
        reinterpret_cast<const void *>(lane ? kKernels[k]->lane_entry : kKernels[k]->entry);
    s.err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 device_info(dev).budget_floats * static_cast<int>(sizeof(float)));
    cudaFuncAttributes attr;
    if (s.err == cudaSuccess) s.err = cudaFuncGetAttributes(&attr, fn);
    if (s.err == cudaSuccess) s.max_threads = attr.maxThreadsPerBlock;
    if (s.err != cudaSuccess) cudaGetLastError();
  });
  return s;
}

int index_of(const KernelDesc *k) {
  for (int i = 0; i < kNumKernels; ++i)
    if (kKernels[i] == k) return i;
  return -1;
}

int env_int(const char *name) {
  const char *env = std::getenv(name);
  return env ? std::atoi(env) : 0;
}

// Threads per group: the kernel's suggestion, METAL_LINALG_CUDA_GROUP_SIZE for experiments,
// capped by what the compiled kernel allows (registers).
int threads_for(const KernelDesc *k, int m, int n, int64_t batch, int units, int max_threads) {
  static const int forced = env_int("METAL_LINALG_CUDA_GROUP_SIZE");
  int t = forced > 0                ? forced
          : k->group_size_batch ? k->group_size_batch(m, n, batch, units)
                                : k->group_size(m, n);
  t = std::max(1, std::min(t, std::min(max_threads, 1024)));
  return t;
}

// One-warp groups per block (blockDim.y), METAL_LINALG_CUDA_GROUPS_PER_BLOCK. A block of one
// warp leaves SM warp slots empty (at most 32 blocks reside per SM), but on the H200 two to eight
// groups per block measured no faster for n <= 32 (benchmarks/tune_cuda_groups.py), so the
// default stays one; the tests run both.
// Groups of fewer than 32 lanes (a power of two) always share warps: 32 / threads groups per
// warp, times the forced count.
int groups_per_block(int threads, int scratch_floats, int budget_floats, int max_threads) {
  static const int forced = env_int("METAL_LINALG_CUDA_GROUPS_PER_BLOCK");
  const bool sub_warp = threads < 32 && (32 % threads) == 0 && threads > 1;
  if (!sub_warp && (threads != 32 || forced <= 1)) return 1;
  const int stride = (scratch_floats + 31) / 32 * 32;
  int g = sub_warp ? (32 / threads) * std::max(forced, 1) : forced;
  const int step = sub_warp ? 32 / threads : 1;  // whole warps only
  while (g > step && (g * threads > max_threads || int64_t{g} * stride > budget_floats)) g -= step;
  while (g > 1 && int64_t{g} * stride > budget_floats) --g;  // (then a warp is partly idle)
  return g;
}

// Matrices per block of a lane-per-matrix launch (one warp by default; at most 32 blocks reside
// per SM, so shared memory, not this, limits residency for all but the tiniest matrices),
// METAL_LINALG_CUDA_LANE_MATRICES for experiments; capped by the batch, the kernel's thread
// limit and the shared memory budget. stride: the odd slice size of one matrix.
int lane_matrices(int64_t batch, int stride, int budget_floats, int max_threads) {
  static const int forced = env_int("METAL_LINALG_CUDA_LANE_MATRICES");
  int64_t g = forced > 0 ? forced : 32;
  g = std::min<int64_t>({g, batch, max_threads, budget_floats / stride});
  return static_cast<int>(std::max<int64_t>(g, 1));
}

ml_status cuda_fail(ml_status st, const char *what, cudaError_t err) {
  return fail(st, kWhere, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

// Whether c runs one thread per matrix: always for register kernels, by policy for the others.
bool runs_lane(const KernelDesc *k, const Call &c) {
  if (!k->entry) return true;
  return k->lane_entry && std::max(c.m, c.n) <= c.lane_max_n && c.batch >= c.lane_min_batch;
}

// Enqueues the kernel for c (device pointers) on stream; the current device is already set.
ml_status launch(const KernelDesc *k, int dev, const Call &c, cudaStream_t stream) {
  if (c.m == 0 || c.n == 0) {
    if (!c.info) return ML_OK;
    const cudaError_t err = cudaMemsetAsync(c.info, 0, c.batch * sizeof(int32_t), stream);
    return err == cudaSuccess ? ML_OK : cuda_fail(ML_RUNTIME_ERROR, "cudaMemsetAsync", err);
  }
  const bool lane = runs_lane(k, c);
  const KernelState &st = prepare(index_of(k), dev, lane);
  if (st.err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, k->name, st.err);
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n);
  const int budget = device_info(dev).budget_floats;
  ml_params p;
  std::memset(&p, 0, sizeof p);
  p.m = m;
  p.n = n;
  p.flags = kernel_flags(c.op, c.m, c.n, c.flags);
  // A lane-per-matrix block shares the budget among its matrices: offer each a warp's share.
  if (k->choose_flags) p.flags = k->choose_flags(m, n, p.flags, lane ? budget / 32 : budget);
  p.max_iter = 0;
  p.batch = c.batch;
  const int scratch = k->scratch_floats(m, n, p.flags);
  int threads, groups;
  size_t smem;
  if (lane) {
    // The kernel derives each matrix's slice from the launch's dynamic shared-memory size:
    // an odd slice keeps the threads of a warp, at equal offsets in their slices, on distinct
    // banks.
    const int stride = scratch | 1;
    threads = 1;
    groups = lane_matrices(c.batch, stride, budget, st.max_threads);
    smem = static_cast<size_t>(groups) * stride * sizeof(float);
  } else {
    threads = threads_for(k, m, n, c.batch, device_info(dev).units, st.max_threads);
    groups = groups_per_block(threads, scratch, budget, st.max_threads);
    // Each group's slice starts on a 128-byte boundary; the kernel derives the slice size from
    // the launch's dynamic shared-memory size.
    smem = static_cast<size_t>(groups > 1 ? groups * ((scratch + 31) / 32 * 32) : scratch) *
           sizeof(float);
  }
  const float *a = c.a;
  float *o0 = c.out0, *o1 = c.out1, *o2 = c.out2;
  int *info = c.info;
  void *args[] = {&p, &a, &o0, &o1, &o2, &info};
  constexpr int64_t kMaxGrid = int64_t{1} << 30;  // gridDim.x allows 2^31 - 1
  const int64_t per_launch = kMaxGrid * groups;
  for (int64_t off = 0; off < c.batch; off += per_launch) {
    p.group_offset = off;
    const int64_t todo = std::min(per_launch, c.batch - off);
    const unsigned blocks = static_cast<unsigned>((todo + groups - 1) / groups);
    const cudaError_t err =
        cudaLaunchKernel(reinterpret_cast<const void *>(lane ? k->lane_entry : k->entry),
                         dim3(blocks),
                         dim3(threads, groups), args, smem, stream);
    if (err != cudaSuccess) return cuda_fail(ML_RUNTIME_ERROR, k->name, err);
  }
  return ML_OK;
}

// Floats of each output per matrix, in the order out0, out1, out2.
void output_sizes(const Call &c, int64_t sz[3]) {
  const int64_t m = c.m, n = c.n, k = std::min(m, n);
  sz[0] = sz[1] = sz[2] = 0;
  switch (c.op) {
    case ML_OP_QR: {
      const bool complete = c.flags == ML_QR_COMPLETE;
      sz[0] = c.flags == ML_QR_R ? 0 : m * (complete ? m : k);
      sz[1] = (complete ? m : k) * n;
      break;
    }
    case ML_OP_EIGH:
      sz[0] = n;
      sz[1] = n * n;
      break;
    case ML_OP_EIGVALSH:
      sz[0] = n;
      break;
    case ML_OP_SVD:
      sz[0] = m * k;
      sz[1] = k;
      sz[2] = k * n;
      break;
    case ML_OP_SVDVALS:
      sz[1] = k;
      break;
    default:
      break;
  }
}

// Device buffer and stream of the host path (device 0), grown on demand and kept.
struct HostPath {
  std::mutex mu;
  void *buf = nullptr;
  size_t bytes = 0;
  cudaStream_t stream = nullptr;
};

HostPath &host_path() {
  static HostPath *h = new HostPath;  // never destroyed: no CUDA calls at process exit
  return *h;
}

}  // namespace

bool available() {
  static const bool ok = device_count() > 0 && device_info(0).ok;
  return ok;
}

const char *device_name() { return available() ? device_info(0).name.c_str() : ""; }

const char *kernel_for(int32_t op, int64_t m, int64_t n, int32_t flags, int64_t small_max_n) {
  if (!available()) return nullptr;
  const KernelDesc *k = pick(op, m, n, flags, device_info(0).budget_floats, small_max_n);
  return k ? k->name : nullptr;
}

const char *launch_name(const Call &c) {
  if (!available()) return nullptr;
  const KernelDesc *k = pick(c.op, c.m, c.n, c.flags, device_info(0).budget_floats, c.small_max_n);
  if (!k) return nullptr;
  static thread_local std::string name;
  name = std::string(k->name) + (k->entry && runs_lane(k, c) ? "/lane" : "");
  return name.c_str();
}

int64_t workspace_bytes(const Call &) { return 0; }

ml_status run_device(const ml_exec &exec, const Call &c) {
  if (exec.device < 0 || exec.device >= device_count() || !device_info(exec.device).ok)
    return fail(ML_INVALID_ARGUMENT, kWhere, "exec->device %d is not a usable CUDA device",
                exec.device);
  const KernelDesc *k =
      pick(c.op, c.m, c.n, c.flags, device_info(exec.device).budget_floats, c.small_max_n);
  if (!k)
    return fail(ML_INVALID_ARGUMENT, kWhere, "no CUDA kernel covers op %d of %lld x %lld", c.op,
                static_cast<long long>(c.m), static_cast<long long>(c.n));
  DeviceGuard guard(exec.device);
  return launch(k, exec.device, c, static_cast<cudaStream_t>(exec.stream));
}

ml_status run_host(const Call &c) {
  const KernelDesc *k =
      available() ? pick(c.op, c.m, c.n, c.flags, device_info(0).budget_floats, c.small_max_n)
                  : nullptr;
  if (!k)
    return fail(ML_INVALID_ARGUMENT, kWhere, "no CUDA kernel covers op %d of %lld x %lld", c.op,
                static_cast<long long>(c.m), static_cast<long long>(c.n));
  if (c.m == 0 || c.n == 0) {
    if (c.info) std::memset(c.info, 0, c.batch * sizeof(int32_t));
    return ML_OK;
  }
  DeviceGuard guard(0);
  HostPath &h = host_path();
  std::lock_guard<std::mutex> lock(h.mu);
  cudaError_t err = cudaSuccess;
  if (!h.stream && (err = cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking)))
    return cuda_fail(ML_RUNTIME_ERROR, "cudaStreamCreate", err);

  int64_t sz[3];
  output_sizes(c, sz);
  const int64_t in_f = c.m * c.n;
  const int64_t per = (in_f + sz[0] + sz[1] + sz[2] + 1) * int64_t{4};  // + info word
  // Chunks of at most 256 MiB on the device (or one matrix), so huge host batches stream through.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(c.batch, (int64_t{256} << 20) / per));
  const size_t need = static_cast<size_t>(chunk * per + 256 * 5);
  if (need > h.bytes) {
    if (h.buf) cudaFree(h.buf);
    h.buf = nullptr;
    h.bytes = 0;
    if ((err = cudaMalloc(&h.buf, need))) {
      cudaGetLastError();
      return cuda_fail(ML_OUT_OF_MEMORY, "cudaMalloc", err);
    }
    h.bytes = need;
  }
  // Carve the buffer: a, out0, out1, out2, info, each 256-byte aligned.
  auto align = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
  char *base = static_cast<char *>(h.buf);
  float *da = reinterpret_cast<float *>(base);
  base += align(chunk * in_f * 4);
  float *dout[3];
  for (int i = 0; i < 3; ++i) {
    dout[i] = reinterpret_cast<float *>(base);
    base += align(chunk * sz[i] * 4);
  }
  int32_t *dinfo = reinterpret_cast<int32_t *>(base);
  float *hout[3] = {c.out0, c.out1, c.out2};

  for (int64_t off = 0; off < c.batch; off += chunk) {
    const int64_t nb = std::min(chunk, c.batch - off);
    if ((err = cudaMemcpyAsync(da, c.a + off * in_f, nb * in_f * 4, cudaMemcpyHostToDevice,
                               h.stream)))
      return cuda_fail(ML_RUNTIME_ERROR, "cudaMemcpyAsync", err);
    Call dc = c;
    dc.batch = nb;
    dc.a = da;
    dc.out0 = sz[0] && hout[0] ? dout[0] : nullptr;
    dc.out1 = sz[1] && hout[1] ? dout[1] : nullptr;
    dc.out2 = sz[2] && hout[2] ? dout[2] : nullptr;
    dc.info = c.info ? dinfo : nullptr;
    if (ml_status st = launch(k, 0, dc, h.stream)) return st;
    for (int i = 0; i < 3; ++i) {
      if (!sz[i] || !hout[i]) continue;
      if ((err = cudaMemcpyAsync(hout[i] + off * sz[i], dout[i], nb * sz[i] * 4,
                                 cudaMemcpyDeviceToHost, h.stream)))
        return cuda_fail(ML_RUNTIME_ERROR, "cudaMemcpyAsync", err);
    }
    if (c.info && (err = cudaMemcpyAsync(c.info + off, dinfo, nb * 4, cudaMemcpyDeviceToHost,
                                         h.stream)))
      return cuda_fail(ML_RUNTIME_ERROR, "cudaMemcpyAsync", err);
  }
  if ((err = cudaStreamSynchronize(h.stream)))
    return cuda_fail(ML_RUNTIME_ERROR, "kernel execution", err);
  return ML_OK;
}

}  // namespace ml::cuda
