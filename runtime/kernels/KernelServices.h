//===- KernelServices.h - what native kernels call back into ----*- C++ -*-===//
//
// Generated kernels reach the runtime through "services": for each, the
// kernel library has a global pointer `<service>_ptr` that the runtime
// fills when it loads the library. Each takes its argument struct
// (runtime/hal/KernelAbi.h). The gemm services cannot fail (their arguments
// are the compiler's constants); the attention services read run-time
// values and return a status.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_KERNELSERVICES_H
#define MFC_RUNTIME_KERNELS_KERNELSERVICES_H

#include "runtime/hal/KernelAbi.h"
#include "runtime/hal/KernelLibrary.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mfrt {

/// mfrt_gemm_f32 (runtime/hal/KernelAbi.h's mfrt_gemm_args_v1): the matmul
/// microkernel of every matmul tile, on OpenBLAS. Single-threaded: the
/// runtime's thread pool runs tiles in parallel.
extern "C" void mfrtGemmF32(const mfrt_gemm_args_v1 *args);

/// mfrt_attention: units of a compiled attention region (FlashAttention.h's
/// FusedAttention). A past length that does not fit the cache writes
/// nothing and returns MFRT_KERNEL_SERVICE_FAILED (takeServiceError() says
/// why).
extern "C" int32_t mfrtAttention(const mfrt_attention_args_v1 *args);

/// mfrt_attention_grad: units of the gradients of one attention
/// (FlashAttention.h's AttentionGradient). Returns MFRT_KERNEL_OK.
extern "C" int32_t mfrtAttentionGrad(const mfrt_attention_grad_args_v1 *args);

/// Why the last service that returned MFRT_KERNEL_SERVICE_FAILED on this
/// thread failed, and forgets it: the kernel that called it returns on the
/// same thread, where the runtime asks.
std::string takeServiceError();

/// The services by global name (without `_ptr`): mfrt_gemm_f32,
/// mfrt_gemm_panels_f32/_f16/_bf16 (PanelGemm.h: B as packed panels),
/// mfrt_attention and mfrt_attention_grad above, and mfrt_gemm_f16 /
/// mfrt_gemm_bf16, the same as mfrt_gemm_f32 with A and B in f16 / bf16 (C in
/// f32), which widen the rows of op(A) and the panel of op(B) a tile reads to
/// f32 first.
const std::vector<KernelService> &kernelServices();

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELS_KERNELSERVICES_H
