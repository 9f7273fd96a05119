// Fast decode update (issue 8): see update_fast.cu. run_update (update.cu) tries it first unless the
// environment variable CAUSAL_CONV1D_UPDATE_FAST is "0".
#pragma once

#include "common.cuh"

namespace causal_conv1d_cuda {

// Whether the fast path is on: unless CAUSAL_CONV1D_UPDATE_FAST == "0" (read once per process, then cached).
bool update_fast_enabled();

// Launches the fast decode update on `stream` and returns true; returns false without launching
// anything when the case is not eligible (seqlen != 1, cache_seqlens, width > 4, state_len other
// than width - 1 or width, dim not a multiple of the 16-byte vector, unaligned or unusually
// strided x / out / state): the caller then runs the general kernel.
bool launch_update_fast(const UpdateParams& p, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
