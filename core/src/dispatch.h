// Dispatch: validates a call, resolves its policy, asks routing.h where it runs and hands it
// to that backend through the interface of backend.h.
#pragma once
#include "backend.h"

namespace ml {

// Validates and runs one C API call. exec may be null (host memory).
ml_status dispatch(const char *where, const ml_exec *exec, const Call &c);
// The backend name dispatch would pick (flags 0; nrhs right-hand side columns for the ops that
// take one), or "" with the last error set.
const char *backend_for(int32_t op, int32_t memory, int64_t m, int64_t n, int64_t batch,
                        int64_t nrhs = 1);
// ml_plan: where c's buffers must live (exec->memory, or the host when the core would rather
// compute a device call there), its device workspace and its plan name; outputs may be null.
ml_status plan_query(const ml_exec *exec, const Call &c, int32_t *memory, int64_t *bytes,
                     const char **name);
// Workspace bytes for a call (host: 0, the library keeps its own scratch).
ml_status workspace_size(const ml_exec *exec, const Call &c, int64_t *bytes);

}  // namespace ml
