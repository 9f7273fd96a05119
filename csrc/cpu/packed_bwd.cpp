// The CPU packed-sequence backward (op causal_conv1d::packed_bwd; the forward: packed_fwd.cpp):
// dx, dweight, dbias and the per-sequence dinitial_states, with the gradient of the per-sequence
// final states (dfinal_states) flowing in.
//
// Per sequence i (n tokens, xp = cat(initial_i, x_i), z_j = bias + sum_k w[k] xp[j + k]):
//   g_j = dout_j * act'(z_j);  dxp[p] = sum_k w[k] g[p - k] (0 <= p - k < n) + dfinal_i[p - n] (p >= n);
//   dx_i[t] = dxp[W - 1 + t], dinitial_i = dxp[0 : W - 1]; dweight[k] += sum_j g_j xp[j + k], dbias += sum_j g_j.
// One task per channel walks every sequence in order, so dweight / dbias are summed in one fixed
// order: bit-identical reruns whatever the thread count.
#include "dispatch.h"

#include <tuple>
#include <vector>

namespace causal_conv1d {
namespace cpu {

namespace packed_bwd_general {
namespace {

template <typename T, int W>
void run(const PackedArgs& a) {
  using A = acc_t<T>;
  constexpr int H = W - 1;
  const int64_t D = a.dim;
  const Strided<const T> x(a.x), dout(a.dout);  // (1, dim, total)
  const Strided<T> dx(a.dx);
  const Strided<const T> init(a.init), dfin(a.dfinal);  // (nseq, dim, W-1)
  const Strided<T> dinit(a.dinit);
  const A* wp = static_cast<const A*>(a.weight);
  const A* bp = static_cast<const A*>(a.bias);
  A* dwp = static_cast<A*>(a.dweight);
  A* dbp = static_cast<A*>(a.dbias);
  parallel_for(0, D, 1, [&](int64_t d0, int64_t d1) {
    std::vector<A> ext, g, dext;
    for (int64_t d = d0; d < d1; ++d) {
      const A* w = wp + d * W;
      const A bv = bp ? bp[d] : A(0);
      A dw[W] = {};
      A db = A(0);
      for (int64_t i = 0; i < a.nseq; ++i) {
        const int64_t start = a.start(i), n = a.tokens(i);
        ext.assign(H + n, A(0));
        g.assign(n, A(0));
        dext.assign(H + n, A(0));
        for (int j = 0; j < H; ++j) ext[j] = init.p ? static_cast<A>(init.at(i, d, j)) : A(0);
        for (int64_t t = 0; t < n; ++t) ext[H + t] = static_cast<A>(x.at(0, d, start + t));
        for (int64_t j = 0; j < n; ++j) {
          A z = bv;
CC1D_UNROLL
          for (int k = 0; k < W; ++k) z += w[k] * ext[j + k];
          const A dy = static_cast<A>(dout.at(0, d, start + j));
          const A gj = a.silu ? dy * silu_grad(z) : dy;
          g[j] = gj;
          db += gj;
CC1D_UNROLL
          for (int k = 0; k < W; ++k) {
            dw[k] += gj * ext[j + k];
            dext[j + k] += w[k] * gj;
          }
        }
        if (dfin.p) {
          for (int j = 0; j < H; ++j) dext[n + j] += static_cast<A>(dfin.at(i, d, j));
        }
        for (int64_t t = 0; t < n; ++t) dx.at(0, d, start + t) = static_cast<T>(dext[H + t]);
        if (dinit.p) {
          for (int j = 0; j < H; ++j) dinit.at(i, d, j) = static_cast<T>(dext[j]);
        }
      }
      for (int k = 0; k < W; ++k) dwp[d * W + k] = dw[k];
      if (dbp) dbp[d] = db;
    }
  });
}

}  // namespace

void launch(const PackedArgs& a) {
  dispatch_dtype_width(a.x->scalar_type(), a.width, [&](auto tag, auto w) {
    run<typename decltype(tag)::type, decltype(w)::value>(a);
  });
}

}  // namespace packed_bwd_general

std::tuple<Tensor, Tensor, Tensor, Tensor> packed_bwd_cpu(const Tensor& x, const Tensor& weight,
                                                          const OptTensor& bias, const Tensor& dout,
                                                          const Tensor& cu_seqlens, const OptTensor& initial_states,
                                                          const OptTensor& dfinal_states, bool return_dinitial_states,
                                                          bool silu) {
  const int64_t n = check_packed_bwd_args(x, weight, bias, dout, cu_seqlens, initial_states, dfinal_states,
                                          return_dinitial_states, kMaxWidth, /*allow_float64=*/true);
  const int64_t D = x.size(1), T = x.size(2), W = weight.size(1);
  check_cu_seqlens_values(cu_seqlens.const_data_ptr<int32_t>(), cu_seqlens.stride(0), n, T);
  const bool cl = is_channel_last(x);
  const ScalarType xt = x.scalar_type(), wt = weight.scalar_type(), acc = acc_dtype(x);
  Tensor dx = empty_bdl(1, D, T, cl, xt, x);
  Tensor dinit = return_dinitial_states ? empty_bdl(n, D, W - 1, cl, xt, x) : alloc_empty({0}, xt, x);
  Tensor dwf = alloc_zeros({D, W}, acc, x);
  Tensor dbf = alloc_zeros({D}, acc, x);
  if (D > 0 && n > 0) {
    Tensor wf, bf;
    PackedArgs a = packed_inputs(x, weight, bias, cu_seqlens, initial_states, n, silu, wf, bf);
    a.dout = &dout;
    a.dfinal = dfinal_states.has_value() ? &*dfinal_states : nullptr;
    a.dx = &dx;
    a.dinit = return_dinitial_states ? &dinit : nullptr;
    a.dweight = dwf.mutable_data_ptr();
    a.dbias = dbf.mutable_data_ptr();
    run_packed_bwd(a);
  }
  Tensor dweight = to_dtype(dwf, wt);
  Tensor dbias = bias.has_value() ? to_dtype(dbf, bias->scalar_type()) : alloc_empty({0}, wt, x);
  return {dx, dweight, dbias, dinit};
}

}  // namespace cpu
}  // namespace causal_conv1d
