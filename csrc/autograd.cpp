// Autograd for causal_conv1d::fwd, in C++ (the eager host path) -- legacy (ATen) op layer
// only. The LibTorch stable ABI has no C++ autograd: the stable build registers the same rules in
// Python instead (causal_conv1d/_ops.py, torch.library.register_autograd; _ops.py registers them only
// when this kernel is absent). Kept for the legacy build because a Python autograd costs ~4x this
// kernel per call when an input requires grad (benchmarks/host_overhead.py; docs/PERF_NOTES.md, "Host path").
// build_support/extension.py compiles this file into legacy builds only.
//
// A Python autograd kernel (torch.library.register_autograd) cost ~3.7 µs per call on the 2-core
// dev machine even when nothing required grad: every call entered Python from the dispatcher.
// This kernel costs a few requires_grad() checks when no gradient is needed, and only then builds
// an autograd node. The backward calls causal_conv1d::bwd with the rules _ops.py used to apply:
//   * dout undefined (only final_states used) -> zeros in x's layout; dout in neither layout ->
//     contiguous (the op accepts channel-first or channel-last only);
//   * dfinal_states only when the forward returned final states; undefined -> None (= zeros);
//   * dinitial_states only when initial_states required grad at the forward;
//   * no gradients for seq_idx and the flags; a bias gradient only with a bias;
//   * residual (out = act(conv(x) + bias) + residual): its gradient is dout itself, no kernel work
//     (the bwd kernels recompute the pre-activation from x, which the residual does not enter).
//
// Plain C++ against libtorch (no Python C API: the wheel is abi3 and only ops.cpp includes Python.h);
// compiled into the CPU-only and the CUDA legacy builds.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The backend kernels' signatures (csrc/cpu, csrc/cuda, ops.cpp): typed<>() checks them.
using FwdSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&, const OptTensor&,
                                          const OptTensor&, bool, bool, const OptTensor&);
using BwdSig = std::tuple<Tensor, Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&,
                                                          const Tensor&, const OptTensor&, const OptTensor&,
                                                          const OptTensor&, bool, bool);

// Looked up once, on first use (the schemas are registered by ops.cpp's static initialisers, whose
// order relative to this file's is unspecified).
const c10::TypedOperatorHandle<FwdSig>& fwd_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("causal_conv1d::fwd", "").typed<FwdSig>();
  return op;
}

const c10::TypedOperatorHandle<BwdSig>& bwd_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("causal_conv1d::bwd", "").typed<BwdSig>();
  return op;
}

bool requires_grad(const OptTensor& t) { return t.has_value() && t->requires_grad(); }

// Below autograd: the backend kernel (or, while tracing, the Python/Functionalize keys below
// autograd). Ops the kernel calls inside skip autograd and view tracking, as in ATen's own
// autograd kernels.
std::tuple<Tensor, Tensor> fwd_below_autograd(c10::DispatchKeySet ks, const Tensor& x, const Tensor& weight,
                                              const OptTensor& bias, const OptTensor& seq_idx,
                                              const OptTensor& initial_states, bool return_final_states, bool silu,
                                              const OptTensor& residual) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return fwd_op().redispatch(ks & c10::after_autograd_keyset, x, weight, bias, seq_idx, initial_states,
                             return_final_states, silu, residual);
}

}  // namespace

namespace causal_conv1d {

// Named for autograd's messages: grad_fn=<FwdBackward>, grad_fn.name() "torch::autograd::CppNode<causal_conv1d::FwdBackward>".
struct FwdBackward : public torch::autograd::Function<FwdBackward> {
  // apply() passes every argument through: one gradient slot each in backward (ks first).
  static variable_list forward(AutogradContext* ctx, c10::DispatchKeySet ks, const Tensor& x,
                               const Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
                               const OptTensor& initial_states, bool return_final_states, bool silu,
                               const OptTensor& residual) {
    auto [out, final_states] =
        fwd_below_autograd(ks, x, weight, bias, seq_idx, initial_states, return_final_states, silu, residual);
    ctx->set_materialize_grads(false);  // unused outputs arrive undefined: no zero tensors built
    ctx->save_for_backward({x, weight, bias.value_or(Tensor()), seq_idx.value_or(Tensor()),
                            initial_states.value_or(Tensor())});
    ctx->saved_data["silu"] = silu;
    ctx->saved_data["rfs"] = return_final_states;
    ctx->saved_data["rdis"] = requires_grad(initial_states);  // grad mode is on here (see fwd_autograd)
    ctx->saved_data["rres"] = requires_grad(residual);
    return {std::move(out), std::move(final_states)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& bias = saved[2];
    const bool silu = ctx->saved_data["silu"].toBool();
    const bool return_final_states = ctx->saved_data["rfs"].toBool();
    const bool return_dinitial_states = ctx->saved_data["rdis"].toBool();
    const Tensor dresidual = ctx->saved_data["rres"].toBool() ? grads[0] : Tensor();  // d(out)/d(residual) = 1

    Tensor dout = std::move(grads[0]);
    if (!dout.defined()) {
      dout = at::zeros_like(x);
    } else if (dout.sym_stride(2) != 1 && dout.sym_stride(1) != 1) {  // sym_: shapes may be symbolic
      dout = dout.contiguous();
    }
    OptTensor dfinal_states;
    if (return_final_states && grads[1].defined()) {
      dfinal_states = std::move(grads[1]);
    }
    auto opt = [](const Tensor& t) { return t.defined() ? OptTensor(t) : OptTensor(); };
    auto [dx, dweight, dbias, dinitial_states] =
        bwd_op().call(x, saved[1], opt(bias), dout, opt(saved[3]), opt(saved[4]), dfinal_states,
                      return_dinitial_states, silu);
    return {Tensor(),  // ks
            std::move(dx),
            std::move(dweight),
            bias.defined() ? std::move(dbias) : Tensor(),
            Tensor(),  // seq_idx
            return_dinitial_states ? std::move(dinitial_states) : Tensor(),
            Tensor(),  // return_final_states
            Tensor(),  // silu
            dresidual};
  }
};

}  // namespace causal_conv1d

namespace {

std::tuple<Tensor, Tensor> fwd_autograd(c10::DispatchKeySet ks, const Tensor& x, const Tensor& weight,
                                        const OptTensor& bias, const OptTensor& seq_idx,
                                        const OptTensor& initial_states, bool return_final_states, bool silu,
                                        const OptTensor& residual) {
  // No gradient needed (the condition of the former Python kernel: grad mode on and a tensor input
  // requiring grad; the flags are read before the thread-local grad mode): no node, nothing saved.
  const bool any_requires_grad = x.requires_grad() || weight.requires_grad() || requires_grad(bias) ||
                                 requires_grad(seq_idx) || requires_grad(initial_states) || requires_grad(residual);
  if (!any_requires_grad || !at::GradMode::is_enabled()) {
    return fwd_below_autograd(ks, x, weight, bias, seq_idx, initial_states, return_final_states, silu, residual);
  }
  variable_list outs = causal_conv1d::FwdBackward::apply(ks, x, weight, bias, seq_idx, initial_states,
                                                         return_final_states, silu, residual);
  return {std::move(outs[0]), std::move(outs[1])};
}

}  // namespace

TORCH_LIBRARY_IMPL(causal_conv1d, Autograd, m) { m.impl("fwd", &fwd_autograd); }
