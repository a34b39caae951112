//===- ExecutableWriter.cpp - mf module -> model.bin flatbuffer -----------===//
//
// 1. Parameters become a table indexed by position; `mf.param` refers to it.
// 2. Each entry function becomes an op list over numbered values: block
//    arguments first, then op results in order. Every value has its type.
// 3. Op attributes go into the generic `ints` / `floats` / `data` slots that
//    the schema documents per op kind.
//
//===----------------------------------------------------------------------===//

#include "compiler/Serialize/ExecutableWriter.h"

#include "dialects/MF/IR/MFOps.h"
#include "runtime/ContentChecksum.h"
#include "runtime/schemas/mf_executable_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <functional>

using namespace mlir;
using namespace mfc;
namespace fb = ::mfbin;

namespace {

FailureOr<fb::DType> toDType(Type type, Location loc) {
  if (type.isF32()) {
    return fb::DType::F32;
  }
  if (type.isF16()) {
    return fb::DType::F16;
  }
  if (type.isBF16()) {
    return fb::DType::BF16;
  }
  if (type.isSignlessInteger(32)) {
    return fb::DType::I32;
  }
  return emitError(loc) << "element type " << type
                        << " has no executable encoding";
}

fb::DType toDType(DType type) {
  switch (type) {
  case DType::F32:
    return fb::DType::F32;
  case DType::F16:
    return fb::DType::F16;
  case DType::BF16:
    return fb::DType::BF16;
  }
  return fb::DType::F32;
}

/// The op kind and attributes of one mf op.
struct EncodedOp {
  fb::OpKind kind;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<uint8_t> data;
};

class Writer {
public:
  Writer(ModuleOp module, const ModelSpec &spec, const ExecutableKernels &kernels)
      : module_(module), spec_(spec), kernels_(kernels),
        signatures_(kernels.names.size()) {}

  FailureOr<std::vector<uint8_t>> write() {
    std::vector<flatbuffers::Offset<fb::Parameter>> parameters;
    for (auto parameter : module_.getOps<mf::ParameterOp>()) {
      auto type = tensorType(parameter.getTensorType(), parameter.getLoc());
      if (failed(type)) {
        return failure();
      }
      parameterIndex_[parameter.getSymName()] = parameters.size();
      fb::ParameterInit init =
          parameter.getInit() == mf::ParameterInit::zeros ? fb::ParameterInit::Zeros
          : parameter.getInit() == mf::ParameterInit::ones ? fb::ParameterInit::Ones
                                                           : fb::ParameterInit::Normal;
      double std = parameter.getStd() ? parameter.getStd()->convertToDouble() : 0;
      parameters.push_back(fb::CreateParameterDirect(
          builder_, parameter.getSymName().str().c_str(),
          parameter.getMfName() ? parameter.getMfName()->str().c_str() : nullptr,
          *type, init, std, parameter.getFrozen(), parameter.getState()));
    }

    std::vector<flatbuffers::Offset<fb::Entry>> entries;
    for (auto function : module_.getOps<func::FuncOp>()) {
      auto entry = writeEntry(function);
      if (failed(entry)) {
        return failure();
      }
      entries.push_back(*entry);
    }

    const ModelConfig &model = spec_.model;
    auto training = writeTraining();
    auto info = fb::CreateModelInfoDirect(
        builder_, spec_.modelName.c_str(),
        model.family == ModelFamily::GPT2 ? fb::ModelFamily::GPT2
                                          : fb::ModelFamily::Llama,
        toString(spec_.runMode), spec_.contextMode, spec_.seed,
        spec_.entryBatchSize(), model.seqLength, model.vocabSize,
        model.numLayers, model.usePast, model.bosTokenId, &model.eosTokenIds,
        model.padTokenId, model.ignoreTokenId, model.doSample, model.topK,
        model.topP, model.temperature, model.repetitionPenalty,
        model.maxDecodeLength, toDType(model.computeDtype), training);
    std::vector<uint8_t> library(kernels_.library.begin(), kernels_.library.end());
    std::vector<flatbuffers::Offset<flatbuffers::String>> names;
    for (const std::string &name : kernels_.names) {
      names.push_back(builder_.CreateString(name));
    }
    FailureOr<std::vector<flatbuffers::Offset<fb::KernelSignature>>> signatures =
        writeKernelSignatures();
    if (failed(signatures)) {
      return failure();
    }
    // The checksum's field holds a placeholder (not the default, so it is
    // stored) until the buffer is sealed.
    flatbuffers::Offset<fb::KernelTarget> target;
    if (!library.empty()) {
      std::vector<flatbuffers::Offset<flatbuffers::String>> features;
      for (const std::string &feature : kernels_.features) {
        features.push_back(builder_.CreateString(feature));
      }
      target = fb::CreateKernelTargetDirect(builder_, kernels_.triple.str().c_str(),
                                            kernels_.cpu.str().c_str(), &features);
    }
    auto root = fb::CreateExecutableDirect(
        builder_, kExecutableFormatVersion, "cpu", info, &parameters, &entries,
        library.empty() ? nullptr : &library, names.empty() ? nullptr : &names,
        signatures->empty() ? nullptr : &*signatures,
        /*content_crc32=*/1, target);
    fb::FinishExecutableBuffer(builder_, root);
    std::vector<uint8_t> bytes(builder_.GetBufferPointer(),
                               builder_.GetBufferPointer() + builder_.GetSize());
    if (!mfrt::sealContentChecksum(bytes.data(), bytes.size())) {
      return module_.emitError("the executable has no checksum field"), failure();
    }
    return bytes;
  }

private:
  /// What each kernel takes, from the dispatches that call it (mf.kernel):
  /// they must agree, since one kernel has one signature.
  struct KernelSignature {
    SmallVector<Type> inputs, outputs;
    int64_t tiles;
    SmallVector<int32_t> panelInputs;
    Location loc;
    bool operator==(const KernelSignature &other) const {
      return inputs == other.inputs && outputs == other.outputs &&
             tiles == other.tiles && panelInputs == other.panelInputs;
    }
  };

  LogicalResult noteKernelSignature(uint32_t kernel, KernelSignature signature) {
    std::optional<KernelSignature> &known = signatures_[kernel];
    if (!known) {
      known = std::move(signature);
      return success();
    }
    if (!(*known == signature)) {
      InFlightDiagnostic diagnostic =
          mlir::emitError(signature.loc)
          << "kernel '" << kernels_.names[kernel]
          << "' is called with another signature than before";
      diagnostic.attachNote(known->loc) << "first called here";
      return failure();
    }
    return success();
  }

  FailureOr<std::vector<flatbuffers::Offset<fb::KernelSignature>>>
  writeKernelSignatures() {
    std::vector<flatbuffers::Offset<fb::KernelSignature>> written;
    for (auto [index, signature] : llvm::enumerate(signatures_)) {
      if (!signature) {
        return module_.emitError() << "kernel '" << kernels_.names[index]
                                   << "' is never dispatched",
               failure();
      }
      auto types = [&](ArrayRef<Type> list)
          -> FailureOr<std::vector<flatbuffers::Offset<fb::TensorType>>> {
        std::vector<flatbuffers::Offset<fb::TensorType>> encoded;
        for (Type type : list) {
          auto tensor = tensorType(cast<RankedTensorType>(type), signature->loc);
          if (failed(tensor)) {
            return failure();
          }
          encoded.push_back(*tensor);
        }
        return encoded;
      };
      auto inputs = types(signature->inputs);
      auto outputs = types(signature->outputs);
      if (failed(inputs) || failed(outputs)) {
        return failure();
      }
      std::vector<uint32_t> panels(signature->panelInputs.begin(),
                                   signature->panelInputs.end());
      written.push_back(fb::CreateKernelSignatureDirect(
          builder_, &*inputs, &*outputs,
          static_cast<uint32_t>(signature->tiles),
          panels.empty() ? nullptr : &panels));
    }
    return written;
  }

  /// The schedule and runner settings (schedule names reduced to the four
  /// shapes the runtime implements); the optimizer is in train_step.
  flatbuffers::Offset<fb::Training> writeTraining() {
    const OptimizerConfig &optimizer = spec_.optimizer;
    const LrScheduleConfig &lr = spec_.lrSchedule;
    StringRef type = lr.type;
    const char *schedule = type.contains_insensitive("cosine")   ? "cosine"
                           : type.contains_insensitive("linear") ? "linear"
                           : type.contains_insensitive("polynomial")
                               ? "polynomial"
                               : "constant";
    // MindFormers replaces the optimizer's rate by the schedule; a bare
    // optimizer.learning_rate counts when the schedule is the default.
    double rate = lr.type == "constant" && optimizer.learningRate
                      ? *optimizer.learningRate
                      : lr.learningRate;
    return fb::CreateTrainingDirect(
        builder_, rate, schedule, lr.lrEnd, lr.warmupSteps, lr.warmupRatio,
        lr.warmupLrInit, lr.totalSteps, lr.power,
        spec_.runner.gradientAccumulationSteps, spec_.runner.epochs,
        spec_.model.pet.petType == "lora"
            ? spec_.model.pet.loraAlpha / spec_.model.pet.loraRank
            : 0.0);
  }

  FailureOr<flatbuffers::Offset<fb::TensorType>>
  tensorType(RankedTensorType type, Location loc) {
    auto dtype = toDType(type.getElementType(), loc);
    if (failed(dtype)) {
      return failure();
    }
    std::vector<int64_t> shape(type.getShape());
    return fb::CreateTensorTypeDirect(builder_, *dtype, &shape);
  }

  FailureOr<flatbuffers::Offset<fb::Entry>> writeEntry(func::FuncOp function) {
    llvm::DenseMap<Value, uint32_t> ids;
    std::vector<flatbuffers::Offset<fb::TensorType>> values;
    std::vector<int64_t> offsets; // per value: its arena offset or -1
    auto number = [&](Value value, Location loc,
                      int64_t offset = -1) -> LogicalResult {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type) {
        return emitError(loc) << "only tensor values can be serialized";
      }
      auto encoded = tensorType(type, loc);
      if (failed(encoded)) {
        return failure();
      }
      ids[value] = values.size();
      values.push_back(*encoded);
      offsets.push_back(offset);
      return success();
    };

    std::vector<uint32_t> inputs;
    std::vector<std::string> inputNames;
    for (BlockArgument argument : function.getArguments()) {
      if (failed(number(argument, function.getLoc()))) {
        return failure();
      }
      inputs.push_back(ids[argument]);
      auto name = function.getArgAttrOfType<StringAttr>(argument.getArgNumber(),
                                                        "mf.name");
      inputNames.push_back(name ? name.str() : "");
    }

    std::vector<flatbuffers::Offset<fb::Op>> ops;
    std::vector<flatbuffers::Offset<fb::Dispatch>> dispatches;
    std::vector<uint32_t> outputs;
    // The op-level program is the graph with fusion regions flattened:
    // PyNative runs the same ops a fused kernel computes, one by one.
    std::function<LogicalResult(Block &)> writeBlock = [&](Block &block) {
      for (Operation &op : block) {
        if (auto ret = dyn_cast<func::ReturnOp>(op)) {
          for (Value operand : ret.getOperands()) {
            outputs.push_back(ids.lookup(operand));
          }
          continue;
        }
        if (auto fusion = dyn_cast<mf::FusionOp>(op)) {
          Block &body = fusion.getBody().front();
          for (auto [argument, input] :
               llvm::zip(body.getArguments(), fusion.getInputs())) {
            ids[argument] = ids.lookup(input);
          }
          uint32_t firstOp = ops.size();
          if (failed(writeBlock(body))) {
            return failure();
          }
          auto yield = cast<mf::YieldOp>(body.getTerminator());
          for (auto [result, yielded] :
               llvm::zip(fusion.getResults(), yield.getValues())) {
            ids[result] = ids.lookup(yielded);
          }
          for (auto [result, offset] :
               llvm::zip(fusion.getResults(), arenaOffsetsOf(fusion))) {
            offsets[ids[result]] = offset;
          }
          if (std::optional<uint32_t> kernel = kernelIndexOf(fusion)) {
            std::vector<uint32_t> inputs, outputs;
            for (Value input : fusion.getInputs()) {
              inputs.push_back(ids.lookup(input));
            }
            for (Value result : fusion.getResults()) {
              outputs.push_back(ids.lookup(result));
            }
            auto tiles = fusion->getAttrOfType<IntegerAttr>("mf.tiles");
            std::vector<uint32_t> panelInputs;
            if (auto panels =
                    fusion->getAttrOfType<DenseI32ArrayAttr>("mf.panel_inputs")) {
              panelInputs.assign(panels.asArrayRef().begin(),
                                 panels.asArrayRef().end());
            }
            uint32_t tileCount = tiles ? static_cast<uint32_t>(tiles.getInt()) : 1;
            if (failed(noteKernelSignature(
                    *kernel,
                    {SmallVector<Type>(fusion.getInputs().getTypes()),
                     SmallVector<Type>(fusion.getResultTypes()), tileCount,
                     SmallVector<int32_t>(panelInputs.begin(), panelInputs.end()),
                     fusion.getLoc()}))) {
              return failure();
            }
            dispatches.push_back(fb::CreateDispatchDirect(
                builder_, *kernel, firstOp,
                static_cast<uint32_t>(ops.size()) - firstOp, &inputs, &outputs,
                tileCount, panelInputs.empty() ? nullptr : &panelInputs));
          }
          continue;
        }
        if (isa<mf::YieldOp>(op)) {
          continue;
        }
        FailureOr<EncodedOp> encoded = encode(&op);
        if (failed(encoded)) {
          return failure();
        }
        std::vector<uint32_t> operands, results;
        for (Value operand : op.getOperands()) {
          operands.push_back(ids.lookup(operand));
        }
        for (auto [result, offset] :
             llvm::zip(op.getResults(), arenaOffsetsOf(&op))) {
          if (failed(number(result, op.getLoc(), offset))) {
            return failure();
          }
          results.push_back(ids[result]);
        }
        ops.push_back(fb::CreateOpDirect(
            builder_, encoded->kind, &operands, &results, &encoded->ints,
            &encoded->floats, encoded->data.empty() ? nullptr : &encoded->data,
            mf::getModelPath(op.getLoc()).c_str()));
      }
      return success();
    };
    if (failed(writeBlock(function.getBody().front()))) {
      return failure();
    }
    std::vector<std::string> outputNames;
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      auto name = function.getResultAttrOfType<StringAttr>(i, "mf.name");
      outputNames.push_back(name ? name.str() : "");
    }
    auto inputNameOffsets = builder_.CreateVectorOfStrings(inputNames);
    auto outputNameOffsets = builder_.CreateVectorOfStrings(outputNames);
    auto arena = function->getAttrOfType<IntegerAttr>("mf.arena_bytes");
    return fb::CreateEntry(
        builder_, builder_.CreateString(function.getSymName().str()),
        builder_.CreateVector(values), builder_.CreateVector(inputs),
        inputNameOffsets, builder_.CreateVector(outputs), outputNameOffsets,
        builder_.CreateVector(ops), builder_.CreateVector(dispatches),
        arena ? static_cast<uint64_t>(arena.getInt()) : 0,
        arena ? builder_.CreateVector(offsets) : 0);
  }

  /// The planned arena offset of each result of `op` (-1: none).
  SmallVector<int64_t> arenaOffsetsOf(Operation *op) {
    SmallVector<int64_t> offsets(op->getNumResults(), -1);
    if (auto planned = op->getAttrOfType<DenseI64ArrayAttr>("mf.arena_offsets")) {
      llvm::copy(planned.asArrayRef().take_front(offsets.size()),
                 offsets.begin());
    }
    return offsets;
  }

  /// The index of the kernel a fusion region runs, if it has one.
  std::optional<uint32_t> kernelIndexOf(mf::FusionOp fusion) {
    auto name = fusion->getAttrOfType<StringAttr>("mf.kernel");
    if (!name) {
      return std::nullopt;
    }
    auto position = llvm::find(kernels_.names, name.str());
    if (position == kernels_.names.end()) {
      return std::nullopt;
    }
    return static_cast<uint32_t>(position - kernels_.names.begin());
  }

  FailureOr<EncodedOp> encode(Operation *op) {
    auto simple = [](fb::OpKind kind) { return EncodedOp{kind, {}, {}, {}}; };
    auto withDim = [](fb::OpKind kind, int64_t dim) {
      return EncodedOp{kind, {dim}, {}, {}};
    };
    auto withFloat = [](fb::OpKind kind, double value) {
      return EncodedOp{kind, {}, {value}, {}};
    };
    std::optional<EncodedOp> encoded =
        llvm::TypeSwitch<Operation *, std::optional<EncodedOp>>(op)
            .Case([&](mf::ParamOp param) -> std::optional<EncodedOp> {
              auto it = parameterIndex_.find(param.getName());
              if (it == parameterIndex_.end()) {
                return std::nullopt;
              }
              return EncodedOp{fb::OpKind::Param,
                               {static_cast<int64_t>(it->second)}, {}, {}};
            })
            .Case([&](mf::AssignOp assign) -> std::optional<EncodedOp> {
              auto it = parameterIndex_.find(assign.getName());
              if (it == parameterIndex_.end()) {
                return std::nullopt;
              }
              return EncodedOp{fb::OpKind::Assign,
                               {static_cast<int64_t>(it->second),
                                assign->hasAttr("mf.in_place")},
                               {},
                               {}};
            })
            .Case([&](mf::ConstantOp constant) -> std::optional<EncodedOp> {
              auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
              if (!dense) {
                return std::nullopt;
              }
              // A splat keeps its one element (the runtime repeats it).
              EncodedOp result{fb::OpKind::Constant, {}, {}, {}};
              ArrayRef<char> raw = dense.getRawData();
              result.data.assign(raw.begin(), raw.end());
              return result;
            })
            .Case([&](mf::IotaOp iota) {
              return withDim(fb::OpKind::Iota, iota.getDimension());
            })
            .Case([&](mf::AddOp) { return simple(fb::OpKind::Add); })
            .Case([&](mf::SubOp) { return simple(fb::OpKind::Sub); })
            .Case([&](mf::MulOp) { return simple(fb::OpKind::Mul); })
            .Case([&](mf::DivOp) { return simple(fb::OpKind::Div); })
            .Case([&](mf::MaxOp) { return simple(fb::OpKind::Max); })
            .Case([&](mf::MinOp) { return simple(fb::OpKind::Min); })
            .Case([&](mf::NegOp) { return simple(fb::OpKind::Neg); })
            .Case([&](mf::ExpOp) { return simple(fb::OpKind::Exp); })
            .Case([&](mf::LogOp) { return simple(fb::OpKind::Log); })
            .Case([&](mf::TanhOp) { return simple(fb::OpKind::Tanh); })
            .Case([&](mf::SqrtOp) { return simple(fb::OpKind::Sqrt); })
            .Case([&](mf::RsqrtOp) { return simple(fb::OpKind::Rsqrt); })
            .Case([&](mf::SiluOp) { return simple(fb::OpKind::Silu); })
            .Case([&](mf::GeluOp gelu) {
              return withDim(fb::OpKind::Gelu,
                             gelu.getApproximate() == mf::GeluApproximation::tanh);
            })
            .Case([&](mf::CastOp) { return simple(fb::OpKind::Cast); })
            .Case([&](mf::BroadcastOp) { return simple(fb::OpKind::Broadcast); })
            .Case([&](mf::ReduceSumOp reduce) {
              return withDim(fb::OpKind::ReduceSum, reduce.getDimension());
            })
            .Case([&](mf::ReduceMaxOp reduce) {
              return withDim(fb::OpKind::ReduceMax, reduce.getDimension());
            })
            .Case([&](mf::ReshapeOp) { return simple(fb::OpKind::Reshape); })
            .Case([&](mf::TransposeOp transpose) {
              std::vector<int64_t> permutation(transpose.getPermutation());
              return EncodedOp{fb::OpKind::Transpose, permutation, {}, {}};
            })
            .Case([&](mf::SliceOp slice) {
              std::vector<int64_t> offsets(slice.getOffsets());
              return EncodedOp{fb::OpKind::Slice, offsets, {}, {}};
            })
            .Case([&](mf::ConcatOp concat) {
              return withDim(fb::OpKind::Concat, concat.getDimension());
            })
            .Case([&](mf::EmbeddingOp) { return simple(fb::OpKind::Embedding); })
            .Case([&](mf::RmsNormOp norm) {
              return withFloat(fb::OpKind::RmsNorm,
                               norm.getEpsilon().convertToDouble());
            })
            .Case([&](mf::LayerNormOp norm) {
              return withFloat(fb::OpKind::LayerNorm,
                               norm.getEpsilon().convertToDouble());
            })
            .Case([&](mf::MatmulOp matmul) {
              return EncodedOp{fb::OpKind::Matmul,
                               {matmul.getTransposeLhs(), matmul.getTransposeRhs()},
                               {}, {}};
            })
            .Case([&](mf::SwiGluOp) { return simple(fb::OpKind::SwiGlu); })
            .Case([&](mf::SoftmaxOp softmax) {
              return withDim(fb::OpKind::Softmax, softmax.getDimension());
            })
            .Case([&](mf::RopeOp rope) {
              return EncodedOp{fb::OpKind::Rope,
                               {rope.getInverse()},
                               {rope.getTheta().convertToDouble()},
                               {}};
            })
            .Case([&](mf::AttentionOp attention) {
              return EncodedOp{fb::OpKind::Attention,
                               {attention.getCausal(),
                                attention.getPastLength() != nullptr},
                               {attention.getScale().convertToDouble()},
                               {}};
            })
            .Case([&](mf::KvCacheWriteOp) {
              return simple(fb::OpKind::KvCacheWrite);
            })
            .Case([&](mf::CrossEntropyOp loss) {
              return withDim(fb::OpKind::CrossEntropy, loss.getIgnoreIndex());
            })
            .Case([&](mf::SiluGradOp) { return simple(fb::OpKind::SiluGrad); })
            .Case([&](mf::GeluGradOp gelu) {
              return withDim(fb::OpKind::GeluGrad,
                             gelu.getApproximate() == mf::GeluApproximation::tanh);
            })
            .Case([&](mf::EmbeddingGradOp) {
              return simple(fb::OpKind::EmbeddingGrad);
            })
            .Case([&](mf::RmsNormGradOp norm) {
              return EncodedOp{fb::OpKind::RmsNormGrad,
                               {static_cast<int64_t>(norm.getWrt())},
                               {norm.getEpsilon().convertToDouble()},
                               {}};
            })
            .Case([&](mf::LayerNormGradOp norm) {
              return EncodedOp{fb::OpKind::LayerNormGrad,
                               {static_cast<int64_t>(norm.getWrt())},
                               {norm.getEpsilon().convertToDouble()},
                               {}};
            })
            .Case([&](mf::AttentionGradOp attention) {
              return EncodedOp{fb::OpKind::AttentionGrad,
                               {attention.getCausal(), static_cast<int64_t>(attention.getWrt())},
                               {attention.getScale().convertToDouble()},
                               {}};
            })
            .Case([&](mf::CrossEntropyGradOp loss) {
              return withDim(fb::OpKind::CrossEntropyGrad, loss.getIgnoreIndex());
            })
            .Case([&](mf::PadOp pad) {
              std::vector<int64_t> offsets(pad.getOffsets());
              return EncodedOp{fb::OpKind::Pad, offsets, {}, {}};
            })
            .Default([](Operation *) { return std::nullopt; });
    if (!encoded) {
      return op->emitOpError() << "cannot be written to the executable: the "
                                  "runtime has no kernel for it";
    }
    return *encoded;
  }

  ModuleOp module_;
  const ModelSpec &spec_;
  const ExecutableKernels &kernels_;
  std::vector<std::optional<KernelSignature>> signatures_;
  flatbuffers::FlatBufferBuilder builder_;
  llvm::StringMap<size_t> parameterIndex_;
};

} // namespace

FailureOr<std::vector<uint8_t>>
mfc::writeExecutable(ModuleOp module, const ModelSpec &spec,
                     const ExecutableKernels &kernels) {
  return Writer(module, spec, kernels).write();
}
