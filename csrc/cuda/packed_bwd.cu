// The packed-sequence backward, kernel path packed_bwd_general (op causal_conv1d::packed_bwd; params:
// packed.cuh; semantics: docs/package.md, "Packed sequences"): dx, dweight, dbias and the
// per-sequence dinitial_states in one launch, with the per-sequence dfinal_states flowing in.
//
// A block owns whole channels (channel-first: one channel, 256 threads; channel-last: 16 channels
// x 32 threads, so a warp reads 16 consecutive channels of 2 tokens), and its threads walk the
// channel's 16-token chunks. dweight / dbias are then complete inside the block: each thread sums
// its chunks in order, the block adds the threads' sums in a fixed order (no atomics, no workspace,
// no second kernel: bit-identical reruns, graph-capturable, no host sync).
//
// A chunk whose tokens, the W-1 before and the W-1 after all lie in one sequence is computed from
// registers: x over [s - H, s + 16 + H), dout over [s, s + 16 + H), g = dout * act'(z) once per
// position, dx[q] = sum_k w[k] g[q + H - k]. The chunks at a sequence boundary take a per-token path
// that reads through the boundary rules (the initial state before a sequence's first token, no g
// past its last, dfinal_states on its last W-1 tokens). dinitial_states: a thread per (sequence,
// channel), after the walk.
//
// The values of cu_seqlens are not checked (no sync): they are clamped into [0, total] and a token
// that lies in no sequence (cu_seqlens[0] > 0, or cu_seqlens[n] < total) gets dx = 0.
#include "common.cuh"
#include "dispatch.cuh"
#include "launch_check.cuh"
#include "packed.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kChunk = 16;        // tokens per thread chunk
constexpr int kCfThreads = 256;   // channel-first block: one channel
constexpr int kClChannels = 16;   // channel-last block: 16 channels x 32 chunk lanes
constexpr int kClLanes = 32;

template <typename T>
__device__ __forceinline__ float ld(const void* base, int64_t i) {
  return to_float(static_cast<const T*>(base)[i]);
}

__device__ __forceinline__ int64_t clamp_tok(int64_t v, int64_t total) { return v < 0 ? 0 : (v > total ? total : v); }

// The sequence holding token q: the largest i in [0, nseq) with cu[i] <= q, and its bounds (clamped
// into [0, total]). No sequences: an empty one at 0.
struct SeqSpan {
  int i;
  int64_t start, end;
};

__device__ __forceinline__ SeqSpan seq_of(const PackedBwdParams& p, int64_t q) {
  if (p.nseq <= 0) return {0, 0, 0};
  int lo = 0, hi = p.nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (p.cu[mid] <= q) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return {lo, clamp_tok(p.cu[lo], p.total), clamp_tok(p.cu[lo + 1], p.total)};
}

template <typename T, int W>
struct Channel {
  static constexpr int H = W - 1;
  const PackedBwdParams& p;
  int c;
  float w[W];
  float bias;

  __device__ Channel(const PackedBwdParams& params, int channel) : p(params), c(channel) {
#pragma unroll
    for (int k = 0; k < W; ++k) w[k] = load_any(p.weight, p.w_dtype, c * p.w_cs + k * p.w_ws);
    bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, c * p.b_s) : 0.f;
  }

  // The input at token r as sequence s (start `start`) sees it: x, or its initial state before start.
  __device__ float xval(int64_t r, const SeqSpan& s) const {
    if (r >= s.start) return ld<T>(p.x, c * p.x_cs + r * p.x_ts);
    if (p.init == nullptr) return 0.f;
    return ld<T>(p.init, s.i * p.i_ns + c * p.i_cs + (r - s.start + H) * p.i_ls);
  }

  // g at token j of sequence s; adds g * inputs to dw / db when accumulate.
  template <bool kAccumulate>
  __device__ float gval(int64_t j, const SeqSpan& s, float (&dw)[W], float& db) const {
    float xs[W];
    float z = bias;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      xs[k] = xval(j - H + k, s);
      z += w[k] * xs[k];
    }
    const float dy = ld<T>(p.dout, c * p.do_cs + j * p.do_ts);
    const float g = p.silu ? dy * dsilu_f(z) : dy;
    if constexpr (kAccumulate) {
#pragma unroll
      for (int k = 0; k < W; ++k) dw[k] += g * xs[k];
      db += g;
    }
    return g;
  }

  // A chunk [s0, s0 + kChunk) inside one sequence with H tokens of margin on both sides.
  template <bool kVec>
  __device__ void interior(int64_t s0, float (&dw)[W], float& db) const {
    float xv[kChunk + 2 * H];  // x at s0 - H + m
    float dv[kChunk + H];      // dout at s0 + m
    const T* xr = static_cast<const T*>(p.x) + c * p.x_cs;
    const T* dr = static_cast<const T*>(p.dout) + c * p.do_cs;
    if constexpr (kVec) {
      float core[kChunk];
      load_vec<T, kChunk>(xr + s0, core);
#pragma unroll
      for (int m = 0; m < kChunk; ++m) xv[H + m] = core[m];
#pragma unroll
      for (int m = 0; m < H; ++m) {
        xv[m] = to_float(xr[s0 - H + m]);
        xv[H + kChunk + m] = to_float(xr[s0 + kChunk + m]);
      }
      load_vec<T, kChunk>(dr + s0, core);
#pragma unroll
      for (int m = 0; m < kChunk; ++m) dv[m] = core[m];
#pragma unroll
      for (int m = 0; m < H; ++m) dv[kChunk + m] = to_float(dr[s0 + kChunk + m]);
    } else {
#pragma unroll
      for (int m = 0; m < kChunk + 2 * H; ++m) xv[m] = to_float(xr[(s0 - H + m) * p.x_ts]);
#pragma unroll
      for (int m = 0; m < kChunk + H; ++m) dv[m] = to_float(dr[(s0 + m) * p.do_ts]);
    }
    float g[kChunk + H];
#pragma unroll
    for (int m = 0; m < kChunk + H; ++m) {
      float z = bias;
#pragma unroll
      for (int k = 0; k < W; ++k) z += w[k] * xv[m + k];
      g[m] = p.silu ? dv[m] * dsilu_f(z) : dv[m];
    }
    float out[kChunk];
#pragma unroll
    for (int m = 0; m < kChunk; ++m) {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        acc += w[k] * g[m + H - k];
        dw[k] += g[m] * xv[m + k];
      }
      db += g[m];
      out[m] = acc;
    }
    T* dxr = static_cast<T*>(p.dx) + c * p.dx_cs;
    if constexpr (kVec) {
      store_vec<T, kChunk>(dxr + s0, out);
    } else {
#pragma unroll
      for (int m = 0; m < kChunk; ++m) dxr[(s0 + m) * p.dx_ts] = from_float<T>(out[m]);
    }
  }

  // A chunk at a sequence boundary (or the end of x): token by token through the boundary rules.
  __device__ void boundary(int64_t s0, float (&dw)[W], float& db) const {
    T* dxr = static_cast<T*>(p.dx) + c * p.dx_cs;
    for (int m = 0; m < kChunk; ++m) {
      const int64_t q = s0 + m;
      if (q >= p.total) break;
      const SeqSpan s = seq_of(p, q);
      float acc = 0.f;
      if (q >= s.start && q < s.end) {
        const float gq = gval<true>(q, s, dw, db);
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const int64_t j = q + H - k;
          if (j < s.end) acc += w[k] * (k == H ? gq : gval<false>(j, s, dw, db));
        }
        if (p.dfinal != nullptr && q >= s.end - H)
          acc += ld<T>(p.dfinal, s.i * p.df_ns + c * p.df_cs + (q + H - s.end) * p.df_ls);
      }
      dxr[q * p.dx_ts] = from_float<T>(acc);
    }
  }

  // dinitial_states of sequence i: dxp[m] = sum_k w[k] g[m - k] (0 <= m - k < n) + dfinal[m - n] (m >= n).
  __device__ void dinit(int i, float (&dw)[W], float& db) const {
    SeqSpan s{i, clamp_tok(p.cu[i], p.total), clamp_tok(p.cu[i + 1], p.total)};
    const int64_t n = s.end > s.start ? s.end - s.start : 0;
    float g[H];
#pragma unroll
    for (int j = 0; j < H; ++j) g[j] = j < n ? gval<false>(s.start + j, s, dw, db) : 0.f;
#pragma unroll
    for (int m = 0; m < H; ++m) {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k <= m; ++k) acc += w[k] * g[m - k];  // g[j] is 0 for j >= n
      if (p.dfinal != nullptr && m >= n) acc += ld<T>(p.dfinal, i * p.df_ns + c * p.df_cs + (m - n) * p.df_ls);
      static_cast<T*>(p.dinit)[i * p.di_ns + c * p.di_cs + m * p.di_ls] = from_float<T>(acc);
    }
  }
};

template <typename T, int W, bool kCL, bool kVec>
__global__ void __launch_bounds__(kCL ? kClChannels * kClLanes : kCfThreads)
    packed_bwd_kernel(const PackedBwdParams p) {
  constexpr int H = W - 1;
  constexpr int kChan = kCL ? kClChannels : 1;
  constexpr int kLanes = kCL ? kClLanes : kCfThreads;
  __shared__ float red[kChan * kLanes][W + 1];
  const int tid = threadIdx.x;
  const int ch_local = kCL ? tid % kClChannels : 0;
  const int lane = kCL ? tid / kClChannels : tid;
  const int c = blockIdx.x * kChan + ch_local;
  float dw[W];
#pragma unroll
  for (int k = 0; k < W; ++k) dw[k] = 0.f;
  float db = 0.f;
  if (c < p.dim) {
    const Channel<T, W> ch(p, c);
    const int64_t nchunks = (p.total + kChunk - 1) / kChunk;
    for (int64_t k = lane; k < nchunks; k += kLanes) {
      const int64_t s0 = k * kChunk;
      const SeqSpan s = seq_of(p, s0);
      if (s.start + H <= s0 && s0 + kChunk + H <= s.end) {
        ch.template interior<kVec>(s0, dw, db);
      } else {
        ch.boundary(s0, dw, db);
      }
    }
    if (p.dinit != nullptr) {
      for (int i = lane; i < p.nseq; i += kLanes) ch.dinit(i, dw, db);
    }
  }
  const int slot = lane * kChan + ch_local;
#pragma unroll
  for (int k = 0; k < W; ++k) red[slot][k] = dw[k];
  red[slot][W] = db;
  __syncthreads();
  if (tid < kChan * (W + 1)) {
    const int cc = tid % kChan, k = tid / kChan;
    const int co = blockIdx.x * kChan + cc;
    if (co < p.dim) {
      float sum = 0.f;
      for (int l = 0; l < kLanes; ++l) sum += red[l * kChan + cc][k];  // fixed order
      if (k < W) {
        store_any(p.dweight, p.w_dtype, static_cast<int64_t>(co) * W + k, sum);
      } else if (p.dbias != nullptr) {
        store_any(p.dbias, p.b_dtype, co, sum);
      }
    }
  }
}

template <typename T, int W>
void launch_typed(const PackedBwdParams& p, cudaStream_t stream) {
  if (p.channel_last) {
    const dim3 grid(static_cast<unsigned>((p.dim + kClChannels - 1) / kClChannels));
    packed_bwd_kernel<T, W, true, false><<<grid, kClChannels * kClLanes, 0, stream>>>(p);
  } else if (p.vec_ok) {
    packed_bwd_kernel<T, W, false, true><<<static_cast<unsigned>(p.dim), kCfThreads, 0, stream>>>(p);
  } else {
    packed_bwd_kernel<T, W, false, false><<<static_cast<unsigned>(p.dim), kCfThreads, 0, stream>>>(p);
  }
  CC1D_CUDA_LAUNCH_CHECK();
}

}  // namespace

namespace packed_bwd_general {
void launch(const PackedBwdParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<2, 3, 4, 5, 6, 7, 8>{}, [&](auto tag, auto width) {
    launch_typed<typename decltype(tag)::type, decltype(width)::value>(p, stream);
  });
}
}  // namespace packed_bwd_general

}  // namespace causal_conv1d_cuda
