// The general decode / speculative update (kernel path spec_update_general; semantics:
// docs/serving.md): every case the op's checks accept — any strides, widths 2-8, a state cache of
// another dtype than x (x rounded to it first, as vLLM casts), a ragged batch (query_start_loc),
// tree drafts (retrieve_parent_token), prefix caching. One thread per (request, channel): it reads the
// history window, computes the request's outputs, then writes the new state (every read of the
// cache line happens before the first write, so a line read and written in place is safe).
#include "launch_check.cuh"

#include "dispatch.cuh"
#include "varlen_device.cuh"

namespace causal_conv1d_cuda {
namespace {

using namespace serving;

constexpr int kThreads = 128;

template <typename T, typename St, int kW>
__global__ void __launch_bounds__(kThreads) spec_general_kernel(const SpecParams p) {
  constexpr int kH = kW - 1;
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (d >= p.dim) return;
  const int hr = p.width - 1;
  float w[1][kW], bias[1];
  load_weights<SpecParams, 1, kW>(p, d, w, bias);
  for (int64_t b = blockIdx.y; b < p.batch; b += gridDim.y) {
    int64_t n = p.seqlen;
    const T* xr;
    T* outr;
    if (p.qsl != nullptr) {
      const int64_t t0 = clamp64(p.qsl[b], 0, p.total), t1 = clamp64(p.qsl[b + 1], 0, p.total);
      n = t1 > t0 ? t1 - t0 : 0;
      xr = static_cast<const T*>(p.x) + t0 * p.x_ls + d * p.x_cs;
      outr = static_cast<T*>(p.out) + t0 * p.o_ls + d * p.o_cs;
      // tokens of no request (before the first, after the last): 0, by the first / last request's threads
      T* o = static_cast<T*>(p.out) + d * p.o_cs;
      if (b == 0)
        for (int64_t t = 0; t < t0; ++t) o[t * p.o_ls] = from_float<T>(0.f);
      if (b == p.batch - 1)
        for (int64_t t = t1 > t0 ? t1 : t0; t < p.total; ++t) o[t * p.o_ls] = from_float<T>(0.f);
    } else {
      xr = static_cast<const T*>(p.x) + b * p.x_bs + d * p.x_cs;
      outr = static_cast<T*>(p.out) + b * p.o_bs + d * p.o_cs;
    }
    if (n == 0) continue;
    if (p.qsl != nullptr && p.num_accepted != nullptr && n > p.seqlen) {  // a speculative step: at most max_query_len
      for (int64_t i = p.seqlen; i < n; ++i) outr[i * p.o_ls] = from_float<T>(0.f);
      n = p.seqlen;
    }
    int64_t c_in = 0, c_out = 0;
    if (!request_lines(p.ci, b, p.pad_slot_id, p.lines, c_in, c_out)) {  // skipped: output 0
      for (int64_t i = 0; i < n; ++i) outr[i * p.o_ls] = from_float<T>(0.f);
      continue;
    }
    const int64_t S = p.state_len;
    // the window [off, off + hr): entries a-1 .. with speculative decoding, else 0 ..
    const int64_t off = p.num_accepted != nullptr ? clamp64(static_cast<int64_t>(p.num_accepted[b]) - 1, 0, S - hr) : 0;
    const St* cin = static_cast<const St*>(p.state) + c_in * p.st_bs + d * p.st_cs;
    float win[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) win[j] = j >= kH - hr ? to_float(cin[(off + j - (kH - hr)) * p.st_ls]) : 0.f;
    float first[kH];  // the window as read: tree drafts walk back into it
#pragma unroll
    for (int j = 0; j < kH; ++j) first[j] = win[j];
    for (int64_t i = 0; i < n; ++i) {
      const float xi = round_to<St>(to_float(xr[i * p.x_ls]));
      float acc = bias[0];
      if (p.parent == nullptr) {
#pragma unroll
        for (int k = 0; k < kH; ++k) acc = fmaf(w[0][k], win[k], acc);
      } else {  // tap kH - 1 - k reads the k-th ancestor of token i: a draft token or the window
        int64_t cur = i;
#pragma unroll
        for (int k = 0; k < kH; ++k) {
          float v = 0.f;
          if (cur > 0) {
            int64_t par = p.parent[b * p.pa_bs + cur * p.pa_ts];
            cur = par < 0 ? 0 : (par >= cur ? cur - 1 : par);
            v = round_to<St>(to_float(xr[cur * p.x_ls]));
          } else {
            cur -= 1;  // -1: the newest window entry, -2 the one before, ...
#pragma unroll
            for (int j = 0; j < kH; ++j)
              if (j == kH + cur) v = first[j];
          }
          acc = fmaf(w[0][kH - 1 - k], v, acc);
        }
      }
      acc = fmaf(w[0][kH], xi, acc);
      outr[i * p.o_ls] = from_float<T>(round_to<St>(p.silu ? silu_f(acc) : acc));
#pragma unroll
      for (int j = 0; j + 1 < kH; ++j) win[j] = win[j + 1];
      win[kH - 1] = xi;
    }
    St* cout = static_cast<St*>(p.state) + c_out * p.st_bs + d * p.st_cs;
    if (p.num_accepted != nullptr) {  // cat(window[1:], x): the first hr - 1 entries, then the n tokens
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int e = j - (kH - hr) - 1;
        if (e >= 0) cout[e * p.st_ls] = from_float<St>(first[j]);
      }
      for (int64_t i = 0; i < n && hr - 1 + i < S; ++i) {
        cout[(hr - 1 + i) * p.st_ls] = from_float<St>(round_to<St>(to_float(xr[i * p.x_ls])));
      }
    } else {  // the last hr inputs
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        const int e = j - (kH - hr);
        if (e >= 0) cout[e * p.st_ls] = from_float<St>(win[j]);
      }
    }
  }
}

struct SpecLaunch {
  template <typename T, int kW>
  static void run(const SpecParams& p, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((p.dim + kThreads - 1) / kThreads),
                    static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
    dispatch_dtype(p.st_dtype, [&](auto st) {
      spec_general_kernel<T, typename decltype(st)::type, kW><<<grid, kThreads, 0, stream>>>(p);
    });
    CC1D_CUDA_LAUNCH_CHECK();
  }
};

}  // namespace

void spec_update_general::launch(const SpecParams& p, cudaStream_t stream) { launch_general<SpecLaunch>(p, stream); }

}  // namespace causal_conv1d_cuda
