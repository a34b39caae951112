//===- KernelServices.h - what native kernels call back into ----*- C++ -*-===//
//
// Generated kernels reach the runtime through "services": for each, the
// kernel library has a global pointer `<service>_ptr` that the runtime
// fills when it loads the library (see compiler/Codegen/CPU/CPUKernels.h).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELSERVICES_H
#define MFC_RUNTIME_KERNELSERVICES_H

#include <cstdint>

namespace mfrt {

/// mfrt_gemm_f32: C[m x n] (row stride ldc) = rows m0.. of op(A) [M x K]
/// (A stored [K x M] when transA) times columns n0.. of op(B) (B stored
/// [N x K] when transB, else [K x N]); the matmul microkernel of every
/// matmul tile. Single-threaded: the runtime's thread pool runs tiles in
/// parallel.
extern "C" void mfrtGemmF32(int64_t a, int64_t b, int64_t c, int64_t ldc,
                            int64_t m0, int64_t n0, int64_t m, int64_t n,
                            int64_t k, int64_t bigN, int64_t transB,
                            int64_t transA, int64_t bigM);

/// mfrt_gemm_f16 / mfrt_gemm_bf16: the same with A and B in f16 / bf16
/// (C in f32): the rows of op(A) and the panel of op(B) the tile reads are
/// widened to f32 first.
extern "C" void mfrtGemmF16(int64_t a, int64_t b, int64_t c, int64_t ldc,
                            int64_t m0, int64_t n0, int64_t m, int64_t n,
                            int64_t k, int64_t bigN, int64_t transB,
                            int64_t transA, int64_t bigM);
extern "C" void mfrtGemmBF16(int64_t a, int64_t b, int64_t c, int64_t ldc,
                             int64_t m0, int64_t n0, int64_t m, int64_t n,
                             int64_t k, int64_t bigN, int64_t transB,
                             int64_t transA, int64_t bigM);

/// The services by global name (without `_ptr`).
struct KernelService {
  const char *name;
  void *function;
};
inline const KernelService kKernelServices[] = {
    {"mfrt_gemm_f32", reinterpret_cast<void *>(&mfrtGemmF32)},
    {"mfrt_gemm_f16", reinterpret_cast<void *>(&mfrtGemmF16)},
    {"mfrt_gemm_bf16", reinterpret_cast<void *>(&mfrtGemmBF16)},
};

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELSERVICES_H
