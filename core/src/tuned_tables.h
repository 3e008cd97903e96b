// The measured policy tables of core/tuned/*.policy, embedded at build time
// (CMake generates the definition). Null-terminated array of file contents.
#pragma once

namespace ml {
extern const char *const tuned_tables[];
}
