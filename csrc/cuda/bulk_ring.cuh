// Per-warp rings of shared-memory stages filled by 1-D bulk copies (`cp.async.bulk`, the copy
// engine of sm_90+), completing on one mbarrier per stage. Used by the fast channel-first kernels
// (fwd_cf_fast.cu, bwd_cf_fast.cu) to keep many segments of input in flight without registers.
//
// Protocol (one warp owns its ring; no block-wide barrier anywhere):
//   lane 0: init(bars, stages); then for each segment i < stages: expect_tx(bar[i], bytes) + copies.
//   all lanes, segment i: wait(bar[i % S], (i / S) & 1); read the stage; __syncwarp();
//   lane 0: fence_proxy_async(); expect_tx + copies of segment i + S into the same stage.
// The host must check that the device is sm_90 or newer (bulk_copy_supported) before launching a
// kernel that uses these; on older targets the device functions compile to nothing (never run).
#pragma once

#include <cstdint>
#include <cstdlib>

#include <cuda_runtime.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CAUSAL_CONV1D_BULK_DEVICE 1
#endif

namespace causal_conv1d_cuda {
namespace bulk {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// lane 0 of the owning warp: every stage barrier expects one arrival (lane 0's expect_tx).
__device__ __forceinline__ void init(uint64_t* bars, int stages) {
#ifdef CAUSAL_CONV1D_BULK_DEVICE
  for (int s = 0; s < stages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bars + s)) : "memory");
  // make the initialised barriers visible to the copy engine (async proxy)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Orders this thread's earlier generic shared-memory accesses before later bulk copies into them.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef CAUSAL_CONV1D_BULK_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Arrive on bar and add `bytes` to the bytes it waits for (the copies of this phase).
__device__ __forceinline__ void expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef CAUSAL_CONV1D_BULK_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
#endif
}

// global -> shared bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned),
// completing on bar.
__device__ __forceinline__ void copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#ifdef CAUSAL_CONV1D_BULK_DEVICE
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
#endif
}

// Wait until the phase of bar with this parity has completed (its copies have landed).
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
#ifdef CAUSAL_CONV1D_BULK_DEVICE
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "BULK_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra BULK_WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace bulk

// Whether the current device has the bulk copy engine (compute capability >= 9.0); cached per device.
inline bool bulk_copy_supported() {
  static int cc_major[64] = {};  // 0: not asked yet
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (dev < 0 || dev >= 64) return false;
  if (cc_major[dev] == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    cc_major[dev] = major;
  }
  return cc_major[dev] >= 9;
}

// Resident blocks per SM of `kernel` at `threads` threads and `smem` bytes of dynamic shared memory
// (0 if its machine code is older than sm_90 or it cannot run), raising the kernel's dynamic shared-memory limit first (needed above 48 KB); 0 if it cannot run.
// The caller caches the answer (one per kernel and configuration).
inline int bulk_blocks_per_sm(const void* kernel, int threads, int smem) {
  // the kernel's machine code must be sm_90+ (a build for older targets run through the driver's
  // PTX JIT compiles the bulk kernels' bodies away): never launch it otherwise
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (attr.binaryVersion < 90 || attr.ptxVersion < 90) return 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// An integer from the environment, or dflt when unset or not a number (the caller reads it once).
inline int env_int(const char* name, int dflt) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return dflt;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<int>(v) : dflt;
}

}  // namespace causal_conv1d_cuda
