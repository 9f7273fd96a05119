// CPU kernel of causal_conv1d::varlen_fwd (schema: csrc/ops.cpp; semantics: docs/serving.md,
// "Prefill"): a packed batch of requests over a state cache whose live window is the first
// H = width - 1 entries of a line, with vLLM's prefix caching (the states at block boundaries
// written to the lines of their blocks).
//
// x is cast to the cache's dtype first (the compute dtype, as in vLLM); out is computed in it and
// returned in x's dtype. One task per (request, channel): it copies the initial window, walks the
// request's tokens with a W-tap window in the accumulation type (float32; float64 for a float64
// cache), then writes the block-boundary states and the final state.
#include "serving_common.h"

#include <algorithm>
#include <vector>

namespace causal_conv1d {
namespace cpu_serving {
namespace {

struct VarlenPlan : LinePlan {
  Index q, hinit, first, computed;
  int64_t block = 0;
};

// The block boundaries (multiples of B) inside (p0, p0 + n): floor((p0 + n - 1) / B) - floor(p0 / B).
inline int64_t boundaries_inside(int64_t p0, int64_t n, int64_t B) { return (p0 + n - 1) / B - p0 / B; }

void check_values(const VarlenPlan& p, int64_t total, int64_t num_lines) {
  check_qsl_values(p.q, p.batch, total, "x.shape[1]");
  for (int64_t i = 0; i < p.batch; ++i) {
    if (!p.apc) {
      if (!p.lines.empty()) check_line(p.lines.at(i), num_lines, p.pad_slot_id, "cache_indices", i, 0, false, "conv_states");
      continue;
    }
    const int64_t cols = p.lines.cols;
    check_block_col(p.init_idx.at(i), cols, "initial_state_idx", i, "cache_indices");
    check_block_col(p.last.at(i), cols, "block_idx_last_scheduled_token", i, "cache_indices");
    check_block_col(p.first.at(i), cols, "block_idx_first_scheduled_token", i, "cache_indices");
    const int64_t k = p.last.at(i) - p.first.at(i);
    CC1D_CHECK_VALUE(k >= 0, "block_idx_first_scheduled_token[", i, "] = ", p.first.at(i),
                     " must be <= block_idx_last_scheduled_token[", i, "] = ", p.last.at(i));
    const int64_t p0 = p.computed.at(i);
    CC1D_CHECK_VALUE(p0 >= 0, "num_computed_tokens[", i, "] = ", p0, " must be >= 0");
    const int64_t c_in = line_in(p, i);
    check_line(c_in, num_lines, p.pad_slot_id, "cache_indices", i, p.init_idx.at(i), true, "conv_states");
    const int64_t n = p.q.at(i + 1) - p.q.at(i);
    if (n <= 0 || c_in == p.pad_slot_id) continue;  // request skipped: nothing else is read
    check_line(line_out(p, i), num_lines, p.pad_slot_id, "cache_indices", i, p.last.at(i), true, "conv_states");
    for (int64_t j = 0; j < k; ++j) {
      check_line(p.lines.at(i, p.first.at(i) + j), num_lines, p.pad_slot_id, "cache_indices", i, p.first.at(i) + j,
                 true, "conv_states");
    }
    const int64_t inside = boundaries_inside(p0, n, p.block);
    CC1D_CHECK_VALUE(k <= inside, "block_idx_last_scheduled_token[", i, "] - block_idx_first_scheduled_token[", i,
                     "] = ", k, " block-boundary states to write, but request ", i, " (num_computed_tokens = ", p0,
                     ", ", n, " new tokens) crosses only ", inside, " boundaries of block_size_to_align = ", p.block,
                     " tokens");
  }
}

template <typename T>
void varlen_rows(const Tensor& x, const Tensor& out, Tensor& cs, const Tensor& wf, const Tensor& bf,
                 const VarlenPlan& p) {
  using A = acc_t<T>;
  const int64_t D = x.size(0), W = wf.size(1), H = W - 1;
  const Strided<const T> xs(x);  // (dim, total_tokens)
  const Strided<T> os(out), c(cs);
  const A* wp = wf.const_data_ptr<A>();
  const A* bp = bf.defined() ? bf.const_data_ptr<A>() : nullptr;
  parallel_for(0, p.batch * D, 1, [&](int64_t r0, int64_t r1) {
    std::vector<T> init(H);  // the initial window, in the cache's dtype
    std::vector<A> win(H);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / D, d = r % D;
      const int64_t start = p.q.at(i), n = p.q.at(i + 1) - start;
      if (n <= 0) continue;  // no tokens: no line touched
      const int64_t c_in = line_in(p, i);
      if (c_in == p.pad_slot_id) continue;  // skipped request: output 0 (zero-filled), no line touched
      const T* xr = xs.ptr(d, start);
      const bool has_init = !p.hinit.empty() && p.hinit.at(i) != 0;
      for (int64_t j = 0; j < H; ++j) init[j] = has_init ? c.at(c_in, d, j) : static_cast<T>(A(0));
      // cat(init, x_i)[e]: the request's inputs with the initial window in front
      auto ext = [&](int64_t e) -> T { return e < H ? init[e] : xr[(e - H) * xs.s1]; };
      for (int64_t j = 0; j < H; ++j) win[j] = static_cast<A>(init[j]);
      conv_walk(xr, xs.s1, os.ptr(d, start), os.s1, n, wp + d * W, bp ? bp[d] : A(0), win.data(), H, p.silu);
      auto write_state = [&](int64_t line, int64_t e0) {  // line[0:H] = ext[e0 : e0 + H]
        if (line == p.pad_slot_id) return;
        for (int64_t j = 0; j < H; ++j) c.at(line, d, j) = ext(e0 + j);
      };
      if (p.apc) {
        const int64_t k = p.last.at(i) - p.first.at(i), p0 = p.computed.at(i), B = p.block;
        const int64_t end = p0 + n, last_boundary = ((end - 1) / B) * B;  // the last multiple of B below end
        for (int64_t j = 0; j < k; ++j) {
          const int64_t P = last_boundary - (k - 1 - j) * B;  // in (p0, end): check_values
          write_state(p.lines.at(i, p.first.at(i) + j), P - p0);  // the H inputs before position P
        }
      }
      write_state(line_out(p, i), n);
    }
  });
}

}  // namespace

Tensor varlen_fwd_cpu(const Tensor& x, const Tensor& weight, const OptTensor& bias, Tensor& conv_states,
                      const Tensor& query_start_loc, const OptTensor& cache_indices,
                      const OptTensor& has_initial_state, bool silu, int64_t pad_slot_id,
                      const OptTensor& block_idx_first, const OptTensor& block_idx_last,
                      const OptTensor& initial_state_idx, const OptTensor& num_computed_tokens,
                      int64_t block_size_to_align) {
  VarlenPlan p;
  p.batch = check_varlen_fwd_args(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
                                  block_idx_first, block_idx_last, initial_state_idx, num_computed_tokens,
                                  block_size_to_align, kMaxWidth, /*allow_float64=*/true);
  const int64_t D = x.size(0), total = x.size(1);
  const bool cl = varlen_is_channel_last(x);
  Tensor hi = has_initial_state.has_value() ? to_dtype(*has_initial_state, ScalarType::Int) : Tensor();
  p.set(cache_indices, block_idx_last, initial_state_idx, pad_slot_id, silu);
  p.q = Index(query_start_loc);
  p.hinit = hi.defined() ? Index(OptTensor(hi)) : Index();
  p.first = Index(block_idx_first);
  p.computed = Index(num_computed_tokens);
  p.block = block_size_to_align;
  check_values(p, total, conv_states.size(0));
  return run_rows(x, weight, bias, empty_dt(D, total, cl, conv_states.scalar_type(), x), conv_states, "conv_states",
                  p.batch > 0 && D > 0, [&](auto tag, const Tensor& xc, const Tensor& out, const Tensor& wf,
                                            const Tensor& bf) {
                    varlen_rows<typename decltype(tag)::type>(xc, out, conv_states, wf, bf, p);
                  });
}

}  // namespace cpu_serving
}  // namespace causal_conv1d
