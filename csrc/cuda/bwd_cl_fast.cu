// Fast channel-last backward: dx, dweight, dbias for out[t] = act(z[t]),
//   z[t]  = bias + sum_k w[k] * x[t - (W-1) + k]          (recomputed here; x is zero before the row)
//   g[t]  = dout[t] * silu'(z[t])   (dout[t] without activation; 0 for t >= L)
//   dx[t] = sum_j w[W-1-j] * g[t + j]
//   dw[k] = sum_t g[t] * x[t - (W-1) + k],  dbias = sum_t g[t]
//
// Why (docs/PERF_NOTES.md, "bwd cl fast path"): the general channel-last kernel (bwd.cu, 4 channels
// per thread) is capped at 128 registers with spills and 25% occupancy, ~29% of copy bandwidth.
//
// Layout: x, dout, dx are (B, L, D) in memory with the channels contiguous (stride 1) and any token
// pitch >= D. A thread owns one 4-byte word of channels (kC = 2 channels of fp16 / bf16, 1 of fp32)
// and walks the tokens of one slice [t0, t0 + T) forward. Consecutive lanes own consecutive words, so
// every warp-wide load or store moves 128 contiguous bytes of one token row.
//
// The walk (step i at token t = t0 + i, i = 0 .. T + W - 2):
//  * x and dout reach the thread through a ring in shared memory filled by 4-byte cp.async copies,
//    kStages tokens deep and refilled in batches of kBatch tokens, so that every thread keeps 96-128
//    bytes of loads in flight without spending registers on them (a register ring of 8 tokens needed
//    ~100 registers: ptxas hoists the refills and batches the silu chains of a whole group);
//  * the x window (x at t - W + 1 .. t - 1; for i = 0 the W - 1 tokens before the slice, zero before
//    the row start) gives z[t] and g[t], once per position;
//  * dweight / dbias accumulate g[t] * x-window for t < t0 + T, in fp32 registers;
//  * the g window (g at t - W + 1 .. t - 1) completes dx[t - W + 1] (stored when it is in the slice):
//    the last W - 1 steps run past the slice on the next slice's x and dout; past the row the copies
//    are zero-filled, so x = dout = g = 0 there.
// Groups of 8 steps: the interior ones run without any check; the first one (no dx before the slice)
// and the last two or three (copies reaching the end of the row or the walk, steps past the slice)
// are checked, branch-free but for predicated stores.
// A block is 32 words (one warp wide) x kWarps consecutive token slices (one warp each). Its
// dweight / dbias sums are reduced over the warps in shared memory in a fixed order and written as one
// partial row set, p.partial[((b * ntb + tb) * (W+1) + k) * D + d]; the reduce kernel of the fast
// channel-first backward (bwd_cf_fast.cu) then sums the row sets per channel in a fixed order and casts
// to weight's / bias's dtype. No atomics: bit-identical from run to run.
// Sequences (seq_idx, or cu_seqlens from the packed backward): a tap or a g term counts only between
// two tokens of one sequence, and g = 0 on a token in none (seq_idx < 0, or outside cu_seqlens).
// Every lane of a warp walks the same tokens, so the sequence structure is warp-uniform: at the
// start of its slice the warp writes a label per token it touches into shared memory (the seq_idx
// value, or the index of the cu_seqlens sequence; -1 for none) and a bit per group of steps whose
// tokens and taps all carry one label >= 0. Those groups run the dense steps unchanged; the others
// (the groups at a sequence boundary, and the checked groups at the ends of the walk) run masked
// steps, which read the labels of their taps and select.
// Eligible: channel-last x / dout / dx, no initial_states / dfinal_states / dinitial_states,
// width 2..4; for 16-bit x the words must be 4-byte aligned (even dim, even token and batch pitches,
// 4-byte aligned pointers); token pitches below 4 GiB. Everything else runs the general
// kernels (bwd.cu) through the backward's table (dispatch.cu).
#include "launch_check.cuh"

#include <type_traits>

#include "dispatch.cuh"
#include "vec16.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kWarps = 8;  // token slices per block
constexpr int kThreads = 32 * kWarps;
// Ring stages: tokens of x and dout copied ahead per thread (cp.async into shared memory, so they cost
// no registers), in batches of kBatch tokens (one cp.async group, one wait per batch). At a batch's
// start the batch (kStages - kBatch) tokens ahead is issued: 8 * (kStages - kBatch) .. 8 * kStages
// bytes in flight per thread. A build-time knob for tuning on the device:
// NVCC_APPEND_FLAGS=-DCAUSAL_CONV1D_BWD_CL_FAST_STAGES=8 (8 or 16; shared memory per block:
// kWarps * (kStages * 256 + 16) bytes, reused by the dweight reduction: 32.1 KB at 16 stages).
#ifndef CAUSAL_CONV1D_BWD_CL_FAST_STAGES
#define CAUSAL_CONV1D_BWD_CL_FAST_STAGES 16
#endif
constexpr int kStages = CAUSAL_CONV1D_BWD_CL_FAST_STAGES;
static_assert(kStages == 8 || kStages == 16, "CAUSAL_CONV1D_BWD_CL_FAST_STAGES must be 8 or 16");
constexpr int kBatch = 4;                 // tokens per cp.async group
constexpr int kBufs = kStages / kBatch;   // batches in the ring
constexpr int kUnroll = 2 * kBatch;       // steps per unrolled group
// Resident blocks per SM the register budget must allow (64K registers per SM): 4 -> <= 64 registers,
// 1024 threads per SM (0 spills on sm_80 and sm_90). sm_75 schedules the same code with more registers
// (64 spills there; it has 1024 threads per SM at most): 3 -> <= 80. The host pass (no __CUDA_ARCH__)
// sizes grids with 4.
#ifndef CAUSAL_CONV1D_BWD_CL_FAST_MIN_BLOCKS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CAUSAL_CONV1D_BWD_CL_FAST_MIN_BLOCKS 3
#else
#define CAUSAL_CONV1D_BWD_CL_FAST_MIN_BLOCKS 4
#endif
#endif
constexpr int kMinBlocks = CAUSAL_CONV1D_BWD_CL_FAST_MIN_BLOCKS;
constexpr int64_t kTmax = 128;  // tokens per slice (warp) at most: halo steps (W-1)/T <= 2.3%
constexpr int64_t kTmin = 16;   // ... and at least, when the grid is made finer to fill the machine

// dout * silu'(z) = dout * s * (1 + z * (1 - s)), s = sigmoid(z): 2 MUFU (ex2, rcp) + 5 FP32 ops.
__device__ __forceinline__ float grad_silu(float dout, float z) {
  const float s = __fdividef(1.f, 1.f + __expf(-z));
  const float ds = dout * s;
  return fmaf(ds, fmaf(-z, s, z), ds);
}

// One 4-byte word of T <-> kC floats.
template <typename T>
struct Word {
  static constexpr int kC = 4 / static_cast<int>(sizeof(T));
  __device__ __forceinline__ static void load(uint32_t r, float (&f)[kC]) {
    if constexpr (sizeof(T) == 4) {
      f[0] = __uint_as_float(r);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      unpack2_bf16(r, f[0], f[1]);
    } else {
      unpack2_f16(r, f[0], f[1]);
    }
  }
  __device__ __forceinline__ static uint32_t store(const float (&f)[kC]) {
    if constexpr (sizeof(T) == 4) {
      return __float_as_uint(f[0]);
    } else {
      return pack2(f[0], f[1], T{});
    }
  }
};

__device__ __forceinline__ uint32_t ld_word(const void* ptr) { return __ldg(static_cast<const unsigned int*>(ptr)); }
__device__ __forceinline__ const void* advance(const void* ptr, uint32_t bytes) {
  return static_cast<const char*>(ptr) + bytes;
}

// Asynchronous 4-byte global -> shared copy (sm_80+; L1-allocating, the only form for 4 bytes); with
// `full` false nothing is read and the word is zero-filled. Before sm_80 a plain load + store: each
// thread reads back only the words it copied itself, so both forms give the same results, and commit /
// wait have nothing to do.
template <bool kMayZero>
__device__ __forceinline__ void cp_async4(uint32_t* smem, const void* gmem, const bool full = true) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kMayZero) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sa), "l"(gmem), "r"(full ? 4 : 0) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sa), "l"(gmem) : "memory");
  }
#else
  *smem = !kMayZero || full ? *static_cast<const uint32_t*>(gmem) : 0u;
#endif
}

// A 4-byte store when `pred` holds: a predicated instruction, not a branch around the computation of v.
__device__ __forceinline__ void st_word_if(void* ptr, const uint32_t v, const bool pred) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p st.global.b32 [%0], %1;\n}\n" ::"l"(ptr), "r"(v),
      "r"(static_cast<int>(pred))
      : "memory");
}

// Byte pitches of one token (< 2^32: eligible()). 32-bit: one register each where the compiler keeps
// them in registers, and a pointer step is an add with carry.
struct TokenPitch {
  uint32_t x, dout, dx;
};

// One warp's part of shared memory: the ring, [stage][x, dout][lane] words (token i of the walk lives
// in stage i mod kStages: batch i / kBatch in buffer (i / kBatch) mod kBufs), and the walk's bounds.
// The bounds are read from here in the loops (not kept in registers: the walk is at the 64-register
// budget, and a shared-memory read per group of 8 steps costs nothing measurable).
struct WarpSmem {
  uint32_t ring[kStages][2][32];
  int n_out;   // dx / dweight at steps i < n_out (tokens t0 + i inside the slice and the row)
  int n_in;    // tokens t0 + i inside the row among those the walk reads: zero-filled from n_in on
  int n_fast;  // groups of steps ending at or before n_fast are interior
  int steps;   // the walk's length: n_out + kH
};

// A warp's sequence labels (kernels with sequences): lab[j] for token t0 - kH + j of its slice (-1:
// in no sequence, or outside the row), for every step the walk runs (steps i .. i + kH read
// lab[i .. i + kH]); bit g of `plain`: the steps of group g (steps 8g .. 8g + 7) see one label >= 0.
constexpr int kLabels = 160;  // >= kTmax + 2 * (kW - 1) + kUnroll, a multiple of kUnroll
static_assert(kLabels / kUnroll <= 32, "one bit per group in `plain`");
struct SeqSmem {
  int lab[kLabels];
  uint32_t plain;
};

// The largest i in [0, nseq) with cu[i] <= u (clamped into [0, total]); nseq >= 1.
__device__ __forceinline__ int seq_at(const int32_t* cu, int nseq, int64_t total, int64_t u) {
  int lo = 0, hi = nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    const int64_t c = min(max(static_cast<int64_t>(__ldg(cu + mid)), int64_t{0}), total);
    if (c <= u) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Fills the warp's labels for the slice starting at t0 and its `plain` bits; `active`: the lanes
// walking (each takes a contiguous run of labels).
template <int kH>
__device__ void fill_labels(const ConvParams& p, const int b, const int64_t t0, const unsigned active, SeqSmem* sq) {
  const int lane = threadIdx.x & 31;
  const int nact = __popc(active);
  const int rank = __popc(active & ((1u << lane) - 1u));
  const int per = (kLabels + nact - 1) / nact;
  const int j0 = rank * per;
  const int j1 = min(j0 + per, kLabels);
  if (rank == 0) sq->plain = 0u;
  if (p.seq_idx != nullptr) {
    const int32_t* sr = p.seq_idx + static_cast<int64_t>(b) * p.s_bs;
    for (int j = j0; j < j1; ++j) {
      const int64_t u = t0 - kH + j;
      sq->lab[j] = u >= 0 && u < p.seqlen ? __ldg(sr + u * p.s_ls) : -1;
    }
  } else if (j0 < j1) {
    const int32_t* cu = p.cu_seqlens;
    const int64_t L = p.seqlen;
    auto clamped = [&](int i) { return min(max(static_cast<int64_t>(__ldg(cu + i)), int64_t{0}), L); };
    const int64_t lo = p.nseq > 0 ? clamped(0) : 0, hi = p.nseq > 0 ? clamped(p.nseq) : 0;
    const int64_t u0 = t0 - kH + j0;
    int i = p.nseq > 0 ? seq_at(cu, p.nseq, L, u0 < lo ? lo : u0) : 0;
    int64_t next = i + 1 <= p.nseq ? clamped(i + 1) : L;  // the end of sequence i
    for (int j = j0; j < j1; ++j) {
      const int64_t u = t0 - kH + j;
      while (u >= next && i + 1 < p.nseq) {  // the next sequences (empty ones stepped over)
        ++i;
        next = clamped(i + 1);
      }
      sq->lab[j] = u >= lo && u < hi && u < L ? i : -1;
    }
  }
  __syncwarp(active);
  uint32_t bits = 0u;
  for (int g = rank; g < kLabels / kUnroll; g += nact) {
    if (g * kUnroll + kUnroll - 1 + kH >= kLabels) break;
    const int l0 = sq->lab[g * kUnroll];
    bool one = l0 >= 0;
#pragma unroll
    for (int j = 1; j < kUnroll + kH; ++j) one = one && sq->lab[g * kUnroll + j] == l0;
    bits |= one ? 1u << g : 0u;
  }
  if (bits != 0u) atomicOr(&sq->plain, bits);
  __syncwarp(active);
}

// The walk of one thread over its slice (the lanes of a warp walk the same tokens in lockstep).
template <typename T, int kW, bool kSilu>
struct Walker {
  static constexpr int kC = Word<T>::kC;
  static constexpr int kH = kW - 1;
  WarpSmem* sm;
  const int* lab;  // the warp's sequence labels (SeqSmem::lab), with sequences
  int lane;
  const void* xq;  // x and dout of the next token to copy
  const void* dq;
  void* dxq;  // dx of the token kH steps behind
  TokenPitch pitch;
  float w[kW][kC], bias[kC];
  float xw[kH][kC], gw[kH][kC];  // x and g of the kH tokens before the current one
  float dw[kW + 1][kC];

  // Copy tokens first .. first + kBatch - 1 into buffer `buf` as one cp.async group; kChecked: those
  // past the row or the walk (i >= n_in) are zero-filled instead (so every stage a step reads was
  // written, and x = dout = 0 there: g = 0 past the row).
  template <bool kChecked>
  __device__ __forceinline__ void copy_batch(const int first, const int buf) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const bool full = !kChecked || first + j < sm->n_in;
      cp_async4<kChecked>(&sm->ring[buf * kBatch + j][0][lane], xq, full);
      cp_async4<kChecked>(&sm->ring[buf * kBatch + j][1][lane], dq, full);
      xq = advance(xq, pitch.x);
      dq = advance(dq, pitch.dout);
    }
    cp_async_commit();
  }

  // Step i: its token in ring stage `stage`.
  // kChecked: the step may lie at an end of the walk: past the slice (no dweight), before the slice
  // (no dx) or past the walk (nothing stored: the step's work is wasted, which costs less than
  // branching around it). Past the row x and dout are 0 (zero-filled copies), so g = 0 there.
  // kMasked (kernels with sequences): the taps and g terms between tokens of different sequences
  // are dropped and g is 0 on a token in none, by the labels lab[i .. i + kH] of tokens t - kH .. t.
  template <bool kChecked, bool kMasked>
  __device__ __forceinline__ void step(const int i, const int stage) {
    float xc[kC], dc[kC];
    Word<T>::load(sm->ring[stage][0][lane], xc);
    Word<T>::load(sm->ring[stage][1][lane], dc);
    const bool in_slice = !kChecked || i < sm->n_out;
    bool same_t[kH], same_q[kH];  // token t - kH + k shares t's sequence; token t - kH + m + 1 shares q's
    bool live = true;             // t lies in a sequence
    if constexpr (kMasked) {
      const int lt = lab[i + kH], lq = lab[i];
#pragma unroll
      for (int k = 0; k < kH; ++k) {
        same_t[k] = lab[i + k] == lt;
        same_q[k] = lab[i + k + 1] == lq;
      }
      live = lt >= 0;
    }
    float xm[kH][kC];  // the x window as token t sees it
#pragma unroll
    for (int k = 0; k < kH; ++k)
#pragma unroll
      for (int c = 0; c < kC; ++c) xm[k][c] = !kMasked || same_t[k] ? xw[k][c] : 0.f;

    float g[kC], gd[kC];  // g, and g where it counts for dweight / dbias
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      g[c] = dc[c];
      if constexpr (kSilu) {
        float z = bias[c];
#pragma unroll
        for (int k = 0; k < kH; ++k) z = fmaf(w[k][c], xm[k][c], z);
        z = fmaf(w[kH][c], xc[c], z);
        g[c] = grad_silu(g[c], z);
      }
      if constexpr (kMasked) g[c] = live ? g[c] : 0.f;
      gd[c] = in_slice ? g[c] : 0.f;
    }
#pragma unroll
    for (int c = 0; c < kC; ++c) {
#pragma unroll
      for (int k = 0; k < kH; ++k) dw[k][c] = fmaf(gd[c], xm[k][c], dw[k][c]);
      dw[kH][c] = fmaf(gd[c], xc[c], dw[kH][c]);
      dw[kW][c] += gd[c];
    }
    // dx at the token q kH steps behind: sum_m w[kH - m] * g[q + m] (masked: g of q's sequence only)
    float o[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      float acc = 0.f;
#pragma unroll
      for (int m = 0; m < kH; ++m) {
        const float gm = !kMasked || m == 0 || same_q[m - 1] ? gw[m][c] : 0.f;
        acc = fmaf(w[kH - m][c], gm, acc);
      }
      o[c] = fmaf(w[0][c], !kMasked || same_q[kH - 1] ? g[c] : 0.f, acc);
    }
    if constexpr (kChecked) {
      st_word_if(dxq, Word<T>::store(o), static_cast<unsigned>(i - kH) < static_cast<unsigned>(sm->n_out));
    } else {
      *static_cast<uint32_t*>(dxq) = Word<T>::store(o);
    }
    dxq = static_cast<char*>(dxq) + pitch.dx;
#pragma unroll
    for (int c = 0; c < kC; ++c) {
#pragma unroll
      for (int m = 0; m + 1 < kH; ++m) {
        xw[m][c] = xw[m + 1][c];
        gw[m][c] = gw[m + 1][c];
      }
      xw[kH - 1][c] = xc[c];
      gw[kH - 1][c] = g[c];
    }
  }

  // Steps i0 .. i0 + kUnroll - 1 (i0 a multiple of kUnroll): per batch, first the copy of the batch
  // kBufs - 1 ahead into the buffer the previous batch freed, then the wait for this batch (kBufs - 1
  // younger groups may still be in flight), then its steps.
  template <bool kChecked, bool kMasked>
  __device__ __forceinline__ void group(const int i0) {
#pragma unroll
    for (int h = 0; h < kUnroll / kBatch; ++h) {
      const int ib = i0 + h * kBatch;
      const int m = ib / kBatch;
      copy_batch<kChecked>(ib + (kBufs - 1) * kBatch, (m + kBufs - 1) % kBufs);
      cp_async_wait<kBufs - 1>();
#pragma unroll
      for (int j = 0; j < kBatch; ++j) step<kChecked, kMasked>(ib + j, (m % kBufs) * kBatch + j);
    }
  }
};

// kSeq: with sequences (seq_idx or cu_seqlens; sq the warp's labels).
template <typename T, int kW, bool kSilu, bool kSeq>
__device__ __forceinline__ void walk(const ConvParams& p, const TokenPitch& pitch, WarpSmem* sm, SeqSmem* sq,
                                     const int lane, const int b, const int c0, const int64_t t0, const int T_slice,
                                     float (&dw)[kW + 1][Word<T>::kC]) {
  using Wk = Walker<T, kW, kSilu>;
  constexpr int kC = Wk::kC;
  constexpr int kH = Wk::kH;
  Wk s;
  s.sm = sm;
  s.lab = kSeq ? sq->lab : nullptr;
  s.lane = lane;
  s.pitch = pitch;
  const int64_t left = p.seqlen - t0;  // > 0 (caller)
  unsigned active;
  {
    const int n_out = left < T_slice ? static_cast<int>(left) : T_slice;
    const int n_in = left < T_slice + kH ? static_cast<int>(left) : T_slice + kH;
    // the same values for every lane of the warp (the lanes walk the same tokens): the first active
    // lane writes them, the others read them after the warp barrier (racecheck flagged every lane
    // writing the word that the other lanes read, although the values were equal)
    active = __activemask();  // the lanes with a word inside the row (the caller's test)
    if (lane == __ffs(active) - 1) {
      sm->n_out = n_out;
      sm->n_in = n_in;
      sm->n_fast = n_out < n_in - (kStages - kBatch) ? n_out : n_in - (kStages - kBatch);
      sm->steps = n_out + kH;  // the last dx (token t0 + n_out - 1) completes at step n_out - 1 + kH
    }
    __syncwarp(active);
  }

  const int64_t x0 = static_cast<int64_t>(b) * p.x_bs + c0 + t0 * p.x_ls;
  s.xq = static_cast<const T*>(p.x) + x0;
  s.dq = static_cast<const T*>(p.dout) + (static_cast<int64_t>(b) * p.do_bs + c0 + t0 * p.do_ls);
  s.dxq = static_cast<T*>(p.dx) + (static_cast<int64_t>(b) * p.dx_bs + c0 + (t0 - kH) * p.dx_ls);

  // every load before any use: the ring's first kBufs - 1 batches (tokens t0 ..), then the x window
  // before the slice (tokens t0 - kH .. t0 - 1; zero before the row: no initial_states here)
#pragma unroll
  for (int m = 0; m + 1 < kBufs; ++m) s.template copy_batch<true>(m * kBatch, m);
  uint32_t xh[kH];
#pragma unroll
  for (int m = 0; m < kH; ++m) {
    xh[m] = 0u;
    if (t0 - kH + m >= 0) xh[m] = ld_word(static_cast<const T*>(p.x) + (x0 - (kH - m) * p.x_ls));
  }
  if constexpr (kSeq) fill_labels<kH>(p, b, t0, active, sq);  // while the copies are in flight
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    float wc[kW];
    load_weights_exact<kW>(p, c0 + c, wc);
#pragma unroll
    for (int k = 0; k < kW; ++k) s.w[k][c] = wc[k];
    s.bias[c] = p.bias != nullptr ? load_any(p.bias, p.b_dtype, (c0 + c) * p.b_s) : 0.f;
  }
#pragma unroll
  for (int m = 0; m < kH; ++m) {
    Word<T>::load(xh[m], s.xw[m]);
#pragma unroll
    for (int c = 0; c < kC; ++c) s.gw[m][c] = 0.f;
  }
#pragma unroll
  for (int k = 0; k <= kW; ++k)
#pragma unroll
    for (int c = 0; c < kC; ++c) s.dw[k][c] = 0.f;

  // the first group (no dx for steps < kH: it would lie before the slice), whole groups of interior
  // steps (inside the slice, every copy inside the row and the walk), then the checked rest (the last
  // steps inside the slice, and the kH steps after it that complete its last dx)
  s.template group<true, kSeq>(0);
  int i0 = kUnroll;
  for (; i0 + kUnroll <= sm->n_fast; i0 += kUnroll) {
    if (!kSeq || (sq->plain >> (i0 / kUnroll)) & 1u) {
      s.template group<false, false>(i0);
    } else {
      s.template group<false, kSeq>(i0);  // a sequence boundary (or a token in none) among its steps
    }
  }
  for (; i0 < sm->steps; i0 += kUnroll) s.template group<true, kSeq>(i0);
  cp_async_wait<0>();  // nothing is left in flight (every copied token was consumed): for form's sake
#pragma unroll
  for (int k = 0; k <= kW; ++k)
#pragma unroll
    for (int c = 0; c < kC; ++c) dw[k][c] = s.dw[k][c];
}

// blockIdx.x, read again where it is used (asm volatile: not merged with the read at the kernel's start,
// so the block coordinates need not stay live in registers across the walk).
__device__ __forceinline__ uint32_t block_index() {
  uint32_t v;
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(v));
  return v;
}

template <typename T, int kW, bool kSeq>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    bwd_cl_fast_kernel(const ConvParams p, const TokenPitch pitch, const uint32_t nwb, const uint32_t ntb,
                       const int T_slice) {
  constexpr int kC = Word<T>::kC;
  pdl_trigger();  // the reduce after this kernel may be launched now (launch_bwd_fast_reduce)
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const uint32_t bid = block_index();
  const uint32_t rest = bid / nwb;  // b * ntb + tb: the partial row set of this block
  const uint32_t wb = bid - rest * nwb;  // word block (fastest: neighbouring blocks share token rows)
  const uint32_t bu = rest / ntb;
  const uint32_t tb = rest - bu * ntb;  // token block
  const int b = static_cast<int>(bu);
  const int D = p.dim;
  const int c0 = (static_cast<int>(wb) * 32 + lane) * kC;  // first channel of this thread's word
  const int64_t t0 = (static_cast<int64_t>(tb) * kWarps + warp) * T_slice;

  float dw[kW + 1][kC];
#pragma unroll
  for (int k = 0; k <= kW; ++k)
#pragma unroll
    for (int c = 0; c < kC; ++c) dw[k][c] = 0.f;
  // the warps' rings, then (after a barrier) the dweight / dbias reduction, in the same shared memory
  using Red = float[kWarps][32 * kC];  // [warp][channel of the block] for one of the kW + 1 sums
  static_assert(sizeof(Red) * (kW + 1) <= sizeof(WarpSmem) * kWarps, "the reduction fits in the rings");
  __shared__ alignas(16) WarpSmem wsm[kWarps];
  SeqSmem* sq = nullptr;
  if constexpr (kSeq) {
    __shared__ SeqSmem ssm[kWarps];
    sq = &ssm[warp];
  }
  if (c0 < D && t0 < p.seqlen) {  // D is a multiple of kC (eligible()): the whole word is inside
    if (p.silu) {
      walk<T, kW, true, kSeq>(p, pitch, &wsm[warp], sq, lane, b, c0, t0, T_slice, dw);
    } else {
      walk<T, kW, false, kSeq>(p, pitch, &wsm[warp], sq, lane, b, c0, t0, T_slice, dw);
    }
  }
  __syncthreads();  // every warp is done with its ring (and has no copy in flight)

  // the block's sums over its kWarps slices, fixed order; one partial row set per block
  Red* red = reinterpret_cast<Red*>(&wsm[0]);
#pragma unroll
  for (int k = 0; k <= kW; ++k)
#pragma unroll
    for (int c = 0; c < kC; ++c) red[k][warp][lane * kC + c] = dw[k][c];
  __syncthreads();
  const int rows = p.dbias != nullptr ? kW + 1 : kW;
  const uint32_t bid2 = block_index();
  const uint32_t part = bid2 / nwb;
  const int d0 = static_cast<int>(bid2 - part * nwb) * 32 * kC;
  for (int idx = threadIdx.x; idx < rows * 32 * kC; idx += kThreads) {
    const int k = idx / (32 * kC);
    const int cc = idx - k * (32 * kC);
    const int d = d0 + cc;
    if (d >= D) continue;
    float s = red[k][0][cc];
#pragma unroll
    for (int y = 1; y < kWarps; ++y) s += red[k][y][cc];
    p.partial[(static_cast<int64_t>(part) * (kW + 1) + k) * D + d] = s;
  }
}

int channels_per_word(int x_dtype) { return x_dtype == kFloat32 ? 1 : 2; }

struct Geometry {
  int64_t nwb = 0;     // word blocks (32 words each) along the channels
  int64_t ntb = 0;     // token blocks (kWarps slices each) per batch row
  int64_t T = 0;       // tokens per slice
  int64_t blocks = 0;  // nwb * ntb * batch
};

Geometry geometry(const ConvParams& p) {
  Geometry g;
  const int64_t L = p.seqlen;
  g.nwb = (p.dim / channels_per_word(p.x_dtype) + 31) / 32;
  auto slice = [&](int64_t ntb) { return (L + ntb * kWarps - 1) / (ntb * kWarps); };
  int64_t ntb = (L + kWarps * kTmax - 1) / (kWarps * kTmax);
  // fewer blocks than one resident wave (4 per SM): shorter slices, more threads with loads in flight
  const int64_t wave = static_cast<int64_t>(p.num_sms) * kMinBlocks;
  while (slice(ntb) > kTmin && g.nwb * ntb * p.batch < wave) ntb *= 2;
  g.T = slice(ntb);
  g.ntb = (L + kWarps * g.T - 1) / (kWarps * g.T);  // no block without tokens
  g.blocks = g.nwb * g.ntb * p.batch;
  return g;
}


}  // namespace

namespace bwd_cl_fast {

// On unless CAUSAL_CONV1D_BWD_CL_FAST is off.
bool eligible(const ConvParams& p) {
  if (!p.channel_last || p.x_cs != 1 || p.do_cs != 1 || p.dx_cs != 1) return false;
  if (p.init != nullptr || p.dfinal != nullptr || p.dinit != nullptr) return false;
  if (p.cu_seqlens != nullptr && (p.batch != 1 || p.seq_idx != nullptr)) return false;
  if (p.width < 2 || p.width > 4 || p.batch <= 0 || p.dim <= 0 || p.seqlen <= 0) return false;
  if (p.x_dtype != kFloat32 && p.x_dtype != kFloat16 && p.x_dtype != kBFloat16) return false;
  if (p.dweight == nullptr) return false;
  if (!aligned_to(p.x, 4) || !aligned_to(p.dout, 4) || !aligned_to(p.dx, 4)) return false;
  const int64_t kc = channels_per_word(p.x_dtype);
  // 16-bit x: every (batch, token) row starts on a 4-byte word and ends with a whole word
  if (p.dim % kc != 0) return false;
  if (p.seqlen > 1 && (p.x_ls % kc != 0 || p.do_ls % kc != 0 || p.dx_ls % kc != 0)) return false;
  if (p.batch > 1 && (p.x_bs % kc != 0 || p.do_bs % kc != 0 || p.dx_bs % kc != 0)) return false;
  // token pitches in bytes fit 32 bits (TokenPitch); the block index and its divisions are 32-bit
  const int64_t es = p.x_dtype == kFloat32 ? 4 : 2;
  const int64_t max_pitch = 0xffffffffLL / es;
  if (p.x_ls < 0 || p.x_ls > max_pitch || p.do_ls < 0 || p.do_ls > max_pitch || p.dx_ls < 0 || p.dx_ls > max_pitch)
    return false;
  return geometry(p).blocks <= 0x7fffffffLL;
}

// One partial row set per (batch, token block).
int64_t num_parts(const ConvParams& p) { return static_cast<int64_t>(p.batch) * geometry(p).ntb; }

void launch(const ConvParams& p, cudaStream_t stream) {
  const Geometry g = geometry(p);
  dispatch_dtype_width(p.x_dtype, p.width, Widths<2, 3, 4>{}, [&](auto tag, auto width) {
    using T = typename decltype(tag)::type;
    const TokenPitch pitch{static_cast<uint32_t>(p.x_ls * static_cast<int64_t>(sizeof(T))),
                           static_cast<uint32_t>(p.do_ls * static_cast<int64_t>(sizeof(T))),
                           static_cast<uint32_t>(p.dx_ls * static_cast<int64_t>(sizeof(T)))};
    const unsigned blocks = static_cast<unsigned>(g.blocks);
    const uint32_t nwb = static_cast<uint32_t>(g.nwb), ntb = static_cast<uint32_t>(g.ntb);
    if (p.seq_idx != nullptr || p.cu_seqlens != nullptr) {
      bwd_cl_fast_kernel<T, decltype(width)::value, true>
          <<<blocks, kThreads, 0, stream>>>(p, pitch, nwb, ntb, static_cast<int>(g.T));
    } else {
      bwd_cl_fast_kernel<T, decltype(width)::value, false>
          <<<blocks, kThreads, 0, stream>>>(p, pitch, nwb, ntb, static_cast<int>(g.T));
    }
    CC1D_CUDA_LAUNCH_CHECK();
  });
  launch_bwd_fast_reduce(p, static_cast<int64_t>(p.batch) * g.ntb, stream);  // num_parts(p), from g
}

}  // namespace bwd_cl_fast

// The packed backward without states on this path: the packed row as a batch of one with its
// cu_seqlens (the labels above), dweight / dbias through the same partial rows and reduce.
namespace packed_bwd_cl_fast {
namespace {
ConvParams conv_params(const PackedBwdParams& q) {
  ConvParams p;
  p.batch = 1;
  p.dim = q.dim;
  p.width = q.width;
  p.seqlen = q.total;
  p.x_dtype = q.x_dtype;
  p.w_dtype = q.w_dtype;
  p.b_dtype = q.b_dtype;
  p.silu = q.silu;
  p.x = q.x;
  p.x_cs = q.x_cs;
  p.x_ls = q.x_ts;
  p.weight = q.weight;
  p.w_cs = q.w_cs;
  p.w_ws = q.w_ws;
  p.bias = q.bias;
  p.b_s = q.b_s;
  p.dout = q.dout;
  p.do_cs = q.do_cs;
  p.do_ls = q.do_ts;
  p.dx = q.dx;
  p.dx_cs = q.dx_cs;
  p.dx_ls = q.dx_ts;
  p.dweight = q.dweight;
  p.dbias = q.dbias;
  p.partial = q.partial;
  p.nparts = q.nparts;
  p.channel_last = q.channel_last;
  p.pdl = q.pdl;
  p.num_sms = q.num_sms;
  p.cu_seqlens = q.cu;
  p.nseq = q.nseq;
  return p;
}
}  // namespace

bool eligible(const PackedBwdParams& q) {
  return q.channel_last && q.init == nullptr && q.dfinal == nullptr && q.dinit == nullptr &&
         bwd_cl_fast::eligible(conv_params(q));
}

int64_t num_parts(const PackedBwdParams& q) { return bwd_cl_fast::num_parts(conv_params(q)); }

void launch(const PackedBwdParams& q, cudaStream_t stream) { bwd_cl_fast::launch(conv_params(q), stream); }
}  // namespace packed_bwd_cl_fast

}  // namespace causal_conv1d_cuda
