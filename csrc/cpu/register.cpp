// The CPU implementations of the causal_conv1d ops (schemas: csrc/ops.cpp; the serving ops
// register in varlen_fwd.cpp and spec_update.cpp).
#include "dispatch.h"

CC1D_LIBRARY_IMPL(causal_conv1d, CPU, m) {
  m.impl("fwd", CC1D_KERNEL(&causal_conv1d::cpu::fwd_cpu));
  m.impl("bwd", CC1D_KERNEL(&causal_conv1d::cpu::bwd_cpu));
  m.impl("update", CC1D_KERNEL(&causal_conv1d::cpu::update_cpu));
  m.impl("packed_fwd", CC1D_KERNEL(&causal_conv1d::cpu::packed_fwd_cpu));
  m.impl("packed_bwd", CC1D_KERNEL(&causal_conv1d::cpu::packed_bwd_cpu));
}
