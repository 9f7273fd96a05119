// Launch parameters and host entry points of the serving kernels (csrc/cuda/varlen.cu): packed
// varlen prefill over a state cache, and the speculative-decoding update. Filled by
// csrc/cuda/varlen_ops.cpp (semantics: causal_conv1d/varlen.py). Plain structs, no torch.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace causal_conv1d_cuda {

struct VarlenParams {
  int dim = 0, width = 0, batch = 0;
  int64_t total = 0;  // tokens in x
  int x_dtype = 0, w_dtype = 0, b_dtype = 0;
  bool silu = false;
  const void* x = nullptr;  // (dim, total)
  int64_t x_ds = 0, x_ts = 0;
  void* out = nullptr;  // (dim, total)
  int64_t o_ds = 0, o_ts = 0;
  const void* weight = nullptr;
  int64_t w_cs = 0, w_ws = 0;
  const void* bias = nullptr;
  int64_t b_s = 0;
  void* states = nullptr;  // (lines, dim, state_len), x's dtype, updated in place
  int64_t st_bs = 0, st_cs = 0, st_ls = 0;
  int64_t lines = 0, state_len = 0;
  const int32_t* qsl = nullptr;         // (batch + 1,)
  const int32_t* cache_indices = nullptr;  // (batch,) or null
  const int32_t* has_init = nullptr;    // (batch,) int32 or null
  int64_t pad_slot_id = -1;
};

struct SpecParams {
  int batch = 0, dim = 0, width = 0, seqlen = 0;
  int x_dtype = 0, w_dtype = 0, b_dtype = 0;
  bool silu = false;
  const void* x = nullptr;  // (batch, dim, seqlen)
  int64_t x_bs = 0, x_cs = 0, x_ls = 0;
  void* out = nullptr;
  int64_t o_bs = 0, o_cs = 0, o_ls = 0;
  const void* weight = nullptr;
  int64_t w_cs = 0, w_ws = 0;
  const void* bias = nullptr;
  int64_t b_s = 0;
  void* state = nullptr;  // (lines, dim, state_len)
  int64_t st_bs = 0, st_cs = 0, st_ls = 0;
  int64_t lines = 0, state_len = 0;
  const int32_t* state_indices = nullptr;  // (batch,) or null
  const int32_t* num_accepted = nullptr;   // (batch,) or null
  int64_t pad_slot_id = -1;
};

// Each launches one kernel on `stream` and checks the launch.
void run_varlen_fwd(const VarlenParams& p, cudaStream_t stream);
void run_spec_update(const SpecParams& p, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
