// The CPU implementations of the causal_conv1d ops (schemas: csrc/ops.cpp).
#include "dispatch.h"
#include "serving_common.h"

CC1D_LIBRARY_IMPL(causal_conv1d, CPU, m) {
  m.impl("fwd", CC1D_KERNEL(&causal_conv1d::cpu::fwd_cpu));
  m.impl("bwd", CC1D_KERNEL(&causal_conv1d::cpu::bwd_cpu));
  m.impl("update", CC1D_KERNEL(&causal_conv1d::cpu::update_cpu));
  m.impl("packed_fwd", CC1D_KERNEL(&causal_conv1d::cpu::packed_fwd_cpu));
  m.impl("packed_bwd", CC1D_KERNEL(&causal_conv1d::cpu::packed_bwd_cpu));
  m.impl("varlen_fwd", CC1D_KERNEL(&causal_conv1d::cpu_serving::varlen_fwd_cpu));
  m.impl("spec_update", CC1D_KERNEL(&causal_conv1d::cpu_serving::spec_update_cpu));
}
