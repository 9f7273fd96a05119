// Decode update: one thread per (batch row, channel); threads of a warp take consecutive
// channels, so state and x accesses coalesce for (B, D, S)- and (B, S, D)-strided states alike
// (for (B, D, S) the S elements of 32 channels share a few sectors that stay in L1).
//
// Without cache_seqlens the state is a shift register: state <- (state ++ x)[-S:].
// With cache_seqlens it is a circular buffer: token t is written at (cache_seqlens + t) % S and
// the history is the width-1 entries before that position. State entries are copied, never
// converted, so an update is bit-exact. A negative conv_state_indices entry (or one past the
// cache) gives a zero output and leaves the cache untouched.
#include "launch_check.cuh"

#include "dispatch.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxReg = 4;  // state_len and new tokens held in registers on the fast path
constexpr int kCh = 1;      // channels per thread (4 measured no faster at B256 D8192, slower at B1)

// arr[idx] for a run-time idx without local memory (selects over the unrolled array).
template <typename T, int N>
__device__ __forceinline__ T pick(const T (&arr)[N], int idx) {
  T r = arr[0];
#pragma unroll
  for (int i = 1; i < N; ++i)
    if (idx == i) r = arr[i];
  return r;
}

// The history window: win[j] (off <= j < kW - 1) = the state entry kW - 1 - j before the write
// position, read as entry(idx); win[kW - 1] and the padded taps j < off are 0.
template <int kW, typename Entry>
__device__ __forceinline__ void load_window(float (&win)[kW], int off, bool circular, int head, int S, Entry entry) {
  constexpr int kH = kW - 1;
#pragma unroll
  for (int j = 0; j < kW; ++j) {
    win[j] = 0.f;
    if (j < kH && j >= off) {
      const int back = kH - j;
      int idx = circular ? (head - back) % S : S - back;
      if (idx < 0) idx += S;
      win[j] = to_float(entry(idx));
    }
  }
}

// Row b's write position in its circular buffer of S entries (cache_seqlens[b] mod S), 0 without one.
__device__ __forceinline__ int circular_head(const UpdateParams& p, bool circular, int b, int S) {
  int head = 0;
  if (circular) {
    head = p.cache_seqlens[b] % S;
    if (head < 0) head += S;
  }
  return head;
}

// act(bias + sum_k w[k] * win[k]) with win[kW - 1] the current token; then the window moves on a token.
template <int kW>
__device__ __forceinline__ float conv_and_shift(float (&win)[kW], const float (&w)[kW], float bias, bool silu) {
  float acc = bias;
#pragma unroll
  for (int k = 0; k < kW; ++k) acc = fmaf(w[k], win[k], acc);
#pragma unroll
  for (int k = 0; k + 1 < kW; ++k) win[k] = win[k + 1];
  return silu ? silu_f(acc) : acc;
}

template <typename T, int kW>
__device__ __forceinline__ void update_channel_general(const UpdateParams& p, int b, int sb, int d) {
  // Any state_len / number of new tokens: history into registers, then the state, then outputs.
  constexpr int kH = kW - 1;
  const T* __restrict__ xr = static_cast<const T*>(p.x) + (int64_t)b * p.x_bs + (int64_t)d * p.x_cs;
  T* __restrict__ outr = static_cast<T*>(p.out) + (int64_t)b * p.out_bs + (int64_t)d * p.out_cs;
  T* __restrict__ st = static_cast<T*>(p.state) + (int64_t)sb * p.st_bs + (int64_t)d * p.st_cs;
  const int S = p.state_len;
  const int off = kW - p.width;
  const bool circular = p.cache_seqlens != nullptr;
  const int head = circular_head(p, circular, b, S);
  float w[kW];
#pragma unroll
  for (int k = 0; k < kW; ++k)
    w[k] = k >= off ? load_any(p.weight, p.w_dtype, (int64_t)d * p.w_cs + (int64_t)(k - off) * p.w_ws) : 0.f;
  const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, (int64_t)d * p.b_s) : 0.f;
  float win[kW];
  load_window<kW>(win, off, circular, head, S, [st, &p](int idx) { return st[(int64_t)idx * p.st_ls]; });
  const int Lx = p.seqlen;
  if (circular) {
    for (int t = 0; t < Lx; ++t) st[(int64_t)((head + t) % S) * p.st_ls] = xr[(int64_t)t * p.x_ls];
  } else {
    for (int i = 0; i < S; ++i) {
      const int src = i + Lx;
      st[(int64_t)i * p.st_ls] = src < S ? st[(int64_t)src * p.st_ls] : xr[(int64_t)(src - S) * p.x_ls];
    }
  }
  for (int t = 0; t < Lx; ++t) {
    win[kH] = to_float(xr[(int64_t)t * p.x_ls]);
    outr[(int64_t)t * p.out_ls] = from_float<T>(conv_and_shift<kW>(win, w, bias, p.silu));
  }
}

// Each thread serves kCh channels (d, d + blockDim.x, ...), so a warp's accesses stay coalesced
// across channels. Fast path (state_len and new tokens <= kMaxReg, the decode case): every load of
// every channel is issued before any store, so a thread pays one memory round trip, not several.
template <typename T, int kW>
__global__ void __launch_bounds__(kThreads) update_kernel(const UpdateParams p) {
  constexpr int kH = kW - 1;
  const int b = blockIdx.x;
  const int dbase = blockIdx.y * blockDim.x * kCh + threadIdx.x;
  int sb = p.state_indices != nullptr ? p.state_indices[b] : b;
  const bool skip = sb < 0 || sb >= p.state_batch;  // padding slot: zero output, state untouched
  const int S = p.state_len;
  const int Lx = p.seqlen;
  if (skip) {
#pragma unroll
    for (int cc = 0; cc < kCh; ++cc) {
      const int d = dbase + cc * blockDim.x;
      if (d >= p.dim) break;
      T* outr = static_cast<T*>(p.out) + (int64_t)b * p.out_bs + (int64_t)d * p.out_cs;
      for (int t = 0; t < Lx; ++t) outr[(int64_t)t * p.out_ls] = from_float<T>(0.f);
    }
    return;
  }
  if (S > kMaxReg || Lx > kMaxReg) {
    for (int cc = 0; cc < kCh; ++cc) {
      const int d = dbase + cc * blockDim.x;
      if (d < p.dim) update_channel_general<T, kW>(p, b, sb, d);
    }
    return;
  }
  const int off = kW - p.width;
  const bool circular = p.cache_seqlens != nullptr;
  const int head = circular_head(p, circular, b, S);
  // phase 1: loads
  T xs[kCh][kMaxReg];
  T old[kCh][kMaxReg];
  float w[kCh][kW];
  float bias[kCh];
#pragma unroll
  for (int cc = 0; cc < kCh; ++cc) {
    const int d = dbase + cc * blockDim.x;
    const bool ok = d < p.dim;
    const T* xr = static_cast<const T*>(p.x) + (int64_t)b * p.x_bs + (int64_t)d * p.x_cs;
    const T* st = static_cast<const T*>(p.state) + (int64_t)sb * p.st_bs + (int64_t)d * p.st_cs;
#pragma unroll
    for (int t = 0; t < kMaxReg; ++t) xs[cc][t] = ok && t < Lx ? xr[(int64_t)t * p.x_ls] : from_float<T>(0.f);
#pragma unroll
    for (int i = 0; i < kMaxReg; ++i) old[cc][i] = ok && i < S ? st[(int64_t)i * p.st_ls] : from_float<T>(0.f);
#pragma unroll
    for (int k = 0; k < kW; ++k)
      w[cc][k] = ok && k >= off ? load_any(p.weight, p.w_dtype, (int64_t)d * p.w_cs + (int64_t)(k - off) * p.w_ws) : 0.f;
    bias[cc] = ok && p.bias != nullptr ? load_any(p.bias, p.b_dtype, (int64_t)d * p.b_s) : 0.f;
  }
  // phase 2: new state and outputs
#pragma unroll
  for (int cc = 0; cc < kCh; ++cc) {
    const int d = dbase + cc * blockDim.x;
    if (d >= p.dim) break;
    T* st = static_cast<T*>(p.state) + (int64_t)sb * p.st_bs + (int64_t)d * p.st_cs;
    T* outr = static_cast<T*>(p.out) + (int64_t)b * p.out_bs + (int64_t)d * p.out_cs;
    float win[kW];
    load_window<kW>(win, off, circular, head, S, [&](int idx) { return pick<T, kMaxReg>(old[cc], idx); });
    if (circular) {
#pragma unroll
      for (int t = 0; t < kMaxReg; ++t)
        if (t < Lx) st[(int64_t)((head + t) % S) * p.st_ls] = xs[cc][t];
    } else {
#pragma unroll
      for (int i = 0; i < kMaxReg; ++i) {
        if (i < S) {
          const int src = i + Lx;
          st[(int64_t)i * p.st_ls] = src < S ? pick<T, kMaxReg>(old[cc], src) : pick<T, kMaxReg>(xs[cc], src - S);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kMaxReg; ++t) {
      if (t < Lx) {
        win[kH] = to_float(xs[cc][t]);
        outr[(int64_t)t * p.out_ls] = from_float<T>(conv_and_shift<kW>(win, w[cc], bias[cc], p.silu));
      }
    }
  }
}

struct UpdateLaunch {
  template <typename T, int kW>
  static void run(const UpdateParams& p, cudaStream_t stream) {
    const int per_thread = (p.dim + kCh - 1) / kCh;
    const int threads = per_thread >= kThreads ? kThreads : ((per_thread + 31) / 32) * 32;
    dim3 grid(p.batch, (p.dim + threads * kCh - 1) / (threads * kCh));
    update_kernel<T, kW><<<grid, threads, 0, stream>>>(p);
    CC1D_CUDA_LAUNCH_CHECK();
  }
};

}  // namespace

void update_general::launch(const UpdateParams& p, cudaStream_t stream) { launch_general<UpdateLaunch>(p, stream); }
}  // namespace causal_conv1d_cuda
