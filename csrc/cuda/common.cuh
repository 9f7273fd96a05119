// Shared device helpers and launch parameters for the CUDA kernels of causal-conv1d.
//
// Kernel files include only this header (CUDA runtime) and launch_check.cuh, never torch, so
// that each .cu compiles quickly. ops_cuda.cpp fills the parameter structs from tensors.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernel_paths.h"

namespace causal_conv1d_cuda {

// Element type codes shared by host and device (x, weight, bias, states, gradients).
enum DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// The forward / backward problem. All strides are in elements; every offset is 64-bit.
// x is (batch, dim, seqlen) with either stride_l == 1 (channel-first) or stride_c == 1
// (channel-last). "width" is the real filter width; kernels are compiled for a padded width
// kW in {4, 8} and treat taps k < kW - width as absent.
struct ConvParams {
  int batch = 0, dim = 0, width = 0;
  int64_t seqlen = 0;
  int x_dtype = kFloat32, w_dtype = kFloat32, b_dtype = kFloat32;
  bool silu = false;

  const void* x = nullptr;
  int64_t x_bs = 0, x_cs = 0, x_ls = 0;
  void* out = nullptr;  // fwd output (x's dtype)
  int64_t out_bs = 0, out_cs = 0, out_ls = 0;
  const void* weight = nullptr;  // (dim, width)
  int64_t w_cs = 0, w_ws = 0;
  const void* bias = nullptr;  // (dim,) or null
  int64_t b_s = 0;
  const int32_t* seq_idx = nullptr;  // (batch, seqlen) int32 or null
  int64_t s_bs = 0, s_ls = 0;
  const void* init = nullptr;  // initial_states (batch, dim, width-1), x's dtype, or null
  int64_t i_bs = 0, i_cs = 0, i_ls = 0;
  void* final_out = nullptr;  // final_states (batch, dim, width-1), x's dtype, or null
  int64_t f_bs = 0, f_cs = 0, f_ls = 0;

  // backward only
  const void* dout = nullptr;  // x's dtype, same layout kind as x
  int64_t do_bs = 0, do_cs = 0, do_ls = 0;
  void* dx = nullptr;
  int64_t dx_bs = 0, dx_cs = 0, dx_ls = 0;
  const void* dfinal = nullptr;  // dfinal_states (x's dtype) or null
  int64_t df_bs = 0, df_cs = 0, df_ls = 0;
  void* dinit = nullptr;  // dinitial_states (x's dtype) or null
  int64_t di_bs = 0, di_cs = 0, di_ls = 0;
  void* dweight = nullptr;  // (dim, width) contiguous, weight's dtype
  void* dbias = nullptr;    // (dim,), bias's dtype, or null
  float* partial = nullptr;  // workspace: nparts x (kW + 1) x dim floats
  int64_t nparts = 0;

  // Set by the host: the layout of x (and so of out, dout, dx) and whether 16-byte vector accesses
  // are legal for every row of x / out / dout / dx.
  bool channel_last = false;
  bool vec_ok = false;
  // whether the device takes programmatic dependent launches (pdl_capable; in vec_ok's padding: the
  // struct's layout and the kernels' parameter offsets are those of the struct without it)
  bool pdl = false;
  int num_sms = 132;

  // Packed sequences (the packed backward on bwd_cl_fast; batch 1): sequence i is tokens
  // [cu_seqlens[i], cu_seqlens[i + 1]) of the row, clamped into [0, seqlen). Null on the dense ops.
  const int32_t* cu_seqlens = nullptr;
  int nseq = 0;

  // fwd only: the fused residual, out = act(conv + bias) + residual (x's dtype and layout kind), or
  // null. Last in the struct: the other fields keep their offsets (and the kernels without a residual
  // their SASS).
  const void* res = nullptr;
  int64_t r_bs = 0, r_cs = 0, r_ls = 0;
};

// Incremental decode update.
struct UpdateParams {
  int batch = 0, dim = 0, width = 0, seqlen = 0, state_len = 0, state_batch = 0;
  int x_dtype = kFloat32, w_dtype = kFloat32, b_dtype = kFloat32;
  bool silu = false;
  // Set by the host (update_fast.cu's small-grid test). 16 bits in silu's padding: the struct's size
  // and the kernels' parameter offsets (their SASS) are those of the struct without it.
  int16_t num_sms = 132;
  const void* x = nullptr;  // (batch, dim, seqlen), arbitrary strides
  int64_t x_bs = 0, x_cs = 0, x_ls = 0;
  void* state = nullptr;  // (state_batch, dim, state_len), arbitrary strides, x's dtype
  int64_t st_bs = 0, st_cs = 0, st_ls = 0;
  void* out = nullptr;  // (batch, dim, seqlen)
  int64_t out_bs = 0, out_cs = 0, out_ls = 0;
  const void* weight = nullptr;
  int64_t w_cs = 0, w_ws = 0;
  const void* bias = nullptr;
  int64_t b_s = 0;
  const int32_t* cache_seqlens = nullptr;  // (batch,) or null
  const int32_t* state_indices = nullptr;  // (batch,) or null
};

// Whether ptr is a multiple of `bytes` (a power of two): the fast paths' vector / word accesses.
inline bool aligned_to(const void* ptr, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) == 0;
}

// Whether rows of T at ptr, `stride` elements apart, all start 16-byte aligned (16-byte accesses).
template <typename T>
bool vec_aligned(const void* ptr, int64_t stride) {
  return aligned_to(ptr, 16) && (stride * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}

// Host entry points (one per op): each picks its kernel path from the op's dispatch table
// (dispatch.cu: the first eligible path whose switch is on), records it (csrc/kernel_paths.h) and
// launches on `stream`, checking the launch with CC1D_CUDA_LAUNCH_CHECK (launch_check.cuh).
void run_fwd(const ConvParams& p, cudaStream_t stream);
// The packed forward without states, channel-last (p with cu_seqlens, batch 1): runs and records
// packed_fwd_cl_fast when its switch is on and it is eligible; false (nothing launched) otherwise,
// and the caller runs the varlen_fwd table.
bool run_packed_fwd_cl_fast(const ConvParams& p, cudaStream_t stream);
// The backward in two steps, because its workspace depends on the path: the path that runs p, the
// partial rows it writes (the workspace is nparts * (bwd_padded_width + 1) * dim floats, set into
// p.partial / p.nparts by the caller), then the launch of that path.
causal_conv1d::KernelPath select_bwd(const ConvParams& p);
int64_t bwd_num_parts(causal_conv1d::KernelPath path, const ConvParams& p);
void run_bwd(causal_conv1d::KernelPath path, const ConvParams& p, cudaStream_t stream);
int bwd_padded_width(int width);
void run_update(const UpdateParams& p, cudaStream_t stream);

#if defined(__CUDACC__)

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Scalar load of a runtime-typed element (weights, bias: tiny, read once per thread).
__device__ __forceinline__ float load_any(const void* p, int dtype, int64_t i) {
  switch (dtype) {
    case kFloat16: return __half2float(static_cast<const __half*>(p)[i]);
    case kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_any(void* p, int dtype, int64_t i, float v) {
  switch (dtype) {
    case kFloat16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case kBFloat16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// N contiguous elements at ptr (16-byte aligned, N * sizeof(T) a multiple of 16) -> floats.
template <typename T, int N>
__device__ __forceinline__ void load_vec(const T* __restrict__ ptr, float (&out)[N]) {
  static_assert((N * sizeof(T)) % 16 == 0, "vector loads move 16 bytes at a time");
  constexpr int kPer = 16 / sizeof(T);
  uint4 raw[N / kPer];
#pragma unroll
  for (int v = 0; v < N / kPer; ++v) raw[v] = __ldg(reinterpret_cast<const uint4*>(ptr) + v);
#pragma unroll
  for (int v = 0; v < N / kPer; ++v) {
    const T* e = reinterpret_cast<const T*>(&raw[v]);
#pragma unroll
    for (int i = 0; i < kPer; ++i) out[v * kPer + i] = to_float(e[i]);
  }
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* __restrict__ ptr, const float (&in)[N]) {
  static_assert((N * sizeof(T)) % 16 == 0, "vector stores move 16 bytes at a time");
  constexpr int kPer = 16 / sizeof(T);
#pragma unroll
  for (int v = 0; v < N / kPer; ++v) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < kPer; ++i) e[i] = from_float<T>(in[v * kPer + i]);
    reinterpret_cast<uint4*>(ptr)[v] = raw;
  }
}

// kC elements of one token kept in their storage type until use (saves registers).
template <typename T, int kC>
struct alignas(kC * sizeof(T) >= 16 ? 16 : kC * sizeof(T)) RawVec {
  T v[kC];
};

// Load kC contiguous elements starting at channel c0 of a token row; zero outside [0, D) or
// when pos is out of range. full: the whole vector is in range and aligned (vector access).
template <typename T, int kC>
__device__ __forceinline__ void load_raw(const T* __restrict__ row, bool valid, int c0, int D, bool full,
                                         RawVec<T, kC>& dst) {
  if (valid && full) {
    if constexpr (kC * sizeof(T) >= 16) {
#pragma unroll
      for (int v = 0; v < (int)(kC * sizeof(T) / 16); ++v)
        reinterpret_cast<uint4*>(&dst)[v] = __ldg(reinterpret_cast<const uint4*>(row + c0) + v);
    } else {
      *reinterpret_cast<uint2*>(&dst) = __ldg(reinterpret_cast<const uint2*>(row + c0));
    }
  } else {
#pragma unroll
    for (int c = 0; c < kC; ++c) dst.v[c] = (valid && c0 + c < D) ? row[c0 + c] : from_float<T>(0.f);
  }
}

// kN consecutive tokens l0 .. l0+kN-1 of a unit-stride row of length L (zero past the end).
template <typename T, int kN>
__device__ __forceinline__ void load_raw_l(const T* __restrict__ row, int64_t l0, int64_t L, bool full,
                                           RawVec<T, kN>& dst) {
  if (full) {
#pragma unroll
    for (int v = 0; v < (int)(kN * sizeof(T) / 16); ++v)
      reinterpret_cast<uint4*>(&dst)[v] = __ldg(reinterpret_cast<const uint4*>(row + l0) + v);
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) dst.v[i] = l0 + i < L ? row[l0 + i] : from_float<T>(0.f);
  }
}

// The fused residual at a channel-first output store: o[i] += row[l0 + i] for the N tokens at l0 of a
// unit-stride row of length L (those past L untouched); full: one aligned vector access (N * sizeof(T)
// a multiple of 16).
template <typename T, int N>
__device__ __forceinline__ void add_residual_l(const T* __restrict__ row, int64_t l0, int64_t L, bool full,
                                               float (&o)[N]) {
  if (full) {
    float r[N];
    load_vec<T, N>(row + l0, r);
#pragma unroll
    for (int i = 0; i < N; ++i) o[i] += r[i];
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (l0 + i < L) o[i] += to_float(row[l0 + i]);
  }
}

template <typename T, int kC>
__device__ __forceinline__ void store_raw(T* __restrict__ row, int c0, int D, bool full, const float (&src)[kC]) {
  RawVec<T, kC> r;
#pragma unroll
  for (int c = 0; c < kC; ++c) r.v[c] = from_float<T>(src[c]);
  if (full) {
    if constexpr (kC * sizeof(T) >= 16) {
#pragma unroll
      for (int v = 0; v < (int)(kC * sizeof(T) / 16); ++v)
        reinterpret_cast<uint4*>(row + c0)[v] = reinterpret_cast<const uint4*>(&r)[v];
    } else {
      *reinterpret_cast<uint2*>(row + c0) = *reinterpret_cast<const uint2*>(&r);
    }
  } else {
#pragma unroll
    for (int c = 0; c < kC; ++c)
      if (c0 + c < D) row[c0 + c] = r.v[c];
  }
}

// Asynchronous 16-byte global -> shared copies (sm_80+): bytes in flight without registers.
// Before sm_80 (sm_75 is in the CUDA 13 release list) there is no cp.async: the copy is a plain
// synchronous 16-byte load + store, and commit/wait have nothing to do. Callers read back only the
// bytes their own thread copied, so both forms give the same results.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// w[k] = weight[d, k - (kW - width)] as float, zero for the leading taps a padded kernel (kW > width)
// switches off. The general kernels instantiate kW = 4 and 8 only.
template <int kW>
__device__ __forceinline__ void load_weights_padded(const ConvParams& p, int d, float (&w)[kW]) {
  const int off = kW - p.width;
#pragma unroll
  for (int k = 0; k < kW; ++k)
    w[k] = k >= off ? load_any(p.weight, p.w_dtype, d * p.w_cs + (int64_t)(k - off) * p.w_ws) : 0.f;
}

// Padded weights and bias of kC consecutive channels c0 .. c0 + kC - 1 (a channel-last thread's
// group): w[k][c], bias[c]; channels past D repeat channel D - 1 (their results are never stored).
template <int kW, int kC>
__device__ __forceinline__ void load_channel_params(const ConvParams& p, int c0, int D, float (&w)[kW][kC],
                                                    float (&bias)[kC]) {
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    const int d = c0 + c < D ? c0 + c : D - 1;
    float wc[kW];
    load_weights_padded<kW>(p, d, wc);
#pragma unroll
    for (int k = 0; k < kW; ++k) w[k][c] = wc[k];
    bias[c] = p.bias != nullptr ? load_any(p.bias, p.b_dtype, d * p.b_s) : 0.f;
  }
}

// Value of the (virtual) token at pos < 0 for channel (b, d): initial_states or zero.
template <typename T>
__device__ __forceinline__ float init_value(const ConvParams& p, int b, int d, int64_t pos) {
  const int64_t idx = p.width - 1 + pos;
  if (p.init == nullptr || idx < 0) return 0.f;
  return to_float(static_cast<const T*>(p.init)[b * p.i_bs + d * p.i_cs + idx * p.i_ls]);
}

__device__ __forceinline__ float silu_f(float z) { return __fdividef(z, 1.f + __expf(-z)); }

// d silu(z) / dz = s * (1 + z * (1 - s)), s = sigmoid(z).
__device__ __forceinline__ float dsilu_f(float z) {
  const float s = 1.f / (1.f + __expf(-z));
  return s * (1.f + z * (1.f - s));
}

#endif  // __CUDACC__

}  // namespace causal_conv1d_cuda
