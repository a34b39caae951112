//===- ExecutableWriter.cpp - mf + mfexec module -> model.bin -------------===//
//
// 1. Parameters become a table indexed by position; `mf.param` refers to it.
// 2. Each entry function becomes its op-level program (mf::OpLevelProgram):
//    an op list over numbered values, every value with its type. Op
//    attributes go into the generic `ints` / `floats` / `data` slots that
//    the schema documents per op kind.
// 3. Each entry's host program (mfexec.entry) becomes its Graph Mode
//    program: a Dispatch per mfexec.dispatch, and per value the arena
//    offset of the buffer a command writes it into (-2: derived from the
//    weights; -1: outside the arena). The kernel table is the
//    mfexec.executable's kernels, in order, and its target.
//
//===----------------------------------------------------------------------===//

#include "compiler/Serialize/ExecutableWriter.h"

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/IR/OpLevelProgram.h"
#include "dialects/MFExec/IR/MFExecOps.h"
#include "runtime/ContentChecksum.h"
#include "runtime/schemas/mf_executable_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mfc;
namespace fb = ::mfbin;

namespace {

/// Entry.arena_offsets of a value the weights alone determine (format 5).
constexpr int64_t kDerivedFromWeightsOffset = -2;

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
  Writer(ModuleOp module, const ModelSpec &spec, StringRef kernelLibrary)
      : module_(module), spec_(spec), kernelLibrary_(kernelLibrary) {}

  FailureOr<std::vector<uint8_t>> write() {
    mfexec::ExecutableOp executable;
    for (auto op : module_.getOps<mfexec::ExecutableOp>()) {
      executable = op;
    }
    if (executable) {
      for (auto kernel : executable.getBody().front().getOps<mfexec::KernelOp>()) {
        // The loader requires kernel i to be mfk_i.
        if (kernel.getSymName() != "mfk_" + std::to_string(kernels_.size())) {
          return kernel.emitOpError() << "is kernel " << kernels_.size()
                                      << " of the executable: it must be "
                                         "named mfk_"
                                      << kernels_.size(),
                 failure();
        }
        kernelIndex_[kernel.getSymName()] = kernels_.size();
        kernels_.push_back(kernel);
      }
    }
    if (kernelLibrary_.empty() != kernels_.empty()) {
      return module_.emitError() << "the executable has " << kernels_.size()
                                 << " kernels and a kernel library of "
                                 << kernelLibrary_.size() << " bytes",
             failure();
    }
    llvm::StringMap<mfexec::EntryOp> hostPrograms;
    for (auto host : module_.getOps<mfexec::EntryOp>()) {
      hostPrograms[host.getFunction()] = host;
    }
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
      auto entry = writeEntry(function, hostPrograms.lookup(function.getSymName()));
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
    std::vector<uint8_t> library(kernelLibrary_.begin(), kernelLibrary_.end());
    std::vector<flatbuffers::Offset<flatbuffers::String>> names;
    std::vector<flatbuffers::Offset<fb::KernelSignature>> signatures;
    for (mfexec::KernelOp kernel : kernels_) {
      names.push_back(builder_.CreateString(kernel.getSymName().str()));
      FailureOr<flatbuffers::Offset<fb::KernelSignature>> signature =
          writeKernelSignature(kernel);
      if (failed(signature)) {
        return failure();
      }
      signatures.push_back(*signature);
    }
    // The checksum's field holds a placeholder (not the default, so it is
    // stored) until the buffer is sealed.
    flatbuffers::Offset<fb::KernelTarget> target;
    if (!library.empty()) {
      mfexec::TargetAttr kernelTarget = executable.getTarget();
      std::vector<flatbuffers::Offset<flatbuffers::String>> features;
      for (Attribute feature : kernelTarget.getFeatures()) {
        features.push_back(
            builder_.CreateString(cast<StringAttr>(feature).str()));
      }
      target = fb::CreateKernelTargetDirect(
          builder_, kernelTarget.getTriple().str().c_str(),
          kernelTarget.getCpu().str().c_str(), &features);
    }
    auto root = fb::CreateExecutableDirect(
        builder_, kExecutableFormatVersion, "cpu", info, &parameters, &entries,
        library.empty() ? nullptr : &library, names.empty() ? nullptr : &names,
        signatures.empty() ? nullptr : &signatures,
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
  /// What a kernel takes: its mfexec.kernel, as the loader checks every
  /// dispatch of it against.
  FailureOr<flatbuffers::Offset<fb::KernelSignature>>
  writeKernelSignature(mfexec::KernelOp kernel) {
    auto types = [&](TypeRange list)
        -> FailureOr<std::vector<flatbuffers::Offset<fb::TensorType>>> {
      std::vector<flatbuffers::Offset<fb::TensorType>> encoded;
      for (Type type : list) {
        auto buffer = cast<MemRefType>(type);
        auto tensor = tensorType(
            RankedTensorType::get(buffer.getShape(), buffer.getElementType()),
            kernel.getLoc());
        if (failed(tensor)) {
          return failure();
        }
        encoded.push_back(*tensor);
      }
      return encoded;
    };
    FunctionType type = kernel.getFunctionType();
    auto inputs = types(type.getInputs());
    auto outputs = types(type.getResults());
    if (failed(inputs) || failed(outputs)) {
      return failure();
    }
    std::vector<uint32_t> panels;
    if (std::optional<ArrayRef<int32_t>> positions = kernel.getPanelInputs()) {
      panels.assign(positions->begin(), positions->end());
    }
    return fb::CreateKernelSignatureDirect(
        builder_, &*inputs, &*outputs, static_cast<uint32_t>(kernel.getTiles()),
        panels.empty() ? nullptr : &panels);
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

  FailureOr<flatbuffers::Offset<fb::Entry>>
  writeEntry(func::FuncOp function, mfexec::EntryOp host) {
    mf::OpLevelProgram program(function);
    std::vector<flatbuffers::Offset<fb::TensorType>> values;
    for (Value value : program.values()) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      Location loc = value.getDefiningOp() ? value.getDefiningOp()->getLoc()
                                           : function.getLoc();
      if (!type) {
        return emitError(loc) << "only tensor values can be serialized";
      }
      auto encoded = tensorType(type, loc);
      if (failed(encoded)) {
        return failure();
      }
      values.push_back(*encoded);
    }
    std::vector<uint32_t> inputs;
    std::vector<std::string> inputNames;
    for (BlockArgument argument : function.getArguments()) {
      inputs.push_back(program.idOf(argument));
      auto name = function.getArgAttrOfType<StringAttr>(argument.getArgNumber(),
                                                        "mf.name");
      inputNames.push_back(name ? name.str() : "");
    }
    std::vector<uint32_t> outputs;
    for (Value output : function.getBody().front().getTerminator()->getOperands()) {
      outputs.push_back(program.idOf(output));
    }

    GraphProgram graph;
    if (host && failed(writeHostProgram(host, program, graph))) {
      return failure();
    }
    std::vector<flatbuffers::Offset<fb::Op>> ops;
    for (Operation *op : program.ops()) {
      FailureOr<EncodedOp> encoded = encode(op, graph);
      if (failed(encoded)) {
        return failure();
      }
      std::vector<uint32_t> operands, results;
      for (Value operand : op->getOperands()) {
        operands.push_back(program.idOf(operand));
      }
      for (Value result : op->getResults()) {
        results.push_back(program.idOf(result));
      }
      ops.push_back(fb::CreateOpDirect(
          builder_, encoded->kind, &operands, &results, &encoded->ints,
          &encoded->floats, encoded->data.empty() ? nullptr : &encoded->data,
          mf::getModelPath(op->getLoc()).c_str()));
    }
    std::vector<std::string> outputNames;
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      auto name = function.getResultAttrOfType<StringAttr>(i, "mf.name");
      outputNames.push_back(name ? name.str() : "");
    }
    auto inputNameOffsets = builder_.CreateVectorOfStrings(inputNames);
    auto outputNameOffsets = builder_.CreateVectorOfStrings(outputNames);
    std::vector<int64_t> offsets(values.size(), -1);
    for (auto [id, offset] : graph.offsets) {
      offsets[id] = offset;
    }
    return fb::CreateEntry(
        builder_, builder_.CreateString(function.getSymName().str()),
        builder_.CreateVector(values), builder_.CreateVector(inputs),
        inputNameOffsets, builder_.CreateVector(outputs), outputNameOffsets,
        builder_.CreateVector(ops), builder_.CreateVector(graph.dispatches),
        host ? static_cast<uint64_t>(*host.getArenaBytes()) : 0,
        host ? builder_.CreateVector(offsets) : 0);
  }

  /// An entry's Graph Mode program, from its host program.
  struct GraphProgram {
    std::vector<flatbuffers::Offset<fb::Dispatch>> dispatches;
    /// The arena offsets of the values commands write (the others: -1).
    std::vector<std::pair<uint32_t, int64_t>> offsets;
    /// The op-level assignments that a copy stores (the others are in place).
    llvm::DenseSet<Operation *> copiedAssigns;
    bool planned = false; ///< there is a host program
  };

  LogicalResult writeHostProgram(mfexec::EntryOp host,
                                 const mf::OpLevelProgram &program,
                                 GraphProgram &graph) {
    if (!host.getArenaBytes()) {
      return host.emitOpError()
             << "has no memory plan: run mfexec-plan-memory first";
    }
    graph.planned = true;
    size_t valueCount = program.values().size();
    size_t opCount = program.ops().size();
    // Where a command writes: an arena slice's offset, or outside.
    auto record = [&](Value buffer, int64_t value) {
      Operation *storage = buffer.getDefiningOp();
      int64_t offset = -1;
      if (auto slice = dyn_cast_or_null<mfexec::ArenaOp>(storage)) {
        offset = slice.getOffset();
      } else if (isa_and_nonnull<mfexec::DerivedOp>(storage)) {
        offset = kDerivedFromWeightsOffset;
      }
      graph.offsets.emplace_back(static_cast<uint32_t>(value), offset);
    };
    for (Operation &op : host.getBody().front()) {
      auto checkValues = [&](ArrayRef<int64_t> ids) -> LogicalResult {
        for (int64_t id : ids) {
          if (id >= static_cast<int64_t>(valueCount)) {
            return op.emitOpError() << "names value " << id << " of an entry with "
                                    << valueCount << " values";
          }
        }
        return success();
      };
      if (isa<mfexec::TransientOp>(op)) {
        return op.emitOpError() << "is not placed in the arena";
      }
      if (auto dispatch = dyn_cast<mfexec::DispatchOp>(op)) {
        auto kernel = kernelIndex_.find(dispatch.getKernel().getLeafReference());
        if (kernel == kernelIndex_.end() || failed(checkValues(dispatch.getValues())) ||
            dispatch.getFirstOp() + dispatch.getOpCount() > opCount) {
          return dispatch.emitOpError() << "names a kernel, value or op range "
                                           "the module does not have";
        }
        ArrayRef<int64_t> ids = dispatch.getValues();
        size_t inputCount = kernels_[kernel->second].getFunctionType().getNumInputs();
        std::vector<uint32_t> inputs(ids.begin(), ids.begin() + inputCount);
        std::vector<uint32_t> outputs(ids.begin() + inputCount, ids.end());
        for (size_t i = inputCount; i < ids.size(); ++i) {
          record(dispatch.getBindings()[i], ids[i]);
        }
        mfexec::KernelOp signature = kernels_[kernel->second];
        std::vector<uint32_t> panels;
        if (std::optional<ArrayRef<int32_t>> positions = signature.getPanelInputs()) {
          panels.assign(positions->begin(), positions->end());
        }
        graph.dispatches.push_back(fb::CreateDispatchDirect(
            builder_, kernel->second, dispatch.getFirstOp(),
            dispatch.getOpCount(), &inputs, &outputs, signature.getTiles(),
            panels.empty() ? nullptr : &panels));
      } else if (auto library = dyn_cast<mfexec::LibraryOp>(op)) {
        if (failed(checkValues(library.getValues()))) {
          return failure();
        }
        record(library.getBindings().back(), library.getValues().back());
      } else if (auto copy = dyn_cast<mfexec::CopyOp>(op)) {
        if (copy.getOpIndex() >= opCount) {
          return copy.emitOpError() << "names op " << copy.getOpIndex()
                                    << " of an entry with " << opCount << " ops";
        }
        graph.copiedAssigns.insert(program.ops()[copy.getOpIndex()]);
      }
    }
    return success();
  }

  FailureOr<EncodedOp> encode(Operation *op, const GraphProgram &graph) {
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
                               // In place when no copy stores it (only
                               // with a host program).
                               {static_cast<int64_t>(it->second),
                                graph.planned &&
                                    !graph.copiedAssigns.contains(assign)},
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
  StringRef kernelLibrary_;
  std::vector<mfexec::KernelOp> kernels_;
  llvm::StringMap<uint32_t> kernelIndex_;
  flatbuffers::FlatBufferBuilder builder_;
  llvm::StringMap<size_t> parameterIndex_;
};

} // namespace

FailureOr<std::vector<uint8_t>>
mfc::writeExecutable(ModuleOp module, const ModelSpec &spec,
                     StringRef kernelLibrary) {
  return Writer(module, spec, kernelLibrary).write();
}
