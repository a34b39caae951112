//===- PyNative.cpp - op-by-op execution ----------------------------------===//

#include "runtime/PyNative.h"

#include "runtime/Kernels.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <fstream>

using namespace mfrt;

PyNativeExecutor::PyNativeExecutor(const Executable &executable,
                                   const Weights &weights, Allocator &allocator)
    : executable_(executable), weights_(weights), allocator_(allocator),
      start_(std::chrono::steady_clock::now()) {}

StatusOr<std::vector<Tensor>>
PyNativeExecutor::allocateInputs(const std::string &entryName) {
  const fb::Entry *entry = executable_.entry(entryName);
  if (!entry) {
    return Status::error("the executable has no entry '" + entryName + "'");
  }
  std::vector<Tensor> inputs;
  for (uint32_t id : *entry->inputs()) {
    const fb::TensorType &type = *entry->values()->Get(id);
    StatusOr<Tensor> tensor = allocator_.allocate(Executable::dtypeOf(type),
                                                  Executable::shapeOf(type));
    if (!tensor) {
      return tensor.status();
    }
    inputs.push_back(tensor.take());
  }
  return inputs;
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

bool hasNonFinite(const Tensor &tensor) {
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

} // namespace

StatusOr<std::vector<Tensor>>
PyNativeExecutor::run(const std::string &entryName, std::vector<Tensor> inputs,
                      const RunOptions &options) {
  const fb::Entry *entry = executable_.entry(entryName);
  if (!entry) {
    return Status::error("the executable has no entry '" + entryName + "'");
  }
  size_t valueCount = entry->values()->size();
  if (inputs.size() != entry->inputs()->size()) {
    return Status::error("'" + entryName + "' takes " +
                         std::to_string(entry->inputs()->size()) +
                         " inputs, got " + std::to_string(inputs.size()));
  }
  std::vector<Tensor> values(valueCount);
  for (size_t i = 0; i < inputs.size(); ++i) {
    uint32_t id = entry->inputs()->Get(i);
    const fb::TensorType &type = *entry->values()->Get(id);
    if (inputs[i].dtype() != Executable::dtypeOf(type) ||
        inputs[i].shape() != Executable::shapeOf(type)) {
      return Status::error("input '" + entry->input_names()->Get(i)->str() +
                           "' of '" + entryName + "' must be " +
                           dtypeName(Executable::dtypeOf(type)) +
                           formatShape(Executable::shapeOf(type)));
    }
    values[id] = std::move(inputs[i]);
  }

  // The last op that reads each value; outputs live to the end.
  size_t opCount = entry->ops() ? entry->ops()->size() : 0;
  std::vector<size_t> lastUse(valueCount, 0);
  for (size_t index = 0; index < opCount; ++index) {
    const fb::Op &op = *entry->ops()->Get(index);
    if (op.operands()) {
      for (uint32_t id : *op.operands()) {
        lastUse[id] = index;
      }
    }
  }
  for (uint32_t id : *entry->outputs()) {
    lastUse[id] = opCount;
  }

  if (!options.dumpTensorsDir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.dumpTensorsDir, error);
    if (error) {
      return Status::error("cannot create '" + options.dumpTensorsDir +
                           "': " + error.message());
    }
  }

  // Graph Mode: which op starts a kernel dispatch.
  std::map<size_t, const fb::Dispatch *> dispatchAt;
  if (options.kernels && entry->dispatches()) {
    for (const fb::Dispatch *dispatch : *entry->dispatches()) {
      dispatchAt[dispatch->first_op()] = dispatch;
    }
  }

  std::vector<const Tensor *> operands;
  for (size_t index = 0; index < opCount; ++index) {
    auto dispatchIt = dispatchAt.find(index);
    if (dispatchIt != dispatchAt.end()) {
      const fb::Dispatch &dispatch = *dispatchIt->second;
      MFRT_RETURN_IF_ERROR(
          runDispatch(*entry, dispatch, *options.kernels, values));
      size_t end = index + dispatch.op_count();
      // Inputs whose last reader was inside the dispatched range are done.
      for (uint32_t id : *dispatch.inputs()) {
        if (lastUse[id] < end && !options.capturedValues) {
          values[id] = Tensor();
        }
      }
      index = end - 1;
      continue;
    }
    const fb::Op &op = *entry->ops()->Get(index);
    uint32_t resultId = op.results()->Get(0);
    const fb::TensorType &type = *entry->values()->Get(resultId);
    DType dtype = Executable::dtypeOf(type);
    Shape shape = Executable::shapeOf(type);
    std::string location = op.location() ? op.location()->str() : "";
    auto opStart = std::chrono::steady_clock::now();

    operands.clear();
    if (op.operands()) {
      for (uint32_t id : *op.operands()) {
        operands.push_back(&values[id]);
      }
    }
    Tensor result;
    if (op.kind() == fb::OpKind::Param) {
      result = weights_[op.ints()->Get(0)];
    } else if (op.kind() == fb::OpKind::Reshape &&
               operands[0]->dtype() == dtype &&
               operands[0]->numElements() == *checkedElementCount(shape)) {
      result = operands[0]->reshaped(shape);
    } else {
      uint32_t firstOperand = op.operands() ? op.operands()->Get(0) : 0;
      bool inPlace = op.kind() == fb::OpKind::KvCacheWrite &&
                     lastUse[firstOperand] == index &&
                     values[firstOperand].shape() == shape &&
                     values[firstOperand].dtype() == dtype;
      if (inPlace) {
        result = values[firstOperand];
      } else {
        StatusOr<Tensor> allocated = allocator_.allocate(dtype, shape);
        if (!allocated) {
          return allocated.status();
        }
        result = allocated.take();
      }
      Status status = runKernel(op, operands, result);
      if (!status) {
        return status.withContext("in '" + entryName + "'");
      }
    }
    if (options.checkNumerics && hasNonFinite(result) &&
        op.kind() == fb::OpKind::Param) {
      return Status::error(
          "parameter '" +
          executable_.root().parameters()->Get(op.ints()->Get(0))->name()->str() +
          "' holds a NaN or an infinity (read at " + location + " in '" +
          entryName + "'); check the weights");
    }
    if (options.checkNumerics && hasNonFinite(result)) {
      return Status::error("op " + std::to_string(index) + " (" +
                           fb::EnumNameOpKind(op.kind()) + " at " + location +
                           ") of '" + entryName +
                           "' produced a NaN or an infinity; it is the first "
                           "that did");
    }
    if (!options.dumpTensorsDir.empty()) {
      char prefix[32];
      std::snprintf(prefix, sizeof(prefix), "%s.%04zu.", entryName.c_str(),
                    index);
      MFRT_RETURN_IF_ERROR(writeNpy(options.dumpTensorsDir + "/" + prefix +
                                        sanitize(location.empty()
                                                     ? fb::EnumNameOpKind(op.kind())
                                                     : location) +
                                        ".npy",
                                    result));
    }
    if (options.traceEvents) {
      auto micros = [&](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration_cast<std::chrono::microseconds>(t - start_)
            .count();
      };
      auto opEnd = std::chrono::steady_clock::now();
      options.traceEvents->push_back(
          "{\"name\":\"" + std::string(fb::EnumNameOpKind(op.kind())) +
          "\",\"cat\":\"" + entryName + "\",\"ph\":\"X\",\"ts\":" +
          std::to_string(micros(opStart)) + ",\"dur\":" +
          std::to_string(micros(opEnd) - micros(opStart)) +
          ",\"pid\":0,\"tid\":0,\"args\":{\"path\":\"" + sanitize(location) +
          "\",\"shape\":\"" + formatShape(shape) + "\"}}");
    }
    values[resultId] = std::move(result);
    if (op.operands()) {
      for (uint32_t id : *op.operands()) {
        if (lastUse[id] == index && !options.capturedValues) {
          values[id] = Tensor(); // back to the allocator's cache
        }
      }
    }
  }

  std::vector<Tensor> outputs;
  for (uint32_t id : *entry->outputs()) {
    outputs.push_back(values[id]);
  }
  if (options.capturedValues) {
    *options.capturedValues = std::move(values);
  }
  return outputs;
}

namespace {
using KernelArgument = void *;
/// Calls a kernel with the bare-pointer ABI: void mfk_N(T *..., T *...).
void callKernel(void *entry, const std::vector<KernelArgument> &a) {
  using P = KernelArgument;
  switch (a.size()) {
  case 1: reinterpret_cast<void (*)(P)>(entry)(a[0]); return;
  case 2: reinterpret_cast<void (*)(P, P)>(entry)(a[0], a[1]); return;
  case 3: reinterpret_cast<void (*)(P, P, P)>(entry)(a[0], a[1], a[2]); return;
  case 4: reinterpret_cast<void (*)(P, P, P, P)>(entry)(a[0], a[1], a[2], a[3]); return;
  case 5: reinterpret_cast<void (*)(P, P, P, P, P)>(entry)(a[0], a[1], a[2], a[3], a[4]); return;
  case 6: reinterpret_cast<void (*)(P, P, P, P, P, P)>(entry)(a[0], a[1], a[2], a[3], a[4], a[5]); return;
  case 7: reinterpret_cast<void (*)(P, P, P, P, P, P, P)>(entry)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); return;
  case 8: reinterpret_cast<void (*)(P, P, P, P, P, P, P, P)>(entry)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); return;
  }
}
} // namespace

Status PyNativeExecutor::runDispatch(const fb::Entry &entry,
                                     const fb::Dispatch &dispatch,
                                     const KernelLibrary &kernels,
                                     std::vector<Tensor> &values) {
  const std::string &name =
      executable_.root().kernels()->Get(dispatch.kernel())->str();
  void *kernel = kernels.symbol(name);
  if (!kernel) {
    return Status::error("kernel '" + name + "' is not in the library");
  }
  std::vector<KernelArgument> pointers;
  for (uint32_t id : *dispatch.inputs()) {
    if (!values[id].defined()) {
      return Status::error("kernel '" + name + "' reads a value that was "
                           "never computed");
    }
    pointers.push_back(values[id].data());
  }
  for (uint32_t id : *dispatch.outputs()) {
    const fb::TensorType &type = *entry.values()->Get(id);
    StatusOr<Tensor> output = allocator_.allocate(Executable::dtypeOf(type),
                                                  Executable::shapeOf(type));
    if (!output) {
      return output.status();
    }
    values[id] = output.take();
    pointers.push_back(values[id].data());
  }
  callKernel(kernel, pointers);
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
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  if (!stream) {
    return Status::error("cannot write '" + path + "'");
  }
  stream.write("\x93NUMPY\x01\x00", 8);
  uint16_t length = static_cast<uint16_t>(header.size());
  stream.put(static_cast<char>(length & 0xff));
  stream.put(static_cast<char>(length >> 8));
  stream.write(header.data(), header.size());
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    if (isInt) {
      int32_t value = tensor.as<int32_t>()[i];
      stream.write(reinterpret_cast<const char *>(&value), 4);
    } else {
      float value = tensor.loadFloat(i);
      stream.write(reinterpret_cast<const char *>(&value), 4);
    }
  }
  return stream ? Status::ok() : Status::error("cannot write '" + path + "'");
}
