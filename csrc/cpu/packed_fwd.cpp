// The CPU packed-sequence forward (op causal_conv1d::packed_fwd; checks: csrc/checks.h; semantics:
// docs/package.md, "Packed sequences"): x (1, dim, total_tokens) holds n sequences back to back,
// sequence i is tokens [cu_seqlens[i], cu_seqlens[i + 1]); each starts from its own initial state
// (or zeros) and ends with its own final state, the last width - 1 inputs of cat(initial, x_i). A
// residual (1, dim, total_tokens) is added to every output in the accumulation type (conv_walk).
//
// The op checks cu_seqlens' values (they are on the host here), allocates and calls the op's
// dispatch table (dispatch.cpp); its one path, packed_fwd_general, runs a task per (sequence,
// channel) that walks the sequence's tokens with a W-tap window in the accumulation type.
#include "dispatch.h"

#include <tuple>
#include <vector>

namespace causal_conv1d {
namespace cpu {

namespace packed_fwd_general {
namespace {

template <typename T, int W>
void run(const PackedArgs& a) {
  using A = acc_t<T>;
  constexpr int H = W - 1;
  const int64_t D = a.dim;
  const Strided<const T> x(a.x), init(a.init);  // (1, dim, total), (nseq, dim, W-1)
  const Strided<T> out(a.out), fin(a.final_states);
  const Strided<const T> res(a.residual);
  const A* wp = static_cast<const A*>(a.weight);
  const A* bp = static_cast<const A*>(a.bias);
  parallel_for(0, a.nseq * D, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / D, d = r % D;
      const int64_t start = a.start(i), n = a.tokens(i);
      const T* xr = x.ptr(0, d, start);
      // ext[e] = cat(initial, x_i)[e], e in [0, H + n)
      T ini[H > 0 ? H : 1];
      for (int j = 0; j < H; ++j) ini[j] = init.p ? init.at(i, d, j) : static_cast<T>(A(0));
      A win[H > 0 ? H : 1];
      for (int j = 0; j < H; ++j) win[j] = static_cast<A>(ini[j]);
      conv_walk(xr, x.s2, out.ptr(0, d, start), out.s2, n, wp + d * W, bp ? bp[d] : A(0), win,
                std::integral_constant<int, H>{}, a.silu, res.p ? res.ptr(0, d, start) : nullptr, res.s2);
      if (fin.p) {  // exact copies: the last H entries of ext
        for (int j = 0; j < H; ++j) {
          const int64_t e = n + j;
          fin.at(i, d, j) = e < H ? ini[e] : xr[(e - H) * x.s2];
        }
      }
    }
  });
}

}  // namespace

void launch(const PackedArgs& a) {
  dispatch_dtype_width(a.x->scalar_type(), a.width, [&](auto tag, auto w) {
    run<typename decltype(tag)::type, decltype(w)::value>(a);
  });
}

}  // namespace packed_fwd_general

std::tuple<Tensor, Tensor> packed_fwd_cpu(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                          const Tensor& cu_seqlens, const OptTensor& initial_states,
                                          bool return_final_states, bool silu, const OptTensor& residual) {
  const int64_t n = check_packed_fwd_args(x, weight, bias, cu_seqlens, initial_states, kMaxWidth,
                                          /*allow_float64=*/true);
  check_residual(x, residual);
  const int64_t D = x.size(1), T = x.size(2), W = weight.size(1);
  check_cu_seqlens_values(cu_seqlens.const_data_ptr<int32_t>(), cu_seqlens.stride(0), n, T);
  const bool cl = is_channel_last(x);
  const ScalarType xt = x.scalar_type();
  Tensor out = empty_bdl(1, D, T, cl, xt, x);
  Tensor final_states = return_final_states ? empty_bdl(n, D, W - 1, cl, xt, x) : alloc_empty({0}, xt, x);
  if (D == 0 || n == 0) return {out, final_states};
  Tensor wf, bf;
  PackedArgs a = packed_inputs(x, weight, bias, cu_seqlens, initial_states, n, silu, wf, bf);
  a.out = &out;
  a.final_states = return_final_states ? &final_states : nullptr;
  a.residual = residual.has_value() ? &*residual : nullptr;  // read through its strides
  run_packed_fwd(a);
  return {out, final_states};
}

}  // namespace cpu
}  // namespace causal_conv1d
