// The CPU forward op: checks, the output (huge pages first when it is large), the arguments for the
// forward's dispatch table (dispatch.cpp: the vector paths, else the scalar one) and final_states.
#include "dispatch.h"
#include "switch_on.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdint>
#include <tuple>

namespace causal_conv1d {
namespace cpu {
namespace {


// Large outputs: ask the kernel for transparent huge pages on the tensor's whole 2 MiB pages before
// the forward's first touch (64 MB fp32: 16K page faults of 4 KiB -> 32 of 2 MiB; see
// docs/PERF_NOTES.md). Only a hint: it changes how the pages are backed, not their contents, and
// has no effect where THP is disabled ("never") or already "always".
void advise_huge_pages(const Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool enabled = switch_on("CAUSAL_CONV1D_CPU_HUGE_PAGES");  // =0/false/off/no turns the hint off
  if (!enabled) return;
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  const auto [base, storage_bytes] = storage_span(t);
  const size_t nbytes = static_cast<size_t>(storage_bytes);
  if (nbytes < 4 * kHuge) return;
  const uintptr_t p = reinterpret_cast<uintptr_t>(base);
  const uintptr_t lo = (p + kHuge - 1) & ~(kHuge - 1), hi = (p + nbytes) & ~(kHuge - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)t;
#endif
}

}  // namespace


std::tuple<Tensor, Tensor> fwd_cpu(const Tensor& x, const Tensor& weight,
                                           const OptTensor& bias,
                                           const OptTensor& seq_idx,
                                           const OptTensor& initial_states, bool return_final_states,
                                           bool silu, const OptTensor& residual) {
  check_fwd_args(x, weight, bias, seq_idx, initial_states, return_final_states, kMaxWidth, /*allow_float64=*/true);
  check_residual(x, residual);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const bool channel_last = is_channel_last(x);
  Tensor out = empty_bdl(B, D, L, channel_last, x.scalar_type(), x);
  advise_huge_pages(out);
  const ScalarType acc = acc_dtype(x);
  Tensor seq = seq_idx.has_value() ? as_contiguous(*seq_idx) : Tensor();
  // the vector kernels read the residual along x's unit-stride axis
  const Tensor res = residual.has_value() ? in_layout(*residual, channel_last) : Tensor();
  // A zero bias when there is none: the channel-last inner loop reads it unconditionally.
  Tensor bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : alloc_zeros({D}, acc, x);
  Tensor wf, init;
  if (channel_last) {
    wf = as_contiguous(transposed(to_dtype(weight, acc), 0, 1));  // (W, D)
    if (initial_states.has_value()) init = as_contiguous(transposed(to_dtype(*initial_states, acc), 1, 2));  // (B, W-1, D)
  } else {
    wf = as_contiguous(to_dtype(weight, acc));  // (D, W)
    if (initial_states.has_value()) init = as_contiguous(to_dtype(*initial_states, acc));  // (B, D, W-1)
  }
  if (out.numel() > 0) {
    FwdArgs a{B,
              D,
              L,
              W,
              channel_last,
              &x,
              &out,
              wf.const_data_ptr(),
              bf.const_data_ptr(),
              seq.defined() ? seq.const_data_ptr<int32_t>() : nullptr,
              init.defined() ? init.const_data_ptr() : nullptr,
              silu,
              res.defined() ? &res : nullptr};
    run_fwd(a);
  }
  Tensor final_states;
  if (return_final_states) {
    // The last W-1 entries of cat(initial_states or zeros, x) along seqlen.
    final_states = empty_bdl(B, D, W - 1, channel_last, x.scalar_type(), x);
    const int64_t take = std::min(L, W - 1);
    if (take > 0) {
      Tensor tail = narrowed(final_states, 2, W - 1 - take, take);
      copy_into(tail, narrowed(x, 2, L - take, take));
    }
    if (take < W - 1) {
      Tensor head = narrowed(final_states, 2, 0, W - 1 - take);
      if (initial_states.has_value()) {
        copy_into(head, narrowed(*initial_states, 2, take, W - 1 - take));
      } else {
        zero_fill(head);
      }
    }
  } else {
    final_states = alloc_empty({0}, x.scalar_type(), x);
  }
  return {out, final_states};
}

}  // namespace cpu
}  // namespace causal_conv1d
