// Backward kernels: dx, dweight, dbias, dinitial_states from dout (and dfinal_states).
//
// With silu the pre-activation is recomputed in-kernel from x (no saved activations):
//   g[p]  = dout[p] * silu'(pre[p])           (or dout[p] without activation; 0 at padding)
//   dx[q] = sum_j w[kW-1-j] g[q+j]  (+ dfinal_states where q is among the last width-1 tokens)
//   dw[k] = sum_p g[p] x[p-(kW-1)+k],  dbias = sum_p g[p]
// Each block reduces its weight/bias gradient in registers + shared memory and writes one
// partial row; a second kernel sums the rows per channel in a fixed order. No float atomics
// anywhere: the result is bit-identical from run to run (deterministic mode is always on).
#include "launch_check.cuh"

#include "dispatch.cuh"

namespace causal_conv1d_cuda {
namespace {

constexpr int kCfThreads = 128;
constexpr int kCfStages = 3;  // cp.async pipeline depth, channel-first backward (x and dout)
constexpr int kClThreadsX = 64;  // channel-last: threads along channels
constexpr int kClThreadsY = 4;   // channel-last: token sub-tiles per block (reduced in shared memory)
constexpr int kClChannels = 4;   // channels per thread, channel-last backward (register budget)
constexpr int kClGroup = 4;      // tokens loaded together, channel-last backward

// dfinal_states contribution to the token at position q (0 unless q is among the last width-1).
template <typename T>
__device__ __forceinline__ float dfinal_at(const ConvParams& p, int b, int d, int64_t q) {
  const int64_t k = q - (p.seqlen - (p.width - 1));
  if (p.dfinal == nullptr || k < 0 || k >= p.width - 1) return 0.f;
  return to_float(static_cast<const T*>(p.dfinal)[b * p.df_bs + d * p.df_cs + k * p.df_ls]);
}

// dinitial_states for channel (b, d), given g at positions 0..kW-2 (g0) and their sequence ids.
template <typename T, int kW>
__device__ __forceinline__ void write_dinit(const ConvParams& p, int b, int d, const float (&w)[kW],
                                            const float (&g0)[kW - 1], const int (&s0v)[kW - 1], bool has_seq,
                                            int s0) {
  constexpr int kH = kW - 1;
#pragma unroll
  for (int hj = 0; hj < kH; ++hj) {
    const int j = hj - kH + p.width - 1;  // index into dinitial_states
    if (j < 0) continue;
    float acc = 0.f;
#pragma unroll
    for (int q = 0; q <= hj; ++q) {  // output position q (0-based) reads history slot hj with tap hj - q
      if (q < p.seqlen && (!has_seq || s0v[q] == s0)) acc += w[hj - q] * g0[q];
    }
    acc += dfinal_at<T>(p, b, d, (int64_t)hj - kH);
    static_cast<T*>(p.dinit)[b * p.di_bs + d * p.di_cs + (int64_t)j * p.di_ls] = from_float<T>(acc);
  }
}

template <typename T, int kW>
__global__ void __launch_bounds__(kCfThreads, 4) bwd_cf_kernel(const ConvParams p, const int64_t wpr, const int64_t spw,
                                                               const int64_t nwarps) {
  constexpr int kN = 32 / sizeof(T);
  constexpr int kH = kW - 1;
  constexpr int kVec = kN * sizeof(T) / 16;
  static_assert(kN >= kH, "the halo must fit in one neighbour's tokens");
  // A warp walks spw consecutive segments (32 * kN tokens) of one row with a kCfStages-deep
  // cp.async ring for x and dout (each lane copies and reads back only its own bytes).
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t gw = (int64_t)blockIdx.x * (blockDim.x >> 5) + warp;
  if (gw >= nwarps) return;  // warp-uniform
  const int64_t wrow = (wpr + spw - 1) / spw;
  const int64_t row = gw / wrow;
  const int64_t wseg = gw % wrow;
  const int64_t seg0 = wseg * spw;
  const int64_t seg1 = seg0 + spw < wpr ? seg0 + spw : wpr;
  const int b = static_cast<int>(row / p.dim);
  const int d = static_cast<int>(row % p.dim);
  const int64_t L = p.seqlen;
  const T* __restrict__ xr = static_cast<const T*>(p.x) + b * p.x_bs + d * p.x_cs;
  const T* __restrict__ dr = static_cast<const T*>(p.dout) + b * p.do_bs + d * p.do_cs;
  T* __restrict__ dxr = static_cast<T*>(p.dx) + b * p.dx_bs + d * p.dx_cs;
  const bool has_seq = p.seq_idx != nullptr;
  const int32_t* __restrict__ sr = has_seq ? p.seq_idx + b * p.s_bs : nullptr;

  __shared__ uint4 ringx[kCfStages][kCfThreads / 32][32][kVec];
  __shared__ uint4 ringd[kCfStages][kCfThreads / 32][32][kVec];
  auto issue = [&](int64_t seg, int stage) {
    const int64_t l = (seg * 32 + lane) * kN;
    if (seg < seg1 && p.vec_ok && l + kN <= L) {
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        cp_async16(&ringx[stage][warp][lane][v], xr + l + v * (16 / sizeof(T)));
        cp_async16(&ringd[stage][warp][lane][v], dr + l + v * (16 / sizeof(T)));
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int st = 0; st < kCfStages - 1; ++st) issue(seg0 + st, st);

  float carry[kH];
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
  float dw[kW + 1];
#pragma unroll
  for (int k = 0; k <= kW; ++k) dw[k] = 0.f;

  int stage = 0;
  for (int64_t seg = seg0; seg < seg1; ++seg) {
    issue(seg + kCfStages - 1, (stage + kCfStages - 1) % kCfStages);
    const int64_t l0 = (seg * 32 + lane) * kN;
    // lane 31: the first kH tokens after this segment (from memory; L2 hits)
    float hf[kH], hd[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      hf[j] = 0.f;
      hd[j] = 0.f;
      if (lane == 31) {
        const int64_t pos = l0 + kN + j;
        if (pos < L) {
          hf[j] = to_float(xr[pos]);
          hd[j] = to_float(dr[pos]);
        }
      }
    }
    cp_async_wait<kCfStages - 1>();
    const bool full = p.vec_ok && l0 + kN <= L;
    float xv[kH + kN + kH];  // positions l0-kH .. l0+kN+kH-1
    float dv[kN + kH];       // dout at l0 .. l0+kN+kH-1
    {
      RawVec<T, kN> cx, cd;
      if (full) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          reinterpret_cast<uint4*>(&cx)[v] = ringx[stage][warp][lane][v];
          reinterpret_cast<uint4*>(&cd)[v] = ringd[stage][warp][lane][v];
        }
      } else {
        load_raw_l<T, kN>(xr, l0, L, false, cx);
        load_raw_l<T, kN>(dr, l0, L, false, cd);
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        xv[kH + i] = to_float(cx.v[i]);
        dv[i] = to_float(cd.v[i]);
      }
    }
    stage = stage + 1 == kCfStages ? 0 : stage + 1;
    int sv[kH + kN + kH];
    if (has_seq) {
#pragma unroll
      for (int i = 0; i < kN; ++i) sv[kH + i] = l0 + i < L ? sr[(l0 + i) * p.s_ls] : -1;
    }
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      float v = __shfl_up_sync(0xffffffffu, xv[kN + j], 1);
      int s = has_seq ? __shfl_up_sync(0xffffffffu, sv[kN + j], 1) : 0;
      float vf = __shfl_down_sync(0xffffffffu, xv[kH + j], 1);
      float df = __shfl_down_sync(0xffffffffu, dv[j], 1);
      int sf = has_seq ? __shfl_down_sync(0xffffffffu, sv[kH + j], 1) : 0;
      if (lane == 0) {
        const int64_t pos = l0 - kH + j;
        v = carry[j];
        // before the start: the initial state's sequence (seq_idx[b, 0]) or none
        if (has_seq) s = pos >= 0 ? (pos < L ? sr[pos * p.s_ls] : -1) : (p.init != nullptr ? sr[0] : -1);
      }
      if (lane == 31) {
        const int64_t pos = l0 + kN + j;
        vf = hf[j];
        df = hd[j];
        if (has_seq) sf = pos < L ? sr[pos * p.s_ls] : -1;
      }
      xv[j] = v;
      xv[kH + kN + j] = vf;
      dv[kN + j] = df;
      if (has_seq) {
        sv[j] = s;
        sv[kH + kN + j] = sf;
      }
    }

    // g at positions l0 .. l0+kN+kH-1
    float g[kN + kH];
#pragma unroll
    for (int i = 0; i < kN + kH; ++i) {
      float gi = dv[i];
      if (p.silu) {
        float acc = bias;
        if (!has_seq) {
#pragma unroll
          for (int k = 0; k < kW; ++k) acc = fmaf(w[k], xv[i + k], acc);
        } else {
#pragma unroll
          for (int k = 0; k < kW; ++k) acc += sv[i + k] == sv[kH + i] ? w[k] * xv[i + k] : 0.f;
        }
        gi *= dsilu_f(acc);
      }
      if (has_seq && sv[kH + i] < 0) gi = 0.f;
      g[i] = gi;
    }

    // dx in 16-byte pieces
    constexpr int kPer = 16 / sizeof(T);
    const bool tail = p.dfinal != nullptr && l0 + kN > L - (p.width - 1);
#pragma unroll
    for (int h = 0; h < kN / kPer; ++h) {
      float o[kPer];
#pragma unroll
      for (int ii = 0; ii < kPer; ++ii) {
        const int i = h * kPer + ii;
        float acc = 0.f;
        if (!has_seq) {
#pragma unroll
          for (int j = 0; j < kW; ++j) acc = fmaf(w[kW - 1 - j], g[i + j], acc);
        } else {
#pragma unroll
          for (int j = 0; j < kW; ++j) acc += sv[kH + i + j] == sv[kH + i] ? w[kW - 1 - j] * g[i + j] : 0.f;
        }
        if (tail) acc += dfinal_at<T>(p, b, d, l0 + i);
        o[ii] = acc;
      }
      const int64_t lh = l0 + h * kPer;
      if (full) {
        store_vec<T, kPer>(dxr + lh, o);
      } else {
#pragma unroll
        for (int ii = 0; ii < kPer; ++ii)
          if (lh + ii < L) dxr[lh + ii] = from_float<T>(o[ii]);
      }
    }

    // weight / bias gradient of this lane's outputs (g is 0 past the end)
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (!has_seq) {
#pragma unroll
        for (int k = 0; k < kW; ++k) dw[k] = fmaf(g[i], xv[i + k], dw[k]);
      } else {
#pragma unroll
        for (int k = 0; k < kW; ++k) dw[k] += sv[i + k] == sv[kH + i] ? g[i] * xv[i + k] : 0.f;
      }
      dw[kW] += g[i];
    }
    if (p.dinit != nullptr && l0 == 0) {
      float g0[kH];
      int s0v[kH];
#pragma unroll
      for (int q = 0; q < kH; ++q) {
        g0[q] = g[q];
        s0v[q] = has_seq ? sv[kH + q] : 0;  // seq id at position q (lane 0 of segment 0: l0 == 0)
      }
      // outputs read the initial state only within the first sequence (seq_idx[b, 0])
      write_dinit<T, kW>(p, b, d, w, g0, s0v, has_seq, has_seq ? sv[kH] : 0);
    }
#pragma unroll
    for (int j = 0; j < kH; ++j) carry[j] = __shfl_sync(0xffffffffu, xv[kN + j], 31);
  }
  // warp reduction in a fixed order; one partial row per warp
#pragma unroll
  for (int k = 0; k <= kW; ++k) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) dw[k] += __shfl_xor_sync(0xffffffffu, dw[k], off);
  }
  if (lane == 0) {
    const int64_t part = (int64_t)b * wrow + wseg;
#pragma unroll
    for (int k = 0; k <= kW; ++k) p.partial[(part * (kW + 1) + k) * p.dim + d] = dw[k];
  }
}

template <typename T, int kW>
__global__ void __launch_bounds__(kClThreadsX* kClThreadsY, 2) bwd_cl_kernel(const ConvParams p, const int nchb,
                                                                         const int64_t ntiles, const int sub) {
  constexpr int kC = kClChannels;
  constexpr int kH = kW - 1;
  constexpr int G = kClGroup;
  const int64_t bid = blockIdx.x;
  const int chb = static_cast<int>(bid % nchb);
  const int64_t rest = bid / nchb;
  const int64_t tl = rest % ntiles;
  const int b = static_cast<int>(rest / ntiles);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c0 = (chb * kClThreadsX + tx) * kC;
  const bool active = c0 < p.dim;
  const int D = p.dim;
  const bool full = p.vec_ok && c0 + kC <= D;
  const int64_t L = p.seqlen;
  const int64_t t0 = tl * (int64_t)sub * kClThreadsY + (int64_t)ty * sub;
  const int64_t t1 = t0 + sub < L ? t0 + sub : L;
  const T* __restrict__ xb = static_cast<const T*>(p.x) + b * p.x_bs;
  const T* __restrict__ db = static_cast<const T*>(p.dout) + b * p.do_bs;
  T* __restrict__ dxb = static_cast<T*>(p.dx) + b * p.dx_bs;
  const bool has_seq = p.seq_idx != nullptr;
  const int32_t* __restrict__ sr = has_seq ? p.seq_idx + b * p.s_bs : nullptr;

  float w[kW][kC];
  float bias[kC];
  load_channel_params<kW, kC>(p, c0, D, w, bias);
  float dw[kW + 1][kC];
#pragma unroll
  for (int k = 0; k <= kW; ++k)
#pragma unroll
    for (int c = 0; c < kC; ++c) dw[k][c] = 0.f;

  if (active && t0 < L) {
    float xw[kW][kC];  // x at p-kH .. p
    float gw[kW][kC];  // g at p-kH .. p
    int sw[kW];
    float g0[kH][kC];
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      const int64_t pos = t0 - kH + j;
      if (pos >= 0) {
        RawVec<T, kC> r;
        load_raw<T, kC>(xb + pos * p.x_ls, true, c0, D, full, r);
#pragma unroll
        for (int c = 0; c < kC; ++c) xw[j + 1][c] = to_float(r.v[c]);
        sw[j + 1] = has_seq ? sr[pos * p.s_ls] : 0;
      } else {
#pragma unroll
        for (int c = 0; c < kC; ++c) xw[j + 1][c] = c0 + c < D ? init_value<T>(p, b, c0 + c, pos) : 0.f;
        sw[j + 1] = has_seq && p.init != nullptr ? sr[0] : -1;  // the initial state's sequence
      }
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        gw[j + 1][c] = 0.f;
        g0[j][c] = 0.f;
      }
    }
    const int64_t pend = t1 + kH;  // g is needed up to t1 + kH - 1 for dx of the last tokens
    for (int64_t pl = t0; pl < pend; pl += G) {
      RawVec<T, kC> rx[G], rd[G];
      int sc[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int64_t pos = pl + g;
        const bool valid = pos < pend && pos < L;
        load_raw<T, kC>(xb + (valid ? pos : 0) * p.x_ls, valid, c0, D, full, rx[g]);
        load_raw<T, kC>(db + (valid ? pos : 0) * p.do_ls, valid, c0, D, full, rd[g]);
        sc[g] = has_seq && valid ? sr[pos * p.s_ls] : -1;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int64_t pos = pl + g;
        // slide the windows by one token
#pragma unroll
        for (int j = 0; j < kH; ++j) {
#pragma unroll
          for (int c = 0; c < kC; ++c) {
            xw[j][c] = xw[j + 1][c];
            gw[j][c] = gw[j + 1][c];
          }
          sw[j] = sw[j + 1];
        }
#pragma unroll
        for (int c = 0; c < kC; ++c) xw[kH][c] = to_float(rx[g].v[c]);
        sw[kH] = sc[g];
        const int cur = sc[g];
#pragma unroll
        for (int c = 0; c < kC; ++c) {
          float gi = to_float(rd[g].v[c]);
          if (p.silu) {
            float acc = bias[c];
#pragma unroll
            for (int k = 0; k < kW; ++k) acc += (!has_seq || sw[k] == cur) ? w[k][c] * xw[k][c] : 0.f;
            gi *= dsilu_f(acc);
          }
          if (has_seq && cur < 0) gi = 0.f;
          gw[kH][c] = gi;
        }
        if (pos < t1) {
#pragma unroll
          for (int c = 0; c < kC; ++c) {
#pragma unroll
            for (int k = 0; k < kW; ++k) dw[k][c] += (!has_seq || sw[k] == cur) ? gw[kH][c] * xw[k][c] : 0.f;
            dw[kW][c] += gw[kH][c];
          }
        }
        // g at positions 0 .. kH-1 (for dinitial_states); kH may exceed one group
#pragma unroll
        for (int m = 0; m * G < kH; ++m) {
          if (m * G + g < kH && pl == (int64_t)m * G) {
#pragma unroll
            for (int c = 0; c < kC; ++c) g0[m * G + g < kH ? m * G + g : 0][c] = gw[kH][c];
          }
        }
        const int64_t q = pos - kH;
        if (q >= t0 && q < t1) {
          float o[kC];
#pragma unroll
          for (int c = 0; c < kC; ++c) {
            float acc = 0.f;
#pragma unroll
            for (int j = 0; j < kW; ++j) acc += (!has_seq || sw[j] == sw[0]) ? w[kH - j][c] * gw[j][c] : 0.f;
            o[c] = acc;
          }
          if (p.dfinal != nullptr && q >= L - (p.width - 1)) {
#pragma unroll
            for (int c = 0; c < kC; ++c)
              if (c0 + c < D) o[c] += dfinal_at<T>(p, b, c0 + c, q);
          }
          store_raw<T, kC>(dxb + q * p.dx_ls, c0, D, full, o);
        }
      }
    }
    if (p.dinit != nullptr && t0 == 0) {
      int s0v[kH];  // seq ids at positions 0 .. kH-1 (the initial state is seq_idx[b, 0]'s)
#pragma unroll
      for (int k = 0; k < kH; ++k) s0v[k] = has_seq && k < L ? sr[k * p.s_ls] : -1;
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        if (c0 + c >= D) continue;
        float wc[kW], gc[kH];
#pragma unroll
        for (int k = 0; k < kW; ++k) wc[k] = w[k][c];
#pragma unroll
        for (int k = 0; k < kH; ++k) gc[k] = g0[k][c];
        write_dinit<T, kW>(p, b, c0 + c, wc, gc, s0v, has_seq, has_seq ? sr[0] : 0);
      }
    }
  }
  // reduce the kClThreadsY sub-tiles of this block in shared memory, fixed order
  __shared__ float red[kClThreadsY][kW + 1][kClThreadsX * kC];
#pragma unroll
  for (int k = 0; k <= kW; ++k)
#pragma unroll
    for (int c = 0; c < kC; ++c) red[ty][k][tx * kC + c] = dw[k][c];
  __syncthreads();
  const int nvals = (kW + 1) * kClThreadsX * kC;
  const int64_t part = (int64_t)b * ntiles + tl;
  for (int i = ty * kClThreadsX + tx; i < nvals; i += kClThreadsX * kClThreadsY) {
    const int k = i / (kClThreadsX * kC);
    const int cc = i % (kClThreadsX * kC);
    const int d = chb * kClThreadsX * kC + cc;
    if (d >= D) continue;
    float s = 0.f;
#pragma unroll
    for (int y = 0; y < kClThreadsY; ++y) s += red[y][k][cc];
    p.partial[(part * (kW + 1) + k) * D + d] = s;
  }
}

// dweight[d, k], dbias[d] = fixed-order sums of the partial rows.
__global__ void dw_reduce_kernel(const float* __restrict__ partial, const int64_t nparts, const int kWp, const int D,
                                 const int width, void* dweight, const int w_dtype, void* dbias, const int b_dtype) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t total = (int64_t)(kWp + 1) * D;
  if (idx >= total) return;
  const int k = static_cast<int>(idx / D);
  const int d = static_cast<int>(idx % D);
  const int kk = k - (kWp - width);
  if (k < kWp && kk < 0) return;  // padded tap
  if (k == kWp && dbias == nullptr) return;
  const int64_t stride = total;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 4 <= nparts; i += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) acc[u] += partial[(i + u) * stride + idx];
  }
  for (; i < nparts; ++i) acc[0] += partial[i * stride + idx];
  const float s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  if (k < kWp) {
    store_any(dweight, w_dtype, (int64_t)d * width + kk, s);
  } else {
    store_any(dbias, b_dtype, d, s);
  }
}

struct BwdGeometry {
  int threads = 0;      // channel-first: threads per block
  int64_t nchunks = 0;  // channel-first: segments per row
  int64_t spw = 1;      // channel-first: segments per warp
  int64_t nwarps = 0;   // channel-first
  int nchb = 0;         // channel-last
  int64_t ntiles = 0;   // channel-last
  int sub = 0;          // channel-last: tokens per thread
  int64_t nparts = 0;
  int64_t blocks = 0;
};

template <typename T>
BwdGeometry geometry(const ConvParams& p, bool channel_last) {
  BwdGeometry g;
  if (!channel_last) {
    constexpr int kN = 32 / sizeof(T);
    const int64_t per_warp = 32 * kN;
    const int64_t warps = (p.seqlen + per_warp - 1) / per_warp;
    g.threads = kCfThreads;
    g.nchunks = warps;  // segments per row
    g.spw = 8;          // segments per warp, while that leaves >= 16 warps per SM
    while (g.spw > 1 && ((warps + g.spw - 1) / g.spw) * p.dim * p.batch < 16LL * p.num_sms * (kCfThreads / 32)) g.spw /= 2;
    const int64_t wrow = (warps + g.spw - 1) / g.spw;
    g.nparts = (int64_t)p.batch * wrow;
    g.nwarps = wrow * p.dim * p.batch;
    g.blocks = (g.nwarps + kCfThreads / 32 - 1) / (kCfThreads / 32);
  } else {
    const int per_block = kClThreadsX * kClChannels;
    g.nchb = (p.dim + per_block - 1) / per_block;
    g.sub = 64;
    auto nblocks = [&](int s) { return (int64_t)g.nchb * p.batch * ((p.seqlen + (int64_t)s * kClThreadsY - 1) / ((int64_t)s * kClThreadsY)); };
    while (g.sub > 16 && nblocks(g.sub) < 4LL * p.num_sms) g.sub /= 2;
    g.ntiles = (p.seqlen + (int64_t)g.sub * kClThreadsY - 1) / ((int64_t)g.sub * kClThreadsY);
    g.nparts = (int64_t)p.batch * g.ntiles;
    g.blocks = nblocks(g.sub);
  }
  return g;
}

BwdGeometry geometry_any(const ConvParams& p, bool channel_last) {
  return dispatch_dtype(p.x_dtype, [&](auto tag) { return geometry<typename decltype(tag)::type>(p, channel_last); });
}

struct BwdLaunch {
  template <typename T, int kW>
  static void run(const ConvParams& p, cudaStream_t stream) {
    const BwdGeometry g = geometry<T>(p, p.channel_last);
    if (!p.channel_last) {
      bwd_cf_kernel<T, kW><<<static_cast<unsigned>(g.blocks), g.threads, 0, stream>>>(p, g.nchunks, g.spw, g.nwarps);
      CC1D_CUDA_LAUNCH_CHECK();
    } else {
      bwd_cl_kernel<T, kW><<<static_cast<unsigned>(g.blocks), dim3(kClThreadsX, kClThreadsY), 0, stream>>>(
          p, g.nchb, g.ntiles, g.sub);
      CC1D_CUDA_LAUNCH_CHECK();
    }
    const int64_t total = (int64_t)(kW + 1) * p.dim;
    const int threads = 256;
    dw_reduce_kernel<<<static_cast<unsigned>((total + threads - 1) / threads), threads, 0, stream>>>(
        p.partial, g.nparts, kW, p.dim, p.width, p.dweight, p.w_dtype, p.dbias, p.b_dtype);
    CC1D_CUDA_LAUNCH_CHECK();
  }
};

}  // namespace

int bwd_padded_width(int width) { return width <= 4 ? 4 : 8; }

namespace bwd_general {

int64_t num_parts(const ConvParams& p) { return geometry_any(p, p.channel_last).nparts; }

void launch(const ConvParams& p, cudaStream_t stream) { launch_general<BwdLaunch>(p, stream); }

}  // namespace bwd_general
}  // namespace causal_conv1d_cuda
