// MLX's Metal backend: the core's Metal kernels encoded into MLX's own command encoder for the
// primitive's stream, through the C API's Metal exec mode (ML_MEMORY_METAL with an
// ml_metal_stream whose encoder_ops forward to metal::CommandEncoder's public methods; MLX keeps
// the raw MTL::ComputeCommandEncoder private). Outputs come from MLX's allocator; the input and
// outputs are registered with the encoder (set_input_array / set_output_array) before
// anything is dispatched, so MLX's hazard tracking orders the dispatches
// with the MLX work around them. Nothing is committed or waited for here: MLX commits its
// command buffer as for its own kernels.
//
// The core's pipelines are created on the core's Metal device (the system default device),
// which is the device MLX uses on Apple silicon (one GPU).
//
// Type-checked on Linux against the metal-cpp and MLX Metal headers of mlx-metal 0.32.4
// (tools/check_metal_host.sh); never compiled by Apple's compiler nor run.
#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "core_call.h"
#include "gpu_eval.h"
#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"

namespace mlext {

const char *gpu_path() { return "metal"; }

bool gpu_covers(const Spec &spec, const Sizes &sizes) {
  if (!ml_backend_available("metal")) return false;
  ml_exec ex;
  std::memset(&ex, 0, sizeof ex);
  ex.memory = ML_MEMORY_METAL;
  CorePlan plan;
  return plan_core(&ex, spec, sizes, &plan) == ML_OK && plan.on_device;
}

namespace {

// The encoder_ops callbacks: user is MLX's metal::CommandEncoder.
mx::metal::CommandEncoder &encoder_of(void *user) {
  return *static_cast<mx::metal::CommandEncoder *>(user);
}

void set_pipeline(void *user, void *pipeline) {
  encoder_of(user).set_compute_pipeline_state(static_cast<MTL::ComputePipelineState *>(pipeline));
}

void set_buffer(void *user, void *buffer, int64_t offset, int32_t index) {
  if (buffer == nullptr) return;  // an absent output: the kernel does not read that index
  encoder_of(user).set_buffer(static_cast<const MTL::Buffer *>(buffer), index, offset);
}

void set_bytes(void *user, const void *bytes, int64_t length, int32_t index) {
  encoder_of(user).set_bytes(static_cast<const char *>(bytes), static_cast<int>(length), index);
}

void dispatch_threadgroups(void *user, int64_t groups, int64_t threads_per_group) {
  encoder_of(user).dispatch_threadgroups(MTL::Size(NS::UInteger(groups), 1, 1),
                                         MTL::Size(NS::UInteger(threads_per_group), 1, 1));
}

// Between two steps of a blocked plan (each reads what the previous one wrote to the
// workspace, which MLX's hazard tracking does not see: it is bound with set_buffer).
void barrier(void *user) { encoder_of(user).barrier(); }

// The MTL::Buffer of an array (null when it has none).
void *buffer_of(const mx::array &x) { return const_cast<void *>(x.buffer().ptr()); }

// A buffer of `bytes` from MLX's allocator, kept alive by the encoder until the command buffer
// completes.
mx::array encoder_buffer(mx::metal::CommandEncoder &enc, int64_t bytes, const Spec &spec,
                         const char *what) {
  if (bytes > std::numeric_limits<int32_t>::max())
    throw std::runtime_error(error_message(spec, (std::string(what) + " above 2 GiB").c_str()));
  mx::array buf(mx::allocator::malloc(static_cast<size_t>(bytes)),
                mx::Shape{static_cast<int32_t>(bytes)}, mx::uint8);
  enc.add_temporary(buf);
  return buf;
}

}  // namespace

void eval_gpu(const mx::Stream &stream, const Spec &spec, const std::vector<mx::array> &inputs,
              std::vector<mx::array> &outputs) {
  const Sizes sizes = gpu_input(spec, inputs);

  auto &enc = mx::metal::get_command_encoder(stream);
  for (auto &o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));

  ml_metal_encoder_ops ops;
  std::memset(&ops, 0, sizeof ops);
  ops.user = &enc;
  ops.set_pipeline = set_pipeline;
  ops.set_buffer = set_buffer;
  ops.set_bytes = set_bytes;
  ops.dispatch_threadgroups = dispatch_threadgroups;
  ops.barrier = barrier;

  // The node's inputs and outputs are registered with the encoder before the core dispatches
  // (the core binds every buffer at its kernels' own index on each dispatch: a at 0, b at 3,
  // the outputs at 1..3, info at 4). The core gets each array's MTL::Buffer handle, and the
  // ml_metal_stream the data's byte offset, in the table's order.
  const std::vector<Step> list = steps(spec);
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool is_b = false;
    for (const Step &step : list) is_b = is_b || step.b == static_cast<int>(i);
    if (buffer_of(inputs[i]) != nullptr) enc.set_input_array(inputs[i], is_b ? 3 : 0);
  }
  const CorePointers slots =
      output_pointers(spec, outputs, [](mx::array &o) { return static_cast<void *>(&o); });
  auto array_in = [](const void *slot) {
    return static_cast<mx::array *>(const_cast<void *>(slot));
  };
  CorePointers p;
  int64_t out_offset[3] = {0, 0, 0}, info_offset = 0;
  for (int k = 0; k < 3; ++k) {
    mx::array *o = array_in(slots.out[k]);
    if (o == nullptr || buffer_of(*o) == nullptr) continue;
    enc.set_output_array(*o, k + 1);
    p.out[k] = static_cast<float *>(buffer_of(*o));
    out_offset[k] = o->offset();
  }
  if (mx::array *o = array_in(slots.info); o != nullptr && buffer_of(*o) != nullptr) {
    enc.set_output_array(*o, 4);
    p.info = static_cast<int32_t *>(buffer_of(*o));
    info_offset = o->offset();
  }

  ml_exec ex;
  std::memset(&ex, 0, sizeof ex);
  ex.memory = ML_MEMORY_METAL;
  ex.device = 0;
  // The workspace of a blocked plan (large matrices; the largest any step needs) and the node's
  // scratch matrix between its steps (cholesky_inv): MLX arrays from MLX's allocator, kept alive
  // by the encoder until the command buffer completes.
  int64_t ws_bytes = 0;
  for (const Step &step : list) {
    CorePlan plan;
    if (plan_step(&ex, spec, step, sizes, &plan) != ML_OK)
      throw std::runtime_error(error_message(spec, ml_last_error()));
    ws_bytes = std::max(ws_bytes, plan.workspace_bytes);
  }
  if (ws_bytes > 0) {
    ex.workspace = buffer_of(encoder_buffer(enc, ws_bytes, spec, "workspace"));
    ex.workspace_bytes = ws_bytes;
  }
  void *scratch = nullptr;
  if (const int64_t floats = scratch_floats(spec, sizes); floats > 0)
    scratch = buffer_of(encoder_buffer(enc, floats * 4, spec, "scratch"));

  for (size_t i = 0; i < list.size(); ++i) {
    const Step &step = list[i];
    ml_metal_stream ms;
    std::memset(&ms, 0, sizeof ms);
    ms.encoder_ops = &ops;
    ex.stream = &ms;
    const mx::array &a = inputs[step.a];
    ms.a_offset = a.offset();
    const float *b = nullptr;
    if (step.b == kScratch) {
      b = static_cast<const float *>(scratch);
    } else if (step.b >= 0) {
      b = static_cast<const float *>(buffer_of(inputs[step.b]));
      ms.b_offset = inputs[step.b].offset();
    }
    CorePointers q = p;
    if (step.to_scratch) {
      q = CorePointers{};
      q.out[0] = static_cast<float *>(scratch);
    } else {
      for (int k = 0; k < 3; ++k) ms.out_offset[k] = out_offset[k];
      ms.info_offset = info_offset;
    }
    // A step reads the scratch an earlier step wrote, which MLX's hazard tracking does not see
    // (the core binds it with set_buffer).
    if (i > 0) enc.barrier();
    if (run_step(&ex, spec, step, sizes, static_cast<const float *>(buffer_of(a)), b, q) != ML_OK)
      throw std::runtime_error(error_message(spec, ml_last_error()));
  }
}

}  // namespace mlext
