// metal_linalg._ext: the nanobind module. The decompositions and the linear systems are lazy
// MLX primitives (primitive.h); the rest binds the core's C API (policy, routing, CPU threads, LAPACK).
// Argument checks that need Python types (dtypes, mode strings) live in _ops.py.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_eval.h"
#include "metal_linalg/metal_linalg.h"
#include "mlx/array.h"
#include "mlx/stream.h"
#include "primitive.h"

namespace nb = nanobind;
namespace mx = mlx::core;

namespace {

// Raises the Python exception for a core status. Called with the GIL held (nothing in this
// module releases it: the decompositions run later, inside MLX's evaluation).
[[noreturn]] void raise_message(ml_status st, const std::string &msg) {
  switch (st) {
    case ML_INVALID_ARGUMENT:
      throw nb::value_error(msg.c_str());
    case ML_OUT_OF_MEMORY:
      PyErr_SetString(PyExc_MemoryError, msg.c_str());
      throw nb::python_error();
    default:
      throw std::runtime_error(msg);
  }
}

[[noreturn]] void raise_status(ml_status st, const char *where) {
  std::string core = ml_last_error();
  const std::string tag = "[metal_linalg::";
  if (core.compare(0, tag.size(), tag) == 0) {
    const size_t close = core.find("] ");
    if (close != std::string::npos) core = core.substr(close + 2);
  }
  raise_message(st, std::string("[metal_linalg.") + where + "] " + core);
}

void check(ml_status st, const char *where) {
  if (st != ML_OK) raise_status(st, where);
}

// ml_backend's name (ml_backend_rhs with nrhs columns of B for an op that takes one).
std::string backend_name(int op, int32_t memory, int64_t m, int64_t n, int64_t batch,
                         int64_t nrhs) {
  const char *name = ml_op_inputs(op) > 1 ? ml_backend_rhs(op, memory, n, nrhs, batch)
                                          : ml_backend(op, memory, m, n, batch);
  if (name == nullptr || *name == '\0') raise_status(ML_INVALID_ARGUMENT, "backend");
  return std::string(name);
}

std::string policy_get(int op) {
  size_t needed = 0;
  check(ml_policy_get(op, nullptr, 0, &needed), "policy");
  std::vector<char> buf(needed + 1, '\0');
  check(ml_policy_get(op, buf.data(), buf.size(), &needed), "policy");
  return std::string(buf.data());
}

// The lazy decomposition: the primitive's outputs (see mlext::output_shapes for the order).
std::vector<mx::array> decompose(const mx::array &a, int op, int flags, bool with_info,
                                 std::optional<mx::Stream> stream) {
  try {
    return mlext::build(a, mlext::Spec{op, flags, with_info}, stream);
  } catch (const mlext::CoreError &e) {
    raise_message(e.status, e.what());
  }
}

// The lazy solve / solve_triangular of A X = B (or X A = B): X (and info), batch dimensions
// broadcast.
std::vector<mx::array> solve_rhs(const mx::array &a, const mx::array &b, int op, int flags,
                                 bool with_info, std::optional<mx::Stream> stream) {
  try {
    return mlext::build_node({a, b}, mlext::Spec{op, flags, with_info}, stream);
  } catch (const mlext::CoreError &e) {
    raise_message(e.status, e.what());
  }
}

mx::array tri_inv(const mx::array &a, int flags, std::optional<mx::Stream> stream) {
  try {
    return mlext::build_tri_inv(a, flags, stream)[0];
  } catch (const mlext::CoreError &e) {
    raise_message(e.status, e.what());
  }
}

mx::array cholesky_inv(const mx::array &l, int flags, std::optional<mx::Stream> stream) {
  try {
    return mlext::build_cholesky_inv(l, flags, stream)[0];
  } catch (const mlext::CoreError &e) {
    raise_message(e.status, e.what());
  }
}

}  // namespace

NB_MODULE(_ext, m) {
  m.doc() = "metal_linalg's compiled part: lazy MLX primitives over the core's C API";
  m.attr("MLX_VERSION") = ML_MLX_VERSION;

  m.def("decompose", &decompose, nb::arg("a"), nb::arg("op"), nb::arg("flags"),
        nb::arg("with_info"), nb::arg("stream").none());
  m.def("solve_rhs", &solve_rhs, nb::arg("a"), nb::arg("b"), nb::arg("op"), nb::arg("flags"),
        nb::arg("with_info"), nb::arg("stream").none());
  m.def("tri_inv", &tri_inv, nb::arg("a"), nb::arg("flags"), nb::arg("stream").none());
  m.def("cholesky_inv", &cholesky_inv, nb::arg("l"), nb::arg("flags"), nb::arg("stream").none());
  // Whether a is traced by a transformation (its value may not be readable: mx.compile and
  // mx.vmap refuse to evaluate what depends on their placeholders).
  m.def("is_tracer", [](const mx::array &a) { return a.is_tracer(); });
  m.def("gpu_path", [] { return std::string(mlext::gpu_path()); });
  // The core's op names in ml_op order (its op table).
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (int op = 0; op < ml_op_count(); ++op) names.emplace_back(ml_op_name(op));
    return names;
  });
  // Whether op has GPU kernels (ml_op_kernels: a routing policy to calibrate) and whether it
  // is a linear system (ml_op_linear_system: LAPACK's info words).
  m.def("op_kernels", [](int op) { return ml_op_kernels(op) != 0; });
  m.def("op_linear_system", [](int op) { return ml_op_linear_system(op) != 0; });
  m.def("op_inputs", &ml_op_inputs);
  // Per output of op under flags (the table's order): its dimensions as "m", "n", "k"
  // symbols ("" where the op has no such output).
  m.def("output_symbols", [](int op, int flags) {
    std::vector<std::string> out;
    for (int i = 0; i < ml_output_count(op); ++i) {
      int32_t ndim = 0;
      char dims[2] = {0, 0};
      check(ml_output_desc(op, flags, i, nullptr, &ndim, dims, nullptr), "output_desc");
      out.emplace_back(dims, dims + ndim);
    }
    return out;
  });
  // The stream a call runs on; shape: [batch, m, n] (and nrhs for the ops with a right-hand
  // side, 1 when not given).
  m.def("placement", [](int op, int flags, const std::vector<int64_t> &shape, mx::Stream s) {
    if (shape.size() < 3) raise_message(ML_INVALID_ARGUMENT, "[metal_linalg.placement] bad shape");
    mlext::Sizes sizes{shape[0], shape[1], shape[2], 0};
    if (ml_op_inputs(op) > 1) sizes.nrhs = shape.size() > 3 ? shape[3] : 1;
    return mlext::placement(mlext::Spec{op, flags, false}, sizes, s);
  });
  // What a call placed on the GPU stream runs: the route of device buffers of this flavour
  // (nrhs: the right-hand side's columns of an op that takes one).
  m.def("gpu_backend", [](int op, int64_t m_, int64_t n, int64_t batch, int64_t nrhs) {
    const bool metal = std::string(mlext::gpu_path()) == "metal";
    return backend_name(op, metal ? ML_MEMORY_METAL : ML_MEMORY_CUDA, m_, n, batch, nrhs);
  }, nb::arg("op"), nb::arg("m"), nb::arg("n"), nb::arg("batch"), nb::arg("nrhs") = 1);

  m.def("api_version", &ml_api_version);
  m.def("version_string", [] { return std::string(ml_version_string()); });
  m.def("device_name", [] { return std::string(ml_device_name()); });
  m.def("backend_available", [](const std::string &b) { return ml_backend_available(b.c_str()) != 0; });
  m.def("backend", [](int op, int64_t m_, int64_t n, int64_t batch, int64_t nrhs) {
    return backend_name(op, ML_MEMORY_HOST, m_, n, batch, nrhs);
  }, nb::arg("op"), nb::arg("m"), nb::arg("n"), nb::arg("batch"), nb::arg("nrhs") = 1);
  m.def("policy_get", &policy_get);
  m.def("policy_set", [](int op, const std::string &field, int64_t value) {
    check(ml_policy_set(op, field.c_str(), value), "set_policy");
  });
  m.def("policy_reset", [](int op) { check(ml_policy_reset(op), "reset_policy"); });
  m.def("policy_source", [](int op) { return std::string(ml_policy_source(op)); });
  m.def("calibration_status", [](int op) { return std::string(ml_calibration_status(op)); });
  m.def("policy_file", [] { return std::string(ml_policy_file()); });
  m.def("policy_reload", [] { check(ml_policy_reload(), "policy_reload"); });
  m.def("set_cpu_threads", [](int n) { check(ml_set_cpu_threads(n), "set_cpu_threads"); });
  m.def("get_cpu_threads", &ml_get_cpu_threads);
  m.def("set_lapack", [](const std::string &path, const std::string &prefix, const std::string &suffix) {
    check(ml_set_lapack(path.c_str(), prefix.c_str(), suffix.c_str()), "set_lapack");
  });
  m.def("lapack_info", [] { return std::string(ml_lapack_info()); });
  // The core's pending warnings, one per line ("" when none); the first call claims them from
  // stderr (_queries.py turns them into Python warnings).
  m.def("take_warnings", [] {
    size_t needed = 0;
    check(ml_take_warnings(nullptr, 0, &needed), "take_warnings");
    if (ml_pending_warnings() == 0) return std::string();
    std::vector<char> buf(needed + 1, '\0');
    check(ml_take_warnings(buf.data(), buf.size(), &needed), "take_warnings");
    return std::string(buf.data());
  });
  m.def("pending_warnings", &ml_pending_warnings);
  m.def("set_cpu_only", [](bool on) { ml_set_cpu_only(on ? 1 : 0); });
  m.def("cpu_only", [] { return ml_cpu_only() != 0; });
  m.def("gpu_core_count", &ml_gpu_core_count);
}
