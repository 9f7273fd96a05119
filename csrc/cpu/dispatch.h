// How a CPU op picks and runs a kernel path, the same shape as csrc/cuda/dispatch.cuh: each path
// is a row of its op's table (dispatch.cpp) with an eligible() test and a launcher; a launcher
// instantiates its kernels over dtype x width with dispatch_dtype_width() (cpu_common.h), so dtype x
// width are listed once. The CPU paths have no switches and are not recorded for the debug ops
// (csrc/kernel_paths.h names the CUDA paths).
#pragma once

#include "../op_signatures.h"
#include "cpu_common.h"
#include "isa.h"

namespace causal_conv1d {
namespace cpu {

// One row of an op's dispatch table. The last row of a table is its general path: no eligible()
// (nullptr), every case the op's checks accept.
template <typename Args>
struct PathRow {
  const char* path;
  bool (*eligible)(const Args& a);
  void (*launch)(const Args& a);
};

// The row that runs `a`: the first that is eligible, else the last.
template <typename Args, int N>
const PathRow<Args>& select_path(const PathRow<Args> (&table)[N], const Args& a) {
  for (int i = 0; i + 1 < N; ++i)
    if (table[i].eligible(a)) return table[i];
  return table[N - 1];
}

// The paths (one file each; each launcher assumes its eligible() held), as in csrc/cuda/dispatch.cuh:
// CC1D_CPU_GENERAL_PATH(ns, Args) declares a general path (the last row of a table), a launcher
// only, in namespace ns; CC1D_CPU_PATH(ns, Args) a path with an eligible() test too.
#define CC1D_CPU_GENERAL_PATH(ns, Args) \
  namespace ns {                        \
  void launch(const Args& a);           \
  }
#define CC1D_CPU_PATH(ns, Args)         \
  CC1D_CPU_GENERAL_PATH(ns, Args)       \
  namespace ns {                        \
  bool eligible(const Args& a);         \
  }

#if CC1D_X86_SIMD
CC1D_CPU_PATH(fwd_avx512, FwdArgs)  // fwd_simd.cpp: float32 / float16 / bfloat16 on a CPU with AVX-512 (F, BW, VL, DQ)
CC1D_CPU_PATH(fwd_avx2, FwdArgs)    // fwd_simd.cpp: the same kernels for AVX2 + FMA + F16C
#endif
CC1D_CPU_GENERAL_PATH(fwd_scalar, FwdArgs)             // fwd_scalar.cpp: every dtype, float64 included, on any CPU
CC1D_CPU_GENERAL_PATH(bwd_general, BwdArgs)            // bwd.cpp
CC1D_CPU_GENERAL_PATH(update_general, UpdateArgs)      // update.cpp
CC1D_CPU_GENERAL_PATH(packed_fwd_general, PackedArgs)  // packed_fwd.cpp
CC1D_CPU_GENERAL_PATH(packed_bwd_general, PackedArgs)  // packed_bwd.cpp

#undef CC1D_CPU_PATH
#undef CC1D_CPU_GENERAL_PATH

// Each op's table (dispatch.cpp).
void run_fwd(const FwdArgs& a);
void run_bwd(const BwdArgs& a);
void run_update(const UpdateArgs& a);
void run_packed_fwd(const PackedArgs& a);
void run_packed_bwd(const PackedArgs& a);

// The ops (registered in register.cpp).
std::tuple<Tensor, Tensor> fwd_cpu(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                   const OptTensor& seq_idx, const OptTensor& initial_states,
                                   bool return_final_states, bool silu, const OptTensor& residual);
std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_cpu(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                                   const Tensor& dout, const OptTensor& seq_idx,
                                                   const OptTensor& initial_states, const OptTensor& dfinal_states,
                                                   bool return_dinitial_states, bool silu);
Tensor update_cpu(const Tensor& x, Tensor& conv_state, const Tensor& weight, const OptTensor& bias, bool silu,
                  const OptTensor& cache_seqlens, const OptTensor& conv_state_indices);
PackedFwdOp packed_fwd_cpu;  // signatures of the packed ops: op_signatures.h (shared with the CUDA build)
PackedBwdOp packed_bwd_cpu;

}  // namespace cpu
}  // namespace causal_conv1d
