#include "device.h"

#include <cstdio>
#include <cstring>
#include <string>

#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include "backend.h"

namespace ml {
namespace {

std::string trim(const std::string &s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string cpu_model() {
#if defined(__APPLE__)
  char buf[256];
  size_t len = sizeof buf;
  if (sysctlbyname("machdep.cpu.brand_string", buf, &len, nullptr, 0) == 0 && len > 0)
    return trim(std::string(buf, strnlen(buf, len)));
#else
  if (FILE *f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    std::string found;
    while (std::fgets(line, sizeof line, f)) {
      // x86 says "model name"; some ARM kernels only give "Hardware" or "CPU part".
      if (std::strncmp(line, "model name", 10) == 0 || std::strncmp(line, "Hardware", 8) == 0) {
        if (const char *colon = std::strchr(line, ':')) found = trim(colon + 1);
        if (!found.empty()) break;
      }
    }
    std::fclose(f);
    if (!found.empty()) return found;
  }
#endif
  return "unknown CPU";
}

}  // namespace

bool gpu_usable() { return host_gpu_backend() != nullptr; }

const char *device_name() {
  static const std::string name = [] {
    if (const Backend *gpu = host_gpu_backend()) {
      const char *n = gpu->device_name();
      if (n && *n) return std::string(n);
    }
    return cpu_model();
  }();
  return name.c_str();
}

}  // namespace ml
