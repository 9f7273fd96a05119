// Launch parameters of the serving kernels: the packed varlen prefill over a state cache
// (varlen_fwd: varlen_general.cu, varlen_cl_fast.cu, varlen_cf_fast.cu) and the decode / speculative
// update (spec_update.cu). Filled by csrc/cuda/varlen_ops.cpp; semantics: docs/serving.md. Plain
// structs, no torch. Strides in elements.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace causal_conv1d_cuda {

// The cache lines of one request: 1-D cache indices (line = idx[i * ci_rs]) or, with prefix
// caching, a 2-D table (line of block j = idx[i * ci_rs + j * ci_cs]).
struct CacheIndex {
  const int32_t* idx = nullptr;  // null: line i for request i
  int64_t ci_rs = 0, ci_cs = 0;
  int64_t cols = 1;  // columns of a 2-D table (max_blocks)
  // prefix caching (all set together; null otherwise)
  const int32_t* init_idx = nullptr;   // initial_state_idx (batch,)
  const int32_t* last_idx = nullptr;   // block_idx_last_scheduled_token (batch,)
  const int32_t* first_idx = nullptr;  // block_idx_first_scheduled_token (batch,) (prefill only)
  const int32_t* computed = nullptr;   // num_computed_tokens (batch,) (prefill only)
  int64_t block = 0;                   // block_size_to_align (prefill only)
};

struct VarlenParams {
  int dim = 0, width = 0, batch = 0;
  int64_t total = 0;  // tokens in x
  int x_dtype = 0, w_dtype = 0, b_dtype = 0, st_dtype = 0;
  bool silu = false;
  const void* x = nullptr;  // (dim, total)
  int64_t x_ds = 0, x_ts = 0;
  void* out = nullptr;  // (dim, total), x's dtype
  int64_t o_ds = 0, o_ts = 0;
  const void* weight = nullptr;
  int64_t w_cs = 0, w_ws = 0;
  const void* bias = nullptr;
  int64_t b_s = 0;
  void* states = nullptr;  // (lines, dim, state_len), st_dtype, updated in place
  int64_t st_bs = 0, st_cs = 0, st_ls = 0;
  int64_t lines = 0, state_len = 0;
  const int32_t* qsl = nullptr;       // (batch + 1,)
  const int32_t* has_init = nullptr;  // (batch,) int32 or null
  CacheIndex ci;
  int64_t pad_slot_id = -1;
  int num_sms = 132;
  // The packed forward's fused residual (dim, total), x's dtype: out = act(conv + bias) + residual; null
  // for varlen_fwd (the serving op takes none). Last: the other fields keep their offsets.
  const void* res = nullptr;
  int64_t r_ds = 0, r_ts = 0;
};

struct SpecParams {
  int batch = 0, dim = 0, width = 0, seqlen = 0;  // seqlen: tokens per request (the most, when ragged)
  int x_dtype = 0, w_dtype = 0, b_dtype = 0, st_dtype = 0;
  bool silu = false;
  // x: (batch, dim, seqlen) with strides x_bs, x_cs, x_ls; ragged (qsl set): (num_tokens, dim),
  // token t of request b at (qsl[b] + t) * x_ls, x_bs unused. out: the same with o_*.
  const void* x = nullptr;
  int64_t x_bs = 0, x_cs = 0, x_ls = 0;
  void* out = nullptr;
  int64_t o_bs = 0, o_cs = 0, o_ls = 0;
  int64_t total = 0;  // ragged: tokens in x
  const void* weight = nullptr;
  int64_t w_cs = 0, w_ws = 0;
  const void* bias = nullptr;
  int64_t b_s = 0;
  void* state = nullptr;  // (lines, dim, state_len), st_dtype
  int64_t st_bs = 0, st_cs = 0, st_ls = 0;
  int64_t lines = 0, state_len = 0;
  const int32_t* num_accepted = nullptr;  // (batch,) or null (plain update)
  const int32_t* qsl = nullptr;           // (batch + 1,) or null
  const int32_t* parent = nullptr;        // retrieve_parent_token (batch, >= seqlen) or null
  int64_t pa_bs = 0, pa_ts = 0;
  CacheIndex ci;
  int64_t pad_slot_id = -1;
  int num_sms = 132;
};

// Each picks the op's kernel path (dispatch.cu), launches one kernel on `stream` and checks the launch.
void run_varlen_fwd(const VarlenParams& p, cudaStream_t stream);
void run_spec_update(const SpecParams& p, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
