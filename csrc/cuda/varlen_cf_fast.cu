// The channel-first varlen prefill fast path (kernel path varlen_cf_fast; semantics:
// docs/serving.md): x (dim, total) with unit token stride. Two launches:
//
// 1. The body: every output, as if each request started from a zero state. A 2-D grid (y: the
//    channel row, x: blocks of 4 warps along it); a warp owns a span of the row, 32 lanes x 4
//    vectors of 16 bytes (8 tokens for 16-bit types, 4 for fp32), interleaved so that each load is
//    512 contiguous bytes; the W-1 tokens before a vector come from the neighbouring lane by a
//    shuffle. The block first copies query_start_loc and whether each request runs into shared
//    memory (its loads overlap the span's); a lane follows the requests of its vectors with a
//    cursor. Every vector is one convolution with the halo taps before the current request's start
//    read as 0 (three selects) and its outputs zeroed when the request does not run; a vector in
//    which a request starts is convolved once more for that request's tokens; one in which two
//    start (requests shorter than a vector) goes out of line, token by token. Nothing here waits on
//    the state cache. The activation is a template parameter: a branch per output kept ptxas from
//    interleaving the exponentials (ncu: 27% of cycles stalled on instruction fetch).
// 2. The heads (one thread per request and channel): for a request with an initial state, its first
//    W-1 outputs again from the state and x (the only outputs that read the state); for every
//    request that runs, its final state. Stream order puts these writes after the body's.
//
// The packed forward's residual: added at every output store, before the rounding: in the body by a
// template parameter kRes (one 16-byte load per vector; the kernels without one are unchanged), in the
// out-of-line token path and the heads by a test of the (null or not) pointer.
//
// Eligible: x and out channel-first with 16-byte aligned rows, width 2-4, the cache in x's dtype, no
// prefix caching (that runs the general path), at most 2047 requests, dim <= 65535, total < 2^30.
#include <type_traits>

#include "launch_check.cuh"

#include "dispatch.cuh"
#include "varlen_device.cuh"

namespace causal_conv1d_cuda {
namespace {

using namespace serving;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

constexpr int kSmemQ = 2048;  // the most requests + 1 (more: the general path)
constexpr int kFar = 0x7fffff00;  // "no next request start" (token positions are < 2^31: int32 query_start_loc)

// What the body needs of the requests, the block's copy in shared memory (read from global memory, a
// lane's first binary search and every step of its cursor would be a dependent round trip to L2:
// the streaming x evicts the table from L1): query_start_loc, clamped, and whether each request runs
// (its 1-D cache line is not pad_slot_id and inside the cache; else its tokens are 0). By value: a
// reference to the kernel's parameters in an out of line function would copy them to local memory.
struct Requests {
  const int* sq;             // (batch + 1) clamped query_start_loc
  const unsigned char* sok;  // (batch) the request runs
  int total, batch;

  __device__ __forceinline__ int q(int i) const { return sq[i]; }
  __device__ __forceinline__ bool runs(int i) const { return sok[i] != 0; }
};

// The request a lane's tokens are in, walked forward: request r covers [st, nb) (r == -1: before the
// first request; r == batch: after the last), ok when it runs.
struct Cursor {
  int r, st, nb;
  bool ok;

  __device__ __forceinline__ void enter(const Requests& q, int i) {
    r = i;
    if (i < 0) {
      st = -kFar;
      nb = q.q(0);
      ok = false;
      return;
    }
    st = q.q(i);  // i == batch: the tokens after the last request start at query_start_loc[batch]
    nb = i < q.batch ? q.q(i + 1) : kFar;
    ok = i < q.batch && q.runs(i);
  }
  // The last request whose start is <= t (query_start_loc non-decreasing; clamped values keep it so).
  __device__ __forceinline__ void find(const Requests& q, int t) {
    int i = -1;
    if (q.q(0) <= t) {
      int lo = 0, hi = q.batch + 1;  // q(lo) <= t; the answer is in [lo, hi)
      while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (q.q(mid) <= t) lo = mid; else hi = mid;
      }
      i = lo;
    }
    enter(q, i);
  }
  __device__ __forceinline__ void next(const Requests& q) { enter(q, r + 1); }
  __device__ __forceinline__ void advance(const Requests& q, int t) {
    while (nb <= t) next(q);
  }
};

// o[j] = act(bias + sum_k w[k] * tap(j - kH + k)) for the kC tokens of a vector, tap(i) = xv[i] for i >= 0
// and halo[kH + i] before.
template <int kC, int kW, bool kSilu>
__device__ __forceinline__ void conv_vector(const float (&w)[kW], const float bias, const float (&halo)[kW - 1],
                                            const float (&xv)[kC], float (&o)[kC]) {
  constexpr int kH = kW - 1;
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    float acc = bias;
#pragma unroll
    for (int k = 0; k < kH; ++k) {
      const int src = j - kH + k;
      acc = fmaf(w[k], src >= 0 ? xv[src] : halo[kH + src], acc);
    }
    acc = fmaf(w[kH], xv[j], acc);
    o[j] = kSilu ? silu_f(acc) : acc;
  }
}

// A vector in which two or more requests start (requests shorter than a vector), token by token
// from global memory (x is in L1); out of line: rare, and kept out of the vector loop's registers.
// rrow: the residual's row, passed only by the kernels with one (Res = T; none: the call and its
// registers are those of a function without the argument).
template <typename T, int kW, int kC, typename... Res>
__device__ __noinline__ void many_starts(const Requests q, Cursor c, const int a, const float (&w)[kW],
                                         const float bias, const bool silu, const T* __restrict__ xrow,
                                         T* __restrict__ orow, const Res* __restrict__... rrow) {
  static_assert(sizeof...(Res) <= 1, "one residual row at most");
  constexpr int kH = kW - 1;
  for (int j = 0; j < kC; ++j) {
    const int t = a + j;
    if (t < 0) continue;
    if (t >= q.total) break;
    c.advance(q, t);
    float o = 0.f;
    if (c.ok) {
      float acc = bias;
      for (int k = 0; k < kH; ++k) {
        const int pos = t - kH + k;
        if (pos >= c.st) acc = fmaf(w[k], to_float(xrow[pos]), acc);
      }
      acc = fmaf(w[kH], to_float(xrow[t]), acc);
      o = silu ? silu_f(acc) : acc;
    }
    if constexpr (sizeof...(Res) == 1) o += (to_float(rrow[t]), ...);
    orow[t] = from_float<T>(o);
  }
}

template <typename T, int kW, int kV, bool kSilu, bool kRes>
__global__ void __launch_bounds__(kThreads, 6)
    varlen_cf_body_kernel(const VarlenParams p, const int spans_per_row) {
  constexpr int kC = 16 / static_cast<int>(sizeof(T));
  constexpr int kH = kW - 1;
  static_assert(kH < kC, "the window fits in the previous vector");
  constexpr int kSpan = 32 * kV * kC;

  __shared__ int sq[kSmemQ];
  __shared__ unsigned char sok[kSmemQ];
  const int lane = threadIdx.x & 31;
  const int span = static_cast<int>(blockIdx.x) * kWarps + (threadIdx.x >> 5);  // of row d = blockIdx.y
  const bool active = span < spans_per_row;  // a whole warp
  const int64_t d = blockIdx.y;
  // vectors at 16-byte addresses: a row that starts `shift` elements past one begins with a partial vector
  const int shift = static_cast<int>((d * p.x_ds) % kC);
  const int span0 = span * kSpan - shift;
  const int T_ = static_cast<int>(p.total);
  const T* __restrict__ xrow = static_cast<const T*>(p.x) + d * p.x_ds;
  T* __restrict__ orow = static_cast<T*>(p.out) + d * p.o_ds;
  // the residual's row: unit token stride, its vectors at x's (eligible_typed)
  const T* __restrict__ rrow = kRes ? static_cast<const T*>(p.res) + d * p.r_ds : nullptr;

  // every load of the span first, then the request table (its loads overlap these)
  uint4 raw[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int a = span0 + (v * 32 + lane) * kC;
    if (active && a >= 0 && a + kC <= T_) raw[v] = ld_global_16(xrow + a);
  }
  for (int i = threadIdx.x; i <= p.batch; i += kThreads) {
    const int v = p.qsl[i];
    sq[i] = v < 0 ? 0 : (v > T_ ? T_ : v);
    if (i < p.batch) {
      const int64_t c = p.ci.idx == nullptr ? i : static_cast<int64_t>(p.ci.idx[i * p.ci.ci_rs]);
      sok[i] = c != p.pad_slot_id && c >= 0 && c < p.lines;
    }
  }
  __syncthreads();
  const Requests rq{sq, sok, T_, p.batch};
  if (!active) return;
  // the kH tokens before the span (lane 0's first halo)
  float prev_last[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    const int pos = span0 - kH + j;
    prev_last[j] = lane == 0 && pos >= 0 && pos < T_ ? to_float(xrow[pos]) : 0.f;
  }
  float w[1][kW], bias[1];
  load_weights<VarlenParams, 1, kW>(p, d, w, bias);
  Cursor cur;
  cur.find(rq, span0 + lane * kC);

#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int a = span0 + (v * 32 + lane) * kC;
    float xv[kC];
    const bool whole = a >= 0 && a + kC <= T_;
    if (whole) {
      Vec16<T>::load(raw[v], xv);
    } else {
#pragma unroll
      for (int j = 0; j < kC; ++j) xv[j] = a + j >= 0 && a + j < T_ ? to_float(xrow[a + j]) : 0.f;
    }
    // halo: the previous lane's last kH tokens (lane 0: lane 31's of the previous vector)
    float halo[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      const float up = __shfl_up_sync(kFull, xv[kC - kH + j], 1);
      const float wrap = __shfl_sync(kFull, xv[kC - kH + j], 31);
      halo[j] = lane == 0 ? prev_last[j] : up;
      prev_last[j] = wrap;
    }
    if (a >= T_) continue;
    uint4 rraw = make_uint4(0u, 0u, 0u, 0u);
    if constexpr (kRes) {
      if (whole) rraw = ld_global_16(rrow + a);
    }
    cur.advance(rq, a);

    // The convolution of the vector with the halo taps before the current request's start read as 0
    // (m0 < 0: the request started -m0 tokens before a; only the halo can lie before it); tokens of
    // no request or of a skipped one are 0. A request that starts inside the vector (at jb): its
    // tokens again with every tap before jb read as 0; two that start inside it: out of line.
    const int m0 = cur.st - a;
    float xm[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) xm[j] = j - kH >= m0 ? halo[j] : 0.f;
    float o[kC];
    conv_vector<kC, kW, kSilu>(w[0], bias[0], xm, xv, o);
    bool ok = cur.ok;
    if (cur.nb < a + kC) {
      Cursor c2 = cur;
      c2.next(rq);
      if (c2.nb < a + kC) {
        if constexpr (kRes) {
          many_starts<T, kW, kC, T>(rq, cur, a, w[0], bias[0], kSilu, xrow, orow, rrow);
        } else {
          many_starts<T, kW, kC>(rq, cur, a, w[0], bias[0], kSilu, xrow, orow);
        }
        continue;
      }
      const int jb = c2.st - a;  // 1 .. kC - 1
      if (!cur.ok) {
#pragma unroll
        for (int j = 0; j < kC; ++j) o[j] = 0.f;
      }
      float zero[kH], xb[kC], ob[kC];
#pragma unroll
      for (int j = 0; j < kH; ++j) zero[j] = 0.f;
#pragma unroll
      for (int j = 0; j < kC; ++j) xb[j] = j >= jb ? xv[j] : 0.f;
      conv_vector<kC, kW, kSilu>(w[0], bias[0], zero, xb, ob);
#pragma unroll
      for (int j = 0; j < kC; ++j)
        if (j >= jb) o[j] = c2.ok ? ob[j] : 0.f;
      ok = true;  // o holds both requests' tokens now
    }
    if constexpr (kRes) {  // 0 for tokens of no request or a skipped one, plus the residual
      float r[kC];
      if (whole) {
        Vec16<T>::load(rraw, r);
      } else {
#pragma unroll
        for (int j = 0; j < kC; ++j) r[j] = a + j >= 0 && a + j < T_ ? to_float(rrow[a + j]) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < kC; ++j) o[j] = (ok ? o[j] : 0.f) + r[j];
      ok = true;
    }
    if (whole) {
      const uint4 packed = Vec16<T>::store(o);
      st_global_16(orow + a, ok ? packed : make_uint4(0u, 0u, 0u, 0u));
    } else {
#pragma unroll
      for (int j = 0; j < kC; ++j)
        if (a + j >= 0 && a + j < T_) orow[a + j] = from_float<T>(ok ? o[j] : 0.f);
    }
  }
}

// One thread per (request, channel): the request's first hr outputs from its initial state (when it
// has one) and its final state, the last hr inputs of cat(initial state, the request's tokens).
template <typename T, int kW>
__global__ void __launch_bounds__(kThreads) varlen_cf_heads_kernel(const VarlenParams p) {
  constexpr int kH = kW - 1;
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (d >= p.dim) return;
  const int hr = p.width - 1;  // the real window: slots kH - hr .. kH - 1 (the others have zero taps)
  const T* __restrict__ xrow = static_cast<const T*>(p.x) + d * p.x_ds;
  T* __restrict__ orow = static_cast<T*>(p.out) + d * p.o_ds;
  const T* __restrict__ rrow = p.res != nullptr ? static_cast<const T*>(p.res) + d * p.r_ds : nullptr;
  for (int r = blockIdx.y; r < p.batch; r += gridDim.y) {
    const int64_t st = clamp64(p.qsl[r], 0, p.total), en = clamp64(p.qsl[r + 1], 0, p.total);
    if (en <= st) continue;  // an empty request leaves its line as it was
    int64_t c_in, c_out;
    if (!request_lines(p.ci, r, p.pad_slot_id, p.lines, c_in, c_out)) continue;
    const bool init = p.has_init != nullptr && p.has_init[r] != 0;
    const T* cin = static_cast<const T*>(p.states) + c_in * p.st_bs + d * p.st_cs;
    float win[kH];
#pragma unroll
    for (int k = 0; k < kH; ++k) {
      const int e = hr - (kH - k);
      win[k] = init && e >= 0 ? to_float(cin[e * p.st_ls]) : 0.f;
    }
    const int64_t head_end = st + hr < en ? st + hr : en;
    if (init) {
      float w[1][kW], bias[1];
      load_weights<VarlenParams, 1, kW>(p, d, w, bias);
      float win2[kH];
#pragma unroll
      for (int k = 0; k < kH; ++k) win2[k] = win[k];
      for (int64_t t = st; t < head_end; ++t) {
        const float xi = to_float(xrow[t]);
        float acc = bias[0];
#pragma unroll
        for (int k = 0; k < kH; ++k) acc = fmaf(w[0][k], win2[k], acc);
        acc = fmaf(w[0][kH], xi, acc);
        float o = p.silu ? silu_f(acc) : acc;
        if (rrow != nullptr) o += to_float(rrow[t]);
        orow[t] = from_float<T>(o);
#pragma unroll
        for (int k = 0; k + 1 < kH; ++k) win2[k] = win2[k + 1];
        win2[kH - 1] = xi;
      }
    }
    T* cout = static_cast<T*>(p.states) + c_out * p.st_bs + d * p.st_cs;
    if (en - st >= hr) {
      for (int e = 0; e < hr; ++e) cout[e * p.st_ls] = xrow[en - hr + e];
    } else {  // fewer tokens than the window: the state's tail, then the tokens
      const int n = static_cast<int>(en - st);
#pragma unroll
      for (int k = 0; k < kH; ++k) {
        const int e = k - (kH - hr);  // entry e of the final state: slot k of cat(win, tokens) shifted by n
        if (e < 0) continue;
        const int src = k + n;  // index into cat(win, x[st:en]) of length kH + n
        const float v = src < kH ? win[src] : to_float(xrow[st + (src - kH)]);
        cout[e * p.st_ls] = from_float<T>(v);
      }
    }
  }
}

// Rows at 16-byte multiples, or x and out rows of one pitch (then each row's first partial vector is
// the same for both: `shift` in the kernel).
template <typename T>
bool eligible_typed(const VarlenParams& p) {
  const bool rows = (vec_aligned<T>(p.x, p.x_ds) && vec_aligned<T>(p.out, p.o_ds)) || p.x_ds == p.o_ds;
  // the residual: its vectors where x's are (row pitches equal modulo a vector)
  constexpr int64_t kC = 16 / static_cast<int64_t>(sizeof(T));
  const bool res_ok = p.res == nullptr || (p.r_ts == 1 && aligned_to(p.res, 16) && (p.r_ds - p.x_ds) % kC == 0);
  return p.x_ts == 1 && p.o_ts == 1 && aligned_to(p.x, 16) && aligned_to(p.out, 16) && rows && res_ok;
}

}  // namespace

namespace varlen_cf_fast {
bool eligible(const VarlenParams& p) {
  if (p.width > 4 || p.st_dtype != p.x_dtype || p.ci.last_idx != nullptr || p.total >= (int64_t{1} << 30) ||
      p.batch + 1 > kSmemQ || p.dim > 65535)
    return false;
  return dispatch_dtype(p.x_dtype, [&](auto tag) { return eligible_typed<typename decltype(tag)::type>(p); });
}

void launch(const VarlenParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<4>{}, [&](auto tag, auto width) {
    using T = typename decltype(tag)::type;
    constexpr int kW = decltype(width)::value;
    constexpr int kC = 16 / static_cast<int>(sizeof(T));
    auto body = [&](auto vecs) {
      constexpr int kVecs = decltype(vecs)::value;
      constexpr int64_t kSpan = 32 * kVecs * kC;
      const int spans = static_cast<int>((p.total + kC - 1 + kSpan - 1) / kSpan);  // a row's first vector may be partial
      const dim3 grid(static_cast<unsigned>((spans + kWarps - 1) / kWarps), static_cast<unsigned>(p.dim));
      dispatch_flag(p.silu, [&](auto silu) {
        dispatch_flag(p.res != nullptr, [&](auto res) {
          varlen_cf_body_kernel<T, kW, kVecs, decltype(silu)::value, decltype(res)::value>
              <<<grid, kThreads, 0, stream>>>(p, spans);
        });
      });
    };
    body(std::integral_constant<int, 4>{});
    CC1D_CUDA_LAUNCH_CHECK();
    if (p.batch > 0) {
      const dim3 hgrid(static_cast<unsigned>((p.dim + kThreads - 1) / kThreads),
                       static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
      varlen_cf_heads_kernel<T, kW><<<hgrid, kThreads, 0, stream>>>(p);
      CC1D_CUDA_LAUNCH_CHECK();
    }
  });
}
}  // namespace varlen_cf_fast

}  // namespace causal_conv1d_cuda
