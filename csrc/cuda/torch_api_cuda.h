// The CUDA names of the op layer's torch view (csrc/torch_api.h): the current stream and the
// device guard, on the stable ABI's C shims or on c10/ATen (legacy build).
#pragma once

#include "torch_api.h"

#include <cuda_runtime.h>

#if CAUSAL_CONV1D_STABLE_ABI
#include <torch/csrc/inductor/aoti_torch/c/shim.h>  // aoti_torch_get_current_cuda_stream (USE_CUDA)
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>
#else
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace causal_conv1d {

// The current CUDA stream of device `index` (torch.cuda.current_stream()).
inline cudaStream_t current_cuda_stream(int32_t index) {
#if CAUSAL_CONV1D_STABLE_ABI
  void* stream = nullptr;
  STD_TORCH_CHECK(aoti_torch_get_current_cuda_stream(index, &stream) == AOTI_TORCH_SUCCESS,
                  "[RuntimeError] could not get the current CUDA stream of device ", index);
  return static_cast<cudaStream_t>(stream);
#else
  return at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index)).stream();
#endif
}

// Makes t's device current for the guard's lifetime (RAII; restores the previous device).
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(const Tensor& t)
#if CAUSAL_CONV1D_STABLE_ABI
      : guard_(static_cast<torch::stable::accelerator::DeviceIndex>(t.get_device_index())) {
  }
#else
      : guard_(t.device()) {
  }
#endif
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
#if CAUSAL_CONV1D_STABLE_ABI
  torch::stable::accelerator::DeviceGuard guard_;
#else
  c10::cuda::CUDAGuard guard_;
#endif
};

// The device index of a CUDA tensor.
inline int32_t device_index(const Tensor& t) {
#if CAUSAL_CONV1D_STABLE_ABI
  return static_cast<int32_t>(t.get_device_index());
#else
  return static_cast<int32_t>(t.get_device());
#endif
}

// read(index) for device `index`, computed once per device and kept in `cache` (0: not read yet;
// read must return > 0). Devices past the cache's size are read every time.
constexpr int kMaxDevices = 64;
template <typename Read>
inline int once_per_device(int (&cache)[kMaxDevices], int32_t index, Read read) {
  if (index >= 0 && index < kMaxDevices && cache[index] > 0) return cache[index];
  const int v = read(index);
  if (index >= 0 && index < kMaxDevices) cache[index] = v;
  return v;
}

// The number of SMs of device `index`, read once per device.
inline int sm_count(int32_t index) {
  static int counts[kMaxDevices] = {};
  return once_per_device(counts, index, [](int32_t i) {
    int n = 0;
    const cudaError_t err = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, i);
    CC1D_CHECK(err == cudaSuccess, "cudaDeviceGetAttribute(MultiProcessorCount) failed on device ", i, ": ",
               cudaGetErrorString(err));
    return n;
  });
}

// Whether device `index` takes programmatic dependent launches (the backward's reduce kernel,
// launch_bwd_fast_reduce): compute capability >= 9.0, and a runtime and driver of CUDA >= 12.3 (their
// capture into CUDA graphs); read once per device. A failed query answers no.
inline bool pdl_capable(int32_t index) {
#if CUDART_VERSION >= 12030
  static int states[kMaxDevices] = {};  // 1 no, 2 yes
  return once_per_device(states, index, [](int32_t i) {
           int major = 0, driver = 0;
           const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) == cudaSuccess &&
                           cudaDriverGetVersion(&driver) == cudaSuccess && major >= 9 && driver >= 12030;
           (void)cudaGetLastError();
           return ok ? 2 : 1;
         }) == 2;
#else
  (void)index;
  return false;
#endif
}

}  // namespace causal_conv1d
