// Serving kernels (semantics: causal_conv1d/varlen.py; parameters: varlen.cuh).
//
// varlen_fwd: one thread per (channel, chunk of tokens of the packed batch). Channel-last x: a 2-D
// grid x = channels (a warp takes consecutive channels: x, out and a (lines, state_len, dim)-strided
// cache coalesce), y = chunks of 64 tokens; channel-first x: x = chunks of 16 tokens (a warp reads
// 32 neighbouring pieces of one row), y = channels.
// A thread walks its chunk's tokens for one channel with a W-1 token window in registers; it finds
// its first sequence by a binary search in query_start_loc, so no host-side schedule is needed.
// The cache line of a sequence is read (initial state) and then written (final state) by one
// thread only: the one whose chunk holds the sequence's first token. That thread also computes the
// sequence's first W-1 outputs (the only ones that read the initial state), running up to W-2
// tokens past its chunk when needed; the thread of the next chunk skips them. So no thread reads a
// cache line that another may be writing, all in one launch.
//
// spec_update: one thread per (row, channel); it reads the history window, computes the seqlen
// outputs, then rewrites the cache line (entries move to lower indices only: in place is safe).
//
// Index values are not trusted: cache lines outside [0, lines) are skipped like pad_slot_id,
// query_start_loc is clamped into [0, total], num_accepted_tokens into [1, seqlen].
#include "launch_check.cuh"

#include "dispatch.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kVarlenThreads = 128;
constexpr int kSpecThreads = 128;

__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

template <int kW>
__device__ __forceinline__ void load_w(const void* w, int dtype, int64_t cs, int64_t ws, int width, int d,
                                       float (&out)[kW]) {
  const int off = kW - width;  // padded taps k < off are absent
#pragma unroll
  for (int k = 0; k < kW; ++k) out[k] = k >= off ? load_any(w, dtype, (int64_t)d * cs + (int64_t)(k - off) * ws) : 0.f;
}

template <typename T, int kW>
__global__ void __launch_bounds__(kVarlenThreads) varlen_fwd_kernel(const VarlenParams p, const int64_t chunk,
                                                                    const bool token_major) {
  constexpr int kH = kW - 1;
  // channel-last x: threads along channels (coalesced per token); channel-first x: threads along
  // chunks of one channel (neighbouring lanes read neighbouring pieces of the row)
  const int64_t lin = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t d64 = token_major ? (int64_t)blockIdx.y : lin;
  if (d64 >= p.dim) return;
  const int d = static_cast<int>(d64);
  const int64_t T_ = p.total;
  const int64_t c0 = (token_major ? lin : (int64_t)blockIdx.y) * chunk;
  if (c0 >= T_) return;
  const int64_t c1 = c0 + chunk < T_ ? c0 + chunk : T_;
  const int64_t tend = c1 + kH - 1 < T_ ? c1 + kH - 1 : T_;  // up to W-2 tokens past the chunk
  const int B = p.batch;
  auto q = [&](int i) -> int64_t { return clamp64(p.qsl[i], 0, T_); };

  const T* __restrict__ xr = static_cast<const T*>(p.x) + (int64_t)d * p.x_ds;
  T* __restrict__ outr = static_cast<T*>(p.out) + (int64_t)d * p.o_ds;
  float w[kW];
  load_w<kW>(p.weight, p.w_dtype, p.w_cs, p.w_ws, p.width, d, w);
  const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, (int64_t)d * p.b_s) : 0.f;
  const int64_t S = p.state_len;

  // s: the last sequence with start <= c0 (binary search; -1 when none)
  int lo = 0, hi = B;  // invariant: q(lo) <= c0 unless lo == 0, answer in [lo-1, hi)
  if (B == 0 || q(0) > c0) {
    lo = -1;
  } else {
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (q(mid) <= c0) lo = mid; else hi = mid;
    }
  }
  int s = lo;
  // the window: tokens t-kH .. t-1 of the current sequence (zero before its start)
  float win[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) win[j] = 0.f;
  int64_t st = 0, en = 0;
  bool valid = false;
  if (s >= 0 && s < B) {
    st = q(s);
    en = q(s + 1);
    const int64_t slot = p.cache_indices != nullptr ? p.cache_indices[s] : s;
    valid = slot != p.pad_slot_id && slot >= 0 && slot < p.lines;
    if (st < c0) {  // in the middle of a sequence: its earlier tokens from x (before its start: 0,
                    // and those outputs belong to the chunk of its start)
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int64_t pos = c0 - kH + j;
        win[j] = pos >= st ? to_float(xr[pos * p.x_ts]) : 0.f;
      }
    }
  }
  for (int64_t t = c0; t < tend; ++t) {
    // advance to the last sequence starting at or before t (zero-length ones are passed over)
    bool moved = false;
    while (s + 1 < B && q(s + 1) <= t) {
      ++s;
      moved = true;
    }
    if (moved) {
      st = q(s);
      en = q(s + 1);
    }
    const bool in_seq = s >= 0 && t < en;
    if (t >= c1) {  // past the chunk: only the first W-1 outputs of a sequence started in it
      if (!in_seq || st < c0 || st >= c1 || t >= st + (p.width - 1)) break;
    }
    if (!in_seq) {  // a token of no sequence (before the first, after the last): 0
      outr[t * p.o_ts] = from_float<T>(0.f);
      continue;
    }
    if (t == st) {  // a sequence starts in this chunk: its cache line is this thread's
      const int64_t slot = p.cache_indices != nullptr ? p.cache_indices[s] : s;
      valid = slot != p.pad_slot_id && slot >= 0 && slot < p.lines;
      const bool init = valid && p.has_init != nullptr && p.has_init[s] != 0;
      T* __restrict__ cr = valid ? static_cast<T*>(p.states) + slot * p.st_bs + (int64_t)d * p.st_cs : nullptr;
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int back = kH - j;  // window slot j holds the token `back` before the start
        win[j] = init && back <= p.width - 1 ? to_float(cr[(S - back) * p.st_ls]) : 0.f;
      }
      if (valid) {
        // the final state: the last S of cat(old state or zeros, the sequence); the initial state
        // is in registers now, and entries move to lower indices only
        const int64_t len = en - st;
        for (int64_t j = 0; j < S; ++j) {
          const int64_t src = len - S + j;
          T v;
          if (src >= 0) {
            v = xr[(st + src) * p.x_ts];
          } else {
            v = init ? cr[(j + len) * p.st_ls] : from_float<T>(0.f);
          }
          cr[j * p.st_ls] = v;
        }
      }
    }
    // the output at t belongs to this thread: its first W-1 tokens to the chunk of its start,
    // the others to the chunk holding t
    const bool owned = t < st + (p.width - 1) ? st >= c0 : true;  // (t >= c1 here: a head token, st in the chunk)
    const float xi = to_float(xr[t * p.x_ts]);
    if (owned) {
      float acc = bias;
#pragma unroll
      for (int k = 0; k < kH; ++k) acc = fmaf(w[k], win[k], acc);
      acc = fmaf(w[kH], xi, acc);
      if (p.silu) acc = silu_f(acc);
      outr[t * p.o_ts] = from_float<T>(valid ? acc : 0.f);
    }
#pragma unroll
    for (int j = 0; j + 1 < kH; ++j) win[j] = win[j + 1];
    win[kH - 1] = xi;
  }
}

template <typename T, int kW>
__global__ void __launch_bounds__(kSpecThreads) spec_update_kernel(const SpecParams p) {
  constexpr int kH = kW - 1;
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  const int b = blockIdx.y;
  if (d >= p.dim) return;
  const int L = p.seqlen;
  const T* __restrict__ xr = static_cast<const T*>(p.x) + (int64_t)b * p.x_bs + (int64_t)d * p.x_cs;
  T* __restrict__ outr = static_cast<T*>(p.out) + (int64_t)b * p.o_bs + (int64_t)d * p.o_cs;
  const int64_t slot = p.state_indices != nullptr ? p.state_indices[b] : b;
  if (slot == p.pad_slot_id || slot < 0 || slot >= p.lines) {
    for (int i = 0; i < L; ++i) outr[(int64_t)i * p.o_ls] = from_float<T>(0.f);
    return;
  }
  T* __restrict__ cr = static_cast<T*>(p.state) + slot * p.st_bs + (int64_t)d * p.st_cs;
  const int64_t S = p.state_len;
  const int64_t a = p.num_accepted != nullptr ? clamp64(p.num_accepted[b], 1, L) : L;
  const int64_t e = S - L + a;  // the valid history ends here (exclusive)
  float w[kW];
  load_w<kW>(p.weight, p.w_dtype, p.w_cs, p.w_ws, p.width, d, w);
  const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, (int64_t)d * p.b_s) : 0.f;
  float win[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    const int back = kH - j;
    win[j] = back <= p.width - 1 ? to_float(cr[(e - back) * p.st_ls]) : 0.f;
  }
  for (int i = 0; i < L; ++i) {
    const float xi = to_float(xr[(int64_t)i * p.x_ls]);
    float acc = bias;
#pragma unroll
    for (int k = 0; k < kH; ++k) acc = fmaf(w[k], win[k], acc);
    acc = fmaf(w[kH], xi, acc);
    outr[(int64_t)i * p.o_ls] = from_float<T>(p.silu ? silu_f(acc) : acc);
#pragma unroll
    for (int j = 0; j + 1 < kH; ++j) win[j] = win[j + 1];
    win[kH - 1] = xi;
  }
  // the new state: the last S of cat(state[:e], x); entry j reads state[j + a], a >= 1 ahead
  for (int64_t j = 0; j < S; ++j) {
    cr[j * p.st_ls] = j < S - L ? cr[(j + a) * p.st_ls] : xr[(j - (S - L)) * p.x_ls];
  }
}

template <typename T, int kW>
void launch_varlen(const VarlenParams& p, cudaStream_t stream) {
  // chunk >= 8 > width - 2: a sequence's first width-1 outputs spill at most into the next chunk
  const bool channel_last = p.x_ds == 1 && p.x_ts != 1;
  const bool token_major = !channel_last && p.dim <= 65535;
  int64_t chunk = token_major ? 16 : 64;
  dim3 grid;
  if (token_major) {
    const int64_t nchunks = (p.total + chunk - 1) / chunk;
    grid = dim3(static_cast<unsigned>((nchunks + kVarlenThreads - 1) / kVarlenThreads), static_cast<unsigned>(p.dim));
  } else {
    while ((p.total + chunk - 1) / chunk > 65535) chunk *= 2;
    grid = dim3(static_cast<unsigned>((p.dim + kVarlenThreads - 1) / kVarlenThreads),
                static_cast<unsigned>((p.total + chunk - 1) / chunk));
  }
  varlen_fwd_kernel<T, kW><<<grid, kVarlenThreads, 0, stream>>>(p, chunk, token_major);
  CC1D_CUDA_LAUNCH_CHECK();
}

}  // namespace

// Both ops: widths 2-4 on the width-4 kernel, 5-8 on the width-8 one.
namespace varlen_fwd {
void launch(const VarlenParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<4, 8>{}, [&](auto tag, auto width) {
    launch_varlen<typename decltype(tag)::type, decltype(width)::value>(p, stream);
  });
}
}  // namespace varlen_fwd

namespace spec_update {
void launch(const SpecParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.dim + kSpecThreads - 1) / kSpecThreads), static_cast<unsigned>(p.batch));
  dispatch_dtype_width(p.x_dtype, p.width, Widths<4, 8>{}, [&](auto tag, auto width) {
    spec_update_kernel<typename decltype(tag)::type, decltype(width)::value><<<grid, kSpecThreads, 0, stream>>>(p);
    CC1D_CUDA_LAUNCH_CHECK();
  });
}
}  // namespace spec_update

}  // namespace causal_conv1d_cuda
