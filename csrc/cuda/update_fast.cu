// Fast decode update (one new token per sequence): a thread owns one 16-byte vector of channels
// (8 for 16-bit types, 4 for fp32) of one sequence and moves it with 16-byte loads and stores.
//
// Why (docs/PERF_NOTES.md, "update fast path"): the general kernel (update.cu: one channel per
// thread, run-time state_len, per-element dtype switches for the weights) issues ~440 instructions
// per channel; ncu at B256 D8192 bf16: 79% of SM issue throughput, DRAM 11%, 33 µs against a
// memory floor of 7.9 µs. Here a channel costs ~15 instructions.
//
// Per thread (channels c0 .. c0 + kC - 1 of sequence b, state row sb = conv_state_indices[b] or b):
//   state (B, D, S) contiguous per channel (st_ls == 1, st_cs == S): the kC x S slab is contiguous,
//     S 16-byte vectors; (B, S, D) (st_cs == 1, 16-byte aligned token rows): one vector per position.
//   x, out: one vector each (channels contiguous: x.stride(1) == 1).
//   weight (D, W) contiguous: kC x W elements, 16-byte vectors when they tile exactly.
// All loads are issued before any store. The state is a shift register, copied bit for bit:
//   new_state[s] = old_state[s + 1] (s < S - 1), new_state[S - 1] = x.
//   out = act(bias + sum_k w[k] * window[k]), window = old_state[S - W + 1 ..] ++ x,
// accumulated in the general kernel's order (same float results: tests/gpu/test_update_fast.py).
// Eligible: seqlen 1, no cache_seqlens, width 2..4, state_len W - 1 or W, dim a multiple of kC,
// the vector alignments above. Everything else runs the general kernel (update.cu).
#include "launch_check.cuh"

#include "dispatch.cuh"
#include "vec16.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kThreads = 128;

template <typename T>
struct Lanes {
  static constexpr int kC = 16 / static_cast<int>(sizeof(T));  // channels per 16-byte vector
};

// Element i (0 <= i < kC * N) of N 16-byte vectors of T, by value (compile-time i after unrolling).
template <typename T, int N>
__device__ __forceinline__ T elem(const uint4 (&v)[N], int i) {
  return reinterpret_cast<const T*>(&v[0])[i];
}
template <typename T, int N>
__device__ __forceinline__ void set_elem(uint4 (&v)[N], int i, T x) {
  reinterpret_cast<T*>(&v[0])[i] = x;
}

// w[c][k] = weight[c0 + c, k] for kC channels (kW == width), as float.
template <typename Wt, typename T, int kW>
__device__ __forceinline__ void load_weights_block(const UpdateParams& p, int c0, float (&w)[Lanes<T>::kC][kW]) {
  constexpr int kC = Lanes<T>::kC;
  const Wt* __restrict__ base = static_cast<const Wt*>(p.weight) + static_cast<int64_t>(c0) * p.w_cs;
  constexpr int kBytes = kC * kW * static_cast<int>(sizeof(Wt));
  const bool vec = kBytes % 16 == 0 && p.w_ws == 1 && p.w_cs == kW && (reinterpret_cast<uintptr_t>(base) & 15u) == 0;
  if (vec) {  // uniform over the grid
    constexpr int kN = kBytes % 16 == 0 ? kBytes / 16 : 1;
    uint4 raw[kN];
#pragma unroll
    for (int v = 0; v < kN; ++v) raw[v] = ld_global_16(reinterpret_cast<const uint4*>(base) + v);
#pragma unroll
    for (int c = 0; c < kC; ++c)
#pragma unroll
      for (int k = 0; k < kW; ++k) w[c][k] = to_float(reinterpret_cast<const Wt*>(&raw[0])[c * kW + k]);
  } else {
#pragma unroll
    for (int c = 0; c < kC; ++c)
#pragma unroll
      for (int k = 0; k < kW; ++k) w[c][k] = to_float(base[c * p.w_cs + k * p.w_ws]);
  }
}

template <typename Bt, typename T>
__device__ __forceinline__ void load_bias_block(const UpdateParams& p, int c0, float (&bias)[Lanes<T>::kC]) {
  constexpr int kC = Lanes<T>::kC;
  const Bt* __restrict__ base = static_cast<const Bt*>(p.bias) + static_cast<int64_t>(c0) * p.b_s;
  constexpr int kBytes = kC * static_cast<int>(sizeof(Bt));
  if (kBytes % 16 == 0 && p.b_s == 1 && (reinterpret_cast<uintptr_t>(base) & 15u) == 0) {  // uniform
    constexpr int kN = kBytes % 16 == 0 ? kBytes / 16 : 1;
    uint4 raw[kN];
#pragma unroll
    for (int v = 0; v < kN; ++v) raw[v] = ld_global_16(reinterpret_cast<const uint4*>(base) + v);
#pragma unroll
    for (int c = 0; c < kC; ++c) bias[c] = to_float(reinterpret_cast<const Bt*>(&raw[0])[c]);
  } else {
#pragma unroll
    for (int c = 0; c < kC; ++c) bias[c] = to_float(base[c * p.b_s]);
  }
}

template <typename T, int kW, int kS, bool kBSD>
__global__ void __launch_bounds__(kThreads) update_fast_kernel(const UpdateParams p, const int vecs_per_row) {
  constexpr int kC = Lanes<T>::kC;
  constexpr int kH = kW - 1;
  static_assert(kS >= kH, "the state must hold the width - 1 previous tokens");
  const int v = blockIdx.x * kThreads + threadIdx.x;
  if (v >= vecs_per_row) return;
  const int b = blockIdx.y;
  const int c0 = v * kC;

  T* __restrict__ outp = static_cast<T*>(p.out) + static_cast<int64_t>(b) * p.out_bs + c0;
  const int sb = p.state_indices != nullptr ? p.state_indices[b] : b;
  if (sb < 0 || sb >= p.state_batch) {  // padding slot: zero output, state untouched
    st_global_16(outp, make_uint4(0u, 0u, 0u, 0u));
    return;
  }
  T* __restrict__ st = static_cast<T*>(p.state) + static_cast<int64_t>(sb) * p.st_bs;

  // 1. every load before any store
  const uint4 xv = ld_global_16(static_cast<const T*>(p.x) + static_cast<int64_t>(b) * p.x_bs + c0);
  uint4 old[kS];  // kBSD: old[s] = channels c0.. at position s; else the contiguous kC x kS slab
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    const T* src = kBSD ? st + static_cast<int64_t>(s) * p.st_ls + c0 : st + static_cast<int64_t>(c0) * kS + s * kC;
    old[s] = ld_global_16(src);
  }
  float w[kC][kW];
  switch (p.w_dtype) {
    case kFloat16: load_weights_block<__half, T, kW>(p, c0, w); break;
    case kBFloat16: load_weights_block<__nv_bfloat16, T, kW>(p, c0, w); break;
    default: load_weights_block<float, T, kW>(p, c0, w); break;
  }
  float bias[kC];
  if (p.bias == nullptr) {
#pragma unroll
    for (int c = 0; c < kC; ++c) bias[c] = 0.f;
  } else {
    switch (p.b_dtype) {
      case kFloat16: load_bias_block<__half, T>(p, c0, bias); break;
      case kBFloat16: load_bias_block<__nv_bfloat16, T>(p, c0, bias); break;
      default: load_bias_block<float, T>(p, c0, bias); break;
    }
  }

  // 2. the new state (exact copies) and the outputs
  // old value of channel c at state position s
  auto old_at = [&](int c, int s) -> T { return kBSD ? elem<T, kS>(old, s * kC + c) : elem<T, kS>(old, c * kS + s); };
  uint4 nst[kS];
#pragma unroll
  for (int c = 0; c < kC; ++c) {
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      const T val = s + 1 < kS ? old_at(c, s + 1) : reinterpret_cast<const T*>(&xv)[c];
      set_elem<T, kS>(nst, kBSD ? s * kC + c : c * kS + s, val);
    }
  }
  float o[kC];
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    float win[kW];
#pragma unroll
    for (int k = 0; k < kH; ++k) win[k] = to_float(old_at(c, kS - kH + k));
    win[kH] = to_float(reinterpret_cast<const T*>(&xv)[c]);
    float acc = bias[c];
#pragma unroll
    for (int k = 0; k < kW; ++k) acc = fmaf(w[c][k], win[k], acc);
    o[c] = p.silu ? silu_f(acc) : acc;
  }
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    T* dst = kBSD ? st + static_cast<int64_t>(s) * p.st_ls + c0 : st + static_cast<int64_t>(c0) * kS + s * kC;
    st_global_16(dst, nst[s]);
  }
  st_global_16(outp, Vec16<T>::store(o));
}

template <typename T, int kW, int kS>
void launch_s(const UpdateParams& p, cudaStream_t stream) {
  constexpr int kC = Lanes<T>::kC;
  const int vecs = p.dim / kC;
  const dim3 grid((vecs + kThreads - 1) / kThreads, p.batch);
  if (p.st_cs == 1) {  // (B, S, D)-strided state (for S == 1 both forms read the same)
    update_fast_kernel<T, kW, kS, true><<<grid, kThreads, 0, stream>>>(p, vecs);
  } else {
    update_fast_kernel<T, kW, kS, false><<<grid, kThreads, 0, stream>>>(p, vecs);
  }
  CC1D_CUDA_LAUNCH_CHECK();
}

}  // namespace

namespace update_fast {

// On unless CAUSAL_CONV1D_UPDATE_FAST is off.
bool eligible(const UpdateParams& p) {
  if (p.seqlen != 1 || p.cache_seqlens != nullptr) return false;
  if (p.width < 2 || p.width > 4 || (p.state_len != p.width - 1 && p.state_len != p.width)) return false;
  if (!aligned_to(p.x, 16) || !aligned_to(p.out, 16) || !aligned_to(p.state, 16)) return false;
  const int kC = p.x_dtype == kFloat32 ? 4 : 8;  // Lanes<T>::kC: elements per 16-byte vector
  if (p.dim % kC != 0) return false;
  if (p.x_cs != 1 || p.out_cs != 1) return false;
  if (p.batch > 1 && (p.x_bs % kC != 0 || p.out_bs % kC != 0)) return false;
  if (p.st_cs == 1) {  // (B, S, D)-strided state
    if (p.state_len > 1 && p.st_ls % kC != 0) return false;
  } else if (!(p.st_ls == 1 && p.st_cs == p.state_len)) {
    return false;
  }
  if (p.state_batch > 1 && p.st_bs % kC != 0) return false;
  return p.batch <= 65535;  // grid.y
}

void launch(const UpdateParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<2, 3, 4>{}, [&](auto tag, auto width) {
    using T = typename decltype(tag)::type;
    constexpr int kW = decltype(width)::value;
    if (p.state_len == kW - 1) {
      launch_s<T, kW, kW - 1>(p, stream);
    } else {
      launch_s<T, kW, kW>(p, stream);  // eligible(): state_len is width - 1 or width
    }
  });
}

}  // namespace update_fast
}  // namespace causal_conv1d_cuda
