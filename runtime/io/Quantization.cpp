//===- Quantization.cpp - float weights to int8/int4 and scales -----------===//

#include "runtime/io/Quantization.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

using namespace mfrt;

std::vector<double> mfrt::rowMaxMagnitudes(const Tensor &weight) {
  int64_t rows = weight.dim(0), k = weight.dim(1);
  std::vector<double> magnitudes(static_cast<size_t>(rows), 0.0);
  std::vector<float> row(static_cast<size_t>(k));
  const char *from = static_cast<const char *>(weight.data());
  for (int64_t r = 0; r < rows; ++r) {
    toFloats(weight.dtype(), from + r * k * dtypeSize(weight.dtype()),
             row.data(), k);
    for (float value : row) {
      magnitudes[r] = std::isfinite(value)
                          ? std::max(magnitudes[r], double(std::fabs(value)))
                          : INFINITY;
    }
  }
  return magnitudes;
}

Status mfrt::quantizeRtn(const Tensor &weight, int64_t group, int64_t bits,
                         Tensor &values, Tensor &scales, int64_t firstRow,
                         const double *rowMagnitudes) {
  int64_t perByte = bits == 4 ? 2 : 1;
  if (weight.rank() != 2 || (bits != 8 && bits != 4) ||
      (rowMagnitudes && group != 0) ||
      values.dtype() != DType::I8 || values.rank() != 2 ||
      values.dim(1) * perByte != weight.dim(1) || firstRow < 0 ||
      firstRow + weight.dim(0) > values.dim(0) || group < 0 ||
      (group > 0 && (weight.dim(1) % group != 0 || group % perByte != 0))) {
    return Status::error(StatusCode::InvalidArgument,
                         "cannot quantize a weight of shape " +
                             formatShape(weight.shape()) + " to " +
                             std::to_string(bits) + " bits in groups of " +
                             std::to_string(group));
  }
  int64_t rows = weight.dim(0), k = weight.dim(1), n = values.dim(0);
  int64_t width = group > 0 ? group : k, groups = k / width;
  Shape scaleShape = group > 0 ? Shape{groups, n} : Shape{n};
  if (scales.shape() != scaleShape || scales.dtype() == DType::I8 ||
      scales.dtype() == DType::I32) {
    return Status::error(
        StatusCode::InvalidArgument,
        "the scales of a quantized " + formatShape(values.shape()) +
            " weight are float " + formatShape(scaleShape) + ", not " +
            dtypeName(scales.dtype()) + " " + formatShape(scales.shape()));
  }
  const float high = bits == 4 ? 7.0f : 127.0f, low = -high - 1.0f;
  const int64_t scaleSize = dtypeSize(scales.dtype());
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<float> rowScales(static_cast<size_t>(groups));
  const char *from = static_cast<const char *>(weight.data());
  char *scaleBytes = static_cast<char *>(scales.data());
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = firstRow + r;
    toFloats(weight.dtype(), from + r * k * dtypeSize(weight.dtype()),
             row.data(), k);
    for (int64_t g = 0; g < groups; ++g) {
      float amax = 0;
      for (int64_t j = g * width; j < (g + 1) * width; ++j) {
        if (!std::isfinite(row[j])) {
          return Status::error(StatusCode::InvalidArgument,
                               "row " + std::to_string(at) +
                                   " has a non-finite value, which has no "
                                   "integer form");
        }
        amax = std::max(amax, std::fabs(row[j]));
      }
      if (rowMagnitudes) {
        if (!std::isfinite(rowMagnitudes[r])) {
          return Status::error(StatusCode::InvalidArgument,
                               "row " + std::to_string(at) +
                                   " has a non-finite value (in another "
                                   "rank's columns), which has no integer "
                                   "form");
        }
        amax = static_cast<float>(rowMagnitudes[r]);
      }
      float scale = 2.0f * amax / (high - low);
      // The scale as stored (f16 or bf16 round it) is what q multiplies:
      // group g of row `at` is at [g, at] (per row: [at]).
      char *stored = scaleBytes + (g * n + at) * scaleSize;
      fromFloats(scales.dtype(), &scale, stored, 1);
      toFloats(scales.dtype(), stored, &rowScales[g], 1);
      if (!std::isfinite(rowScales[g])) { // past f16's range
        return Status::error(StatusCode::InvalidArgument,
                             "row " + std::to_string(at) +
                                 " needs a scale of " + std::to_string(scale) +
                                 ", which " + dtypeName(scales.dtype()) +
                                 " cannot hold");
      }
    }
    int8_t *out = values.as<int8_t>() + at * (k / perByte);
    for (int64_t j = 0; j < k; ++j) {
      float scale = rowScales[j / width];
      // Round half to even (the default rounding mode), then clamp.
      float q = scale > 0
                    ? std::clamp(std::nearbyint(row[j] / scale), low, high)
                    : 0.0f;
      auto value = static_cast<int8_t>(q);
      if (bits == 8) {
        out[j] = value;
      } else if (j % 2 == 0) {
        out[j / 2] = static_cast<int8_t>(value & 0x0f);
      } else {
        out[j / 2] = static_cast<int8_t>(out[j / 2] |
                                         (static_cast<uint8_t>(value) << 4));
      }
    }
  }
  return Status::ok();
}

Status mfrt::quantizeCalibrated(
    int64_t n, int64_t k, DType computeType,
    const std::vector<float> &channelMin, const std::vector<float> &channelMax,
    double alpha, const std::function<Status(int64_t, Tensor &)> &readRows,
    const std::function<StatusOr<Tensor>(DType, const Shape &)> &allocate,
    CalibratedWeight &out) {
  if (static_cast<int64_t>(channelMin.size()) != k ||
      static_cast<int64_t>(channelMax.size()) != k) {
    return Status::error(
        StatusCode::InvalidArgument,
        "the calibration has ranges of " + std::to_string(channelMin.size()) +
            " input channels for a weight of " + std::to_string(k));
  }
  for (int64_t j = 0; j < k; ++j) {
    if (!std::isfinite(channelMin[j]) || !std::isfinite(channelMax[j]) ||
        channelMin[j] > channelMax[j]) {
      return Status::error(StatusCode::InvalidArgument,
                           "the calibration's range of input channel " +
                               std::to_string(j) + " is empty or not finite");
    }
  }
  const int64_t blockRows =
      std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, k));
  auto forEachBlock =
      [&](const std::function<Status(int64_t, Tensor &)> &visit) -> Status {
    for (int64_t first = 0; first < n; first += blockRows) {
      MFRT_ASSIGN_OR_RETURN(
          Tensor block,
          allocate(computeType, {std::min(blockRows, n - first), k}));
      MFRT_RETURN_IF_ERROR(readRows(first, block));
      MFRT_RETURN_IF_ERROR(visit(first, block));
    }
    return Status::ok();
  };
  // Smoothing factors from the activations' and the weight's column
  // ranges (golden-stick computes them in f32).
  std::vector<float> smooth(static_cast<size_t>(k), 1.0f);
  if (alpha >= 0) {
    std::vector<float> columnMax(static_cast<size_t>(k), 0.0f), row(smooth);
    MFRT_RETURN_IF_ERROR(forEachBlock([&](int64_t first, Tensor &block) {
      for (int64_t r = 0; r < block.dim(0); ++r) {
        toFloats(computeType,
                 static_cast<const char *>(block.data()) +
                     r * k * dtypeSize(computeType),
                 row.data(), k);
        for (int64_t j = 0; j < k; ++j) {
          if (!std::isfinite(row[j])) {
            return Status::error(StatusCode::InvalidArgument,
                                 "row " + std::to_string(first + r) +
                                     " has a non-finite value");
          }
          columnMax[j] = std::max(columnMax[j], std::fabs(row[j]));
        }
      }
      return Status::ok();
    }));
    for (int64_t j = 0; j < k; ++j) {
      float activation =
          std::max(std::fabs(channelMin[j]), std::fabs(channelMax[j]));
      float numerator = std::pow(activation, static_cast<float>(alpha));
      float denominator =
          std::pow(columnMax[j], static_cast<float>(1.0 - alpha));
      smooth[j] = numerator == 0 || denominator == 0
                      ? 1.0f
                      : std::max(numerator / denominator, 1e-5f);
    }
  }
  // The activations' per-tensor range after smoothing (x / s is monotone
  // in x), its asymmetric int8 scale and zero point in f64, as
  // golden-stick's cal_quantization_params.
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (int64_t j = 0; j < k; ++j) {
    low = std::min(low, static_cast<double>(channelMin[j] / smooth[j]));
    high = std::max(high, static_cast<double>(channelMax[j] / smooth[j]));
  }
  // The range holds 0, as MindSpore's quantizers widened it: the zero
  // point is then an int8 (golden-stick's does not widen, and a range
  // without 0 would overflow its int8 zero point).
  low = std::min(low, 0.0);
  high = std::max(high, 0.0);
  double scale = 1.0, zeroPoint = 0.0;
  if (high != low) {
    scale = (high - low) / 255.0;
    zeroPoint = std::nearbyint(-128.0 - low / scale);
  }
  MFRT_ASSIGN_OR_RETURN(out.values, allocate(DType::I8, {n, k}));
  MFRT_ASSIGN_OR_RETURN(out.scales, allocate(DType::F32, {n}));
  MFRT_ASSIGN_OR_RETURN(out.inputScales, allocate(computeType, {k}));
  MFRT_ASSIGN_OR_RETURN(out.zeroPoints, allocate(DType::I8, {k}));
  MFRT_ASSIGN_OR_RETURN(out.bias, allocate(computeType, {n}));
  MFRT_ASSIGN_OR_RETURN(Tensor rowScales, allocate(computeType, {n}));
  std::vector<float> inputScales(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    inputScales[j] = static_cast<float>(scale) * smooth[j];
  }
  fromFloats(computeType, inputScales.data(), out.inputScales.data(), k);
  toFloats(computeType, out.inputScales.data(), inputScales.data(), k);
  for (int64_t j = 0; j < k; ++j) {
    // (A smoothing factor near its floor of 1e-5 can take a scale below
    // f16's normal range: the rows would saturate.)
    if (!(std::isnormal(inputScales[j]) && inputScales[j] > 0)) {
      return Status::error(StatusCode::InvalidArgument,
                           "input channel " + std::to_string(j) +
                               " needs a scale of " +
                               std::to_string(scale * smooth[j]) + ", which " +
                               dtypeName(computeType) +
                               " holds only as a subnormal or 0; calibrate on "
                               "more text, or add the layer to "
                               "modules_to_not_convert");
    }
  }
  std::fill_n(out.zeroPoints.as<int8_t>(), k, static_cast<int8_t>(zeroPoint));
  // The smoothed weight (in the compute dtype, as golden-stick stores it)
  // quantized per row.
  std::vector<float> row(static_cast<size_t>(k));
  MFRT_RETURN_IF_ERROR(forEachBlock([&](int64_t first, Tensor &block) {
    char *bytes = static_cast<char *>(block.data());
    for (int64_t r = 0; r < block.dim(0); ++r) {
      char *at = bytes + r * k * dtypeSize(computeType);
      toFloats(computeType, at, row.data(), k);
      for (int64_t j = 0; j < k; ++j) {
        row[j] *= smooth[j];
      }
      fromFloats(computeType, row.data(), at, k);
    }
    return quantizeRtn(block, 0, 8, out.values, rowScales, first);
  }));
  std::vector<float> weightScales(static_cast<size_t>(n));
  toFloats(computeType, rowScales.data(), weightScales.data(), n);
  std::vector<float> bias(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    float combined = static_cast<float>(scale) * weightScales[r];
    out.scales.as<float>()[r] = combined;
    int64_t sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      sum += out.values.as<int8_t>()[r * k + j];
    }
    bias[r] =
        static_cast<float>(-zeroPoint * static_cast<double>(sum) * combined);
  }
  fromFloats(computeType, bias.data(), out.bias.data(), n);
  return Status::ok();
}

Status mfrt::symmetricChannelScales(const std::vector<float> &channelMin,
                                    const std::vector<float> &channelMax,
                                    Tensor &scales) {
  size_t channels = static_cast<size_t>(scales.numElements());
  if (channelMin.size() != channels || channelMax.size() != channels) {
    return Status::error(
        StatusCode::InvalidArgument,
        "the calibration has ranges of " + std::to_string(channelMin.size()) +
            " channels, the scales are " + formatShape(scales.shape()));
  }
  std::vector<float> values(channels);
  for (size_t c = 0; c < channels; ++c) {
    double low = channelMin[c], high = channelMax[c];
    if (!std::isfinite(low) || !std::isfinite(high) || low > high) {
      return Status::error(StatusCode::InvalidArgument,
                           "the calibration's range of channel " +
                               std::to_string(c) +
                               " is empty or not finite (was any token "
                               "calibrated?)");
    }
    double largest = std::max(std::fabs(low), std::fabs(high));
    values[c] = largest > 0 ? static_cast<float>(largest * 2.0 / 255.0) : 1.0f;
  }
  fromFloats(scales.dtype(), values.data(), scales.data(),
             static_cast<int64_t>(channels));
  // A scale its dtype cannot hold (an f16 one below 6e-8 or above 65504)
  // would divide by 0 or infinity.
  if (int64_t c = firstUnusableScale(scales); c >= 0) {
    char scale[32];
    std::snprintf(scale, sizeof(scale), "%g", values[c]);
    return Status::error(StatusCode::InvalidArgument,
                         "the scale of channel " + std::to_string(c) + " (" +
                             scale + ") does not fit the scales' dtype");
  }
  return Status::ok();
}

int64_t mfrt::firstUnusableScale(const Tensor &scales) {
  for (int64_t i = 0; i < scales.numElements(); ++i) {
    float scale = scales.loadFloat(i);
    if (!(scale > 0) || !std::isfinite(scale)) {
      return i;
    }
  }
  return -1;
}
