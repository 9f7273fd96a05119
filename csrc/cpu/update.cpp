// The CPU update op (decoding) and its one path: conv_state holds the last state_len inputs of each
// sequence; one task per (batch, channel) row, tiny per-token work.
#include "dispatch.h"

#include <vector>

namespace causal_conv1d {
namespace cpu {
namespace {

// x and out are (batch, dim, seqlen), or (batch, dim) for one token (seqlen 1, no third stride).
template <typename T>
void update_rows(const Tensor& x, Tensor& conv_state, const Tensor& out, const Tensor& wf,
                 const Tensor& bf, const int32_t* cache_seqlens, const int32_t* indices, bool silu) {
  using A = acc_t<T>;
  const bool token = x.dim() == 2;
  const int64_t B = x.size(0), D = x.size(1), L = token ? 1 : x.size(2), W = wf.size(1), S = conv_state.size(2);
  const T* xp = x.const_data_ptr<T>();
  T* cp = conv_state.mutable_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  const A* wp = wf.const_data_ptr<A>();
  const A* bp = bf.defined() ? bf.const_data_ptr<A>() : nullptr;
  const int64_t sxb = x.stride(0), sxd = x.stride(1), sxl = token ? 1 : x.stride(2);
  const int64_t scb = conv_state.stride(0), scd = conv_state.stride(1), scl = conv_state.stride(2);
  const int64_t sob = out.stride(0), sod = out.stride(1), sol = token ? 1 : out.stride(2);
  const int64_t grain = std::max<int64_t>(1, 4096 / (L + W));
  parallel_for(0, B * D, grain, [&](int64_t r0, int64_t r1) {
    std::vector<A> win(W - 1 + L);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / D, d = r % D;
      const T* xr = xp + b * sxb + d * sxd;
      T* orow = op + b * sob + d * sod;
      const int64_t row = indices ? static_cast<int64_t>(indices[b]) : b;
      if (row < 0) {  // padding slot: zero output, state untouched
        for (int64_t i = 0; i < L; ++i) orow[i * sol] = static_cast<T>(A(0));
        continue;
      }
      T* cr = cp + row * scb + d * scd;
      if (cache_seqlens) {  // circular buffer: the next token goes to cache_seqlens % state_len
        const int64_t c = cache_seqlens[b];
        for (int64_t j = 0; j < W - 1; ++j) {
          int64_t p = (c - (W - 1) + j) % S;
          if (p < 0) p += S;
          win[j] = static_cast<A>(cr[p * scl]);
        }
        for (int64_t i = 0; i < L; ++i) {
          win[W - 1 + i] = static_cast<A>(xr[i * sxl]);
          int64_t p = (c + i) % S;
          if (p < 0) p += S;
          cr[p * scl] = xr[i * sxl];
        }
      } else {  // shift left by seqlen, append x
        for (int64_t j = 0; j < W - 1; ++j) win[j] = static_cast<A>(cr[(S - (W - 1) + j) * scl]);
        for (int64_t i = 0; i < L; ++i) win[W - 1 + i] = static_cast<A>(xr[i * sxl]);
        if (L < S) {
          for (int64_t j = 0; j < S - L; ++j) cr[j * scl] = cr[(j + L) * scl];
          for (int64_t i = 0; i < L; ++i) cr[(S - L + i) * scl] = xr[i * sxl];
        } else {
          for (int64_t j = 0; j < S; ++j) cr[j * scl] = xr[(L - S + j) * sxl];
        }
      }
      const A* w = wp + d * W;
      const A bv = bp ? bp[d] : A(0);
      for (int64_t i = 0; i < L; ++i) {
        A acc = bv;
        for (int64_t k = 0; k < W; ++k) acc += w[k] * win[i + k];
        orow[i * sol] = static_cast<T>(silu ? causal_conv1d::cpu::silu(acc) : acc);
      }
    }
  });
}

}  // namespace

namespace update_general {

void launch(const UpdateArgs& a) {
  dispatch_dtype(a.x->scalar_type(), "x", [&](auto tag) {
    update_rows<typename decltype(tag)::type>(*a.x, *a.conv_state, *a.out, *a.weight, *a.bias, a.cache_seqlens,
                                              a.indices, a.silu);
  });
}

}  // namespace update_general

// x (batch, dim, seqlen), or (batch, dim) for one token, then out is (batch, dim), contiguous:
// decoders call with 2-D x, and taking it as such (no unsqueeze/squeeze: two dispatcher calls on
// the stable ABI) keeps the per-token host cost at one op call.
Tensor update_cpu(const Tensor& x, Tensor& conv_state, const Tensor& weight,
                  const OptTensor& bias, bool silu, const OptTensor& cache_seqlens,
                  const OptTensor& conv_state_indices) {
  check_update_args(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, kMaxWidth,
                    /*allow_float64=*/true, /*allow_token=*/true);
  const int64_t B = x.size(0), D = x.size(1);
  Tensor out = x.dim() == 2 ? alloc_empty({B, D}, x.scalar_type(), x)
                            : empty_bdl(B, D, x.size(2), is_channel_last(x), x.scalar_type(), x);
  const ScalarType acc = acc_dtype(x);
  Tensor wf = as_contiguous(to_dtype(weight, acc));
  Tensor bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : Tensor();
  Tensor cs = cache_seqlens.has_value() ? as_contiguous(*cache_seqlens) : Tensor();
  Tensor idx = conv_state_indices.has_value() ? as_contiguous(*conv_state_indices) : Tensor();
  if (idx.defined()) {
    const int32_t* ip = idx.const_data_ptr<int32_t>();
    const int64_t rows = conv_state.size(0);
    for (int64_t b = 0; b < B; ++b) {
      CC1D_CHECK_VALUE(ip[b] < rows, "conv_state_indices[", b, "] = ", ip[b],
                        " is out of range for conv_state with ", rows, " rows (negative = padding slot)");
    }
  }
  if (out.numel() > 0) {
    const UpdateArgs a{&x, &conv_state, &out, &wf, &bf, cs.defined() ? cs.const_data_ptr<int32_t>() : nullptr,
                       idx.defined() ? idx.const_data_ptr<int32_t>() : nullptr, silu};
    run_update(a);
  }
  return out;
}

}  // namespace cpu
}  // namespace causal_conv1d
