// metal_linalg._ext: mx.array in, mx.array out, through the core's C API only.
// Inputs are evaluated on the CPU stream, cast to float32 and made row-contiguous;
// outputs are fresh float32 arrays filled by the core in host memory. Argument
// checks that need Python types (dtype, mode strings) live in __init__.py.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "metal_linalg/metal_linalg.h"
#include "mlx/allocator.h"
#include "mlx/array.h"
#include "mlx/ops.h"
#include "mlx/transforms.h"

namespace nb = nanobind;
namespace mx = mlx::core;

namespace {

[[noreturn]] void raise_status(ml_status st, const char *where) {
  std::string msg = std::string("[metal_linalg.") + where + "] " + ml_last_error();
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

void check(ml_status st, const char *where) {
  if (st != ML_OK) raise_status(st, where);
}

// Batch dims, rows, columns of a [..., m, n] array.
struct Dims {
  mx::Shape batch_shape;
  int64_t batch = 1, m = 0, n = 0;
};

Dims dims_of(const mx::array &a, const char *where) {
  if (a.ndim() < 2)
    throw nb::value_error((std::string("[metal_linalg.") + where +
                           "] expected an array with at least 2 dimensions")
                              .c_str());
  Dims d;
  const auto &s = a.shape();
  d.batch_shape = mx::Shape(s.begin(), s.end() - 2);
  for (auto x : d.batch_shape) d.batch *= x;
  d.m = s[s.size() - 2];
  d.n = s[s.size() - 1];
  return d;
}

// Row-major float32 values of an evaluated float32 array with any strides
// (transposed or sliced views), gathered without a trip through MLX's scheduler.
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

// Row-major float32 input for the core. An evaluated row-contiguous float32 array
// is used in place; float32 views are gathered here; other dtypes are converted by
// MLX on the CPU stream. (MLX ops cost tens of microseconds in its scheduler, more
// than a small decomposition.)
struct HostInput {
  mx::array keep;
  std::vector<float> gathered;
  const float *data = nullptr;

  explicit HostInput(const mx::array &a) : keep(a) {
    keep.eval();
    if (keep.dtype() != mx::float32) {
      const mx::StreamOrDevice cpu = mx::Device(mx::Device::cpu);
      keep = mx::contiguous(mx::astype(keep, mx::float32, cpu), false, cpu);
      keep.eval();
    }
    if (keep.flags().row_contiguous) {
      data = keep.data<float>();
    } else {
      gathered = gather_f32(keep);
      data = gathered.data();
    }
  }
};

mx::Shape with_tail(const mx::Shape &batch, std::initializer_list<int64_t> tail) {
  mx::Shape s = batch;
  for (auto t : tail) s.push_back(static_cast<int>(t));
  return s;
}

// A new float32 array the core writes into (MLX allocator, so MLX frees it).
mx::array new_f32(const mx::Shape &shape) {
  size_t count = 1;
  for (auto d : shape) count *= static_cast<size_t>(d);
  if (count == 0) {
    mx::array z = mx::zeros(shape, mx::float32);
    z.eval();
    return z;
  }
  return mx::array(mx::allocator::malloc(count * sizeof(float)), shape, mx::float32);
}

bool empty(const Dims &d) { return d.batch == 0 || d.m == 0 || d.n == 0; }

// mode: ML_QR_*; returns (Q or None, R).
nb::tuple qr(const mx::array &a, int mode) {
  Dims d = dims_of(a, "qr");
  const int64_t k = d.m < d.n ? d.m : d.n;
  const int64_t qcols = mode == ML_QR_COMPLETE ? d.m : k;
  const int64_t rrows = mode == ML_QR_COMPLETE ? d.m : k;
  mx::array r = new_f32(with_tail(d.batch_shape, {rrows, d.n}));
  if (mode == ML_QR_R) {
    if (!empty(d)) {
      HostInput x(a);
      nb::gil_scoped_release nogil;
      check(ml_qr(nullptr, x.data, d.batch, d.m, d.n, mode, nullptr, r.data<float>(),
                  nullptr),
            "qr");
    }
    return nb::make_tuple(nb::none(), r);
  }
  mx::array q = new_f32(with_tail(d.batch_shape, {d.m, qcols}));
  if (!empty(d)) {
    HostInput x(a);
    nb::gil_scoped_release nogil;
    check(ml_qr(nullptr, x.data, d.batch, d.m, d.n, mode, q.data<float>(),
                r.data<float>(), nullptr),
          "qr");
  }
  return nb::make_tuple(q, r);
}

nb::tuple eigh(const mx::array &a, int uplo) {
  Dims d = dims_of(a, "eigh");
  mx::array w = new_f32(with_tail(d.batch_shape, {d.n}));
  mx::array v = new_f32(with_tail(d.batch_shape, {d.n, d.n}));
  if (!empty(d)) {
    HostInput x(a);
    nb::gil_scoped_release nogil;
    check(ml_eigh(nullptr, x.data, d.batch, d.n, uplo, w.data<float>(), v.data<float>(),
                  nullptr),
          "eigh");
  }
  return nb::make_tuple(w, v);
}

mx::array eigvalsh(const mx::array &a, int uplo) {
  Dims d = dims_of(a, "eigvalsh");
  mx::array w = new_f32(with_tail(d.batch_shape, {d.n}));
  if (!empty(d)) {
    HostInput x(a);
    nb::gil_scoped_release nogil;
    check(ml_eigvalsh(nullptr, x.data, d.batch, d.n, uplo, w.data<float>(), nullptr),
          "eigvalsh");
  }
  return w;
}

nb::tuple svd(const mx::array &a, bool full_matrices) {
  Dims d = dims_of(a, "svd");
  const int64_t k = d.m < d.n ? d.m : d.n;
  mx::array u = new_f32(with_tail(d.batch_shape, {d.m, k}));
  mx::array s = new_f32(with_tail(d.batch_shape, {k}));
  mx::array vt = new_f32(with_tail(d.batch_shape, {k, d.n}));
  if (!empty(d)) {
    HostInput x(a);
    nb::gil_scoped_release nogil;
    check(ml_svd(nullptr, x.data, d.batch, d.m, d.n, full_matrices ? 1 : 0,
                 u.data<float>(), s.data<float>(), vt.data<float>(), nullptr),
          "svd");
  }
  return nb::make_tuple(u, s, vt);
}

mx::array svdvals(const mx::array &a) {
  Dims d = dims_of(a, "svdvals");
  const int64_t k = d.m < d.n ? d.m : d.n;
  mx::array s = new_f32(with_tail(d.batch_shape, {k}));
  if (!empty(d)) {
    HostInput x(a);
    nb::gil_scoped_release nogil;
    check(ml_svdvals(nullptr, x.data, d.batch, d.m, d.n, s.data<float>(), nullptr),
          "svdvals");
  }
  return s;
}

std::string policy_get(int op) {
  size_t needed = 0;
  check(ml_policy_get(op, nullptr, 0, &needed), "policy");
  std::vector<char> buf(needed + 1, '\0');
  check(ml_policy_get(op, buf.data(), buf.size(), &needed), "policy");
  return std::string(buf.data());
}

}  // namespace

NB_MODULE(_ext, m) {
  m.doc() = "metal_linalg's compiled part: decompositions of mx.array through the C API";
  m.attr("MLX_VERSION") = ML_MLX_VERSION;

  m.def("qr", &qr, nb::arg("a"), nb::arg("mode"));
  m.def("eigh", &eigh, nb::arg("a"), nb::arg("uplo"));
  m.def("eigvalsh", &eigvalsh, nb::arg("a"), nb::arg("uplo"));
  m.def("svd", &svd, nb::arg("a"), nb::arg("full_matrices"));
  m.def("svdvals", &svdvals, nb::arg("a"));

  m.def("api_version", &ml_api_version);
  m.def("version_string", [] { return std::string(ml_version_string()); });
  m.def("device_name", [] { return std::string(ml_device_name()); });
  m.def("backend_available", [](const std::string &b) { return ml_backend_available(b.c_str()) != 0; });
  m.def("backend", [](int op, int64_t m_, int64_t n, int64_t batch) {
    const char *name = ml_backend(op, ML_MEMORY_HOST, m_, n, batch);
    if (name == nullptr || *name == '\0') raise_status(ML_INVALID_ARGUMENT, "backend");
    return std::string(name);
  });
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
}
