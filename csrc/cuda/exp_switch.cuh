// TEMPORARY (issue 16 experiments, branch exp17): integer run-time switches for A/B runs on the
// device. Removed before merge.
#pragma once
#include <cstdlib>
namespace causal_conv1d_cuda {
inline int exp_int(const char* name, int dflt) {
  const char* s = std::getenv(name);
  return (s == nullptr || *s == 0) ? dflt : std::atoi(s);
}
}  // namespace causal_conv1d_cuda
