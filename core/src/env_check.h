// Settings that would otherwise fail silently: an unknown METAL_LINALG_* variable (a typo is
// ignored by every reader) and METAL_LINALG_POLICY_FILE naming a file that does not exist.
#pragma once

namespace ml {

// Warns (errors.h) once per process, naming the closest valid setting; later calls do nothing.
void check_environment();

}  // namespace ml
