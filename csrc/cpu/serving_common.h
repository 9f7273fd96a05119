// What the CPU kernels of the serving ops share (cpu/varlen_fwd.cpp, cpu/spec_update.cpp;
// semantics: docs/serving.md): the op body around the kernel, strided reads of the int32 index
// tensors, and the value checks. The index tensors are on the host here, so every
// value a kernel reads is checked first; a bad one raises ValueError naming the argument and entry.
#pragma once

#include "../op_signatures.h"
#include "../varlen_checks.h"
#include "cpu_common.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace causal_conv1d {
namespace cpu_serving {

// From the other CPU kernels (cpu_common.h): the accumulation type (float32; float64 for a float64
// state cache, the compute dtype: x is cast to it), SiLU, the dtype dispatch, strided tensor access
// and the W-tap walk over a sequence.
using cpu::acc_t;
using cpu::conv_walk;
using cpu::dispatch_dtype;
using cpu::silu;
using cpu::Strided;

// What a serving op does around its kernel: x cast to the cache's dtype (as in vLLM:
// x.to(conv_states.dtype)), out (allocated in that dtype) zero-filled (skipped requests and tokens of
// no request are 0), weight and bias in its accumulation type; then, where `run`,
// rows(tag, xc, out, wf, bf) with tag the TypeTag of the cache's element type. Returns out in x's dtype.
template <typename F>
Tensor run_rows(const Tensor& x, const Tensor& weight, const OptTensor& bias, Tensor out, const Tensor& cache,
                const char* cache_name, bool run, F&& rows) {
  const ScalarType st = cache.scalar_type();
  const Tensor xc = to_dtype(x, st);
  if (out.numel() > 0) zero_fill(out);
  Tensor wf, bf;
  cpu::acc_weight_bias(weight, bias, cpu::acc_dtype(st), wf, bf);
  if (run) dispatch_dtype(st, cache_name, [&](auto tag) { rows(tag, xc, out, wf, bf); });
  return to_dtype(out, x.scalar_type());  // a dense tensor keeps its layout
}

// An int32 index tensor read through its strides (1-D: at(i); 2-D: at(i, j)); absent: empty().
struct Index {
  const int32_t* p = nullptr;
  int64_t s0 = 0, s1 = 0, cols = 0;
  Index() = default;
  explicit Index(const OptTensor& t) {
    if (!t.has_value()) return;
    p = t->const_data_ptr<int32_t>();
    s0 = t->stride(0);
    s1 = t->dim() == 2 ? t->stride(1) : 0;
    cols = t->dim() == 2 ? t->size(1) : 1;
  }
  bool empty() const { return p == nullptr; }
  int64_t at(int64_t i) const { return p[i * s0]; }
  int64_t at(int64_t i, int64_t j) const { return p[i * s0 + j * s1]; }
};

// What both serving ops read of the cache lines: the table (1-D, or 2-D with prefix caching, whose
// input and output columns are initial_state_idx and block_idx_last_scheduled_token), pad_slot_id,
// and the batch and activation. Each op's plan extends it.
struct LinePlan {
  Index lines, last, init_idx;
  int64_t batch = 0, pad_slot_id = -1;
  bool apc = false, silu = false;
  void set(const OptTensor& table, const OptTensor& block_idx_last, const OptTensor& initial_state_idx,
           int64_t pad, bool act) {
    lines = Index(table);
    apc = block_idx_last.has_value();
    last = Index(block_idx_last);
    init_idx = Index(initial_state_idx);
    pad_slot_id = pad;
    silu = act;
  }
};

// The input and output lines of request i (pad_slot_id possible).
inline int64_t line_in(const LinePlan& p, int64_t i) {
  if (p.apc) return p.lines.at(i, p.init_idx.at(i));
  return p.lines.empty() ? i : p.lines.at(i);
}
inline int64_t line_out(const LinePlan& p, int64_t i) {
  if (p.apc) return p.lines.at(i, p.last.at(i));
  return p.lines.empty() ? i : p.lines.at(i);
}

// query_start_loc: non-decreasing, from >= 0 to <= total_tokens (the first batch + 1 entries).
inline void check_qsl_values(const Index& q, int64_t batch, int64_t total, const char* total_desc) {
  CC1D_CHECK_VALUE(q.at(0) >= 0, "query_start_loc[0] must be >= 0, got ", q.at(0));
  for (int64_t i = 0; i < batch; ++i) {
    CC1D_CHECK_VALUE(q.at(i + 1) >= q.at(i), "query_start_loc must be non-decreasing, got query_start_loc[", i,
                     "] = ", q.at(i), " > query_start_loc[", i + 1, "] = ", q.at(i + 1));
  }
  CC1D_CHECK_VALUE(q.at(batch) <= total, "query_start_loc[", batch, "] = ", q.at(batch), " must be <= total_tokens (",
                   total_desc, ") = ", total, ": the requests do not fit in x");
}

// A cache line: in [0, lines) or pad_slot_id. `entry` names where it was read, e.g. "cache_indices[2, 1]".
inline void check_line(int64_t v, int64_t lines, int64_t pad_slot_id, const char* name, int64_t i, int64_t j,
                       bool two_d, const char* cache_name) {
  if (v == pad_slot_id || (v >= 0 && v < lines)) return;
  if (two_d) {
    CC1D_CHECK_VALUE(false, name, "[", i, ", ", j, "] = ", v, " is out of range for ", cache_name, " with ", lines,
                     " cache lines (a line in [0, ", lines, "), or pad_slot_id = ", pad_slot_id, ")");
  }
  CC1D_CHECK_VALUE(false, name, "[", i, "] = ", v, " is out of range for ", cache_name, " with ", lines,
                   " cache lines (a line in [0, ", lines, "), or pad_slot_id = ", pad_slot_id, " to skip the request)");
}

// A column of the prefix-caching table: in [0, max_blocks).
inline void check_block_col(int64_t v, int64_t max_blocks, const char* name, int64_t i, const char* table) {
  CC1D_CHECK_VALUE(v >= 0 && v < max_blocks, name, "[", i, "] = ", v, " is out of range: it indexes a column of ",
                   table, ", which has max_blocks = ", max_blocks, " columns (0 <= value < ", max_blocks, ")");
}

// The ops (varlen_fwd.cpp, spec_update.cpp; registered in register.cpp; signatures: op_signatures.h).
VarlenFwdOp varlen_fwd_cpu;
SpecUpdateOp spec_update_cpu;

}  // namespace cpu_serving
}  // namespace causal_conv1d
