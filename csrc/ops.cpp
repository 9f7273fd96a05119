// The causal_conv1d torch ops: one library block with every schema (docs/ARCHITECTURE.md,
// "Torch ops"; CC1D_LIBRARY is STABLE_TORCH_LIBRARY or TORCH_LIBRARY, csrc/torch_api.h), plus the empty Python module init that makes `import causal_conv1d._C` load this
// library (and so run the registrations) while using only the limited (abi3) Python C API.
//
// Backends register their kernels elsewhere: csrc/cpu/register.cpp (CPU) and csrc/cuda/ (CUDA). A
// build without CUDA kernels registers CUDA kernels here that raise a clear error instead of
// torch's "could not run ... with arguments from the 'CUDA' backend".

// The limited API of CPython 3.9 (wheel tag cp39-abi3, build_support/extension.py PY_LIMITED_API);
// this is the only file that includes Python.h. torch's BuildExtension may define its own value.
#undef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000
#include <Python.h>

#include "torch_api.h"

#include <string>
#include <tuple>

#include "kernel_paths.h"

extern "C" {
// An empty `_C` module: importing it loads this shared library, whose static initialisers
// register the ops with the dispatcher. Nothing else crosses the Python C API.
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C",  // name
      "causal_conv1d torch ops (use torch.ops.causal_conv1d)",  // doc
      -1,       // per-interpreter state size
      nullptr,  // methods
  };
  return PyModule_Create(&module_def);
}
}

CC1D_LIBRARY(causal_conv1d, m) {
  // residual (fwd, packed_fwd): out = act(conv(x) + bias) + residual, fused into the output store
  // (x's shape and dtype; checks.h, check_residual). Last, with a default: positional calls of the
  // seven other arguments are unchanged.
  m.def(
      "fwd(Tensor x, Tensor weight, Tensor? bias, Tensor? seq_idx, Tensor? initial_states, "
      "bool return_final_states, bool silu, Tensor? residual=None) -> (Tensor out, Tensor final_states)");
  m.def(
      "bwd(Tensor x, Tensor weight, Tensor? bias, Tensor dout, Tensor? seq_idx, Tensor? initial_states, "
      "Tensor? dfinal_states, bool return_dinitial_states, bool silu) "
      "-> (Tensor dx, Tensor dweight, Tensor dbias, Tensor dinitial_states)");
  m.def(
      "update(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias, bool silu, "
      "Tensor? cache_seqlens, Tensor? conv_state_indices) -> Tensor");
  // Serving ops (docs/serving.md: vLLM's meaning of every argument; checks: csrc/varlen_checks.h;
  // API: causal_conv1d/varlen.py, causal_conv1d/vllm.py): packed varlen prefill over a state cache
  // with prefix caching, and the decode update (speculative, ragged, tree drafts).
  m.def(
      "varlen_fwd(Tensor x, Tensor weight, Tensor? bias, Tensor(a!) conv_states, Tensor query_start_loc, "
      "Tensor? cache_indices, Tensor? has_initial_state, bool silu, int pad_slot_id, "
      "Tensor? block_idx_first_scheduled_token, Tensor? block_idx_last_scheduled_token, "
      "Tensor? initial_state_idx, Tensor? num_computed_tokens, int block_size_to_align) -> Tensor");
  m.def(
      "spec_update(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias, bool silu, "
      "Tensor? conv_state_indices, Tensor? num_accepted_tokens, int pad_slot_id, "
      "Tensor? query_start_loc, int max_query_len, Tensor? block_idx_last_scheduled_token, "
      "Tensor? initial_state_idx, Tensor? retrieve_parent_token) -> Tensor");
  // Packed sequences for training (docs/package.md, "Packed sequences"; checks: csrc/checks.h):
  // x (1, dim, total_tokens), sequence i is tokens [cu_seqlens[i], cu_seqlens[i + 1]), with its own
  // initial and final states (n, dim, width - 1) and their gradients. The CUDA forward runs on the
  // varlen_fwd kernels (one request per sequence).
  m.def(
      "packed_fwd(Tensor x, Tensor weight, Tensor? bias, Tensor cu_seqlens, Tensor? initial_states, "
      "bool return_final_states, bool silu, Tensor? residual=None) -> (Tensor out, Tensor final_states)");
  m.def(
      "packed_bwd(Tensor x, Tensor weight, Tensor? bias, Tensor dout, Tensor cu_seqlens, Tensor? initial_states, "
      "Tensor? dfinal_states, bool return_dinitial_states, bool silu) "
      "-> (Tensor dx, Tensor dweight, Tensor dbias, Tensor dinitial_states)");
  // Debug ops of the CUDA kernel paths (csrc/kernel_paths.h): which paths exist, which one the
  // last launch of an op ran, and an in-process override of a path's switch (tests). Not API.
  m.def("_kernel_paths() -> str");  // comma-separated (a str, not str[]: one shim less to rely on)
  m.def("_last_kernel_path(str op) -> str");
  m.def("_set_kernel_path(str path, int state) -> ()");
}

namespace causal_conv1d {
namespace {

std::string kernel_paths_op() { return kernel_path_list(","); }

std::string last_kernel_path_op(std::string op) {
  const KernelOp k = kernel_op_named(op);
  CC1D_CHECK_VALUE(k != KernelOp::kCount, "_last_kernel_path: unknown op '", op, "'; the ops are ",
                   kernel_op_list());
  return last_kernel_path(k);
}

void set_kernel_path_op(std::string path, int64_t state) {
  const KernelPath p = kernel_path_named(path);
  CC1D_CHECK_VALUE(p != KernelPath::kCount, "_set_kernel_path: unknown kernel path '", path, "'; the paths are ",
                   kernel_path_list());
  CC1D_CHECK_VALUE(state == 1 || state == 0 || state == -1, "_set_kernel_path: state must be 1 (on), 0 (off) or -1 "
                   "(back to the environment variable), got ", state);
  CC1D_CHECK_VALUE(kKernelPaths[static_cast<int>(p)].env_switch != nullptr || state != 0, "_set_kernel_path: ", path,
                   " is a general path (the last resort of its op); it cannot be turned off");
  set_kernel_path_override(p, static_cast<int>(state));
}

}  // namespace
}  // namespace causal_conv1d

// No tensor arguments: the dispatcher runs the CompositeExplicitAutograd kernel.
CC1D_LIBRARY_IMPL(causal_conv1d, CompositeExplicitAutograd, m) {
  m.impl("_kernel_paths", CC1D_KERNEL(&causal_conv1d::kernel_paths_op));
  m.impl("_last_kernel_path", CC1D_KERNEL(&causal_conv1d::last_kernel_path_op));
  m.impl("_set_kernel_path", CC1D_KERNEL(&causal_conv1d::set_kernel_path_op));
}

#ifndef CAUSAL_CONV1D_WITH_CUDA
namespace causal_conv1d {
namespace {

[[noreturn]] void no_cuda_kernels(const char* op) {
  CC1D_CHECK(false, "causal_conv1d was built without CUDA kernels (CPU-only build): causal_conv1d::", op,
              " got CUDA tensors. Move the tensors to the CPU, or install the CUDA wheel for your torch: "
              "`python -m causal_conv1d doctor` prints the command.");
}

std::tuple<Tensor, Tensor> fwd_no_cuda(const Tensor&, const Tensor&, const OptTensor&, const OptTensor&,
                                       const OptTensor&, bool, bool, const OptTensor&) {
  no_cuda_kernels("fwd");
}

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_no_cuda(const Tensor&, const Tensor&, const OptTensor&, const Tensor&,
                                                       const OptTensor&, const OptTensor&, const OptTensor&, bool,
                                                       bool) {
  no_cuda_kernels("bwd");
}

Tensor update_no_cuda(const Tensor&, Tensor&, const Tensor&, const OptTensor&, bool, const OptTensor&,
                      const OptTensor&) {
  no_cuda_kernels("update");
}

Tensor varlen_fwd_no_cuda(const Tensor&, const Tensor&, const OptTensor&, Tensor&, const Tensor&, const OptTensor&,
                          const OptTensor&, bool, int64_t, const OptTensor&, const OptTensor&, const OptTensor&,
                          const OptTensor&, int64_t) {
  no_cuda_kernels("varlen_fwd");
}

Tensor spec_update_no_cuda(const Tensor&, Tensor&, const Tensor&, const OptTensor&, bool, const OptTensor&,
                           const OptTensor&, int64_t, const OptTensor&, int64_t, const OptTensor&, const OptTensor&,
                           const OptTensor&) {
  no_cuda_kernels("spec_update");
}

std::tuple<Tensor, Tensor> packed_fwd_no_cuda(const Tensor&, const Tensor&, const OptTensor&, const Tensor&,
                                              const OptTensor&, bool, bool, const OptTensor&) {
  no_cuda_kernels("packed_fwd");
}

std::tuple<Tensor, Tensor, Tensor, Tensor> packed_bwd_no_cuda(const Tensor&, const Tensor&, const OptTensor&,
                                                              const Tensor&, const Tensor&, const OptTensor&,
                                                              const OptTensor&, bool, bool) {
  no_cuda_kernels("packed_bwd");
}

}  // namespace
}  // namespace causal_conv1d

CC1D_LIBRARY_IMPL(causal_conv1d, CUDA, m) {
  m.impl("fwd", CC1D_KERNEL(&causal_conv1d::fwd_no_cuda));
  m.impl("bwd", CC1D_KERNEL(&causal_conv1d::bwd_no_cuda));
  m.impl("update", CC1D_KERNEL(&causal_conv1d::update_no_cuda));
  m.impl("varlen_fwd", CC1D_KERNEL(&causal_conv1d::varlen_fwd_no_cuda));
  m.impl("spec_update", CC1D_KERNEL(&causal_conv1d::spec_update_no_cuda));
  m.impl("packed_fwd", CC1D_KERNEL(&causal_conv1d::packed_fwd_no_cuda));
  m.impl("packed_bwd", CC1D_KERNEL(&causal_conv1d::packed_bwd_no_cuda));
}
#endif  // CAUSAL_CONV1D_WITH_CUDA
