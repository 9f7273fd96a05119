// CPU kernel of causal_conv1d::spec_update (schema: csrc/ops.cpp; semantics: docs/serving.md,
// "Decode"): one decode step over n_b new tokens per request -- plain, speculative
// (num_accepted_tokens: the window starts at a - 1), ragged (query_start_loc), tree drafts
// (retrieve_parent_token) and prefix caching (input and output lines from a 2-D table).
//
// x is cast to the cache's dtype first (as in vLLM); out is computed in it and returned in x's
// dtype. One task per (request, channel): it copies the window, computes the n_b outputs, then
// writes the new state to the output line.
#include "serving_common.h"

#include <algorithm>
#include <vector>

namespace causal_conv1d {
namespace cpu_serving {
namespace {

struct SpecPlan : LinePlan {
  Index nacc, q, parent;
  int64_t seqlen = 1, max_query_len = -1;
  bool ragged = false, token = false;
};

inline int64_t tokens_of(const SpecPlan& p, int64_t b) { return p.ragged ? p.q.at(b + 1) - p.q.at(b) : p.seqlen; }

void check_values(const SpecPlan& p, int64_t num_tokens, int64_t num_lines, int64_t state_len, int64_t H) {
  if (p.ragged) {
    check_qsl_values(p.q, p.batch, num_tokens, "x.shape[0]");
    if (p.max_query_len >= 1) {
      for (int64_t b = 0; b < p.batch; ++b) {
        CC1D_CHECK_VALUE(tokens_of(p, b) <= p.max_query_len, "request ", b, " has query_start_loc[", b + 1,
                         "] - query_start_loc[", b, "] = ", tokens_of(p, b), " tokens, more than max_query_len = ",
                         p.max_query_len);
      }
    }
  }
  const char* table = "conv_state_indices";
  for (int64_t b = 0; b < p.batch; ++b) {
    if (p.apc) {
      check_block_col(p.init_idx.at(b), p.lines.cols, "initial_state_idx", b, table);
      check_block_col(p.last.at(b), p.lines.cols, "block_idx_last_scheduled_token", b, table);
      check_line(line_in(p, b), num_lines, p.pad_slot_id, table, b, p.init_idx.at(b), true, "conv_state");
      check_line(line_out(p, b), num_lines, p.pad_slot_id, table, b, p.last.at(b), true, "conv_state");
    } else if (!p.lines.empty()) {
      check_line(p.lines.at(b), num_lines, p.pad_slot_id, table, b, 0, false, "conv_state");
    }
    if (!p.nacc.empty()) {
      const int64_t a = p.nacc.at(b), hi = state_len - H + 1;
      CC1D_CHECK_VALUE(a >= 1 && a <= hi, "num_accepted_tokens[", b, "] = ", a, " must be between 1 and state_len - ",
                       "(width - 1) + 1 = ", hi, " (the window conv_state[:, :, a - 1 : a - 1 + width - 1] must lie in "
                       "the cache line; 1 for a request fresh from a prefill)");
    }
    if (!p.parent.empty()) {
      const int64_t n = tokens_of(p, b);
      for (int64_t j = 1; j < n; ++j) {
        const int64_t v = p.parent.at(b, j);
        CC1D_CHECK_VALUE(v >= 0 && v < j, "retrieve_parent_token[", b, ", ", j, "] = ", v,
                         " must be the index of an earlier token of the request: 0 <= value < ", j);
      }
    }
  }
}

template <typename T>
void spec_rows(const Tensor& x, Tensor& cs, const Tensor& out, const Tensor& wf, const Tensor& bf, const SpecPlan& p) {
  using A = acc_t<T>;
  // x is (num_tokens, dim) ragged, (batch, dim) one token, or (batch, dim, L): dim is axis 1 in all three
  const int64_t D = x.size(1), W = wf.size(1), H = W - 1;
  const T* xp = x.const_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  const Strided<T> c(cs);
  const A* wp = wf.const_data_ptr<A>();
  const A* bp = bf.defined() ? bf.const_data_ptr<A>() : nullptr;
  int64_t sxb, sxd, sxt, sob, sod, sot;
  if (p.ragged) {  // (num_tokens, dim): the request's offset is its first token
    sxb = 0, sxt = x.stride(0), sxd = x.stride(1);
    sob = 0, sot = out.stride(0), sod = out.stride(1);
  } else {
    sxb = x.stride(0), sxd = x.stride(1), sxt = p.token ? 0 : x.stride(2);
    sob = out.stride(0), sod = out.stride(1), sot = p.token ? 0 : out.stride(2);
  }
  const bool spec = !p.nacc.empty(), tree = !p.parent.empty();
  const int64_t cap = p.ragged ? std::max<int64_t>(p.max_query_len, 1) : p.seqlen;
  parallel_for(0, p.batch * D, std::max<int64_t>(1, 4096 / (cap + W)), [&](int64_t r0, int64_t r1) {
    std::vector<T> ext;  // cat(window, x_b) in the cache's dtype
    std::vector<A> ea;   // the same in the accumulation type
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / D, d = r % D;
      const int64_t n = tokens_of(p, b);
      if (n <= 0) continue;
      const int64_t c_in = line_in(p, b);
      if (c_in == p.pad_slot_id) continue;  // skipped: output 0 (zero-filled), no line touched
      const int64_t t0 = p.ragged ? p.q.at(b) : 0;
      const T* xr = xp + b * sxb + t0 * sxt + d * sxd;
      T* orow = op + b * sob + t0 * sot + d * sod;
      const int64_t off = spec ? p.nacc.at(b) - 1 : 0;  // the window starts here
      ext.resize(H + n);
      ea.resize(H + n);
      for (int64_t j = 0; j < H; ++j) ext[j] = c.at(c_in, d, off + j);
      for (int64_t t = 0; t < n; ++t) ext[H + t] = xr[t * sxt];
      for (int64_t e = 0; e < H + n; ++e) ea[e] = static_cast<A>(ext[e]);
      const A* w = wp + d * W;
      const A bv = bp ? bp[d] : A(0);
      for (int64_t t = 0; t < n; ++t) {
        A acc = bv;
        if (tree) {
          // tap k reads the k-th ancestor: parents inside the draft, then the window from its end
          int64_t c = t;
          for (int64_t k = 0; k < W; ++k) {
            acc += w[H - k] * ea[H + c];
            c = c > 0 ? p.parent.at(b, c) : c - 1;
          }
        } else {
          for (int64_t k = 0; k < W; ++k) acc += w[k] * ea[t + k];
        }
        orow[t * sot] = static_cast<T>(p.silu ? silu(acc) : acc);
      }
      const int64_t c_out = line_out(p, b);
      if (c_out == p.pad_slot_id) continue;
      if (spec) {  // line[0 : H - 1 + n] = cat(window[1:], x_b)
        for (int64_t j = 0; j < H - 1 + n; ++j) c.at(c_out, d, j) = ext[1 + j];
      } else {  // line[0 : H] = cat(window, x_b)[-H:]
        for (int64_t j = 0; j < H; ++j) c.at(c_out, d, j) = ext[n + j];
      }
    }
  });
}

}  // namespace

Tensor spec_update_cpu(const Tensor& x, Tensor& conv_state, const Tensor& weight, const OptTensor& bias, bool silu,
                       const OptTensor& conv_state_indices, const OptTensor& num_accepted_tokens, int64_t pad_slot_id,
                       const OptTensor& query_start_loc, int64_t max_query_len, const OptTensor& block_idx_last,
                       const OptTensor& initial_state_idx, const OptTensor& retrieve_parent_token) {
  SpecPlan p;
  p.batch = check_spec_update_args(x, conv_state, weight, bias, conv_state_indices, num_accepted_tokens,
                                   query_start_loc, max_query_len, block_idx_last, initial_state_idx,
                                   retrieve_parent_token, kMaxWidth, /*allow_float64=*/true);
  p.ragged = query_start_loc.has_value();
  p.token = !p.ragged && x.dim() == 2;
  p.seqlen = p.ragged ? max_query_len : (p.token ? 1 : x.size(2));
  p.max_query_len = max_query_len;
  p.set(conv_state_indices, block_idx_last, initial_state_idx, pad_slot_id, silu);
  p.nacc = Index(num_accepted_tokens);
  p.q = Index(query_start_loc);
  p.parent = Index(retrieve_parent_token);
  const int64_t W = weight.size(1);
  check_values(p, x.size(0), conv_state.size(0), conv_state.size(2), W - 1);
  const ScalarType st = conv_state.scalar_type();
  // out: x's shape; a 2-D x gives a contiguous out, a 3-D one x's layout (csrc/checks.h, empty_bdl)
  Tensor out = x.dim() == 2 ? alloc_empty({x.size(0), x.size(1)}, st, x)
                            : empty_bdl(x.size(0), x.size(1), x.size(2), is_channel_last(x), st, x);
  return run_rows(x, weight, bias, out, conv_state, "conv_state", p.batch > 0 && x.size(1) > 0,
                  [&](auto tag, const Tensor& xc, const Tensor& o, const Tensor& wf, const Tensor& bf) {
                    spec_rows<typename decltype(tag)::type>(xc, conv_state, o, wf, bf, p);
                  });
}

}  // namespace cpu_serving
}  // namespace causal_conv1d
