// The kernel paths of the ops, their run-time switches and what ran last (no torch here: the CUDA
// kernel files include it, and so does csrc/ops.cpp, which registers the debug ops that read it).
//
// A path is one kernel (or kernel pair) that can compute an op. Each op's CUDA dispatch table
// (csrc/cuda/dispatch.cu) lists its paths in the order they are tried: the first whose switch is
// on and that is eligible for the case runs; the last row is the general path, eligible for every
// case the op's checks accept. Switches: the environment variables below (read once per process by
// the parser of csrc/switch_on.h; on when unset), overridden in process by
// `torch.ops.causal_conv1d._set_kernel_path` (tests). The names here are the contract's
// (causal_conv1d_contract: KERNEL_SWITCHES) and the debug ops' vocabulary.
#pragma once

#include <atomic>
#include <string>

#include "switch_on.h"

namespace causal_conv1d {

enum class KernelPath : int {
  kNone = 0,
  kFwdCfFast,
  kFwdClFast,
  kFwdGeneral,
  kBwdCfFast,
  kBwdClFast,
  kBwdGeneral,
  kUpdateFast,
  kUpdateGeneral,
  kVarlenClFast,
  kVarlenCfFast,
  kVarlenGeneral,
  kPackedFwdClFast,
  kSpecUpdateDecode,
  kSpecUpdateFast,
  kSpecUpdateGeneral,
  kPackedBwdClFast,
  kPackedBwdGeneral,
  kCount,
};

// packed_fwd runs on packed_fwd_cl_fast or the varlen_fwd table (its path is recorded as varlen_fwd's);
// packed_bwd has its own.
enum class KernelOp : int { kFwd = 0, kBwd, kUpdate, kVarlenFwd, kSpecUpdate, kPackedBwd, kCount };

struct KernelPathInfo {
  const char* name;        // what the debug ops say
  KernelOp op;             // the op it computes
  const char* env_switch;  // nullptr: no switch (a general path: always on)
};

// Indexed by KernelPath.
inline constexpr KernelPathInfo kKernelPaths[] = {
    {"none", KernelOp::kCount, nullptr},
    {"fwd_cf_fast", KernelOp::kFwd, "CAUSAL_CONV1D_FWD_FAST"},
    {"fwd_cl_fast", KernelOp::kFwd, "CAUSAL_CONV1D_FWD_CL_FAST"},
    {"fwd_general", KernelOp::kFwd, nullptr},
    {"bwd_cf_fast", KernelOp::kBwd, "CAUSAL_CONV1D_BWD_FAST"},
    {"bwd_cl_fast", KernelOp::kBwd, "CAUSAL_CONV1D_BWD_CL_FAST"},
    {"bwd_general", KernelOp::kBwd, nullptr},
    {"update_fast", KernelOp::kUpdate, "CAUSAL_CONV1D_UPDATE_FAST"},
    {"update_general", KernelOp::kUpdate, nullptr},
    {"varlen_cl_fast", KernelOp::kVarlenFwd, "CAUSAL_CONV1D_VARLEN_CL_FAST"},
    {"varlen_cf_fast", KernelOp::kVarlenFwd, "CAUSAL_CONV1D_VARLEN_CF_FAST"},
    {"varlen_general", KernelOp::kVarlenFwd, nullptr},
    {"packed_fwd_cl_fast", KernelOp::kVarlenFwd, "CAUSAL_CONV1D_PACKED_FWD_CL_FAST"},  // packed_fwd only
    {"spec_update_decode", KernelOp::kSpecUpdate, "CAUSAL_CONV1D_SPEC_UPDATE_DECODE"},
    {"spec_update_fast", KernelOp::kSpecUpdate, "CAUSAL_CONV1D_SPEC_UPDATE_FAST"},
    {"spec_update_general", KernelOp::kSpecUpdate, nullptr},
    {"packed_bwd_cl_fast", KernelOp::kPackedBwd, "CAUSAL_CONV1D_PACKED_BWD_CL_FAST"},
    {"packed_bwd_general", KernelOp::kPackedBwd, nullptr},
};
static_assert(sizeof(kKernelPaths) / sizeof(kKernelPaths[0]) == static_cast<int>(KernelPath::kCount),
              "one kKernelPaths row per KernelPath");

inline constexpr const char* kKernelOpNames[] = {"fwd", "bwd", "update", "varlen_fwd", "spec_update", "packed_bwd"};
static_assert(sizeof(kKernelOpNames) / sizeof(kKernelOpNames[0]) == static_cast<int>(KernelOp::kCount),
              "one kKernelOpNames entry per KernelOp");

namespace kernel_paths_detail {
// Zero-initialised (static storage). state: 0 = the environment's answer not read yet, 1 = off, 2 = on.
inline std::atomic<int> env_state[static_cast<int>(KernelPath::kCount)];
// 0 = no override (the environment decides), 1 = forced off, 2 = forced on; set by the debug op.
inline std::atomic<int> override_state[static_cast<int>(KernelPath::kCount)];
inline std::atomic<int> override_set{0};  // any override active (one load on the hot path when none)
// The path the last launch of each op ran (a KernelPath), whatever thread launched it.
inline std::atomic<int> last_ran[static_cast<int>(KernelOp::kCount)];
}  // namespace kernel_paths_detail

// Whether path `p` may run: the in-process override if one is set, else its switch (read from the
// environment once per process; an invalid value throws std::invalid_argument naming the variable
// at each use until it is fixed).
inline bool kernel_path_enabled(KernelPath p) {
  namespace d = kernel_paths_detail;
  const int i = static_cast<int>(p);
  if (d::override_set.load(std::memory_order_relaxed) != 0) {
    const int o = d::override_state[i].load(std::memory_order_relaxed);
    if (o != 0) return o == 2;
  }
  int s = d::env_state[i].load(std::memory_order_relaxed);
  if (s == 0) {
    const char* name = kKernelPaths[i].env_switch;
    s = (name == nullptr || switch_on(name)) ? 2 : 1;
    d::env_state[i].store(s, std::memory_order_relaxed);
  }
  return s == 2;
}

inline void record_kernel_path(KernelPath p) {
  const int op = static_cast<int>(kKernelPaths[static_cast<int>(p)].op);
  kernel_paths_detail::last_ran[op].store(static_cast<int>(p), std::memory_order_relaxed);
}

// The KernelPath called `name`, or kCount when there is none.
inline KernelPath kernel_path_named(const std::string& name) {
  for (int i = 1; i < static_cast<int>(KernelPath::kCount); ++i)
    if (name == kKernelPaths[i].name) return static_cast<KernelPath>(i);
  return KernelPath::kCount;
}

// The path names joined by `sep` ("fwd_cf_fast, fwd_cl_fast, ..." for messages, "," for the debug op).
inline std::string kernel_path_list(const char* sep = ", ") {
  std::string all;
  for (int i = 1; i < static_cast<int>(KernelPath::kCount); ++i) {
    if (i > 1) all += sep;
    all += kKernelPaths[i].name;
  }
  return all;
}

// The op names joined by ", " (for messages).
inline std::string kernel_op_list() {
  std::string all;
  for (int i = 0; i < static_cast<int>(KernelOp::kCount); ++i) {
    if (i > 0) all += ", ";
    all += kKernelOpNames[i];
  }
  return all;
}

// The KernelOp called `op` ("fwd", "bwd", ...), or kCount when there is none.
inline KernelOp kernel_op_named(const std::string& op) {
  for (int i = 0; i < static_cast<int>(KernelOp::kCount); ++i)
    if (op == kKernelOpNames[i]) return static_cast<KernelOp>(i);
  return KernelOp::kCount;
}

// The name of the path the last launch of `op` ran ("none" before the first).
inline const char* last_kernel_path(KernelOp op) {
  return kKernelPaths[kernel_paths_detail::last_ran[static_cast<int>(op)].load(std::memory_order_relaxed)].name;
}

// state: 1 forces the path on (if eligible), 0 off, -1 back to its environment variable.
inline void set_kernel_path_override(KernelPath p, int state) {
  namespace d = kernel_paths_detail;
  d::override_state[static_cast<int>(p)].store(state < 0 ? 0 : (state ? 2 : 1), std::memory_order_relaxed);
  int any = 0;
  for (int i = 0; i < static_cast<int>(KernelPath::kCount); ++i)
    any |= d::override_state[i].load(std::memory_order_relaxed);
  d::override_set.store(any, std::memory_order_relaxed);
}

}  // namespace causal_conv1d
