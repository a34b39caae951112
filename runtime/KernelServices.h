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
#include <vector>

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

/// The services by global name (without `_ptr`): mfrt_gemm_f32 above, and
/// mfrt_gemm_f16 / mfrt_gemm_bf16, the same with A and B in f16 / bf16 (C
/// in f32), which widen the rows of op(A) and the panel of op(B) a tile
/// reads to f32 first.
struct KernelService {
  const char *name;
  void *function;
};
const std::vector<KernelService> &kernelServices();

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELSERVICES_H
