// Fast channel-last forward: out[b, l, d] = act(bias[d] + sum_k w[d, k] * x[b, l - (width-1) + k, d]).
//
// Why (docs/PERF_NOTES.md, "fwd cl fast path"): the general channel-last kernel (fwd.cu) holds 4
// channels per thread in 118 registers, so only 25% of the SM's threads are resident and too few
// bytes are in flight (bf16 B4 D4096 L4096: 116 us, 54% of copy).
//
// Work split: x is (B, L, D) in memory with unit channel stride and token pitch x_ls. A thread owns
// one 4-byte word of a token (kC = 2 channels of a 16-bit type, 1 channel of fp32) and walks a chunk
// of `chunk` consecutive tokens of that word. Consecutive threads own consecutive words, so each warp
// load / store instruction moves 128 contiguous bytes of one token (one whole cache line). The thread
// index is flattened as ((b * nchunks + chunk index) * nwords + word): no shuffles, no shared memory,
// no barriers, and a warp that straddles two chunks is still correct.
// The width-1 tokens before a chunk (the halo) come from x (the previous chunk's last tokens, read
// by another thread at about the same time: an L2 hit), from initial_states at the row start, or
// zero; after that the thread keeps a sliding window of the last width-1 tokens in fp32 registers.
// Pipeline: tokens are loaded in groups of kG = 8 into a ring of three register buffers; group s+2's
// loads are issued before group s is computed, so a thread has up to 64 bytes of loads outstanding
// while it computes (the ring is unrolled three times: nothing is copied between buffers).
// The drain: the grid's last (batch, chunk) pairs are done in halves by threads that
// live half as long (kTailEighths, kTailDiv; geometry()).
// Packed sequences (cu_seqlens, from packed_fwd without states; batch 1): a thread finds where its
// chunk lies among the sequences with one binary search, then tracks the next boundary. A group of
// tokens with no boundary inside a sequence runs the dense code; a group with one (or with tokens in
// no sequence) checks each token: at a sequence start the window is zeroed, a token in no sequence
// gets 0.
// The fused residual (kRes, a template parameter: the kernels without one are unchanged): a token's
// residual word is read (__ldg: ptxas schedules it ahead as far as the register budget allows; a
// buffer of a group's words spilled at widths 3-4) and added after the activation.
// Eligible: channel-last, no seq_idx, width 2..4; for 16-bit types even dim, even token and batch
// pitches and 4-byte aligned x / out (and residual). Everything else runs the general kernel (dispatch.cu).
#include "launch_check.cuh"

#include <algorithm>

#include "dispatch.cuh"
#include "vec16.cuh"

namespace causal_conv1d_cuda {
namespace {

// Tokens per load group. A ring of three group buffers: while group s is computed, groups s+1 and
// s+2 are in flight (up to 2 * 4 * kG bytes per thread). Build-time knob for tuning on the device:
// NVCC_APPEND_FLAGS=-DCAUSAL_CONV1D_FWD_CL_FAST_GROUP=16 (8: <= 64 registers, 8 blocks of 128 threads
// per SM; 16: <= 96 registers, 5 blocks, twice the bytes per thread; both without spills on sm_90).
#ifndef CAUSAL_CONV1D_FWD_CL_FAST_GROUP
#define CAUSAL_CONV1D_FWD_CL_FAST_GROUP 8
#endif
// Longest chunk (tokens per thread); the launcher halves it while the grid has fewer than kMinWaves
// waves of resident threads. Knob: -DCAUSAL_CONV1D_FWD_CL_FAST_CHUNK=64 (a power of two >= the group).
#ifndef CAUSAL_CONV1D_FWD_CL_FAST_CHUNK
#define CAUSAL_CONV1D_FWD_CL_FAST_CHUNK 128
#endif
constexpr int kG = CAUSAL_CONV1D_FWD_CL_FAST_GROUP;
static_assert(kG == 8 || kG == 16, "CAUSAL_CONV1D_FWD_CL_FAST_GROUP must be 8 or 16");
constexpr int kMaxChunk = CAUSAL_CONV1D_FWD_CL_FAST_CHUNK;
static_assert(kMaxChunk >= kG && (kMaxChunk & (kMaxChunk - 1)) == 0, "chunk: a power of two >= the group");
constexpr int kThreads = 128;
// Resident blocks per SM the register budget must allow (sm_90, 64K registers per SM). With a residual
// (kRes) a thread also holds the residual words ptxas loads ahead: 6 blocks (<= 80 registers; at 64
// the 16-bit kernels spilled 32-56 bytes, at 72 the width-4 ones 32; none at 80).
constexpr int kMinBlocks = kG == 8 ? 8 : 5;
constexpr int kMinBlocksRes = kG == 8 ? 6 : 4;
constexpr int64_t kMinWaves = 3;
// The drain (geometry()): the grid's last (batch, chunk) pairs, a wave of resident
// threads' worth, are done in kTailDiv pieces of chunk / kTailDiv tokens by threads that live that
// much shorter, so the SMs empty at a finer grain at the end of the grid. Same-run A/B on the H200
// (µs in a CUDA graph, none / half a wave / a wave, in halves): bf16 B4 D4096 L4096 75.5,
// 74.8 / 73.6, 73.5 / 73.5, 73.3; Mamba-2 slice 97.5, 96.5 / 95.2, 95.7 / 94.8, 95.3; fp32 146.2,
// 145.0 / 143.8, 144.9 / 143.4, 143.3 (docs/PERF_NOTES.md).
constexpr int64_t kTailEighths = 8;
constexpr int64_t kTailDiv = 2;

// One 4-byte word of a token: kC channels <-> floats.
template <typename T>
struct Word;
template <>
struct Word<float> {
  static constexpr int kC = 1;
  __device__ __forceinline__ static void unpack(uint32_t w, float (&f)[1]) { f[0] = __uint_as_float(w); }
  __device__ __forceinline__ static uint32_t pack(const float (&f)[1]) { return __float_as_uint(f[0]); }
};
template <>
struct Word<__nv_bfloat16> {
  static constexpr int kC = 2;
  __device__ __forceinline__ static void unpack(uint32_t w, float (&f)[2]) { unpack2_bf16(w, f[0], f[1]); }
  __device__ __forceinline__ static uint32_t pack(const float (&f)[2]) { return pack2(f[0], f[1], __nv_bfloat16{}); }
};
template <>
struct Word<__half> {
  static constexpr int kC = 2;
  __device__ __forceinline__ static void unpack(uint32_t w, float (&f)[2]) { unpack2_f16(w, f[0], f[1]); }
  __device__ __forceinline__ static uint32_t pack(const float (&f)[2]) { return pack2(f[0], f[1], __half{}); }
};

// silu(z) = z / (1 + e^-z): FMUL, MUFU.EX2, FADD, MUFU.RCP, FMUL per output. (Folding the -log2(e)
// of the exponent into the weights saves the first FMUL but costs a MOV per output for the constant
// of fma(2^u, -log2 e, -log2 e) at this register budget: no gain in SASS, so not done.)
__device__ __forceinline__ float silu_fast(float z) { return __fdividef(z, 1.f + __expf(-z)); }

// A coherent 4-byte load (ld.global, not ld.global.nc): ptxas may not move it past the output stores
// that follow it in program order (they might alias), so the next group's loads stay ahead of the
// current group's arithmetic. With __ldg (.nc) ptxas sank them below the whole group (loads issued
// only after the stores, one group in flight instead of two).
__device__ __forceinline__ uint32_t ld_word(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.global.u32 %0, [%1];\n" : "=r"(v) : "l"(ptr));
  return v;
}

// buf[i] = word of token i (i < rem) at src + i * stride; tokens past the chunk keep their old value.
__device__ __forceinline__ void load_group(uint32_t (&buf)[kG], const uint32_t* __restrict__ src, int stride,
                                           int rem) {
#pragma unroll
  for (int i = 0; i < kG; ++i) {
    if (i < rem) buf[i] = ld_word(src);
    src += stride;  // one IMAD.WIDE per token
  }
}

// Where a thread's tokens lie among the packed sequences: j = how many of the clamped boundaries
// cu[0..nseq] are <= the current token (0: before the first sequence; nseq + 1: after the last),
// next = boundary j (the first one after the token; INT64_MAX when none is left). The sequences are
// read from the kernel parameters (constant space) each time: two registers of state.
struct SeqCursor {
  int j;
  int64_t next;

  __device__ __forceinline__ static int64_t bound(const ConvParams& p, int i) {
    return i <= p.nseq ? min(max(static_cast<int64_t>(__ldg(p.cu_seqlens + i)), int64_t{0}), p.seqlen) : INT64_MAX;
  }
  __device__ __forceinline__ void init(const ConvParams& p, int64_t t) {
    int lo = 0, hi = p.nseq + 1;  // the first boundary > t: bound(lo - 1) <= t < bound(hi)
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (bound(p, mid) <= t) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    j = lo;
    next = bound(p, j);
  }
  __device__ __forceinline__ int64_t start(const ConvParams& p) const { return j > 0 ? bound(p, j - 1) : INT64_MAX; }
  __device__ __forceinline__ bool inside(const ConvParams& p) const { return j > 0 && j <= p.nseq; }
  // steps to token t (>= the previous one); true when a sequence starts (or ends) at t
  __device__ __forceinline__ bool step_to(const ConvParams& p, int64_t t) {
    if (t < next) return false;
    while (next <= t) next = bound(p, ++j);
    return true;
  }
};

// Outputs of the kG tokens in buf (stored for i < rem) from the sliding window of the kW-1 tokens
// before them; the window ends holding the group's last kW-1 tokens. kSeq (packed sequences; t the
// group's first token): token by token through the cursor, the window zeroed where a sequence
// starts and 0 written for a token in no sequence. kRes: plus the residual words at res, rstride
// apart (a token in no sequence gets its residual).
template <typename T, int kW, bool kSeq, bool kRes>
__device__ __forceinline__ void compute_group(const uint32_t (&buf)[kG], float (&win)[kW - 1][Word<T>::kC],
                                              const float (&w)[kW][Word<T>::kC], const float (&bias)[Word<T>::kC],
                                              bool silu, uint32_t* __restrict__ dst, int stride, int rem,
                                              const uint32_t* __restrict__ res, int rstride, int64_t t = 0,
                                              const ConvParams* p = nullptr, SeqCursor* sc = nullptr) {
  constexpr int kC = Word<T>::kC;
  constexpr int kH = kW - 1;
#pragma unroll
  for (int i = 0; i < kG; ++i) {
    if constexpr (kSeq) {
      if (sc->step_to(*p, t + i)) {
#pragma unroll
        for (int k = 0; k < kH; ++k)
#pragma unroll
          for (int c = 0; c < kC; ++c) win[k][c] = 0.f;
      }
    }
    float xv[kC];
    Word<T>::unpack(buf[i], xv);
    float o[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      float acc = bias[c];
#pragma unroll
      for (int k = 0; k < kH; ++k) acc = fmaf(w[k][c], win[k][c], acc);
      acc = fmaf(w[kH][c], xv[c], acc);
      o[c] = kSeq && !sc->inside(*p) ? 0.f : silu ? silu_fast(acc) : acc;
    }
    if constexpr (kRes) {
      float rv[kC];
      Word<T>::unpack(i < rem ? __ldg(res + i * rstride) : 0u, rv);
#pragma unroll
      for (int c = 0; c < kC; ++c) o[c] += rv[c];
    }
#pragma unroll
    for (int c = 0; c < kC; ++c) {
#pragma unroll
      for (int k = 0; k + 1 < kH; ++k) win[k][c] = win[k + 1][c];
      win[kH - 1][c] = xv[c];
    }
    if (i < rem) *dst = Word<T>::pack(o);
    dst += stride;
  }
}

// Host-computed launch geometry (all in 4-byte words for the strides).
struct Geometry {
  uint32_t nwords;   // words per token row (dim / kC)
  uint32_t nchunks;  // chunks per row (ceil(seqlen / chunk))
  uint32_t total;    // head_total + tail pairs * tail_div * nwords threads
  uint32_t head_total;  // threads of the head: head_pairs * nwords
  uint32_t head_pairs;  // (batch, chunk) pairs [0, head_pairs) at whole chunks; the rest split in tail_div
  int tail_div;
  int chunk;         // tokens per chunk
  int xs, os;        // token pitch of x / out in words
  int rs;            // token pitch of the residual in words (0: none)
};

// Resident blocks per SM the packed-sequence kernels are compiled for (7: <= 72 registers; at 8
// (64) the 16-bit width-4 kernels spill ~60 bytes). Knob: -DCAUSAL_CONV1D_FWD_CL_FAST_SEQ_BLOCKS=8.
#ifndef CAUSAL_CONV1D_FWD_CL_FAST_SEQ_BLOCKS
#define CAUSAL_CONV1D_FWD_CL_FAST_SEQ_BLOCKS 7
#endif
constexpr int kMinBlocksSeq = CAUSAL_CONV1D_FWD_CL_FAST_SEQ_BLOCKS;

constexpr int min_blocks(bool seq, bool res) {
  return seq && res ? (kMinBlocksSeq < kMinBlocksRes ? kMinBlocksSeq : kMinBlocksRes)
         : seq      ? kMinBlocksSeq
         : res      ? kMinBlocksRes
                    : kMinBlocks;
}

// kSeq: packed sequences (p.cu_seqlens); kRes: the fused residual (p.res).
template <typename T, int kW, bool kSeq, bool kRes>
__global__ void __launch_bounds__(kThreads, min_blocks(kSeq, kRes)) fwd_cl_fast_kernel(const ConvParams p, const Geometry g) {
  constexpr int kC = Word<T>::kC;
  constexpr int kH = kW - 1;
  static_assert(kG > kH, "the halo is read from inside the previous chunk");

  const uint32_t gid = blockIdx.x * kThreads + threadIdx.x;
  if (gid >= g.total) return;
  // head or tail thread: the tail's threads do the last (batch, chunk) pairs in tail_div pieces
  const bool tail = gid >= g.head_total;
  const uint32_t gl = tail ? gid - g.head_total : gid;
  const uint32_t wd = gl % g.nwords;
  const uint32_t q = gl / g.nwords;
  const uint32_t r = tail ? g.head_pairs + q / static_cast<uint32_t>(g.tail_div) : q;
  const int sub = tail ? static_cast<int>(q % static_cast<uint32_t>(g.tail_div)) : 0;
  const int clen = tail ? g.chunk / g.tail_div : g.chunk;
  const uint32_t ch = r % g.nchunks;
  const int b = static_cast<int>(r / g.nchunks);
  const int d0 = static_cast<int>(wd) * kC;
  const int64_t t0 = static_cast<int64_t>(ch) * g.chunk + static_cast<int64_t>(sub) * clen;
  const int64_t left = p.seqlen - t0;
  if (left <= 0) return;  // a tail piece past the row
  const int n = left < clen ? static_cast<int>(left) : clen;  // tokens of this chunk, >= 1

  const T* __restrict__ xt = static_cast<const T*>(p.x) + b * p.x_bs + t0 * p.x_ls + d0;
  const uint32_t* __restrict__ xw = reinterpret_cast<const uint32_t*>(xt);
  uint32_t* __restrict__ ow =
      reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) + b * p.out_bs + t0 * p.out_ls + d0);
  const uint32_t* __restrict__ rw = nullptr;
  if constexpr (kRes) {
    rw = reinterpret_cast<const uint32_t*>(static_cast<const T*>(p.res) + b * p.r_bs + t0 * p.r_ls + d0);
  }

  // 1. the first group and the halo: all loads before any use
  uint32_t bufA[kG], bufB[kG], bufC[kG];
#pragma unroll
  for (int i = 0; i < kG; ++i) bufA[i] = bufB[i] = bufC[i] = 0u;  // tokens past the chunk: defined, never stored
  load_group(bufA, xw, g.xs, n);
  load_group(bufB, xw + kG * g.xs, g.xs, n - kG);
  float win[kH][kC];
  if (t0 > 0) {  // t0 >= chunk >= kG > kH: the halo lies inside the row
    uint32_t hw[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) hw[j] = __ldg(xw - (kH - j) * g.xs);
#pragma unroll
    for (int j = 0; j < kH; ++j) Word<T>::unpack(hw[j], win[j]);
  } else if (p.init != nullptr) {  // initial_states[b, d, j] (any strides)
    const T* __restrict__ ir = static_cast<const T*>(p.init) + b * p.i_bs + d0 * p.i_cs;
#pragma unroll
    for (int j = 0; j < kH; ++j)
#pragma unroll
      for (int c = 0; c < kC; ++c) win[j][c] = to_float(ir[c * p.i_cs + j * p.i_ls]);
  } else {
#pragma unroll
    for (int j = 0; j < kH; ++j)
#pragma unroll
      for (int c = 0; c < kC; ++c) win[j][c] = 0.f;
  }
  float w[kW][kC];
  float bias[kC];
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    float wc[kW];
    load_weights_exact<kW>(p, d0 + c, wc);
#pragma unroll
    for (int k = 0; k < kW; ++k) w[k][c] = wc[k];
    bias[c] = p.bias != nullptr ? load_any(p.bias, p.b_dtype, (d0 + c) * p.b_s) : 0.f;
  }
  const bool silu = p.silu;
  // with sequences: where t0 lies (its dependent loads after every load above is issued), and the
  // halo's tokens before t0's sequence read as 0
  SeqCursor sc{};
  if constexpr (kSeq) {
    sc.init(p, t0);
    const int64_t st = sc.start(p);
#pragma unroll
    for (int j = 0; j < kH; ++j)
#pragma unroll
      for (int c = 0; c < kC; ++c) win[j][c] = t0 - kH + j >= st ? win[j][c] : 0.f;
  }

  // final_states[b, d, j] = token L - kH + j (initial_states or zero before the start): exact element
  // copies by the threads of the last chunk, done here so that their loads wait together with the
  // first groups' and nothing of it stays live through the main loop
  if (p.final_out != nullptr && ch == g.nchunks - 1 && left <= clen) {
    T* __restrict__ fr = static_cast<T*>(p.final_out) + b * p.f_bs + d0 * p.f_cs;
    const T* __restrict__ xr = static_cast<const T*>(p.x) + b * p.x_bs + d0;
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      const int64_t pos = p.seqlen - kH + j;
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        T v = from_float<T>(0.f);
        if (pos >= 0) {
          v = xr[pos * p.x_ls + c];
        } else if (p.init != nullptr) {
          v = static_cast<const T*>(p.init)[b * p.i_bs + (d0 + c) * p.i_cs + (kH + pos) * p.i_ls];
        }
        fr[c * p.f_cs + j * p.f_ls] = v;
      }
    }
  }

  // 2. a ring of three buffers: group s+2 is loaded while group s is computed
  // (with sequences: a group inside one sequence with no boundary after its first token is dense)
  auto group = [&](const uint32_t(&buf)[kG], int s) {
    if constexpr (kSeq) {
      const int64_t t = t0 + s;
      if (!(sc.inside(p) && sc.next >= t + kG)) {
        compute_group<T, kW, true, kRes>(buf, win, w, bias, silu, ow + s * g.os, g.os, n - s, rw + s * g.rs, g.rs, t,
                                         &p, &sc);
        return;
      }
    }
    compute_group<T, kW, false, kRes>(buf, win, w, bias, silu, ow + s * g.os, g.os, n - s, rw + s * g.rs, g.rs);
  };
  for (int s = 0; s < n; s += 3 * kG) {
    load_group(bufC, xw + (s + 2 * kG) * g.xs, g.xs, n - s - 2 * kG);
    group(bufA, s);
    if (s + kG >= n) break;
    load_group(bufA, xw + (s + 3 * kG) * g.xs, g.xs, n - s - 3 * kG);
    group(bufB, s + kG);
    if (s + 2 * kG >= n) break;
    load_group(bufB, xw + (s + 4 * kG) * g.xs, g.xs, n - s - 4 * kG);
    group(bufC, s + 2 * kG);
  }
}

// The launch geometry of p into g; false when it does not fit the kernel's 32-bit indices.
bool geometry(const ConvParams& p, Geometry& g) {
  const int64_t kC = p.x_dtype == kFloat32 ? 1 : 2;  // Word<T>::kC
  const int64_t nwords = p.dim / kC;
  const int64_t resident = static_cast<int64_t>(p.num_sms > 0 ? p.num_sms : 1) * kMinBlocks * kThreads;
  auto nthreads = [&](int64_t c) { return p.batch * ((p.seqlen + c - 1) / c) * nwords; };
  int64_t chunk = kMaxChunk;
  while (chunk > kG && nthreads(chunk) < kMinWaves * resident) chunk /= 2;
  const int64_t pairs = p.batch * ((p.seqlen + chunk - 1) / chunk);
  // the drain: pieces of at least a load group
  int64_t div = kTailDiv;
  while (div > 1 && chunk / div < kG) div /= 2;
  const int64_t tail_pairs = div == 1 ? 0 : drain_rows(resident, kTailEighths, div * nwords, pairs);
  const int64_t head_total = (pairs - tail_pairs) * nwords;
  const int64_t total = head_total + tail_pairs * div * nwords;
  const int64_t xs = p.x_ls / kC, os = p.out_ls / kC, rs = p.res != nullptr ? p.r_ls / kC : 0;
  // 32-bit thread index; 32-bit word offsets within a chunk (the halo before it and the group
  // pointers the ring forms up to 4 * kG past it included)
  if (total > 0xffffffffLL - kThreads) return false;
  if ((chunk + 4 * kG + p.width) * std::max(std::max(xs, os), rs) > 0x7fffffffLL) return false;
  g.nwords = static_cast<uint32_t>(nwords);
  g.nchunks = static_cast<uint32_t>((p.seqlen + chunk - 1) / chunk);
  g.total = static_cast<uint32_t>(total);
  g.head_total = static_cast<uint32_t>(head_total);
  g.head_pairs = static_cast<uint32_t>(pairs - tail_pairs);
  g.tail_div = static_cast<int>(div);
  g.chunk = static_cast<int>(chunk);
  g.xs = static_cast<int>(xs);
  g.os = static_cast<int>(os);
  g.rs = static_cast<int>(rs);
  return true;
}

// 16-bit types: a word holds channels 2i, 2i+1 of one token, so every token row must start on a
// 4-byte boundary and the dim must be even.
bool words_ok(const void* ptr, int64_t bs, int64_t ls, int batch, int64_t seqlen) {
  if (!aligned_to(ptr, 4)) return false;
  if (batch > 1 && bs % 2 != 0) return false;
  return seqlen <= 1 || ls % 2 == 0;
}

}  // namespace

namespace fwd_cl_fast {

// On unless CAUSAL_CONV1D_FWD_CL_FAST is off.
bool eligible(const ConvParams& p) {
  if (!p.channel_last || p.x_cs != 1 || p.out_cs != 1 || p.seq_idx != nullptr) return false;
  if (p.cu_seqlens != nullptr && (p.batch != 1 || p.init != nullptr || p.final_out != nullptr)) return false;
  if (p.res != nullptr && p.r_cs != 1) return false;
  if (p.width < 2 || p.width > 4 || p.batch <= 0 || p.dim <= 0 || p.seqlen <= 0) return false;
  if (p.x_dtype != kFloat32) {
    if (p.dim % 2 != 0) return false;
    if (!words_ok(p.x, p.x_bs, p.x_ls, p.batch, p.seqlen) || !words_ok(p.out, p.out_bs, p.out_ls, p.batch, p.seqlen))
      return false;
    if (p.res != nullptr && !words_ok(p.res, p.r_bs, p.r_ls, p.batch, p.seqlen)) return false;
  }
  Geometry g;
  return geometry(p, g);
}

void launch(const ConvParams& p, cudaStream_t stream) {
  Geometry g;
  geometry(p, g);  // eligible(): it fits
  const int64_t blocks = (static_cast<int64_t>(g.total) + kThreads - 1) / kThreads;
  dispatch_dtype_width(p.x_dtype, p.width, Widths<2, 3, 4>{}, [&](auto tag, auto width) {
    using T = typename decltype(tag)::type;
    constexpr int kW = decltype(width)::value;
    const unsigned nb = static_cast<unsigned>(blocks);
    dispatch_flag(p.cu_seqlens != nullptr, [&](auto seq) {
      dispatch_flag(p.res != nullptr, [&](auto res) {
        fwd_cl_fast_kernel<T, kW, decltype(seq)::value, decltype(res)::value><<<nb, kThreads, 0, stream>>>(p, g);
      });
    });
    CC1D_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fwd_cl_fast
}  // namespace causal_conv1d_cuda
