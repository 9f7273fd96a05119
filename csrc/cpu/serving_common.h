// What the CPU kernels of the serving ops share (cpu/varlen_fwd.cpp, cpu/spec_update.cpp;
// semantics: docs/serving.md): the accumulation type, SiLU, the dtype dispatch, strided reads of
// the int32 index tensors, and the value checks. The index tensors are on the host here, so every
// value a kernel reads is checked first; a bad one raises ValueError naming the argument and entry.
#pragma once

#include "../varlen_checks.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace causal_conv1d {
namespace cpu_serving {

// float32 accumulation; float64 for a float64 state cache (the compute dtype: x is cast to it).
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename A>
inline A silu(A z) {
  return z / (A(1) + std::exp(-z));
}

template <typename F>
void dispatch_dtype(ScalarType t, const char* name, F&& f) {
  switch (t) {
    case ScalarType::Float: f(float{}); break;
    case ScalarType::Double: f(double{}); break;
    case ScalarType::Half: f(Half{}); break;
    case ScalarType::BFloat16: f(BFloat16{}); break;
    default: CC1D_CHECK_TYPE(false, name, " must be float32, float16, bfloat16 or float64 on the CPU, got ", t);
  }
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

}  // namespace cpu_serving
}  // namespace causal_conv1d
