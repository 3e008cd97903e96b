// Per-thread last-error message of the C API. Every message starts with the
// function it comes from: "[metal_linalg::qr] ...".
//
// Warnings (a setting that is ignored or adjusted when it takes effect) are
// process-wide: they go to stderr until a frontend claims them with
// ml_take_warnings(), then they queue until it next asks.
#pragma once
#include <cstddef>

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

// Records "[metal_linalg] <printf message>" as a warning (each distinct text once per process).
void warn(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
// Pending warnings, one per line, then cleared; claims the warnings for the caller (see above).
ml_status take_warnings(char *buf, size_t buf_len, size_t *needed);
int32_t pending_warnings();

// Around fork() (cpu_backend.cpp): the warning lock held, so a child never inherits it locked.
void lock_warnings_for_fork();
void unlock_warnings_after_fork();

}  // namespace ml
