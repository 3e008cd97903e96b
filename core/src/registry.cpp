// The registration site: the one file of the core that knows which backends this build has
// (ML_WITH_CUDA / ML_WITH_METAL come from cuda/ and metal/). Everything else asks here.
#include <cstring>

#include "backend.h"
#include "env_check.h"

namespace ml {

#if defined(ML_WITH_CUDA)
Backend &cuda_backend();  // cuda/cuda_backend.cu
#endif
#if defined(ML_WITH_METAL)
Backend &metal_backend();  // metal/metal_backend.cpp
#endif

namespace {

struct Registry {
  Backend *list[3];
  int count = 0;
  Registry() {
    check_environment();  // the first use of the core: unknown settings warn here, once
    list[count++] = &cpu_backend();
#if defined(ML_WITH_CUDA)
    list[count++] = &cuda_backend();
#endif
#if defined(ML_WITH_METAL)
    list[count++] = &metal_backend();
#endif
  }
};

const Registry &registry() {
  static const Registry r;
  return r;
}

}  // namespace

Backend *const *backends(int *n) {
  *n = registry().count;
  return registry().list;
}

Backend *backend_named(const char *name) {
  if (!name) return nullptr;
  int n = 0;
  Backend *const *all = backends(&n);
  for (int i = 0; i < n; ++i)
    if (std::strcmp(all[i]->name(), name) == 0) return all[i];
  return nullptr;
}

Backend *backend_for_memory(int32_t memory) {
  if (memory == ML_MEMORY_HOST) return nullptr;
  int n = 0;
  Backend *const *all = backends(&n);
  for (int i = 0; i < n; ++i)
    if (all[i]->memory() == memory) return all[i];
  return nullptr;
}

Backend *host_gpu_backend() {
  int n = 0;
  Backend *const *all = backends(&n);
  for (int i = 0; i < n; ++i)
    if (all[i]->memory() != ML_MEMORY_HOST && all[i]->available()) return all[i];
  return nullptr;
}

}  // namespace ml
