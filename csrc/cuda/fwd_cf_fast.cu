// Fast channel-first forward: out[l] = act(bias + sum_k w[k] * x[l - (width-1) + k]) per row.
//
// Why (docs/PERF_NOTES.md, "fwd cf fast path"): the general kernel (fwd.cu) keeps too few bytes in
// flight per SM (DRAM ~42% of peak at ~47% occupancy). Here every thread loads kVecs 16-byte
// vectors and issues all of its global loads before using any of them, so each resident thread has
// kVecs * 16 bytes outstanding, with no shared memory and no pipeline state.
//
// Work split: a warp owns 32 * kVecs consecutive 16-byte vectors of one row (row = b * dim + d;
// wpr = ceil(L / (32 * kVecs * kPer)) warps per row, a flattened 1-D grid of warps; the last rows
// at 32 * kVecs / 2 for the 8-vector kernels, see the drain below). Lane i owns
// vectors i, 32 + i, 64 + i, ... of the warp's span, so each warp-wide load or store instruction
// moves 512 contiguous bytes (fully coalesced, every sector used by one instruction).
// Halo (the width-1 tokens before a vector): the tail of the previous lane's same vector, by a warp
// shuffle; lane 0 takes lane 31's previous vector, and for the first vector reads the kH tokens
// before the warp itself: from x (an L2 hit: the neighbouring warp reads the same sector), from
// initial_states before the start of the row, or zero.
// Per lane, instructions kept out of the vector loop: one base pointer, each vector at an
// immediate offset of 512 bytes; the row bound as a 32-bit count of its vectors inside the row,
// computed once; final_states copied from x after the loop by one lane of the row's last warp (no
// test in every vector). bf16 width 4: 1510 -> 1281 SASS instructions per warp, ~96 per vector of
// which 72 are the convolution and silu. The 16-bit kernels of 8 vectors per lane read x and write
// out evict-first (ld/st.global.cs: every byte is used once); every kernel does.
// L2 prefetch: on grids of at least 4 waves whose rows sit at one stride, each lane
// first prefetches one 128-byte line of the span pf_rows rows ahead (the warp that starts about 3/8
// of a warp lifetime later) at evict_last priority, so the DRAM reads run ahead of the warps'
// compute-then-load bursts and survive the streaming traffic until used. The load that uses a line
// carries an evict_normal cache hint, which resets it (an evict_first hint or plain .cs does not:
// the line would outlive its one use and crowd the next ops out of L2; vec16.cuh); out is written
// with an evict_first hint. Same-run A/B on the H200 (µs in a CUDA graph, the
// normal-priority prefetch half a wave ahead / this): bf16 B4 D4096 L4096 70.1, 70.2 / 69.7, 69.4;
// fp16 70.9, 71.0 / 70.9, 69.9; fp32 130.9, 131.7 / 128.6, 127.8; 7B B1 L8192 D10240 86.7, 87.4 /
// 85.6, 84.9 (docs/PERF_NOTES.md).
// The drain (grid_for): a grid of equal warps empties the SMs over one warp lifetime at its
// end; the 8-vector kernels do the grid's last rows (half a wave of resident warps) with warps of 4
// vectors per lane, which live half as long (bf16 B4 D4096 L4096 69.2 -> 68.0 us).
// Row addressing (use_offsets): 32-bit vector offsets from p.x / p.out, or 64-bit row pointers for
// bf16 widths 3-4, whichever gives ptxas the shorter vector loop.
// The fused residual (kRes, a template parameter: the kernels without one are unchanged): lane v's
// residual vector is loaded (evict-first, read once) at the top of its vector's step, so its latency
// overlaps that vector's shuffles and taps, and added after the activation.
// Eligible: channel-first, no seq_idx, width 2..4, every row of x and out (and the residual's, by
// vec_ok) 16-byte aligned and seqlen a multiple of the vector width (so each vector is wholly inside
// or wholly past the row).
// Everything else runs the next path of the forward's table (dispatch.cu).
#include "launch_check.cuh"

#include "dispatch.cuh"
#include "vec16.cuh"

#include <type_traits>

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

// v, with its origin hidden from the compiler: a 32-bit offset stays one register that the compiler
// widens with one IMAD.WIDE where it needs the address, instead of a 64-bit expression it rebuilds.
__device__ __forceinline__ uint32_t opaque_u32(uint32_t v) {
  uint32_t r;
  asm("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
  return r;
}

__device__ __forceinline__ float silu_fast(float z) { return __fdividef(z, 1.f + __expf(-z)); }

// L2 cache policies (createpolicy: folded by the compiler into the access's memory descriptor, no
// register): x is read with an evict_normal hint, which resets a line that the prefetch below
// brought in at evict_last (so nothing stays behind at evict_last after its one use); out is written
// evict-first. All accesses are .cs (evict-first in L1).
__device__ __forceinline__ uint64_t l2_policy_evict_normal() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ uint4 ld_hint_16(const uint4* p, uint64_t pol) {
  uint4 r;
  asm volatile("ld.global.cs.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(pol));
  return r;
}
__device__ __forceinline__ void st_hint_16(uint4* p, const uint4& v, uint64_t pol) {
  asm volatile("st.global.cs.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w), "l"(pol)
               : "memory");
}

// Row addressing, by instantiation: 32-bit vector offsets from p.x / p.out, except for bf16 widths
// 3-4, whose SASS with 64-bit row pointers is shorter (ptxas keeps the store pointer in registers
// there; in every other 8-vector kernel it rebuilt it from b, d and the strides at every vector:
// loop instructions per warp, pointers / offsets, nvcc 13.0 sm_90: bf16 W4 765 / 790, W3 684 / 710,
// W2 733 / 632; fp16 W4 896 / 787, W3 817 / 709; fp32 W4 260 / 199).
template <typename T, int kW>
constexpr bool use_offsets() { return !(std::is_same<T, __nv_bfloat16>::value && kW >= 3); }

// The grid (Grid, grid_for): g.head_warps warps of kVecs vectors per lane over rows [0, g.head_rows),
// then, for 8-vector kernels, warps of kTailVecs(kVecs) over the remaining rows (the drain).
struct Grid {
  int64_t wpr = 1;         // warps per row, head
  int64_t wpr_tail = 1;    // warps per row, tail
  int64_t head_rows = 0;   // rows [0, head_rows) are the head's
  int64_t head_warps = 0;  // head_rows * wpr
  int64_t nwarps = 0;      // head_warps + (rows - head_rows) * wpr_tail
  int64_t pf_rows = 0;     // L2 prefetch distance in rows; 0: none
};

// Vectors per lane of the tail's warps: half of the 8-vector kernels' (the 4-vector kernels have no tail).
constexpr int kTailVecs(int vecs) { return vecs == 8 ? 4 : vecs; }

template <typename T, int kW, int kVecs, bool kRes>
__global__ void __launch_bounds__(kThreads, min_blocks(kVecs)) fwd_cf_fast_kernel(const ConvParams p, const Grid g) {
  constexpr int kPer = Vec16<T>::kPer;
  constexpr int kH = kW - 1;
  constexpr int kStride = 32;  // in 16-byte vectors: a lane's vector v + 1 is 512 bytes after v
  constexpr int kTail = kTailVecs(kVecs);
  static_assert(kPer >= kH, "the halo must fit in the previous lane's vector");

  const int lane = threadIdx.x & 31;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  if (gw >= g.nwarps) return;  // warp-uniform
  // head or tail warp (warp-uniform; always head for kTail == kVecs): its index among its part's
  // warps, that part's warps per row and first row, and its vectors per lane
  const bool tail = kTail != kVecs && gw >= g.head_warps;
  const int64_t gl = tail ? gw - g.head_warps : gw;
  const int64_t wpr = tail ? g.wpr_tail : g.wpr;
  const int64_t row0 = tail ? g.head_rows : 0;
  const int sv = tail ? kTail : kVecs;
  int64_t wr;  // warp index within its row
  int b, d;
  int64_t row;
  if (g.nwarps <= 0xffffffffLL) {  // uniform: 32-bit divisions (a 64-bit one is a long call)
    const uint32_t rl = static_cast<uint32_t>(gl) / static_cast<uint32_t>(wpr);
    const uint32_t r = rl + static_cast<uint32_t>(row0);  // rows < nwarps
    const uint32_t bb = r / static_cast<uint32_t>(p.dim);
    wr = static_cast<uint32_t>(gl) - rl * static_cast<uint32_t>(wpr);
    b = static_cast<int>(bb);
    d = static_cast<int>(r - bb * static_cast<uint32_t>(p.dim));
    row = r;
  } else {
    row = gl / wpr;
    wr = gl - row * wpr;
    row += row0;
    b = static_cast<int>(row / p.dim);
    d = static_cast<int>(row - static_cast<int64_t>(b) * p.dim);
  }
  const int64_t pf_rows = g.pf_rows;
  const int64_t L = p.seqlen;
  const int64_t w0 = wr * (32 * kPer) * sv;
  const int64_t lane_l0 = w0 + lane * kPer;
  // this lane's first vector of x and of out (use_offsets: 32-bit offsets in vectors, eligible() keeps
  // every vector of x and out within 2^32 of its base; else 64-bit row pointers)
  const uint4* __restrict__ xv;
  uint4* __restrict__ ov;
  uint32_t xo = 0;
  const T* __restrict__ xr = static_cast<const T*>(p.x) + b * p.x_bs + d * p.x_cs;
  if constexpr (use_offsets<T, kW>()) {
    xo = opaque_u32(static_cast<uint32_t>((b * p.x_bs + d * p.x_cs + lane_l0) / kPer));
    const uint32_t oo = opaque_u32(static_cast<uint32_t>((b * p.out_bs + d * p.out_cs + lane_l0) / kPer));
    xv = static_cast<const uint4*>(p.x) + xo;
    ov = static_cast<uint4*>(p.out) + oo;
  } else {
    T* __restrict__ outr = static_cast<T*>(p.out) + b * p.out_bs + d * p.out_cs;
    xv = reinterpret_cast<const uint4*>(xr + lane_l0);
    ov = reinterpret_cast<uint4*>(outr + lane_l0);
  }
  // this lane's vectors inside the row: v < nin (L is a multiple of kPer: none straddles the end)
  const int64_t left = L - lane_l0;
  const int nin = left <= 0 ? 0 : (left >= static_cast<int64_t>(sv) * 32 * kPer ? sv
                                  : static_cast<int>((left + 32 * kPer - 1) / (32 * kPer)));

  // this warp's span of the row pf_rows ahead (the warp pf_rows * wpr later) into L2 at evict_last,
  // one 128-byte line per lane (a span is at most 32 lines); that warp's evict_normal loads reset the
  // lines; pf_rows 0: none (launch_v)
  const int64_t lw = L - w0;  // > 0
  const int64_t span_tok = static_cast<int64_t>(32 * kPer) * sv;
  const uint32_t span_bytes = static_cast<uint32_t>((lw < span_tok ? lw : span_tok) * sizeof(T));
  const bool my_line = static_cast<uint32_t>(lane) * 128u < span_bytes;
  if (pf_rows > 0 && my_line) {
    const char* mine = reinterpret_cast<const char*>(xv - lane) + lane * 128;
    if (row + pf_rows < static_cast<int64_t>(p.batch) * p.dim) {
      prefetch_l2_evict_last(mine + pf_rows * p.x_cs * static_cast<int64_t>(sizeof(T)));
    }
  }
  uint4 raw[kVecs];
  {
    const uint64_t pol = l2_policy_evict_normal();
#pragma unroll
    for (int v = 0; v < kVecs; ++v) raw[v] = v < nin ? ld_hint_16(xv + v * kStride, pol) : make_uint4(0u, 0u, 0u, 0u);
  }
  float halo[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) halo[j] = 0.f;
  if (lane == 0) {
    if (w0 > 0) {
      const T* __restrict__ before = reinterpret_cast<const T*>(xv) - kH;
#pragma unroll
      for (int j = 0; j < kH; ++j) halo[j] = to_float(__ldg(before + j));
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
  // this lane's first residual vector (rows 16-byte aligned, unit stride along seqlen: vec_ok)
  const uint4* __restrict__ rv = nullptr;
  if constexpr (kRes) {
    rv = reinterpret_cast<const uint4*>(static_cast<const T*>(p.res) + b * p.r_bs + d * p.r_cs + lane_l0);
  }
  float prev_tail[kH];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    if (v == kTail && v >= sv) break;  // a tail warp's last vector (warp-uniform)
    uint4 rraw = make_uint4(0u, 0u, 0u, 0u);
    if constexpr (kRes) {
      if (v < nin) rraw = ld_hint_16(rv + v * kStride, l2_policy_evict_first());
    }
    float xf[kPer];
    Vec16<T>::load(raw[v], xf);
    float win[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      if (v == 0) {
        const float s = __shfl_up_sync(0xffffffffu, xf[kPer - kH + j], 1);
        win[j] = lane == 0 ? halo[j] : s;
      } else {
        win[j] = __shfl_sync(0xffffffffu, lane == 31 ? prev_tail[j] : xf[kPer - kH + j], (lane + 31) & 31);
      }
    }
#pragma unroll
    for (int j = 0; j < kH; ++j) prev_tail[j] = xf[kPer - kH + j];
    float o[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      float acc = bias;
#pragma unroll
      for (int k = 0; k < kH; ++k) acc = fmaf(w[k], win[k], acc);
      acc = fmaf(w[kH], xf[i], acc);
#pragma unroll
      for (int k = 0; k + 1 < kH; ++k) win[k] = win[k + 1];
      win[kH - 1] = xf[i];
      o[i] = silu ? silu_fast(acc) : acc;
    }
    if constexpr (kRes) {
      float rf[kPer];
      Vec16<T>::load(rraw, rf);
#pragma unroll
      for (int i = 0; i < kPer; ++i) o[i] += rf[i];
    }
    if (v < nin) st_hint_16(ov + v * kStride, Vec16<T>::store(o), l2_policy_evict_first());
  }
  // final_states[b, d, j] = x[b, d, L - kH + j], copied (bit for bit) by lane 0 of the row's last warp
  if (p.final_out != nullptr && wr == wpr - 1 && lane == 0) {
    T* __restrict__ fin = static_cast<T*>(p.final_out) + b * p.f_bs + d * p.f_cs;
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      if constexpr (use_offsets<T, kW>()) {
        fin[j * p.f_ls] = static_cast<const T*>(p.x)[static_cast<int64_t>(xo) * kPer + (L - lane_l0) - kH + j];
      } else {
        fin[j * p.f_ls] = xr[L - kH + j];
      }
    }
  }
}

// 16-byte vectors per lane for p (see kThreads): 8 for 16-bit rows that fill warps of 8 vectors.
int vecs_per_lane(const ConvParams& p) { return p.x_dtype != kFloat32 && p.seqlen >= 32 * 8 * 8 ? 8 : 4; }

// Warps per row at `vecs` vectors per lane.
int64_t warps_per_row(const ConvParams& p, int vecs) {
  const int64_t per_warp = 32 * vecs * (p.x_dtype == kFloat32 ? 4 : 8);
  return (p.seqlen + per_warp - 1) / per_warp;
}

// L2 prefetch distance in rows: the rows of 3/8 of the resident warps (a warp prefetches for the
// warp that starts about 3/8 of a warp lifetime after it; same-run A/B, bf16 row, µs: 2/8 69.7, 69.3
// and 4/8 69.2, 69.3 at normal priority; at evict-last with the reset, 3/8 68.8, 69.2,
// 4/8 69.5, 69.5, 6/8 76.8, 76.7). 0 (none) when the rows are not at one stride (x's batch stride is
// not dim rows) or the grid is under 4 waves (the B16 D1024 L512 row: no gain).
int64_t pf_rows_for(const ConvParams& p, int64_t wpr, int64_t resident) {
  if (!(p.batch == 1 || p.x_bs == static_cast<int64_t>(p.dim) * p.x_cs)) return 0;
  if (wpr * p.batch * p.dim < 4 * resident) return 0;
  return (resident * 3 / 8 + wpr - 1) / wpr;
}

// The drain: the grid's last rows, half a wave of resident warps' worth (at the tail's
// grain), are done by warps of kTailVecs(vecs) vectors, which live half as long, so the SMs empty
// at a finer grain at the end of the grid. Same-run A/B on the H200 (µs in a CUDA graph,
// none / 2 / 4 / 8 / 16 eighths of a wave): bf16 B4 D4096 L4096 69.2, 69.1 / 68.1, 68.3 / 67.9, 68.1 /
// 68.8, 68.2 / 68.4, 68.4 (upstream 1.7.0 69.3, 69.7); W3 69.0, 68.7 / .. / 68.3, 68.5; fp16, W2 and
// 7B B1 L8192 D10240 unchanged within 0.5 (docs/PERF_NOTES.md).
constexpr int64_t kTailEighths = 4;

Grid grid_for(const ConvParams& p) {
  const int vecs = vecs_per_lane(p);
  const int tail_vecs = kTailVecs(vecs);
  const int64_t rows = static_cast<int64_t>(p.batch) * p.dim;
  const int64_t resident = static_cast<int64_t>(p.num_sms) * min_blocks(vecs) * (kThreads / 32);
  Grid g;
  g.wpr = warps_per_row(p, vecs);
  g.wpr_tail = warps_per_row(p, tail_vecs);
  const int64_t tail_rows = tail_vecs != vecs ? drain_rows(resident, kTailEighths, g.wpr_tail, rows) : 0;
  g.head_rows = rows - tail_rows;
  g.head_warps = g.head_rows * g.wpr;
  g.nwarps = g.head_warps + tail_rows * g.wpr_tail;
  g.pf_rows = pf_rows_for(p, g.wpr, resident);
  return g;
}

int64_t grid_blocks(const Grid& g) { return (g.nwarps + kThreads / 32 - 1) / (kThreads / 32); }

template <typename T, int kW, int kVecs>
void launch_v(const ConvParams& p, cudaStream_t stream) {
  const Grid g = grid_for(p);
  const unsigned blocks = static_cast<unsigned>(grid_blocks(g));
  dispatch_flag(p.res != nullptr, [&](auto res) {
    fwd_cf_fast_kernel<T, kW, kVecs, decltype(res)::value><<<blocks, kThreads, 0, stream>>>(p, g);
  });
  CC1D_CUDA_LAUNCH_CHECK();
}

}  // namespace

namespace fwd_cf_fast {

// On unless CAUSAL_CONV1D_FWD_FAST is off: on the H200, bf16 B4 D4096 L4096 98.3 -> 75.2 us (64% ->
// 84% of copy) and fp32 177 -> 132 us (71% -> 95%) against the general kernel.
bool eligible(const ConvParams& p) {
  if (p.channel_last || p.x_ls != 1 || p.out_ls != 1 || p.seq_idx != nullptr || !p.vec_ok) return false;
  if (p.res != nullptr && p.r_ls != 1) return false;  // the residual's vectors along seqlen
  if (p.width < 2 || p.width > 4 || p.batch <= 0 || p.dim <= 0 || p.seqlen <= 0) return false;
  const int64_t per = p.x_dtype == kFloat32 ? 4 : 8;  // elements per 16-byte vector
  if (p.seqlen % per != 0) return false;
  // the kernel's 32-bit vector offsets: the end of the last row of x and of out within 2^32 vectors
  // of its base
  auto offsets_fit = [&](int64_t bs, int64_t cs) {
    const int64_t end = static_cast<int64_t>(p.batch - 1) * bs + static_cast<int64_t>(p.dim - 1) * cs + p.seqlen;
    return end / per <= 0xffffffffLL;
  };
  if (!offsets_fit(p.x_bs, p.x_cs) || !offsets_fit(p.out_bs, p.out_cs)) return false;
  return grid_blocks(grid_for(p)) <= 0x7fffffffLL;
}

void launch(const ConvParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<2, 3, 4>{}, [&](auto tag, auto width) {
    using T = typename decltype(tag)::type;
    constexpr int kW = decltype(width)::value;
    if constexpr (sizeof(T) == 2) {
      if (vecs_per_lane(p) == 8) {
        return launch_v<T, kW, 8>(p, stream);
      }
    }
    launch_v<T, kW, 4>(p, stream);
  });
}

}  // namespace fwd_cf_fast
}  // namespace causal_conv1d_cuda
