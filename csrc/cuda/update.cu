// Decode update: one thread per (batch row, channel); threads of a warp take consecutive
// channels, so state and x accesses coalesce for (B, D, S)- and (B, S, D)-strided states alike
// (for (B, D, S) the S elements of 32 channels share a few sectors that stay in L1).
//
// Without cache_seqlens the state is a shift register: state <- (state ++ x)[-S:].
// With cache_seqlens it is a circular buffer: token t is written at (cache_seqlens + t) % S and
// the history is the width-1 entries before that position. State entries are copied, never
// converted, so an update is bit-exact. A negative conv_state_indices entry (or one past the
// cache) gives a zero output and leaves the cache untouched.
#include <c10/cuda/CUDAException.h>

#include "common.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxReg = 8;  // state_len and new tokens held in registers on the fast path

// arr[idx] for a run-time idx without local memory (selects over the unrolled array).
template <typename T, int N>
__device__ __forceinline__ T pick(const T (&arr)[N], int idx) {
  T r = arr[0];
#pragma unroll
  for (int i = 1; i < N; ++i)
    if (idx == i) r = arr[i];
  return r;
}

template <typename T, int kW>
__global__ void __launch_bounds__(kThreads) update_kernel(const UpdateParams p) {
  constexpr int kH = kW - 1;
  const int b = blockIdx.x;
  const int d = blockIdx.y * blockDim.x + threadIdx.x;
  if (d >= p.dim) return;
  const T* __restrict__ xr = static_cast<const T*>(p.x) + (int64_t)b * p.x_bs + (int64_t)d * p.x_cs;
  T* __restrict__ outr = static_cast<T*>(p.out) + (int64_t)b * p.out_bs + (int64_t)d * p.out_cs;
  const int sb = p.state_indices != nullptr ? p.state_indices[b] : b;
  if (sb < 0 || sb >= p.state_batch) {
    for (int t = 0; t < p.seqlen; ++t) outr[(int64_t)t * p.out_ls] = from_float<T>(0.f);
    return;
  }
  T* __restrict__ st = static_cast<T*>(p.state) + (int64_t)sb * p.st_bs + (int64_t)d * p.st_cs;
  const int S = p.state_len;
  const int off = kW - p.width;
  float w[kW];
#pragma unroll
  for (int k = 0; k < kW; ++k)
    w[k] = k >= off ? load_any(p.weight, p.w_dtype, (int64_t)d * p.w_cs + (int64_t)(k - off) * p.w_ws) : 0.f;
  const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, (int64_t)d * p.b_s) : 0.f;

  const bool circular = p.cache_seqlens != nullptr;
  int head = 0;  // circular: write position of the first new token
  if (circular) {
    head = p.cache_seqlens[b] % S;
    if (head < 0) head += S;
  }
  const int Lx = p.seqlen;
  float win[kW];
#pragma unroll
  for (int k = 0; k < kW; ++k) win[k] = 0.f;

  if (S <= kMaxReg && Lx <= kMaxReg) {
    // Fast path (decode): every load is issued before any store, so nothing waits on a store.
    T xs[kMaxReg];
#pragma unroll
    for (int t = 0; t < kMaxReg; ++t) xs[t] = t < Lx ? xr[(int64_t)t * p.x_ls] : from_float<T>(0.f);
    if (circular) {
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        if (j >= off) {
          int idx = (head - (kH - j)) % S;
          if (idx < 0) idx += S;
          win[j] = to_float(st[(int64_t)idx * p.st_ls]);
        }
      }
#pragma unroll
      for (int t = 0; t < kMaxReg; ++t) {
        if (t < Lx) {
          int idx = (head + t) % S;
          st[(int64_t)idx * p.st_ls] = xs[t];
        }
      }
    } else {
      T old[kMaxReg];
#pragma unroll
      for (int i = 0; i < kMaxReg; ++i) old[i] = i < S ? st[(int64_t)i * p.st_ls] : from_float<T>(0.f);
#pragma unroll
      for (int j = 0; j < kH; ++j)
        if (j >= off) win[j] = to_float(pick<T, kMaxReg>(old, S - (kH - j)));
#pragma unroll
      for (int i = 0; i < kMaxReg; ++i) {
        if (i < S) {
          const int src = i + Lx;
          st[(int64_t)i * p.st_ls] = src < S ? pick<T, kMaxReg>(old, src) : pick<T, kMaxReg>(xs, src - S);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kMaxReg; ++t) {
      if (t < Lx) {
        win[kH] = to_float(xs[t]);
        float acc = bias;
#pragma unroll
        for (int k = 0; k < kW; ++k) acc = fmaf(w[k], win[k], acc);
        outr[(int64_t)t * p.out_ls] = from_float<T>(p.silu ? silu_f(acc) : acc);
#pragma unroll
        for (int k = 0; k < kH; ++k) win[k] = win[k + 1];
      }
    }
    return;
  }

  // General path (long states or many new tokens): history into registers, then the state.
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    if (j >= off) {
      const int back = kH - j;  // 1 .. width-1 tokens before the new ones
      int idx;
      if (circular) {
        idx = (head - back) % S;
        if (idx < 0) idx += S;
      } else {
        idx = S - back;
      }
      win[j] = to_float(st[(int64_t)idx * p.st_ls]);
    }
  }
  if (circular) {
    for (int t = 0; t < Lx; ++t) {
      const int idx = (head + t) % S;
      st[(int64_t)idx * p.st_ls] = xr[(int64_t)t * p.x_ls];
    }
  } else {
    for (int i = 0; i < S; ++i) {
      const int src = i + Lx;
      st[(int64_t)i * p.st_ls] = src < S ? st[(int64_t)src * p.st_ls] : xr[(int64_t)(src - S) * p.x_ls];
    }
  }
  for (int t = 0; t < Lx; ++t) {
    win[kH] = to_float(xr[(int64_t)t * p.x_ls]);
    float acc = bias;
#pragma unroll
    for (int k = 0; k < kW; ++k) acc = fmaf(w[k], win[k], acc);
    outr[(int64_t)t * p.out_ls] = from_float<T>(p.silu ? silu_f(acc) : acc);
#pragma unroll
    for (int k = 0; k < kH; ++k) win[k] = win[k + 1];
  }
}

template <typename T, int kW>
void launch_update(const UpdateParams& p, cudaStream_t stream) {
  const int threads = p.dim >= kThreads ? kThreads : ((p.dim + 31) / 32) * 32;
  dim3 grid(p.batch, (p.dim + threads - 1) / threads);
  update_kernel<T, kW><<<grid, threads, 0, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_update_w(const UpdateParams& p, cudaStream_t stream) {
  if (p.width <= 4) {
    launch_update<T, 4>(p, stream);
  } else {
    launch_update<T, 8>(p, stream);
  }
}

}  // namespace

void run_update(const UpdateParams& p, cudaStream_t stream) {
  switch (p.x_dtype) {
    case kFloat16: launch_update_w<__half>(p, stream); break;
    case kBFloat16: launch_update_w<__nv_bfloat16>(p, stream); break;
    default: launch_update_w<float>(p, stream); break;
  }
}

}  // namespace causal_conv1d_cuda
