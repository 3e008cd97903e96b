// MLX's CUDA backend: the core's CUDA kernels enqueued on MLX's CUDA stream through the C API's
// device-memory exec mode (ML_MEMORY_CUDA). Buffers come from MLX's allocator; the input,
// outputs and workspace are registered with MLX's command encoder; the launches are captured
// into MLX's CUDA graph (the encoder's capture context), so they run in order with the MLX ops
// around them. Nothing here waits for the GPU.
//
// The first launch of each kernel kind (the core's launch name, e.g. "cuda:eigh_jacobi_small/lane")
// is not captured: it goes straight onto MLX's stream after committing the work MLX has
// encoded so far, so the kernel's module loading and shared-memory attribute setting happen
// outside any stream capture. Stream order keeps it between the MLX work before and after it.
//
// MLX's allocator hands out unified (managed) memory to code outside libmlx; the kernels use
// it through its device address.
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "core_call.h"
#include "gpu_eval.h"
#include "mlx/allocator.h"
#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"

namespace mlext {

const char *gpu_path() { return "cuda"; }

bool gpu_covers(const Spec &spec, int64_t batch, int64_t m, int64_t n) {
  if (!ml_backend_available("cuda")) return false;
  ml_exec ex;
  std::memset(&ex, 0, sizeof ex);
  ex.memory = ML_MEMORY_CUDA;
  CorePlan plan;
  return plan_core(&ex, spec, batch, m, n, &plan) == ML_OK && plan.on_device;
}

namespace {

// True the first time a launch kind (op, flags and the core's launch name) is seen.
bool first_launch_of_kind(const Spec &spec, const char *plan_name) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::string key = std::to_string(spec.op) + "/" + std::to_string(spec.flags) + "/" +
                    (plan_name != nullptr ? plan_name : "");
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(std::move(key)).second;
}

}  // namespace

void eval_gpu(const mx::Stream &stream, const Spec &spec, const std::vector<mx::array> &inputs,
              std::vector<mx::array> &outputs) {
  const mx::array &a = inputs[0];
  const auto [batch, m, n] = gpu_input(spec, a);

  auto &enc = mx::cu::get_command_encoder(stream);
  for (auto &o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));

  ml_exec ex;
  std::memset(&ex, 0, sizeof ex);
  ex.memory = ML_MEMORY_CUDA;
  ex.device = enc.device().cuda_device();
  ex.stream = static_cast<cudaStream_t>(enc.stream());
  // Device workspace (the core's global launches: a group kernel's scratch in device memory,
  // at most about 1 GiB): an MLX array from MLX's allocator, held by the encoder as a temporary
  // until the work that uses it has completed. It is registered after the launch below, so that
  // an uncaptured first launch (after enc.commit()) is covered by the next commit's completion,
  // not by the one just committed.
  CorePlan plan;
  if (plan_core(&ex, spec, batch, m, n, &plan) != ML_OK)
    throw std::runtime_error(error_message(spec.op, ml_last_error()));
  const int64_t ws_bytes = plan.workspace_bytes;
  const bool first = first_launch_of_kind(spec, plan.name);
  std::optional<mx::array> ws;
  if (ws_bytes > 0) {
    if (ws_bytes > std::numeric_limits<int32_t>::max())
      throw std::runtime_error(error_message(spec.op, "workspace above 2 GiB"));
    ws.emplace(mx::allocator::malloc(static_cast<size_t>(ws_bytes)),
               mx::Shape{static_cast<int32_t>(ws_bytes)}, mx::uint8);
    ex.workspace = mx::gpu_ptr<void>(*ws);
    ex.workspace_bytes = ws_bytes;
  }

  enc.set_input_array(a);
  for (auto &o : outputs) enc.set_output_array(o);
  const CorePointers p =
      output_pointers(spec, outputs, [](mx::array &o) { return mx::gpu_ptr<void>(o); });
  std::string error;
  if (first) {
    enc.commit();
    if (run_core(&ex, spec, mx::gpu_ptr<float>(a), batch, m, n, p) != ML_OK)
      error = error_message(spec.op, ml_last_error());
  } else {
    auto capture = enc.capture_context();
    if (run_core(&ex, spec, mx::gpu_ptr<float>(a), batch, m, n, p) != ML_OK) {
      error = error_message(spec.op, ml_last_error());
      capture.discard = true;
    }
  }
  if (ws) enc.add_temporary(*ws);
  if (!error.empty()) throw std::runtime_error(error);
}

}  // namespace mlext
