// Per-thread last-error message of the C API. Every message starts with the
// function it comes from: "[metal_linalg::qr] ...".
#pragma once
#include "metal_linalg/metal_linalg.h"

namespace ml {

// Records "[metal_linalg::<where>] <printf message>" for this thread and returns status.
ml_status fail(ml_status status, const char *where, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void clear_error();
const char *last_error();

}  // namespace ml
