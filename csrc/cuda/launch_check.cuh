// The kernel files' launch check: what C10_CUDA_KERNEL_LAUNCH_CHECK did, without c10, so that the
// kernel files are the same in both op-layer builds and a stable-ABI build imports no torch C++
// symbol. A failed launch raises a RuntimeError in Python naming the CUDA error and the launch site.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace causal_conv1d_cuda {

inline void check_launch(const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(err) + " (kernel launch at " + file +
                             ":" + std::to_string(line) + ")");
  }
}

}  // namespace causal_conv1d_cuda

#define CC1D_CUDA_LAUNCH_CHECK() ::causal_conv1d_cuda::check_launch(__FILE__, __LINE__)
