//===- CpuFeatures.h - what the runtime's hand-written loops need -*- C++ -*-===//

#ifndef MFC_RUNTIME_CPUFEATURES_H
#define MFC_RUNTIME_CPUFEATURES_H

namespace mfrt {

/// Whether this CPU runs the runtime's AVX-512 loops (the panel microkernel,
/// decode attention): F, BW and VL, as every AVX-512 CPU since Skylake-SP
/// has. Asked once, on first use.
inline bool hasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}

} // namespace mfrt

#endif // MFC_RUNTIME_CPUFEATURES_H
