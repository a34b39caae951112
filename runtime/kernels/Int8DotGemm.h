//===- Int8DotGemm.h - int8 rows times int8 weights ------------*- C++ -*-===//
//
// W8A8: activations quantized per token (mf.dynamic_quantize) times an
// int8 weight with one scale per row, multiplied as int32 dot products and
// scaled once: C[m, n] = float(sum_k a[m, k] q[n, k]) * a_scale[m] *
// w_scale[n]. AVX512-VNNI's vpdpbusd multiplies 4 bytes of unsigned by 4 of
// signed per 32-bit lane and sums them, so the weight is packed once into
// "dot panels": panels of 32 rows as PanelGemm.h lays them out, but each
// [K / 4][w][4] (column j's four values at 4kb .. 4kb + 3 side by side: one
// lane) and stored plus 128 as unsigned bytes; the kernel subtracts 128
// times each row's sum of activations, which is exact in int32.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_INT8DOTGEMM_H
#define MFC_RUNTIME_KERNELS_INT8DOTGEMM_H

#include "runtime/base/Tensor.h"
#include "runtime/hal/KernelAbi.h"

#include <cstdint>

namespace mfrt {

/// One row of `k` activations quantized per token (mf.dynamic_quantize,
/// whose eager kernel calls it, as the services below do): the values in
/// `out` and their scale, max|x| / 127 as `scaleType` holds it, which the
/// values were divided by (rounded half to even, clamped to [-128, 127]).
/// A row of zeros has scale 0; one with a NaN or an infinity scale NaN (and
/// values 0), so that it propagates as in float.
float quantizeRowPerToken(const float *row, int64_t k, int8_t *out,
                          DType scaleType);

/// One row of `k` activations quantized with static scales and zero points
/// per channel (mf.quantize, whose eager kernel calls it):
/// clamp(round_half_even(x / scales[j] + zeroPoints[j]), -128, 127) in f32.
/// A NaN becomes the zero point (an int8 has no NaN; its product adds
/// nothing).
void quantizeRowStatic(const float *row, int64_t k, const float *scales,
                       const float *zeroPoints, int8_t *out);

/// Packs panels [panelBegin, panelEnd) of the [n, k] i8 `weight` (k a
/// multiple of 4) into dot panels in `panels` (n * k bytes, another buffer).
void packDotPanels(const int8_t *weight, int64_t n, int64_t k, int8_t *panels,
                   int64_t panelBegin, int64_t panelEnd);
/// The same in the weight's own storage.
void packDotPanelsInPlace(int8_t *weight, int64_t n, int64_t k,
                          int64_t panelBegin, int64_t panelEnd);
/// The [n, k] weight that dot panels hold.
void unpackDotPanels(const int8_t *panels, int64_t n, int64_t k,
                     int8_t *weight);

/// The services mfrt_gemm_i8i8_dot (f32), _f16 and _bf16: C[m x n] (f32,
/// row stride ldc) = rows m0.. of A ([M, K] of `Scale`) quantized per row
/// as mf.dynamic_quantize does (quantizeRowPerToken: values q_a, scales
/// s_a in `Scale`), times columns n0.. of B^T, B the dot panels of an
/// [N, K] i8 weight with `scales` [N] (of `Scale`): float(q_a . q_w[n]) *
/// s_a * s_w[n], in f32. `trans_b` is 1 and `trans_a` 0.
template <DType Scale> void gemmInt8DotService(const mfrt_gemm_args_v1 *args);
/// mfrt_gemm_i8i8 (_f16, _bf16): the same with B the [N, K] weight as
/// stored (a table that lookups also read, or --pack-weights=false).
template <DType Scale> void gemmInt8RowsService(const mfrt_gemm_args_v1 *args);

/// The microkernels: AVX512-VNNI (8 rows x 32 columns a call), AVX2 (the
/// bytes widened to 16 bits, vpmaddwd) and a portable loop (the same
/// integers). The service runs the best this CPU has (dotIsa()).
enum class DotIsa { Avx512Vnni, Avx2, Portable };
DotIsa dotIsa();
bool runsDotIsa(DotIsa isa);
/// gemmInt8DotService's product through `isa` (which this CPU must run):
/// the tests compare them.
template <DType Scale>
void gemmInt8DotWith(DotIsa isa, const mfrt_gemm_args_v1 &args);
/// gemmInt8RowsService's, the same.
template <DType Scale>
void gemmInt8RowsWith(DotIsa isa, const mfrt_gemm_args_v1 &args);

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELS_INT8DOTGEMM_H
