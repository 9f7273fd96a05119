// Fast channel-last forward (issue 8): see fwd_cl_fast.cu. On by default: run_fwd (fwd.cu) tries it
// first unless the environment variable CAUSAL_CONV1D_FWD_CL_FAST is "0".
#pragma once

#include "common.cuh"

namespace causal_conv1d_cuda {

// Whether the fast path is on: unless CAUSAL_CONV1D_FWD_CL_FAST == "0" (read once per process, then cached).
bool fwd_cl_fast_enabled();

// Launches the fast channel-last forward on `stream` and returns true; returns false without
// launching anything when the case is not eligible (seq_idx, width > 4, channels not unit-stride,
// for 16-bit x: odd dim, odd token or batch pitch, or x / out not 4-byte aligned; index ranges too
// large): the caller then runs the general kernel.
bool launch_fwd_channel_last_fast(const ConvParams& p, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
