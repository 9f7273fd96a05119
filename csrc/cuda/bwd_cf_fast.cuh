// Fast channel-first backward (issue 8): see bwd_cf_fast.cu. Opt-in while it is being measured:
// run_bwd (bwd.cu) tries it first unless the environment variable CAUSAL_CONV1D_BWD_FAST is "0".
#pragma once

#include "common.cuh"

namespace causal_conv1d_cuda {

// Whether the fast path is on: unless CAUSAL_CONV1D_BWD_FAST == "0" (read once per process, then cached).
bool bwd_cf_fast_enabled();

// Partial rows (of width + 1 floats per channel) the fast backward needs in p.partial for this
// problem, or 0 when the case is not eligible. bwd_num_parts (bwd.cu) sizes the workspace with it.
int64_t bwd_cf_fast_num_parts(const ConvParams& p);

// Launches the fast channel-first backward (dx, then dweight / dbias through a fixed-order reduce
// of the partial rows) on `stream` and returns true; returns false without launching anything when
// the case is not eligible (channel-last, seq_idx, initial_states, dfinal_states, dinitial_states,
// width > 4, rows not 16-byte aligned, seqlen not a multiple of 16 bytes, a workspace smaller than
// bwd_cf_fast_num_parts, grid too large): the caller then runs the general kernel.
bool launch_bwd_channel_first_fast(const ConvParams& p, cudaStream_t stream);

// Launches the fixed-order reduce of the fast backward kernels (channel-first here, channel-last in
// bwd_cl_fast.cu): dweight[d, k] (k < width) and dbias[d] = sums over i < nparts of
// p.partial[(i * (width + 1) + k) * dim + d], cast to weight's / bias's dtype (dbias only when
// p.dbias is set). Same order every run: bit-identical results.
void launch_bwd_fast_reduce(const ConvParams& p, int64_t nparts, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
