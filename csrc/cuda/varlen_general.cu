// The general varlen prefill (kernel path varlen_general): every case the op's checks accept (any
// strides, widths 2-8, a state cache of another dtype than x, prefix caching). One channel per
// thread, a 2-D grid x = channels, y = chunks of tokens; the walk is varlen_walk.cuh's.
#include "launch_check.cuh"

#include "dispatch.cuh"
#include "varlen_walk.cuh"

namespace causal_conv1d_cuda {
namespace {

using namespace serving;

constexpr int kThreads = 128;

// One channel of x (T) with a cache of St: x is rounded to St before it is used (vLLM's rule: x is
// cast to the cache's dtype), the output rounded to St and stored as T. kRes: the packed forward's
// residual (p.res; the cache is in x's dtype there) is added before that rounding (a template
// parameter: the kernels without one are unchanged).
template <typename T, typename St, bool kRes>
struct ScalarLane {
  static constexpr int kC = 1;
  const VarlenParams& p;
  int64_t ch;

  using Raw = float;
  __device__ __forceinline__ Raw load_raw(int64_t t) const {
    return round_to<St>(to_float(static_cast<const T*>(p.x)[ch * p.x_ds + t * p.x_ts]));
  }
  __device__ __forceinline__ void unpack(const Raw& r, float (&v)[1]) const { v[0] = r; }
  __device__ __forceinline__ void x(int64_t t, float (&v)[1]) const { v[0] = load_raw(t); }
  // v plus the residual at token t (kRes; else v itself: v + 0.f would not fold, -0 + 0 is +0)
  __device__ __forceinline__ float with_res(int64_t t, float v) const {
    if constexpr (kRes) return v + to_float(static_cast<const T*>(p.res)[ch * p.r_ds + t * p.r_ts]);
    return v;
  }
  __device__ __forceinline__ void out(int64_t t, const float (&v)[1]) const {
    static_cast<T*>(p.out)[ch * p.o_ds + t * p.o_ts] = from_float<T>(round_to<St>(with_res(t, v[0])));
  }
  __device__ __forceinline__ void out_zero(int64_t t) const {  // 0, plus the residual
    static_cast<T*>(p.out)[ch * p.o_ds + t * p.o_ts] = from_float<T>(with_res(t, 0.f));
  }
  __device__ __forceinline__ void state_load(int64_t line, int e, float (&v)[1]) const {
    v[0] = to_float(static_cast<const St*>(p.states)[line * p.st_bs + ch * p.st_cs + e * p.st_ls]);
  }
  __device__ __forceinline__ void state_store(int64_t line, int e, const float (&v)[1]) const {
    static_cast<St*>(p.states)[line * p.st_bs + ch * p.st_cs + e * p.st_ls] = from_float<St>(v[0]);
  }
};

template <typename T, typename St, int kW, bool kRes>
__global__ void __launch_bounds__(kThreads) varlen_general_kernel(const VarlenParams p, const int64_t chunk) {
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * chunk;
  const int s = block_find_request(p, c0);  // the whole block: before any thread returns
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (d >= p.dim) return;
  const int64_t c1 = c0 + chunk < p.total ? c0 + chunk : p.total;
  const ScalarLane<T, St, kRes> lane{p, d};
  varlen_walk<kW, 4>(p, lane, c0, c1, s);
}

struct VarlenLaunch {
  template <typename T, int kW>
  static void run(const VarlenParams& p, cudaStream_t stream) {
    int64_t chunk = 64;
    while ((p.total + chunk - 1) / chunk > 65535) chunk *= 2;
    const dim3 grid(static_cast<unsigned>((p.dim + kThreads - 1) / kThreads),
                    static_cast<unsigned>((p.total + chunk - 1) / chunk));
    dispatch_dtype(p.st_dtype, [&](auto st) {
      using St = typename decltype(st)::type;
      dispatch_flag(p.res != nullptr, [&](auto res) {
        varlen_general_kernel<T, St, kW, decltype(res)::value><<<grid, kThreads, 0, stream>>>(p, chunk);
      });
    });
    CC1D_CUDA_LAUNCH_CHECK();
  }
};

}  // namespace

void varlen_general::launch(const VarlenParams& p, cudaStream_t stream) { launch_general<VarlenLaunch>(p, stream); }

}  // namespace causal_conv1d_cuda
