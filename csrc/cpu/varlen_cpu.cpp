// CPU kernels of the serving ops (schemas: csrc/ops.cpp; semantics: causal_conv1d/varlen.py):
//   varlen_fwd  -- packed variable-length prefill; initial states read from / final states written
//                  to a state cache by index
//   spec_update -- decoding step over seqlen new tokens per sequence, the state rolled back to what
//                  was accepted (num_accepted_tokens)
// One task per (sequence, channel): it reads the initial state, walks the sequence's tokens with a
// W-tap window in the accumulation type (float32; float64 for float64 inputs), then writes the
// new state in place. The index tensors are on the host here, so their values are checked and bad
// ones raise ValueError naming the argument.
#include "varlen_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace causal_conv1d {
namespace cpu_varlen {
namespace {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename A>
inline A silu(A z) {
  return z / (A(1) + std::exp(-z));
}

template <typename F>
void dispatch_dtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float: f(float{}); break;
    case ScalarType::Double: f(double{}); break;
    case ScalarType::Half: f(Half{}); break;
    case ScalarType::BFloat16: f(BFloat16{}); break;
    default: CC1D_CHECK_TYPE(false, "x must be float32, float16, bfloat16 or float64 on the CPU, got ", t);
  }
}

// Checks the values of query_start_loc (non-decreasing, from >= 0 to <= total_tokens) and of the
// slots (in range or pad_slot_id).
void check_qsl_values(const int32_t* q, int64_t batch, int64_t total) {
  CC1D_CHECK_VALUE(q[0] >= 0, "query_start_loc[0] must be >= 0, got ", q[0]);
  for (int64_t i = 0; i < batch; ++i) {
    CC1D_CHECK_VALUE(q[i + 1] >= q[i], "query_start_loc must be non-decreasing, got query_start_loc[", i, "] = ", q[i],
                     " > query_start_loc[", i + 1, "] = ", q[i + 1]);
  }
  CC1D_CHECK_VALUE(q[batch] <= total, "query_start_loc[-1] = ", q[batch],
                   " must be <= total_tokens (x.shape[1]) = ", total, ": the lengths do not fit in x");
}

void check_slot_values(const int32_t* idx, int64_t batch, int64_t rows, int64_t pad_slot_id, const char* name,
                       const char* cache_name) {
  for (int64_t i = 0; i < batch; ++i) {
    CC1D_CHECK_VALUE(idx[i] == pad_slot_id || (idx[i] >= 0 && idx[i] < rows), name, "[", i, "] = ", idx[i],
                     " is out of range for ", cache_name, " with ", rows, " cache lines (pad_slot_id = ", pad_slot_id,
                     " skips a sequence)");
  }
}

// ---------------------------------------------------------------------------------------------
// varlen_fwd

template <typename T>
void varlen_rows(const Tensor& x, const Tensor& out, Tensor& cs, const Tensor& wf, const Tensor& bf,
                 const int32_t* qsl, const int32_t* idx, const int32_t* hinit, int64_t batch, int64_t pad_slot_id,
                 bool silu_act) {
  using A = acc_t<T>;
  const int64_t D = x.size(0), W = wf.size(1), S = cs.size(2);
  const T* xp = x.const_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  T* cp = cs.mutable_data_ptr<T>();
  const A* wp = wf.const_data_ptr<A>();
  const A* bp = bf.defined() ? bf.const_data_ptr<A>() : nullptr;
  const int64_t sxd = x.stride(0), sxt = x.stride(1), sod = out.stride(0), sot = out.stride(1);
  const int64_t scb = cs.stride(0), scd = cs.stride(1), scl = cs.stride(2);
  parallel_for(0, batch * D, 1, [&](int64_t r0, int64_t r1) {
    std::vector<A> win(W - 1);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t s = r / D, d = r % D;
      const int64_t start = qsl[s], len = qsl[s + 1] - qsl[s];
      if (len <= 0) continue;  // no tokens: the cache line is left as it is
      const T* xr = xp + d * sxd + start * sxt;
      T* orow = op + d * sod + start * sot;
      const int64_t slot = idx ? idx[s] : s;
      if (slot == pad_slot_id) {  // skipped sequence: zero output, cache untouched
        for (int64_t i = 0; i < len; ++i) orow[i * sot] = static_cast<T>(A(0));
        continue;
      }
      T* cr = cp + slot * scb + d * scd;
      const bool has_init = hinit != nullptr && hinit[s] != 0;
      for (int64_t j = 0; j < W - 1; ++j) win[j] = has_init ? static_cast<A>(cr[(S - (W - 1) + j) * scl]) : A(0);
      const A* w = wp + d * W;
      const A bv = bp ? bp[d] : A(0);
      for (int64_t i = 0; i < len; ++i) {
        const A xi = static_cast<A>(xr[i * sxt]);
        A acc = bv + w[W - 1] * xi;
        for (int64_t k = 0; k < W - 1; ++k) acc += w[k] * win[k];
        orow[i * sot] = static_cast<T>(silu_act ? silu(acc) : acc);
        for (int64_t k = 0; k + 1 < W - 1; ++k) win[k] = win[k + 1];
        win[W - 2] = xi;
      }
      // new state = the last S entries of cat(old state or zeros, the sequence's tokens); ascending
      // j reads old entries at j + len > j, not yet overwritten
      for (int64_t j = 0; j < S; ++j) {
        const int64_t src = len - S + j;  // token index in the sequence
        if (src >= 0) {
          cr[j * scl] = xr[src * sxt];
        } else {
          cr[j * scl] = has_init ? cr[(j + len) * scl] : static_cast<T>(A(0));
        }
      }
    }
  });
}

Tensor varlen_fwd_cpu(const Tensor& x, const Tensor& weight, const OptTensor& bias, Tensor& conv_states,
                      const Tensor& query_start_loc, const OptTensor& cache_indices,
                      const OptTensor& has_initial_state, bool silu, int64_t pad_slot_id) {
  check_varlen_fwd_args(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, kMaxWidth,
                        /*allow_float64=*/true);
  const int64_t D = x.size(0), T = x.size(1);
  const int64_t batch = query_start_loc.size(0) - 1;
  const bool cl = varlen_is_channel_last(x);
  Tensor out = empty_dt(D, T, cl, x.scalar_type(), x);
  if (out.numel() > 0) zero_fill(out);  // tokens outside every sequence are 0
  const Tensor q = as_contiguous(query_start_loc);
  check_qsl_values(q.const_data_ptr<int32_t>(), batch, T);
  Tensor idx = cache_indices.has_value() ? as_contiguous(*cache_indices) : Tensor();
  if (idx.defined()) {
    check_slot_values(idx.const_data_ptr<int32_t>(), batch, conv_states.size(0), pad_slot_id, "cache_indices",
                      "conv_states");
  }
  Tensor hi = has_initial_state.has_value() ? as_contiguous(to_dtype(*has_initial_state, ScalarType::Int)) : Tensor();
  const ScalarType acc = x.scalar_type() == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
  Tensor wf = as_contiguous(to_dtype(weight, acc));
  Tensor bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : Tensor();
  if (batch > 0 && D > 0) {
    dispatch_dtype(x.scalar_type(), [&](auto tag) {
      using TT = decltype(tag);
      varlen_rows<TT>(x, out, conv_states, wf, bf, q.const_data_ptr<int32_t>(),
                      idx.defined() ? idx.const_data_ptr<int32_t>() : nullptr,
                      hi.defined() ? hi.const_data_ptr<int32_t>() : nullptr, batch, pad_slot_id, silu);
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// spec_update

template <typename T>
void spec_rows(const Tensor& x, Tensor& cs, const Tensor& out, const Tensor& wf, const Tensor& bf,
               const int32_t* idx, const int32_t* nacc, int64_t pad_slot_id, bool silu_act) {
  using A = acc_t<T>;
  const bool token = x.dim() == 2;  // (batch, dim): one token, no third stride (out is (batch, dim) too)
  const int64_t B = x.size(0), D = x.size(1), L = token ? 1 : x.size(2), W = wf.size(1), S = cs.size(2);
  const T* xp = x.const_data_ptr<T>();
  T* cp = cs.mutable_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  const A* wp = wf.const_data_ptr<A>();
  const A* bp = bf.defined() ? bf.const_data_ptr<A>() : nullptr;
  const int64_t sxb = x.stride(0), sxd = x.stride(1), sxl = token ? 1 : x.stride(2);
  const int64_t scb = cs.stride(0), scd = cs.stride(1), scl = cs.stride(2);
  const int64_t sob = out.stride(0), sod = out.stride(1), sol = token ? 1 : out.stride(2);
  parallel_for(0, B * D, std::max<int64_t>(1, 4096 / (L + W)), [&](int64_t r0, int64_t r1) {
    std::vector<A> win(W - 1 + L);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / D, d = r % D;
      const T* xr = xp + b * sxb + d * sxd;
      T* orow = op + b * sob + d * sod;
      const int64_t slot = idx ? idx[b] : b;
      if (slot == pad_slot_id) {
        for (int64_t i = 0; i < L; ++i) orow[i * sol] = static_cast<T>(A(0));
        continue;
      }
      T* cr = cp + slot * scb + d * scd;
      const int64_t a = nacc ? nacc[b] : L;  // accepted tokens of the previous step
      const int64_t e = S - L + a;            // the valid history ends here (exclusive)
      for (int64_t j = 0; j < W - 1; ++j) win[j] = static_cast<A>(cr[(e - (W - 1) + j) * scl]);
      for (int64_t i = 0; i < L; ++i) win[W - 1 + i] = static_cast<A>(xr[i * sxl]);
      const A* w = wp + d * W;
      const A bv = bp ? bp[d] : A(0);
      for (int64_t i = 0; i < L; ++i) {
        A acc = bv;
        for (int64_t k = 0; k < W; ++k) acc += w[k] * win[i + k];
        orow[i * sol] = static_cast<T>(silu_act ? silu(acc) : acc);
      }
      // new state = the last S entries of cat(state[:e], x): entry j is state[j + a] (ahead of j:
      // ascending j is safe in place) or x[j - (S - L)]
      for (int64_t j = 0; j < S; ++j) {
        cr[j * scl] = j < S - L ? cr[(j + a) * scl] : xr[(j - (S - L)) * sxl];
      }
    }
  });
}

// x (batch, dim, seqlen), or (batch, dim) for one token, then out is (batch, dim), contiguous (read
// as such: no unsqueeze/squeeze, two dispatcher calls on the stable ABI).
Tensor spec_update_cpu(const Tensor& x, Tensor& conv_state, const Tensor& weight, const OptTensor& bias, bool silu,
                       const OptTensor& conv_state_indices, const OptTensor& num_accepted_tokens,
                       int64_t pad_slot_id) {
  check_spec_update_args(x, conv_state, weight, bias, conv_state_indices, num_accepted_tokens, kMaxWidth,
                         /*allow_float64=*/true, /*allow_token=*/true);
  const int64_t B = x.size(0), D = x.size(1), L = x.dim() == 2 ? 1 : x.size(2);
  Tensor out = x.dim() == 2 ? alloc_empty({B, D}, x.scalar_type(), x)
                            : empty_bdl(B, D, L, is_channel_last(x), x.scalar_type(), x);
  Tensor idx = conv_state_indices.has_value() ? as_contiguous(*conv_state_indices) : Tensor();
  if (idx.defined()) {
    check_slot_values(idx.const_data_ptr<int32_t>(), B, conv_state.size(0), pad_slot_id, "conv_state_indices",
                      "conv_state");
  }
  Tensor na = num_accepted_tokens.has_value() ? as_contiguous(*num_accepted_tokens) : Tensor();
  if (na.defined()) {
    const int32_t* np = na.const_data_ptr<int32_t>();
    for (int64_t b = 0; b < B; ++b) {
      CC1D_CHECK_VALUE(np[b] >= 1 && np[b] <= L, "num_accepted_tokens[", b, "] = ", np[b],
                       " must be between 1 and seqlen = ", L, " (x.shape[2])");
    }
  }
  const ScalarType acc = x.scalar_type() == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
  Tensor wf = as_contiguous(to_dtype(weight, acc));
  Tensor bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : Tensor();
  if (out.numel() > 0) {
    dispatch_dtype(x.scalar_type(), [&](auto tag) {
      using TT = decltype(tag);
      spec_rows<TT>(x, conv_state, out, wf, bf, idx.defined() ? idx.const_data_ptr<int32_t>() : nullptr,
                    na.defined() ? na.const_data_ptr<int32_t>() : nullptr, pad_slot_id, silu);
    });
  }
  return out;
}

}  // namespace
}  // namespace cpu_varlen
}  // namespace causal_conv1d

CC1D_LIBRARY_IMPL(causal_conv1d, CPU, m) {
  m.impl("varlen_fwd", CC1D_KERNEL(&causal_conv1d::cpu_varlen::varlen_fwd_cpu));
  m.impl("spec_update", CC1D_KERNEL(&causal_conv1d::cpu_varlen::spec_update_cpu));
}
