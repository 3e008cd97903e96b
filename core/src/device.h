// What the library runs on: the name policies are keyed by.
#pragma once

namespace ml {

// The first usable GPU backend's device name (backend.h's registry order), else the CPU model.
const char *device_name();
// Whether a GPU backend is built and usable (a device and driver).
bool gpu_usable();

}  // namespace ml
