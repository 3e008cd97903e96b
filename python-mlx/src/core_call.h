// One call of the core's C API for a Spec, on host or device pointers (the exec says which):
// ml_run with the outputs in the op table's order, which is also the primitive's order.
#pragma once

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

// Whether output `index` of spec's op exists under its flags.
inline bool has_output(const Spec &spec, int index) {
  int32_t ndim = 0;
  return ml_output_desc(spec.op, spec.flags, index, nullptr, &ndim, nullptr, nullptr) == ML_OK &&
         ndim > 0;
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

inline ml_status run_core(const ml_exec *exec, const Spec &spec, const float *a, int64_t batch,
                          int64_t m, int64_t n, const CorePointers &p) {
  const int64_t sizes[3] = {batch, m, n};
  return ml_run(exec, spec.op, &a, sizes, spec.flags, p.out, p.info);
}

// The core's plan for spec on device memory `memory` (device 0): whether it runs there, its
// workspace and its launch name, from one routing decision (ml_plan).
struct CorePlan {
  bool on_device = false;
  int64_t workspace_bytes = 0;
  const char *name = "";
};

inline ml_status plan_core(const ml_exec *exec, const Spec &spec, int64_t batch, int64_t m,
                           int64_t n, CorePlan *out) {
  const int64_t sizes[3] = {batch, m, n};
  int32_t memory = ML_MEMORY_HOST;
  const ml_status st =
      ml_plan(exec, spec.op, sizes, spec.flags, &memory, &out->workspace_bytes, &out->name);
  out->on_device = st == ML_OK && memory == exec->memory && memory != ML_MEMORY_HOST;
  return st;
}

}  // namespace mlext
