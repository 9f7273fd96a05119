// The dispatch table of each CPU op: its kernel paths in the order they are tried (dispatch.h: the
// first that is eligible runs; the last row, the general path, runs every other case). Adding a
// path: its file (eligible() + launch()), its declaration in dispatch.h and one row here.
#include "dispatch.h"

namespace causal_conv1d {
namespace cpu {
namespace {

const PathRow<FwdArgs> kFwdPaths[] = {
#if CC1D_X86_SIMD
    {"fwd_avx512", fwd_avx512::eligible, fwd_avx512::launch},
    {"fwd_avx2", fwd_avx2::eligible, fwd_avx2::launch},
#endif
    {"fwd_scalar", nullptr, fwd_scalar::launch},
};

const PathRow<BwdArgs> kBwdPaths[] = {
    {"bwd_general", nullptr, bwd_general::launch},
};

const PathRow<UpdateArgs> kUpdatePaths[] = {
    {"update_general", nullptr, update_general::launch},
};

const PathRow<PackedArgs> kPackedFwdPaths[] = {
    {"packed_fwd_general", nullptr, packed_fwd_general::launch},
};

const PathRow<PackedArgs> kPackedBwdPaths[] = {
    {"packed_bwd_general", nullptr, packed_bwd_general::launch},
};

}  // namespace

void run_fwd(const FwdArgs& a) { select_path(kFwdPaths, a).launch(a); }

void run_bwd(const BwdArgs& a) { select_path(kBwdPaths, a).launch(a); }

void run_update(const UpdateArgs& a) { select_path(kUpdatePaths, a).launch(a); }

void run_packed_fwd(const PackedArgs& a) { select_path(kPackedFwdPaths, a).launch(a); }

void run_packed_bwd(const PackedArgs& a) { select_path(kPackedBwdPaths, a).launch(a); }

}  // namespace cpu
}  // namespace causal_conv1d
