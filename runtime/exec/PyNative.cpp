//===- PyNative.cpp - op-by-op execution ----------------------------------===//

#include "runtime/exec/PyNative.h"

#include "runtime/kernels/Kernels.h"

using namespace mfrt;

StatusOr<std::vector<Tensor>>
PyNativeExecutor::run(const std::string &entryName, std::vector<Tensor> inputs,
                      const RunOptions &options) {
  StatusOr<const fb::Entry *> checked = checkedEntry(entryName, inputs);
  if (!checked) {
    return checked.status();
  }
  const fb::Entry *entry = *checked;
  MFRT_RETURN_IF_ERROR(beginRun(*entry, options));
  size_t valueCount = entry->values()->size();
  std::vector<Tensor> values(valueCount);
  for (size_t i = 0; i < inputs.size(); ++i) {
    values[entry->inputs()->Get(i)] = std::move(inputs[i]);
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

  // Calibration: the parameter each value reads (directly or cast), so
  // that a matmul by one transposed (a Linear) records its rows; each
  // attention records the channels of its keys and values (what an int8
  // KV cache holds) by its location.
  std::vector<int64_t> parameterRead;
  if (options.calibration) {
    parameterRead.assign(valueCount, -1);
  }
  std::vector<const Tensor *> operands;
  std::vector<Tensor> results;
  std::vector<Tensor *> resultSlots;
  for (size_t index = 0; index < opCount; ++index) {
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
    if (options.calibration) {
      if (op.kind() == fb::OpKind::Param) {
        parameterRead[resultId] = parameterOf(op);
      } else if (op.kind() == fb::OpKind::Cast) {
        parameterRead[resultId] = parameterRead[op.operands()->Get(0)];
      } else if (op.kind() == fb::OpKind::Matmul &&
                 op.attributes_as_MatmulAttrs()->transpose_rhs() &&
                 !op.attributes_as_MatmulAttrs()->transpose_lhs()) {
        if (int64_t parameter = parameterRead[op.operands()->Get(1)];
            parameter >= 0) {
          MFRT_RETURN_IF_ERROR(options.calibration->record(
              executable_.root().parameters()->Get(parameter)->name()->str(),
              *operands[0]));
        }
      } else if (op.kind() == fb::OpKind::Attention &&
                 operands[1]->rank() == 4) {
        int64_t channels = operands[1]->dim(2) * operands[1]->dim(3);
        MFRT_RETURN_IF_ERROR(options.calibration->record(
            location + ".key", *operands[1], channels));
        MFRT_RETURN_IF_ERROR(options.calibration->record(
            location + ".value", *operands[2], channels));
      }
    }
    results.assign(op.results()->size(), Tensor());
    Tensor &result = results[0];
    if (op.kind() == fb::OpKind::Param) {
      int64_t parameter = parameterOf(op);
      auto name = [&] { // for errors only: every decode step reads parameters
        return executable_.root().parameters()->Get(parameter)->name()->str();
      };
      if (weights_.storedAsPanels(parameter) || weights_.released(parameter)) {
        return Status::error(StatusCode::FailedPrecondition,
                             "parameter '" + name() +
                                 "' is stored as Graph Mode's panels or "
                                 "released for the values it derives; run "
                                 "PyNative on weights of its own");
      }
      result = weights_[parameter];
      if (options.checkNumerics && hasNonFinite(result)) {
        return Status::error(
            StatusCode::InvalidArgument,
            "parameter '" + name() + "' holds a NaN or an infinity (read at " +
                location + " in '" + entryName + "'); check the weights");
      }
    } else if (op.kind() == fb::OpKind::Assign) {
      result = weights_.mutableTensor(parameterOf(op));
      weights_.noteUpdated(); // what a Graph Mode executor derived is stale
      Status status = runOp(op, operands, {&result});
      if (!status) {
        return status.withContext("in '" + entryName + "'");
      }
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
      resultSlots.clear();
      for (size_t r = 0; r < results.size(); ++r) {
        if (r == 0 && inPlace) {
          result = values[firstOperand];
        } else {
          const fb::TensorType &resultType =
              *entry->values()->Get(op.results()->Get(r));
          StatusOr<Tensor> allocated = allocator_.allocate(
              Executable::dtypeOf(resultType), Executable::shapeOf(resultType));
          if (!allocated) {
            return allocated.status();
          }
          results[r] = allocated.take();
        }
        resultSlots.push_back(&results[r]);
      }
      Status status = runOp(op, operands, resultSlots);
      if (!status) {
        return status.withContext("in '" + entryName + "'");
      }
    }
    for (size_t r = 0; r < results.size(); ++r) {
      uint32_t id = op.results()->Get(r);
      MFRT_RETURN_IF_ERROR(observe(entryName, index,
                                   fb::EnumNameOpKind(op.kind()), location, id,
                                   results[r], opStart, options, r == 0));
      values[id] = std::move(results[r]);
    }
    if (op.operands()) {
      for (uint32_t id : *op.operands()) {
        if (lastUse[id] == index) {
          values[id] = Tensor(); // back to the allocator's cache
        }
      }
    }
  }

  std::vector<Tensor> outputs;
  for (uint32_t id : *entry->outputs()) {
    outputs.push_back(values[id]);
  }
  return outputs;
}
