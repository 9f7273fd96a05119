// Helpers shared by the fast channel-first kernels (fwd_cf_fast.cu, bwd_cf_fast.cu): 16 bytes <-> 4
// or 8 floats in registers (no aliasing through memory), 16-byte global loads and stores that stay
// 128 bits wide in SASS, and the exact-width weight load.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.cuh"

namespace causal_conv1d_cuda {

__device__ __forceinline__ void unpack(const uint4& r, float (&f)[4]) {
  f[0] = __uint_as_float(r.x);
  f[1] = __uint_as_float(r.y);
  f[2] = __uint_as_float(r.z);
  f[3] = __uint_as_float(r.w);
}
__device__ __forceinline__ void unpack2_bf16(uint32_t w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ void unpack(const uint4& r, float (&f)[8], __nv_bfloat16) {
  unpack2_bf16(r.x, f[0], f[1]);
  unpack2_bf16(r.y, f[2], f[3]);
  unpack2_bf16(r.z, f[4], f[5]);
  unpack2_bf16(r.w, f[6], f[7]);
}
__device__ __forceinline__ void unpack2_f16(uint32_t w, float& lo, float& hi) {
  lo = __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
  hi = __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
}
__device__ __forceinline__ void unpack(const uint4& r, float (&f)[8], __half) {
  unpack2_f16(r.x, f[0], f[1]);
  unpack2_f16(r.y, f[2], f[3]);
  unpack2_f16(r.z, f[4], f[5]);
  unpack2_f16(r.w, f[6], f[7]);
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi, __nv_bfloat16) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return static_cast<uint32_t>(__bfloat16_as_ushort(h.x)) | (static_cast<uint32_t>(__bfloat16_as_ushort(h.y)) << 16);
}
__device__ __forceinline__ uint32_t pack2(float lo, float hi, __half) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return static_cast<uint32_t>(__half_as_ushort(h.x)) | (static_cast<uint32_t>(__half_as_ushort(h.y)) << 16);
}

// 16 bytes of T <-> kPer floats.
template <typename T>
struct Vec16 {
  static constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  __device__ __forceinline__ static void load(const uint4& r, float (&f)[kPer]) {
    if constexpr (sizeof(T) == 4) {
      unpack(r, f);
    } else {
      unpack(r, f, T{});
    }
  }
  __device__ __forceinline__ static uint4 store(const float (&f)[kPer]) {
    if constexpr (sizeof(T) == 4) {
      return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
    } else {
      return make_uint4(pack2(f[0], f[1], T{}), pack2(f[2], f[3], T{}), pack2(f[4], f[5], T{}), pack2(f[6], f[7], T{}));
    }
  }
};

__device__ __forceinline__ uint4 ld_global_16(const void* ptr) { return __ldg(reinterpret_cast<const uint4*>(ptr)); }

// One 16-byte store (inline PTX: keeps ptxas from splitting it into 4-byte stores when the four
// words do not sit in consecutive registers).
__device__ __forceinline__ void st_global_16(void* ptr, const uint4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// w[c][k] = base[c * kW + k] as float: kC * kW contiguous elements of Wt (a multiple of 16 bytes,
// 16-byte aligned), by 16-byte loads.
template <typename Wt, int kC, int kW>
__device__ __forceinline__ void load_tile16(const Wt* __restrict__ base, float (&w)[kC][kW]) {
  constexpr int kBytes = kC * kW * static_cast<int>(sizeof(Wt));
  constexpr int kN = kBytes % 16 == 0 ? kBytes / 16 : 1;
  uint4 raw[kN];
#pragma unroll
  for (int v = 0; v < kN; ++v) raw[v] = ld_global_16(reinterpret_cast<const uint4*>(base) + v);
#pragma unroll
  for (int c = 0; c < kC; ++c)
#pragma unroll
    for (int k = 0; k < kW; ++k) w[c][k] = to_float(reinterpret_cast<const Wt*>(&raw[0])[c * kW + k]);
}

// Programmatic dependent launch (sm_90+; no-ops when compiled for older GPUs). pdl_trigger: the next
// grid in the stream, if launched with programmatic stream serialization, may start its blocks now.
// pdl_wait: block until the grids before this one are complete and their memory is visible; returns
// at once in a grid not launched that way. (bwd_cf_fast.cu: launch_bwd_fast_reduce.)
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// An L2 prefetch of the 128-byte line at ptr (no register, nothing to wait for) at evict_last
// priority: the line survives the streaming traffic until its use (at normal priority the forward
// gained less: docs/PERF_NOTES.md). A line left at evict_last outlives its one use and crowds
// later ops out of L2 (a 24 MB tensor read after the forward took 14.7 instead of 12.1
// us, even with a 256 MB memset between), so the load that uses it must reset it: an access with an
// evict_normal cache hint does (that read 12.8 us, 13.0 without prefetch); an evict_first hint or .cs
// does not (15.9 us).
__device__ __forceinline__ void prefetch_l2_evict_last(const void* ptr) {
  asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(ptr));
}

// w[k] = weight[d, k] as float (kW == width: no padded taps), one dtype switch for all taps.
template <typename W, int kW>
__device__ __forceinline__ void load_weights_as(const ConvParams& p, int d, float (&w)[kW]) {
  const W* __restrict__ wr = static_cast<const W*>(p.weight) + d * p.w_cs;
#pragma unroll
  for (int k = 0; k < kW; ++k) w[k] = to_float(wr[k * p.w_ws]);
}
template <int kW>
__device__ __forceinline__ void load_weights_exact(const ConvParams& p, int d, float (&w)[kW]) {
  switch (p.w_dtype) {
    case kFloat16: load_weights_as<__half, kW>(p, d, w); break;
    case kBFloat16: load_weights_as<__nv_bfloat16, kW>(p, d, w); break;
    default: load_weights_as<float, kW>(p, d, w); break;
  }
}

}  // namespace causal_conv1d_cuda
