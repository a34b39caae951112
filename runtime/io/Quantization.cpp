//===- Quantization.cpp - float weights to int8/int4 and scales -----------===//

#include "runtime/io/Quantization.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace mfrt;

Status mfrt::quantizeRtn(const Tensor &weight, int64_t group, int64_t bits,
                         Tensor &values, Tensor &scales, int64_t firstRow) {
  int64_t perByte = bits == 4 ? 2 : 1;
  if (weight.rank() != 2 || (bits != 8 && bits != 4) ||
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
