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
#include <algorithm>
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

bool gpu_covers(const Spec &spec, const Sizes &sizes) {
  if (!ml_backend_available("cuda")) return false;
  ml_exec ex;
  std::memset(&ex, 0, sizeof ex);
  ex.memory = ML_MEMORY_CUDA;
  CorePlan plan;
  return plan_core(&ex, spec, sizes, &plan) == ML_OK && plan.on_device;
}

namespace {

// True the first time a launch kind (op, flags and the core's launch name) is seen.
bool first_launch_of_kind(const Step &step, const char *plan_name) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::string key = std::to_string(step.op) + "/" + std::to_string(step.flags) + "/" +
                    (plan_name != nullptr ? plan_name : "");
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(std::move(key)).second;
}

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
  // so that an uncaptured first launch (after enc.commit()) is covered by the next commit's
  // completion, not by the one just committed.
  const std::vector<Step> list = steps(spec);
  std::vector<bool> first;
  int64_t ws_bytes = 0;
  for (const Step &step : list) {
    CorePlan plan;
    if (plan_step(&ex, spec, step, sizes, &plan) != ML_OK)
      throw std::runtime_error(error_message(spec, ml_last_error()));
    ws_bytes = std::max(ws_bytes, plan.workspace_bytes);
    first.push_back(first_launch_of_kind(step, plan.name));
  }
  std::optional<mx::array> ws, scratch;
  if (ws_bytes > 0) {
    ws.emplace(device_buffer(ws_bytes, spec, "workspace"));
    ex.workspace = mx::gpu_ptr<void>(*ws);
    ex.workspace_bytes = ws_bytes;
  }
  if (const int64_t floats = scratch_floats(spec, sizes); floats > 0)
    scratch.emplace(device_buffer(floats * 4, spec, "scratch"));

  for (const auto &x : inputs) enc.set_input_array(x);
  for (auto &o : outputs) enc.set_output_array(o);
  const CorePointers p =
      output_pointers(spec, outputs, [](mx::array &o) { return mx::gpu_ptr<void>(o); });
  std::string error;
  for (size_t i = 0; i < list.size() && error.empty(); ++i) {
    const Step &step = list[i];
    float *z = scratch ? mx::gpu_ptr<float>(*scratch) : nullptr;
    const float *a = mx::gpu_ptr<float>(inputs[step.a]);
    const float *b = step.b == kScratch ? z : step.b >= 0 ? mx::gpu_ptr<float>(inputs[step.b])
                                                          : nullptr;
    CorePointers q = p;
    if (step.to_scratch) {
      q = CorePointers{};
      q.out[0] = z;
    }
    if (first[i]) {
      enc.commit();
      if (run_step(&ex, spec, step, sizes, a, b, q) != ML_OK)
        error = error_message(spec, ml_last_error());
    } else {
      auto capture = enc.capture_context();
      if (run_step(&ex, spec, step, sizes, a, b, q) != ML_OK) {
        error = error_message(spec, ml_last_error());
        capture.discard = true;
      }
    }
  }
  if (ws) enc.add_temporary(*ws);
  if (scratch) enc.add_temporary(*scratch);
  if (!error.empty()) throw std::runtime_error(error);
}

}  // namespace mlext
