#include "errors.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace ml {
namespace {
thread_local std::string g_last_error;
}

ml_status fail(ml_status status, const char *where, const char *fmt, ...) {
  char msg[768];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, args);
  va_end(args);
  try {
    g_last_error = std::string("[metal_linalg::") + where + "] " + msg;
  } catch (...) {
    // Out of memory while reporting: keep the status, lose the text.
  }
  return status;
}

void clear_error() { g_last_error.clear(); }

const char *last_error() { return g_last_error.c_str(); }

}  // namespace ml
