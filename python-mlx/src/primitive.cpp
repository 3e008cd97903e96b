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

namespace mlext {

const char *op_name(int op) {
  const char *name = ml_op_name(op);
  return name != nullptr ? name : "?";
}

std::string error_message(int op, const char *core_message) {
  std::string msg = core_message ? core_message : "";
  const std::string tag = "[metal_linalg::";
  if (msg.compare(0, tag.size(), tag) == 0) {
    const size_t close = msg.find("] ");
    if (close != std::string::npos) msg = msg.substr(close + 2);
  }
  if (msg.empty()) msg = "failed";
  return std::string("[metal_linalg.") + op_name(op) + "] " + msg;
}

bool is_empty(const mx::Shape &in) {
  for (auto d : in)
    if (d == 0) return true;
  return false;
}

std::vector<mx::Shape> output_shapes(const Spec &spec, const mx::Shape &in) {
  const mx::Shape batch(in.begin(), in.end() - 2);
  const int m = in[in.size() - 2], n = in[in.size() - 1], k = std::min(m, n);
  // The core's op table: each dimension is 'm', 'n' or 'k' under the flags.
  auto dim = [&](char sym) { return sym == 'm' ? m : sym == 'n' ? n : k; };
  std::vector<mx::Shape> out;
  const int count = ml_output_count(spec.op);
  for (int i = 0; i < count; ++i) {
    int32_t ndim = 0;
    char dims[2] = {0, 0};
    if (ml_output_desc(spec.op, spec.flags, i, nullptr, &ndim, dims, nullptr) != ML_OK ||
        ndim == 0)
      continue;
    mx::Shape s = batch;
    for (int d = 0; d < ndim; ++d) s.push_back(dim(dims[d]));
    out.push_back(std::move(s));
  }
  if (spec.with_info) out.push_back(batch);
  return out;
}

std::vector<mx::Dtype> output_dtypes(const Spec &spec, size_t count) {
  std::vector<mx::Dtype> d(count, mx::float32);
  if (spec.with_info) d.back() = mx::int32;
  return d;
}

namespace {

struct Dims {
  int64_t batch = 1, m = 0, n = 0;
};

Dims dims_of(const mx::Shape &s) {
  Dims d;
  for (size_t i = 0; i + 2 < s.size(); ++i) d.batch *= s[i];
  d.m = s[s.size() - 2];
  d.n = s[s.size() - 1];
  return d;
}

// Row-major float32 copy of an evaluated float32 array with any strides (a fallback: build()
// hands the primitive a row-contiguous input).
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

}  // namespace

void LinalgPrimitive::eval_cpu(const std::vector<mx::array> &inputs,
                               std::vector<mx::array> &outputs) {
  const mx::array &a = inputs[0];
  for (auto &o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));
  auto &enc = mx::cpu::get_command_encoder(stream());
  enc.set_input_array(a);
  for (auto &o : outputs) enc.set_output_array(o);
  const Dims d = dims_of(a.shape());
  if (d.batch == 0 || d.m == 0 || d.n == 0) return;  // build() does not make such nodes
  CorePointers p = output_pointers(spec_, outputs, [](mx::array &o) { return o.data<void>(); });
  enc.dispatch([a = mx::array::unsafe_weak_copy(a), p, d, spec = spec_]() {
    std::vector<float> gathered;
    const float *src = nullptr;
    if (a.flags().row_contiguous) {
      src = a.data<float>();
    } else {
      gathered = gather_f32(a);
      src = gathered.data();
    }
    const ml_status st = run_core(nullptr, spec, src, d.batch, d.m, d.n, p);
    if (st != ML_OK) throw std::runtime_error(error_message(spec.op, ml_last_error()));
  });
}

void LinalgPrimitive::eval_gpu(const std::vector<mx::array> &inputs,
                               std::vector<mx::array> &outputs) {
  mlext::eval_gpu(stream(), spec_, inputs, outputs);
}

const char *LinalgPrimitive::name() const {
  // "MetalLinalgEigh": each op's name from the core, capitalised, built once.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int op = 0; op < ml_op_count(); ++op) {
      std::string s = std::string("MetalLinalg") + op_name(op);
      s[11] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[11])));
      v.push_back(std::move(s));
    }
    return v;
  }();
  return spec_.op >= 0 && spec_.op < static_cast<int>(names.size()) ? names[spec_.op].c_str()
                                                                      : "MetalLinalg";
}

bool LinalgPrimitive::is_equivalent(const mx::Primitive &other) const {
  const auto *o = dynamic_cast<const LinalgPrimitive *>(&other);
  return o != nullptr && o->spec_ == spec_;
}

std::vector<mx::Shape> LinalgPrimitive::output_shapes(const std::vector<mx::array> &inputs) {
  return mlext::output_shapes(spec_, inputs[0].shape());
}

std::pair<std::vector<mx::array>, std::vector<int>> LinalgPrimitive::vmap(
    const std::vector<mx::array> &inputs, const std::vector<int> &axes) {
  // Matrices stay the last two axes; the mapped axis becomes the leading batch axis.
  mx::array a = inputs[0];
  if (axes[0] >= 0) a = mx::moveaxis(a, axes[0], 0, stream());
  std::vector<mx::array> out = build(a, spec_, stream());
  std::vector<int> out_axes(out.size(), axes[0] >= 0 ? 0 : -1);
  return {out, out_axes};
}

namespace {

// Work (batch * max(m, n)^3) up to which a call on an evaluated CPU input runs at once.
constexpr int64_t kEagerMaxWork = int64_t{32} * 32 * 32;

// A call computed now instead of as a graph node: asked for on a CPU stream (a GPU stream
// whose call the core routes to the CPU stays a node), an evaluated row-contiguous float32
// input that no transformation traces (mx.compile, mx.vmap, mx.grad and the like see tracers),
// and little work. MLX would otherwise hand the node and its contiguous copy to the CPU
// stream's thread and wait for it, which costs more than the kernel on small matrices; the
// results are the same (the core's host path either way), already evaluated.
bool runs_now(const mx::array &a, const mx::Stream &requested, const Dims &d) {
  if (requested.device != mx::Device::cpu || a.dtype() != mx::float32) return false;
  const int64_t big = std::max(d.m, d.n);
  if (d.batch > kEagerMaxWork || big > 32 || d.batch * big * big * big > kEagerMaxWork)
    return false;
  return !a.is_tracer() && a.is_available() && a.flags().row_contiguous;
}

std::vector<mx::array> run_now(const mx::array &a, const Spec &spec,
                               std::vector<mx::Shape> shapes, const std::vector<mx::Dtype> &dtypes,
                               const Dims &d) {
  std::vector<mx::array> out;
  out.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    size_t count = 1;
    for (auto e : shapes[i]) count *= static_cast<size_t>(e);
    out.emplace_back(mx::allocator::malloc(count * mx::size_of(dtypes[i])), std::move(shapes[i]),
                     dtypes[i]);
  }
  CorePointers p = output_pointers(spec, out, [](mx::array &o) { return o.data<void>(); });
  const ml_status st = run_core(nullptr, spec, a.data<float>(), d.batch, d.m, d.n, p);
  if (st != ML_OK) throw std::runtime_error(error_message(spec.op, ml_last_error()));
  return out;
}

}  // namespace

mx::Stream placement(const Spec &spec, const mx::Shape &in, mx::Stream requested) {
  if (requested.device == mx::Device::cpu) return requested;
  const Dims d = dims_of(in);
  if (gpu_covers(spec, d.batch, d.m, d.n)) return requested;
  return mx::default_stream(mx::Device::cpu);
}

std::vector<mx::array> build(const mx::array &a_in, Spec spec, std::optional<mx::Stream> stream) {
  if (a_in.ndim() < 2)
    throw CoreError{ML_INVALID_ARGUMENT,
                    std::string("[metal_linalg.") + op_name(spec.op) +
                        "] expected an array of matrices [..., M, N], got " +
                        std::to_string(a_in.ndim()) + " dimension(s)"};
  const mx::Shape &shape = a_in.shape();
  const Dims d = dims_of(shape);
  std::vector<mx::Shape> shapes = mlext::output_shapes(spec, shape);
  std::vector<mx::Dtype> dtypes = output_dtypes(spec, shapes.size());
  const mx::Stream requested = stream ? *stream : mx::default_stream(mx::default_device());
  if (is_empty(shape)) {
    std::vector<mx::array> out;
    for (size_t i = 0; i < shapes.size(); ++i)
      out.push_back(mx::zeros(shapes[i], dtypes[i], requested));
    return out;
  }
  // The core's own shape and size checks, raised now rather than at evaluation.
  const int64_t sizes[3] = {d.batch, d.m, d.n};
  if (ml_status st = ml_plan(nullptr, spec.op, sizes, spec.flags, nullptr, nullptr, nullptr))
    throw CoreError{st, error_message(spec.op, ml_last_error())};
  if (runs_now(a_in, requested, d)) return run_now(a_in, spec, std::move(shapes), dtypes, d);
  const mx::Stream s = placement(spec, shape, requested);
  // MLX's GPU backends have no float64: such input is cast on the CPU stream.
  const mx::Stream cast_on = a_in.dtype() == mx::float64 ? mx::default_stream(mx::Device::cpu) : s;
  mx::array a = mx::contiguous(mx::astype(a_in, mx::float32, cast_on), false, s);
  return mx::array::make_arrays(std::move(shapes), dtypes,
                                std::make_shared<LinalgPrimitive>(s, spec), {a});
}

}  // namespace mlext
