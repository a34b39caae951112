//===- Executor.cpp - what PyNative and Graph Mode have in common ---------===//

#include "runtime/exec/Executor.h"

#include "runtime/base/FileIO.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

using namespace mfrt;

Executor::Executor(const Executable &executable, Weights &weights,
                   Allocator &allocator)
    : executable_(executable), weights_(weights), allocator_(allocator),
      start_(std::chrono::steady_clock::now()) {}

StatusOr<Tensor> Executor::allocateInput(const std::string &entryName,
                                         size_t index) {
  const fb::Entry *entry = executable_.entry(entryName);
  if (!entry) {
    return Status::error(StatusCode::NotFound,
                         "the executable has no entry '" + entryName + "'");
  }
  if (index >= entry->inputs()->size()) {
    return Status::error(StatusCode::NotFound, "'" + entryName +
                                                   "' has no input " +
                                                   std::to_string(index));
  }
  const fb::TensorType &type =
      *entry->values()->Get(entry->inputs()->Get(index));
  return allocator_.allocate(Executable::dtypeOf(type),
                             Executable::shapeOf(type));
}

StatusOr<std::vector<Tensor>>
Executor::allocateInputs(const std::string &entryName) {
  const fb::Entry *entry = executable_.entry(entryName);
  if (!entry) {
    return Status::error(StatusCode::NotFound,
                         "the executable has no entry '" + entryName + "'");
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < entry->inputs()->size(); ++i) {
    StatusOr<Tensor> tensor = allocateInput(entryName, i);
    if (!tensor) {
      return tensor.status();
    }
    inputs.push_back(tensor.take());
  }
  return inputs;
}

StatusOr<const fb::Entry *>
Executor::checkedEntry(const std::string &entryName,
                       const std::vector<Tensor> &inputs) {
  const fb::Entry *entry = executable_.entry(entryName);
  if (!entry) {
    return Status::error(StatusCode::NotFound,
                         "the executable has no entry '" + entryName + "'");
  }
  if (inputs.size() != entry->inputs()->size()) {
    return Status::error(StatusCode::InvalidArgument,
                         "'" + entryName + "' takes " +
                             std::to_string(entry->inputs()->size()) +
                             " inputs, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const fb::TensorType &type = *entry->values()->Get(entry->inputs()->Get(i));
    if (!Executable::hasType(type, inputs[i].dtype(), inputs[i].shape())) {
      return Status::error(StatusCode::InvalidArgument,
                           "input '" + entry->input_names()->Get(i)->str() +
                               "' of '" + entryName + "' must be " +
                               dtypeName(Executable::dtypeOf(type)) +
                               formatShape(Executable::shapeOf(type)));
    }
  }
  return entry;
}

Status Executor::beginRun(const fb::Entry &entry, const RunOptions &options) {
  if (!options.dumpTensorsDir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.dumpTensorsDir, error);
    if (error) {
      return Status::error(StatusCode::Unavailable,
                           "cannot create '" + options.dumpTensorsDir +
                               "': " + error.message());
    }
  }
  if (options.capturedValues) {
    options.capturedValues->assign(entry.values()->size(), Tensor());
  }
  return Status::ok();
}

namespace {

std::string sanitize(std::string name) {
  for (char &c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
        c != '-') {
      c = '_';
    }
  }
  return name;
}

} // namespace

bool mfrt::hasNonFinite(const Tensor &tensor) {
  if (tensor.dtype() == DType::I32) {
    return false;
  }
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    if (!std::isfinite(tensor.loadFloat(i))) {
      return true;
    }
  }
  return false;
}

Status Executor::observe(const std::string &entryName, size_t index,
                         const std::string &what, const std::string &location,
                         uint32_t valueId, const Tensor &value,
                         std::chrono::steady_clock::time_point began,
                         const RunOptions &options, bool traced) {
  if (options.moeStats && what == "MoeRoute") {
    // Its offsets (rank 1): each expert's pairs; its positions (rank 2):
    // -1 for a dropped pair.
    MoeStats::Layer &layer = options.moeStats->layers[location];
    const int32_t *data = value.as<int32_t>();
    if (value.rank() == 1) {
      layer.received.resize(value.numElements() - 1, 0);
      for (int64_t e = 0; e + 1 < value.numElements(); ++e) {
        layer.received[e] += data[e + 1] - data[e];
      }
    } else {
      layer.runs += 1;
      layer.routed += value.numElements();
      layer.dropped += std::count_if(data, data + value.numElements(),
                                     [](int32_t place) { return place < 0; });
    }
  }
  if (options.checkNumerics && hasNonFinite(value)) {
    return Status::error(StatusCode::InvalidArgument,
                         "op " + std::to_string(index) + " (" + what + " at " +
                             location + ") of '" + entryName +
                             "' produced a NaN or an infinity; it is the first "
                             "that did");
  }
  if (!options.dumpTensorsDir.empty()) {
    char prefix[32];
    std::snprintf(prefix, sizeof(prefix), "%s.%04zu.", entryName.c_str(),
                  index);
    // A command's later outputs (a multi-result op's, a kernel's) carry
    // their value id: they share the first's index and location.
    std::string suffix = traced ? "" : "." + std::to_string(valueId);
    MFRT_RETURN_IF_ERROR(writeNpy(
        options.dumpTensorsDir + "/" + prefix +
            sanitize(location.empty() ? what : location) + suffix + ".npy",
        value));
  }
  if (options.traceEvents && traced) {
    // Microseconds to the nanosecond: decode's kernels take less than one.
    auto micros = [](std::chrono::steady_clock::duration elapsed) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.3f",
                    std::chrono::duration<double, std::micro>(elapsed).count());
      return std::string(text);
    };
    auto ended = std::chrono::steady_clock::now();
    options.traceEvents->push_back(
        "{\"name\":\"" + what + "\",\"cat\":\"" + entryName +
        "\",\"ph\":\"X\",\"ts\":" + micros(began - start_) +
        ",\"dur\":" + micros(ended - began) +
        ",\"pid\":0,\"tid\":0,\"args\":{\"path\":\"" + sanitize(location) +
        "\",\"shape\":\"" + formatShape(value.shape()) + "\"}}");
  }
  if (options.capturedValues) {
    StatusOr<Tensor> copy = allocator_.allocate(value.dtype(), value.shape());
    if (!copy) {
      return copy.status();
    }
    std::memcpy(copy->data(), value.data(), value.byteSize());
    (*options.capturedValues)[valueId] = copy.take();
  }
  return Status::ok();
}

Status mfrt::writeNpy(const std::string &path, const Tensor &tensor) {
  bool isInt = tensor.dtype() == DType::I32;
  std::string shape = "(";
  for (int64_t dim : tensor.shape()) {
    shape += std::to_string(dim) + ",";
  }
  if (tensor.rank() > 1) {
    shape.pop_back();
  }
  shape += ")";
  std::string header = std::string("{'descr': '") + (isInt ? "<i4" : "<f4") +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  return writeFileAtomically(path, "array", [&](FileWriter &out) {
    out.write("\x93NUMPY\x01\x00", 8);
    uint8_t length[2] = {static_cast<uint8_t>(header.size() & 0xff),
                         static_cast<uint8_t>(header.size() >> 8)};
    out.write(length, 2);
    out.write(header);
    if (isInt) {
      out.write(tensor.data(), tensor.byteSize());
      return Status::ok();
    }
    // f32 rows, converted a block at a time.
    std::vector<float> block(std::min<int64_t>(tensor.numElements(), 1 << 16));
    for (int64_t begin = 0; begin < tensor.numElements();
         begin += static_cast<int64_t>(block.size())) {
      int64_t count =
          std::min<int64_t>(block.size(), tensor.numElements() - begin);
      for (int64_t i = 0; i < count; ++i) {
        block[i] = tensor.loadFloat(begin + i);
      }
      out.write(block.data(), count * sizeof(float));
    }
    return Status::ok();
  });
}

Status Executor::runOp(const fb::Op &op,
                       const std::vector<const Tensor *> &inputs,
                       const std::vector<Tensor *> &outputs,
                       const ParallelFor &parallel) {
  std::vector<int64_t> vocabulary = vocabularyAxes(op);
  if (!isCollective(op.kind()) && vocabulary.empty()) {
    return runKernel(op, inputs, outputs, parallel);
  }
  Tensor &output = *outputs[0]; // collectives have one result
  if (!communicator_) {
    return Status::error(StatusCode::FailedPrecondition,
                         "a collective needs the program's ranks (mf-run "
                         "starts them under mpirun)");
  }
  if (!vocabulary.empty()) {
    // This rank's block of the vocabulary: the table's rows, the logits'
    // columns (the gradient of the table: its result's rows).
    int64_t rows = op.kind() == fb::OpKind::Embedding       ? inputs[0]->dim(0)
                   : op.kind() == fb::OpKind::EmbeddingGrad ? output.dim(0)
                                                            : inputs[0]->dim(1);
    VocabularyBlock block;
    block.first = communicator_->indexAlong(vocabulary) * rows;
    block.vocabulary = communicator_->extentAlong(vocabulary) * rows;
    block.combine = [&](double *values, int64_t count,
                        VocabularyBlock::Combine how) {
      return communicator_->allReduceInPlace(
          values, count, how == VocabularyBlock::Combine::Max, vocabulary);
    };
    return runKernel(op, inputs, outputs, parallel, block);
  }
  std::vector<int64_t> axes = gridAxesOf(op);
  switch (op.kind()) {
  case fb::OpKind::AllReduce:
    return communicator_->allReduceSum(*inputs[0], output, axes);
  case fb::OpKind::AllToAllOffsets:
    return communicator_->allToAllOffsets(*inputs[0], output, axes);
  case fb::OpKind::AllToAll:
    return communicator_->allToAll(*inputs[0], *inputs[1], *inputs[2], output,
                                   axes);
  case fb::OpKind::ProcessIndex:
    output.as<int32_t>()[0] =
        static_cast<int32_t>(communicator_->indexAlong(axes));
    return Status::ok();
  case fb::OpKind::AllToAllDims: {
    const auto *attrs = op.attributes_as_AllToAllDimsAttrs();
    return communicator_->allToAllDims(*inputs[0], output, attrs->split_dim(),
                                       attrs->concat_dim(), axes);
  }
  default:
    break;
  }
  int64_t dim = collectiveDimension(op);
  switch (op.kind()) {
  case fb::OpKind::AllGather:
    return communicator_->allGather(*inputs[0], output, dim, axes);
  case fb::OpKind::ReduceScatter:
    return communicator_->reduceScatterSum(*inputs[0], output, dim, axes);
  default:
    return communicator_->keepBlock(*inputs[0], output, dim, axes);
  }
}
