// One call of the core's C API for a Spec, on host or device pointers (the exec says which).
#pragma once

#include <cstdint>
#include <vector>

#include "metal_linalg/metal_linalg.h"
#include "primitive.h"

namespace mlext {

// The core's output buffers in the C API's order (q/w/u, r/v/s, vt), null where unused.
struct CorePointers {
  float *out[3] = {nullptr, nullptr, nullptr};
  int32_t *info = nullptr;
};

// Maps the primitive's outputs (see output_shapes) to the core's arguments.
// ptr(array&) gives the buffer address (host or device).
template <class Ptr>
CorePointers output_pointers(const Spec &spec, std::vector<mx::array> &outputs, Ptr ptr) {
  CorePointers p;
  auto f = [&](size_t i) { return static_cast<float *>(ptr(outputs[i])); };
  switch (spec.op) {
    case ML_OP_QR:
      if (spec.flags == ML_QR_R) {
        p.out[1] = f(0);
      } else {
        p.out[0] = f(0);
        p.out[1] = f(1);
      }
      break;
    case ML_OP_EIGH:
      p.out[0] = f(0);
      p.out[1] = f(1);
      break;
    case ML_OP_EIGVALSH:
      p.out[0] = f(0);
      break;
    case ML_OP_SVD:
      p.out[0] = f(0);
      p.out[1] = f(1);
      p.out[2] = f(2);
      break;
    case ML_OP_SVDVALS:
      p.out[1] = f(0);
      break;
  }
  if (spec.with_info) p.info = static_cast<int32_t *>(ptr(outputs.back()));
  return p;
}

inline ml_status run_core(const ml_exec *exec, const Spec &spec, const float *a, int64_t batch,
                          int64_t m, int64_t n, const CorePointers &p) {
  switch (spec.op) {
    case ML_OP_QR:
      return ml_qr(exec, a, batch, m, n, spec.flags, p.out[0], p.out[1], p.info);
    case ML_OP_EIGH:
      return ml_eigh(exec, a, batch, n, spec.flags, p.out[0], p.out[1], p.info);
    case ML_OP_EIGVALSH:
      return ml_eigvalsh(exec, a, batch, n, spec.flags, p.out[0], p.info);
    case ML_OP_SVD:
      return ml_svd(exec, a, batch, m, n, spec.flags, p.out[0], p.out[1], p.out[2], p.info);
    case ML_OP_SVDVALS:
      return ml_svdvals(exec, a, batch, m, n, p.out[1], p.info);
    default:
      return ML_INVALID_ARGUMENT;
  }
}

}  // namespace mlext
