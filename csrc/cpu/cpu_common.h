// What the CPU kernels of the causal_conv1d ops share: the accumulation type, silu, the window
// convolutions of the scalar kernels, the arguments each op's paths take, and dispatch_dtype_width()
// (the one place where dtype x width become template parameters). Layout of csrc/cpu/ (it mirrors
// csrc/cuda/): one file per op (fwd.cpp, bwd.cpp, update.cpp: checks, allocation, the call into the
// op's dispatch table), dispatch.h / dispatch.cpp (the tables), one file per forward path
// (fwd_simd.cpp: AVX-512 and AVX2; fwd_scalar.cpp), isa.cpp (which vector kernels this CPU runs) and
// register.cpp (the CPU registration of the ops). The serving ops are varlen_fwd.cpp and spec_update.cpp.
//
// Accumulation in float32 (float64 for float64 inputs, which the CPU accepts for gradcheck);
// indices are int64 throughout.
#pragma once

#include "checks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

// Unroll the W-tap loops fully (W <= 8) so the loop around them vectorises.
#if defined(__clang__)
#define CC1D_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define CC1D_UNROLL _Pragma("GCC unroll 8")
#else
#define CC1D_UNROLL
#endif

// The argument structs hold torch tensors, whose types have hidden visibility in the stable ABI's
// headers: the structs are hidden too (they never leave the extension).
#if defined(__GNUC__) || defined(__clang__)
#define CC1D_HIDDEN __attribute__((visibility("hidden")))
#else
#define CC1D_HIDDEN
#endif

namespace causal_conv1d {
namespace cpu {

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

inline ScalarType acc_dtype(ScalarType t) { return t == ScalarType::Double ? ScalarType::Double : ScalarType::Float; }
inline ScalarType acc_dtype(const Tensor& x) { return acc_dtype(x.scalar_type()); }

// weight and bias in the accumulation type acc, contiguous, as wf / bf (bf undefined without a bias).
inline void acc_weight_bias(const Tensor& weight, const OptTensor& bias, ScalarType acc, Tensor& wf, Tensor& bf) {
  wf = as_contiguous(to_dtype(weight, acc));
  bf = bias.has_value() ? as_contiguous(to_dtype(*bias, acc)) : Tensor();
}

// A tensor's data as P* (P const: read only) with its strides, 0 for the axes it lacks (up to 3):
// ptr(i, j, k) is the address of element [i, j, k], at(i, j, k) the element. Built from a null
// pointer (an absent tensor): p is null.
template <typename P>
struct Strided {
  P* p = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0;
  Strided() = default;
  explicit Strided(const Tensor& t) {
    if constexpr (std::is_const_v<P>) {
      p = t.const_data_ptr<std::remove_const_t<P>>();
    } else {
      p = t.mutable_data_ptr<P>();
    }
    const int64_t n = t.dim();
    s0 = n > 0 ? t.stride(0) : 0;
    s1 = n > 1 ? t.stride(1) : 0;
    s2 = n > 2 ? t.stride(2) : 0;
  }
  explicit Strided(const Tensor* t) {
    if (t != nullptr) *this = Strided(*t);
  }
  P* ptr(int64_t i, int64_t j, int64_t k = 0) const { return p + i * s0 + j * s1 + k * s2; }
  P& at(int64_t i, int64_t j, int64_t k = 0) const { return *ptr(i, j, k); }
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(std::integral_constant<int, W>{}) for W = width, one of kMinWidth + Is.
template <int... Is, typename F>
void for_width(int64_t width, std::integer_sequence<int, Is...>, F&& f) {
  (void)((width == Is + kMinWidth ? (f(std::integral_constant<int, Is + int(kMinWidth)>{}), true) : false) || ...);
}

// Calls f(TypeTag<T>{}) with T the element type of `dtype`, the dtype of the tensor `name`.
template <typename F>
void dispatch_dtype(ScalarType dtype, const char* name, F&& f) {
  switch (dtype) {
    case ScalarType::Float: f(TypeTag<float>{}); break;
    case ScalarType::Double: f(TypeTag<double>{}); break;
    case ScalarType::Half: f(TypeTag<Half>{}); break;
    case ScalarType::BFloat16: f(TypeTag<BFloat16>{}); break;
    default: CC1D_CHECK_TYPE(false, name, " must be float32, float16, bfloat16 or float64 on the CPU, got ", dtype);
  }
}

// Calls f(TypeTag<T>{}, std::integral_constant<int, W>{}) with T the element type of `dtype` and
// W = `width` (every width the ops accept, kMinWidth..kMaxWidth, has its own kernels).
template <typename F>
void dispatch_dtype_width(ScalarType dtype, int64_t width, F&& f) {
  CC1D_CHECK_VALUE(width >= kMinWidth && width <= kMaxWidth, "weight must have width between ", kMinWidth, " and ",
                   kMaxWidth, ", got ", width);
  dispatch_dtype(dtype, "x", [&](auto tag) {
    for_width(width, std::make_integer_sequence<int, kMaxWidth - kMinWidth + 1>{}, [&](auto w) { f(tag, w); });
  });
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

// conv_walk's loop; kRes: out[t] also adds res[t * rs] in the accumulation type (one rounding).
template <bool kRes, typename T, typename A, typename HT>
inline void conv_walk_loop(const T* xr, int64_t xs, T* orow, int64_t os, const T* res, int64_t rs, int64_t n,
                           const A* w, A bias, A* win, HT H, bool act) {
  const int64_t h = H;  // a plain variable in the loop conditions (unrolled where H is a constant)
  for (int64_t t = 0; t < n; ++t) {
    const A xt = static_cast<A>(xr[t * xs]);
    A acc = bias + w[h] * xt;
CC1D_UNROLL
    for (int64_t k = 0; k < h; ++k) acc += w[k] * win[k];
    A o = act ? silu(acc) : acc;
    if constexpr (kRes) o += static_cast<A>(res[t * rs]);
    orow[t * os] = static_cast<T>(o);
CC1D_UNROLL
    for (int64_t k = 0; k + 1 < h; ++k) win[k] = win[k + 1];
    win[h - 1] = xt;
  }
}

// One channel of a sequence of n tokens through the W = H + 1 taps w: out[t] = act(bias + w[H] x[t] +
// sum_{k < H} w[k] win[k]) (+ res[t] when res is set: the fused residual), then win shifts by x[t].
// win holds the H inputs before the first token in the accumulation type, and on return the H inputs
// before the token after the last. x, out and res are read and written xs, os and rs elements apart.
// H: an int64_t, or std::integral_constant<int, H>. The residual test is made once, outside the loop.
template <typename T, typename A, typename HT>
inline void conv_walk(const T* xr, int64_t xs, T* orow, int64_t os, int64_t n, const A* w, A bias, A* win, HT H,
                      bool act, const T* res = nullptr, int64_t rs = 0) {
  if (res != nullptr) {
    conv_walk_loop<true>(xr, xs, orow, os, res, rs, n, w, bias, win, H, act);
  } else {
    conv_walk_loop<false>(xr, xs, orow, os, res, rs, n, w, bias, win, H, act);
  }
}

// The forward's arguments, what every forward path takes.
struct CC1D_HIDDEN FwdArgs {
  int64_t batch, dim, seqlen, width;
  bool channel_last;           // x and out (batch, dim, seqlen) with dim the unit-stride axis
  const Tensor* x;
  Tensor* out;
  const void* weight;          // acc type; channel-first: (dim, W); channel-last: (W, dim)
  const void* bias;            // acc type (dim,); zeros when the op got no bias
  const int32_t* seq;          // (batch, seqlen) contiguous or nullptr
  const void* init;            // acc type; channel-first: (batch, dim, W-1); channel-last: (batch, W-1, dim)
  bool silu;
  const Tensor* residual;      // x's dtype and layout (unit stride on x's unit-stride axis), or nullptr
};

// A forward kernel's view of FwdArgs for element type T: x and out (batch, dim, seqlen) with their
// strides, the weight, bias and initial states in the accumulation type A (float in the vector
// kernels, which have no float64 ones), the seq ids and the residual (res.p null: none).
template <typename T, typename A = acc_t<T>>
struct FwdView {
  Strided<const T> x;
  Strided<T> out;
  Strided<const T> res;
  const A* w;
  const A* bias;
  const A* init;
  const int32_t* seq;
  explicit FwdView(const FwdArgs& a)
      : x(a.x), out(a.out), res(a.residual), w(static_cast<const A*>(a.weight)), bias(static_cast<const A*>(a.bias)),
        init(static_cast<const A*>(a.init)), seq(a.seq) {}
};

// Runs a forward path's kernels for x's dtype and the width: channel-first, cf(tag, w, r0, r1) over
// the (batch, channel) rows [r0, r1), vectorised along seqlen; channel-last, cl(tag, w, t0, t1,
// rows, nblocks) over the tasks [t0, t1) of `rows` positions each (nblocks per batch row),
// vectorised along dim. kWithDouble: whether the path has float64 kernels.
template <bool kWithDouble, typename Cf, typename Cl>
void run_fwd_kernels(const FwdArgs& a, Cf&& cf, Cl&& cl) {
  dispatch_dtype_width(a.x->scalar_type(), a.width, [&](auto tag, auto w) {
    using T = typename decltype(tag)::type;
    if constexpr (kWithDouble || !std::is_same_v<T, double>) {
      if (a.channel_last) {
        // Blocks of positions sized for ~16K outputs per task.
        const int64_t D = a.dim, L = a.seqlen;
        const int64_t rows = std::min<int64_t>(std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)), L);
        const int64_t nblocks = (L + rows - 1) / rows;
        parallel_for(0, a.batch * nblocks, 1, [&](int64_t t0, int64_t t1) { cl(tag, w, t0, t1, rows, nblocks); });
      } else {
        const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(a.seqlen, 1));
        parallel_for(0, a.batch * a.dim, grain, [&](int64_t r0, int64_t r1) { cf(tag, w, r0, r1); });
      }
    }
  });
}

// The backward's arguments (channel-first tensors: the op transposes a channel-last x first).
struct CC1D_HIDDEN BwdArgs {
  int64_t batch, dim, seqlen, width;
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

// The update's arguments: x and out are (batch, dim, seqlen), or (batch, dim) for one token.
struct CC1D_HIDDEN UpdateArgs {
  const Tensor* x;
  Tensor* conv_state;
  const Tensor* out;
  const Tensor* weight;          // acc type (dim, W), contiguous
  const Tensor* bias;            // acc type (dim,), contiguous, or undefined
  const int32_t* cache_seqlens;  // (batch,) or nullptr: a circular buffer's next write position
  const int32_t* indices;        // (batch,) or nullptr: conv_state rows; negative = padding slot
  bool silu;
};

// The packed-sequence ops' arguments (packed_fwd.cpp, packed_bwd.cpp): x (1, dim, total) read
// through its strides, sequence i is tokens [cu[i], cu[i + 1]) (values checked), states (n, dim,
// W-1) through their strides in x's dtype. Outputs written through their strides.
struct CC1D_HIDDEN PackedArgs {
  int64_t dim, total, width, nseq;
  const int32_t* cu;        // (nseq + 1,), cu_stride apart
  int64_t cu_stride;
  const Tensor* x;
  const Tensor* init;       // (nseq, dim, W-1) or nullptr
  const void* weight;       // acc type (dim, W), contiguous
  const void* bias;         // acc type (dim,) or nullptr
  bool silu;
  // forward
  Tensor* out;              // (1, dim, total)
  Tensor* final_states;     // (nseq, dim, W-1) or nullptr
  const Tensor* residual;   // (1, dim, total) in x's dtype, or nullptr
  // backward
  const Tensor* dout;       // (1, dim, total)
  const Tensor* dfinal;     // (nseq, dim, W-1) or nullptr
  Tensor* dx;               // (1, dim, total)
  Tensor* dinit;            // (nseq, dim, W-1) or nullptr
  void* dweight;            // acc type (dim, W), written
  void* dbias;              // acc type (dim,) or nullptr, written

  int64_t start(int64_t i) const { return cu[i * cu_stride]; }  // sequence i's first token
  int64_t tokens(int64_t i) const { return cu[(i + 1) * cu_stride] - cu[i * cu_stride]; }
};

// The inputs both packed ops pass (x (1, dim, total), n sequences): the sizes, the sequence table,
// x, the initial states, silu, and the weight and bias in the accumulation type, contiguous, as
// wf / bf (the caller keeps them alive while the args are used).
inline PackedArgs packed_inputs(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& cu_seqlens,
                                const OptTensor& initial_states, int64_t n, bool silu, Tensor& wf, Tensor& bf) {
  acc_weight_bias(weight, bias, acc_dtype(x), wf, bf);
  PackedArgs a{};
  a.dim = x.size(1);
  a.total = x.size(2);
  a.width = weight.size(1);
  a.nseq = n;
  a.cu = cu_seqlens.const_data_ptr<int32_t>();
  a.cu_stride = cu_seqlens.stride(0);
  a.x = &x;
  a.init = initial_states.has_value() ? &*initial_states : nullptr;
  a.weight = wf.const_data_ptr();
  a.bias = bf.defined() ? bf.const_data_ptr() : nullptr;
  a.silu = silu;
  return a;
}

}  // namespace cpu
}  // namespace causal_conv1d
