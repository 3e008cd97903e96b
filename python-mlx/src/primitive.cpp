#include "primitive.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core_call.h"
#include "gpu_eval.h"
#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/utils.h"

namespace mlext {

const char *op_name(int op) {
  const char *name = ml_op_name(op);
  return name != nullptr ? name : "?";
}

const char *spec_name(const Spec &spec) {
  if (spec.variant == kTriInv) return "tri_inv";
  if (spec.variant == kCholeskyInv) return "cholesky_inv";
  return op_name(spec.op);
}

namespace {

std::string message_for(const char *name, const char *core_message) {
  std::string msg = core_message ? core_message : "";
  const std::string tag = "[metal_linalg::";
  if (msg.compare(0, tag.size(), tag) == 0) {
    const size_t close = msg.find("] ");
    if (close != std::string::npos) msg = msg.substr(close + 2);
  }
  if (msg.empty()) msg = "failed";
  return std::string("[metal_linalg.") + name + "] " + msg;
}

}  // namespace

std::string error_message(int op, const char *core_message) {
  return message_for(op_name(op), core_message);
}

std::string error_message(const Spec &spec, const char *core_message) {
  return message_for(spec_name(spec), core_message);
}

bool is_empty(const mx::Shape &in) {
  for (auto d : in)
    if (d == 0) return true;
  return false;
}

namespace {

bool has_rhs(const Spec &spec) {
  return spec.variant != kCholeskyInv && ml_op_inputs(spec.op) > 1;
}

mx::Shape batch_of(const mx::Shape &s) { return mx::Shape(s.begin(), s.end() - 2); }

}  // namespace

Sizes sizes_of(const Spec &spec, const std::vector<mx::Shape> &in) {
  Sizes s;
  const mx::Shape &a = in[0];
  for (size_t i = 0; i + 2 < a.size(); ++i) s.batch *= a[i];
  s.m = a[a.size() - 2];
  s.n = a[a.size() - 1];
  if (has_rhs(spec) && in.size() > 1) {
    const mx::Shape &b = in[1];
    s.nrhs = (spec.flags & ML_LS_RIGHT) ? b[b.size() - 2] : b[b.size() - 1];
  }
  return s;
}

std::vector<mx::Shape> output_shapes(const Spec &spec, const std::vector<mx::Shape> &in) {
  const mx::Shape batch = batch_of(in[0]);
  std::vector<mx::Shape> out;
  if (spec.variant == kCholeskyInv) {
    out.push_back(in[0]);
  } else {
    const Sizes s = sizes_of(spec, in);
    const int64_t k = std::min(s.m, s.n);
    // The core's op table: each dimension is 'm', 'n', 'k' or 'r' (nrhs) under the flags.
    auto dim = [&](char sym) {
      return static_cast<int>(sym == 'm' ? s.m : sym == 'n' ? s.n : sym == 'r' ? s.nrhs : k);
    };
    const int count = ml_output_count(spec.op);
    for (int i = 0; i < count; ++i) {
      int32_t ndim = 0;
      char dims[2] = {0, 0};
      if (ml_output_desc(spec.op, spec.flags, i, nullptr, &ndim, dims, nullptr) != ML_OK ||
          ndim == 0)
        continue;
      mx::Shape shape = batch;
      for (int d = 0; d < ndim; ++d) shape.push_back(dim(dims[d]));
      out.push_back(std::move(shape));
    }
  }
  if (spec.with_info) out.push_back(batch);
  return out;
}

std::vector<mx::Dtype> output_dtypes(const Spec &spec, size_t count) {
  std::vector<mx::Dtype> d;
  if (spec.variant == kCore) {
    for (int i = 0; i < ml_output_count(spec.op) && d.size() < count; ++i) {
      int32_t ndim = 0, dtype = ML_DTYPE_FLOAT32;
      if (ml_output_desc(spec.op, spec.flags, i, nullptr, &ndim, nullptr, &dtype) != ML_OK ||
          ndim == 0)
        continue;
      d.push_back(dtype == ML_DTYPE_INT32 ? mx::int32 : mx::float32);
    }
  }
  d.resize(count, mx::float32);
  if (spec.with_info && count > 0) d.back() = mx::int32;
  return d;
}

namespace {

// Row-major float32 copy of an evaluated float32 array with any strides (a fallback:
// build_node() hands the primitive row-contiguous inputs).
std::vector<float> gather_f32(const mx::array &x) {
  const auto &shape = x.shape();
  const auto &strides = x.strides();
  const int nd = static_cast<int>(x.ndim());
  std::vector<float> out(x.size());
  std::vector<int64_t> idx(nd, 0);
  const float *src = x.data<float>();
  int64_t off = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = src[off];
    for (int d = nd - 1; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

// The node's steps (core_call.h) on host memory: in[i] is node input i (row-major float32).
ml_status run_host(const Spec &spec, const Sizes &s, const std::vector<const float *> &in,
                   const CorePointers &p) {
  std::vector<float> scratch(static_cast<size_t>(scratch_floats(spec, s)));
  for (const Step &step : steps(spec)) {
    const float *b = step.b == kScratch ? scratch.data() : step.b >= 0 ? in[step.b] : nullptr;
    CorePointers q = p;
    if (step.to_scratch) {
      q = CorePointers{};
      q.out[0] = scratch.data();
    }
    const ml_status st = run_step(nullptr, spec, step, s, in[step.a], b, q);
    if (st != ML_OK) return st;
  }
  return ML_OK;
}

std::vector<mx::Shape> shapes_of(const std::vector<mx::array> &xs) {
  std::vector<mx::Shape> shapes;
  for (const auto &x : xs) shapes.push_back(x.shape());
  return shapes;
}

}  // namespace

void LinalgPrimitive::eval_cpu(const std::vector<mx::array> &inputs,
                               std::vector<mx::array> &outputs) {
  for (auto &o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));
  auto &enc = mx::cpu::get_command_encoder(stream());
  for (const auto &x : inputs) enc.set_input_array(x);
  for (auto &o : outputs) enc.set_output_array(o);
  const Sizes s = sizes_of(spec_, shapes_of(inputs));
  for (const auto &x : inputs)
    if (is_empty(x.shape())) return;  // build_node() does not make such nodes
  CorePointers p = output_pointers(spec_, outputs, [](mx::array &o) { return o.data<void>(); });
  std::vector<mx::array> weak;
  for (const auto &x : inputs) weak.push_back(mx::array::unsafe_weak_copy(x));
  enc.dispatch([in = std::move(weak), p, s, spec = spec_]() {
    std::vector<std::vector<float>> gathered(in.size());
    std::vector<const float *> src(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].flags().row_contiguous) {
        src[i] = in[i].data<float>();
      } else {
        gathered[i] = gather_f32(in[i]);
        src[i] = gathered[i].data();
      }
    }
    const ml_status st = run_host(spec, s, src, p);
    if (st != ML_OK) throw std::runtime_error(error_message(spec, ml_last_error()));
  });
}

void LinalgPrimitive::eval_gpu(const std::vector<mx::array> &inputs,
                               std::vector<mx::array> &outputs) {
  mlext::eval_gpu(stream(), spec_, inputs, outputs);
}

const char *LinalgPrimitive::name() const {
  // "MetalLinalgEigh", "MetalLinalgSolveTriangular", "MetalLinalgCholeskyInv": each node's
  // function name in CamelCase, built once.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    auto camel = [](const char *name) {
      std::string s = "MetalLinalg";
      bool up = true;
      for (const char *c = name; *c; ++c) {
        if (*c == '_') {
          up = true;
          continue;
        }
        s += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(*c))) : *c;
        up = false;
      }
      return s;
    };
    for (int op = 0; op < ml_op_count(); ++op) v.push_back(camel(op_name(op)));
    v.push_back(camel("tri_inv"));
    v.push_back(camel("cholesky_inv"));
    return v;
  }();
  const int count = ml_op_count();
  if (spec_.variant == kTriInv) return names[count].c_str();
  if (spec_.variant == kCholeskyInv) return names[count + 1].c_str();
  return spec_.op >= 0 && spec_.op < count ? names[spec_.op].c_str() : "MetalLinalg";
}

bool LinalgPrimitive::is_equivalent(const mx::Primitive &other) const {
  const auto *o = dynamic_cast<const LinalgPrimitive *>(&other);
  return o != nullptr && o->spec_ == spec_;
}

std::vector<mx::Shape> LinalgPrimitive::output_shapes(const std::vector<mx::array> &inputs) {
  return mlext::output_shapes(spec_, shapes_of(inputs));
}

std::pair<std::vector<mx::array>, std::vector<int>> LinalgPrimitive::vmap(
    const std::vector<mx::array> &inputs, const std::vector<int> &axes) {
  // Matrices stay the last two axes; the mapped axis becomes the leading batch axis. The node's
  // inputs share their batch dimensions (build_node broadcast them), so an unmapped input gets a
  // leading axis of size 1 that broadcasts against the mapped ones.
  std::vector<mx::array> in;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(axes[i] >= 0 ? mx::moveaxis(inputs[i], axes[i], 0, stream())
                              : mx::expand_dims(inputs[i], 0, stream()));
  std::vector<mx::array> out = build_node(std::move(in), spec_, stream());
  std::vector<int> out_axes(out.size(), 0);
  return {out, out_axes};
}

namespace {

// Work (batch * max(m, n, nrhs)^3) up to which a call on evaluated CPU inputs runs at once.
constexpr int64_t kEagerMaxWork = int64_t{32} * 32 * 32;

// A call computed now instead of as a graph node: asked for on a CPU stream (a GPU stream
// whose call the core routes to the CPU stays a node), evaluated row-contiguous float32
// inputs of one batch shape that no transformation traces (mx.compile, mx.vmap, mx.grad and
// the like see tracers), and little work. MLX would otherwise hand the node and its contiguous
// copy to the CPU stream's thread and wait for it, which costs more than the kernel on small
// matrices; the results are the same (the core's host path either way), already evaluated.
bool runs_now(const std::vector<mx::array> &in, const mx::Stream &requested, const Sizes &s) {
  if (requested.device != mx::Device::cpu) return false;
  const int64_t big = std::max({s.m, s.n, s.nrhs});
  if (s.batch > kEagerMaxWork || big > 32 || s.batch * big * big * big > kEagerMaxWork)
    return false;
  const mx::Shape batch = batch_of(in[0].shape());
  for (const auto &a : in)
    if (a.dtype() != mx::float32 || a.is_tracer() || !a.is_available() ||
        !a.flags().row_contiguous || batch_of(a.shape()) != batch)
      return false;
  return true;
}

std::vector<mx::array> run_now(const std::vector<mx::array> &in, const Spec &spec,
                               std::vector<mx::Shape> shapes, const std::vector<mx::Dtype> &dtypes,
                               const Sizes &s) {
  std::vector<mx::array> out;
  out.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    size_t count = 1;
    for (auto e : shapes[i]) count *= static_cast<size_t>(e);
    out.emplace_back(mx::allocator::malloc(count * mx::size_of(dtypes[i])), std::move(shapes[i]),
                     dtypes[i]);
  }
  CorePointers p = output_pointers(spec, out, [](mx::array &o) { return o.data<void>(); });
  std::vector<const float *> src;
  for (const auto &a : in) src.push_back(a.data<float>());
  const ml_status st = run_host(spec, s, src, p);
  if (st != ML_OK) throw std::runtime_error(error_message(spec, ml_last_error()));
  return out;
}

[[noreturn]] void invalid(const Spec &spec, const std::string &why) {
  throw CoreError{ML_INVALID_ARGUMENT, std::string("[metal_linalg.") + spec_name(spec) + "] " + why};
}

std::string shape_text(const mx::Shape &s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

mx::Stream placement(const Spec &spec, const Sizes &sizes, mx::Stream requested) {
  if (requested.device == mx::Device::cpu) return requested;
  if (gpu_covers(spec, sizes)) return requested;
  return mx::default_stream(mx::Device::cpu);
}

std::vector<mx::array> build_node(std::vector<mx::array> inputs, Spec spec,
                                  std::optional<mx::Stream> stream) {
  for (const auto &x : inputs)
    if (x.ndim() < 2)
      invalid(spec, "expected an array of matrices [..., M, N], got " +
                        std::to_string(x.ndim()) + " dimension(s)");
  // The inputs' batch dimensions broadcast against each other (torch.linalg's rule).
  mx::Shape batch = batch_of(inputs[0].shape());
  for (size_t i = 1; i < inputs.size(); ++i) {
    const mx::Shape other = batch_of(inputs[i].shape());
    try {
      batch = mx::broadcast_shapes(batch, other);
    } catch (const std::exception &) {
      invalid(spec, "the batch dimensions " + shape_text(batch) + " and " + shape_text(other) +
                        " do not broadcast");
    }
  }
  std::vector<mx::Shape> in_shapes;
  for (const auto &x : inputs) {
    mx::Shape s = batch;
    s.push_back(x.shape(-2));
    s.push_back(x.shape(-1));
    in_shapes.push_back(std::move(s));
  }
  const Sizes sz = sizes_of(spec, in_shapes);
  if (has_rhs(spec) && inputs.size() > 1) {
    // B's side that meets A: its rows (A X = B) or columns (X A = B, ML_LS_RIGHT).
    const mx::Shape &a = in_shapes[0], &b = in_shapes[1];
    const bool right = (spec.flags & ML_LS_RIGHT) != 0;
    if (a[a.size() - 1] != a[a.size() - 2])
      invalid(spec, "expected square matrices A, got shape " + shape_text(inputs[0].shape()));
    if (b[b.size() - (right ? 1 : 2)] != a[a.size() - 1])
      invalid(spec, std::string("incompatible shapes of A and B for the equation ") +
                        (right ? "XA = B" : "AX = B") + " (" + std::to_string(a[a.size() - 2]) +
                        "x" + std::to_string(a[a.size() - 1]) + " and " +
                        std::to_string(b[b.size() - 2]) + "x" + std::to_string(b[b.size() - 1]) +
                        ")");
  }
  std::vector<mx::Shape> shapes = mlext::output_shapes(spec, in_shapes);
  std::vector<mx::Dtype> dtypes = output_dtypes(spec, shapes.size());
  const mx::Stream requested = stream ? *stream : mx::default_stream(mx::default_device());
  bool empty = false;
  for (const auto &s : in_shapes) empty = empty || is_empty(s);
  if (empty) {
    std::vector<mx::array> out;
    for (size_t i = 0; i < shapes.size(); ++i)
      out.push_back(mx::zeros(shapes[i], dtypes[i], requested));
    return out;
  }
  // The core's own shape and size checks, raised now rather than at evaluation.
  for (const Step &step : steps(spec)) {
    int64_t sizes[4];
    step_sizes(spec, sz, sizes);
    if (ml_status st = ml_plan(nullptr, step.op, sizes, step.flags, nullptr, nullptr, nullptr))
      throw CoreError{st, error_message(spec, ml_last_error())};
  }
  if (runs_now(inputs, requested, sz)) return run_now(inputs, spec, std::move(shapes), dtypes, sz);
  const mx::Stream s = placement(spec, sz, requested);
  std::vector<mx::array> ready;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const mx::array &x = inputs[i];
    // MLX's GPU backends have no float64: such input is cast on the CPU stream.
    const mx::Stream cast_on = x.dtype() == mx::float64 ? mx::default_stream(mx::Device::cpu) : s;
    mx::array y = mx::astype(x, mx::float32, cast_on);
    if (y.shape() != in_shapes[i]) y = mx::broadcast_to(y, in_shapes[i], s);
    ready.push_back(mx::contiguous(y, false, s));
  }
  return mx::array::make_arrays(std::move(shapes), dtypes,
                                std::make_shared<LinalgPrimitive>(s, spec), std::move(ready));
}

std::vector<mx::array> build(const mx::array &a, Spec spec, std::optional<mx::Stream> stream) {
  return build_node({a}, spec, stream);
}

namespace {

// The identity matching a's matrices (square), float32 on the requested stream; build_node
// broadcasts it over the batch.
mx::array identity_for(const mx::array &a, const Spec &spec, std::optional<mx::Stream> stream) {
  if (a.ndim() < 2)
    invalid(spec, "expected an array of matrices [..., N, N], got " + std::to_string(a.ndim()) +
                      " dimension(s)");
  if (a.shape(-1) != a.shape(-2))
    invalid(spec, "expected square matrices, got shape " + shape_text(a.shape()));
  const mx::Stream s = stream ? *stream : mx::default_stream(mx::default_device());
  return mx::eye(a.shape(-1), a.shape(-1), 0, mx::float32, s);
}

}  // namespace

std::vector<mx::array> build_tri_inv(const mx::array &a, int flags,
                                     std::optional<mx::Stream> stream) {
  const Spec spec{ML_OP_SOLVE_TRIANGULAR, flags & (ML_LS_UPPER | ML_LS_UNIT), false, kTriInv};
  return build_node({a, identity_for(a, spec, stream)}, spec, stream);
}

std::vector<mx::array> build_cholesky_inv(const mx::array &l, int flags,
                                          std::optional<mx::Stream> stream) {
  const Spec spec{ML_OP_SOLVE_TRIANGULAR, 0, false, kCholeskyInv};
  const mx::array eye = identity_for(l, spec, stream);
  const mx::Stream s = stream ? *stream : mx::default_stream(mx::default_device());
  // (L L^T)^-1 = L^-T L^-1 reads L's lower triangle twice: as Lf, and transposed as Uf;
  // (U^T U)^-1 = U^-1 U^-T reads U's upper triangle as Uf, and transposed as Lf.
  const mx::array t = mx::swapaxes(l, -1, -2, s);
  const bool upper = (flags & ML_LS_UPPER) != 0;
  return build_node({upper ? t : l, upper ? l : t, eye}, spec, stream);
}

// ---- lu_factor's permutation ----

namespace {

class PivotPermutation : public mx::Primitive {
 public:
  PivotPermutation(mx::Stream stream, int m) : mx::Primitive(stream), m_(m) {}

  void eval_cpu(const std::vector<mx::array> &inputs, std::vector<mx::array> &outputs) override {
    const mx::array &piv = inputs[0];
    mx::array &out = outputs[0];
    out.set_data(mx::allocator::malloc(out.nbytes()));
    auto &enc = mx::cpu::get_command_encoder(stream());
    enc.set_input_array(piv);
    enc.set_output_array(out);
    const int64_t k = piv.shape(-1), m = m_;
    const int64_t batch = m > 0 ? static_cast<int64_t>(out.size()) / m : 0;
    enc.dispatch([piv = mx::array::unsafe_weak_copy(piv), p = out.data<int32_t>(), k, m, batch]() {
      // build() makes the input row-contiguous.
      const int32_t *src = piv.data<int32_t>();
      for (int64_t b = 0; b < batch; ++b) {
        int32_t *perm = p + b * m;
        for (int64_t i = 0; i < m; ++i) perm[i] = static_cast<int32_t>(i);
        for (int64_t i = 0; i < k; ++i) {
          const int64_t j = static_cast<int64_t>(src[b * k + i]) - 1;
          if (j >= 0 && j < m) std::swap(perm[i], perm[j]);
        }
      }
    });
  }
  void eval_gpu(const std::vector<mx::array> &, std::vector<mx::array> &) override {
    throw std::runtime_error("[metal_linalg.lu_factor] internal error: the pivots' permutation "
                             "runs on the CPU stream");
  }
  std::vector<mx::array> jvp(const std::vector<mx::array> &primals, const std::vector<mx::array> &,
                             const std::vector<int> &) override {
    mx::Shape shape = primals[0].shape();
    shape.back() = m_;
    return {mx::zeros(shape, mx::int32, stream())};
  }
  std::vector<mx::array> vjp(const std::vector<mx::array> &primals,
                             const std::vector<mx::array> &, const std::vector<int> &argnums,
                             const std::vector<mx::array> &) override {
    return std::vector<mx::array>(argnums.size(), mx::zeros_like(primals[0], stream()));
  }
  std::pair<std::vector<mx::array>, std::vector<int>> vmap(const std::vector<mx::array> &inputs,
                                                           const std::vector<int> &axes) override {
    mx::array p = axes[0] >= 0 ? mx::moveaxis(inputs[0], axes[0], 0, stream()) : inputs[0];
    return {{pivots_to_permutation(p, m_, stream())}, {axes[0] >= 0 ? 0 : -1}};
  }
  const char *name() const override { return "MetalLinalgPivotPermutation"; }
  bool is_equivalent(const mx::Primitive &other) const override {
    const auto *o = dynamic_cast<const PivotPermutation *>(&other);
    return o != nullptr && o->m_ == m_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array> &inputs) override {
    mx::Shape shape = inputs[0].shape();
    shape.back() = m_;
    return {shape};
  }

 private:
  int m_;
};

}  // namespace

mx::array pivots_to_permutation(const mx::array &pivots, int m, mx::Stream) {
  // A loop over the rows on the CPU stream whatever the caller's stream (MLX orders them).
  const mx::Stream cpu = mx::default_stream(mx::Device::cpu);
  mx::Shape shape = pivots.shape();
  shape.back() = m;
  if (is_empty(shape) || pivots.shape(-1) == 0) {
    // No interchanges: the identity permutation.
    return mx::broadcast_to(mx::arange(m, mx::int32, cpu), shape, cpu);
  }
  mx::array p = mx::contiguous(mx::astype(pivots, mx::int32, cpu), false, cpu);
  return mx::array(std::move(shape), mx::int32, std::make_shared<PivotPermutation>(cpu, m), {p});
}

}  // namespace mlext
