//===- KernelServices.h - what native kernels call back into ----*- C++ -*-===//
//
// Generated kernels reach the runtime through "services": for each, the
// kernel library has a global pointer `<service>_ptr` that the runtime
// fills when it loads the library (runtime/KernelAbi.h). The gemm services
// cannot fail (their arguments are the compiler's constants); the
// attention services read run-time values and return a status.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELSERVICES_H
#define MFC_RUNTIME_KERNELSERVICES_H

#include <cstdint>
#include <string>
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

/// mfrt_attention: units [unitBegin, unitEnd) of a compiled attention
/// region (FlashAttention.h's FusedAttention, field by field: pointers,
/// then the past length (read from `pastPointer` unless it is 0), the
/// shape, `flags` (1 causal, 2 RoPE on the query, 4 RoPE on the new keys,
/// 8 has a past; 16 the buffers are f16, 32 bf16, else f32), the scale
/// and theta). A past_length that does not fit the cache writes nothing
/// and returns MFRT_KERNEL_SERVICE_FAILED (takeServiceError() says why).
extern "C" int32_t
mfrtAttention(int64_t unitBegin, int64_t unitEnd, int64_t query,
              int64_t newKeys, int64_t newValues, int64_t cacheKeyIn,
              int64_t cacheValueIn, int64_t cacheKey, int64_t cacheValue,
              int64_t positions, int64_t pastPointer, int64_t pastValue,
              int64_t out, int64_t batch, int64_t seq, int64_t heads,
              int64_t kvHeads, int64_t dim, int64_t keys, int64_t newRows,
              int64_t flags, double scale, double theta);

/// mfrt_attention_grad: units [unitBegin, unitEnd) of the gradients
/// of one attention (FlashAttention.h's AttentionGradient; a gradient's
/// pointer is 0 when the region does not compute it), `flags` (1 causal;
/// 16 the buffers are f16, 32 bf16, else f32) and the scale. Returns
/// MFRT_KERNEL_OK.
extern "C" int32_t
mfrtAttentionGrad(int64_t unitBegin, int64_t unitEnd, int64_t query,
                  int64_t keys, int64_t values, int64_t outGrad,
                  int64_t queryGrad, int64_t keyGrad, int64_t valueGrad,
                  int64_t batch, int64_t seq, int64_t heads, int64_t kvHeads,
                  int64_t dim, int64_t keyRows, int64_t flags, double scale);

/// Why the last service that returned MFRT_KERNEL_SERVICE_FAILED on this
/// thread failed, and forgets it: the kernel that called it returns on the
/// same thread, where the runtime asks.
std::string takeServiceError();

/// The services by global name (without `_ptr`): mfrt_gemm_f32,
/// mfrt_gemm_panels_f32/_f16/_bf16 (PanelGemm.h: B as packed panels),
/// mfrt_attention and mfrt_attention_grad above, and mfrt_gemm_f16 / mfrt_gemm_bf16, the same
/// as mfrt_gemm_f32 with A and B in f16 / bf16 (C in f32), which widen the
/// rows of op(A) and the panel of op(B) a tile reads to f32 first.
struct KernelService {
  const char *name;
  void *function;
};
const std::vector<KernelService> &kernelServices();

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELSERVICES_H
