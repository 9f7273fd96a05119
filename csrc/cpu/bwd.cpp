// The CPU backward op and its one path. One task per channel, looping over the batch in order, so
// dweight/dbias are summed in a fixed order (deterministic by construction, independent of the
// thread count). A channel-last x is made contiguous first.
#include "dispatch.h"

#include <tuple>
#include <vector>

namespace causal_conv1d {
namespace cpu {
namespace {

template <typename T, int W>
void bwd_channel_first(const BwdArgs& a) {
  using A = acc_t<T>;
  constexpr int H = W - 1;  // halo
  const int64_t B = a.batch, D = a.dim, L = a.seqlen;
  const T* xp = a.x->const_data_ptr<T>();
  const T* gp = a.dout->const_data_ptr<T>();
  T* dxp = a.dx->mutable_data_ptr<T>();
  const int64_t sxb = a.x->stride(0), sxd = a.x->stride(1);
  const int64_t sgb = a.dout->stride(0), sgd = a.dout->stride(1);
  const int64_t sdb = a.dx->stride(0), sdd = a.dx->stride(1);
  const A* wp = static_cast<const A*>(a.weight);
  const A* bp = static_cast<const A*>(a.bias);
  const A* ip = static_cast<const A*>(a.init);
  const A* fp = static_cast<const A*>(a.dfinal);
  A* dwp = static_cast<A*>(a.dweight);
  A* dbp = static_cast<A*>(a.dbias);
  A* dip = static_cast<A*>(a.dinit);
  const int32_t* sp = a.seq;
  const bool need_z = a.silu;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(B * L, 1));
  parallel_for(0, D, grain, [&](int64_t d0, int64_t d1) {
    // xw[i]: input at position i - H (i in [0, L + H)); dz[m]: output grad at position m - H
    // (m in [0, L + 2H), zero outside [0, L)); sw: seq ids aligned with dz's indexing.
    std::vector<A> xw(L + H), dz(L + 2 * H, A(0)), gx(L + H), z(need_z ? L : 0);
    std::vector<int32_t> sw(sp ? L + 2 * H : 0, kNoSeq);
    for (int64_t d = d0; d < d1; ++d) {
      A w[W];
      for (int k = 0; k < W; ++k) w[k] = wp[d * W + k];
      const A bv = bp ? bp[d] : A(0);
      double dw[W] = {};
      double db = 0;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t r = b * D + d;
        const T* xr = xp + b * sxb + d * sxd;
        const T* gr = gp + b * sgb + d * sgd;
        T* dxr = dxp + b * sdb + d * sdd;
        for (int j = 0; j < H; ++j) xw[j] = ip ? ip[r * H + j] : A(0);
        for (int64_t l = 0; l < L; ++l) xw[H + l] = static_cast<A>(xr[l]);
        if (sp) {
          std::copy(sp + b * L, sp + (b + 1) * L, sw.data() + H);
          // positions before the start: the initial state's sequence (seq_idx[b, 0]) or none
          std::fill(sw.data(), sw.data() + H, ip && L > 0 ? sp[b * L] : kNoSeq);
        }
        if (need_z) {
          if (sp) {
            conv_window_seq<W, A>(xw.data(), sw.data(), w, bv, z.data(), L);
          } else {
            conv_window<W, A>(xw.data(), w, bv, z.data(), L);
          }
        }
        A* dzv = dz.data() + H;
        for (int64_t t = 0; t < L; ++t) {
          A g = static_cast<A>(gr[t]);
          if (need_z) g *= silu_grad(z[t]);
          dzv[t] = g;
        }
        if (sp) {
          for (int64_t t = 0; t < L; ++t) {
            if (sw[H + t] < 0) dzv[t] = A(0);  // padding: the output is a constant 0
          }
        }
        // Gradient w.r.t. the window input xw[i]: sum_k w[k] * dz[i - k + H] (output i - k).
        if (sp) {
          for (int64_t i = 0; i < L + H; ++i) {
            const int32_t s = sw[i];
            A acc = A(0);
            for (int k = 0; k < W; ++k) {
              acc += sw[i - k + H] == s ? w[k] * dz[i - k + H] : A(0);
            }
            gx[i] = acc;
          }
        } else {
          const A* dzp = dz.data();
          A* gxp = gx.data();
          for (int64_t i = 0; i < L + H; ++i) {
            A acc = A(0);
CC1D_UNROLL
            for (int k = 0; k < W; ++k) acc += w[k] * dzp[i - k + H];
            gxp[i] = acc;
          }
        }
        if (fp) {  // final_states = xw[L .. L + H)
          for (int j = 0; j < H; ++j) gx[L + j] += fp[r * H + j];
        }
        for (int64_t l = 0; l < L; ++l) dxr[l] = static_cast<T>(gx[H + l]);
        if (dip) {
          for (int j = 0; j < H; ++j) dip[r * H + j] = gx[j];
        }
        // dweight[k] += sum_t dz[t] * xw[t + k]; dbias += sum_t dz[t]. Eight independent lanes so
        // the compiler can vectorise the reduction (a fixed order: deterministic).
        A lanes[W + 1][8] = {};
        int64_t t = 0;
        for (; t + 8 <= L; t += 8) {
          for (int j = 0; j < 8; ++j) {
            const A g = dzv[t + j];
            for (int k = 0; k < W; ++k) {
              const bool on = !sp || sw[t + j + k] == sw[H + t + j];
              lanes[k][j] += on ? g * xw[t + j + k] : A(0);
            }
            lanes[W][j] += g;
          }
        }
        for (; t < L; ++t) {
          const A g = dzv[t];
          for (int k = 0; k < W; ++k) {
            const bool on = !sp || sw[t + k] == sw[H + t];
            lanes[k][0] += on ? g * xw[t + k] : A(0);
          }
          lanes[W][0] += g;
        }
        for (int k = 0; k <= W; ++k) {
          A s = A(0);
          for (int j = 0; j < 8; ++j) s += lanes[k][j];
          if (k < W) {
            dw[k] += s;
          } else {
            db += s;
          }
        }
      }
      for (int k = 0; k < W; ++k) dwp[d * W + k] = static_cast<A>(dw[k]);
      if (dbp) dbp[d] = static_cast<A>(db);
    }
  });
}

}  // namespace

namespace bwd_general {

void launch(const BwdArgs& a) {
  dispatch_dtype_width(a.x->scalar_type(), a.width, [&](auto tag, auto w) {
    bwd_channel_first<typename decltype(tag)::type, decltype(w)::value>(a);
  });
}

}  // namespace bwd_general

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_cpu(
    const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& dout,
    const OptTensor& seq_idx, const OptTensor& initial_states,
    const OptTensor& dfinal_states, bool return_dinitial_states, bool silu) {
  check_bwd_args(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, return_dinitial_states, kMaxWidth,
                 /*allow_float64=*/true);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const bool channel_last = is_channel_last(x);
  const ScalarType acc = acc_dtype(x);
  auto channel_first = [](const Tensor& t) { return t.stride(2) == 1 || t.size(2) <= 1 ? t : as_contiguous(t); };
  const Tensor xc = channel_first(x);
  const Tensor gc = channel_first(dout);
  const ScalarType xt = x.scalar_type();
  Tensor dx = empty_bdl(B, D, L, channel_last, xt, x);
  Tensor dxc = channel_last ? alloc_empty({B, D, L}, xt, x) : dx;
  Tensor wf = as_contiguous(to_dtype(weight, acc));
  Tensor bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : Tensor();
  Tensor seq = seq_idx.has_value() ? as_contiguous(*seq_idx) : Tensor();
  Tensor init = initial_states.has_value() ? as_contiguous(to_dtype(*initial_states, acc)) : Tensor();
  Tensor dfin = dfinal_states.has_value() ? as_contiguous(to_dtype(*dfinal_states, acc)) : Tensor();
  Tensor dw = alloc_zeros({D, W}, acc, x);
  Tensor dbias = bias.has_value() ? alloc_zeros({D}, acc, x) : Tensor();
  Tensor dinit = return_dinitial_states ? alloc_zeros({B, D, W - 1}, acc, x) : Tensor();
  if (B > 0 && D > 0) {
    BwdArgs a{B,
              D,
              L,
              W,
              &xc,
              &gc,
              &dxc,
              wf.const_data_ptr(),
              bf.defined() ? bf.const_data_ptr() : nullptr,
              seq.defined() ? seq.const_data_ptr<int32_t>() : nullptr,
              init.defined() ? init.const_data_ptr() : nullptr,
              dfin.defined() ? dfin.const_data_ptr() : nullptr,
              dw.data_ptr(),
              dbias.defined() ? dbias.data_ptr() : nullptr,
              dinit.defined() ? dinit.data_ptr() : nullptr,
              silu};
    run_bwd(a);
  }
  if (channel_last) copy_into(dx, dxc);
  Tensor dweight = to_dtype(dw, weight.scalar_type());
  Tensor dbias_out = bias.has_value() ? to_dtype(dbias, bias->scalar_type()) : alloc_empty({0}, weight.scalar_type(), x);
  Tensor dinit_out;
  if (return_dinitial_states) {
    dinit_out = empty_bdl(B, D, W - 1, channel_last, xt, x);
    copy_into(dinit_out, dinit);
  } else {
    dinit_out = alloc_empty({0}, xt, x);
  }
  return {dx, dweight, dbias_out, dinit_out};
}

}  // namespace cpu
}  // namespace causal_conv1d
