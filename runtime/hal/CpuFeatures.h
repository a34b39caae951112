//===- CpuFeatures.h - what this CPU runs -----------------------*- C++ -*-===//
//
// The runtime's own AVX-512 loops ask hasAvx512(); a kernel library asks
// missingCpuFeatures() for the features its kernels were compiled with
// (LLVM's names, recorded in model.bin) before it is loaded, so that a
// model.bin compiled for another CPU is refused instead of dying of an
// illegal instruction.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_HAL_CPUFEATURES_H
#define MFC_RUNTIME_HAL_CPUFEATURES_H

#include <string>
#include <vector>

namespace mfrt {

/// Whether this CPU runs the runtime's AVX-512 loops (the panel microkernel,
/// decode attention): F, BW and VL, as every AVX-512 CPU since Skylake-SP
/// has. Asked once, on first use.
/// MFRT_DISABLE_AVX512=1 in the environment makes it say no, so that
/// those loops' AVX2 paths can be tested and measured on an AVX-512
/// machine.
bool hasAvx512();

/// The widest vectors the runtime's row loops (int8 rows, an int8 KV
/// cache's widening) use here: AVX-512 as hasAvx512 says, else AVX2 where
/// the CPU has it, else portable code. Asked once.
enum class RowIsa { Avx512, Avx2, Portable };
RowIsa rowIsa();

/// This machine's architecture as a target triple names it ("x86_64").
const char *hostArchitecture();

/// Of `features` (LLVM feature names, "avx2", "amx-tile"), those this CPU
/// lacks, in order. Only instruction-set features the CPU can be asked
/// about (cpuid, through GCC's __builtin_cpu_supports) are checked; the
/// others (64bit, cx16, sahf, ...) are baseline on every CPU of the
/// architecture that runs this mf-run.
std::vector<std::string>
missingCpuFeatures(const std::vector<std::string> &features);

} // namespace mfrt

#endif // MFC_RUNTIME_HAL_CPUFEATURES_H
