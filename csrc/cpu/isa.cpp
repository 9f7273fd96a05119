// Which vector kernels of the CPU forward this CPU runs (isa.h).
#include "isa.h"

#if CC1D_X86_SIMD
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>

namespace causal_conv1d {
namespace cpu {
namespace {

Isa detect_isa() {
#if CC1D_X86_SIMD
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const char* cap = std::getenv("ATEN_CPU_CAPABILITY");
  if (cap != nullptr && std::strcmp(cap, "default") == 0) return Isa::kScalar;
  const bool cap_avx2 = cap != nullptr && std::strcmp(cap, "avx2") == 0;
  if (avx512 && !cap_avx2) return Isa::kAvx512;
  if (avx2) return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

}  // namespace

Isa cpu_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

}  // namespace cpu
}  // namespace causal_conv1d
