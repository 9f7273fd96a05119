// Which vector kernels of the CPU forward this CPU runs (isa.cpp). CC1D_X86_SIMD: whether the
// build has them (x86-64 with GCC or Clang: fwd_simd.cpp compiles them for their instruction sets
// with target pragmas whatever the build's -m flags).
#pragma once

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define CC1D_X86_SIMD 1
#else
#define CC1D_X86_SIMD 0
#endif

namespace causal_conv1d {
namespace cpu {

enum class Isa { kScalar, kAvx2, kAvx512 };

// What the CPU supports (cpuid), capped by ATEN_CPU_CAPABILITY the way torch caps its own kernels
// (=avx2 or =default select the AVX2 or the scalar kernels; unset or another value: the best the
// CPU has). Read here rather than asked of torch, so that both op-layer builds decide alike (the
// stable ABI has no capability query). Decided once per process.
Isa cpu_isa();

}  // namespace cpu
}  // namespace causal_conv1d
