// How a CUDA op picks and launches a kernel path: each path is a row of its op's table
// (dispatch.cu) with an eligible() test and a launcher; a launcher instantiates its kernel over
// dtype x width with dispatch_dtype_width(), so a path's widths are listed once (its Widths<...>).
// Host code only; no torch (csrc/kernel_paths.h has the path names, switches and the record).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common.cuh"
#include "kernel_paths.h"
#include "packed.cuh"
#include "varlen.cuh"

namespace causal_conv1d_cuda {

using causal_conv1d::KernelPath;

template <typename T>
struct TypeTag {
  using type = T;
};

// The drain: a grid of equal warps empties the SMs over one warp lifetime at its end, so
// the fast paths do a grid's last rows (or (batch, chunk) pairs) at a finer grain. How many: enough
// for eighths / 8 of a wave of `resident` threads or warps at `per_row` of them per row at that
// grain, at most all `rows`.
inline int64_t drain_rows(int64_t resident, int64_t eighths, int64_t per_row, int64_t rows) {
  const int64_t n = (resident * eighths / 8 + per_row - 1) / per_row;
  return n < rows ? n : rows;
}

// The kernel widths a path is compiled for, ascending.
template <int... Ws>
struct Widths {};

// Returns f(TypeTag<T>{}): T the element type of dtype code `dtype` (float for anything but
// fp16/bf16: the op layer admits no other).
template <typename F>
decltype(auto) dispatch_dtype(int dtype, F&& f) {
  switch (dtype) {
    case kFloat16: return f(TypeTag<__half>{});
    case kBFloat16: return f(TypeTag<__nv_bfloat16>{});
    default: return f(TypeTag<float>{});
  }
}

// Calls f(TypeTag<T>{}, std::integral_constant<int, kW>{}): T the element type of dtype code
// `dtype` (dispatch_dtype), kW the first of Ws not below `width` (so Widths<4, 8> runs widths 2-4
// on the width-4 kernel, padded taps masked, and Widths<2, 3, 4> each width on its own). A width
// above the last of Ws calls nothing: a path's eligible() admits only widths its list covers.
template <int... Ws, typename F>
void dispatch_dtype_width(int dtype, int width, Widths<Ws...>, F&& f) {
  dispatch_dtype(dtype, [&](auto tag) {
    (void)((width <= Ws ? (f(tag, std::integral_constant<int, Ws>{}), true) : false) || ...);
  });
}

// Calls f(std::true_type{}) or f(std::false_type{}) as `flag` is: a kernel's compile-time flag
// (e.g. a fused residual) picked at run time, the launch written once.
template <typename F>
decltype(auto) dispatch_flag(bool flag, F&& f) {
  return flag ? f(std::true_type{}) : f(std::false_type{});
}

// The launch() of a general path: every case the op accepts, widths 2-4 on the width-4 kernel and
// 5-8 on the width-8 one, by Launch::run<T, kW>(p, stream) with T x's element type.
template <typename Launch, typename Params>
void launch_general(const Params& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<4, 8>{}, [&](auto tag, auto width) {
    Launch::template run<typename decltype(tag)::type, decltype(width)::value>(p, stream);
  });
}

// One row of an op's dispatch table. The last row of a table is its general path: no switch, no
// eligible() (nullptr), every case the op's checks accept. num_parts: the backward paths' workspace.
template <typename Params>
struct PathRow {
  KernelPath path;
  bool (*eligible)(const Params& p);
  void (*launch)(const Params& p, cudaStream_t stream);
  int64_t (*num_parts)(const Params& p) = nullptr;
};

// The row that runs `p`: the first whose switch is on and that is eligible, else the last.
template <typename Params, int N>
const PathRow<Params>& select_path(const PathRow<Params> (&table)[N], const Params& p) {
  for (int i = 0; i + 1 < N; ++i)
    if (causal_conv1d::kernel_path_enabled(table[i].path) && table[i].eligible(p)) return table[i];
  return table[N - 1];
}

// The row of `path` (a path the table has: the op layer passes back what select_path chose).
template <typename Params, int N>
const PathRow<Params>& path_row(const PathRow<Params> (&table)[N], KernelPath path) {
  for (int i = 0; i + 1 < N; ++i)
    if (table[i].path == path) return table[i];
  return table[N - 1];
}

// The paths (one file each; each launcher assumes its eligible() held). The backward paths also
// size the weight-gradient workspace: num_parts() rows of (padded width + 1) x dim floats.
// CC1D_FAST_PATH(ns, Params) declares a path with an eligible() test and a launcher in namespace ns,
// CC1D_BWD_FAST_PATH(ns) a backward one (with num_parts()); the general paths (the last rows) have
// a launcher only.
#define CC1D_FAST_PATH(ns, Params)                    \
  namespace ns {                                      \
  bool eligible(const Params& p);                     \
  void launch(const Params& p, cudaStream_t stream);  \
  }
#define CC1D_BWD_FAST_PATH(ns)                        \
  CC1D_FAST_PATH(ns, ConvParams)                      \
  namespace ns {                                      \
  int64_t num_parts(const ConvParams& p);             \
  }

CC1D_FAST_PATH(fwd_cf_fast, ConvParams)
CC1D_FAST_PATH(fwd_cl_fast, ConvParams)
namespace fwd_general {
void launch(const ConvParams& p, cudaStream_t stream);
}  // namespace fwd_general

CC1D_BWD_FAST_PATH(bwd_cf_fast)
CC1D_BWD_FAST_PATH(bwd_cl_fast)
namespace bwd_general {
int64_t num_parts(const ConvParams& p);
void launch(const ConvParams& p, cudaStream_t stream);
}  // namespace bwd_general
// The fixed-order reduce of the fast backward paths (bwd_cf_fast.cu): dweight[d, k] (k < width)
// and dbias[d] = sums over i < nparts of p.partial[(i * (width + 1) + k) * dim + d], cast to
// weight's / bias's dtype (dbias only when p.dbias is set). Same order every run: bit-identical.
void launch_bwd_fast_reduce(const ConvParams& p, int64_t nparts, cudaStream_t stream);

CC1D_FAST_PATH(update_fast, UpdateParams)
namespace update_general {
void launch(const UpdateParams& p, cudaStream_t stream);
}  // namespace update_general

CC1D_FAST_PATH(varlen_cl_fast, VarlenParams)
CC1D_FAST_PATH(varlen_cf_fast, VarlenParams)
namespace varlen_general {
void launch(const VarlenParams& p, cudaStream_t stream);
}  // namespace varlen_general

CC1D_FAST_PATH(spec_update_decode, SpecParams)
CC1D_FAST_PATH(spec_update_fast, SpecParams)
namespace spec_update_general {
void launch(const SpecParams& p, cudaStream_t stream);
}  // namespace spec_update_general

#undef CC1D_BWD_FAST_PATH
#undef CC1D_FAST_PATH

namespace packed_bwd_cl_fast {  // bwd_cl_fast.cu
bool eligible(const PackedBwdParams& p);
void launch(const PackedBwdParams& p, cudaStream_t stream);
int64_t num_parts(const PackedBwdParams& p);
}  // namespace packed_bwd_cl_fast
namespace packed_bwd_general {
void launch(const PackedBwdParams& p, cudaStream_t stream);
}  // namespace packed_bwd_general

}  // namespace causal_conv1d_cuda
