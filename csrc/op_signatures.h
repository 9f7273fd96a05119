// The signatures of the ops that both the CPU and the CUDA op layer declare in a header (the
// serving ops and the packed-sequence ops), written once: a backend declares its implementation
// with the function type, e.g. `VarlenFwdOp varlen_fwd_cpu;` declares
// `Tensor varlen_fwd_cpu(const Tensor& x, ...)`. The arguments are the schema's (ops.cpp), in order;
// a definition with other arguments would be an overload and leave the declared function undefined.
#pragma once

#include <cstdint>
#include <tuple>

#include "torch_api.h"

namespace causal_conv1d {

using VarlenFwdOp = Tensor(const Tensor& x, const Tensor& weight, const OptTensor& bias, Tensor& conv_states,
                           const Tensor& query_start_loc, const OptTensor& cache_indices,
                           const OptTensor& has_initial_state, bool silu, int64_t pad_slot_id,
                           const OptTensor& block_idx_first, const OptTensor& block_idx_last,
                           const OptTensor& initial_state_idx, const OptTensor& num_computed_tokens,
                           int64_t block_size_to_align);
using SpecUpdateOp = Tensor(const Tensor& x, Tensor& conv_state, const Tensor& weight, const OptTensor& bias, bool silu,
                            const OptTensor& conv_state_indices, const OptTensor& num_accepted_tokens,
                            int64_t pad_slot_id, const OptTensor& query_start_loc, int64_t max_query_len,
                            const OptTensor& block_idx_last, const OptTensor& initial_state_idx,
                            const OptTensor& retrieve_parent_token);
using PackedFwdOp = std::tuple<Tensor, Tensor>(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                               const Tensor& cu_seqlens, const OptTensor& initial_states,
                                               bool return_final_states, bool silu,
                                               const OptTensor& residual);
using PackedBwdOp = std::tuple<Tensor, Tensor, Tensor, Tensor>(const Tensor& x, const Tensor& weight,
                                                               const OptTensor& bias, const Tensor& dout,
                                                               const Tensor& cu_seqlens,
                                                               const OptTensor& initial_states,
                                                               const OptTensor& dfinal_states,
                                                               bool return_dinitial_states, bool silu);

}  // namespace causal_conv1d
