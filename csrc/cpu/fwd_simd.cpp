// The vector paths of the CPU forward (float32, float16, bfloat16 on x86-64): fwd_simd_impl.h,
// compiled twice, for AVX-512 and for AVX2 + FMA + F16C, whatever the build's -m flags; which one
// runs is decided once from the CPU (isa.cpp). One pass per output: W shifted vector loads, fused
// bias, silu with a vectorised exp, store (the store is the output's first touch). docs/PERF_NOTES.md
// ("CPU forward") has the measurements.
#include "isa.h"

#if CC1D_X86_SIMD
// GCC 12 warns about the deliberately undefined vectors inside some AVX-512 intrinsics (GCC bug
// 105593, fixed in 12.3); the warnings are located in the header, so silence them there. First
// include of the file: torch's headers include <x86intrin.h> too (c10/util/ApproximateClock.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "dispatch.h"

#include <cstring>

namespace causal_conv1d {
namespace cpu {

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

// Both paths run the same kernels of their namespace.
#define CC1D_SIMD_PATH(isa_ns, isa_value)                                                                 \
  namespace fwd_##isa_ns {                                                                                \
  bool eligible(const FwdArgs& a) { return a.x->scalar_type() != ScalarType::Double && cpu_isa() == isa_value; } \
  void launch(const FwdArgs& a) {                                                                         \
    run_fwd_kernels</*kWithDouble=*/false>(                                                               \
        a,                                                                                                \
        [&](auto tag, auto w, int64_t r0, int64_t r1) {                                                   \
          isa_ns::fwd_cf_rows<typename decltype(tag)::type, decltype(w)::value>(a, r0, r1);              \
        },                                                                                                \
        [&](auto tag, auto w, int64_t t0, int64_t t1, int64_t rows, int64_t nblocks) {                    \
          isa_ns::fwd_cl_tasks<typename decltype(tag)::type, decltype(w)::value>(a, t0, t1, rows, nblocks); \
        });                                                                                               \
  }                                                                                                       \
  }

CC1D_SIMD_PATH(avx512, Isa::kAvx512)
CC1D_SIMD_PATH(avx2, Isa::kAvx2)
#undef CC1D_SIMD_PATH

}  // namespace cpu
}  // namespace causal_conv1d

#endif  // CC1D_X86_SIMD
