// Fast channel-first forward (issue 8): see fwd_cf_fast.cu. Opt-in while it is being measured:
// run_fwd (fwd.cu) tries it first unless the environment variable CAUSAL_CONV1D_FWD_FAST is "0".
#pragma once

#include "common.cuh"

namespace causal_conv1d_cuda {

// Whether the fast path is on: unless CAUSAL_CONV1D_FWD_FAST == "0" (read once per process, then cached).
bool fwd_cf_fast_enabled();

// Launches the fast channel-first forward on `stream` and returns true; returns false without
// launching anything when the case is not eligible (channel-last, seq_idx, width > 4, rows not
// 16-byte aligned, seqlen not a multiple of 16 bytes, grid too large): the caller then runs the
// general kernel.
bool launch_fwd_channel_first_fast(const ConvParams& p, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
