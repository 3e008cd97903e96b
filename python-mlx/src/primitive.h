// metal_linalg's MLX primitive: one mlx::core::Primitive for the decompositions and the linear
// systems.
//
// build() checks the arguments, puts the float32 cast, the broadcast of the batch dimensions
// (the ops with a right-hand side) and the row-contiguous copies into the graph as MLX ops and
// returns the primitive's outputs unevaluated. eval_cpu runs the core's host path as a task on
// MLX's CPU stream; eval_gpu (gpu_eval.h) runs the core's GPU kernels on MLX's GPU stream where
// this MLX flavour has a GPU path. Gradients (vjp, jvp) are written with MLX ops in grads.cpp.
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

// What a node computes besides one core op (Spec::variant).
enum Variant : int {
  kCore = 0,         // the core's op `op` on the node's inputs (A, and B for solve and
                     // solve_triangular)
  kTriInv = 1,       // solve_triangular with B = I (an input made by build): A^-1 of a triangle
  kCholeskyInv = 2,  // (F F^T)^-1 from a Cholesky factor: inputs Lf (lower), Uf = Lf^T (upper),
                     // I; two triangular solves, Z = Lf^-1 I, X = Uf^-1 Z (core_call.h)
};

// What one call computes. flags: qr mode (ML_QR_*), eigh/eigvalsh uplo (ML_LOWER/ML_UPPER),
// svd full_matrices (0/1); 0 for svdvals; the linear systems' ML_LS_* bits. with_info adds an
// int32 [...] output last: the core's per-matrix info word (ML_INFO_* bits and the sweep count
// for the decompositions; LAPACK's info or ML_INFO_LS_NONFINITE for the linear systems).
struct Spec {
  int op = ML_OP_QR;
  int flags = 0;
  bool with_info = false;
  int variant = kCore;
  bool operator==(const Spec &o) const {
    return op == o.op && flags == o.flags && with_info == o.with_info && variant == o.variant;
  }
};

// "qr", "eigh", ... (the Python function names, used in error messages).
const char *op_name(int op);
// The Python function of a node: op_name, or "tri_inv" / "cholesky_inv".
const char *spec_name(const Spec &spec);

// Error text for the user: the core's message with its "[metal_linalg::<where>] " tag replaced
// by the frontend's single "[metal_linalg.<op>] " prefix.
std::string error_message(int op, const char *core_message);
std::string error_message(const Spec &spec, const char *core_message);

// The sizes of a node's core calls (ml_run's sizes): batch, A's m and n, and the right-hand
// side's columns nrhs (rows under ML_LS_RIGHT; the ops with two inputs, else 0).
struct Sizes {
  int64_t batch = 1, m = 0, n = 0, nrhs = 0;
};
// Sizes of a node of spec on inputs of these shapes (every input has the same batch
// dimensions: build() broadcasts them).
Sizes sizes_of(const Spec &spec, const std::vector<mx::Shape> &in);

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

// Output shapes of spec for inputs of these shapes (the batch dimensions of the first), and
// the dtypes of its outputs (float32 results, int32 pivots and info), from the core's op table.
std::vector<mx::Shape> output_shapes(const Spec &spec, const std::vector<mx::Shape> &in);
std::vector<mx::Dtype> output_dtypes(const Spec &spec, size_t count);

// The lazy call on the node's inputs (A; A and B for the ops with a right-hand side; see
// Variant for the others): checks shapes and sizes (the core's own checks, raised now),
// broadcasts the inputs' batch dimensions against each other, then astype(float32) and
// contiguous() on the chosen stream, then the primitive. stream: the caller's stream, or the
// default stream of the default device. A GPU stream whose MLX flavour has no GPU path here, or
// for whose shape and batch the core names a CPU kernel, runs the primitive on the CPU stream
// instead (MLX orders the streams). A small call on a CPU stream whose inputs are evaluated,
// row-contiguous float32 and not traced runs at once and returns evaluated arrays (the same
// results; see runs_now in primitive.cpp).
std::vector<mx::array> build_node(std::vector<mx::array> inputs, Spec spec,
                                  std::optional<mx::Stream> stream);
// One input (the decompositions, cholesky, inv, lu_factor).
std::vector<mx::array> build(const mx::array &a, Spec spec, std::optional<mx::Stream> stream);
// A^-1 of the upper (flags ML_LS_UPPER) or lower triangle of A: solve_triangular with B = I.
std::vector<mx::array> build_tri_inv(const mx::array &a, int flags,
                                     std::optional<mx::Stream> stream);
// (L L^T)^-1 from the lower triangle of l, or (U^T U)^-1 from its upper (ML_LS_UPPER).
std::vector<mx::array> build_cholesky_inv(const mx::array &l, int flags,
                                          std::optional<mx::Stream> stream);

// Empty results (a zero-size batch or matrix dimension): zeros of the output shapes.
bool is_empty(const mx::Shape &in);

// The stream the primitive runs on for a call on `requested` (see build_node()).
mx::Stream placement(const Spec &spec, const Sizes &sizes, mx::Stream requested);

// The permutation of A = P L U from lu_factor's pivots (int32 [..., k], LAPACK's 1-based row
// interchanges) for A's m rows: perm (int32 [..., m]) with (P^T X)[i] = X[perm[i]]. A CPU
// task (a loop of k swaps per matrix); not differentiable (zero derivatives). For lu_factor's
// gradients.
mx::array pivots_to_permutation(const mx::array &pivots, int m, mx::Stream stream);

// Thrown for a core error during graph construction; the bindings map it to Python.
struct CoreError : std::runtime_error {
  CoreError(ml_status st, const std::string &message) : std::runtime_error(message), status(st) {}
  ml_status status;
};

}  // namespace mlext
