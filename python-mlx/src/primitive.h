// metal_linalg's MLX primitive: one mlx::core::Primitive for the five decompositions.
//
// build() checks the arguments, puts the float32 cast and the row-contiguous copy into the
// graph as MLX ops and returns the primitive's outputs unevaluated. eval_cpu runs the core's
// host path as a task on MLX's CPU stream; eval_gpu (gpu_eval.h) runs the core's GPU kernels
// on MLX's GPU stream where this MLX flavour has a GPU path. Gradients (vjp, jvp) are written
// with MLX ops in grads.cpp.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "metal_linalg/metal_linalg.h"
#include "mlx/array.h"
#include "mlx/primitives.h"
#include "mlx/stream.h"

namespace mlext {

namespace mx = mlx::core;

// What one call computes. flags: qr mode (ML_QR_*), eigh/eigvalsh uplo (ML_LOWER/ML_UPPER),
// svd full_matrices (0/1); 0 for svdvals. with_info adds an int32 [...] output last: the core's
// per-matrix info word (ML_INFO_* bits, sweep count in bits 16..31).
struct Spec {
  int op = ML_OP_QR;
  int flags = 0;
  bool with_info = false;
  bool operator==(const Spec &o) const {
    return op == o.op && flags == o.flags && with_info == o.with_info;
  }
};

// "qr", "eigh", ... (the Python function names, used in error messages).
const char *op_name(int op);

// Error text for the user: the core's message with its "[metal_linalg::<where>] " tag replaced
// by the frontend's single "[metal_linalg.<op>] " prefix.
std::string error_message(int op, const char *core_message);

class LinalgPrimitive : public mx::Primitive {
 public:
  LinalgPrimitive(mx::Stream stream, Spec spec) : mx::Primitive(stream), spec_(spec) {}

  void eval_cpu(const std::vector<mx::array> &inputs, std::vector<mx::array> &outputs) override;
  void eval_gpu(const std::vector<mx::array> &inputs, std::vector<mx::array> &outputs) override;

  std::vector<mx::array> jvp(const std::vector<mx::array> &primals,
                             const std::vector<mx::array> &tangents,
                             const std::vector<int> &argnums) override;
  std::vector<mx::array> vjp(const std::vector<mx::array> &primals,
                             const std::vector<mx::array> &cotangents,
                             const std::vector<int> &argnums,
                             const std::vector<mx::array> &outputs) override;
  std::pair<std::vector<mx::array>, std::vector<int>> vmap(const std::vector<mx::array> &inputs,
                                                           const std::vector<int> &axes) override;

  const char *name() const override;
  bool is_equivalent(const mx::Primitive &other) const override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array> &inputs) override;

  const Spec &spec() const { return spec_; }

 private:
  Spec spec_;
};

// Output shapes of spec for an input of this shape, and the dtypes of its `count` outputs
// (float32 results, int32 info).
std::vector<mx::Shape> output_shapes(const Spec &spec, const mx::Shape &in);
std::vector<mx::Dtype> output_dtypes(const Spec &spec, size_t count);

// The lazy call: checks shapes and sizes (the core's own checks, raised now), then
// astype(float32) and contiguous() on the chosen stream, then the primitive. stream: the
// caller's stream, or the default stream of the default device. A GPU stream whose MLX flavour
// has no GPU path here, or for whose shape and batch the core names a CPU kernel, runs the
// primitive on the CPU stream instead (MLX orders the streams). A small call on a CPU stream
// whose input is evaluated, row-contiguous float32 and not traced runs at once and returns
// evaluated arrays (the same results; see runs_now in primitive.cpp).
std::vector<mx::array> build(const mx::array &a, Spec spec, std::optional<mx::Stream> stream);

// Empty results (a zero-size batch or matrix dimension): zeros of the output shapes.
bool is_empty(const mx::Shape &in);

// The stream the primitive runs on for a call on `requested` (see build()).
mx::Stream placement(const Spec &spec, const mx::Shape &in, mx::Stream requested);

// Thrown for a core error during graph construction; the bindings map it to Python.
struct CoreError : std::runtime_error {
  CoreError(ml_status st, const std::string &message) : std::runtime_error(message), status(st) {}
  ml_status status;
};

}  // namespace mlext
