// The decode / speculative update fast path (kernel path spec_update_fast; semantics:
// docs/serving.md): vLLM's layouts, x channel-last ((batch, seqlen, dim) transposed, or a ragged
// (num_tokens, dim)) and the cache (lines, state_len, dim) transposed. A thread owns one 16-byte
// vector of channels (8 for 16-bit types, 4 for fp32) of one request: it loads the history window
// and up to four tokens before the first use, computes the outputs, and writes the new state (the
// window was read first, so an in-place line is safe). A warp moves 512 contiguous bytes per access.
//
// Eligible: width 2-4, the cache in x's dtype with channel stride 1 and 16-byte aligned rows, x and
// out channel-contiguous with 16-byte aligned token rows, dim a multiple of the vector, no tree drafts.
#include <type_traits>

#include "launch_check.cuh"

#include "dispatch.cuh"
#include "varlen_device.cuh"

namespace causal_conv1d_cuda {
namespace {

using namespace serving;

constexpr int kThreads = 128;
constexpr int kUnroll = 4;

__device__ __forceinline__ void store_zero16(void* ptr) { st_global_16(ptr, make_uint4(0u, 0u, 0u, 0u)); }

// The tokens of request b: returns how many, with xr / outr at channel ch of its first token in x / out.
// In a ragged batch the first / last request's threads also write 0 to the tokens of no request
// (before the first, after the last).
template <typename T>
__device__ __forceinline__ int64_t request_tokens(const SpecParams& p, int64_t b, int64_t ch, const T*& xr, T*& outr) {
  int64_t n = p.seqlen;
  if (p.qsl != nullptr) {
    const int64_t t0 = clamp64(p.qsl[b], 0, p.total), t1 = clamp64(p.qsl[b + 1], 0, p.total);
    n = t1 > t0 ? t1 - t0 : 0;
    xr = static_cast<const T*>(p.x) + t0 * p.x_ls + ch;
    outr = static_cast<T*>(p.out) + t0 * p.o_ls + ch;
    T* o = static_cast<T*>(p.out) + ch;
    if (b == 0)
      for (int64_t t = 0; t < t0; ++t) store_zero16(o + t * p.o_ls);
    if (b == p.batch - 1)
      for (int64_t t = t1 > t0 ? t1 : t0; t < p.total; ++t) store_zero16(o + t * p.o_ls);
  } else {
    xr = static_cast<const T*>(p.x) + b * p.x_bs + ch;
    outr = static_cast<T*>(p.out) + b * p.o_bs + ch;
  }
  return n;
}

template <typename T, int kW>
__global__ void __launch_bounds__(kThreads, 4) spec_fast_kernel(const SpecParams p) {
  constexpr int kC = 16 / static_cast<int>(sizeof(T));
  constexpr int kH = kW - 1;
  const int64_t ch = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kC;
  if (ch >= p.dim) return;
  const int hr = p.width - 1;
  float w[kC][kW], bias[kC];
  bool have_w = false;  // loaded after the first loads of x and the window are in flight
  for (int64_t b = blockIdx.y; b < p.batch; b += gridDim.y) {
    const T* xr;
    T* outr;
    int64_t n = request_tokens<T>(p, b, ch, xr, outr);
    uint4 xraw[kUnroll];  // the first tokens' loads, issued before the cache line is known
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (u < n) xraw[u] = ld_global_16(xr + u * p.x_ls);
    if (n == 0) continue;
    if (p.qsl != nullptr && p.num_accepted != nullptr && n > p.seqlen) {  // a speculative step: at most max_query_len
      for (int64_t i = p.seqlen; i < n; ++i) st_global_16(outr + i * p.o_ls, make_uint4(0u, 0u, 0u, 0u));
      n = p.seqlen;
    }
    int64_t c_in = 0, c_out = 0;
    if (!request_lines(p.ci, b, p.pad_slot_id, p.lines, c_in, c_out)) {  // skipped: output 0
      for (int64_t i = 0; i < n; ++i) st_global_16(outr + i * p.o_ls, make_uint4(0u, 0u, 0u, 0u));
      continue;
    }
    const int64_t S = p.state_len;
    const int64_t off = p.num_accepted != nullptr ? clamp64(static_cast<int64_t>(p.num_accepted[b]) - 1, 0, S - hr) : 0;
    const T* cin = static_cast<const T*>(p.state) + c_in * p.st_bs + ch;
    uint4 wraw[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j)
      if (j >= kH - hr) wraw[j] = ld_global_16(cin + (off + j - (kH - hr)) * p.st_ls);
    if (!have_w) {
      load_weights<SpecParams, kC, kW>(p, ch, w, bias);
      have_w = true;
    }
    float win[kH][kC];
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      if (j >= kH - hr) {
        Vec16<T>::load(wraw[j], win[j]);
      } else {
#pragma unroll
        for (int c = 0; c < kC; ++c) win[j][c] = 0.f;
      }
    }
    T* cout = static_cast<T*>(p.state) + c_out * p.st_bs + ch;
    const bool spec = p.num_accepted != nullptr;
    if (spec) {  // cat(window[1:], x): the first hr - 1 entries now (the window is in registers)
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int e = j - (kH - hr) - 1;
        if (e >= 0) st_global_16(cout + e * p.st_ls, wraw[j]);
      }
    }
    for (int64_t i0 = 0; i0 < n; i0 += kUnroll) {
      if (i0 > 0) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (i0 + u < n) xraw[u] = ld_global_16(xr + (i0 + u) * p.x_ls);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (i0 + u < n) {
          const int64_t i = i0 + u;
          float xv[kC], o[kC];
          Vec16<T>::load(xraw[u], xv);
          conv_out<kC, kW>(w, bias, win, xv, p.silu, o);
          st_global_16(outr + i * p.o_ls, Vec16<T>::store(o));
          if (spec && hr - 1 + i < S) st_global_16(cout + (hr - 1 + i) * p.st_ls, xraw[u]);
          shift_in<kC, kH>(win, xv);
        }
      }
    }
    if (!spec) {  // the last hr inputs
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int e = j - (kH - hr);
        if (e >= 0) st_global_16(cout + e * p.st_ls, Vec16<T>::store(win[j]));
      }
    }
  }
}

// Element c (compile-time) of 16 bytes of T, as float; and the packing of outputs back.
__device__ __forceinline__ uint32_t word_of(const uint4& r, int i) {
  return i == 0 ? r.x : (i == 1 ? r.y : (i == 2 ? r.z : r.w));
}
template <typename T>
__device__ __forceinline__ float elem(const uint4& r, int c) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(word_of(r, c));
  } else {
    const uint32_t w = word_of(r, c >> 1);
    float lo, hi;
    if constexpr (std::is_same<T, __nv_bfloat16>::value) unpack2_bf16(w, lo, hi); else unpack2_f16(w, lo, hi);
    return (c & 1) ? hi : lo;
  }
}
__device__ __forceinline__ void set_word(uint4& r, int i, uint32_t v) {
  if (i == 0) r.x = v; else if (i == 1) r.y = v; else if (i == 2) r.z = v; else r.w = v;
}

// The same step with the weights, the window and x kept as they are in memory (16-byte words of
// T) and converted where used, channel by channel: a third fewer registers than floats for all
// of them, so more requests are in flight per SM. Width 4, weight (dim, 4) contiguous in x's dtype,
// bias in x's dtype with unit stride (or none).
template <typename T, bool kSilu>
__global__ void __launch_bounds__(kThreads, 5) spec_raw_kernel(const SpecParams p) {
  constexpr int kC = 16 / static_cast<int>(sizeof(T));
  constexpr int kW = 4;
  constexpr int kH = kW - 1;
  constexpr int kWv = kC * kW * static_cast<int>(sizeof(T)) / 16;  // 16-byte words of weights
  const int64_t ch = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kC;
  if (ch >= p.dim) return;
  uint4 wr[kWv], br = make_uint4(0u, 0u, 0u, 0u);
  bool have_w = false;
  for (int64_t b = blockIdx.y; b < p.batch; b += gridDim.y) {
    const T* xr;
    T* outr;
    int64_t n = request_tokens<T>(p, b, ch, xr, outr);
    uint4 xraw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (u < n) xraw[u] = ld_global_16(xr + u * p.x_ls);
    if (n == 0) continue;
    if (p.qsl != nullptr && p.num_accepted != nullptr && n > p.seqlen) {  // a speculative step: at most max_query_len
      for (int64_t i = p.seqlen; i < n; ++i) st_global_16(outr + i * p.o_ls, make_uint4(0u, 0u, 0u, 0u));
      n = p.seqlen;
    }
    int64_t c_in = 0, c_out = 0;
    if (!request_lines(p.ci, b, p.pad_slot_id, p.lines, c_in, c_out)) {  // skipped: output 0
      for (int64_t i = 0; i < n; ++i) st_global_16(outr + i * p.o_ls, make_uint4(0u, 0u, 0u, 0u));
      continue;
    }
    const int64_t S = p.state_len;
    const int64_t off = p.num_accepted != nullptr ? clamp64(static_cast<int64_t>(p.num_accepted[b]) - 1, 0, S - kH) : 0;
    const T* cin = static_cast<const T*>(p.state) + c_in * p.st_bs + ch;
    uint4 win[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) win[j] = ld_global_16(cin + (off + j) * p.st_ls);
    if (!have_w) {
      const uint4* wp = reinterpret_cast<const uint4*>(static_cast<const T*>(p.weight) + ch * kW);
#pragma unroll
      for (int v = 0; v < kWv; ++v) wr[v] = ld_global_16(wp + v);
      if (p.bias != nullptr) br = ld_global_16(static_cast<const T*>(p.bias) + ch);
      have_w = true;
    }
    T* cout = static_cast<T*>(p.state) + c_out * p.st_bs + ch;
    const bool spec = p.num_accepted != nullptr;
    if (spec) {  // cat(window[1:], x): the first kH - 1 entries now (the window is in registers)
#pragma unroll
      for (int j = 1; j < kH; ++j) st_global_16(cout + (j - 1) * p.st_ls, win[j]);
    }
    for (int64_t i0 = 0; i0 < n; i0 += kUnroll) {
      if (i0 > 0) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (i0 + u < n) xraw[u] = ld_global_16(xr + (i0 + u) * p.x_ls);
      }
      uint4 oraw[kUnroll];
#pragma unroll
      for (int c = 0; c < kC; c += 2) {  // two channels at a time: one packed word of 16-bit outputs
        float o2[2][kUnroll];
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) {
          const int e = c + cc;
          float wc[kW];
#pragma unroll
          for (int k = 0; k < kW; ++k) wc[k] = elem<T>(wr[(e * kW + k) / (kC * kW / kWv)], (e * kW + k) % (kC * kW / kWv));
          const float bc = elem<T>(br, e);
          float tap[kH + kUnroll];
#pragma unroll
          for (int j = 0; j < kH; ++j) tap[j] = elem<T>(win[j], e);
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) tap[kH + u] = elem<T>(xraw[u], e);
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            float acc = bc;
#pragma unroll
            for (int k = 0; k < kW; ++k) acc = fmaf(wc[k], tap[u + k], acc);
            o2[cc][u] = kSilu ? silu_f(acc) : acc;
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if constexpr (sizeof(T) == 4) {
            set_word(oraw[u], c, __float_as_uint(o2[0][u]));
            set_word(oraw[u], c + 1, __float_as_uint(o2[1][u]));
          } else {
            set_word(oraw[u], c >> 1, pack2(o2[0][u], o2[1][u], T{}));
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (i0 + u < n) {
          const int64_t i = i0 + u;
          st_global_16(outr + i * p.o_ls, oraw[u]);
          if (spec && kH - 1 + i < S) st_global_16(cout + (kH - 1 + i) * p.st_ls, xraw[u]);
        }
      }
      // the window of the next chunk (or of the final state): the last kH of cat(window, the valid tokens)
      const int64_t m = n - i0 < kUnroll ? n - i0 : kUnroll;
      uint4 nw[kH];
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        nw[j] = win[j];
#pragma unroll
        for (int src = 0; src < kH + kUnroll; ++src)
          if (src == m + j) nw[j] = src < kH ? win[src] : xraw[src - kH];
      }
#pragma unroll
      for (int j = 0; j < kH; ++j) win[j] = nw[j];
    }
    if (!spec) {  // the last kH inputs
#pragma unroll
      for (int j = 0; j < kH; ++j) st_global_16(cout + j * p.st_ls, win[j]);
    }
  }
}

template <typename T>
bool raw_eligible(const SpecParams& p) {
  const bool bias = p.bias == nullptr || (p.b_dtype == p.x_dtype && p.b_s == 1 && aligned_to(p.bias, 16));
  return p.width == 4 && p.w_dtype == p.x_dtype && p.w_ws == 1 && p.w_cs == 4 && aligned_to(p.weight, 16) && bias;
}

template <typename T>
bool eligible_typed(const SpecParams& p) {
  constexpr int kC = 16 / static_cast<int>(sizeof(T));
  const bool rows = p.qsl != nullptr || (vec_aligned<T>(p.x, p.x_bs) && vec_aligned<T>(p.out, p.o_bs));
  return p.dim % kC == 0 && p.x_cs == 1 && p.o_cs == 1 && p.st_cs == 1 && rows && vec_aligned<T>(p.x, p.x_ls) &&
         vec_aligned<T>(p.out, p.o_ls) && vec_aligned<T>(p.state, p.st_bs) && vec_aligned<T>(p.state, p.st_ls);
}

}  // namespace

namespace spec_update_fast {
bool eligible(const SpecParams& p) {
  if (p.width > 4 || p.st_dtype != p.x_dtype || p.parent != nullptr) return false;
  return dispatch_dtype(p.x_dtype, [&](auto tag) { return eligible_typed<typename decltype(tag)::type>(p); });
}

void launch(const SpecParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<4>{}, [&](auto tag, auto width) {
    using T = typename decltype(tag)::type;
    constexpr int kC = 16 / static_cast<int>(sizeof(T));
    const int64_t groups = p.dim / kC;
    const dim3 grid(static_cast<unsigned>((groups + kThreads - 1) / kThreads),
                    static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
    constexpr int kW = decltype(width)::value;
    if constexpr (kW == 4) {
      if (raw_eligible<T>(p)) {
        dispatch_flag(p.silu, [&](auto silu) {
          spec_raw_kernel<T, decltype(silu)::value><<<grid, kThreads, 0, stream>>>(p);
        });
        CC1D_CUDA_LAUNCH_CHECK();
        return;
      }
    }
    spec_fast_kernel<T, kW><<<grid, kThreads, 0, stream>>>(p);
    CC1D_CUDA_LAUNCH_CHECK();
  });
}
}  // namespace spec_update_fast

}  // namespace causal_conv1d_cuda
