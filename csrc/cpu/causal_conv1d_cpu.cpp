// CPU kernels for the causal_conv1d ops (schemas: csrc/ops.cpp).
//
// Forward (float32, float16, bfloat16 on x86-64): fwd_simd_impl.h, compiled twice (AVX-512 and
// AVX2 + FMA) whatever the build's -m flags and picked at run time from torch's CPU capability.
// One pass per output: W shifted vector loads, fused bias, silu with a vectorised exp, store (the
// store is the output's first touch). Channel-first (x.stride(2) == 1): one task per (batch,
// channel) row, vectorised along seqlen; channel-last (x.stride(1) == 1): one task per (batch,
// block of positions), vectorised along dim. Large outputs get transparent huge pages first
// (advise_huge_pages). docs/PERF_NOTES.md ("CPU forward") has the measurements.
// Forward, scalar kernels (float64, other CPUs/compilers, ATEN_CPU_CAPABILITY=default): the
// channel-first row is converted to the accumulation type in chunks of kChunk positions (plus the
// W-1 positions before them), then an unrolled W-tap loop over the chunk; channel-last accumulates
// the W taps over all channels of a position.
// Backward: one task per channel, looping over the batch in order, so dweight/dbias are summed in a
// fixed order (deterministic by construction, independent of the thread count). A channel-last x is
// made contiguous first.
// Update: one task per (batch, channel) row; tiny per-token work.
//
// Accumulation in float32 (float64 for float64 inputs, which the CPU accepts for gradcheck);
// indices are int64 throughout.

// x86-64 with GCC or Clang: AVX-512 and AVX2 forward kernels (fwd_simd_impl.h), compiled for their
// instruction sets with target pragmas whatever the build's -m flags, chosen at run time.
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define CC1D_X86_SIMD 1
// GCC 12 warns about the deliberately undefined vectors inside some AVX-512 intrinsics (GCC bug
// 105593, fixed in 12.3); the warnings are located in the header, so silence them there. First
// include of the file: torch's headers include <x86intrin.h> too (c10/util/ApproximateClock.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#include <cpuid.h>
#else
#define CC1D_X86_SIMD 0
#endif

#include "checks.h"
#include "switch_on.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

// Unroll the W-tap loops fully (W <= 8) so the loop around them vectorises.
#if defined(__clang__)
#define CC1D_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define CC1D_UNROLL _Pragma("GCC unroll 8")
#else
#define CC1D_UNROLL
#endif

namespace causal_conv1d {
namespace cpu {
namespace {

constexpr int64_t kChunk = 1024;  // positions per converted chunk of a channel-first row
constexpr int32_t kNoSeq = -1;    // seq id of positions before the start (never matches a real id >= 0)

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename A>
inline A silu(A z) {
  return z / (A(1) + std::exp(-z));
}

template <typename A>
inline A silu_grad(A z) {
  const A s = A(1) / (A(1) + std::exp(-z));
  return s * (A(1) + z * (A(1) - s));
}

inline ScalarType acc_dtype(const Tensor& x) {
  return x.scalar_type() == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

template <typename F>
void dispatch_dtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float:
      f(float{});
      break;
    case ScalarType::Double:
      f(double{});
      break;
    case ScalarType::Half:
      f(Half{});
      break;
    case ScalarType::BFloat16:
      f(BFloat16{});
      break;
    default:
      CC1D_CHECK_TYPE(false, "x must be float32, float16, bfloat16 or float64 on the CPU, got ", t);
  }
}

template <typename F>
void dispatch_width(int64_t width, F&& f) {
  switch (width) {
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 5:
      f(std::integral_constant<int, 5>{});
      break;
    case 6:
      f(std::integral_constant<int, 6>{});
      break;
    case 7:
      f(std::integral_constant<int, 7>{});
      break;
    case 8:
      f(std::integral_constant<int, 8>{});
      break;
    default:
      CC1D_CHECK_VALUE(false, "weight must have width between ", kMinWidth, " and ", kMaxWidth, ", got ", width);
  }
}

// out[i] = bias + sum_k w[k] * win[i + k] for i in [0, n); win holds n + W - 1 values.
template <int W, typename A>
inline void conv_window(const A* __restrict win, const A* __restrict w, A bias, A* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    A acc = bias;
CC1D_UNROLL
    for (int k = 0; k < W; ++k) {
      acc += w[k] * win[i + k];
    }
    out[i] = acc;
  }
}

// As conv_window, but a tap only counts when its seq id equals the output's; an output whose seq
// id is negative (padding) is 0. sw holds the seq ids of win.
template <int W, typename A>
inline void conv_window_seq(const A* __restrict win, const int32_t* __restrict sw, const A* __restrict w, A bias,
                            A* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t cur = sw[i + W - 1];
    A acc = bias;
CC1D_UNROLL
    for (int k = 0; k < W; ++k) {
      acc += sw[i + k] == cur ? w[k] * win[i + k] : A(0);
    }
    out[i] = cur < 0 ? A(0) : acc;
  }
}

// ---------------------------------------------------------------------------------------------
// Forward

struct FwdArgs {
  int64_t batch, dim, seqlen;
  const Tensor* x;
  Tensor* out;
  const void* weight;          // acc type; channel-first: (dim, W); channel-last: (W, dim)
  const void* bias;            // acc type (dim,); zeros when the op got no bias
  const int32_t* seq;          // (batch, seqlen) contiguous or nullptr
  const void* init;            // acc type; channel-first: (batch, dim, W-1); channel-last: (batch, W-1, dim)
  bool silu;
};

#if CC1D_X86_SIMD
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif
namespace avx512 {
#define CC1D_LANES 16
#include "fwd_simd_impl.h"
#undef CC1D_LANES
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace avx2 {
#define CC1D_LANES 8
#include "fwd_simd_impl.h"
#undef CC1D_LANES
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // CC1D_X86_SIMD

// Which forward kernels run: what the CPU supports (cpuid), capped by ATEN_CPU_CAPABILITY the way
// torch caps its own kernels (=avx2 or =default select the AVX2 or the scalar kernels; unset or
// another value: the best the CPU has). Read here rather than asked of torch, so that both op-layer
// builds decide alike (the stable ABI has no capability query). float64 always takes the scalar
// kernels.
enum class Isa { kScalar, kAvx2, kAvx512 };

Isa detect_isa() {
#if CC1D_X86_SIMD
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const char* cap = std::getenv("ATEN_CPU_CAPABILITY");
  if (cap != nullptr && std::strcmp(cap, "default") == 0) return Isa::kScalar;
  const bool cap_avx2 = cap != nullptr && std::strcmp(cap, "avx2") == 0;
  if (avx512 && !cap_avx2) return Isa::kAvx512;
  if (avx2) return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

Isa cpu_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

template <typename T>
Isa fwd_isa() {
  return std::is_same_v<T, double> ? Isa::kScalar : cpu_isa();
}

template <typename T, int W>
void fwd_cf_rows_scalar(const FwdArgs& a, int64_t r0, int64_t r1);

template <typename T, int W>
void fwd_channel_first(const FwdArgs& a) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(a.seqlen, 1));
  [[maybe_unused]] const Isa isa = fwd_isa<T>();  // unused without the vector kernels
  parallel_for(0, a.batch * a.dim, grain, [&](int64_t r0, int64_t r1) {
#if CC1D_X86_SIMD
    if constexpr (!std::is_same_v<T, double>) {
      if (isa == Isa::kAvx512) return avx512::fwd_cf_rows<T, W>(a, r0, r1);
      if (isa == Isa::kAvx2) return avx2::fwd_cf_rows<T, W>(a, r0, r1);
    }
#endif
    fwd_cf_rows_scalar<T, W>(a, r0, r1);
  });
}

// Scalar kernels (float64, and CPUs or compilers without the vector kernels).
template <typename T, int W>
void fwd_cf_rows_scalar(const FwdArgs& a, int64_t r0, int64_t r1) {
  using A = acc_t<T>;
  const int64_t D = a.dim, L = a.seqlen;
  const T* xp = a.x->const_data_ptr<T>();
  T* op = a.out->mutable_data_ptr<T>();
  const int64_t sxb = a.x->stride(0), sxd = a.x->stride(1);
  const int64_t sob = a.out->stride(0), sod = a.out->stride(1);
  const A* wp = static_cast<const A*>(a.weight);
  const A* bp = static_cast<const A*>(a.bias);
  const A* ip = static_cast<const A*>(a.init);
  const int32_t* sp = a.seq;
  std::vector<A> win(kChunk + W - 1), obuf(kChunk);
  std::vector<int32_t> sw(sp ? kChunk + W - 1 : 0);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / D, d = r % D;
    const T* xr = xp + b * sxb + d * sxd;
    T* orow = op + b * sob + d * sod;
    A w[W];
    for (int k = 0; k < W; ++k) w[k] = wp[d * W + k];
    const A bv = bp ? bp[d] : A(0);
    // before the start: the initial state, which belongs to the row's first sequence (seq_idx[b, 0])
    const int32_t pre_seq = sp && ip && L > 0 ? sp[b * L] : kNoSeq;
    for (int j = 0; j < W - 1; ++j) {
      win[j] = ip ? ip[r * (W - 1) + j] : A(0);
      if (sp) sw[j] = pre_seq;
    }
    if constexpr (std::is_same_v<T, A>) {
      if (!sp) {
        // Input already in the accumulation type: read x in place (no chunk copy). The first
        // W-1 outputs take their earlier taps from the initial states in win.
        const int64_t head = std::min<int64_t>(W - 1, L);
        for (int64_t i = 0; i < head; ++i) win[W - 1 + i] = xr[i];
        conv_window<W, A>(win.data(), w, bv, obuf.data(), head);
        for (int64_t i = 0; i < head; ++i) orow[i] = a.silu ? silu(obuf[i]) : obuf[i];
        if (L > W - 1) {
          T* __restrict o = orow + (W - 1);
          conv_window<W, A>(xr, w, bv, o, L - (W - 1));
          if (a.silu) {
            for (int64_t i = 0; i < L - (W - 1); ++i) o[i] = silu(o[i]);
          }
        }
        continue;
      }
    }
    for (int64_t l0 = 0; l0 < L; l0 += kChunk) {
      const int64_t n = std::min(kChunk, L - l0);
      A* wv = win.data() + (W - 1);
      for (int64_t i = 0; i < n; ++i) wv[i] = static_cast<A>(xr[l0 + i]);
      if (sp) {
        const int32_t* srow = sp + b * L + l0;
        std::copy(srow, srow + n, sw.data() + (W - 1));
        conv_window_seq<W, A>(win.data(), sw.data(), w, bv, obuf.data(), n);
      } else {
        conv_window<W, A>(win.data(), w, bv, obuf.data(), n);
      }
      if (a.silu) {
        for (int64_t i = 0; i < n; ++i) orow[l0 + i] = static_cast<T>(silu(obuf[i]));
      } else {
        for (int64_t i = 0; i < n; ++i) orow[l0 + i] = static_cast<T>(obuf[i]);
      }
      for (int j = 0; j < W - 1; ++j) {  // carry the last W-1 inputs into the next chunk
        win[j] = win[n + j];
        if (sp) sw[j] = sw[n + j];
      }
    }
  }
}

template <typename T, int W>
void fwd_cl_tasks_scalar(const FwdArgs& a, int64_t t0, int64_t t1, int64_t rows, int64_t nblocks);

template <typename T, int W>
void fwd_channel_last(const FwdArgs& a) {
  // Blocks of positions sized for ~16K outputs per task.
  const int64_t D = a.dim, L = a.seqlen;
  const int64_t rows = std::min<int64_t>(std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)), L);
  const int64_t nblocks = (L + rows - 1) / rows;
  [[maybe_unused]] const Isa isa = fwd_isa<T>();  // unused without the vector kernels
  parallel_for(0, a.batch * nblocks, 1, [&](int64_t t0, int64_t t1) {
#if CC1D_X86_SIMD
    if constexpr (!std::is_same_v<T, double>) {
      if (isa == Isa::kAvx512) return avx512::fwd_cl_tasks<T, W>(a, t0, t1, rows, nblocks);
      if (isa == Isa::kAvx2) return avx2::fwd_cl_tasks<T, W>(a, t0, t1, rows, nblocks);
    }
#endif
    fwd_cl_tasks_scalar<T, W>(a, t0, t1, rows, nblocks);
  });
}

template <typename T, int W>
void fwd_cl_tasks_scalar(const FwdArgs& a, int64_t t0, int64_t t1, int64_t rows, int64_t nblocks) {
  using A = acc_t<T>;
  const int64_t D = a.dim, L = a.seqlen;
  const T* xp = a.x->const_data_ptr<T>();
  T* op = a.out->mutable_data_ptr<T>();
  const int64_t sxb = a.x->stride(0), sxl = a.x->stride(2);
  const int64_t sob = a.out->stride(0), sol = a.out->stride(2);
  const A* wt = static_cast<const A*>(a.weight);
  const A* bp = static_cast<const A*>(a.bias);
  const A* ip = static_cast<const A*>(a.init);
  const int32_t* sp = a.seq;
  std::vector<A> acc(D);
  A* __restrict ac = acc.data();
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t b = t / nblocks;
    const int64_t l0 = (t % nblocks) * rows, l1 = std::min(L, l0 + rows);
    for (int64_t l = l0; l < l1; ++l) {
      T* __restrict orow = op + b * sob + l * sol;
      const int32_t cur = sp ? sp[b * L + l] : 0;
      if (cur < 0) {
        for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(A(0));
        continue;
      }
      bool all_taps = l >= W - 1;  // every tap is an input of the same sequence
      for (int k = 0; all_taps && sp && k < W - 1; ++k) all_taps = sp[b * L + l - (W - 1) + k] == cur;
      if (all_taps) {
        // The common case: W taps accumulated in registers, one pass over the channels.
        const T* __restrict rows[W];
        for (int k = 0; k < W; ++k) rows[k] = xp + b * sxb + (l - (W - 1) + k) * sxl;
        auto taps = [&](int64_t d) {
          A v = bp[d];
CC1D_UNROLL
          for (int k = 0; k < W; ++k) v += wt[k * D + d] * static_cast<A>(rows[k][d]);
          return v;
        };
        if (a.silu) {
          for (int64_t d = 0; d < D; ++d) ac[d] = taps(d);
          for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(silu(ac[d]));
        } else {
          for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(taps(d));
        }
        continue;
      }
      if (bp) {
        for (int64_t d = 0; d < D; ++d) ac[d] = bp[d];
      } else {
        for (int64_t d = 0; d < D; ++d) ac[d] = A(0);
      }
      for (int k = 0; k < W; ++k) {
        const int64_t pos = l - (W - 1) + k;
        const A* __restrict wk = wt + k * D;
        if (pos < 0) {
          if (!ip || (sp && sp[b * L] != cur)) continue;  // the initial state is the first sequence's
          const A* __restrict ir = ip + (b * (W - 1) + (pos + W - 1)) * D;
          for (int64_t d = 0; d < D; ++d) ac[d] += wk[d] * ir[d];
        } else {
          if (sp && sp[b * L + pos] != cur) continue;
          const T* __restrict xr = xp + b * sxb + pos * sxl;
          for (int64_t d = 0; d < D; ++d) ac[d] += wk[d] * static_cast<A>(xr[d]);
        }
      }
      if (a.silu) {
        for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(silu(ac[d]));
      } else {
        for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<T>(ac[d]);
      }
    }
  }
}

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

std::tuple<Tensor, Tensor> fwd_cpu(const Tensor& x, const Tensor& weight,
                                           const OptTensor& bias,
                                           const OptTensor& seq_idx,
                                           const OptTensor& initial_states, bool return_final_states,
                                           bool silu) {
  check_fwd_args(x, weight, bias, seq_idx, initial_states, return_final_states, kMaxWidth, /*allow_float64=*/true);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const bool channel_last = is_channel_last(x);
  Tensor out = empty_bdl(B, D, L, channel_last, x.scalar_type(), x);
  advise_huge_pages(out);
  const ScalarType acc = acc_dtype(x);
  Tensor seq = seq_idx.has_value() ? as_contiguous(*seq_idx) : Tensor();
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
              &x,
              &out,
              wf.const_data_ptr(),
              bf.const_data_ptr(),
              seq.defined() ? seq.const_data_ptr<int32_t>() : nullptr,
              init.defined() ? init.const_data_ptr() : nullptr,
              silu};
    dispatch_dtype(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      if (channel_last) {
        dispatch_width(W, [&](auto wc) { fwd_channel_last<T, decltype(wc)::value>(a); });
      } else {
        dispatch_width(W, [&](auto wc) { fwd_channel_first<T, decltype(wc)::value>(a); });
      }
    });
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

// ---------------------------------------------------------------------------------------------
// Backward

struct BwdArgs {
  int64_t batch, dim, seqlen;
  const Tensor* x;     // channel-first (stride(2) == 1)
  const Tensor* dout;  // channel-first
  Tensor* dx;          // channel-first
  const void* weight;      // acc type (dim, W)
  const void* bias;        // acc type (dim,) or nullptr
  const int32_t* seq;      // (batch, seqlen) or nullptr
  const void* init;        // acc type (batch, dim, W-1) or nullptr
  const void* dfinal;      // acc type (batch, dim, W-1) or nullptr
  void* dweight;           // acc type (dim, W), written
  void* dbias;             // acc type (dim,) or nullptr, written
  void* dinit;             // acc type (batch, dim, W-1) or nullptr, written
  bool silu;
};

template <typename T, int W>
void bwd_channel_first(const BwdArgs& a) {
  using A = acc_t<T>;
  constexpr int H = W - 1;  // halo
  const int64_t B = a.batch, D = a.dim, L = a.seqlen;
  const T* xp = a.x->const_data_ptr<T>();
  const T* gp = a.dout->const_data_ptr<T>();
  T* dxp = a.dx->mutable_data_ptr<T>();
  const int64_t sxb = a.x->stride(0), sxd = a.x->stride(1);
  const int64_t sgb = a.dout->stride(0), sgd = a.dout->stride(1);
  const int64_t sdb = a.dx->stride(0), sdd = a.dx->stride(1);
  const A* wp = static_cast<const A*>(a.weight);
  const A* bp = static_cast<const A*>(a.bias);
  const A* ip = static_cast<const A*>(a.init);
  const A* fp = static_cast<const A*>(a.dfinal);
  A* dwp = static_cast<A*>(a.dweight);
  A* dbp = static_cast<A*>(a.dbias);
  A* dip = static_cast<A*>(a.dinit);
  const int32_t* sp = a.seq;
  const bool need_z = a.silu;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(B * L, 1));
  parallel_for(0, D, grain, [&](int64_t d0, int64_t d1) {
    // xw[i]: input at position i - H (i in [0, L + H)); dz[m]: output grad at position m - H
    // (m in [0, L + 2H), zero outside [0, L)); sw: seq ids aligned with dz's indexing.
    std::vector<A> xw(L + H), dz(L + 2 * H, A(0)), gx(L + H), z(need_z ? L : 0);
    std::vector<int32_t> sw(sp ? L + 2 * H : 0, kNoSeq);
    for (int64_t d = d0; d < d1; ++d) {
      A w[W];
      for (int k = 0; k < W; ++k) w[k] = wp[d * W + k];
      const A bv = bp ? bp[d] : A(0);
      double dw[W] = {};
      double db = 0;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t r = b * D + d;
        const T* xr = xp + b * sxb + d * sxd;
        const T* gr = gp + b * sgb + d * sgd;
        T* dxr = dxp + b * sdb + d * sdd;
        for (int j = 0; j < H; ++j) xw[j] = ip ? ip[r * H + j] : A(0);
        for (int64_t l = 0; l < L; ++l) xw[H + l] = static_cast<A>(xr[l]);
        if (sp) {
          std::copy(sp + b * L, sp + (b + 1) * L, sw.data() + H);
          // positions before the start: the initial state's sequence (seq_idx[b, 0]) or none
          std::fill(sw.data(), sw.data() + H, ip && L > 0 ? sp[b * L] : kNoSeq);
        }
        if (need_z) {
          if (sp) {
            conv_window_seq<W, A>(xw.data(), sw.data(), w, bv, z.data(), L);
          } else {
            conv_window<W, A>(xw.data(), w, bv, z.data(), L);
          }
        }
        A* dzv = dz.data() + H;
        for (int64_t t = 0; t < L; ++t) {
          A g = static_cast<A>(gr[t]);
          if (need_z) g *= silu_grad(z[t]);
          dzv[t] = g;
        }
        if (sp) {
          for (int64_t t = 0; t < L; ++t) {
            if (sw[H + t] < 0) dzv[t] = A(0);  // padding: the output is a constant 0
          }
        }
        // Gradient w.r.t. the window input xw[i]: sum_k w[k] * dz[i - k + H] (output i - k).
        if (sp) {
          for (int64_t i = 0; i < L + H; ++i) {
            const int32_t s = sw[i];
            A acc = A(0);
            for (int k = 0; k < W; ++k) {
              acc += sw[i - k + H] == s ? w[k] * dz[i - k + H] : A(0);
            }
            gx[i] = acc;
          }
        } else {
          const A* dzp = dz.data();
          A* gxp = gx.data();
          for (int64_t i = 0; i < L + H; ++i) {
            A acc = A(0);
CC1D_UNROLL
            for (int k = 0; k < W; ++k) acc += w[k] * dzp[i - k + H];
            gxp[i] = acc;
          }
        }
        if (fp) {  // final_states = xw[L .. L + H)
          for (int j = 0; j < H; ++j) gx[L + j] += fp[r * H + j];
        }
        for (int64_t l = 0; l < L; ++l) dxr[l] = static_cast<T>(gx[H + l]);
        if (dip) {
          for (int j = 0; j < H; ++j) dip[r * H + j] = gx[j];
        }
        // dweight[k] += sum_t dz[t] * xw[t + k]; dbias += sum_t dz[t]. Eight independent lanes so
        // the compiler can vectorise the reduction (a fixed order: deterministic).
        A lanes[W + 1][8] = {};
        int64_t t = 0;
        for (; t + 8 <= L; t += 8) {
          for (int j = 0; j < 8; ++j) {
            const A g = dzv[t + j];
            for (int k = 0; k < W; ++k) {
              const bool on = !sp || sw[t + j + k] == sw[H + t + j];
              lanes[k][j] += on ? g * xw[t + j + k] : A(0);
            }
            lanes[W][j] += g;
          }
        }
        for (; t < L; ++t) {
          const A g = dzv[t];
          for (int k = 0; k < W; ++k) {
            const bool on = !sp || sw[t + k] == sw[H + t];
            lanes[k][0] += on ? g * xw[t + k] : A(0);
          }
          lanes[W][0] += g;
        }
        for (int k = 0; k <= W; ++k) {
          A s = A(0);
          for (int j = 0; j < 8; ++j) s += lanes[k][j];
          if (k < W) {
            dw[k] += s;
          } else {
            db += s;
          }
        }
      }
      for (int k = 0; k < W; ++k) dwp[d * W + k] = static_cast<A>(dw[k]);
      if (dbp) dbp[d] = static_cast<A>(db);
    }
  });
}

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_cpu(
    const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& dout,
    const OptTensor& seq_idx, const OptTensor& initial_states,
    const OptTensor& dfinal_states, bool return_dinitial_states, bool silu) {
  check_bwd_args(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, return_dinitial_states, kMaxWidth,
                 /*allow_float64=*/true);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const bool channel_last = is_channel_last(x);
  const ScalarType acc = acc_dtype(x);
  auto channel_first = [](const Tensor& t) { return t.stride(2) == 1 || t.size(2) <= 1 ? t : as_contiguous(t); };
  const Tensor xc = channel_first(x);
  const Tensor gc = channel_first(dout);
  const ScalarType xt = x.scalar_type();
  Tensor dx = empty_bdl(B, D, L, channel_last, xt, x);
  Tensor dxc = channel_last ? alloc_empty({B, D, L}, xt, x) : dx;
  Tensor wf = as_contiguous(to_dtype(weight, acc));
  Tensor bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : Tensor();
  Tensor seq = seq_idx.has_value() ? as_contiguous(*seq_idx) : Tensor();
  Tensor init = initial_states.has_value() ? as_contiguous(to_dtype(*initial_states, acc)) : Tensor();
  Tensor dfin = dfinal_states.has_value() ? as_contiguous(to_dtype(*dfinal_states, acc)) : Tensor();
  Tensor dw = alloc_zeros({D, W}, acc, x);
  Tensor dbias = bias.has_value() ? alloc_zeros({D}, acc, x) : Tensor();
  Tensor dinit = return_dinitial_states ? alloc_zeros({B, D, W - 1}, acc, x) : Tensor();
  if (B > 0 && D > 0) {
    BwdArgs a{B,
              D,
              L,
              &xc,
              &gc,
              &dxc,
              wf.const_data_ptr(),
              bf.defined() ? bf.const_data_ptr() : nullptr,
              seq.defined() ? seq.const_data_ptr<int32_t>() : nullptr,
              init.defined() ? init.const_data_ptr() : nullptr,
              dfin.defined() ? dfin.const_data_ptr() : nullptr,
              dw.data_ptr(),
              dbias.defined() ? dbias.data_ptr() : nullptr,
              dinit.defined() ? dinit.data_ptr() : nullptr,
              silu};
    dispatch_dtype(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      dispatch_width(W, [&](auto wc) { bwd_channel_first<T, decltype(wc)::value>(a); });
    });
  }
  if (channel_last) copy_into(dx, dxc);
  Tensor dweight = to_dtype(dw, weight.scalar_type());
  Tensor dbias_out = bias.has_value() ? to_dtype(dbias, bias->scalar_type()) : alloc_empty({0}, weight.scalar_type(), x);
  Tensor dinit_out;
  if (return_dinitial_states) {
    dinit_out = empty_bdl(B, D, W - 1, channel_last, xt, x);
    copy_into(dinit_out, dinit);
  } else {
    dinit_out = alloc_empty({0}, xt, x);
  }
  return {dx, dweight, dbias_out, dinit_out};
}

// ---------------------------------------------------------------------------------------------
// Update (decoding): conv_state holds the last state_len inputs of each sequence.

// x and out are (batch, dim, seqlen), or (batch, dim) for one token (seqlen 1, no third stride).
template <typename T>
void update_rows(const Tensor& x, Tensor& conv_state, const Tensor& out, const Tensor& wf,
                 const Tensor& bf, const int32_t* cache_seqlens, const int32_t* indices, bool silu) {
  using A = acc_t<T>;
  const bool token = x.dim() == 2;
  const int64_t B = x.size(0), D = x.size(1), L = token ? 1 : x.size(2), W = wf.size(1), S = conv_state.size(2);
  const T* xp = x.const_data_ptr<T>();
  T* cp = conv_state.mutable_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  const A* wp = wf.const_data_ptr<A>();
  const A* bp = bf.defined() ? bf.const_data_ptr<A>() : nullptr;
  const int64_t sxb = x.stride(0), sxd = x.stride(1), sxl = token ? 1 : x.stride(2);
  const int64_t scb = conv_state.stride(0), scd = conv_state.stride(1), scl = conv_state.stride(2);
  const int64_t sob = out.stride(0), sod = out.stride(1), sol = token ? 1 : out.stride(2);
  const int64_t grain = std::max<int64_t>(1, 4096 / (L + W));
  parallel_for(0, B * D, grain, [&](int64_t r0, int64_t r1) {
    std::vector<A> win(W - 1 + L);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / D, d = r % D;
      const T* xr = xp + b * sxb + d * sxd;
      T* orow = op + b * sob + d * sod;
      const int64_t row = indices ? static_cast<int64_t>(indices[b]) : b;
      if (row < 0) {  // padding slot: zero output, state untouched
        for (int64_t i = 0; i < L; ++i) orow[i * sol] = static_cast<T>(A(0));
        continue;
      }
      T* cr = cp + row * scb + d * scd;
      if (cache_seqlens) {  // circular buffer: the next token goes to cache_seqlens % state_len
        const int64_t c = cache_seqlens[b];
        for (int64_t j = 0; j < W - 1; ++j) {
          int64_t p = (c - (W - 1) + j) % S;
          if (p < 0) p += S;
          win[j] = static_cast<A>(cr[p * scl]);
        }
        for (int64_t i = 0; i < L; ++i) {
          win[W - 1 + i] = static_cast<A>(xr[i * sxl]);
          int64_t p = (c + i) % S;
          if (p < 0) p += S;
          cr[p * scl] = xr[i * sxl];
        }
      } else {  // shift left by seqlen, append x
        for (int64_t j = 0; j < W - 1; ++j) win[j] = static_cast<A>(cr[(S - (W - 1) + j) * scl]);
        for (int64_t i = 0; i < L; ++i) win[W - 1 + i] = static_cast<A>(xr[i * sxl]);
        if (L < S) {
          for (int64_t j = 0; j < S - L; ++j) cr[j * scl] = cr[(j + L) * scl];
          for (int64_t i = 0; i < L; ++i) cr[(S - L + i) * scl] = xr[i * sxl];
        } else {
          for (int64_t j = 0; j < S; ++j) cr[j * scl] = xr[(L - S + j) * sxl];
        }
      }
      const A* w = wp + d * W;
      const A bv = bp ? bp[d] : A(0);
      for (int64_t i = 0; i < L; ++i) {
        A acc = bv;
        for (int64_t k = 0; k < W; ++k) acc += w[k] * win[i + k];
        orow[i * sol] = static_cast<T>(silu ? causal_conv1d::cpu::silu(acc) : acc);
      }
    }
  });
}

// x (batch, dim, seqlen), or (batch, dim) for one token, then out is (batch, dim), contiguous:
// decoders call with 2-D x, and taking it as such (no unsqueeze/squeeze: two dispatcher calls on
// the stable ABI) keeps the per-token host cost at one op call.
Tensor update_cpu(const Tensor& x, Tensor& conv_state, const Tensor& weight,
                  const OptTensor& bias, bool silu, const OptTensor& cache_seqlens,
                  const OptTensor& conv_state_indices) {
  check_update_args(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, kMaxWidth,
                    /*allow_float64=*/true, /*allow_token=*/true);
  const int64_t B = x.size(0), D = x.size(1);
  Tensor out = x.dim() == 2 ? alloc_empty({B, D}, x.scalar_type(), x)
                            : empty_bdl(B, D, x.size(2), is_channel_last(x), x.scalar_type(), x);
  const ScalarType acc = acc_dtype(x);
  Tensor wf = as_contiguous(to_dtype(weight, acc));
  Tensor bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : Tensor();
  Tensor cs = cache_seqlens.has_value() ? as_contiguous(*cache_seqlens) : Tensor();
  Tensor idx = conv_state_indices.has_value() ? as_contiguous(*conv_state_indices) : Tensor();
  if (idx.defined()) {
    const int32_t* ip = idx.const_data_ptr<int32_t>();
    const int64_t rows = conv_state.size(0);
    for (int64_t b = 0; b < B; ++b) {
      CC1D_CHECK_VALUE(ip[b] < rows, "conv_state_indices[", b, "] = ", ip[b],
                        " is out of range for conv_state with ", rows, " rows (negative = padding slot)");
    }
  }
  if (out.numel() > 0) {
    dispatch_dtype(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      update_rows<T>(x, conv_state, out, wf, bf, cs.defined() ? cs.const_data_ptr<int32_t>() : nullptr,
                     idx.defined() ? idx.const_data_ptr<int32_t>() : nullptr, silu);
    });
  }
  return out;
}

}  // namespace
}  // namespace cpu
}  // namespace causal_conv1d

CC1D_LIBRARY_IMPL(causal_conv1d, CPU, m) {
  m.impl("fwd", CC1D_KERNEL(&causal_conv1d::cpu::fwd_cpu));
  m.impl("bwd", CC1D_KERNEL(&causal_conv1d::cpu::bwd_cpu));
  m.impl("update", CC1D_KERNEL(&causal_conv1d::cpu::update_cpu));
}
