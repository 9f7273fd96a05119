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
//
// Two kernels (both kernel path update_fast, same bits): update_fast_kernel (128-thread blocks) and,
// for 16-bit x at width 4, state_len 3 with weights and bias of x's dtype, contiguous and 16-byte
// aligned, update_fast_lf_kernel (every load issued first) where the 128-thread grid would have fewer
// blocks than SMs: then 32-thread blocks, or 8-thread ones where 32-thread blocks would also be fewer
// than the SMs (lf_threads). H200, CUDA graph (µs, update_fast_kernel -> loads-first at
// those block sizes): B1 D5376 2.1 -> 1.7, B16 D5376 2.4 -> 2.0, B1 D10240 2.2 -> 1.7, B1 D8192
// 2.2 -> 1.7; B16 D10240 (160 blocks: update_fast_kernel) 2.8 against 2.7; B256 D8192 10.9 against
// 12.8 for the loads-first kernel at 128 threads (so it is not used there).
#include "launch_check.cuh"

#include <type_traits>

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
    load_tile16<Wt, kC, kW>(base, w);
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

// The new state of kC channels, bit for bit (both kernels): new[s] = old[s + 1] (s < S - 1), new[S - 1] = x;
// kBSD: the (B, S, D) layout (position-major within the thread's vectors), else (B, D, S).
template <typename T, int kS, bool kBSD>
__device__ __forceinline__ void shift_state(const uint4 (&old)[kS], const uint4& xv, uint4 (&nst)[kS]) {
  constexpr int kC = Lanes<T>::kC;
#pragma unroll
  for (int c = 0; c < kC; ++c) {
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      const int from = s + 1;
      const T val = from < kS ? elem<T, kS>(old, kBSD ? from * kC + c : c * kS + from) : reinterpret_cast<const T*>(&xv)[c];
      set_elem<T, kS>(nst, kBSD ? s * kC + c : c * kS + s, val);
    }
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
  shift_state<T, kS, kBSD>(old, xv, nst);
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

template <typename T>
constexpr int dtype_code() {
  return std::is_same<T, __half>::value ? kFloat16 : std::is_same<T, __nv_bfloat16>::value ? kBFloat16 : kFloat32;
}

// 16-byte read-only load that NVVM keeps in program order (volatile asm); ptxas still schedules it
// freely, hence the shape of the kernel below.
__device__ __forceinline__ uint4 ld_global_16_early(const void* ptr) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(ptr));
  return r;
}

// Element i of N 16-byte vectors of T as float (compile-time i after unrolling). bf16: one shift or
// one mask of the 32-bit word (ptxas made the high half a PRMT and a multiply); exact, as
// __bfloat162float.
template <typename T, int N>
__device__ __forceinline__ float elem_f(const uint4 (&v)[N], int i) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    const uint32_t w = reinterpret_cast<const uint32_t*>(&v[0])[i >> 1];
    return __uint_as_float((i & 1) ? (w & 0xffff0000u) : (w << 16));
  } else {
    return to_float(elem<T, N>(v, i));
  }
}
template <typename T>
__device__ __forceinline__ float elem_f(const uint4& v, int i) {
  return elem_f<T, 1>(reinterpret_cast<const uint4(&)[1]>(v), i);
}

// The loads-first kernel, for small grids (lf_threads; 8- or 32-thread blocks, blockDim.x read at run
// time): update_fast_kernel's per-thread work (kC channels, same float order, same bits) with every
// load issued up front: x, the weights and the bias before the state row is known (update_fast_kernel
// issues the bias only after the weights have come back: their conversion sits in the dtype switch
// ahead of the bias load, one more L2 round trip), the state stores right after the state arrives,
// the conversions of weights and bias after that. The host picks it only where the weights (D, W) and
// the bias (D,) are contiguous, 16-byte aligned and of x's dtype: no dtype switch, no fallback here.
template <typename T, int kW, int kS, bool kBSD>
__global__ void __launch_bounds__(kThreads) update_fast_lf_kernel(const UpdateParams p, const int vecs_per_row) {
  constexpr int kC = Lanes<T>::kC;
  constexpr int kH = kW - 1;
  constexpr int kNW = kC * kW * static_cast<int>(sizeof(T)) / 16;  // weight vectors per thread
  static_assert(kC * kW * static_cast<int>(sizeof(T)) % 16 == 0, "weights must tile 16-byte vectors");
  static_assert(kC * static_cast<int>(sizeof(T)) == 16, "one bias vector per thread");
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= vecs_per_row) return;
  const int b = blockIdx.y;
  const int c0 = v * kC;

  // 1. the loads that do not depend on the state row, and the state row index
  const int sb = p.state_indices != nullptr ? p.state_indices[b] : b;
  const uint4 xv = ld_global_16_early(static_cast<const T*>(p.x) + static_cast<int64_t>(b) * p.x_bs + c0);
  uint4 wraw[kNW];
  const T* wbase = static_cast<const T*>(p.weight) + static_cast<int64_t>(c0) * kW;
#pragma unroll
  for (int i = 0; i < kNW; ++i) wraw[i] = ld_global_16_early(reinterpret_cast<const uint4*>(wbase) + i);
  // Without a bias the load reads the thread's first weight vector instead and finish() ignores it:
  // no predicated load and no select (ptxas placed the select's moves, which wait for the load,
  // ahead of the weight and state loads).
  const bool has_bias = p.bias != nullptr;
  const uint4 braw = ld_global_16_early(has_bias ? static_cast<const void*>(static_cast<const T*>(p.bias) + c0) : wbase);

  T* __restrict__ outp = static_cast<T*>(p.out) + static_cast<int64_t>(b) * p.out_bs + c0;
  // A padding slot (zero output, state untouched) is no branch here: ptxas would sink x's and the
  // weights' loads below it (they are unused on the padding side), after the index's round trip.
  const bool live = sb >= 0 && sb < p.state_batch;
  T* __restrict__ st = static_cast<T*>(p.state) + static_cast<int64_t>(live ? sb : 0) * p.st_bs;
  uint4 old[kS];
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    const T* src = kBSD ? st + static_cast<int64_t>(s) * p.st_ls + c0 : st + static_cast<int64_t>(c0) * kS + s * kC;
    old[s] = live ? ld_global_16_early(src) : make_uint4(0u, 0u, 0u, 0u);
  }

  // 2. the new state (exact copies), stored as soon as the old state and x are in; then the outputs,
  // in update_fast_kernel's order (bias, then fmaf over the taps: the same bits). Four copies (silu, bias): the
  // uniform branches between them end the block that issues the loads, so ptxas can neither
  // sink a load below a conversion nor interleave the loads with the FMAs (it did both with one copy:
  // x and the weights went below the padding-slot branch and the state loads between the FMAs).
  auto finish = [&](auto silu, auto bias) {
    uint4 nst[kS];
    shift_state<T, kS, kBSD>(old, xv, nst);
    if (live) {
#pragma unroll
      for (int s = 0; s < kS; ++s) {
        T* dst = kBSD ? st + static_cast<int64_t>(s) * p.st_ls + c0 : st + static_cast<int64_t>(c0) * kS + s * kC;
        st_global_16(dst, nst[s]);
      }
    }
    float o[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      float win[kW];
#pragma unroll
      for (int k = 0; k < kH; ++k) {
        const int s = kS - kH + k;
        win[k] = elem_f<T, kS>(old, kBSD ? s * kC + c : c * kS + s);
      }
      win[kH] = elem_f<T>(xv, c);
      float acc = decltype(bias)::value ? elem_f<T>(braw, c) : 0.f;  // update_fast_kernel's 0.f without a bias
#pragma unroll
      for (int k = 0; k < kW; ++k) acc = fmaf(elem_f<T, kNW>(wraw, c * kW + k), win[k], acc);
      o[c] = decltype(silu)::value ? silu_f(acc) : acc;
    }
    st_global_16(outp, live ? Vec16<T>::store(o) : make_uint4(0u, 0u, 0u, 0u));
  };
  if (p.silu) {
    if (has_bias) {
      finish(std::true_type{}, std::true_type{});
    } else {
      finish(std::true_type{}, std::false_type{});
    }
  } else if (has_bias) {
    finish(std::false_type{}, std::true_type{});
  } else {
    finish(std::false_type{}, std::false_type{});
  }
}

// Whether the loads-first kernel may run p (T, kW, kS fixed by the caller): weights and bias of x's
// dtype, contiguous (D, W) / (D,), 16-byte aligned (then every thread's slice is: c0 is a multiple of kC).
template <typename T, int kW>
bool lf_ok(const UpdateParams& p) {
  if (p.w_dtype != dtype_code<T>() || p.w_ws != 1 || p.w_cs != kW || !aligned_to(p.weight, 16)) return false;
  return p.bias == nullptr || (p.b_dtype == dtype_code<T>() && p.b_s == 1 && aligned_to(p.bias, 16));
}

// Threads per block of the loads-first kernel, or 0 for update_fast_kernel's 128-thread grid.
// Small grids (fewer 128-thread blocks than SMs) leave SMs idle and each thread's L2 round trips are
// the latency, so they take smaller blocks: 32 threads, or 8 (one warp, 8 lanes live) where even
// 32-thread blocks would be fewer than the SMs. B1 D5376: 6 blocks of 128 -> 84 of 8; B1 D10240:
// 10 -> 160 of 8; B16 D5376: 96 -> 336 of 32; B16 D10240 (160 blocks) and up: update_fast_kernel, which
// is faster there (B256 D8192: 10.9 us against the loads-first kernel's 12.8; docs/PERF_NOTES.md).
int lf_threads(int vecs, int batch, int num_sms) {
  auto blocks = [&](int t) { return static_cast<int64_t>((vecs + t - 1) / t) * batch; };
  if (blocks(kThreads) >= num_sms) return 0;
  return blocks(32) < num_sms ? 8 : 32;
}

template <typename T, int kW, int kS>
void launch_s(const UpdateParams& p, cudaStream_t stream) {
  constexpr int kC = Lanes<T>::kC;
  const int vecs = p.dim / kC;
  // The loads-first kernel exists for 16-bit x at width 4, state_len 3 only (the decode rows of
  // benchmarks/bench.py; 4 instantiations: bf16 / fp16 x both state layouts).
  if constexpr (sizeof(T) == 2 && kW == 4 && kS == 3) {
    const int threads = lf_threads(vecs, p.batch, p.num_sms);
    if (threads != 0 && lf_ok<T, kW>(p)) {
      const dim3 grid((vecs + threads - 1) / threads, p.batch);
      dispatch_flag(p.st_cs == 1, [&](auto bsd) {
        update_fast_lf_kernel<T, kW, kS, decltype(bsd)::value><<<grid, threads, 0, stream>>>(p, vecs);
      });
      CC1D_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  const dim3 grid((vecs + kThreads - 1) / kThreads, p.batch);
  // kBSD: the (B, S, D)-strided state (for S == 1 both forms read the same)
  dispatch_flag(p.st_cs == 1, [&](auto bsd) {
    update_fast_kernel<T, kW, kS, decltype(bsd)::value><<<grid, kThreads, 0, stream>>>(p, vecs);
  });
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
