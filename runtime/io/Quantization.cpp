//===- Quantization.cpp - float weights to int8 and scales ----------------===//

#include "runtime/io/Quantization.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace mfrt;

Status mfrt::quantizeRtn(const Tensor &weight, int64_t group, Tensor &values,
                         Tensor &scales, int64_t firstRow) {
  if (weight.rank() != 2 || values.dtype() != DType::I8 || values.rank() != 2 ||
      values.dim(1) != weight.dim(1) || firstRow < 0 ||
      firstRow + weight.dim(0) > values.dim(0) || group < 0 ||
      (group > 0 && weight.dim(1) % group != 0)) {
    return Status::error(StatusCode::InvalidArgument,
                         "cannot quantize a weight of shape " +
                             formatShape(weight.shape()) + " in groups of " +
                             std::to_string(group));
  }
  int64_t rows = weight.dim(0), k = weight.dim(1);
  int64_t width = group > 0 ? group : k, groups = k / width;
  Shape scaleShape =
      group > 0 ? Shape{values.dim(0), groups} : Shape{values.dim(0)};
  if (scales.shape() != scaleShape || scales.dtype() == DType::I8 ||
      scales.dtype() == DType::I32) {
    return Status::error(
        StatusCode::InvalidArgument,
        "the scales of a quantized " + formatShape(values.shape()) +
            " weight are float " + formatShape(scaleShape) + ", not " +
            dtypeName(scales.dtype()) + " " + formatShape(scales.shape()));
  }
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<float> rowScales(static_cast<size_t>(groups));
  const char *from = static_cast<const char *>(weight.data());
  char *scaleBytes = static_cast<char *>(scales.data());
  for (int64_t n = 0; n < rows; ++n) {
    toFloats(weight.dtype(), from + n * k * dtypeSize(weight.dtype()),
             row.data(), k);
    for (int64_t g = 0; g < groups; ++g) {
      float amax = 0;
      for (int64_t j = g * width; j < (g + 1) * width; ++j) {
        if (!std::isfinite(row[j])) {
          return Status::error(StatusCode::InvalidArgument,
                               "row " + std::to_string(firstRow + n) +
                                   " has a non-finite value, which has no "
                                   "int8 form");
        }
        amax = std::max(amax, std::fabs(row[j]));
      }
      rowScales[g] = 2.0f * amax / 255.0f;
    }
    // The scales as stored (f16 or bf16 round them) are what q multiplies.
    char *stored =
        scaleBytes + (firstRow + n) * groups * dtypeSize(scales.dtype());
    fromFloats(scales.dtype(), rowScales.data(), stored, groups);
    toFloats(scales.dtype(), stored, rowScales.data(), groups);
    for (int64_t j = 0; j < k; ++j) {
      float scale = rowScales[j / width];
      row[j] = scale > 0 ? row[j] / scale : 0.0f;
    }
    fromFloats(DType::I8, row.data(), values.as<int8_t>() + (firstRow + n) * k,
               k);
  }
  return Status::ok();
}
