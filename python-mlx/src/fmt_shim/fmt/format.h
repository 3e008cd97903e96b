// Stand-in for {fmt}'s fmt::format, for MLX's CUDA backend headers (mlx/backend/cuda/*.h
// include <fmt/format.h>, which the MLX wheels do not ship). Those headers use it only to word
// error messages in templates this module never instantiates; this version replaces each "{}"
// with the next argument, as written by operator<<. Only python-mlx/src/gpu_eval_cuda.cpp
// sees it.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace fmt {

namespace detail {
inline void put(std::ostringstream &out, std::string_view &f) { out << f; }

template <class T, class... Rest>
void put(std::ostringstream &out, std::string_view &f, const T &first, const Rest &...rest) {
  const size_t at = f.find("{}");
  if (at == std::string_view::npos) {
    out << f;
    return;
  }
  out << f.substr(0, at) << first;
  f.remove_prefix(at + 2);
  put(out, f, rest...);
}
}  // namespace detail

template <class... Args>
std::string format(std::string_view f, const Args &...args) {
  std::ostringstream out;
  detail::put(out, f, args...);
  return out.str();
}

}  // namespace fmt
