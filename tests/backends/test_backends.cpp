// Unit tests of the backend interface's routing (core/src/routing.cpp) and the CUDA launch
// configuration (cuda/launch_config.h) on the CPU, with fake backends registered in place of
// core/src/registry.cpp: which backend, kernel and launch kind a call gets under explicitly
// set policies, on an H200-sized budget (sm_90: 58112 shared floats, 132 SMs), and the group
// sizes and block shapes the CUDA backend launches. Also the one output-size function (ops.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "../../core/kernels/params.h"
#include "../../cuda/launch_config.h"
#include "../../metal/launch_config.h"
#include "backend.h"
#include "kernel_table.h"
#include "ops.h"
#include "routing.h"

namespace ml {
namespace {

int g_checks = 0, g_failures = 0;
void expect(bool ok, const std::string &what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::printf("FAIL %s\n", what.c_str());
  }
}

class FakeBackend final : public Backend {
 public:
  FakeBackend(const char *name, int32_t memory, int64_t budget)
      : name_(name), memory_(memory), budget_(budget) {}
  bool usable = true;
  const char *name() const override { return name_; }
  int32_t memory() const override { return memory_; }
  bool available() const override { return usable; }
  const char *device_name() const override { return "fake"; }
  int64_t scratch_budget(int32_t) const override { return budget_; }
  int64_t kernel_max_n(int32_t) const override { return 0; }
  bool plan(const Call &c, const policy::Resolved &pol, int32_t, Plan *out) const override {
    if (memory_ == ML_MEMORY_HOST) {
      *out = Plan{};
      return true;
    }
    return gpu_plan(c, pol, budget_, nullptr, out);
  }
  const char *plan_name(const Call &, const Plan &p, const policy::Resolved &) const override {
    return memory_ == ML_MEMORY_HOST ? "cpu:lapack" : gpu_plan_name(name_, p);
  }
  int64_t workspace_bytes(const Call &, const Plan &) const override { return 0; }
  ml_status run_host(const Call &, const Plan &, const policy::Resolved &, const char *) override {
    return ML_OK;
  }
  ml_status run_device(const ml_exec &, const Call &, const Plan &, const char *) override {
    return ML_OK;
  }

 private:
  const char *name_;
  int32_t memory_;
  int64_t budget_;
};

FakeBackend g_cpu("cpu", ML_MEMORY_HOST, 0);
FakeBackend g_cuda("cuda", ML_MEMORY_CUDA, ML_CUDA_SCRATCH_FLOATS_SM90);

}  // namespace

// The registry, as core/src/registry.cpp provides it, over the fakes.
Backend &cpu_backend() { return g_cpu; }
Backend *backend_for_memory(int32_t memory) {
  return memory == ML_MEMORY_CUDA ? &g_cuda : nullptr;
}
Backend *host_gpu_backend() { return g_cuda.available() ? &g_cuda : nullptr; }

namespace {

// SIMD lines off unless `simd` says otherwise, so the group-kernel expectations below name
// the group kernels.
policy::Resolved pol(int64_t small, int64_t lane_n, int64_t lane_b, int64_t host_work = 0,
                     policy::Force force = policy::Force::kAuto, int64_t simd = 0) {
  policy::Resolved p{};
  p.value[policy::kCpuKernelMaxN] = 16;
  p.value[policy::kGpuMinBatch] = 1;
  p.value[policy::kGpuMaxN] = 1024;
  p.value[policy::kHostGpuMinWork] = host_work;
  p.value[policy::kGpuLaneMaxN] = lane_n;
  p.value[policy::kGpuLaneMinBatch] = lane_b;
  p.value[policy::kGpuSmallMaxN] = small;
  p.value[policy::kGpuSimdMaxN] = simd;
  p.force = force;
  return p;
}

std::string name_of(int32_t op, int64_t m, int64_t n, int64_t batch, int32_t flags, int32_t memory,
                    const policy::Resolved &p, bool query = true) {
  const Call c{op, batch, m, n, flags, nullptr, nullptr, nullptr, nullptr, nullptr};
  const Route r = route(c, memory, 0, p, query);
  if (!r.backend) return "none";
  return r.backend->plan_name(c, r.plan, p);
}

void test_routing() {
  const auto dev = ML_MEMORY_CUDA, host = ML_MEMORY_HOST;
  // Register kernels while max(m, n) <= gpu_small_max_n; group kernels beyond.
  expect(name_of(ML_OP_EIGH, 4, 4, 1000, 0, dev, pol(8, 0, 1)) == "cuda:eigh_jacobi_small",
         "eigh 4x4 register kernel");
  expect(name_of(ML_OP_EIGH, 4, 4, 1000, 0, dev, pol(0, 0, 1)) == "cuda:eigh_tridiag_ql",
         "eigh 4x4 block when small_max_n = 0");
  expect(name_of(ML_OP_EIGH, 9, 9, 1000, 0, dev, pol(8, 0, 1)) == "cuda:eigh_tridiag_ql",
         "eigh 9x9 past the register kernel's window");
  // Lane per matrix by the policy's lane window.
  expect(name_of(ML_OP_EIGH, 16, 16, 1000, 0, dev, pol(8, 16, 512)) == "cuda:eigh_tridiag_ql/lane",
         "eigh 16x16 lane");
  expect(name_of(ML_OP_EIGH, 16, 16, 100, 0, dev, pol(8, 16, 512)) == "cuda:eigh_tridiag_ql",
         "eigh 16x16 below lane_min_batch: block");
  expect(name_of(ML_OP_EIGH, 17, 17, 1000, 0, dev, pol(8, 16, 512)) == "cuda:eigh_tridiag_ql",
         "eigh 17x17 past lane_max_n: block");
  expect(name_of(ML_OP_SVDVALS, 5, 3, 64, 0, dev, pol(8, 0, 1)) == "cuda:svdvals_jacobi_small",
         "svdvals 5x3 register kernel");
  expect(name_of(ML_OP_QR, 40, 20, 8, ML_QR_COMPLETE, dev, pol(8, 0, 1)) == "cuda:qr_householder",
         "qr 40x20 complete");
  // Shapes no kernel covers: device memory names the CPU (query) or nothing (dispatch).
  expect(name_of(ML_OP_SVD, 6, 4, 10, 1, dev, pol(8, 0, 1)) == "cpu:lapack",
         "svd full_matrices non-square: CPU");
  expect(name_of(ML_OP_EIGH, 300, 300, 10, 0, dev, pol(8, 0, 1)) == "cpu:lapack",
         "eigh 300x300 exceeds the H200 budget: CPU");
  expect(name_of(ML_OP_EIGH, 300, 300, 10, 0, dev, pol(8, 0, 1), false) == "none",
         "eigh 300x300 device dispatch: no backend");
  // Device memory queries honour gpu_min_batch / gpu_max_n and a forced CPU; dispatch does not.
  policy::Resolved minb = pol(8, 0, 1);
  minb.value[policy::kGpuMinBatch] = 64;
  expect(name_of(ML_OP_QR, 20, 20, 10, 0, dev, minb) == "cpu:lapack", "batch below gpu_min_batch");
  expect(name_of(ML_OP_QR, 20, 20, 10, 0, dev, minb, false) == "cuda:qr_householder",
         "device dispatch ignores gpu_min_batch");
  const auto forced_cpu = pol(8, 0, 1, 0, policy::Force::kCpu);
  expect(name_of(ML_OP_QR, 20, 20, 10, 0, dev, forced_cpu) == "cpu:lapack", "forced CPU query");
  // Host memory: the GPU only when the copies pay off (host_gpu_min_work) or when forced.
  expect(name_of(ML_OP_QR, 20, 20, 1000, 0, host, pol(8, 0, 1, 0)) == "cpu:lapack",
         "host, host_gpu_min_work 0: CPU");
  expect(name_of(ML_OP_QR, 20, 20, 1000, 0, host, pol(8, 0, 1, 400000)) == "cuda:qr_householder",
         "host, work 400000 >= min: GPU");
  expect(name_of(ML_OP_QR, 20, 20, 999, 0, host, pol(8, 0, 1, 400000)) == "cpu:lapack",
         "host, work below min: CPU");
  expect(name_of(ML_OP_QR, 20, 20, 1, 0, host, pol(8, 0, 1, 0, policy::Force::kGpu)) ==
             "cuda:qr_householder",
         "host, forced GPU");
  g_cuda.usable = false;
  expect(name_of(ML_OP_QR, 20, 20, 1, 0, host, pol(8, 0, 1, 0, policy::Force::kGpu)) ==
             "cpu:lapack",
         "host, forced GPU but no usable GPU: CPU");
  g_cuda.usable = true;
  // Kernel flags: square complete QR runs as reduced; svd as thin.
  Plan p;
  const Call qc{ML_OP_QR, 8, 12, 12, ML_QR_COMPLETE, nullptr, nullptr, nullptr, nullptr, nullptr};
  expect(gpu_plan(qc, pol(0, 0, 1), ML_CUDA_SCRATCH_FLOATS_SM90, nullptr, &p) &&
             p.kernel_flags == ML_QR_REDUCED && p.launch == Launch::kBlock,
         "square complete qr runs reduced");
  // Every kernel of the table is reachable for its op.
  int count = 0;
  const KernelInfo *t = kernel_table(&count);
  for (int i = 0; i < count; ++i) {
    const Call c{t[i].op, 100, 3, 3, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
    Plan q;
    const bool reg = t[i].kind == KernelKind::kRegister, simd = t[i].kind == KernelKind::kSimd;
    const policy::Resolved pi = pol(reg ? 8 : 0, 0, 1, 0, policy::Force::kAuto, simd ? 64 : 0);
    const bool ok = gpu_plan(c, pi, ML_METAL_SCRATCH_FLOATS, nullptr, &q);
    expect(ok && q.kernel == i, std::string("table line ") + t[i].name + " reachable");
  }
}

void test_cuda_launch() {
  using namespace ml::cuda;
  const int u = 132;
  // The H200 launch shapes of docs/design.md's benchmark grid (n <= 64).
  expect(group_size_eigh_tridiag_ql(32, 32, 16384, u) == 32, "eigh 32 throughput: 32 lanes");
  expect(group_size_eigh_tridiag_ql(32, 32, 1024, u) == 64, "eigh 32 latency: 64 lanes");
  expect(group_size_eigh_tridiag_ql(16, 16, 16384, u) == 16, "eigh 16 throughput: 16 lanes");
  expect(group_size_eigh_tridiag_ql(64, 64, 16384, u) == 64, "eigh 64: 64 lanes");
  expect(group_size_eigvalsh_tridiag_ql(64, 64, 16384, u) == 96, "eigvalsh 64: 96 lanes");
  expect(group_size_eigvalsh_tridiag_ql(32, 32, 1024, u) == 32, "eigvalsh 32: 32 lanes");
  expect(group_size_qr_householder(48, 48, 1024, u) == 64, "qr 48: 64 lanes");
  expect(group_size_qr_householder(12, 12, 16384, u) == 16, "qr 12 throughput: 16 lanes");
  expect(group_size_svd_bidiag_qr(30, 30, 1024, u) == 64, "svd 30 latency: 32 + 32 lanes");
  expect(group_size_svd_bidiag_qr(30, 30, 16384, u) == 32, "svd 30 throughput: 32 lanes");
  expect(group_size_svdvals_bidiag_qr(64, 64, 1024, u) == 64, "svdvals 64: 64 lanes");
  // Sub-warp groups share warps; one-warp groups get a block each unless forced.
  expect(groups_per_block(16, 300, ML_CUDA_SCRATCH_FLOATS_SM90, 1024, 0) == 2, "16 lanes: 2 per block");
  expect(groups_per_block(32, 300, ML_CUDA_SCRATCH_FLOATS_SM90, 1024, 0) == 1, "32 lanes: 1 per block");
  expect(groups_per_block(32, 300, ML_CUDA_SCRATCH_FLOATS_SM90, 1024, 4) == 4, "forced 4 groups");
  expect(lane_matrices(16384, 301, ML_CUDA_SCRATCH_FLOATS_SM90, 1024, 0) == 32, "lane: a warp");
  expect(lane_matrices(5, 301, ML_CUDA_SCRATCH_FLOATS_SM90, 1024, 0) == 5, "lane: short batch");
  expect(threads_per_group(288, 0, 256) == 256, "threads capped by the kernel's limit");
}

void test_metal_launch() {
  using namespace ml::metal;
  expect(lane_slice(32) == 255 && lane_slice(1) == 8191, "Metal lane slices are odd");
  expect(lane_threads(16384, 200, 1024) == 32, "Metal lane: a simdgroup of matrices");
  expect(lane_threads(16384, 300, 1024) == 27, "Metal lane: fewer when a slice is too small");
  expect(lane_threads(5, 200, 1024) == 5, "Metal lane: short batch");
  expect(lane_threads(100, 9000, 1024) == 0, "Metal lane: nothing fits");
  expect(register_threads(1024) == 64 && register_threads(32) == 32, "Metal register threads");
  expect(matrices_per_dispatch(8, 8) % 64 == 0 && matrices_per_dispatch(4096, 4096) == 64,
         "Metal dispatch chunks: multiples of 64");
  expect(group_size_eigh_tridiag_ql(16, 16, 16384) == 32, "Metal groups never below 32 lanes");
}

void test_output_shape() {
  int64_t sz[3];
  output_floats(ML_OP_QR, 5, 3, ML_QR_REDUCED, sz);
  expect(sz[0] == 15 && sz[1] == 9 && sz[2] == 0, "qr reduced 5x3");
  output_floats(ML_OP_QR, 5, 3, ML_QR_COMPLETE, sz);
  expect(sz[0] == 25 && sz[1] == 15 && sz[2] == 0, "qr complete 5x3");
  output_floats(ML_OP_QR, 5, 3, ML_QR_R, sz);
  expect(sz[0] == 0 && sz[1] == 9, "qr R 5x3");
  output_floats(ML_OP_EIGH, 4, 4, 0, sz);
  expect(sz[0] == 4 && sz[1] == 16 && sz[2] == 0, "eigh 4");
  output_floats(ML_OP_EIGVALSH, 4, 4, 0, sz);
  expect(sz[0] == 4 && sz[1] == 0, "eigvalsh 4");
  output_floats(ML_OP_SVD, 2, 7, 0, sz);
  expect(sz[0] == 4 && sz[1] == 2 && sz[2] == 14, "svd 2x7");
  output_floats(ML_OP_SVDVALS, 2, 7, 0, sz);
  expect(sz[0] == 0 && sz[1] == 2 && sz[2] == 0, "svdvals 2x7 (s in out1)");
  int64_t d[2];
  expect(output_shape(ML_OP_SVD, 2, 7, 0, 1, d) == 1 && d[0] == 2, "svd s is a vector");
  expect(output_shape(ML_OP_QR, 5, 3, ML_QR_R, 0, d) == 0, "qr R has no q");
  expect(output_shape(ML_OP_QR, 5, 3, ML_QR_COMPLETE, 1, d) == 2 && d[0] == 5 && d[1] == 3,
         "qr complete r is m x n");
}

}  // namespace
}  // namespace ml

int main() {
  ml::test_routing();
  ml::test_cuda_launch();
  ml::test_metal_launch();
  ml::test_output_shape();
  std::printf("backends: %d checks, %d failures\n", ml::g_checks, ml::g_failures);
  return ml::g_failures == 0 ? 0 : 1;
}
