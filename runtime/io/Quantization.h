//===- Quantization.h - float weights to int8/int4 and scales --*- C++ -*-===//
//
// Round-to-nearest (RTN) weight quantization as MindFormers computes it
// (golden-stick's symmetric min-max quantizer, docs/quantization.md): for
// each row of an [N, K] weight (or each group of `group` columns of a row),
// with b bits, scale = 2 * max|w| / (2^b - 1) and
// q = clamp(round_half_even(w / scale), -2^(b-1), 2^(b-1) - 1); the
// weight's value is then q * scale. int4 values are stored two to a byte
// (golden-stick's qint4x2 packing: column 2j in the low nibble of byte j).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_IO_QUANTIZATION_H
#define MFC_RUNTIME_IO_QUANTIZATION_H

#include "runtime/base/Tensor.h"

#include <functional>
#include <vector>

namespace mfrt {

/// Quantizes the float [N, K] `weight` (any float dtype) to `bits` (8 or
/// 4) into `values` (I8, [N, K], or [N, K / 2] for 4 bits) and `scales` (a
/// float dtype, [N] for `group` 0, else [K / group, N]). The scales are
/// rounded to their dtype first and the values divided by the rounded
/// scale, so that q * scale is what a reader of the two computes. A row
/// (group) of zeros gets scale 0; a NaN or an infinity is an error.
/// With `firstRow`, `weight` is rows [firstRow, firstRow + its rows) of
/// the whole weight that `values` and `scales` hold (quantized a block at a
/// time, no float copy of the whole weight is needed).
/// With `rowMagnitudes` (group 0 only: one per row of `weight`), a row's
/// scale comes from that largest magnitude instead of the row's own: the
/// whole row's, when `weight` holds only some of its columns (a
/// row-parallel rank's, rowMaxMagnitudes of every rank's combined).
Status quantizeRtn(const Tensor &weight, int64_t group, int64_t bits,
                   Tensor &values, Tensor &scales, int64_t firstRow = 0,
                   const double *rowMagnitudes = nullptr);

/// The largest magnitude of each row of the float [N, K] `weight` (N
/// values; infinity for a row with a NaN or an infinity, which
/// quantizeRtn then refuses).
std::vector<double> rowMaxMagnitudes(const Tensor &weight);

/// A calibrated int8 weight's tensors (SmoothQuant: docs/quantization.md):
/// the [N, K] values, their scales [N] (f32: the activations' per-tensor
/// scale times the weight row's), the activations' input scales [K] and
/// zero points (I8 [K]) that mf.quantize reads, and the bias [N] that
/// corrects the product for the zero point. The float tensors are
/// allocated by the caller in the model's dtypes.
struct CalibratedWeight {
  Tensor values, scales, inputScales, zeroPoints, bias;
};

/// Quantizes the float [N, K] weight that `readRows(first, block)` gives a
/// block of rows at a time (in `computeType`, which the input scales and
/// the bias take) as golden-stick's SmoothQuant does, from the range of
/// each input channel over the calibration (`channelMin`, `channelMax`,
/// [K]): with `alpha` >= 0, smoothing factors
/// s[j] = max|x_j|^alpha / max|W[:, j]|^(1 - alpha) (1 where either is 0,
/// at least 1e-5) multiply the weight's columns and divide the activations;
/// the activations' per-tensor range after smoothing gives an asymmetric
/// int8 scale and zero point; the smoothed weight is quantized per row as
/// quantizeRtn does. An empty or non-finite range is an error.
Status quantizeCalibrated(
    int64_t n, int64_t k, DType computeType,
    const std::vector<float> &channelMin, const std::vector<float> &channelMax,
    double alpha, const std::function<Status(int64_t, Tensor &)> &readRows,
    const std::function<StatusOr<Tensor>(DType, const Shape &)> &allocate,
    CalibratedWeight &out);

/// The first of `scales` that is not positive and finite (what a
/// quantizer divides by), or -1.
int64_t firstUnusableScale(const Tensor &scales);

/// Symmetric int8 scales of an activation from the range of each channel
/// over a calibration (golden-stick's int8 KV cache, kvcache_symmetric):
/// scale = max(|min|, |max|) * 2 / 255 in f64, rounded to `scales`' float
/// dtype (which holds one per channel); a channel that was always 0 gets 1
/// (any scale holds it). An empty or non-finite range is an error.
Status symmetricChannelScales(const std::vector<float> &channelMin,
                              const std::vector<float> &channelMax,
                              Tensor &scales);

} // namespace mfrt

#endif // MFC_RUNTIME_IO_QUANTIZATION_H
