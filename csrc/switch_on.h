// Run-time switches of the kernel paths (CAUSAL_CONV1D_*_FAST, CAUSAL_CONV1D_CPU_HUGE_PAGES): shared by
// the CPU kernels and the CUDA kernel files (no ATen here, so the .cu files stay quick to compile).
#pragma once

#include <cstdlib>
#include <cstring>

namespace causal_conv1d {

// Whether a switch is on: unless the environment variable `name` is "0". Callers cache the answer in
// a function-local static (read once per process).
inline bool switch_on(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr || std::strcmp(env, "0") != 0;
}

}  // namespace causal_conv1d
