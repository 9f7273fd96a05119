// The dispatch table of each CUDA op: its kernel paths in the order they are tried (dispatch.cuh:
// the first whose switch is on and that is eligible runs; the last row, the general path, runs
// every other case). Adding a path: its file (eligible() + launch()), a KernelPath with its name
// and switch (csrc/kernel_paths.h, and the contract's list), and one row here.
#include "dispatch.cuh"

namespace causal_conv1d_cuda {
namespace {

using causal_conv1d::record_kernel_path;

const PathRow<ConvParams> kFwdPaths[] = {
    {KernelPath::kFwdCfFast, fwd_cf_fast::eligible, fwd_cf_fast::launch},
    {KernelPath::kFwdClFast, fwd_cl_fast::eligible, fwd_cl_fast::launch},
    {KernelPath::kFwdGeneral, nullptr, fwd_general::launch},
};

const PathRow<ConvParams> kBwdPaths[] = {
    {KernelPath::kBwdCfFast, bwd_cf_fast::eligible, bwd_cf_fast::launch, bwd_cf_fast::num_parts},
    {KernelPath::kBwdClFast, bwd_cl_fast::eligible, bwd_cl_fast::launch, bwd_cl_fast::num_parts},
    {KernelPath::kBwdGeneral, nullptr, bwd_general::launch, bwd_general::num_parts},
};

const PathRow<UpdateParams> kUpdatePaths[] = {
    {KernelPath::kUpdateFast, update_fast::eligible, update_fast::launch},
    {KernelPath::kUpdateGeneral, nullptr, update_general::launch},
};

const PathRow<VarlenParams> kVarlenFwdPaths[] = {
    {KernelPath::kVarlenClFast, varlen_cl_fast::eligible, varlen_cl_fast::launch},
    {KernelPath::kVarlenCfFast, varlen_cf_fast::eligible, varlen_cf_fast::launch},
    {KernelPath::kVarlenGeneral, nullptr, varlen_general::launch},
};

const PathRow<SpecParams> kSpecUpdatePaths[] = {
    {KernelPath::kSpecUpdateDecode, spec_update_decode::eligible, spec_update_decode::launch},
    {KernelPath::kSpecUpdateFast, spec_update_fast::eligible, spec_update_fast::launch},
    {KernelPath::kSpecUpdateGeneral, nullptr, spec_update_general::launch},
};

const PathRow<PackedBwdParams> kPackedBwdPaths[] = {
    {KernelPath::kPackedBwdClFast, packed_bwd_cl_fast::eligible, packed_bwd_cl_fast::launch,
     packed_bwd_cl_fast::num_parts},
    {KernelPath::kPackedBwdGeneral, nullptr, packed_bwd_general::launch, [](const PackedBwdParams&) -> int64_t {
       return 0;  // sums inside its blocks: no workspace
     }},
};

template <typename Params>
void run_row(const PathRow<Params>& row, const Params& p, cudaStream_t stream) {
  record_kernel_path(row.path);
  row.launch(p, stream);
}

}  // namespace

void run_fwd(const ConvParams& p, cudaStream_t stream) { run_row(select_path(kFwdPaths, p), p, stream); }

bool run_packed_fwd_cl_fast(const ConvParams& p, cudaStream_t stream) {
  if (!causal_conv1d::kernel_path_enabled(KernelPath::kPackedFwdClFast) || !fwd_cl_fast::eligible(p)) return false;
  record_kernel_path(KernelPath::kPackedFwdClFast);
  fwd_cl_fast::launch(p, stream);
  return true;
}

KernelPath select_bwd(const ConvParams& p) { return select_path(kBwdPaths, p).path; }

int64_t bwd_num_parts(KernelPath path, const ConvParams& p) { return path_row(kBwdPaths, path).num_parts(p); }

void run_bwd(KernelPath path, const ConvParams& p, cudaStream_t stream) { run_row(path_row(kBwdPaths, path), p, stream); }

void run_update(const UpdateParams& p, cudaStream_t stream) { run_row(select_path(kUpdatePaths, p), p, stream); }

void run_varlen_fwd(const VarlenParams& p, cudaStream_t stream) {
  run_row(select_path(kVarlenFwdPaths, p), p, stream);
}

void run_spec_update(const SpecParams& p, cudaStream_t stream) {
  run_row(select_path(kSpecUpdatePaths, p), p, stream);
}

KernelPath select_packed_bwd(const PackedBwdParams& p) { return select_path(kPackedBwdPaths, p).path; }

int64_t packed_bwd_num_parts(KernelPath path, const PackedBwdParams& p) {
  return path_row(kPackedBwdPaths, path).num_parts(p);
}

void run_packed_bwd(KernelPath path, const PackedBwdParams& p, cudaStream_t stream) {
  run_row(path_row(kPackedBwdPaths, path), p, stream);
}

}  // namespace causal_conv1d_cuda
