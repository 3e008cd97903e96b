// The core's C API calls of a node, on host or device pointers (the exec says which): ml_run
// with the outputs in the op table's order, which is also the primitive's order.
//
// A node is one ml_run call (Variant kCore and kTriInv) or a short list of them (kCholeskyInv:
// two triangular solves through a scratch matrix); steps() lists them, each naming where its
// A and B come from (a node input or the scratch) and where its output goes (the node's outputs
// or the scratch). Every backend (eval_cpu, eval_gpu) runs the same list.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "metal_linalg/metal_linalg.h"
#include "primitive.h"

namespace mlext {

// The core's outputs in the op table's order (ml_output_desc), null where the op has none
// under spec.flags (q of qr mode 'r').
struct CorePointers {
  float *out[3] = {nullptr, nullptr, nullptr};
  int32_t *info = nullptr;
};

// Whether output `index` of op exists under flags.
inline bool has_output(int op, int flags, int index) {
  int32_t ndim = 0;
  return ml_output_desc(op, flags, index, nullptr, &ndim, nullptr, nullptr) == ML_OK && ndim > 0;
}
inline bool has_output(const Spec &spec, int index) {
  return has_output(spec.op, spec.flags, index);
}

// Maps the primitive's outputs (see output_shapes: the table's outputs that exist, then info)
// to ml_run's. ptr(array&) gives the buffer address (host or device).
template <class Ptr>
CorePointers output_pointers(const Spec &spec, std::vector<mx::array> &outputs, Ptr ptr) {
  CorePointers p;
  size_t next = 0;
  const int count = ml_output_count(spec.op);
  for (int i = 0; i < count && i < 3; ++i)
    if (has_output(spec, i)) p.out[i] = static_cast<float *>(ptr(outputs[next++]));
  if (spec.with_info) p.info = static_cast<int32_t *>(ptr(outputs.back()));
  return p;
}

// Where a step reads B from.
constexpr int kNoInput = -1;  // the op has one input
constexpr int kScratch = -2;  // the node's scratch matrix (written by an earlier step)

// One ml_run call of a node. a, b: node input indices (b also kNoInput or kScratch);
// to_scratch: the output goes to the scratch matrix instead of the node's outputs (and the
// step writes no info); otherwise the node's outputs and info are this step's.
struct Step {
  int op = ML_OP_QR;
  int flags = 0;
  int a = 0;
  int b = kNoInput;
  bool to_scratch = false;
};

// A node's steps in a fixed array (a node has at most two), so listing them allocates nothing.
struct StepList {
  static constexpr int kMax = 2;
  Step step[kMax];
  int count = 0;
  const Step *begin() const { return step; }
  const Step *end() const { return step + count; }
  size_t size() const { return static_cast<size_t>(count); }
  const Step &operator[](size_t i) const { return step[i]; }
};

// The steps of a node of spec (see Variant).
inline StepList step_list(const Spec &spec) {
  StepList l;
  if (spec.variant == kCholeskyInv) {
    l.step[0] = Step{ML_OP_SOLVE_TRIANGULAR, 0, 0, 2, true};
    l.step[1] = Step{ML_OP_SOLVE_TRIANGULAR, ML_LS_UPPER, 1, kScratch, false};
    l.count = 2;
    return l;
  }
  const bool rhs = ml_op_inputs(spec.op) > 1;
  l.step[0] = Step{spec.op, spec.flags, 0, rhs ? 1 : kNoInput, false};
  l.count = 1;
  return l;
}
inline std::vector<Step> steps(const Spec &spec) {
  const StepList l = step_list(spec);
  return std::vector<Step>(l.begin(), l.end());
}

// Floats of the node's scratch matrix (0 when its steps use none): one n x n matrix per batch
// entry.
inline int64_t scratch_floats(const Spec &spec, const Sizes &s) {
  return spec.variant == kCholeskyInv ? s.batch * s.n * s.n : 0;
}

// ml_run's sizes for a step: {batch, m, n, nrhs}; a step of kCholeskyInv solves n x n systems
// with n right-hand sides.
inline void step_sizes(const Spec &spec, const Sizes &s, int64_t out[4]) {
  out[0] = s.batch;
  out[1] = s.m;
  out[2] = s.n;
  out[3] = spec.variant == kCholeskyInv ? s.n : s.nrhs;
}

inline ml_status run_step(const ml_exec *exec, const Spec &spec, const Step &step,
                          const Sizes &s, const float *a, const float *b, const CorePointers &p) {
  int64_t sizes[4];
  step_sizes(spec, s, sizes);
  const float *inputs[2] = {a, b};
  return ml_run(exec, step.op, inputs, sizes, step.flags, p.out, p.info);
}

// The core's plan for spec on device memory `memory` (device 0): whether every step runs
// there, the largest workspace a step needs and the last step's launch name, from one routing
// decision per step (ml_plan).
struct CorePlan {
  bool on_device = false;
  int64_t workspace_bytes = 0;
  const char *name = "";
};

inline ml_status plan_step(const ml_exec *exec, const Spec &spec, const Step &step,
                           const Sizes &s, CorePlan *out) {
  int64_t sizes[4];
  step_sizes(spec, s, sizes);
  int32_t memory = ML_MEMORY_HOST;
  int64_t bytes = 0;
  const ml_status st = ml_plan(exec, step.op, sizes, step.flags, &memory, &bytes, &out->name);
  out->on_device = st == ML_OK && exec != nullptr && memory == exec->memory &&
                   memory != ML_MEMORY_HOST;
  out->workspace_bytes = bytes;
  return st;
}

inline ml_status plan_core(const ml_exec *exec, const Spec &spec, const Sizes &s,
                           CorePlan *out) {
  CorePlan all;
  all.on_device = true;
  for (const Step &step : step_list(spec)) {
    CorePlan one;
    const ml_status st = plan_step(exec, spec, step, s, &one);
    if (st != ML_OK) {
      *out = one;
      return st;
    }
    all.on_device = all.on_device && one.on_device;
    all.workspace_bytes = std::max(all.workspace_bytes, one.workspace_bytes);
    all.name = one.name;
  }
  *out = all;
  return ML_OK;
}

}  // namespace mlext
