// Vectorised CPU forward kernels for one x86 instruction set (see fwd_simd.cpp).
//
// No include guard on purpose: fwd_simd.cpp includes this file once per instruction set,
// each time inside that set's `#pragma GCC target` region and its own namespace, with
//   CC1D_LANES == 16: AVX-512 (F, BW, VL, DQ), or
//   CC1D_LANES == 8:  AVX2 + FMA + F16C.
// The including file provides <immintrin.h>, <cstring>, c10's Half/BFloat16, FwdArgs and kNoSeq.
//
// Math: float32 throughout (the 16-bit types are converted on load and rounded to nearest-even on
// store, as c10 does); silu(z) = z / (1 + exp(-z)) with a branch-free exp (below). Both instruction
// sets compute the same operations in the same order: bit-identical outputs (checked with ATEN_CPU_CAPABILITY=avx2 against avx512).

#if CC1D_LANES == 16
using vf = __m512;
using vi = __m512i;
using vm = __mmask16;  // per-lane condition
constexpr int kLanes = 16;
#define CC1D_PS(op) _mm512_##op##_ps
#define CC1D_EPI32(op) _mm512_##op##_epi32
#define CC1D_CASTSI_PS _mm512_castsi512_ps
#elif CC1D_LANES == 8
using vf = __m256;
using vi = __m256i;
using vm = __m256;  // per-lane condition: all ones or all zeros
constexpr int kLanes = 8;
#define CC1D_PS(op) _mm256_##op##_ps
#define CC1D_EPI32(op) _mm256_##op##_epi32
#define CC1D_CASTSI_PS _mm256_castsi256_ps
#else
#error "CC1D_LANES must be 16 or 8"
#endif

// The operations both sets have alike: the same intrinsic at each width.
inline vf vset1(float v) { return CC1D_PS(set1)(v); }
inline vf vzero() { return CC1D_PS(setzero)(); }
inline vf vadd(vf a, vf b) { return CC1D_PS(add)(a, b); }
inline vf vmul(vf a, vf b) { return CC1D_PS(mul)(a, b); }
inline vf vdiv(vf a, vf b) { return CC1D_PS(div)(a, b); }
inline vf vfmadd(vf a, vf b, vf c) { return CC1D_PS(fmadd)(a, b, c); }    // a * b + c
inline vf vfnmadd(vf a, vf b, vf c) { return CC1D_PS(fnmadd)(a, b, c); }  // c - a * b
// min/max return the second operand when either is NaN.
inline vf vmin(vf a, vf b) { return CC1D_PS(min)(a, b); }
inline vf vmax(vf a, vf b) { return CC1D_PS(max)(a, b); }
// 2^n for integral n in [-126, 127].
inline vf vpow2(vf n) {
  return CC1D_CASTSI_PS(CC1D_EPI32(slli)(CC1D_EPI32(add)(CC1D_EPI32(cvtps)(n), CC1D_EPI32(set1)(127)), 23));
}
inline vf vload(const float* p) { return CC1D_PS(loadu)(p); }
inline void vstore(float* p, vf v) { CC1D_PS(storeu)(p, v); }
#undef CC1D_PS
#undef CC1D_EPI32
#undef CC1D_CASTSI_PS

#if CC1D_LANES == 16

inline vf vneg(vf a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN))); }
inline vf vround(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vm vgt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline vf vselect(vm m, vf yes, vf no) { return _mm512_mask_mov_ps(no, m, yes); }

inline vf vload(const Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline vf vload(const BFloat16* p) {
  const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
inline void vstore(Half* p, vf v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void vstore(BFloat16* p, vf v) {
  // c10::BFloat16(float): round to nearest even; any NaN becomes 0x7FC0.
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
}

inline vi vloadi(const int32_t* p) { return _mm512_loadu_si512(p); }
inline vm veqi(vi a, vi b) { return _mm512_cmpeq_epi32_mask(a, b); }
// acc + w * x where m is set, acc elsewhere (x is not read where m is clear).
inline vf vfmadd_if(vm m, vf w, vf x, vf acc) { return _mm512_mask3_fmadd_ps(w, x, acc, m); }
// 0 where s < 0 (padding), v elsewhere.
inline vf vzero_if_neg(vi s, vf v) { return _mm512_mask_mov_ps(v, _mm512_cmplt_epi32_mask(s, _mm512_setzero_si512()), vzero()); }

// The first n (< kLanes) elements at p, zeros after them; p[n..] is never read (masked loads: the
// masked-off lanes are not accessed, so they cannot fault). Stores write the first n lanes only.
inline __mmask16 vmask_n(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
inline vf vload_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(vmask_n(n), p); }
inline vf vload_n(const Half* p, int64_t n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(vmask_n(n), p)); }
inline vf vload_n(const BFloat16* p, int64_t n) {
  const __m512i u = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(vmask_n(n), p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
inline vi vloadi_n(const int32_t* p, int64_t n) { return _mm512_maskz_loadu_epi32(vmask_n(n), p); }
inline void vstore_n(float* p, vf v, int64_t n) { _mm512_mask_storeu_ps(p, vmask_n(n), v); }
template <typename T>  // Half, BFloat16: vstore's rounding into a buffer, then a masked 16-bit store
inline void vstore_n(T* p, vf v, int64_t n) {
  alignas(64) T buf[kLanes];
  vstore(buf, v);
  _mm256_mask_storeu_epi16(p, vmask_n(n), _mm256_load_si256(reinterpret_cast<const __m256i*>(buf)));
}

#else  // CC1D_LANES == 8

inline vf vneg(vf a) { return _mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN))); }
inline vf vround(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vm vgt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline vf vselect(vm m, vf yes, vf no) { return _mm256_blendv_ps(no, yes, m); }

inline vf vload(const Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline vf vload(const BFloat16* p) {
  const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
inline void vstore(Half* p, vf v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void vstore(BFloat16* p, vf v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
  r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC0)),
                                           _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  // Values are <= 0xFFFF, so the unsigned saturating pack is exact.
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

inline vi vloadi(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline vm veqi(vi a, vi b) { return _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b)); }
inline vf vfmadd_if(vm m, vf w, vf x, vf acc) { return _mm256_fmadd_ps(w, _mm256_and_ps(x, m), acc); }
inline vf vzero_if_neg(vi s, vf v) {
  return _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_setzero_si256(), s)), v);
}

// The first n (< kLanes) elements at p, zeros after them; p[n..] is never read.
template <typename T>
inline vf vload_n(const T* p, int64_t n) {
  alignas(64) T buf[kLanes];
  std::memset(static_cast<void*>(buf), 0, sizeof(buf));
  std::memcpy(static_cast<void*>(buf), p, n * sizeof(T));
  return vload(buf);
}
inline vi vloadi_n(const int32_t* p, int64_t n) {
  alignas(64) int32_t buf[kLanes] = {};
  std::memcpy(buf, p, n * sizeof(int32_t));
  return vloadi(buf);
}
// Stores the first n (< kLanes) lanes; p[n..] is not written.
template <typename T>
inline void vstore_n(T* p, vf v, int64_t n) {
  alignas(64) T buf[kLanes];
  vstore(buf, v);
  std::memcpy(static_cast<void*>(p), buf, n * sizeof(T));
}

#endif

// silu(z) = z / (1 + exp(-z)). exp(x): x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2 (ln2 in
// two parts, Cody-Waite); exp(r) = 1 + r + r^2 p(r), p of degree 5 (Cephes expf coefficients); 2^n
// from exponent bits. x is clamped to [-87.33, 88.37] so that n fits in [-126, 127]; above the clamp
// exp is +inf (silu -> -0, and NaN for z = -inf, as z / (1 + inf)); below it exp(x) < 2^-125 does not
// change 1 + exp(x). A NaN z gives NaN through the numerator. Measured: silu relative error <= 2.0e-7
// over 3M points in [-88, 88] against float64 (F.silu in float32: 1.7e-7).
inline vf vsilu(vf z) {
  constexpr float kHi = 88.37f, kLo = -87.33f;
  const vf x = vneg(z);
  const vf xc = vmin(vmax(x, vset1(kLo)), vset1(kHi));
  const vf n = vround(vmul(xc, vset1(1.44269504088896341f)));
  vf r = vfnmadd(n, vset1(0.693359375f), xc);
  r = vfnmadd(n, vset1(-2.12194440e-4f), r);
  vf p = vset1(1.9875691500e-4f);
  p = vfmadd(p, r, vset1(1.3981999507e-3f));
  p = vfmadd(p, r, vset1(8.3334519073e-3f));
  p = vfmadd(p, r, vset1(4.1665795894e-2f));
  p = vfmadd(p, r, vset1(1.6666665459e-1f));
  p = vfmadd(p, r, vset1(5.0000001201e-1f));
  p = vfmadd(p, vmul(r, r), vadd(r, vset1(1.0f)));
  vf e = vmul(p, vpow2(n));
  e = vselect(vgt(x, vset1(kHi)), vset1(__builtin_huge_valf()), e);
  return vdiv(z, vadd(vset1(1.0f), e));
}

// ---------------------------------------------------------------------------------------------
// Channel-first: out[i] = act(bias + sum_k w[k] * win[i + k]) (+ res[i] with kRes: the fused
// residual, added in float before the one rounding) for i in [0, n); win[0, n + W - 1) is readable.
// One pass: each output vector is computed from W shifted loads, activated and stored. kRes is a
// template parameter so that the loop without a residual is the loop it always was.

template <int W, bool kRes, typename TI, typename TO>
void conv_act(const TI* __restrict win, TO* __restrict out, const TO* __restrict res, int64_t n, const float* w,
              float bias, bool silu) {
  vf wv[W];
  for (int k = 0; k < W; ++k) wv[k] = vset1(w[k]);
  const vf bv = vset1(bias);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    vf acc = bv;
CC1D_UNROLL
    for (int k = 0; k < W; ++k) acc = vfmadd(wv[k], vload(win + i + k), acc);
    if (silu) acc = vsilu(acc);
    if constexpr (kRes) acc = vadd(acc, vload(res + i));
    vstore(out + i, acc);
  }
  if (i < n) {
    const int64_t m = n - i;
    vf acc = bv;
    for (int k = 0; k < W; ++k) acc = vfmadd(wv[k], vload_n(win + i + k, m), acc);
    if (silu) acc = vsilu(acc);
    if constexpr (kRes) acc = vadd(acc, vload_n(res + i, m));
    vstore_n(out + i, acc, m);
  }
}

// As conv_act, but a tap counts only when its seq id (sw, aligned with win) equals the output's
// (sw[i + W - 1]); an output whose seq id is negative (padding) is 0 (plus the residual).
template <int W, bool kRes, typename TI, typename TO>
void conv_act_seq(const TI* __restrict win, const int32_t* __restrict sw, TO* __restrict out,
                  const TO* __restrict res, int64_t n, const float* w, float bias, bool silu) {
  vf wv[W];
  for (int k = 0; k < W; ++k) wv[k] = vset1(w[k]);
  const vf bv = vset1(bias);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const vi cur = vloadi(sw + i + W - 1);
    vf acc = vfmadd(wv[W - 1], vload(win + i + W - 1), bv);
CC1D_UNROLL
    for (int k = 0; k < W - 1; ++k) acc = vfmadd_if(veqi(vloadi(sw + i + k), cur), wv[k], vload(win + i + k), acc);
    if (silu) acc = vsilu(acc);
    acc = vzero_if_neg(cur, acc);
    if constexpr (kRes) acc = vadd(acc, vload(res + i));
    vstore(out + i, acc);
  }
  if (i < n) {
    const int64_t m = n - i;
    const vi cur = vloadi_n(sw + i + W - 1, m);
    vf acc = vfmadd(wv[W - 1], vload_n(win + i + W - 1, m), bv);
    for (int k = 0; k < W - 1; ++k) {
      acc = vfmadd_if(veqi(vloadi_n(sw + i + k, m), cur), wv[k], vload_n(win + i + k, m), acc);
    }
    if (silu) acc = vsilu(acc);
    acc = vzero_if_neg(cur, acc);
    if constexpr (kRes) acc = vadd(acc, vload_n(res + i, m));
    vstore_n(out + i, acc, m);
  }
}

// Rows [r0, r1) of the (batch * dim) channel-first rows. The first min(L, W-1) outputs of a row take
// earlier taps from the initial states (or zeros): they are computed from a small float window;
// the rest read x in place. The residual (if any) is chosen once per row: conv_act<W, kRes>.
template <typename T, int W>
void fwd_cf_rows(const FwdArgs& a, int64_t r0, int64_t r1) {
  constexpr int H = W - 1;
  const int64_t D = a.dim, L = a.seqlen;
  const FwdView<T, float> v(a);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / D, d = r % D;
    const T* xr = v.x.ptr(b, d);
    T* orow = v.out.ptr(b, d);
    const T* rr = v.res.p ? v.res.ptr(b, d) : nullptr;  // unit stride along seqlen (x's layout)
    const int32_t* sr = v.seq ? v.seq + b * L : nullptr;
    const float* w = v.w + d * W;
    const float bv = v.bias[d];
    const int64_t head = std::min<int64_t>(H, L);
    float hw[2 * H];
    int32_t hs[2 * H];
    // before the start: the initial state, which belongs to the row's first sequence (seq_idx[b, 0])
    const int32_t pre_seq = sr && v.init && L > 0 ? sr[0] : kNoSeq;
    for (int j = 0; j < H; ++j) {
      hw[j] = v.init ? v.init[r * H + j] : 0.0f;
      hs[j] = pre_seq;
    }
    for (int64_t i = 0; i < head; ++i) {
      hw[H + i] = static_cast<float>(xr[i]);
      if (sr) hs[H + i] = sr[i];
    }
    auto row = [&](auto res_tag) {
      constexpr bool kRes = decltype(res_tag)::value;
      const T* rh = kRes ? rr + H : nullptr;  // the residual of the outputs after the head
      if (sr) {
        conv_act_seq<W, kRes>(hw, hs, orow, rr, head, w, bv, a.silu);
        if (L > H) conv_act_seq<W, kRes>(xr, sr, orow + H, rh, L - H, w, bv, a.silu);
      } else {
        conv_act<W, kRes>(hw, orow, rr, head, w, bv, a.silu);
        if (L > H) conv_act<W, kRes>(xr, orow + H, rh, L - H, w, bv, a.silu);
      }
    };
    if (rr) {
      row(std::true_type{});
    } else {
      row(std::false_type{});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Channel-last: one output row (all channels of one position) per step, vectorised along dim.

// orow[d] = act(bias[d] + sum_k wt[k * D + d] * tap_k[d]) (+ rrow[d] with kRes); tap k is xk[k]
// (x's dtype) when set, else ik[k] (float) when set, else absent.
template <int W, typename T, bool kAllX, bool kRes>
void cl_row(const T* const* xk, const float* const* ik, const float* __restrict wt, const float* __restrict bias,
            T* __restrict orow, const T* __restrict rrow, int64_t D, bool silu) {
  int64_t d = 0;
  for (; d + kLanes <= D; d += kLanes) {
    vf acc = vload(bias + d);
CC1D_UNROLL
    for (int k = 0; k < W; ++k) {
      const vf wv = vload(wt + k * D + d);
      if (kAllX || xk[k]) {
        acc = vfmadd(wv, vload(xk[k] + d), acc);
      } else if (ik[k]) {
        acc = vfmadd(wv, vload(ik[k] + d), acc);
      }
    }
    if (silu) acc = vsilu(acc);
    if constexpr (kRes) acc = vadd(acc, vload(rrow + d));
    vstore(orow + d, acc);
  }
  if (d < D) {
    const int64_t m = D - d;
    vf acc = vload_n(bias + d, m);
    for (int k = 0; k < W; ++k) {
      const vf wv = vload_n(wt + k * D + d, m);
      if (kAllX || xk[k]) {
        acc = vfmadd(wv, vload_n(xk[k] + d, m), acc);
      } else if (ik[k]) {
        acc = vfmadd(wv, vload_n(ik[k] + d, m), acc);
      }
    }
    if (silu) acc = vsilu(acc);
    if constexpr (kRes) acc = vadd(acc, vload_n(rrow + d, m));
    vstore_n(orow + d, acc, m);
  }
}

// Tasks [t0, t1) of (batch, block of `rows` positions); nblocks blocks per batch.
template <typename T, int W>
void fwd_cl_tasks(const FwdArgs& a, int64_t t0, int64_t t1, int64_t rows, int64_t nblocks) {
  const int64_t D = a.dim, L = a.seqlen;
  const FwdView<T, float> v(a);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t b = t / nblocks;
    const int64_t l0 = (t % nblocks) * rows, l1 = std::min(L, l0 + rows);
    for (int64_t l = l0; l < l1; ++l) {
      T* orow = v.out.ptr(b, 0, l);
      const T* rrow = v.res.p ? v.res.ptr(b, 0, l) : nullptr;  // unit stride along dim (x's layout)
      const int32_t cur = v.seq ? v.seq[b * L + l] : 0;
      if (cur < 0) {  // padding: 0, plus the residual
        if (rrow) {
          std::memcpy(static_cast<void*>(orow), rrow, D * sizeof(T));
          continue;
        }
        int64_t d = 0;
        for (; d + kLanes <= D; d += kLanes) vstore(orow + d, vzero());
        if (d < D) vstore_n(orow + d, vzero(), D - d);
        continue;
      }
      const T* xk[W];
      const float* ik[W];
      bool all_x = true;
      for (int k = 0; k < W; ++k) {
        const int64_t pos = l - (W - 1) + k;
        xk[k] = nullptr;
        ik[k] = nullptr;
        if (pos < 0) {
          // the initial state is the first sequence's (seq_idx[b, 0])
          if (v.init && (!v.seq || v.seq[b * L] == cur)) ik[k] = v.init + (b * (W - 1) + (pos + W - 1)) * D;
          all_x = false;
        } else if (v.seq && v.seq[b * L + pos] != cur) {
          all_x = false;
        } else {
          xk[k] = v.x.ptr(b, 0, pos);
        }
      }
      if (rrow) {
        if (all_x) {
          cl_row<W, T, true, true>(xk, ik, v.w, v.bias, orow, rrow, D, a.silu);
        } else {
          cl_row<W, T, false, true>(xk, ik, v.w, v.bias, orow, rrow, D, a.silu);
        }
      } else if (all_x) {
        cl_row<W, T, true, false>(xk, ik, v.w, v.bias, orow, rrow, D, a.silu);
      } else {
        cl_row<W, T, false, false>(xk, ik, v.w, v.bias, orow, rrow, D, a.silu);
      }
    }
  }
}
