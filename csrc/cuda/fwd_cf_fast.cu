// Fast channel-first forward: out[l] = act(bias + sum_k w[k] * x[l - (width-1) + k]) per row.
//
// Why (docs/PERF_NOTES.md, "fwd cf fast path"): the general kernel (fwd.cu) keeps too few bytes in
// flight per SM (DRAM ~42% of peak at ~47% occupancy). Here every thread loads kVecs 16-byte
// vectors and issues all of its global loads before using any of them, so each resident thread has
// kVecs * 16 bytes outstanding, with no shared memory and no pipeline state.
//
// Work split: a warp owns 32 * kVecs consecutive 16-byte vectors of one row (row = b * dim + d;
// wpr = ceil(L / (32 * kVecs * kPer)) warps per row, a flattened 1-D grid of warps). Lane i owns
// vectors i, 32 + i, 64 + i, ... of the warp's span, so each warp-wide load or store instruction
// moves 512 contiguous bytes (fully coalesced, every sector used by one instruction).
// Halo (the width-1 tokens before a vector): the tail of the previous lane's same vector, by a warp
// shuffle; lane 0 takes lane 31's previous vector, and for the first vector reads the kH tokens
// before the warp itself: from x (an L2 hit: the neighbouring warp reads the same sector), from
// initial_states before the start of the row, or zero.
// Eligible: channel-first, no seq_idx, width 2..4, every row of x and out 16-byte aligned and
// seqlen a multiple of the vector width (so each vector is wholly inside or wholly past the row).
// Everything else returns false and runs the general kernel.
#include <c10/cuda/CUDAException.h>

#include "bulk_ring.cuh"
#include "fwd_cf_fast.cuh"
#include "vec16.cuh"

namespace causal_conv1d_cuda {
namespace {

// 16-byte vectors per thread, kVecs (bytes in flight per thread = 16 * kVecs): 8 for rows of 16-bit
// types that fill warps of 8 (L >= 2048), else 4. Measured on the H200 (bf16 B4 D4096 L4096 width 4,
// silu): kVecs 2 / 4 / 8 -> 83.8 / 75.3 / 72.6 us; 7B B1 L8192 D10240: 101.1 (4) / 88.3 (8) us; the
// small row B16 D1024 L512: 10.9 / 11.1 / 24.5 us in a CUDA graph (8 leaves 3/4 of the lanes past a
// 512-token row); fp32 B4 D4096 L4096: 130.8 / 133.2 / 133.7 us (already at the memory floor).
constexpr int kThreads = 128;
// Resident blocks per SM the register budget must allow (sm_90, 64K registers): kVecs 4 -> <= 48
// registers, 1280 threads, 80 KB of loads in flight per SM; kVecs 8 -> <= 64 registers, 1024 threads,
// 128 KB; no spills in any instantiation.
constexpr int min_blocks(int vecs) { return vecs == 2 ? 12 : (vecs == 4 ? 10 : 8); }

__device__ __forceinline__ float silu_fast(float z) { return __fdividef(z, 1.f + __expf(-z)); }

template <typename T, int kW, int kVecs>
__global__ void __launch_bounds__(kThreads, min_blocks(kVecs))
    fwd_cf_fast_kernel(const ConvParams p, const int64_t wpr, const int64_t nwarps) {
  constexpr int kPer = Vec16<T>::kPer;
  constexpr int kH = kW - 1;
  static_assert(kPer >= kH, "the halo must fit in the previous lane's vector");

  const int lane = threadIdx.x & 31;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  if (gw >= nwarps) return;  // warp-uniform
  int64_t wr;  // warp index within its row
  int b, d;
  if (nwarps <= 0xffffffffLL) {  // uniform: 32-bit divisions (a 64-bit one is a long call)
    const uint32_t r = static_cast<uint32_t>(gw) / static_cast<uint32_t>(wpr);
    const uint32_t bb = r / static_cast<uint32_t>(p.dim);
    wr = static_cast<uint32_t>(gw) - r * static_cast<uint32_t>(wpr);
    b = static_cast<int>(bb);
    d = static_cast<int>(r - bb * static_cast<uint32_t>(p.dim));
  } else {
    const int64_t row = gw / wpr;
    wr = gw - row * wpr;
    b = static_cast<int>(row / p.dim);
    d = static_cast<int>(row - static_cast<int64_t>(b) * p.dim);
  }
  const int64_t L = p.seqlen;
  // this warp's tokens: [w0, w0 + 32 * kVecs * kPer); vector v of this lane starts at lane_l0 + v * 32 * kPer
  const int64_t w0 = wr * (32 * kVecs * kPer);
  const int64_t lane_l0 = w0 + lane * kPer;
  const T* __restrict__ xr = static_cast<const T*>(p.x) + b * p.x_bs + d * p.x_cs;
  T* __restrict__ outr = static_cast<T*>(p.out) + b * p.out_bs + d * p.out_cs;

  // 1. every global load of this thread, before any use (each warp instruction: 512 contiguous bytes)
  uint4 raw[kVecs];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t lv = lane_l0 + v * (32 * kPer);
    raw[v] = lv < L ? __ldg(reinterpret_cast<const uint4*>(xr + lv)) : make_uint4(0u, 0u, 0u, 0u);
  }
  // lane 0: the kH tokens before the warp (x, initial_states before the row start, or zero)
  float halo[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) halo[j] = 0.f;
  if (lane == 0) {
    if (w0 > 0) {  // w0 >= 32 * kPer > kH: all inside the row
#pragma unroll
      for (int j = 0; j < kH; ++j) halo[j] = to_float(__ldg(xr + w0 - kH + j));
    } else if (p.init != nullptr) {  // before the row: initial_states[b, d, 0 .. kH-1]
      const T* __restrict__ ir = static_cast<const T*>(p.init) + b * p.i_bs + d * p.i_cs;
#pragma unroll
      for (int j = 0; j < kH; ++j) halo[j] = to_float(ir[j * p.i_ls]);
    }
  }
  float w[kW];
  load_weights_exact<kW>(p, d, w);
  const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, d * p.b_s) : 0.f;

  // final_states[b, d, j] = token L - kH + j: the lane whose vector ends at L holds them
  // (L >= kPer >= kH) and writes them from its window below.
  T* __restrict__ fin = p.final_out != nullptr && wr == wpr - 1
                            ? static_cast<T*>(p.final_out) + b * p.f_bs + d * p.f_cs
                            : nullptr;

  // 2. per vector: halo from the previous lane's same vector (lane 0: lane 31's previous vector,
  //    or the loaded halo for the first vector), then compute and store 16 bytes
  const bool silu = p.silu;
  float prev_tail[kH];  // this lane's last kH tokens of the previous vector
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    float xv[kPer];
    Vec16<T>::load(raw[v], xv);
    float win[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      if (v == 0) {
        const float s = __shfl_up_sync(0xffffffffu, xv[kPer - kH + j], 1);
        win[j] = lane == 0 ? halo[j] : s;
      } else {
        // lane 31 hands its previous vector's tail to lane 0; every other lane its current tail
        win[j] = __shfl_sync(0xffffffffu, lane == 31 ? prev_tail[j] : xv[kPer - kH + j], (lane + 31) & 31);
      }
    }
    float o[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      float acc = bias;
#pragma unroll
      for (int k = 0; k < kH; ++k) acc = fmaf(w[k], win[k], acc);
      acc = fmaf(w[kH], xv[i], acc);
#pragma unroll
      for (int k = 0; k + 1 < kH; ++k) win[k] = win[k + 1];
      win[kH - 1] = xv[i];
      o[i] = silu ? silu_fast(acc) : acc;
    }
    const int64_t lv = lane_l0 + v * (32 * kPer);
    if (lv < L) st_global_16(outr + lv, Vec16<T>::store(o));
    if (fin != nullptr && lv + kPer == L) {  // win now holds tokens L - kH .. L - 1
#pragma unroll
      for (int j = 0; j < kH; ++j) fin[j * p.f_ls] = from_float<T>(win[j]);  // exact: win came from T
    }
#pragma unroll
    for (int j = 0; j < kH; ++j) prev_tail[j] = win[j];
  }
}

template <typename T, int kW, int kVecs>
bool launch_v(const ConvParams& p, cudaStream_t stream) {
  constexpr int64_t kPerWarp = 32 * kVecs * (16 / static_cast<int64_t>(sizeof(T)));
  const int64_t wpr = (p.seqlen + kPerWarp - 1) / kPerWarp;  // warps per row
  const int64_t nwarps = wpr * p.batch * p.dim;
  const int64_t blocks = (nwarps + kThreads / 32 - 1) / (kThreads / 32);
  if (blocks > 0x7fffffffLL) return false;
  fwd_cf_fast_kernel<T, kW, kVecs><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, wpr, nwarps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// ---- Walking variant (issue 16) --------------------------------------------------------------
// Upstream's forward runs at full occupancy (2048 threads per SM, 16 bytes per thread in flight)
// and amortises its per-row setup over the whole row. This one does the same without its shared
// memory exchange and barriers: a warp walks `steps` consecutive 512-byte steps of one row (lane i:
// 16-byte vector i of each step), the load of step s + kAhead issued before step s is computed (a
// register ring: kAhead + 1 vectors per lane), halos by shuffles as in fwd_cf_fast_kernel (lane 0
// takes lane 31's tail of the previous step). Same arithmetic per output: bit-identical outputs.
#ifndef CAUSAL_CONV1D_FWD_WALK_AHEAD
#define CAUSAL_CONV1D_FWD_WALK_AHEAD 1
#endif
#ifndef CAUSAL_CONV1D_FWD_WALK_MIN_BLOCKS
#define CAUSAL_CONV1D_FWD_WALK_MIN_BLOCKS 12
#endif
constexpr int kWalkAhead = CAUSAL_CONV1D_FWD_WALK_AHEAD;

template <typename T, int kW>
__global__ void __launch_bounds__(kThreads, CAUSAL_CONV1D_FWD_WALK_MIN_BLOCKS)
    fwd_cf_walk_kernel(const ConvParams p, const FastDiv wpr, const FastDiv dim, const uint32_t nwarps,
                       const int steps) {
  constexpr int kPer = Vec16<T>::kPer;
  constexpr int kH = kW - 1;
  constexpr int kStep = 32 * kPer;  // tokens per step
  static_assert(kPer >= kH, "the halo must fit in the previous lane's vector");

  const int lane = threadIdx.x & 31;
  const uint32_t gw = blockIdx.x * (kThreads / 32) + (threadIdx.x >> 5);
  if (gw >= nwarps) return;  // warp-uniform
  const uint32_t row = wpr.div(gw);
  const uint32_t wr = gw - row * wpr.d;
  const uint32_t bu = dim.div(row);
  const int b = static_cast<int>(bu);
  const int d = static_cast<int>(row - bu * dim.d);
  const int64_t L = p.seqlen;
  const int64_t w0 = static_cast<int64_t>(wr) * steps * kStep;
  // this lane's vector of step s starts at token lane_l0 + s * kStep
  const int64_t lane_l0 = w0 + lane * kPer;
  const T* __restrict__ xl = static_cast<const T*>(p.x) + b * p.x_bs + d * p.x_cs + lane_l0;
  T* __restrict__ ol = static_cast<T*>(p.out) + b * p.out_bs + d * p.out_cs + lane_l0;
  // steps of this lane inside the row (L is a multiple of kPer)
  const int64_t rem = L - lane_l0;
  const int nin = rem <= 0 ? 0 : (rem >= static_cast<int64_t>(steps) * kStep ? steps : static_cast<int>((rem + kStep - 1) / kStep));

  uint4 ring[kWalkAhead + 1];
#pragma unroll
  for (int a = 0; a < kWalkAhead; ++a)
    ring[a] = a < nin ? __ldg(reinterpret_cast<const uint4*>(xl + a * kStep)) : make_uint4(0u, 0u, 0u, 0u);
  float halo[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) halo[j] = 0.f;
  if (lane == 0) {
    if (w0 > 0) {
      const T* __restrict__ xr = xl - lane_l0;
#pragma unroll
      for (int j = 0; j < kH; ++j) halo[j] = to_float(__ldg(xr + w0 - kH + j));
    } else if (p.init != nullptr) {
      const T* __restrict__ ir = static_cast<const T*>(p.init) + b * p.i_bs + d * p.i_cs;
#pragma unroll
      for (int j = 0; j < kH; ++j) halo[j] = to_float(ir[j * p.i_ls]);
    }
  }
  float w[kW];
  load_weights_exact<kW>(p, d, w);
  const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, d * p.b_s) : 0.f;
  const bool silu = p.silu;
  // final_states: written by the lane whose vector ends at L, at that step
  const int fin_s = p.final_out != nullptr && wr == wpr.d - 1 && rem > 0 && (rem - kPer) % kStep == 0
                        ? static_cast<int>((rem - kPer) / kStep)
                        : -1;

  // lane 0 takes its step-0 halo from lane 31's prev_tail: every lane starts with lane 0's halo
  float prev_tail[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) prev_tail[j] = __shfl_sync(0xffffffffu, halo[j], 0);
  // kWalkAhead + 1 steps per trip of the loop (unrolled), so the ring's slots are compile-time
  for (int s0 = 0; s0 < steps; s0 += kWalkAhead + 1) {
#pragma unroll
    for (int u = 0; u <= kWalkAhead; ++u) {
      const int s = s0 + u;
      if (s >= steps) break;  // warp-uniform
      // the load kWalkAhead steps ahead goes into the slot that step s - 1 freed
      {
        const int sa = s + kWalkAhead;
        ring[(u + kWalkAhead) % (kWalkAhead + 1)] =
            sa < nin ? __ldg(reinterpret_cast<const uint4*>(xl + sa * kStep)) : make_uint4(0u, 0u, 0u, 0u);
      }
      float xv[kPer];
      Vec16<T>::load(ring[u], xv);
      float win[kH];
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        // lane i takes lane i-1's tail of this step; lane 0 lane 31's tail of the previous step
        // (for the first step: prev_tail = the halo loaded above)
        win[j] = __shfl_sync(0xffffffffu, lane == 31 ? prev_tail[j] : xv[kPer - kH + j], (lane + 31) & 31);
      }
      float o[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        float acc = bias;
#pragma unroll
        for (int k = 0; k < kH; ++k) acc = fmaf(w[k], win[k], acc);
        acc = fmaf(w[kH], xv[i], acc);
#pragma unroll
        for (int k = 0; k + 1 < kH; ++k) win[k] = win[k + 1];
        win[kH - 1] = xv[i];
        o[i] = silu ? silu_fast(acc) : acc;
      }
      if (s < nin) st_global_16(ol + s * kStep, Vec16<T>::store(o));
      if (s == fin_s) {
        T* __restrict__ fin = static_cast<T*>(p.final_out) + b * p.f_bs + d * p.f_cs;
#pragma unroll
        for (int j = 0; j < kH; ++j) fin[j * p.f_ls] = from_float<T>(win[j]);
      }
#pragma unroll
      for (int j = 0; j < kH; ++j) prev_tail[j] = win[j];
    }
  }
}

// Steps per warp (CAUSAL_CONV1D_FWD_WALK_STEPS, default 8) and the switch
// (CAUSAL_CONV1D_FWD_WALK: 1 = use it for 16-bit rows of >= 2048 tokens; default 0 while measured).
int fwd_walk_steps() {
  static const int s = [] {
    const int v = env_int("CAUSAL_CONV1D_FWD_WALK_STEPS", 8);
    return v < 1 ? 1 : (v > 64 ? 64 : v);
  }();
  return s;
}
bool fwd_walk_enabled() {
  static const bool on = env_int("CAUSAL_CONV1D_FWD_WALK", 0) == 1;
  return on;
}

template <typename T, int kW>
bool launch_walk(const ConvParams& p, cudaStream_t stream) {
  constexpr int64_t kStepTok = 32 * (16 / static_cast<int64_t>(sizeof(T)));
  const int64_t nsteps = (p.seqlen + kStepTok - 1) / kStepTok;
  const int64_t steps = nsteps < fwd_walk_steps() ? nsteps : fwd_walk_steps();
  const int64_t wpr = (nsteps + steps - 1) / steps;
  const int64_t nwarps = wpr * p.batch * p.dim;
  if (nwarps + kThreads > 0x7fffffffLL || p.dim > 0x7fffffff) return false;
  const int64_t blocks = (nwarps + kThreads / 32 - 1) / (kThreads / 32);
  fwd_cf_walk_kernel<T, kW><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      p, FastDiv(static_cast<uint32_t>(wpr)), FastDiv(static_cast<uint32_t>(p.dim)), static_cast<uint32_t>(nwarps),
      static_cast<int>(steps));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// ---- Bulk-copy variant (sm_90+; issue 16) ----------------------------------------------------
// The same warp segments and the same arithmetic per output as fwd_cf_fast_kernel (bit-identical
// outputs), but x reaches the warp through a ring of `stages` shared-memory stages filled by one
// `cp.async.bulk` per segment (lane 0 issues it; the copy engine moves the bytes; completion on the
// stage's mbarrier). A persistent grid: warp j of the grid walks segments j, j + nw, j + 2 nw, ...
// (nw = warps in the grid), so while it computes one segment, the next stages - 1 are in flight
// without holding a register (the register-only kernel has 128 B per thread in flight only during
// its load phase; each of its warps computes with nothing outstanding). Each stage = a 16-byte
// halo slot (the 16 bytes before the segment: lane 0's x halo, copied with the segment when the
// segment does not start the row) + the segment's 32 * kBulkVecs 16-byte vectors.
constexpr int kBulkVecs = 4;                        // vectors per lane per segment (2 KB per warp)
constexpr int kBulkStageBytes = 16 + 32 * kBulkVecs * 16;
constexpr int kBulkMinBlocks = 8;                   // 128 threads x 8: <= 64 registers
__host__ __device__ constexpr int bulk_bar_bytes(int stages) { return 16 * ((stages * 8 + 15) / 16); }
__host__ __device__ constexpr int bulk_warp_bytes(int stages) { return bulk_bar_bytes(stages) + stages * kBulkStageBytes; }

template <typename T, int kW>
__global__ void __launch_bounds__(kThreads, kBulkMinBlocks)
    fwd_cf_bulk_kernel(const ConvParams p, const FastDiv wpr, const FastDiv dim, const uint32_t nwarps,
                       const int stages) {
#ifdef CAUSAL_CONV1D_BULK_DEVICE
  constexpr int kPer = Vec16<T>::kPer;
  constexpr int kH = kW - 1;
  constexpr int kVecs = kBulkVecs;
  constexpr int kSegTok = 32 * kVecs * kPer;
  static_assert(kPer >= kH, "the halo must fit in the previous lane's vector");
  extern __shared__ __align__(16) unsigned char smem[];

  const int lane = threadIdx.x & 31;
  const int wib = threadIdx.x >> 5;
  const uint32_t step = gridDim.x * (kThreads / 32);
  const uint32_t first = blockIdx.x * (kThreads / 32) + wib;
  if (first >= nwarps) return;  // warp-uniform; nothing below synchronises more than this warp
  unsigned char* region = smem + wib * bulk_warp_bytes(stages);
  uint64_t* bars = reinterpret_cast<uint64_t*>(region);
  unsigned char* stage0 = region + bulk_bar_bytes(stages);
  const int64_t L = p.seqlen;

  // lane 0: the copy of segment g into stage s (with the 16 bytes before it unless it starts the row)
  auto issue = [&](uint32_t g, int s) {
    const uint32_t row = wpr.div(g);
    const uint32_t wr = g - row * wpr.d;
    const uint32_t bu = dim.div(row);
    const int64_t w0 = static_cast<int64_t>(wr) * kSegTok;
    const T* xr = static_cast<const T*>(p.x) + static_cast<int64_t>(bu) * p.x_bs +
                  static_cast<int64_t>(row - bu * dim.d) * p.x_cs;
    const int64_t n = L - w0 < kSegTok ? L - w0 : kSegTok;  // a multiple of kPer (launcher)
    const int64_t h = w0 > 0 ? kPer : 0;
    const uint32_t bytes = static_cast<uint32_t>((n + h) * static_cast<int64_t>(sizeof(T)));
    uint64_t* bar = bars + s;
    bulk::expect_tx(bar, bytes);
    bulk::copy(stage0 + s * kBulkStageBytes + 16 - h * static_cast<int64_t>(sizeof(T)), xr + w0 - h, bytes, bar);
  };
  if (lane == 0) {
    bulk::init(bars, stages);
    for (int s = 0; s < stages; ++s) {
      const uint32_t g = first + static_cast<uint32_t>(s) * step;
      if (g < nwarps) issue(g, s);
    }
  }
  __syncwarp();

  const bool silu = p.silu;
  int s = 0;
  uint32_t parity = 0;
  for (uint32_t gw = first; gw < nwarps; gw += step) {
    const uint32_t row = wpr.div(gw);
    const uint32_t wr = gw - row * wpr.d;
    const uint32_t bu = dim.div(row);
    const int b = static_cast<int>(bu);
    const int d = static_cast<int>(row - bu * dim.d);
    const int64_t w0 = static_cast<int64_t>(wr) * kSegTok;
    const int64_t lane_l0 = w0 + lane * kPer;
    T* __restrict__ outr = static_cast<T*>(p.out) + b * p.out_bs + d * p.out_cs;
    // the global loads of this segment (weights, bias, initial_states) go out before the wait
    float w[kW];
    load_weights_exact<kW>(p, d, w);
    const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, d * p.b_s) : 0.f;
    float halo[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) halo[j] = 0.f;
    if (lane == 0 && w0 == 0 && p.init != nullptr) {  // before the row: initial_states[b, d, 0 .. kH-1]
      const T* __restrict__ ir = static_cast<const T*>(p.init) + b * p.i_bs + d * p.i_cs;
#pragma unroll
      for (int j = 0; j < kH; ++j) halo[j] = to_float(ir[j * p.i_ls]);
    }
    T* __restrict__ fin = p.final_out != nullptr && wr == wpr.d - 1
                              ? static_cast<T*>(p.final_out) + b * p.f_bs + d * p.f_cs
                              : nullptr;

    bulk::wait(bars + s, parity);
    const unsigned char* buf = stage0 + s * kBulkStageBytes + 16;
    if (lane == 0 && w0 > 0) {  // the kH tokens before the segment, from the halo slot
      float hb[kPer];
      Vec16<T>::load(*reinterpret_cast<const uint4*>(buf - 16), hb);
#pragma unroll
      for (int j = 0; j < kH; ++j) halo[j] = hb[kPer - kH + j];
    }
    float prev_tail[kH];
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int64_t lv = lane_l0 + v * (32 * kPer);
      const uint4 raw = lv < L ? *reinterpret_cast<const uint4*>(buf + (v * 32 + lane) * 16) : make_uint4(0u, 0u, 0u, 0u);
      float xv[kPer];
      Vec16<T>::load(raw, xv);
      float win[kH];
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        if (v == 0) {
          const float sh = __shfl_up_sync(0xffffffffu, xv[kPer - kH + j], 1);
          win[j] = lane == 0 ? halo[j] : sh;
        } else {
          win[j] = __shfl_sync(0xffffffffu, lane == 31 ? prev_tail[j] : xv[kPer - kH + j], (lane + 31) & 31);
        }
      }
      float o[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        float acc = bias;
#pragma unroll
        for (int k = 0; k < kH; ++k) acc = fmaf(w[k], win[k], acc);
        acc = fmaf(w[kH], xv[i], acc);
#pragma unroll
        for (int k = 0; k + 1 < kH; ++k) win[k] = win[k + 1];
        win[kH - 1] = xv[i];
        o[i] = silu ? silu_fast(acc) : acc;
      }
      if (lv < L) st_global_16(outr + lv, Vec16<T>::store(o));
      if (fin != nullptr && lv + kPer == L) {
#pragma unroll
        for (int j = 0; j < kH; ++j) fin[j * p.f_ls] = from_float<T>(win[j]);
      }
#pragma unroll
      for (int j = 0; j < kH; ++j) prev_tail[j] = win[j];
    }
    // every lane has read stage s: lane 0 refills it with the segment `stages` ahead
    __syncwarp();
    if (lane == 0) {
      const uint32_t g2 = gw + static_cast<uint32_t>(stages) * step;
      if (g2 < nwarps) {
        bulk::fence_proxy_async();
        issue(g2, s);
      }
    }
    if (++s == stages) {
      s = 0;
      parity ^= 1u;
    }
  }
#endif
}

// Stages per warp ring (CAUSAL_CONV1D_FWD_BULK_STAGES, 2..5, default 3) and a cap on resident blocks
// per SM (CAUSAL_CONV1D_FWD_BULK_BLOCKS, default: as many as fit), read once: tuning knobs.
int fwd_bulk_stages() {
  static const int s = [] {
    const int v = env_int("CAUSAL_CONV1D_FWD_BULK_STAGES", 3);
    return v < 2 ? 2 : (v > 5 ? 5 : v);
  }();
  return s;
}

template <typename T, int kW>
bool launch_bulk(const ConvParams& p, cudaStream_t stream) {
  constexpr int64_t kSegTok = 32 * kBulkVecs * (16 / static_cast<int64_t>(sizeof(T)));
  const int64_t wpr = (p.seqlen + kSegTok - 1) / kSegTok;
  const int64_t nwarps = wpr * p.batch * p.dim;
  if (nwarps + 64 * 1024 > 0x7fffffffLL || p.dim > 0x7fffffff) return false;  // 32-bit warp indices
  const int stages = fwd_bulk_stages();
  const int smem = (kThreads / 32) * bulk_warp_bytes(stages);  // <= 41 KB: no opt-in needed
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  static int occ[64] = {};  // per device: 0 = not asked yet, -1 = cannot run
  if (occ[dev] == 0) {
    const int n = bulk_blocks_per_sm(reinterpret_cast<const void*>(&fwd_cf_bulk_kernel<T, kW>), kThreads, smem);
    occ[dev] = n > 0 ? n : -1;
  }
  static const int cap = env_int("CAUSAL_CONV1D_FWD_BULK_BLOCKS", 0);
  const int per_sm = cap > 0 && cap < occ[dev] ? cap : occ[dev];
  if (per_sm <= 0) return false;
  const int64_t need = (nwarps + kThreads / 32 - 1) / (kThreads / 32);
  const int64_t full = static_cast<int64_t>(per_sm) * p.num_sms;
  const int64_t blocks = need < full ? need : full;
  fwd_cf_bulk_kernel<T, kW><<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(
      p, FastDiv(static_cast<uint32_t>(wpr)), FastDiv(static_cast<uint32_t>(p.dim)), static_cast<uint32_t>(nwarps),
      stages);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// The bulk-copy variant for 16-bit rows of >= 2048 tokens on sm_90+: opt-in (CAUSAL_CONV1D_FWD_BULK=1)
// since it measured slower than the register-only kernel at 8 vectors per lane (issue 16: bf16
// B4 D4096 L4096 78.1 against ~72 us, device run 1).
bool fwd_bulk_enabled() {
  static const bool enabled = env_int("CAUSAL_CONV1D_FWD_BULK", 0) == 1;
  return enabled;
}

template <typename T, int kW>
bool launch(const ConvParams& p, cudaStream_t stream) {
  if constexpr (sizeof(T) == 2) {
    if (p.seqlen >= 32 * 8 * 8) {
      if (fwd_walk_enabled()) return launch_walk<T, kW>(p, stream);
      if (fwd_bulk_enabled() && bulk_copy_supported() && launch_bulk<T, kW>(p, stream)) return true;
      return launch_v<T, kW, 8>(p, stream);  // rows fill warps of 8 vectors
    }
  }
  return launch_v<T, kW, 4>(p, stream);
}

template <typename T>
bool launch_w(const ConvParams& p, cudaStream_t stream) {
  switch (p.width) {
    case 2: return launch<T, 2>(p, stream);
    case 3: return launch<T, 3>(p, stream);
    case 4: return launch<T, 4>(p, stream);
    default: return false;
  }
}

}  // namespace

bool fwd_cf_fast_enabled() {
  // On by default: on the H200, bf16 B4 D4096 L4096 98.3 -> 75.2 us (64% -> 84% of copy) and fp32
  // 177 -> 132 us (71% -> 95%); the GPU suite and memcheck pass on both paths (2026-11-30).
  // CAUSAL_CONV1D_FWD_FAST=0 selects the general kernel (for comparisons and bisecting).
  static const bool enabled = switch_on("CAUSAL_CONV1D_FWD_FAST");
  return enabled;
}

bool launch_fwd_channel_first_fast(const ConvParams& p, cudaStream_t stream) {
  if (p.x_ls != 1 || p.out_ls != 1 || p.seq_idx != nullptr || !p.vec_ok) return false;
  if (p.width < 2 || p.width > 4 || p.batch <= 0 || p.dim <= 0 || p.seqlen <= 0) return false;
  const int64_t per = p.x_dtype == kFloat32 ? 4 : 8;  // elements per 16-byte vector
  if (p.seqlen % per != 0) return false;
  switch (p.x_dtype) {
    case kFloat16: return launch_w<__half>(p, stream);
    case kBFloat16: return launch_w<__nv_bfloat16>(p, stream);
    case kFloat32: return launch_w<float>(p, stream);
    default: return false;
  }
}

}  // namespace causal_conv1d_cuda
