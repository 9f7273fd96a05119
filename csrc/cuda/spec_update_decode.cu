// The plain decode step of spec_update on the update op's kernels (kernel path spec_update_decode).
// With state_len == width - 1 a cache line is exactly the window, so docs/serving.md's plain decode
// (window [0, W-1) shifted by the new tokens) is upstream's causal_conv1d_update with cache indices:
// the same kernels (update_fast.cu, the general update.cu) compute it. Eligible: no
// num_accepted_tokens, query_start_loc, retrieve_parent_token or prefix caching; the cache in x's
// dtype with state_len == width - 1; a negative pad_slot_id (the update kernels skip every negative
// or out-of-range line, which then is the same rule); 1-D cache indices with unit stride.
#include "dispatch.cuh"

namespace causal_conv1d_cuda {
namespace {

UpdateParams as_update(const SpecParams& p) {
  UpdateParams u;
  u.batch = p.batch;
  u.dim = p.dim;
  u.width = p.width;
  u.seqlen = p.seqlen;
  u.state_len = static_cast<int>(p.state_len);
  u.state_batch = static_cast<int>(p.lines);
  u.x_dtype = p.x_dtype;
  u.w_dtype = p.w_dtype;
  u.b_dtype = p.b_dtype;
  u.silu = p.silu;
  u.num_sms = static_cast<int16_t>(p.num_sms < 32767 ? p.num_sms : 32767);
  u.x = p.x;
  u.x_bs = p.x_bs;
  u.x_cs = p.x_cs;
  u.x_ls = p.x_ls;
  u.state = p.state;
  u.st_bs = p.st_bs;
  u.st_cs = p.st_cs;
  u.st_ls = p.st_ls;
  u.out = p.out;
  u.out_bs = p.o_bs;
  u.out_cs = p.o_cs;
  u.out_ls = p.o_ls;
  u.weight = p.weight;
  u.w_cs = p.w_cs;
  u.w_ws = p.w_ws;
  u.bias = p.bias;
  u.b_s = p.b_s;
  u.state_indices = p.ci.idx;
  return u;
}

}  // namespace

namespace spec_update_decode {
bool eligible(const SpecParams& p) {
  return p.num_accepted == nullptr && p.qsl == nullptr && p.parent == nullptr && p.ci.last_idx == nullptr &&
         p.st_dtype == p.x_dtype && p.state_len == p.width - 1 && p.pad_slot_id < 0 &&
         (p.ci.idx == nullptr || p.ci.ci_rs == 1) && p.lines <= INT32_MAX;
}

void launch(const SpecParams& p, cudaStream_t stream) {
  const UpdateParams u = as_update(p);
  if (causal_conv1d::kernel_path_enabled(KernelPath::kUpdateFast) && update_fast::eligible(u)) {
    update_fast::launch(u, stream);
  } else {
    update_general::launch(u, stream);
  }
}
}  // namespace spec_update_decode

}  // namespace causal_conv1d_cuda
