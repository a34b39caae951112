//===- MindSporeCheckpoint.cpp - MindSpore .ckpt files as tensors ---------===//
//
// MindSpore's checkpoint is a protobuf message (the public schema of
// mindspore/ccsrc/utils/checkpoint.proto):
//
//   Checkpoint  { repeated Value value = 1; }
//   Value       { string tag = 1; TensorProto tensor = 2; }
//   TensorProto { repeated int64 dims = 1; string tensor_type = 2;
//                 bytes tensor_content = 3; }
//
// The wire format is read here directly: a 7B model's file is past
// protobuf's 2 GB message limit, a tensor's bytes must stay where they are
// in the mapped file (a bytes field is stored raw), and Debian 12's
// libsentencepiece carries a protobuf 3.14 of its own whose exported
// symbols make a process that also loads the system's libprotobuf 3.21
// abort at start (measured: mf-run with both died in protobuf's version
// check). The schema is three messages of one to three fields, so a
// bounds-checked varint and length reader is all it takes. MindSpore
// writes a large tensor as consecutive values with the same tag; those are
// joined. Every length and count is checked against the file before use;
// an error names the tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Safetensors.h"

#include <climits>
#include <cstring>
#include <optional>

using namespace mfrt;

namespace {

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2,
                   kFixed32 = 5;
constexpr uint32_t tagOf(uint32_t field, uint32_t wireType) {
  return field << 3 | wireType;
}

/// Protobuf's wire format over [data + position, data + end): varints,
/// tags, length-delimited fields, skips. Every read checks the end.
class WireReader {
public:
  WireReader(const uint8_t *data, size_t begin, size_t end)
      : data_(data), position_(begin), end_(end) {}

  bool atEnd() const { return position_ >= end_; }
  size_t position() const { return position_; }

  std::optional<uint64_t> varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (position_ >= end_) {
        return std::nullopt;
      }
      uint8_t byte = data_[position_++];
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) {
        return value;
      }
    }
    return std::nullopt; // more than 10 bytes
  }
  /// A length-delimited field's [begin, end), checked against the end.
  std::optional<std::pair<size_t, size_t>> delimited() {
    std::optional<uint64_t> length = varint();
    if (!length || *length > end_ - position_) {
      return std::nullopt;
    }
    size_t begin = position_;
    position_ += *length;
    return std::make_pair(begin, position_);
  }
  bool skip(uint32_t tag) {
    switch (tag & 7) {
    case kVarint:
      return varint().has_value();
    case kFixed64:
      return advance(8);
    case kLengthDelimited:
      return delimited().has_value();
    case kFixed32:
      return advance(4);
    default:
      return false; // groups and invalid wire types
    }
  }

private:
  bool advance(size_t bytes) {
    if (bytes > end_ - position_) {
      return false;
    }
    position_ += bytes;
    return true;
  }
  const uint8_t *data_;
  size_t position_, end_;
};

/// MindSpore's tensor_type names of the float types mf-run reads.
std::optional<DType> dtypeOf(const std::string &type) {
  if (type == "Float32") {
    return DType::F32;
  }
  if (type == "Float16") {
    return DType::F16;
  }
  if (type == "BFloat16") {
    return DType::BF16;
  }
  if (type == "Int32") {
    return DType::I32;
  }
  return std::nullopt;
}

/// What MindFormers' trainer saves beside the weights: optimizer moments,
/// step counters, loss scales. Not parameters of the model.
bool isTrainerState(const std::string &name) {
  static const char *prefixes[] = {"adam_m.",
                                   "adam_v.",
                                   "accu_grads.",
                                   "moment1.",
                                   "moment2.",
                                   "global_step",
                                   "epoch_num",
                                   "step_num",
                                   "loss_scale",
                                   "scale_sense",
                                   "current_iterator_step",
                                   "last_overflow_iterator_step",
                                   "learning_rate"};
  for (const char *prefix : prefixes) {
    if (name.rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

/// One Value record, its tensor's bytes as an offset into the file.
struct Record {
  std::string name;
  std::string type;
  Shape dims;
  size_t contentOffset = 0, contentSize = 0;
  bool hasTensor = false;
};

/// Reads the TensorProto in data[begin, end).
bool readTensor(const uint8_t *data, size_t begin, size_t end, Record &record) {
  record.hasTensor = true;
  WireReader in(data, begin, end);
  while (!in.atEnd()) {
    std::optional<uint64_t> tag = in.varint();
    if (!tag || *tag > UINT32_MAX) {
      return false;
    }
    switch (static_cast<uint32_t>(*tag)) {
    case tagOf(1, kVarint): { // dims, unpacked
      std::optional<uint64_t> dim = in.varint();
      if (!dim) {
        return false;
      }
      record.dims.push_back(static_cast<int64_t>(*dim));
      break;
    }
    case tagOf(1, kLengthDelimited): { // dims, packed
      auto field = in.delimited();
      if (!field) {
        return false;
      }
      WireReader dims(data, field->first, field->second);
      while (!dims.atEnd()) {
        std::optional<uint64_t> dim = dims.varint();
        if (!dim) {
          return false;
        }
        record.dims.push_back(static_cast<int64_t>(*dim));
      }
      break;
    }
    case tagOf(2, kLengthDelimited): {
      auto field = in.delimited();
      if (!field) {
        return false;
      }
      record.type.assign(reinterpret_cast<const char *>(data + field->first),
                         field->second - field->first);
      break;
    }
    case tagOf(3, kLengthDelimited): {
      auto field = in.delimited();
      if (!field) {
        return false;
      }
      record.contentOffset = field->first;
      record.contentSize = field->second - field->first;
      break;
    }
    default:
      if (!in.skip(static_cast<uint32_t>(*tag))) {
        return false;
      }
    }
  }
  return true;
}

/// Reads one Value record in data[begin, end).
bool readRecord(const uint8_t *data, size_t begin, size_t end, Record &record) {
  WireReader in(data, begin, end);
  while (!in.atEnd()) {
    std::optional<uint64_t> tag = in.varint();
    if (!tag || *tag > UINT32_MAX) {
      return false;
    }
    if (*tag == tagOf(1, kLengthDelimited)) {
      auto field = in.delimited();
      if (!field) {
        return false;
      }
      record.name.assign(reinterpret_cast<const char *>(data + field->first),
                         field->second - field->first);
    } else if (*tag == tagOf(2, kLengthDelimited)) {
      auto field = in.delimited();
      if (!field || !readTensor(data, field->first, field->second, record)) {
        return false;
      }
    } else if (!in.skip(static_cast<uint32_t>(*tag))) {
      return false;
    }
  }
  return true;
}

} // namespace

StatusOr<CheckpointFile>
CheckpointFile::fromMindSporeBytes(std::vector<uint8_t> bytes,
                                   const std::string &name) {
  auto storage = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return parseMindSpore(storage->data(), storage->size(), storage, name);
}

StatusOr<CheckpointFile>
CheckpointFile::parseMindSpore(const uint8_t *data, size_t size,
                               std::shared_ptr<const void> storage,
                               const std::string &name) {
  CheckpointFile file;
  file.storage_ = std::move(storage);
  file.name_ = name;
  auto fail = [&](const std::string &message) {
    return Status::error(StatusCode::DataLoss, "'" + name + "': " + message);
  };
  std::string previous; // the last tensor read, for errors and slices
  auto after = [&] {
    return previous.empty() ? std::string(" (the first value)")
                            : " (after tensor '" + previous + "')";
  };
  size_t skipped = 0;
  size_t offset = 0;
  while (offset < size) {
    // The record's header: field 1 of Checkpoint, length-delimited.
    WireReader header(data, offset, size);
    std::optional<uint64_t> tag = header.varint();
    std::optional<uint64_t> length = header.varint();
    if (tag != std::optional<uint64_t>(tagOf(1, kLengthDelimited)) || !length) {
      return fail("byte " + std::to_string(offset) +
                  " is not a Checkpoint value" + after() +
                  "; the file is corrupt or not a MindSpore checkpoint");
    }
    size_t begin = header.position();
    if (*length > size - begin) {
      // The tag comes first: name the tensor if what remains holds it.
      Record partial;
      readRecord(data, begin, size, partial);
      std::string what = partial.name.empty() ? "a value" + after()
                                              : "tensor '" + partial.name + "'";
      return fail(what + " at byte " + std::to_string(offset) + " claims " +
                  std::to_string(*length) + " bytes but " +
                  std::to_string(size - begin) +
                  " remain; the file is truncated");
    }
    Record record;
    bool read = readRecord(data, begin, begin + *length, record);
    std::string what = record.name.empty() ? "a value" + after()
                                           : "tensor '" + record.name + "'";
    if (!read || record.name.empty() || !record.hasTensor) {
      return fail(what + " at byte " + std::to_string(offset) +
                  " is malformed (" +
                  (!read                 ? "its fields do not parse"
                   : record.name.empty() ? "no tag"
                                         : "no tensor") +
                  ")");
    }
    offset = begin + *length;

    if (isTrainerState(record.name)) {
      ++skipped;
      previous = record.name;
      continue;
    }
    std::optional<DType> dtype = dtypeOf(record.type);
    if (!dtype) {
      return fail("tensor '" + record.name + "' has type '" + record.type +
                  "'; mf-run reads Float32, Float16, BFloat16 and Int32");
    }
    for (int64_t dim : record.dims) {
      if (dim < 0) {
        return fail("tensor '" + record.name + "' has a negative dimension");
      }
    }
    if (record.name == previous && file.tensors_.count(record.name)) {
      // A slice of the tensor before: MindSpore splits large tensors, each
      // slice with the whole tensor's type and dims.
      CheckpointEntry &entry = file.tensors_[record.name];
      if (*dtype != entry.dtype || record.dims != entry.shape) {
        return fail("tensor '" + record.name + "' is stored in slices that " +
                    "disagree: " + formatShape(entry.shape) + " then " +
                    formatShape(record.dims) + ", type '" + record.type +
                    "' after another");
      }
      // One buffer per joined tensor, appended to (copying the whole for
      // each slice made many slices quadratic).
      if (!entry.joined) {
        file.joined_.emplace_back(entry.data, entry.data + entry.size);
        entry.joined = true;
      }
      std::vector<uint8_t> &joined = file.joined_.back();
      joined.insert(joined.end(), data + record.contentOffset,
                    data + record.contentOffset + record.contentSize);
      entry.data = joined.data();
      entry.size = joined.size();
      continue;
    }
    if (file.tensors_.count(record.name)) {
      return fail("tensor '" + record.name + "' is stored twice");
    }
    file.tensors_[record.name] = {*dtype, record.dims, record.contentOffset,
                                  record.contentSize,
                                  data + record.contentOffset};
    previous = record.name;
  }
  // Sizes once the slices are joined.
  for (const auto &[tensorName, entry] : file.tensors_) {
    StatusOr<int64_t> count = checkedElementCount(entry.shape);
    if (!count ||
        static_cast<uint64_t>(*count) > entry.size / dtypeSize(entry.dtype) ||
        static_cast<uint64_t>(*count) * dtypeSize(entry.dtype) != entry.size) {
      return fail("tensor '" + tensorName + "' has " +
                  std::to_string(entry.size) + " bytes of data but its shape " +
                  formatShape(entry.shape) + " and type need " +
                  (count ? std::to_string(static_cast<uint64_t>(*count) *
                                          dtypeSize(entry.dtype))
                         : std::string("more than 2^63")));
    }
  }
  if (file.tensors_.empty()) {
    return fail("no tensors (an empty or non-MindSpore file)");
  }
  if (skipped) {
    file.metadata_["mindspore_trainer_state_skipped"] = std::to_string(skipped);
  }
  return file;
}
