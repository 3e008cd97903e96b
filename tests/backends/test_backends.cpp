// Unit tests of the backend interface's routing (core/src/routing.cpp) and the CUDA launch
// configuration (cuda/launch_config.h) on the CPU, with fake backends registered in place of
// core/src/registry.cpp: which backend, kernel and launch kind a call gets under explicitly
// set policies, on an H200-sized budget (sm_90: 58112 shared floats, 132 SMs), and the group
// sizes and block shapes the CUDA backend launches. Also the one output-size function (ops.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#define ML_CPU_SERIAL 1
#include "../../core/kernels/compat_cpu.h"
#include "../../core/kernels/kernel_table.h"
#include "../../core/kernels/params.h"
#include "../../cuda/launch_config.h"
#include "../../metal/launch_config.h"
#include "backend.h"
#include "blocked.h"
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
  bool global = false;   // has global entries (as the CUDA backend's GROUP lines)
  bool blocked = false;  // runs the blocked algorithms (as the CUDA backend)
  static bool has_global(int) { return true; }
  const char *name() const override { return name_; }
  int32_t memory() const override { return memory_; }
  bool available() const override { return usable; }
  const char *device_name() const override { return "fake"; }
  int64_t scratch_budget(int32_t) const override { return budget_; }
  bool plan(const Call &c, const policy::Resolved &pol, int32_t, Plan *out) const override {
    if (memory_ == ML_MEMORY_HOST) {
      *out = Plan{};
      return true;
    }
    return gpu_plan(c, pol, budget_, nullptr, out, global ? has_global : nullptr, blocked);
  }
  const char *plan_name(const Call &c, const Plan &p, const policy::Resolved &) const override {
    return memory_ == ML_MEMORY_HOST ? "cpu:lapack" : gpu_plan_name(name_, p, c.op);
  }
  int64_t workspace_bytes(const Call &c, const Plan &p) const override {
    if (p.launch == Launch::kBlocked)
      return blocked::workspace_bytes(c, p.kernel_flags, blocked::Options{});
    return global_workspace_bytes(c, p);
  }
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

// has_kernel for gpu_plan: a backend with only the table lines from g_first_line on.
int g_first_line = 0;
bool lines_from_first(int k) { return k >= g_first_line; }

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
  p.value[policy::kGpuGlobalMaxN] = 0;
  p.value[policy::kGpuGlobalMinBatch] = 1;
  p.value[policy::kGpuBlockedMaxBatch] = policy::kUnboundedBatch;  // the default
  p.value[policy::kGpuAltMaxBatch] = policy::kUnboundedBatch;      // the default
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
  // Every kernel of the table is reachable for its op: directly, or, for a GROUP line listed
  // after another GROUP line of its op (an alternative awaiting measurement), once a backend
  // lacks or skips the op's earlier lines (has_kernel; CUDA: METAL_LINALG_CUDA_SKIP_KERNELS).
  int count = 0;
  const KernelInfo *t = kernel_table(&count);
  for (int i = 0; i < count; ++i) {
    // 3 x 3, or 24 x 24 or 40 x 40 for a line whose window starts above (the LU SIMD lines of
    // 17..32 and 33..64, qr_householder_simd64), or 80 x 80 for one taken from 65 on
    // (solve_triangular_simd128, below); flags 0, or ML_LS_RIGHT for the lines of X A = B
    // alone (solve_right_simd*)
    const auto fits = [&](int sz, int fl) {
      return t[i].fits(sz, sz, fl, ML_METAL_SCRATCH_FLOATS) != 0;
    };
    const int fl = fits(3, 0) || fits(24, 0) || fits(40, 0) ? 0 : ML_LS_RIGHT;
    const int sz = fits(3, fl) ? 3 : fits(24, fl) ? 24 : 40;
    const Call c{t[i].op, 100, sz, sz, fl, nullptr, nullptr, nullptr, nullptr, nullptr};
    Plan q;
    const bool reg = t[i].kind == KernelKind::kRegister, simd = t[i].kind == KernelKind::kSimd;
    const policy::Resolved pi = pol(reg ? 8 : 0, 0, 1, 0, policy::Force::kAuto, simd ? 128 : 0);
    bool ok = gpu_plan(c, pi, ML_METAL_SCRATCH_FLOATS, nullptr, &q) && q.kernel == i;
    if (!ok && simd) {
      const Call c80{t[i].op, 100, 80, 80, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
      ok = gpu_plan(c80, pi, ML_CUDA_SCRATCH_FLOATS_SM90, nullptr, &q) && q.kernel == i;
    }
    bool alternative = false;
    for (int j = 0; j < i; ++j)
      alternative = alternative || (t[j].op == t[i].op && t[j].kind == KernelKind::kGroup);
    if (!ok && alternative && t[i].kind == KernelKind::kGroup) {
      g_first_line = i;
      ok = gpu_plan(c, pol(0, 0, 1), ML_METAL_SCRATCH_FLOATS, lines_from_first, &q) && q.kernel == i;
      g_first_line = 0;
    }
    expect(ok, std::string("table line ") + t[i].name + " reachable");
  }
  // The simdgroup window gpu_simd_min_n..gpu_simd_max_n: svd 12 x 12 on the Jacobi SIMD line
  // from 12 up, the group kernel below it and beyond 24.
  policy::Resolved win = pol(0, 0, 1, 0, policy::Force::kAuto, 24);
  win.value[policy::kGpuSimdMinN] = 12;
  const auto svd_kernel = [&](int sz) {
    const Call c{ML_OP_SVD, 100, sz, sz, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
    Plan q;
    return gpu_plan(c, win, ML_CUDA_SCRATCH_FLOATS_SM90, nullptr, &q) ? std::string(t[q.kernel].name)
                                                                      : std::string("none");
  };
  expect(svd_kernel(12) == "svd_jacobi_simd", "svd 12 in the simd window: " + svd_kernel(12));
  expect(svd_kernel(24) == "svd_jacobi_simd", "svd 24 in the simd window: " + svd_kernel(24));
  expect(svd_kernel(11) != "svd_jacobi_simd", "svd 11 below the simd window: " + svd_kernel(11));
  expect(svd_kernel(25) != "svd_jacobi_simd", "svd 25 above the simd window: " + svd_kernel(25));
  // The LU SIMD lines (lu_factor, solve, inv): one per register size, before the group line,
  // by max(m, n), X A = B on lines of its own; gpu_simd_max_n 32 leaves 33..64 to the group
  // line.
  const policy::Resolved lu_on = pol(0, 0, 1, 0, policy::Force::kAuto, 64);
  const policy::Resolved lu_32 = pol(0, 0, 1, 0, policy::Force::kAuto, 32);
  for (int32_t op : {ML_OP_LU_FACTOR, ML_OP_SOLVE, ML_OP_INV}) {
    const std::string cu = std::string("cuda:") + op_name(op);
    for (const auto &[sz, line] : {std::pair<int, const char *>{1, "_simd16"}, {8, "_simd16"},
                                   {16, "_simd16"}, {17, "_simd32"}, {32, "_simd32"},
                                   {33, "_simd64"}, {64, "_simd64"}, {65, "_group"}}) {
      const std::string got = name_of(op, sz, sz, 1000, 0, dev, lu_on);
      expect(got == cu + line, cu + " " + std::to_string(sz) + ": " + got);
    }
    expect(name_of(op, 32, 32, 1000, 0, dev, lu_32) == cu + "_simd32", cu + " 32, simd max 32");
    expect(name_of(op, 33, 33, 1000, 0, dev, lu_32) == cu + "_group", cu + " 33, simd max 32");
  }
  for (const auto &[sz, line] : {std::pair<int, const char *>{8, "16"}, {32, "32"}, {33, "64"}}) {
    const std::string got = name_of(ML_OP_SOLVE, sz, sz, 1000, ML_LS_RIGHT, dev, lu_on);
    expect(got == std::string("cuda:solve_right_simd") + line, "solve X A = B: " + got);
  }
  expect(name_of(ML_OP_SOLVE, 65, 65, 1000, ML_LS_RIGHT, dev, lu_on) == "cuda:solve_group",
         "solve X A = B 65: the group line");
  expect(name_of(ML_OP_LU_FACTOR, 40, 12, 1000, 0, dev, lu_on) == "cuda:lu_factor_simd64",
         "lu_factor 40 x 12: the line of max(m, n)");
  // The ops with right-hand sides take the lane launch with one only (what the lane fields
  // were timed with); inv and lu_factor (no right-hand side) by the lane fields alone.
  const policy::Resolved lanes = pol(0, 16, 1024);
  for (const int32_t op : {ML_OP_SOLVE, ML_OP_SOLVE_TRIANGULAR}) {
    const std::string group = std::string("cuda:") + op_name(op) + "_group";
    for (const int64_t nrhs : {1, 2, 16}) {
      Call c{op, 4096, 8, 8, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
      c.nrhs = nrhs;
      const Route r = route(c, dev, 0, lanes, true);
      const std::string got = r.backend ? r.backend->plan_name(c, r.plan, lanes) : "none";
      const std::string want = nrhs == 1 ? group + "/lane" : group;
      expect(got == want, group + " 8 x4096, " + std::to_string(nrhs) + " rhs: " + got);
    }
  }
  expect(name_of(ML_OP_INV, 8, 8, 4096, 0, dev, lanes) == "cuda:inv_group/lane", "inv 8 lane");
}

// Global launches (a group kernel's scratch in device memory) beyond the shared window.
// The linear systems' SIMD lines other than cholesky_simd wait for a GPU measurement: the
// built-in gpu_simd_max_n of solve, inv, lu_factor and solve_triangular is 0 (checked in
// tests/python/torch/test_torch_linsys.py), which leaves their group lines; cholesky's
// register-column lines are the alternatives after cholesky_group (the gpu_alt window).
void test_linsys_defaults() {
  const auto dev = ML_MEMORY_CUDA;
  for (const int32_t op : {ML_OP_SOLVE, ML_OP_INV, ML_OP_LU_FACTOR, ML_OP_SOLVE_TRIANGULAR}) {
    const std::string name = op_name(op);
    const std::string off = name_of(op, 16, 16, 64, 0, dev, pol(0, 0, 1, 0, policy::Force::kAuto, 0));
    expect(off == "cuda:" + name + "_group", name + " 16 x64, gpu_simd_max_n 0: " + off);
    const std::string on = name_of(op, 16, 16, 64, 0, dev, pol(0, 0, 1, 0, policy::Force::kAuto, 128));
    expect(on != off, name + " 16 x64, gpu_simd_max_n 128: " + on);
  }
  policy::Resolved c = pol(0, 0, 1, 0, policy::Force::kAuto, 1 << 20);
  expect(name_of(ML_OP_CHOLESKY, 16, 16, 64, 0, dev, c) == "cuda:cholesky_simd",
         "cholesky 16 x64: cholesky_simd");
  expect(name_of(ML_OP_CHOLESKY, 48, 48, 64, 0, dev, c) == "cuda:cholesky_group",
         "cholesky 48 x64 without the alt window: cholesky_group");
  c.value[policy::kGpuAltMinN] = 33;
  c.value[policy::kGpuAltMaxN] = 128;
  expect(name_of(ML_OP_CHOLESKY, 48, 48, 64, 0, dev, c) == "cuda:cholesky_cols",
         "cholesky 48 x64 in the alt window: cholesky_cols");
  expect(name_of(ML_OP_CHOLESKY, 100, 100, 64, 0, dev, c) == "cuda:cholesky_cols128",
         "cholesky 100 x64 in the alt window: cholesky_cols128");
}

void test_global_routing() {
  const auto dev = ML_MEMORY_CUDA, host = ML_MEMORY_HOST;
  g_cuda.global = true;
  policy::Resolved on = pol(8, 0, 1);
  on.value[policy::kGpuGlobalMaxN] = 4096;
  const policy::Resolved off = pol(8, 0, 1);
  expect(name_of(ML_OP_EIGH, 300, 300, 3, 0, dev, on) == "cuda:eigh_tridiag_ql/global",
         "eigh 300x300 device, global_max_n 4096: global");
  expect(name_of(ML_OP_EIGH, 300, 300, 3, 0, dev, on, false) == "cuda:eigh_tridiag_ql/global",
         "eigh 300x300 device dispatch: global");
  expect(name_of(ML_OP_EIGH, 300, 300, 3, 0, dev, off) == "cpu:lapack",
         "eigh 300x300 device, global_max_n 0: CPU");
  expect(name_of(ML_OP_EIGH, 300, 300, 3, 0, dev, off, false) == "none",
         "eigh 300x300 device dispatch, global_max_n 0: none");
  // Within the shared window the shared-memory launches keep the shape.
  expect(name_of(ML_OP_EIGH, 200, 200, 3, 0, dev, on) == "cuda:eigh_tridiag_ql",
         "eigh 200x200 still a block launch");
  expect(name_of(ML_OP_EIGVALSH, 1024, 1024, 2, 0, dev, on) ==
             "cuda:eigvalsh_tridiag_bisect/global",
         "eigvalsh 1024 global");
  expect(name_of(ML_OP_QR, 513, 257, 2, ML_QR_REDUCED, dev, on) == "cuda:qr_householder/global",
         "qr 513x257 global");
  expect(name_of(ML_OP_QR, 300, 300, 2, ML_QR_COMPLETE, dev, on) == "cuda:qr_householder/global",
         "qr 300x300 complete global");
  expect(name_of(ML_OP_SVD, 513, 257, 2, 0, dev, on) == "cuda:svd_bidiag_qr/global",
         "svd 513x257 global");
  expect(name_of(ML_OP_SVD, 257, 513, 2, 1, dev, on) == "cpu:lapack",
         "svd full_matrices non-square: still no GPU kernel");
  expect(name_of(ML_OP_SVDVALS, 300, 900, 2, 0, dev, on) == "cuda:svdvals_bidiag_bisect/global",
         "svdvals 300x900 global");
  // The policy's bounds: gpu_global_max_n, gpu_global_min_batch, the hard kGlobalMaxDim, and
  // the query's gpu_max_n.
  policy::Resolved small = on;
  small.value[policy::kGpuGlobalMaxN] = 299;
  expect(name_of(ML_OP_EIGH, 300, 300, 3, 0, dev, small) == "cpu:lapack", "300 > global_max_n");
  policy::Resolved minb = on;
  minb.value[policy::kGpuGlobalMinBatch] = 8;
  expect(name_of(ML_OP_EIGH, 300, 300, 7, 0, dev, minb) == "cpu:lapack",
         "batch 7 < global_min_batch 8: CPU");
  expect(name_of(ML_OP_EIGH, 300, 300, 8, 0, dev, minb) == "cuda:eigh_tridiag_ql/global",
         "batch 8 >= global_min_batch 8: global");
  policy::Resolved huge = on;
  huge.value[policy::kGpuGlobalMaxN] = int64_t{1} << 40;
  huge.value[policy::kGpuMaxN] = int64_t{1} << 40;
  expect(name_of(ML_OP_EIGH, 4096, 4096, 1, 0, dev, huge) == "cuda:eigh_tridiag_ql/global",
         "eigh 4096 global");
  expect(name_of(ML_OP_EIGH, 4097, 4097, 1, 0, dev, huge) == "cpu:lapack",
         "eigh 4097 beyond kGlobalMaxDim: CPU");
  expect(name_of(ML_OP_SVD, 100000, 3, 1, 0, dev, huge) == "cpu:lapack",
         "svd 100000x3 beyond kGlobalMaxDim: CPU");
  expect(name_of(ML_OP_EIGH, 2048, 2048, 1, 0, dev, on) == "cpu:lapack",
         "eigh 2048 query beyond gpu_max_n 1024: CPU");
  // A backend without global entries (Metal today) never plans one.
  g_cuda.global = false;
  expect(name_of(ML_OP_EIGH, 300, 300, 3, 0, dev, on) == "cpu:lapack", "no global entries: CPU");
  g_cuda.global = true;
  // Host memory takes a global plan only where the copies pay off, as any GPU plan.
  expect(name_of(ML_OP_EIGH, 300, 300, 64, 0, host, on) == "cpu:lapack",
         "host, host_gpu_min_work 0: CPU");
  policy::Resolved host_on = on;
  host_on.value[policy::kHostGpuMinWork] = 1;
  expect(name_of(ML_OP_EIGH, 300, 300, 64, 0, host, host_on) == "cuda:eigh_tridiag_ql/global",
         "host, work pays: global");

  // Workspace: the kernel's scratch per matrix, rounded to 32 floats, times the matrices in
  // flight (all of a small batch; a large one bounded by kGlobalWorkspaceBytes).
  const int eigh = [] {
    int count = 0;
    const KernelInfo *t = kernel_table(&count);
    for (int i = 0; i < count; ++i)
      if (std::strcmp(t[i].name, "eigh_tridiag_ql") == 0) return i;
    return -1;
  }();
  Plan gp;
  gp.kernel = eigh;
  gp.launch = Launch::kGlobal;
  const Call c3{ML_OP_EIGH, 3, 300, 300, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
  const int64_t scratch = ml_eigh_tridiag_ql_scratch_floats(300, 300);
  const int64_t slice = (scratch + 31) / 32 * 32;
  expect(global_slice_floats(scratch) == slice && slice % 32 == 0 && slice >= scratch,
         "global slice: scratch rounded to 128 bytes");
  expect(g_cuda.workspace_bytes(c3, gp) == slice * 3 * 4, "workspace of 3 x 300^2 eigh");
  const Call big{ML_OP_EIGH, 100000, 300, 300, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
  const int64_t fit = kGlobalWorkspaceBytes / (slice * 4);
  expect(global_in_flight(100000, slice) == fit && fit < 100000 && fit > 1,
         "in flight bounded by the workspace cap");
  expect(g_cuda.workspace_bytes(big, gp) == fit * slice * 4 &&
             g_cuda.workspace_bytes(big, gp) <= kGlobalWorkspaceBytes,
         "workspace of a long batch stays under the cap");
  expect(global_in_flight(5, int64_t{1} << 29) == 1, "at least one matrix in flight");
  Plan block = gp;
  block.launch = Launch::kBlock;
  expect(g_cuda.workspace_bytes(c3, block) == 0, "block plans need no workspace");
  // The plan's flags under the global budget: svd keeps V in its (device) scratch.
  Plan sp;
  const Call sv{ML_OP_SVD, 2, 513, 257, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
  int32_t flags = -1;
  expect(gpu_plan(sv, on, ML_CUDA_SCRATCH_FLOATS_SM90, nullptr, &sp, FakeBackend::has_global) &&
             global_scratch_floats(sv, sp, &flags) ==
                 ml_svd_bidiag_qr_scratch_floats_flags(513, 257, ML_K_SVD_V_SHARED) &&
             flags == ML_K_SVD_V_SHARED,
         "svd global: V in the workspace");
  // Every kernel's size helpers stay far from int overflow up to kGlobalMaxDim.
  int count = 0;
  const KernelInfo *t = kernel_table(&count);
  for (int i = 0; i < count; ++i) {
    if (t[i].kind != KernelKind::kGroup) continue;
    // cholesky_cols*: windows up to 64 and 128 (registers), checked there.
    const bool bounded = std::string(t[i].name).rfind("cholesky_cols", 0) == 0;
    const int d = !bounded ? static_cast<int>(kGlobalMaxDim)
                  : t[i].fits(128, 128, 0, static_cast<int>(kGlobalScratchFloats)) ? 128
                                                                                   : 64;
    const int square = ml::op_desc(t[i].op).square;
    const int shapes[3][2] = {{d, d}, {d, square ? d : 1}, {square ? d : 1, d}};
    for (const auto &sh : shapes) {
      const int kf = t[i].op == ML_OP_QR ? ML_QR_COMPLETE : 0;
      const int f = t[i].choose_flags(sh[0], sh[1], kf, static_cast<int>(kGlobalScratchFloats));
      const int need = t[i].scratch(sh[0], sh[1], f);
      const int64_t side = std::max(sh[0], sh[1]) + 1;
      expect(t[i].fits(sh[0], sh[1], kf, static_cast<int>(kGlobalScratchFloats)) && need > 0 &&
                 need <= 3 * side * side + 100000,
             std::string(t[i].name) + " fits " + std::to_string(sh[0]) + "x" +
                 std::to_string(sh[1]) + " in the global budget");
    }
  }
  g_cuda.global = false;
}

// Blocked plans: which calls take them under an explicit gpu_blocked_min_n, their precedence
// over the shared-memory kernels and the global launches, their bounds and their workspace.
void test_blocked_routing() {
  const auto dev = ML_MEMORY_CUDA, host = ML_MEMORY_HOST;
  policy::Resolved on = pol(8, 0, 1);
  on.value[policy::kGpuMaxN] = int64_t{1} << 40;
  on.value[policy::kGpuGlobalMaxN] = 4096;
  on.value[policy::kGpuBlockedMinN] = int64_t{1} << 30;  // the default: beyond the window only
  g_cuda.global = true;
  g_cuda.blocked = true;
  expect(name_of(ML_OP_QR, 300, 300, 2, ML_QR_REDUCED, dev, on) == "cuda:blocked_qr",
         "qr 300x300 beyond the window: blocked, before the global launch");
  expect(name_of(ML_OP_QR, 4096, 1024, 1, ML_QR_COMPLETE, dev, on) == "cuda:blocked_qr",
         "qr 4096x1024 complete: blocked");
  expect(name_of(ML_OP_QR, 128, 128, 2, ML_QR_REDUCED, dev, on) == "cuda:qr_householder",
         "qr 128 inside the window: the shared-memory kernel");
  policy::Resolved from128 = on;
  from128.value[policy::kGpuBlockedMinN] = 128;
  expect(name_of(ML_OP_QR, 128, 128, 2, ML_QR_REDUCED, dev, from128) == "cuda:blocked_qr",
         "qr 128 with gpu_blocked_min_n 128: blocked");
  expect(name_of(ML_OP_QR, 127, 100, 2, ML_QR_REDUCED, dev, from128) == "cuda:qr_householder",
         "qr 127x100 below gpu_blocked_min_n 128: shared");
  policy::Resolved off = on;
  off.value[policy::kGpuBlockedMinN] = 0;
  expect(name_of(ML_OP_QR, 300, 300, 2, ML_QR_REDUCED, dev, off) == "cuda:qr_householder/global",
         "gpu_blocked_min_n 0: blocked off, the global launch");
  expect(name_of(ML_OP_QR, kBlockedMaxDim + 1, 8, 1, ML_QR_REDUCED, dev, on) == "cpu:lapack",
         "qr beyond kBlockedMaxDim: CPU");
  expect(name_of(ML_OP_QR, kBlockedMaxDim, 8, 1, ML_QR_REDUCED, dev, on) == "cuda:blocked_qr",
         "qr at kBlockedMaxDim: blocked");
  expect(name_of(ML_OP_SVD, 257, 513, 2, 1, dev, on) == "cpu:lapack",
         "svd full_matrices non-square: no GPU plan at all");
  expect(name_of(ML_OP_QR, 0, 300, 2, ML_QR_REDUCED, dev, from128) == "cuda:qr_householder",
         "an empty matrix is no blocked call");
  // Host memory: only when the copies pay off, as any GPU plan.
  expect(name_of(ML_OP_QR, 300, 300, 8, ML_QR_REDUCED, host, on) == "cpu:lapack",
         "host, host_gpu_min_work 0: CPU");
  policy::Resolved host_on = on;
  host_on.value[policy::kHostGpuMinWork] = 1;
  expect(name_of(ML_OP_QR, 300, 300, 8, ML_QR_REDUCED, host, host_on) == "cuda:blocked_qr",
         "host, work pays: blocked");
  // A backend without blocked algorithms keeps the global launch.
  g_cuda.blocked = false;
  expect(name_of(ML_OP_QR, 300, 300, 2, ML_QR_REDUCED, dev, on) == "cuda:qr_householder/global",
         "no blocked algorithms: global");
  g_cuda.blocked = true;
  // Workspace: the blocked algorithm's slice per matrix times the batch, bounded.
  Plan bp;
  expect(gpu_plan(Call{ML_OP_QR, 3, 300, 200, ML_QR_REDUCED, nullptr, nullptr, nullptr, nullptr,
                       nullptr},
                  on, ML_CUDA_SCRATCH_FLOATS_SM90, nullptr, &bp, nullptr, true) &&
             bp.launch == Launch::kBlocked && bp.kernel == -1,
         "blocked plan: kernel -1");
  const Call q3{ML_OP_QR, 3, 300, 200, ML_QR_REDUCED, nullptr, nullptr, nullptr, nullptr, nullptr};
  const Call q1{ML_OP_QR, 1, 300, 200, ML_QR_REDUCED, nullptr, nullptr, nullptr, nullptr, nullptr};
  const int64_t w1 = g_cuda.workspace_bytes(q1, bp), w3 = g_cuda.workspace_bytes(q3, bp);
  // W, V, Q (3 x 300 x 200 floats) at least, per matrix; three matrices three slices.
  expect(w1 >= 3 * 300 * 200 * 4 && w3 == 3 * w1, "blocked workspace: a slice per matrix");
  const Call qbig{ML_OP_QR, 100000, 300, 200, ML_QR_REDUCED, nullptr, nullptr, nullptr, nullptr,
                  nullptr};
  expect(g_cuda.workspace_bytes(qbig, bp) <= blocked::Options{}.max_workspace_bytes &&
             g_cuda.workspace_bytes(qbig, bp) >= w1,
         "blocked workspace of a long batch stays under the bound");
  // The linear systems: their one-group kernels inside the window (n <= 239 on the H200's
  // budget), the blocked path beyond it on device memory, host memory always on the CPU.
  const int32_t ls_ops[] = {ML_OP_CHOLESKY, ML_OP_LU_FACTOR, ML_OP_SOLVE, ML_OP_INV,
                            ML_OP_SOLVE_TRIANGULAR};
  for (int32_t op : ls_ops) {
    const std::string name = op_name(op);
    expect(blocked::supported(op), name + ": a blocked algorithm");
    expect(name_of(op, 300, 300, 2, 0, dev, on) == "cuda:blocked_" + name,
           name + " 300 beyond the window: blocked");
    expect(name_of(op, 128, 128, 2, 0, dev, on) == "cuda:" + name + "_group",
           name + " 128 inside the window: the one-group kernel");
    expect(name_of(op, 300, 300, 2, 0, host, host_on) == "cpu:lapack",
           name + " 300 on the host: LAPACK");
    expect(name_of(op, 300, 300, 2, 0, dev, off) == "cuda:" + name + "_group/global",
           name + " 300 with gpu_blocked_min_n 0: the global launch");
  }
  expect(name_of(ML_OP_LU_FACTOR, 700, 300, 1, 0, dev, on) == "cuda:blocked_lu_factor",
         "lu_factor 700x300: blocked");
  // The solves' workspace: A and one pass of B, whatever nrhs (ml_workspace_size takes none).
  Call s1{ML_OP_SOLVE, 1, 300, 300, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
  Call s999 = s1;
  s999.nrhs = 999;
  const int64_t ws1 = g_cuda.workspace_bytes(s1, bp), ws999 = g_cuda.workspace_bytes(s999, bp);
  expect(ws1 >= (300 * 300 + 300 * blocked::Options{}.ls_rhs_cols) * 4 && ws999 == ws1,
         "solve workspace: A and one pass of B, independent of nrhs");
  g_cuda.global = false;
  g_cuda.blocked = false;
}

// gpu_blocked_max_batch: inside the shared window the blocked path from gpu_blocked_min_n only
// up to that batch (a large batch stays with the table's kernels), beyond the window at any
// batch.
void test_blocked_max_batch() {
  const auto dev = ML_MEMORY_CUDA;
  policy::Resolved p = pol(8, 0, 1);
  p.value[policy::kGpuMaxN] = int64_t{1} << 40;
  p.value[policy::kGpuBlockedMinN] = 64;
  p.value[policy::kGpuBlockedMaxBatch] = 8;
  g_cuda.blocked = true;
  struct Case {
    int32_t op, flags;
    const char *table;  // the shared-memory kernel of 100 x 100 on the H200's budget
    const char *table63;  // ... and of 63 x 63
  };
  const Case cases[] = {{ML_OP_QR, ML_QR_REDUCED, "qr_householder", "qr_householder"},
                        {ML_OP_EIGH, ML_LOWER, "eigh_tridiag_ql", "eigh_tridiag_ql"},
                        {ML_OP_SVD, 0, "svd_bidiag_qr", "svd_bidiag_qr"},
                        {ML_OP_CHOLESKY, 0, "cholesky_group", "cholesky_group"}};
  for (const Case &k : cases) {
    const std::string op = op_name(k.op), blocked = "cuda:blocked_" + op;
    const std::string table = std::string("cuda:") + k.table;
    const std::string table63 = std::string("cuda:") + k.table63;
    expect(name_of(k.op, 100, 100, 1, k.flags, dev, p) == blocked,
           op + " 100 x1, blocked from 64 up to batch 8: blocked");
    expect(name_of(k.op, 100, 100, 8, k.flags, dev, p) == blocked,
           op + " 100 x8, blocked up to batch 8: blocked");
    expect(name_of(k.op, 100, 100, 9, k.flags, dev, p) == table,
           op + " 100 x9, blocked up to batch 8: " + table);
    expect(name_of(k.op, 100, 100, 64, k.flags, dev, p) == table,
           op + " 100 x64, blocked up to batch 8: " + table);
    expect(name_of(k.op, 63, 63, 1, k.flags, dev, p) == table63,
           op + " 63 x1 below gpu_blocked_min_n 64: " + table63);
    // Beyond the shared window no kernel of the table covers the shape: blocked at any batch.
    for (const int64_t batch : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{100000}})
      expect(name_of(k.op, 300, 300, batch, k.flags, dev, p) == blocked,
             op + " 300 x" + std::to_string(batch) + " beyond the window: blocked");
    policy::Resolved never = p;  // gpu_blocked_max_batch 0: never inside the window
    never.value[policy::kGpuBlockedMaxBatch] = 0;
    expect(name_of(k.op, 100, 100, 1, k.flags, dev, never) == table,
           op + " 100 x1, gpu_blocked_max_batch 0: " + table);
    expect(name_of(k.op, 300, 300, 1, k.flags, dev, never) == blocked,
           op + " 300 x1, gpu_blocked_max_batch 0: still blocked beyond the window");
    policy::Resolved unbounded = p;  // the default: today's rule, any batch from min_n
    unbounded.value[policy::kGpuBlockedMaxBatch] = policy::kUnboundedBatch;
    expect(name_of(k.op, 100, 100, 1 << 20, k.flags, dev, unbounded) == blocked,
           op + " 100 x2^20, gpu_blocked_max_batch unbounded: blocked");
  }
  // qr 64x32: max(m, n) = 64 reaches gpu_blocked_min_n 64.
  expect(name_of(ML_OP_QR, 64, 32, 1, ML_QR_REDUCED, dev, p) == "cuda:blocked_qr",
         "qr 64x32 x1: blocked");
  expect(name_of(ML_OP_QR, 64, 32, 64, ML_QR_REDUCED, dev, p) == "cuda:qr_householder",
         "qr 64x32 x64: the table kernel");
  // The plan itself: the blocked launch without a kernel line, the table's line with one.
  Plan bp, tp;
  const Call one{ML_OP_EIGH, 1, 100, 100, ML_LOWER, nullptr, nullptr, nullptr, nullptr,
                 nullptr};
  Call many = one;
  many.batch = 64;
  expect(gpu_plan(one, p, ML_CUDA_SCRATCH_FLOATS_SM90, nullptr, &bp, nullptr, true) &&
             bp.launch == Launch::kBlocked && bp.kernel == -1,
         "eigh 100 x1: a blocked plan");
  expect(gpu_plan(many, p, ML_CUDA_SCRATCH_FLOATS_SM90, nullptr, &tp, nullptr, true) &&
             tp.launch == Launch::kBlock && tp.kernel >= 0,
         "eigh 100 x64: a block launch of a table line");
  g_cuda.blocked = false;
}

void test_alt_routing() {
  const auto dev = ML_MEMORY_CUDA;
  // gpu_alt_min_n..gpu_alt_max_n: the op's next GROUP line that covers the shape instead of its
  // first, on the H200's budget (eigh_tridiag_bisect fits up to 137, the others up to 235+).
  policy::Resolved p = pol(8, 0, 1);
  p.value[policy::kGpuAltMinN] = 64;
  p.value[policy::kGpuAltMaxN] = 137;
  struct Case {
    int32_t op;
    int64_t m, n;
    int32_t flags;
    const char *want;
  };
  const Case cases[] = {
      {ML_OP_EIGH, 64, 64, ML_LOWER, "cuda:eigh_tridiag_bisect"},
      {ML_OP_EIGH, 137, 137, ML_LOWER, "cuda:eigh_tridiag_bisect"},
      {ML_OP_EIGH, 63, 63, ML_LOWER, "cuda:eigh_tridiag_ql"},     // below the window
      {ML_OP_EIGVALSH, 100, 100, ML_LOWER, "cuda:eigvalsh_tridiag_ql"},
      {ML_OP_EIGVALSH, 138, 138, ML_LOWER, "cuda:eigvalsh_tridiag_bisect"},  // above it
      {ML_OP_SVDVALS, 100, 100, 0, "cuda:svdvals_jacobi_group"},
      {ML_OP_SVD, 100, 100, 0, "cuda:svd_jacobi_group"},
      {ML_OP_SVD, 63, 63, 0, "cuda:svd_bidiag_qr"},  // below the window: the first line
      {ML_OP_QR, 100, 100, ML_QR_REDUCED, "cuda:qr_householder"},
  };
  for (const Case &k : cases)
    for (const int64_t batch : {int64_t{1}, int64_t{64}})
      expect(name_of(k.op, k.m, k.n, batch, k.flags, dev, p) == k.want,
             std::string(op_name(k.op)) + " " + std::to_string(k.n) + " x" +
                 std::to_string(batch) + ", alternative lines for 64..137: " + k.want);
  // The batch bound: up to gpu_alt_max_batch only.
  policy::Resolved bounded = p;
  bounded.value[policy::kGpuAltMaxBatch] = 64;
  expect(name_of(ML_OP_EIGH, 100, 100, 64, ML_LOWER, dev, bounded) == "cuda:eigh_tridiag_bisect",
         "eigh 100 x64, alternative up to batch 64: eigh_tridiag_bisect");
  expect(name_of(ML_OP_EIGH, 100, 100, 65, ML_LOWER, dev, bounded) == "cuda:eigh_tridiag_ql",
         "eigh 100 x65, alternative up to batch 64: eigh_tridiag_ql");
  // A wider window than the alternative's own: beyond 137 eigh has no second line, so the
  // first covers it.
  policy::Resolved wide = p;
  wide.value[policy::kGpuAltMaxN] = 1 << 20;
  expect(name_of(ML_OP_EIGH, 200, 200, 64, ML_LOWER, dev, wide) == "cuda:eigh_tridiag_ql",
         "eigh 200 x64, window to 2^20: eigh_tridiag_ql (the alternative does not fit)");
  // Off (the default 0 / 0): the first line.
  const policy::Resolved off = pol(8, 0, 1);
  expect(name_of(ML_OP_EIGH, 100, 100, 64, ML_LOWER, dev, off) == "cuda:eigh_tridiag_ql",
         "eigh 100 x64, no window: eigh_tridiag_ql");
  expect(name_of(ML_OP_EIGVALSH, 100, 100, 64, ML_LOWER, dev, off) == "cuda:eigvalsh_tridiag_bisect",
         "eigvalsh 100 x64, no window: eigvalsh_tridiag_bisect");
  // The blocked rectangle comes first; the window applies below it.
  policy::Resolved both = p;
  both.value[policy::kGpuBlockedMinN] = 138;
  both.value[policy::kGpuBlockedMaxBatch] = 64;
  g_cuda.blocked = true;
  expect(name_of(ML_OP_EIGH, 128, 128, 64, ML_LOWER, dev, both) == "cuda:eigh_tridiag_bisect",
         "eigh 128 x64, blocked from 138: eigh_tridiag_bisect");
  expect(name_of(ML_OP_EIGH, 192, 192, 64, ML_LOWER, dev, both) == "cuda:blocked_eigh",
         "eigh 192 x64, blocked from 138: blocked");
  expect(name_of(ML_OP_EIGH, 192, 192, 65, ML_LOWER, dev, both) == "cuda:eigh_tridiag_ql",
         "eigh 192 x65, blocked up to 64: eigh_tridiag_ql");
  g_cuda.blocked = false;
  // Lane launches follow the lane fields whichever line is taken.
  policy::Resolved lanes = p;
  lanes.value[policy::kGpuAltMinN] = 1;  // (unbounded batch)
  lanes.value[policy::kGpuLaneMaxN] = 12;
  lanes.value[policy::kGpuLaneMinBatch] = 1000;
  expect(name_of(ML_OP_EIGH, 12, 12, 4096, ML_LOWER, dev, lanes) == "cuda:eigh_tridiag_bisect/lane",
         "eigh 12 x4096, window from 1, lanes to 12: eigh_tridiag_bisect/lane");
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
  // Global launches: a lane per row of the larger side plus a warp, at most 1024.
  expect(group_size_global(300, 300) == 352, "global 300: 320 + 32 lanes");
  expect(group_size_global(513, 257) == 576, "global 513x257: 544 + 32 lanes");
  expect(group_size_global(4096, 4096) == 1024, "global 4096: 1024 lanes");
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
  ml::test_blocked_routing();
  ml::test_blocked_max_batch();
  ml::test_alt_routing();
  ml::test_linsys_defaults();
  ml::test_global_routing();
  ml::test_cuda_launch();
  ml::test_metal_launch();
  ml::test_output_shape();
  std::printf("backends: %d checks, %d failures\n", ml::g_checks, ml::g_failures);
  return ml::g_failures == 0 ? 0 : 1;
}
