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
// position, dx[q] = sum_k w[k] g[q + H - k]. The chunks at a sequence boundary take the same
// register window with two bit masks over its positions (in a sequence; a sequence starts here), so
// that their loads are issued at once too; with initial or final states they walk the chunk token by
// token through the boundary rules (the initial state before a sequence's first token, no g past its
// last, dfinal_states on its last W-1 tokens). cu_seqlens is read from a shared-memory copy (up to
// 1024 sequences). dinitial_states: a thread per (sequence, channel), after the walk. The block's
// dweight / dbias: a shuffle tree inside each warp, then the warps in order.
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
constexpr int kSmemSeqs = 1024;   // cu_seqlens of up to this many sequences is read from shared memory
// Channel-last blocks per SM the kernel is compiled for at widths up to 4 (its register cap: 2 -> 64
// registers, 1 -> 128; wider widths take 1). A build-time knob for tuning on the device:
// NVCC_APPEND_FLAGS=-DCAUSAL_CONV1D_PACKED_BWD_CL_BLOCKS=1.
#ifndef CAUSAL_CONV1D_PACKED_BWD_CL_BLOCKS
#define CAUSAL_CONV1D_PACKED_BWD_CL_BLOCKS 2
#endif
constexpr int kClBlocks = CAUSAL_CONV1D_PACKED_BWD_CL_BLOCKS;

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

__device__ __forceinline__ SeqSpan seq_of(const PackedBwdParams& p, const int32_t* cu, int64_t q) {
  if (p.nseq <= 0) return {0, 0, 0};
  int lo = 0, hi = p.nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (cu[mid] <= q) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return {lo, clamp_tok(cu[lo], p.total), clamp_tok(cu[lo + 1], p.total)};
}

// A channel's taps and bias; a chunk's dweight / dbias sums.
template <int W>
struct Taps {
  float w[W];
  float bias;
};
template <int W>
struct Sums {
  float dw[W];
  float db;
};

// A chunk at a sequence boundary (or the end of x), without initial or final states (those take
// boundary_states()): from registers like interior(), x over the window [s0 - H, s0 + kChunk + H)
// and dout over [s0, s0 + kChunk + H), all loads issued at once, with two bit masks over the
// window's positions: `valid` (the position lies in a sequence) and `brk` (a sequence starts
// there). Positions a <= b share a sequence when both are valid and no sequence starts in (a, b]. g[j] reads x as zero before its sequence's first token; dx[q] takes g
// only from q's sequence. A position outside x reads x's first or last token instead (no valid
// position takes it: selects, not products), so that the loads need no predicates. Not inlined:
// inlined beside interior() under the kernel's register cap, ptxas spills the window (0.2-0.8 KB
// per thread); a call of its own keeps it in registers (its inputs and sums by value, the
// parameters in constant space: nothing of the caller's in local memory).
template <typename T, int W>
__device__ __noinline__ Sums<W> boundary_chunk(const PackedBwdParams& p, const int32_t* cu, int c, Taps<W> t,
                                             int64_t s0) {
constexpr int H = W - 1;
Sums<W> r{};
  constexpr int NW = kChunk + 2 * H;  // window positions: s0 - H + n
  static_assert(NW <= 32, "the window's masks are 32-bit");
  const int64_t w0 = s0 - H, last = p.total - 1;
  const T* xr = static_cast<const T*>(p.x) + c * p.x_cs;
  const T* dr = static_cast<const T*>(p.dout) + c * p.do_cs;
  float xv[NW];
  float g[kChunk + H];  // dout, then g, at s0 + m
#pragma unroll
  for (int n = 0; n < NW; ++n) xv[n] = to_float(xr[min(max(w0 + n, int64_t{0}), last) * p.x_ts]);
#pragma unroll
  for (int m = 0; m < kChunk + H; ++m) g[m] = to_float(dr[min(s0 + m, last) * p.do_ts]);
  uint32_t valid = 0, brk = 0;
  if (p.nseq > 0) {
    const int64_t lo = clamp_tok(cu[0], p.total), hi = clamp_tok(cu[p.nseq], p.total);
#pragma unroll
    for (int n = 0; n < NW; ++n) valid |= (w0 + n >= lo && w0 + n < hi ? 1u : 0u) << n;
    for (int i = seq_of(p, cu, w0 < 0 ? 0 : w0).i + 1; i < p.nseq; ++i) {
      const int64_t b = clamp_tok(cu[i], p.total);
      if (b >= w0 + NW) break;
      if (b > w0) brk |= 1u << (b - w0);
    }
  }
  // a <= b: one sequence holds both window positions (compile-time a and b once unrolled)
  auto same = [&](int a, int b) {
    const uint32_t need = (1u << a) | (1u << b);
    const uint32_t starts = ((2u << b) - 1u) & ~((2u << a) - 1u);  // positions (a, b]
    return (valid & need) == need && (brk & starts) == 0u;
  };
#pragma unroll
  for (int m = 0; m < kChunk + H; ++m) {
    const int n = m + H;  // g's window position
    float xs[W];
    float z = t.bias;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      xs[k] = same(m + k, n) ? xv[m + k] : 0.f;  // zero before the sequence's start
      z += t.w[k] * xs[k];
    }
    g[m] = !(valid & (1u << n)) ? 0.f : p.silu ? g[m] * dsilu_f(z) : g[m];
    if (m < kChunk) {
#pragma unroll
      for (int k = 0; k < W; ++k) r.dw[k] += g[m] * xs[k];
      r.db += g[m];
    }
  }
  T* dxr = static_cast<T*>(p.dx) + c * p.dx_cs;
#pragma unroll
  for (int m = 0; m < kChunk; ++m) {
    const int64_t q = s0 + m;
    const int n = m + H;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if (same(n, n + H - k)) acc += t.w[k] * g[m + H - k];
    }
    if (q < p.total) dxr[q * p.dx_ts] = from_float<T>(acc);
  }
  return r;
}

template <typename T, int W>
struct Channel {
  static constexpr int H = W - 1;
  const PackedBwdParams& p;
  const int32_t* cu;  // cu_seqlens: the block's shared copy, or p.cu
  int c;
  float w[W];
  float bias;

  __device__ Channel(const PackedBwdParams& params, const int32_t* seqlens, int channel)
      : p(params), cu(seqlens), c(channel) {
#pragma unroll
    for (int k = 0; k < W; ++k) w[k] = load_any(p.weight, p.w_dtype, c * p.w_cs + k * p.w_ws);
    bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, c * p.b_s) : 0.f;
  }

  __device__ Taps<W> taps() const {
    Taps<W> t;
#pragma unroll
    for (int k = 0; k < W; ++k) t.w[k] = w[k];
    t.bias = bias;
    return t;
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

  // boundary() with initial or final states: one pass over j in [s0, s0 + kChunk + H) with
  // sliding windows (x over [j - H, j], g and the index of the sequence holding each position over
  // [j - H, j]; -1: in no sequence, or past x). g[j] reads its window through its own sequence's
  // rules (the initial state before the sequence's first token); dx[j - H] takes g only from
  // positions in its own sequence, and dfinal_states on the sequence's last H tokens.
  __device__ void boundary_states(int64_t s0, float (&dw)[W], float& db) const {
    const T* xr = static_cast<const T*>(p.x) + c * p.x_cs;
    T* dxr = static_cast<T*>(p.dx) + c * p.dx_cs;
    float xw[W], gw[W];
    int sw[W];
#pragma unroll
    for (int k = 0; k < W; ++k) {  // x[s0 - W + k] in slot k: the first shift moves it to k - 1
      const int64_t r = s0 - W + k;
      xw[k] = k > 0 && r >= 0 && r < p.total ? to_float(xr[r * p.x_ts]) : 0.f;
      gw[k] = 0.f;
      sw[k] = -1;
    }
    SeqSpan s = seq_of(p, cu, s0);
#pragma unroll 1
    for (int m = 0; m < kChunk + H; ++m) {
      const int64_t j = s0 + m;
      while (j >= s.end && s.i + 1 < p.nseq) {  // the next sequences (empty ones are stepped over)
        ++s.i;
        s.start = clamp_tok(cu[s.i], p.total);
        s.end = clamp_tok(cu[s.i + 1], p.total);
      }
#pragma unroll
      for (int k = 0; k < H; ++k) {
        xw[k] = xw[k + 1];
        gw[k] = gw[k + 1];
        sw[k] = sw[k + 1];
      }
      xw[H] = j < p.total ? to_float(xr[j * p.x_ts]) : 0.f;
      const bool inside = j < p.total && j >= s.start && j < s.end;
      gw[H] = 0.f;
      sw[H] = inside ? s.i : -1;
      if (inside) {
        float xs[W];
        float z = bias;
#pragma unroll
        for (int k = 0; k < W; ++k) {
          xs[k] = j - H + k >= s.start ? xw[k] : xval(j - H + k, s);
          z += w[k] * xs[k];
        }
        const float dy = ld<T>(p.dout, c * p.do_cs + j * p.do_ts);
        gw[H] = p.silu ? dy * dsilu_f(z) : dy;
        if (m < kChunk) {
#pragma unroll
          for (int k = 0; k < W; ++k) dw[k] += gw[H] * xs[k];
          db += gw[H];
        }
      }
      const int64_t q = j - H;  // its g window is complete: positions q .. j
      if (m >= H && q < p.total) {
        float acc = 0.f;
        if (sw[0] >= 0) {
#pragma unroll
          for (int k = 0; k < W; ++k) {
            if (sw[H - k] == sw[0]) acc += w[k] * gw[H - k];
          }
          const int64_t end = clamp_tok(cu[sw[0] + 1], p.total);
          if (p.dfinal != nullptr && q >= end - H)
            acc += ld<T>(p.dfinal, sw[0] * p.df_ns + c * p.df_cs + (q + H - end) * p.df_ls);
        }
        dxr[q * p.dx_ts] = from_float<T>(acc);
      }
    }
  }

  // dinitial_states of sequence i: dxp[m] = sum_k w[k] g[m - k] (0 <= m - k < n) + dfinal[m - n] (m >= n).
  __device__ void dinit(int i, float (&dw)[W], float& db) const {
    SeqSpan s{i, clamp_tok(cu[i], p.total), clamp_tok(cu[i + 1], p.total)};
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
__global__ void __launch_bounds__(kCL ? kClChannels * kClLanes : kCfThreads, kCL ? (W <= 4 ? kClBlocks : 1) : (W <= 6 ? 3 : 2))
    packed_bwd_kernel(const __grid_constant__ PackedBwdParams p) {
  constexpr int H = W - 1;
  constexpr int kChan = kCL ? kClChannels : 1;
  constexpr int kLanes = kCL ? kClLanes : kCfThreads;
  constexpr int kWarps = kChan * kLanes / 32;
  __shared__ float red[kWarps][W + 1][kChan];
  __shared__ int32_t cu_s[kSmemSeqs + 1];
  const int tid = threadIdx.x;
  const int ch_local = kCL ? tid % kClChannels : 0;
  const int lane = kCL ? tid / kClChannels : tid;
  const int c = blockIdx.x * kChan + ch_local;
  const bool cu_shared = p.nseq <= kSmemSeqs;
  if (cu_shared) {
    for (int i = tid; i <= p.nseq; i += kChan * kLanes) cu_s[i] = p.cu[i];
  }
  __syncthreads();
  float dw[W];
#pragma unroll
  for (int k = 0; k < W; ++k) dw[k] = 0.f;
  float db = 0.f;
  if (c < p.dim) {
    const Channel<T, W> ch(p, cu_shared ? cu_s : p.cu, c);
    const int64_t nchunks = (p.total + kChunk - 1) / kChunk;
    for (int64_t k = lane; k < nchunks; k += kLanes) {
      const int64_t s0 = k * kChunk;
      const SeqSpan s = seq_of(p, ch.cu, s0);
      if (s.start + H <= s0 && s0 + kChunk + H <= s.end) {
        ch.template interior<kVec>(s0, dw, db);
      } else {
        if (p.init == nullptr && p.dfinal == nullptr) {
          const Sums<W> r = boundary_chunk<T, W>(p, ch.cu, c, ch.taps(), s0);
#pragma unroll
          for (int j = 0; j < W; ++j) dw[j] += r.dw[j];
          db += r.db;
        } else {
          ch.boundary_states(s0, dw, db);
        }
      }
    }
    if (p.dinit != nullptr) {
      for (int i = lane; i < p.nseq; i += kLanes) ch.dinit(i, dw, db);
    }
  }
  // The block's sums in a fixed order: a shuffle tree over the warp's lanes of one channel (tid and
  // tid + off * kChan hold the same channel), then the warps' sums in warp order.
  float v[W + 1];  // dweight, then dbias
#pragma unroll
  for (int k = 0; k <= W; ++k) {
    v[k] = k < W ? dw[k] : db;
#pragma unroll
    for (int off = 16; off >= kChan; off >>= 1) v[k] += __shfl_down_sync(0xffffffffu, v[k], off);
  }
  const int warp = tid / 32;
  if (tid % 32 < kChan) {
#pragma unroll
    for (int k = 0; k <= W; ++k) red[warp][k][tid % 32] = v[k];
  }
  __syncthreads();
  if (tid < kChan * (W + 1)) {
    const int cc = tid % kChan, k = tid / kChan;
    const int co = blockIdx.x * kChan + cc;
    if (co < p.dim) {
      float sum = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[w][k][cc];  // fixed order
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
