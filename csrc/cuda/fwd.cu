// Forward kernels: out = act(bias + sum_k w[k] * x[l - (width-1) + k]) per channel.
//
// Channel-first (x stride along L == 1): each thread owns kN consecutive tokens of one channel
// (two 16-byte loads); the width-1 tokens before them come from the neighbouring lane through a
// warp shuffle, so only lane 0 of a warp reads its halo from memory (an L1/L2 hit).
// Channel-last (x stride along D == 1): each thread owns 8 consecutive channels (one or two
// 16-byte loads per token) and walks a tile of tokens, keeping the last width-1 tokens in
// registers; only the first width-1 tokens of a tile are read twice (from L2).
// The fused residual (p.res, x's layout kind): added to each output at its store, after the
// activation (and the seq_idx padding mask), in float. kRes is a template parameter: a run-time test
// cost the kernels without a residual registers (spills in the channel-first ones).
#include "launch_check.cuh"

#include "dispatch.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kCfThreads = 128;
constexpr int kClThreads = 128;
constexpr int kClChannels = 4;  // channels per thread, channel-last (8 bytes for 16-bit types: fewer registers, more warps)
constexpr int kClGroup = 8;     // tokens loaded together (bytes in flight), channel-last

// final_states[b, d, j] = token at L - (width-1) + j (initial_states / zero before the start).
template <typename T>
__device__ __forceinline__ void write_final(const ConvParams& p, int b, int d, int j) {
  const int64_t pos = p.seqlen - (p.width - 1) + j;
  T v;
  if (pos >= 0) {
    v = static_cast<const T*>(p.x)[b * p.x_bs + d * p.x_cs + pos * p.x_ls];
  } else if (p.init != nullptr) {
    v = static_cast<const T*>(p.init)[b * p.i_bs + d * p.i_cs + (p.width - 1 + pos) * p.i_ls];
  } else {
    v = from_float<T>(0.f);
  }
  static_cast<T*>(p.final_out)[b * p.f_bs + d * p.f_cs + (int64_t)j * p.f_ls] = v;
}

template <typename T, int kW, bool kRes>
__global__ void __launch_bounds__(kCfThreads, 6) fwd_cf_kernel(const ConvParams p, const int64_t wpr, const int64_t spw,
                                                            const int64_t nwarps) {
  constexpr int kN = 32 / sizeof(T);  // tokens per thread and segment: 32 bytes
  constexpr int kH = kW - 1;
  static_assert(kN >= kH, "the halo must fit in one neighbour's tokens");
  // A warp walks spw consecutive segments (32 * kN tokens each) of one row, loading segment s+1
  // while it computes segment s; the halo of a segment is the tail of the previous one (carried
  // in registers), so only a warp's first segment reads its halo from memory. A block's warps
  // may serve different rows, so short rows still fill whole blocks.
  const int lane = threadIdx.x & 31;
  const int64_t gw = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (gw >= nwarps) return;  // warp-uniform
  const int64_t wrow = (wpr + spw - 1) / spw;  // warps per row
  const int64_t row = gw / wrow;
  const int64_t seg0 = (gw % wrow) * spw;
  const int64_t seg1 = seg0 + spw < wpr ? seg0 + spw : wpr;
  const int b = static_cast<int>(row / p.dim);
  const int d = static_cast<int>(row % p.dim);
  const int64_t L = p.seqlen;
  const T* __restrict__ xr = static_cast<const T*>(p.x) + b * p.x_bs + d * p.x_cs;
  T* __restrict__ outr = static_cast<T*>(p.out) + b * p.out_bs + d * p.out_cs;
  const bool has_seq = p.seq_idx != nullptr;
  const int32_t* __restrict__ sr = has_seq ? p.seq_idx + b * p.s_bs : nullptr;
  // the residual's row (unit stride along seqlen, as x's)
  const T* __restrict__ rr = kRes ? static_cast<const T*>(p.res) + b * p.r_bs + d * p.r_cs : nullptr;

  // register double buffer: segment s+1 is loaded while segment s is computed
  RawVec<T, kN> cur;
  {
    const int64_t l0 = (seg0 * 32 + lane) * kN;
    load_raw_l<T, kN>(xr, l0, L, p.vec_ok && l0 + kN <= L, cur);
  }
  float carry[kH];  // the kH tokens before this lane's first token (lane 0 only)
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    carry[j] = 0.f;
    if (lane == 0) {
      const int64_t pos = seg0 * 32 * kN - kH + j;
      carry[j] = pos >= 0 ? (pos < L ? to_float(xr[pos]) : 0.f) : init_value<T>(p, b, d, pos);
    }
  }
  float w[kW];
  load_weights_padded<kW>(p, d, w);
  const float bias = p.bias != nullptr ? load_any(p.bias, p.b_dtype, d * p.b_s) : 0.f;

  for (int64_t seg = seg0; seg < seg1; ++seg) {
    const int64_t l0 = (seg * 32 + lane) * kN;
    const bool full = p.vec_ok && l0 + kN <= L;
    RawVec<T, kN> nxt;
    if (seg + 1 < seg1) {
      const int64_t l1 = l0 + 32 * kN;
      load_raw_l<T, kN>(xr, l1, L, p.vec_ok && l1 + kN <= L, nxt);
    }
    float xv[kH + kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) xv[kH + i] = to_float(cur.v[i]);
    int sv[kH + kN];
    if (has_seq) {
#pragma unroll
      for (int i = 0; i < kN; ++i) sv[kH + i] = l0 + i < L ? sr[(l0 + i) * p.s_ls] : -1;
    }
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      float v = __shfl_up_sync(0xffffffffu, xv[kN + j], 1);
      int s = has_seq ? __shfl_up_sync(0xffffffffu, sv[kN + j], 1) : 0;
      if (lane == 0) {
        const int64_t pos = l0 - kH + j;
        v = carry[j];
        // before the start: the initial state's sequence (seq_idx[b, 0]) or none
        if (has_seq) s = pos >= 0 ? (pos < L ? sr[pos * p.s_ls] : -1) : (p.init != nullptr ? sr[0] : -1);
      }
      xv[j] = v;
      if (has_seq) sv[j] = s;
    }
    // outputs in 16-byte pieces (fewer live registers than a whole kN array)
    constexpr int kPer = 16 / sizeof(T);
#pragma unroll
    for (int h = 0; h < kN / kPer; ++h) {
      float o[kPer];
#pragma unroll
      for (int ii = 0; ii < kPer; ++ii) {
        const int i = h * kPer + ii;
        float acc = bias;
        if (!has_seq) {
#pragma unroll
          for (int k = 0; k < kW; ++k) acc = fmaf(w[k], xv[i + k], acc);
        } else {
          const int cs = sv[kH + i];
#pragma unroll
          for (int k = 0; k < kW; ++k) acc += sv[i + k] == cs ? w[k] * xv[i + k] : 0.f;
          if (cs < 0) acc = 0.f;
        }
        o[ii] = p.silu ? silu_f(acc) : acc;
      }
      const int64_t lh = l0 + h * kPer;
      if constexpr (kRes) add_residual_l<T, kPer>(rr, lh, L, full, o);
      if (full) {
        store_vec<T, kPer>(outr + lh, o);
      } else {
#pragma unroll
        for (int ii = 0; ii < kPer; ++ii)
          if (lh + ii < L) outr[lh + ii] = from_float<T>(o[ii]);
      }
    }
    // the next segment's halo: the last kH tokens of lane 31
#pragma unroll
    for (int j = 0; j < kH; ++j) carry[j] = __shfl_sync(0xffffffffu, xv[kN + j], 31);
    cur = nxt;
  }
  if (p.final_out != nullptr && seg1 == wpr && lane < p.width - 1) write_final<T>(p, b, d, lane);
}

template <typename T, int kW, bool kRes>
__global__ void __launch_bounds__(kClThreads, 4) fwd_cl_kernel(const ConvParams p, const int nchb, const int64_t ntiles,
                                                            const int tile) {
  constexpr int kC = kClChannels;
  constexpr int kH = kW - 1;
  constexpr int G = kClGroup;
  const int64_t bid = blockIdx.x;
  const int chb = static_cast<int>(bid % nchb);
  const int64_t rest = bid / nchb;
  const int64_t tl = rest % ntiles;
  const int b = static_cast<int>(rest / ntiles);
  const int c0 = (chb * blockDim.x + threadIdx.x) * kC;
  if (c0 >= p.dim) return;
  const int D = p.dim;
  const bool full = p.vec_ok && c0 + kC <= D;
  const int64_t L = p.seqlen;
  const int64_t t0 = tl * tile;
  const int64_t t1 = t0 + tile < L ? t0 + tile : L;
  const T* __restrict__ xb = static_cast<const T*>(p.x) + b * p.x_bs;  // (c, l) at c + l * x_ls
  T* __restrict__ ob = static_cast<T*>(p.out) + b * p.out_bs;
  const bool has_seq = p.seq_idx != nullptr;
  const int32_t* __restrict__ sr = has_seq ? p.seq_idx + b * p.s_bs : nullptr;
  // the residual's batch row (unit stride along dim, as x's)
  const T* __restrict__ rb = kRes ? static_cast<const T*>(p.res) + b * p.r_bs : nullptr;

  float w[kW][kC];
  float bias[kC];
  load_channel_params<kW, kC>(p, c0, D, w, bias);

  float hx[kH][kC];  // the kH tokens before the current one
  int hs[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    const int64_t pos = t0 - kH + j;
    if (pos >= 0) {
      RawVec<T, kC> r;
      load_raw<T, kC>(xb + pos * p.x_ls, true, c0, D, full, r);
#pragma unroll
      for (int c = 0; c < kC; ++c) hx[j][c] = to_float(r.v[c]);
      hs[j] = has_seq ? sr[pos * p.s_ls] : 0;
    } else {
#pragma unroll
      for (int c = 0; c < kC; ++c) hx[j][c] = c0 + c < D ? init_value<T>(p, b, c0 + c, pos) : 0.f;
      hs[j] = has_seq && p.init != nullptr ? sr[0] : -1;  // the initial state's sequence: seq_idx[b, 0]
    }
  }

  // software pipeline: group g+1 is loaded while group g is computed
  RawVec<T, kC> raw[G];
  int sc[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t pos = t0 + g;
    const bool valid = pos < t1;
    load_raw<T, kC>(xb + (valid ? pos : 0) * p.x_ls, valid, c0, D, full, raw[g]);
    sc[g] = has_seq && valid ? sr[pos * p.s_ls] : -1;
  }
  for (int64_t lt = t0; lt < t1; lt += G) {
    RawVec<T, kC> nraw[G];
    int nsc[G];
    if (lt + G < t1) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int64_t pos = lt + G + g;
        const bool valid = pos < t1;
        load_raw<T, kC>(xb + (valid ? pos : 0) * p.x_ls, valid, c0, D, full, nraw[g]);
        nsc[g] = has_seq && valid ? sr[pos * p.s_ls] : -1;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int64_t pos = lt + g;
      float cx[kC];
#pragma unroll
      for (int c = 0; c < kC; ++c) cx[c] = to_float(raw[g].v[c]);
      if (pos < t1) {
        float o[kC];
#pragma unroll
        for (int c = 0; c < kC; ++c) {
          float acc = bias[c];
          if (!has_seq) {
#pragma unroll
            for (int k = 0; k < kH; ++k) acc = fmaf(w[k][c], hx[k][c], acc);
            acc = fmaf(w[kH][c], cx[c], acc);
          } else {
#pragma unroll
            for (int k = 0; k < kH; ++k) acc += hs[k] == sc[g] ? w[k][c] * hx[k][c] : 0.f;
            acc = fmaf(w[kH][c], cx[c], acc);
            if (sc[g] < 0) acc = 0.f;
          }
          o[c] = p.silu ? silu_f(acc) : acc;
        }
        if constexpr (kRes) {
          RawVec<T, kC> r;
          load_raw<T, kC>(rb + pos * p.r_ls, true, c0, D, full, r);
#pragma unroll
          for (int c = 0; c < kC; ++c) o[c] += to_float(r.v[c]);
        }
        store_raw<T, kC>(ob + pos * p.out_ls, c0, D, full, o);
      }
#pragma unroll
      for (int j = 0; j + 1 < kH; ++j) {
#pragma unroll
        for (int c = 0; c < kC; ++c) hx[j][c] = hx[j + 1][c];
        hs[j] = hs[j + 1];
      }
#pragma unroll
      for (int c = 0; c < kC; ++c) hx[kH - 1][c] = cx[c];
      hs[kH - 1] = sc[g];
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      raw[g] = nraw[g];
      sc[g] = nsc[g];
    }
  }
  if (p.final_out != nullptr && tl == ntiles - 1) {
    for (int j = 0; j < p.width - 1; ++j)
      for (int c = 0; c < kC; ++c)
        if (c0 + c < D) write_final<T>(p, b, c0 + c, j);
  }
}

struct FwdLaunch {
  template <typename T, int kW>
  static void run(const ConvParams& p, cudaStream_t stream) {
    if (!p.channel_last) {
      constexpr int kN = 32 / sizeof(T);
      const int64_t per_warp = 32 * kN;
      const int64_t wpr = (p.seqlen + per_warp - 1) / per_warp;  // segments per row
      // segments per warp: up to 4 while that still leaves >= 16 warps per SM (several waves)
      int64_t spw = 4;
      while (spw > 1 && ((wpr + spw - 1) / spw) * p.dim * p.batch < 16LL * p.num_sms * (kCfThreads / 32)) spw /= 2;
      const int64_t nwarps = ((wpr + spw - 1) / spw) * p.dim * p.batch;
      const int64_t blocks = (nwarps + kCfThreads / 32 - 1) / (kCfThreads / 32);
      const unsigned grid = static_cast<unsigned>(blocks);
      dispatch_flag(p.res != nullptr, [&](auto res) {
        fwd_cf_kernel<T, kW, decltype(res)::value><<<grid, kCfThreads, 0, stream>>>(p, wpr, spw, nwarps);
      });
      CC1D_CUDA_LAUNCH_CHECK();
    } else {
      const int64_t thr_needed = (p.dim + kClChannels - 1) / kClChannels;
      const int threads = static_cast<int>(thr_needed >= kClThreads ? kClThreads : ((thr_needed + 31) / 32) * 32);
      const int nchb = static_cast<int>((thr_needed + threads - 1) / threads);
      int tile = 64;
      auto nblocks = [&](int t) { return (int64_t)nchb * p.batch * ((p.seqlen + t - 1) / t); };
      while (tile > 16 && nblocks(tile) < 4LL * p.num_sms) tile /= 2;
      const int64_t ntiles = (p.seqlen + tile - 1) / tile;
      const unsigned grid = static_cast<unsigned>(nblocks(tile));
      dispatch_flag(p.res != nullptr, [&](auto res) {
        fwd_cl_kernel<T, kW, decltype(res)::value><<<grid, threads, 0, stream>>>(p, nchb, ntiles, tile);
      });
      CC1D_CUDA_LAUNCH_CHECK();
    }
  }
};

}  // namespace

void fwd_general::launch(const ConvParams& p, cudaStream_t stream) { launch_general<FwdLaunch>(p, stream); }
}  // namespace causal_conv1d_cuda
