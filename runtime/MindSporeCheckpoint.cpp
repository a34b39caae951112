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
// A 7B model's file is over protobuf's 2 GB message limit, so the outer
// message is walked record by record with protobuf's CodedInputStream, and
// each tensor's bytes stay where they are in the mapped file (a bytes field
// is stored raw). MindSpore writes a large tensor as consecutive values
// with the same tag; those are joined. Every length and count is checked
// against the file before use; an error names the tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <cstring>

using namespace mfrt;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

namespace {

constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t tagOf(uint32_t field, uint32_t wireType) {
  return field << 3 | wireType;
}

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
  static const char *prefixes[] = {"adam_m.", "adam_v.", "accu_grads.",
                                   "moment1.", "moment2.", "global_step",
                                   "epoch_num", "step_num", "loss_scale",
                                   "scale_sense", "current_iterator_step",
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

/// Reads the TensorProto that `in` is limited to.
bool readTensor(CodedInputStream &in, size_t base, Record &record) {
  record.hasTensor = true;
  while (uint32_t tag = in.ReadTag()) {
    uint32_t length = 0;
    switch (tag) {
    case tagOf(1, 0): { // dims, unpacked
      uint64_t dim;
      if (!in.ReadVarint64(&dim)) {
        return false;
      }
      record.dims.push_back(static_cast<int64_t>(dim));
      break;
    }
    case tagOf(1, kLengthDelimited): { // dims, packed
      if (!in.ReadVarint32(&length)) {
        return false;
      }
      CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
      while (in.BytesUntilLimit() > 0) {
        uint64_t dim;
        if (!in.ReadVarint64(&dim)) {
          return false;
        }
        record.dims.push_back(static_cast<int64_t>(dim));
      }
      in.PopLimit(limit);
      break;
    }
    case tagOf(2, kLengthDelimited):
      if (!in.ReadVarint32(&length) ||
          !in.ReadString(&record.type, static_cast<int>(length))) {
        return false;
      }
      break;
    case tagOf(3, kLengthDelimited):
      if (!in.ReadVarint32(&length)) {
        return false;
      }
      record.contentOffset = base + static_cast<size_t>(in.CurrentPosition());
      record.contentSize = length;
      if (!in.Skip(static_cast<int>(length))) {
        return false;
      }
      break;
    default:
      if (!WireFormatLite::SkipField(&in, tag)) {
        return false;
      }
    }
  }
  return in.ConsumedEntireMessage();
}

/// Reads one Value record of `length` bytes at data[base].
bool readRecord(const uint8_t *data, size_t base, size_t length,
                Record &record) {
  CodedInputStream in(data + base, static_cast<int>(length));
  while (uint32_t tag = in.ReadTag()) {
    uint32_t size = 0;
    if (tag == tagOf(1, kLengthDelimited)) {
      if (!in.ReadVarint32(&size) ||
          !in.ReadString(&record.name, static_cast<int>(size))) {
        return false;
      }
    } else if (tag == tagOf(2, kLengthDelimited)) {
      if (!in.ReadVarint32(&size)) {
        return false;
      }
      CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(size));
      if (!readTensor(in, base, record)) {
        return false;
      }
      in.PopLimit(limit);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

} // namespace

StatusOr<CheckpointFile> CheckpointFile::fromMindSporeBytes(
    std::vector<uint8_t> bytes, const std::string &name) {
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
    return Status::error("'" + name + "': " + message);
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
    CodedInputStream header(data + offset,
                            static_cast<int>(std::min<size_t>(size - offset, 16)));
    uint32_t tag = header.ReadTag();
    uint32_t length = 0;
    if (tag != tagOf(1, kLengthDelimited) || !header.ReadVarint32(&length)) {
      return fail("byte " + std::to_string(offset) +
                  " is not a Checkpoint value" + after() +
                  "; the file is corrupt or not a MindSpore checkpoint");
    }
    size_t begin = offset + static_cast<size_t>(header.CurrentPosition());
    if (length > static_cast<uint32_t>(INT_MAX)) {
      return fail("a value at byte " + std::to_string(offset) + after() +
                  " claims " + std::to_string(length) +
                  " bytes, more than protobuf's 2 GiB limit");
    }
    if (length > size - begin) {
      // The tag comes first: name the tensor if what remains holds it.
      Record partial;
      readRecord(data, begin, size - begin, partial);
      std::string what = partial.name.empty()
                             ? "a value" + after()
                             : "tensor '" + partial.name + "'";
      return fail(what + " at byte " + std::to_string(offset) + " claims " +
                  std::to_string(length) + " bytes but " +
                  std::to_string(size - begin) +
                  " remain; the file is truncated");
    }
    Record record;
    bool read = readRecord(data, begin, length, record);
    std::string what =
        record.name.empty() ? "a value" + after() : "tensor '" + record.name + "'";
    if (!read || record.name.empty() || !record.hasTensor) {
      return fail(what + " at byte " + std::to_string(offset) +
                  " is malformed (" +
                  (!read ? "its fields do not parse"
                   : record.name.empty() ? "no tag"
                                         : "no tensor") +
                  ")");
    }
    offset = begin + length;

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
      // A slice of the tensor before: MindSpore splits large tensors.
      CheckpointEntry &entry = file.tensors_[record.name];
      std::vector<uint8_t> joined(entry.data, entry.data + entry.size);
      joined.insert(joined.end(), data + record.contentOffset,
                    data + record.contentOffset + record.contentSize);
      file.joined_.push_back(std::move(joined));
      entry.data = file.joined_.back().data();
      entry.size = file.joined_.back().size();
      entry.joined = true;
      continue;
    }
    if (file.tensors_.count(record.name)) {
      return fail("tensor '" + record.name + "' is stored twice");
    }
    file.tensors_[record.name] = {*dtype, record.dims, record.contentOffset,
                                  record.contentSize, data + record.contentOffset};
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
