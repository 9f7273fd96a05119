// The channel-last varlen prefill fast path (kernel path varlen_cl_fast): x (dim, total) a
// (total, dim) tensor's transpose (or a column slice of a wider one), the layout engines hold. A
// thread owns one 16-byte vector of channels (8 for 16-bit types, 4 for fp32) and a chunk of
// tokens; a warp reads 512 contiguous bytes of a token row per load, four tokens' loads in flight
// before their use. The walk (ownership of states and first outputs, prefix-caching boundaries) is
// varlen_walk.cuh's, so this path computes exactly what the general one does, a vector at a time.
//
// The packed forward's residual (kRes, a template parameter: the kernels without one are unchanged):
// one 16-byte load per output vector, added before the store.
// Eligible: x channel-last with 16-byte aligned token rows (and the residual's), dim a multiple of the
// vector, width 2-4, the cache in x's dtype (any strides: 16-byte accesses when its channel stride is
// 1 and its rows are aligned, else per element).
#include <type_traits>

#include "launch_check.cuh"

#include "dispatch.cuh"
#include "varlen_walk.cuh"

namespace causal_conv1d_cuda {
namespace {

using namespace serving;

constexpr int kThreads = 128;
constexpr int kUnroll = 4;

template <typename T, bool kRes>
struct VecLane {
  static constexpr int kC = 16 / static_cast<int>(sizeof(T));
  const VarlenParams& p;
  int64_t ch;        // first channel
  bool state_vec;    // 16-byte cache accesses

  using Raw = uint4;
  __device__ __forceinline__ Raw load_raw(int64_t t) const { return ld_global_16(static_cast<const T*>(p.x) + t * p.x_ts + ch); }
  __device__ __forceinline__ void unpack(const Raw& r, float (&v)[kC]) const { Vec16<T>::load(r, v); }
  __device__ __forceinline__ void x(int64_t t, float (&v)[kC]) const { unpack(load_raw(t), v); }
  __device__ __forceinline__ void out(int64_t t, const float (&v)[kC]) const {
    if constexpr (kRes) {
      float r[kC];
      Vec16<T>::load(ld_global_16(static_cast<const T*>(p.res) + t * p.r_ts + ch), r);
#pragma unroll
      for (int c = 0; c < kC; ++c) r[c] += v[c];
      st_global_16(static_cast<T*>(p.out) + t * p.o_ts + ch, Vec16<T>::store(r));
    } else {
      st_global_16(static_cast<T*>(p.out) + t * p.o_ts + ch, Vec16<T>::store(v));
    }
  }
  __device__ __forceinline__ void out_zero(int64_t t) const {  // 0, plus the residual
    const uint4 z = kRes ? ld_global_16(static_cast<const T*>(p.res) + t * p.r_ts + ch) : make_uint4(0u, 0u, 0u, 0u);
    st_global_16(static_cast<T*>(p.out) + t * p.o_ts + ch, z);
  }
  __device__ __forceinline__ void state_load(int64_t line, int e, float (&v)[kC]) const {
    const T* base = static_cast<const T*>(p.states) + line * p.st_bs + e * p.st_ls;
    if (state_vec) {
      Vec16<T>::load(ld_global_16(base + ch), v);
    } else {
#pragma unroll
      for (int c = 0; c < kC; ++c) v[c] = to_float(base[(ch + c) * p.st_cs]);
    }
  }
  __device__ __forceinline__ void state_store(int64_t line, int e, const float (&v)[kC]) const {
    T* base = static_cast<T*>(p.states) + line * p.st_bs + e * p.st_ls;
    if (state_vec) {
      st_global_16(base + ch, Vec16<T>::store(v));
    } else {
#pragma unroll
      for (int c = 0; c < kC; ++c) base[(ch + c) * p.st_cs] = from_float<T>(v[c]);
    }
  }
};

template <typename T, int kW, int kAct, bool kRes>
__global__ void __launch_bounds__(kThreads) varlen_cl_fast_kernel(const VarlenParams p, const int64_t chunk,
                                                                  const bool state_vec) {
  constexpr int kC = VecLane<T, kRes>::kC;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * chunk;
  const int s = block_find_request(p, c0);  // the whole block: before any thread returns
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g * kC >= p.dim) return;
  const int64_t c1 = c0 + chunk < p.total ? c0 + chunk : p.total;
  const VecLane<T, kRes> lane{p, g * kC, state_vec};
  varlen_walk<kW, kUnroll, VecLane<T, kRes>, kAct>(p, lane, c0, c1, s);
}

template <typename T, int kW>
void launch_typed(const VarlenParams& p, cudaStream_t stream) {
  constexpr int kC = VecLane<T, false>::kC;
  const int64_t groups = p.dim / kC;
  // chunk: about 8 waves of resident threads over the grid (a short tail), 16-128 tokens, a multiple
  // of the unroll; ~140 registers a thread: 3-4 blocks of 128 threads an SM
  const int64_t resident = static_cast<int64_t>(p.num_sms) * 512;
  int64_t chunk = p.total * groups / (8 * resident);
  chunk = chunk < 16 ? 16 : (chunk > 128 ? 128 : chunk);
  chunk = (chunk + kUnroll - 1) / kUnroll * kUnroll;
  while ((p.total + chunk - 1) / chunk > 65535) chunk *= 2;
  const bool state_vec = p.st_cs == 1 && aligned_to(p.states, 16) && vec_aligned<T>(p.states, p.st_bs) &&
                         vec_aligned<T>(p.states, p.st_ls);
  const dim3 grid(static_cast<unsigned>((groups + kThreads - 1) / kThreads),
                  static_cast<unsigned>((p.total + chunk - 1) / chunk));
  dispatch_flag(p.silu, [&](auto silu) {
    dispatch_flag(p.res != nullptr, [&](auto res) {
      constexpr int kAct = decltype(silu)::value ? 1 : 0;
      varlen_cl_fast_kernel<T, kW, kAct, decltype(res)::value><<<grid, kThreads, 0, stream>>>(p, chunk, state_vec);
    });
  });
  CC1D_CUDA_LAUNCH_CHECK();
}

template <typename T>
bool eligible_typed(const VarlenParams& p) {
  constexpr int kC = VecLane<T, false>::kC;
  const bool res_ok = p.res == nullptr || (p.r_ds == 1 && vec_aligned<T>(p.res, p.r_ts));
  return p.x_ds == 1 && p.o_ds == 1 && p.dim % kC == 0 && vec_aligned<T>(p.x, p.x_ts) && vec_aligned<T>(p.out, p.o_ts) &&
         res_ok;
}

}  // namespace

namespace varlen_cl_fast {
bool eligible(const VarlenParams& p) {
  if (p.width > 4 || p.st_dtype != p.x_dtype) return false;
  return dispatch_dtype(p.x_dtype, [&](auto tag) { return eligible_typed<typename decltype(tag)::type>(p); });
}

void launch(const VarlenParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<4>{}, [&](auto tag, auto width) {
    launch_typed<typename decltype(tag)::type, decltype(width)::value>(p, stream);
  });
}
}  // namespace varlen_cl_fast

}  // namespace causal_conv1d_cuda
