// What the library runs on: the name policies are keyed by and the backends
// usable in this process.
#pragma once

namespace ml {

// CUDA device name when the CUDA backend is usable, else the CPU model name.
const char *device_name();
// True when the CUDA backend was built and a device is usable.
bool cuda_usable();

}  // namespace ml
