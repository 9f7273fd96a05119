// Fast channel-last backward (issue 8): see bwd_cl_fast.cu. run_bwd (bwd.cu) tries it first for
// channel-last x unless the environment variable CAUSAL_CONV1D_BWD_CL_FAST is "0".
#pragma once

#include "common.cuh"

namespace causal_conv1d_cuda {

// Whether the fast path is on: unless CAUSAL_CONV1D_BWD_CL_FAST == "0" (read once per process, then cached).
bool bwd_cl_fast_enabled();

// Partial row sets (of width + 1 rows of dim floats) the fast channel-last backward needs in
// p.partial for this problem, or 0 when the case is not eligible. bwd_num_parts (bwd.cu) sizes the
// workspace with it.
int64_t bwd_cl_fast_num_parts(const ConvParams& p);

// Launches the fast channel-last backward (dx, then dweight / dbias through a fixed-order reduce of
// the partial rows) on `stream` and returns true; returns false without launching anything when the
// case is not eligible (channel-first, seq_idx, initial_states, dfinal_states, dinitial_states,
// width > 4, for 16-bit x: an odd dim, an odd token or batch pitch or a pointer not 4-byte aligned;
// a workspace smaller than bwd_cl_fast_num_parts, grid too large): the caller then runs the general
// kernel.
bool launch_bwd_channel_last_fast(const ConvParams& p, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
