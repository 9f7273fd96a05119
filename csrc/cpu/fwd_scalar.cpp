// The scalar path of the CPU forward: every dtype (float64 too), any CPU or compiler, and
// ATEN_CPU_CAPABILITY=default. Channel-first: one task per (batch, channel) row; the row is converted
// to the accumulation type in chunks of kChunk positions (plus the W-1 positions before them), then
// an unrolled W-tap loop over the chunk. Channel-last: one task per (batch, block of positions); the
// W taps accumulate over all channels of a position. A residual (FwdArgs::residual) is added to each
// output in the accumulation type before the one rounding to T; its test is made per row or chunk,
// outside the loops over positions or channels.
#include "dispatch.h"

#include <vector>

namespace causal_conv1d {
namespace cpu {
namespace {

template <typename T, int W>
void fwd_cf_rows_scalar(const FwdArgs& a, int64_t r0, int64_t r1) {
  using A = acc_t<T>;
  const int64_t D = a.dim, L = a.seqlen;
  const FwdView<T> v(a);
  std::vector<A> win(kChunk + W - 1), obuf(kChunk);
  std::vector<int32_t> sw(v.seq ? kChunk + W - 1 : 0);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / D, d = r % D;
    const T* xr = v.x.ptr(b, d);
    T* orow = v.out.ptr(b, d);
    const T* rr = v.res.p ? v.res.ptr(b, d) : nullptr;  // unit stride along seqlen (x's layout)
    A w[W];
    for (int k = 0; k < W; ++k) w[k] = v.w[d * W + k];
    const A bv = v.bias ? v.bias[d] : A(0);
    // before the start: the initial state, which belongs to the row's first sequence (seq_idx[b, 0])
    const int32_t pre_seq = v.seq && v.init && L > 0 ? v.seq[b * L] : kNoSeq;
    for (int j = 0; j < W - 1; ++j) {
      win[j] = v.init ? v.init[r * (W - 1) + j] : A(0);
      if (v.seq) sw[j] = pre_seq;
    }
    if constexpr (std::is_same_v<T, A>) {
      if (!v.seq) {
        // Input already in the accumulation type: read x in place (no chunk copy). The first
        // W-1 outputs take their earlier taps from the initial states in win.
        const int64_t head = std::min<int64_t>(W - 1, L);
        for (int64_t i = 0; i < head; ++i) win[W - 1 + i] = xr[i];
        conv_window<W, A>(win.data(), w, bv, obuf.data(), head);
        for (int64_t i = 0; i < head; ++i) orow[i] = (a.silu ? silu(obuf[i]) : obuf[i]) + (rr ? rr[i] : A(0));
        if (L > W - 1) {
          T* __restrict o = orow + (W - 1);
          conv_window<W, A>(xr, w, bv, o, L - (W - 1));
          if (a.silu) {
            for (int64_t i = 0; i < L - (W - 1); ++i) o[i] = silu(o[i]);
          }
          if (rr) {  // T is the accumulation type: adding in place rounds once
            for (int64_t i = 0; i < L - (W - 1); ++i) o[i] += rr[W - 1 + i];
          }
        }
        continue;
      }
    }
    for (int64_t l0 = 0; l0 < L; l0 += kChunk) {
      const int64_t n = std::min(kChunk, L - l0);
      A* wv = win.data() + (W - 1);
      for (int64_t i = 0; i < n; ++i) wv[i] = static_cast<A>(xr[l0 + i]);
      if (v.seq) {
        const int32_t* srow = v.seq + b * L + l0;
        std::copy(srow, srow + n, sw.data() + (W - 1));
        conv_window_seq<W, A>(win.data(), sw.data(), w, bv, obuf.data(), n);
      } else {
        conv_window<W, A>(win.data(), w, bv, obuf.data(), n);
      }
      if (rr) {
        for (int64_t i = 0; i < n; ++i)
          orow[l0 + i] = static_cast<T>((a.silu ? silu(obuf[i]) : obuf[i]) + static_cast<A>(rr[l0 + i]));
      } else if (a.silu) {
        for (int64_t i = 0; i < n; ++i) orow[l0 + i] = static_cast<T>(silu(obuf[i]));
      } else {
        for (int64_t i = 0; i < n; ++i) orow[l0 + i] = static_cast<T>(obuf[i]);
      }
      for (int j = 0; j < W - 1; ++j) {  // carry the last W-1 inputs into the next chunk
        win[j] = win[n + j];
        if (v.seq) sw[j] = sw[n + j];
      }
    }
  }
}

template <typename T, int W>
void fwd_cl_tasks_scalar(const FwdArgs& a, int64_t t0, int64_t t1, int64_t rows, int64_t nblocks) {
  using A = acc_t<T>;
  const int64_t D = a.dim, L = a.seqlen;
  const FwdView<T> v(a);
  std::vector<A> acc(D);
  A* __restrict ac = acc.data();
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t b = t / nblocks;
    const int64_t l0 = (t % nblocks) * rows, l1 = std::min(L, l0 + rows);
    for (int64_t l = l0; l < l1; ++l) {
      T* __restrict orow = v.out.ptr(b, 0, l);
      const T* __restrict rrow = v.res.p ? v.res.ptr(b, 0, l) : nullptr;  // unit stride along dim
      // out[d] = act(ac[d]) + residual[d] (the residual rows: one test per row)
      auto store_res = [&]() {
        for (int64_t d = 0; d < D; ++d)
          orow[d] = static_cast<T>((a.silu ? silu(ac[d]) : ac[d]) + static_cast<A>(rrow[d]));
      };
      const int32_t cur = v.seq ? v.seq[b * L + l] : 0;
      if (cur < 0) {  // padding: 0, plus the residual
        if (rrow) {
          for (int64_t d = 0; d < D; ++d) orow[d] = rrow[d];
        } else {
          for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(A(0));
        }
        continue;
      }
      bool all_taps = l >= W - 1;  // every tap is an input of the same sequence
      for (int k = 0; all_taps && v.seq && k < W - 1; ++k) all_taps = v.seq[b * L + l - (W - 1) + k] == cur;
      if (all_taps) {
        // The common case: W taps accumulated in registers, one pass over the channels.
        const T* __restrict rows[W];
        for (int k = 0; k < W; ++k) rows[k] = v.x.ptr(b, 0, l - (W - 1) + k);
        auto taps = [&](int64_t d) {
          A z = v.bias[d];
CC1D_UNROLL
          for (int k = 0; k < W; ++k) z += v.w[k * D + d] * static_cast<A>(rows[k][d]);
          return z;
        };
        if (rrow) {
          for (int64_t d = 0; d < D; ++d) ac[d] = taps(d);
          store_res();
        } else if (a.silu) {
          for (int64_t d = 0; d < D; ++d) ac[d] = taps(d);
          for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(silu(ac[d]));
        } else {
          for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(taps(d));
        }
        continue;
      }
      if (v.bias) {
        for (int64_t d = 0; d < D; ++d) ac[d] = v.bias[d];
      } else {
        for (int64_t d = 0; d < D; ++d) ac[d] = A(0);
      }
      for (int k = 0; k < W; ++k) {
        const int64_t pos = l - (W - 1) + k;
        const A* __restrict wk = v.w + k * D;
        if (pos < 0) {
          if (!v.init || (v.seq && v.seq[b * L] != cur)) continue;  // the initial state is the first sequence's
          const A* __restrict ir = v.init + (b * (W - 1) + (pos + W - 1)) * D;
          for (int64_t d = 0; d < D; ++d) ac[d] += wk[d] * ir[d];
        } else {
          if (v.seq && v.seq[b * L + pos] != cur) continue;
          const T* __restrict xr = v.x.ptr(b, 0, pos);
          for (int64_t d = 0; d < D; ++d) ac[d] += wk[d] * static_cast<A>(xr[d]);
        }
      }
      if (rrow) {
        store_res();
      } else if (a.silu) {
        for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(silu(ac[d]));
      } else {
        for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(ac[d]);
      }
    }
  }
}

}  // namespace

namespace fwd_scalar {

void launch(const FwdArgs& a) {
  run_fwd_kernels</*kWithDouble=*/true>(
      a,
      [&](auto tag, auto w, int64_t r0, int64_t r1) {
        fwd_cf_rows_scalar<typename decltype(tag)::type, decltype(w)::value>(a, r0, r1);
      },
      [&](auto tag, auto w, int64_t t0, int64_t t1, int64_t rows, int64_t nblocks) {
        fwd_cl_tasks_scalar<typename decltype(tag)::type, decltype(w)::value>(a, t0, t1, rows, nblocks);
      });
}

}  // namespace fwd_scalar
}  // namespace cpu
}  // namespace causal_conv1d
