//===- Calibration.cpp - activation ranges for static quantization --------===//

#include "runtime/io/Calibration.h"

#include "runtime/io/Safetensors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

using namespace mfrt;

namespace {
constexpr const char *kFormat = "mfc-calibration";
const std::string kMinSuffix = ".input_min", kMaxSuffix = ".input_max";

/// `values` as a tensor that does not own them.
Tensor viewOf(std::vector<float> &values) {
  return Tensor(DType::F32, {static_cast<int64_t>(values.size())},
                std::shared_ptr<void>(values.data(), [](void *) {}));
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() > suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

StatusOr<Calibration> Calibration::read(const std::string &path) {
  MFRT_ASSIGN_OR_RETURN(CheckpointFile file, CheckpointFile::open(path));
  return fromFile(file, path);
}

StatusOr<Calibration> Calibration::fromFile(const CheckpointFile &file,
                                            const std::string &path) {
  auto format = file.metadata().find("format");
  if (format == file.metadata().end() || format->second != kFormat) {
    return Status::error(StatusCode::InvalidArgument,
                         "'" + path +
                             "' is not a calibration (its metadata has no "
                             "format 'mfc-calibration'); write one with "
                             "mf-run FLOAT.bin --task calibrate --data FILE "
                             "--save-calibration OUT");
  }
  Calibration calibration;
  for (const auto &[name, entry] : file.tensors()) {
    bool isMin = endsWith(name, kMinSuffix), isMax = endsWith(name, kMaxSuffix);
    if ((!isMin && !isMax) || entry.dtype != DType::F32 ||
        entry.shape.size() != 1) {
      return Status::error(StatusCode::InvalidArgument,
                           "'" + path + "': tensor '" + name +
                               "' is not an F32 '.input_min' or "
                               "'.input_max' vector");
    }
    std::string weight = name.substr(0, name.size() - kMinSuffix.size());
    Ranges &ranges = calibration.byName[weight];
    std::vector<float> &into = isMin ? ranges.min : ranges.max;
    into.resize(static_cast<size_t>(entry.shape[0]));
    Tensor tensor = viewOf(into);
    MFRT_RETURN_IF_ERROR(file.read(entry, tensor));
  }
  for (const auto &[weight, ranges] : calibration.byName) {
    bool ordered = ranges.min.size() == ranges.max.size();
    for (size_t j = 0; ordered && j < ranges.min.size(); ++j) {
      ordered = ranges.min[j] <= ranges.max[j] &&
                std::isfinite(ranges.min[j]) && std::isfinite(ranges.max[j]);
    }
    if (!ordered) {
      return Status::error(StatusCode::InvalidArgument,
                           "'" + path + "': the ranges of '" + weight +
                               "' are not a finite min and max of one length");
    }
  }
  return calibration;
}

Status Calibration::record(const std::string &name, const Tensor &rows,
                           int64_t channels) {
  int64_t k = channels > 0 ? channels : rows.rank() ? rows.shape().back() : 0;
  if (k <= 0) {
    return Status::ok();
  }
  if (rows.numElements() % k != 0) {
    return Status::error(StatusCode::InvalidArgument,
                         "calibration: '" + name + "' has " +
                             std::to_string(rows.numElements()) +
                             " values, not rows of " + std::to_string(k));
  }
  Ranges &ranges = byName[name];
  if (ranges.min.empty()) {
    ranges.min.assign(k, std::numeric_limits<float>::infinity());
    ranges.max.assign(k, -std::numeric_limits<float>::infinity());
  } else if (static_cast<int64_t>(ranges.min.size()) != k) {
    return Status::error(StatusCode::InvalidArgument,
                         "calibration: '" + name + "' has rows of " +
                             std::to_string(k) + " and of " +
                             std::to_string(ranges.min.size()) + " channels");
  }
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows.numElements() / k; ++r) {
    toFloats(rows.dtype(),
             static_cast<const char *>(rows.data()) +
                 r * k * dtypeSize(rows.dtype()),
             row.data(), k);
    for (int64_t j = 0; j < k; ++j) {
      // (std::min and std::max keep their first argument against a NaN.)
      ranges.min[j] = std::min(ranges.min[j], row[j]);
      ranges.max[j] = std::max(ranges.max[j], row[j]);
    }
  }
  return Status::ok();
}

Status Calibration::write(const std::string &path) const {
  std::vector<Tensor> tensors;
  std::vector<std::pair<std::string, const Tensor *>> named;
  tensors.reserve(2 * byName.size());
  for (const auto &[weight, ranges] : byName) {
    for (const std::vector<float> *values : {&ranges.min, &ranges.max}) {
      tensors.push_back(viewOf(const_cast<std::vector<float> &>(*values)));
      named.emplace_back(weight +
                             (values == &ranges.min ? kMinSuffix : kMaxSuffix),
                         &tensors.back());
    }
  }
  return writeSafetensors(
      path, named, {{"format", kFormat}, {"tokens", std::to_string(tokens)}});
}
