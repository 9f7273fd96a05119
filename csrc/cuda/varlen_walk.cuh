// The token walk of the varlen prefill (docs/serving.md), shared by the general kernel
// (varlen_general.cu: one channel per thread, any strides and dtypes) and the channel-last fast
// kernel (varlen_cl_fast.cu: 16 bytes of channels per thread). A thread owns kC channels and a chunk
// [c0, c1) of the packed tokens and walks it with a W-1 token window in registers; a Lane (below)
// moves kC channels of one token between memory and registers.
//
// Who does what, so that one launch needs no host schedule and no thread reads a cache line another
// may be writing:
//   * the thread whose chunk holds a request's first token (its "owner") reads the request's initial
//     state, computes the request's first W-1 outputs (the only ones that read it), running up to
//     W-2 tokens past its chunk when needed (the next chunk's thread skips them), and writes the
//     final state, loading the request's last W-1 inputs again when the request outlasts its chunk;
//   * a prefix-caching boundary state (the W-1 inputs before a block boundary) is written from the
//     window by the thread that computes the boundary token's output;
//   * tokens of no request and tokens of skipped requests (pad_slot_id, or a line outside the
//     cache) are written as 0 by the thread of their chunk.
// Index values are clamped (query_start_loc into [0, total]) or skipped (lines), never trusted.
#pragma once

#include <cstdint>

#include "varlen_device.cuh"

namespace causal_conv1d_cuda {
namespace serving {

__device__ __forceinline__ int64_t qsl_at(const VarlenParams& p, int i) {
  return clamp64(p.qsl[i], 0, p.total);
}

// The last request s with query_start_loc[s] <= c0 (-1 when c0 is before the first), for a block
// whose threads share c0: a count over the whole table, blockDim.x entries a round (every thread of
// the block must call it).
__device__ __forceinline__ int block_find_request(const VarlenParams& p, int64_t c0) {
  int count = 0;
  for (int base = 0; base <= p.batch; base += blockDim.x) {
    const int i = base + static_cast<int>(threadIdx.x);
    count += __syncthreads_count(i <= p.batch && qsl_at(p, i) <= c0);
  }
  return count - 1;
}

// kAct: the activation, -1 read from p.silu at run time, 0 none, 1 silu (fixed: no branch per output).
template <int kW, int kU, typename Lane, int kAct = -1>
__device__ __forceinline__ void varlen_walk(const VarlenParams& p, const Lane& lane, int64_t c0, int64_t c1, int s) {
  const bool silu = kAct < 0 ? p.silu : kAct == 1;
  constexpr int kC = Lane::kC;
  constexpr int kH = kW - 1;
  const int hr = p.width - 1;  // the real window: slots kH - hr .. kH - 1 (the others have zero taps)
  const int B = p.batch;
  float w[kC][kW], bias[kC];
  bool have_w = false;  // the weights are loaded once the first loads of x are in flight
  int64_t t = c0;
  if (s < 0) {  // tokens before the first request
    const int64_t q0 = qsl_at(p, 0);
    const int64_t e = q0 < c1 ? q0 : c1;
    for (; t < e; ++t) lane.out_zero(t);
    s = 0;
  }
  while (t < c1) {
    while (s < B && qsl_at(p, s + 1) <= t) ++s;  // requests ended by t (the one just walked, empty ones)
    if (s >= B) {  // tokens after the last request
      for (; t < c1; ++t) lane.out_zero(t);
      break;
    }
    const int64_t st = qsl_at(p, s), en = qsl_at(p, s + 1);  // st <= t < en
    int64_t c_in = 0, c_out = 0;
    if (!request_lines(p.ci, s, p.pad_slot_id, p.lines, c_in, c_out)) {
      const int64_t e = en < c1 ? en : c1;
      for (; t < e; ++t) lane.out_zero(t);
      continue;
    }
    const bool owner = st >= c0;
    const int64_t own_end = st + hr > c1 ? st + hr : c1;
    const int64_t seg_end = owner ? (en < own_end ? en : own_end) : (en < c1 ? en : c1);
    const int64_t t0 = owner ? st : (t > st + hr ? t : st + hr);
    t = seg_end;
    if (t0 >= seg_end) continue;

    float win[kH][kC];
    if (owner) {
      const bool init = p.has_init != nullptr && p.has_init[s] != 0;
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int e = hr - (kH - j);  // cache entry of slot j
        if (init && e >= 0) {
          lane.state_load(c_in, e, win[j]);
        } else {
#pragma unroll
          for (int c = 0; c < kC; ++c) win[j][c] = 0.f;
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int64_t pos = t0 - kH + j;
        if (pos >= st) {
          lane.x(pos, win[j]);
        } else {
#pragma unroll
          for (int c = 0; c < kC; ++c) win[j][c] = 0.f;
        }
      }
    }

    Boundaries bd;
    bd.init(p.ci, s, st, en - st);
    int jb = bd.count > 0 ? bd.first_at_or_after(t0, st) : 0;
    int64_t nb = jb < bd.count ? bd.token(jb) : INT64_MAX;

    typename Lane::Raw xr[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (t0 + u < seg_end) xr[u] = lane.load_raw(t0 + u);
    if (!have_w) {
      load_weights<VarlenParams, kC, kW>(p, lane.ch, w, bias);
      have_w = true;
    }
    for (int64_t tt = t0; tt < seg_end; tt += kU) {
      typename Lane::Raw nx[kU];  // the next kU tokens' loads, in flight while these are computed
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (tt + kU + u < seg_end) nx[u] = lane.load_raw(tt + kU + u);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if (tt + u < seg_end) {
          float xv[kC];
          lane.unpack(xr[u], xv);
          if (tt + u == nb) {  // a block boundary: the window is its state
            const int64_t line = bd.line(p.ci, jb);
            // the request's input line is written only by its owner, after it has read it (below)
            if (line >= 0 && line < p.lines && (owner || line != c_in)) {
#pragma unroll
              for (int j = 0; j < kH; ++j)
                if (j >= kH - hr) lane.state_store(line, j - (kH - hr), win[j]);
            }
            ++jb;
            nb = jb < bd.count ? bd.token(jb) : INT64_MAX;
          }
          float o[kC];
          conv_out<kC, kW>(w, bias, win, xv, silu, o);
          lane.out(tt + u, o);
          shift_in<kC, kH>(win, xv);
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) xr[u] = nx[u];
    }

    if (owner) {  // boundaries past the walk whose line is the input line: read, so now written
      for (int j = 0; j < bd.count; ++j) {
        const int64_t tok = bd.token(j);
        if (tok < seg_end || tok <= st || bd.line(p.ci, j) != c_in) continue;
#pragma unroll
        for (int jj = 0; jj < kH; ++jj) {
          if (jj >= kH - hr) {
            float v[kC];
            lane.x(tok - kH + jj, v);
            lane.state_store(c_in, jj - (kH - hr), v);
          }
        }
      }
    }
    if (owner) {  // the final state: the last hr inputs of cat(initial state, the request's tokens)
      if (seg_end == en) {  // all of them went through the window
#pragma unroll
        for (int j = 0; j < kH; ++j)
          if (j >= kH - hr) lane.state_store(c_out, j - (kH - hr), win[j]);
      } else {  // the request outlasts the walk (then it has more than hr tokens)
#pragma unroll
        for (int j = 0; j < kH; ++j) {
          if (j >= kH - hr) {
            float v[kC];
            lane.x(en - kH + j, v);
            lane.state_store(c_out, j - (kH - hr), v);
          }
        }
      }
    }
  }
}

}  // namespace serving
}  // namespace causal_conv1d_cuda
