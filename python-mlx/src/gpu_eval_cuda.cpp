// MLX's CUDA backend: the core's CUDA kernels enqueued on MLX's CUDA stream through the C API's
// device-memory exec mode (ML_MEMORY_CUDA). Buffers come from MLX's allocator; the input,
// outputs and workspace are registered with MLX's command encoder; the launches are captured
// into MLX's CUDA graph (the encoder's capture context), so they run in order with the MLX ops
// around them. Nothing here waits for the GPU.
//
// The first launch of each kernel kind (op, flags and the core's launch name, e.g.
// "cuda:eigh_jacobi_small/lane") is not captured: it goes straight onto MLX's stream after
// committing the work MLX has encoded so far, so the kernel's module loading and shared-memory
// attribute setting happen outside any stream capture. Stream order keeps it between the MLX work
// before and after it.
//
// A node of several steps (cholesky_inv: two triangular solves through a scratch matrix) goes
// whole one way or the other: every step straight onto the stream (when any of its kinds is new),
// or all of them in one capture, so they form one graph node in which they run in order. MLX's
// encoder orders graph nodes only by the arrays registered with it, and the scratch matrix is not
// one of them: captured one step a node, the second step could run beside the first, and MLX's
// later readers of the output would wait for the first step only.
//
// METAL_LINALG_MLX_CUDA_LAUNCH (read once per process) picks how the launches reach the stream:
//   capture  (default, also when unset) as above: captured into MLX's graph after the first
//            launch of a kind.
//   direct   every launch as a first launch: commit MLX's encoder (which launches the graph MLX
//            has recorded so far), then launch straight onto its stream. The node adds nothing to
//            MLX's graph, so an evaluation holding only this node launches no graph; a node
//            between MLX ops splits MLX's graph in two. Stream order keeps it correct.
// Any other value warns once on stderr and uses capture.
//
// Per call: one ml_plan per step here (for the workspace size and the launch name), and the
// routing ml_run does itself (the C API takes no plan). The seen launch kinds are a small
// append-only table read without a lock.
//
// MLX's allocator hands out unified (managed) memory to code outside libmlx; the kernels use
// it through its device address.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "core_call.h"
#include "gpu_eval.h"
#include "mlx/allocator.h"
#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"

namespace mlext {

const char *gpu_path() { return "cuda"; }

bool gpu_covers(const Spec &spec, const Sizes &sizes) {
  if (!ml_backend_available("cuda")) return false;
  ml_exec ex;
  std::memset(&ex, 0, sizeof ex);
  ex.memory = ML_MEMORY_CUDA;
  CorePlan plan;
  return plan_core(&ex, spec, sizes, &plan) == ML_OK && plan.on_device;
}

namespace {

// How the launches reach MLX's stream (METAL_LINALG_MLX_CUDA_LAUNCH, see the top of the file).
enum class Launch { kCapture, kDirect };

Launch launch_mode() {
  static const Launch mode = [] {
    const char *v = std::getenv("METAL_LINALG_MLX_CUDA_LAUNCH");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "capture") == 0) return Launch::kCapture;
    if (std::strcmp(v, "direct") == 0) return Launch::kDirect;
    std::fprintf(stderr,
                 "metal_linalg: METAL_LINALG_MLX_CUDA_LAUNCH='%s' is not capture or direct: "
                 "capture used\n",
                 v);
    return Launch::kCapture;
  }();
  return mode;
}

// The launch kinds seen so far: an append-only table. Readers scan the published entries
// without a lock (count_ is stored with release after the entry); writers append under mu_.
// The entries live for the process (a handful of kinds). Past kCapacity a kind is reported as
// new every time: its launches then all go straight onto the stream, which is always safe.
class SeenKinds {
 public:
  // True the first time (op, flags, name) is seen.
  bool first_time(int op, int flags, const char *name) {
    if (name == nullptr) name = "";
    if (contains(count_.load(std::memory_order_acquire), op, flags, name)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    const int n = count_.load(std::memory_order_relaxed);
    if (contains(n, op, flags, name)) return false;
    if (n == kCapacity) return true;
    entry_[n] = new Kind{op, flags, name};
    count_.store(n + 1, std::memory_order_release);
    return true;
  }

 private:
  struct Kind {
    int op;
    int flags;
    std::string name;
  };
  static constexpr int kCapacity = 256;

  bool contains(int n, int op, int flags, const char *name) const {
    for (int i = 0; i < n; ++i) {
      const Kind *k = entry_[i];
      if (k->op == op && k->flags == flags && k->name == name) return true;
    }
    return false;
  }

  std::mutex mu_;
  std::atomic<int> count_{0};
  const Kind *entry_[kCapacity] = {};
};

SeenKinds g_seen;

// A device buffer of `bytes` from MLX's allocator, as an array the encoder can hold.
mx::array device_buffer(int64_t bytes, const Spec &spec, const char *what) {
  if (bytes > std::numeric_limits<int32_t>::max())
    throw std::runtime_error(error_message(spec, (std::string(what) + " above 2 GiB").c_str()));
  return mx::array(mx::allocator::malloc(static_cast<size_t>(bytes)),
                   mx::Shape{static_cast<int32_t>(bytes)}, mx::uint8);
}

}  // namespace

void eval_gpu(const mx::Stream &stream, const Spec &spec, const std::vector<mx::array> &inputs,
              std::vector<mx::array> &outputs) {
  const Sizes sizes = gpu_input(spec, inputs);
  const bool direct = launch_mode() == Launch::kDirect;

  auto &enc = mx::cu::get_command_encoder(stream);
  for (auto &o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));

  ml_exec ex;
  std::memset(&ex, 0, sizeof ex);
  ex.memory = ML_MEMORY_CUDA;
  ex.device = enc.device().cuda_device();
  ex.stream = static_cast<cudaStream_t>(enc.stream());
  // Device workspace (the core's global launches: a group kernel's scratch in device memory,
  // at most about 1 GiB; the largest any step needs) and the node's scratch matrix between its
  // steps (cholesky_inv): MLX arrays from MLX's allocator, held by the encoder as temporaries
  // until the work that uses them has completed. They are registered after the launches below,
  // so that an uncaptured launch (after enc.commit()) is covered by the next commit's
  // completion, not by the one just committed.
  const StepList list = step_list(spec);
  bool uncaptured = direct;  // every step straight onto the stream (see the top of the file)
  int64_t ws_bytes = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Step &step = list[i];
    CorePlan plan;
    if (plan_step(&ex, spec, step, sizes, &plan) != ML_OK)
      throw std::runtime_error(error_message(spec, ml_last_error()));
    ws_bytes = std::max(ws_bytes, plan.workspace_bytes);
    // plan.name is valid until the next C API call: used here, before it. Every step's kind is
    // recorded, also after the first new one.
    const bool new_kind = g_seen.first_time(step.op, step.flags, plan.name);
    uncaptured = uncaptured || new_kind;
  }
  std::optional<mx::array> ws, scratch;
  if (ws_bytes > 0) {
    ws.emplace(device_buffer(ws_bytes, spec, "workspace"));
    ex.workspace = mx::gpu_ptr<void>(*ws);
    ex.workspace_bytes = ws_bytes;
  }
  if (const int64_t floats = scratch_floats(spec, sizes); floats > 0)
    scratch.emplace(device_buffer(floats * 4, spec, "scratch"));

  // The encoder's input and output registration only places graph nodes after the ones that
  // make their inputs and before the ones that read their outputs; in direct mode this node adds
  // no graph node (its launches follow the committed graph on the stream, and later graphs
  // follow them), so it registers nothing there.
  if (!direct) {
    for (const auto &x : inputs) enc.set_input_array(x);
    for (auto &o : outputs) enc.set_output_array(o);
  }
  const CorePointers p =
      output_pointers(spec, outputs, [](mx::array &o) { return mx::gpu_ptr<void>(o); });
  std::string error;
  // The steps in order on one stream (straight onto MLX's, or into one capture).
  auto run_steps = [&] {
    float *z = scratch ? mx::gpu_ptr<float>(*scratch) : nullptr;
    for (size_t i = 0; i < list.size() && error.empty(); ++i) {
      const Step &step = list[i];
      const float *a = mx::gpu_ptr<float>(inputs[step.a]);
      const float *b = step.b == kScratch ? z
                       : step.b >= 0      ? mx::gpu_ptr<float>(inputs[step.b])
                                          : nullptr;
      CorePointers q = p;
      if (step.to_scratch) {
        q = CorePointers{};
        q.out[0] = z;
      }
      if (run_step(&ex, spec, step, sizes, a, b, q) != ML_OK)
        error = error_message(spec, ml_last_error());
    }
  };
  if (uncaptured) {
    // Launches the graph MLX has recorded so far; the steps follow it on the stream.
    enc.commit();
    run_steps();
  } else {
    auto capture = enc.capture_context();
    run_steps();
    if (!error.empty()) capture.discard = true;
  }
  if (ws) enc.add_temporary(*ws);
  if (scratch) enc.add_temporary(*scratch);
  if (!error.empty()) throw std::runtime_error(error);
}

}  // namespace mlext
