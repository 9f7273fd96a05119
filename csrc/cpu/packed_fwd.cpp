// The CPU packed-sequence forward (op causal_conv1d::packed_fwd; checks: csrc/checks.h; semantics:
// docs/package.md, "Packed sequences"): x (1, dim, total_tokens) holds n sequences back to back,
// sequence i is tokens [cu_seqlens[i], cu_seqlens[i + 1]); each starts from its own initial state
// (or zeros) and ends with its own final state, the last width - 1 inputs of cat(initial, x_i).
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
  const T* xp = a.x->const_data_ptr<T>();
  T* op = a.out->mutable_data_ptr<T>();
  const int64_t sxd = a.x->stride(1), sxt = a.x->stride(2), sod = a.out->stride(1), sot = a.out->stride(2);
  const T* ip = a.init ? a.init->const_data_ptr<T>() : nullptr;
  const int64_t sin = a.init ? a.init->stride(0) : 0, sid = a.init ? a.init->stride(1) : 0,
                sil = a.init ? a.init->stride(2) : 0;
  T* fp = a.final_states ? a.final_states->mutable_data_ptr<T>() : nullptr;
  const int64_t sfn = fp ? a.final_states->stride(0) : 0, sfd = fp ? a.final_states->stride(1) : 0,
                sfl = fp ? a.final_states->stride(2) : 0;
  const A* wp = static_cast<const A*>(a.weight);
  const A* bp = static_cast<const A*>(a.bias);
  parallel_for(0, a.nseq * D, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / D, d = r % D;
      const int64_t start = a.cu[i * a.cu_stride], n = a.cu[(i + 1) * a.cu_stride] - start;
      const T* xr = xp + d * sxd + start * sxt;
      T* orow = op + d * sod + start * sot;
      // ext[e] = cat(initial, x_i)[e], e in [0, H + n)
      T init[H > 0 ? H : 1];
      for (int j = 0; j < H; ++j) init[j] = ip ? ip[i * sin + d * sid + j * sil] : static_cast<T>(A(0));
      A win[H > 0 ? H : 1];
      for (int j = 0; j < H; ++j) win[j] = static_cast<A>(init[j]);
      const A* w = wp + d * W;
      const A bv = bp ? bp[d] : A(0);
      for (int64_t t = 0; t < n; ++t) {
        const A xt = static_cast<A>(xr[t * sxt]);
        A acc = bv + w[H] * xt;
CC1D_UNROLL
        for (int k = 0; k < H; ++k) acc += w[k] * win[k];
        orow[t * sot] = static_cast<T>(a.silu ? silu(acc) : acc);
CC1D_UNROLL
        for (int k = 0; k + 1 < H; ++k) win[k] = win[k + 1];
        win[H - 1] = xt;
      }
      if (fp) {  // exact copies: the last H entries of ext
        T* f = fp + i * sfn + d * sfd;
        for (int j = 0; j < H; ++j) {
          const int64_t e = n + j;
          f[j * sfl] = e < H ? init[e] : xr[(e - H) * sxt];
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
                                          bool return_final_states, bool silu) {
  const int64_t n = check_packed_fwd_args(x, weight, bias, cu_seqlens, initial_states, kMaxWidth,
                                          /*allow_float64=*/true);
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
  run_packed_fwd(a);
  return {out, final_states};
}

}  // namespace cpu
}  // namespace causal_conv1d
