// The channel-first varlen prefill fast path (kernel path varlen_cf_fast; semantics:
// docs/serving.md): x (dim, total) with unit token stride. A warp owns a span of one channel's row,
// 32 lanes x 4 vectors of 16 bytes (8 tokens for 16-bit types, 4 for fp32), interleaved so that each
// load is 512 contiguous bytes; the W-1 tokens before a vector come from the neighbouring lane by a
// shuffle. A vector that lies inside one request, at least W-1 tokens after its start, is computed
// and stored 16 bytes at a time; a vector that holds a request boundary, the row's tail, or tokens of
// no / a skipped request, token by token (the same ownership rule as varlen_walk.cuh: the thread
// holding a request's first token reads its initial state, computes its first W-1 outputs, spilling
// into the next vector when needed, and writes its final state).
//
// Eligible: x and out channel-first with 16-byte aligned rows, width 2-4, the cache in x's dtype, no
// prefix caching (that runs the general path).
#include "launch_check.cuh"

#include "dispatch.cuh"
#include "varlen_device.cuh"

namespace causal_conv1d_cuda {
namespace {

using namespace serving;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kV = 4;           // vectors per lane
constexpr int kSmemQ = 2048;    // query_start_loc entries kept in shared memory (else read from global)
constexpr unsigned kFull = 0xffffffffu;

struct Table {
  const int32_t* g;
  const int* sm;  // null: read g
  int64_t total;
  __device__ __forceinline__ int64_t operator()(int i) const {
    return sm != nullptr ? sm[i] : clamp64(g[i], 0, total);
  }
};

// a[i] for a run-time i, without moving `a` to local memory
template <int N>
__device__ __forceinline__ float pick(const float (&a)[N], int i) {
  float v = 0.f;
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j == i) v = a[j];
  return v;
}

// The last request s with q(s) <= t (-1 when t is before the first); q non-decreasing.
__device__ __forceinline__ int find_request(const Table& q, int batch, int64_t t) {
  if (q(0) > t) return -1;
  int lo = 0, hi = batch + 1;  // q(lo) <= t, answer in [lo, hi)
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (q(mid) <= t) lo = mid; else hi = mid;
  }
  return lo;
}

template <int kW>
struct Taps {
  float w[kW];
  float bias;
};

// One vector's kC tokens one at a time (x re-read from global memory: it is in L1).
template <typename T, int kW, int kC>
__device__ __noinline__ void slow_vector(const VarlenParams& p, const Table q, const int s, const int64_t a,
                                         const int64_t d, const Taps<kW> tp, const T* __restrict__ xrow,
                                         T* __restrict__ orow) {
  constexpr int kH = kW - 1;
  const int B = p.batch;
  const int64_t T_ = p.total;
  const int hr = p.width - 1;
    int sj = s;
    for (int j = 0; j < kC; ++j) {
      const int64_t t = a + j;
      if (t < 0) continue;
      if (t >= T_) break;
      if (sj < 0) {
        if (q(0) > t) {
          orow[t] = from_float<T>(0.f);
          continue;
        }
        sj = 0;
      }
      while (sj < B && q(sj + 1) <= t) ++sj;
      if (sj >= B) {
        orow[t] = from_float<T>(0.f);
        continue;
      }
      const int64_t st = q(sj), en = q(sj + 1);
      int64_t c_in, c_out;
      if (!request_lines(p.ci, sj, p.pad_slot_id, p.lines, c_in, c_out)) {
        orow[t] = from_float<T>(0.f);
        continue;
      }
      if (t < st + hr && st < a) continue;  // one of the request's first outputs: its owner's
      if (t > st) {
        // an output that reads only x (t >= st + hr), or one of the owner's after the request's
        // first token (done below together with that one)
        if (t < st + hr) continue;
        float acc = tp.bias;
#pragma unroll
        for (int k = 0; k < kH; ++k) {
          const int64_t pos = t - kH + k;
          float v = 0.f;
          if (pos >= st) v = to_float(xrow[pos]);
          acc = fmaf(tp.w[k], v, acc);
        }
        acc = fmaf(tp.w[kH], to_float(xrow[t]), acc);
        orow[t] = from_float<T>(p.silu ? silu_f(acc) : acc);
        continue;
      }
      // t == st: this thread owns the request: its initial state, first hr outputs, final state
      const bool init = p.has_init != nullptr && p.has_init[sj] != 0;
      const T* cin = static_cast<const T*>(p.states) + c_in * p.st_bs + d * p.st_cs;
      float win[kH];
#pragma unroll
      for (int k = 0; k < kH; ++k) {
        const int e = hr - (kH - k);
        win[k] = init && e >= 0 ? to_float(cin[e * p.st_ls]) : 0.f;
      }
      const int64_t head_end = st + hr < en ? st + hr : en;
      for (int64_t tt = st; tt < head_end; ++tt) {
        const float xi = to_float(xrow[tt]);
        float acc = tp.bias;
#pragma unroll
        for (int k = 0; k < kH; ++k) acc = fmaf(tp.w[k], win[k], acc);
        acc = fmaf(tp.w[kH], xi, acc);
        orow[tt] = from_float<T>(p.silu ? silu_f(acc) : acc);
#pragma unroll
        for (int k = 0; k + 1 < kH; ++k) win[k] = win[k + 1];
        win[kH - 1] = xi;
      }
      // the final state: the last hr inputs of cat(initial state, the request); win now ends at head_end
      T* cout = static_cast<T*>(p.states) + c_out * p.st_bs + d * p.st_cs;
      if (head_end == en) {
#pragma unroll
        for (int k = 0; k < kH; ++k) {
          const int e = k - (kH - hr);
          if (e >= 0) cout[e * p.st_ls] = from_float<T>(win[k]);
        }
      } else {
        for (int e = 0; e < hr; ++e) cout[e * p.st_ls] = xrow[en - hr + e];
      }
    }
}

template <typename T, int kW>
__global__ void __launch_bounds__(kThreads, 1) varlen_cf_fast_kernel(const VarlenParams p, const int64_t spans_per_row) {
  constexpr int kC = 16 / static_cast<int>(sizeof(T));
  constexpr int kH = kW - 1;
  static_assert(kH < kC, "the window fits in the previous vector");
  constexpr int64_t kSpan = 32 * kV * kC;
  __shared__ int sq[kSmemQ];
  const int B = p.batch;
  const bool in_smem = B + 1 <= kSmemQ;
  if (in_smem) {
    for (int i = threadIdx.x; i <= B; i += kThreads) sq[i] = static_cast<int>(clamp64(p.qsl[i], 0, p.total));
  }
  __syncthreads();
  const Table q{p.qsl, in_smem ? sq : nullptr, p.total};

  const int lane = threadIdx.x & 31;
  const int64_t wid = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (wid >= spans_per_row * p.dim) return;  // a whole warp
  const int64_t d = wid / spans_per_row;
  // vectors at 16-byte addresses: a row that starts `shift` elements past one begins with a partial vector
  const int64_t shift = (d * p.x_ds) % kC;
  const int64_t span0 = (wid % spans_per_row) * kSpan - shift;
  const int64_t T_ = p.total;
  const T* __restrict__ xrow = static_cast<const T*>(p.x) + d * p.x_ds;
  T* __restrict__ orow = static_cast<T*>(p.out) + d * p.o_ds;
  float w[1][kW], bias[1];
  load_weights<VarlenParams, 1, kW>(p, d, w, bias);

  // every load of the span first
  uint4 raw[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int64_t a = span0 + (v * 32 + lane) * kC;
    if (a >= 0 && a + kC <= T_) raw[v] = ld_global_16(xrow + a);
  }
  // the kH tokens before the span (lane 0's first halo)
  float before[kH];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    const int64_t pos = span0 - kH + j;
    before[j] = lane == 0 && pos >= 0 ? to_float(xrow[pos]) : 0.f;
  }

  int s = -2;  // the request of the current vector's first token (-2: not searched yet)
  float prev_last[kH];  // lane 31's last kH tokens of the previous vector
#pragma unroll
  for (int j = 0; j < kH; ++j) prev_last[j] = before[j];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int64_t a = span0 + (v * 32 + lane) * kC;
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

    if (s == -2) s = find_request(q, B, a);
    while (s < B && s >= -1 && q(s + 1) <= a) ++s;
    // the vector's request, when the whole vector is inside it and past its first hr tokens
    bool fast = false, zero = false;
    if (s < 0 || s >= B) {
      zero = s >= B || q(0) >= a + kC;  // after the last request, or before the first one
    } else {
      const int64_t st = q(s), en = q(s + 1);
      int64_t c_in, c_out;
      const bool valid = request_lines(p.ci, s, p.pad_slot_id, p.lines, c_in, c_out);
      if (en >= a + kC) {
        if (!valid) zero = true;
        else fast = st <= a - kH;  // kH, not hr: a padded tap never reaches another request
      }
    }
    if (!whole) fast = zero = false;
    if (fast) {
      float o[kC];
#pragma unroll
      for (int j = 0; j < kC; ++j) {
        float acc = bias[0];
#pragma unroll
        for (int k = 0; k < kH; ++k) {
          const int src = j - kH + k;  // < 0: the halo
          acc = fmaf(w[0][k], src >= 0 ? xv[src] : halo[kH + src], acc);
        }
        acc = fmaf(w[0][kH], xv[j], acc);
        o[j] = p.silu ? silu_f(acc) : acc;
      }
      st_global_16(orow + a, Vec16<T>::store(o));
      continue;
    }
    if (zero) {
      st_global_16(orow + a, make_uint4(0u, 0u, 0u, 0u));
      continue;
    }

    // token by token: request boundaries, skipped requests, the row's tail (out of line: inlined four
    // times over, it overflowed the instruction cache and slowed every vector)
    Taps<kW> tp;
#pragma unroll
    for (int k = 0; k < kW; ++k) tp.w[k] = w[0][k];
    tp.bias = bias[0];
    slow_vector<T, kW, kC>(p, q, s, a, d, tp, xrow, orow);
  }
}

template <typename T>
bool vec_aligned(const void* ptr, int64_t stride) {
  return aligned_to(ptr, 16) && (stride * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}

// Rows at 16-byte multiples, or x and out rows of one pitch (then each row's first partial vector is
// the same for both: `shift` in the kernel).
template <typename T>
bool eligible_typed(const VarlenParams& p) {
  const bool rows = (vec_aligned<T>(p.x, p.x_ds) && vec_aligned<T>(p.out, p.o_ds)) || p.x_ds == p.o_ds;
  return p.x_ts == 1 && p.o_ts == 1 && aligned_to(p.x, 16) && aligned_to(p.out, 16) && rows;
}

}  // namespace

namespace varlen_cf_fast {
bool eligible(const VarlenParams& p) {
  if (p.width > 4 || p.st_dtype != p.x_dtype || p.ci.last_idx != nullptr) return false;
  switch (p.x_dtype) {
    case kFloat16: return eligible_typed<__half>(p);
    case kBFloat16: return eligible_typed<__nv_bfloat16>(p);
    default: return eligible_typed<float>(p);
  }
}

void launch(const VarlenParams& p, cudaStream_t stream) {
  dispatch_dtype_width(p.x_dtype, p.width, Widths<4>{}, [&](auto tag, auto width) {
    using T = typename decltype(tag)::type;
    constexpr int kC = 16 / static_cast<int>(sizeof(T));
    constexpr int64_t kSpan = 32 * kV * kC;
    const int64_t spans = (p.total + kC - 1 + kSpan - 1) / kSpan;  // a row's first vector may be partial
    const int64_t warps = spans * p.dim;
    const dim3 grid(static_cast<unsigned>((warps + kWarps - 1) / kWarps));
    varlen_cf_fast_kernel<T, decltype(width)::value><<<grid, kThreads, 0, stream>>>(p, spans);
    CC1D_CUDA_LAUNCH_CHECK();
  });
}
}  // namespace varlen_cf_fast

}  // namespace causal_conv1d_cuda
