//===- PanelGemm.h - products with weights packed once ---------*- C++ -*-===//
//
// Graph Mode multiplies by an [N, K] weight (used transposed: a Linear)
// through the weight packed once into panels of kPanelWidth columns of the
// product: panel p holds the weight's rows 32p .. 32p + w - 1 side by side,
// [K][w], w = 32 except for a last panel of the N % 32 rows left. Panel p
// starts at element 32p * K, where its rows started: the panels take the
// weight's own size and can replace it in place. A microkernel then reads,
// per step along K, one contiguous row of a panel against eight broadcast
// activations, with no packing per call (OpenBLAS packs both operands in
// every call: ~20% of its time on llama-100m's prefill tiles).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_PANELGEMM_H
#define MFC_RUNTIME_KERNELS_PANELGEMM_H

#include "runtime/base/Tensor.h"
#include "runtime/hal/KernelAbi.h"

#include <cstdint>

namespace mfrt {

inline constexpr int64_t kPanelWidth = 32;

/// The panels of an [n, k] weight.
inline int64_t panelCount(int64_t n) {
  return (n + kPanelWidth - 1) / kPanelWidth;
}

/// Packs panels [panelBegin, panelEnd) of the [n, k] row-major `weight`
/// (f32, f16, bf16 or i8) into `panels` (n * k elements, another buffer).
void packPanels(DType dtype, const void *weight, int64_t n, int64_t k,
                void *panels, int64_t panelBegin, int64_t panelEnd);

/// The same in the weight's own storage.
void packPanelsInPlace(DType dtype, void *weight, int64_t n, int64_t k,
                       int64_t panelBegin, int64_t panelEnd);

/// The [n, k] weight that `panels` hold.
void unpackPanels(DType dtype, const void *panels, int64_t n, int64_t k,
                  void *weight);

/// The same three for either layout a kernel reads (an Int8Dot weight is
/// i8 with k a multiple of 4: runtime/kernels/Int8DotGemm.h).
void packWeight(PanelLayout layout, DType dtype, const void *weight, int64_t n,
                int64_t k, void *panels, int64_t panelBegin, int64_t panelEnd);
void packWeightInPlace(PanelLayout layout, DType dtype, void *weight, int64_t n,
                       int64_t k, int64_t panelBegin, int64_t panelEnd);
void unpackWeight(PanelLayout layout, DType dtype, const void *panels,
                  int64_t n, int64_t k, void *weight);

/// The services mfrt_gemm_panels_f32, _f16, _bf16 and _i8 (one instance
/// per type, called with the C convention like every service), with
/// mfrt_gemm_f32's argument struct: C[m x n] (row stride ldc, f32) = rows
/// m0.. of A [M x K] (row-major) times columns n0.. of B^T, B an [N x K]
/// weight given as its panels; A and B of type `Stored`, but for I8: B a
/// quantized weight's values, A f32 (the caller applies the scales). `trans_b`
/// must be 1 and `trans_a` 0 (the only layout packed). A 16-bit tile's rows of
/// A are widened once, its panels in registers as they are read.
template <DType Stored> void gemmPanelsService(const mfrt_gemm_args_v1 *args);

/// The services mfrt_gemm_panels_i8_f16 and _i8_bf16: f16 or bf16 A (its
/// tile's rows widened once) times a quantized weight's i8 panels.
template <DType Activation>
void gemmInt8PanelsService(const mfrt_gemm_args_v1 *args);

/// The services mfrt_gemm_panels_i4, _i4_f16 and _i4_bf16: A (f32, f16 or
/// bf16) times an int4 weight B [N x K], given as the panels of its bytes
/// (I8 [N, K / 2], packed like an i8 weight's: byte row kb of a panel holds
/// each column's values at k = 2kb, low nibble, and 2kb + 1, high), with
/// its scales (`args.scales`, [K / group, N] in A's type) applied per group
/// of `args.group` columns of K.
template <DType Activation>
void gemmInt4PanelsService(const mfrt_gemm_args_v1 *args);

/// The microkernels: AVX-512 (8 rows x 32 columns a call), AVX2 with FMA
/// and F16C (6 rows x 16 columns) and a portable loop; AVX512-BF16 runs the
/// AVX-512 ones but for bf16 rows times bf16 panels, which it multiplies
/// by pairs of K (vdpbf16ps) without widening. The services run the best
/// this CPU has (panelIsa()).
enum class PanelIsa { Avx512Bf16, Avx512, Avx2, Portable };
PanelIsa panelIsa();
/// Whether this CPU runs `isa`'s microkernel.
bool runsPanelIsa(PanelIsa isa);
/// gemmPanelsService's product through `isa`'s microkernel (which this
/// CPU must run): the tests compare them.
template <DType Stored>
void gemmPanelsWith(PanelIsa isa, const mfrt_gemm_args_v1 &args);
template <DType Activation>
void gemmInt8PanelsWith(PanelIsa isa, const mfrt_gemm_args_v1 &args);
template <DType Activation>
void gemmInt4PanelsWith(PanelIsa isa, const mfrt_gemm_args_v1 &args);

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELS_PANELGEMM_H
