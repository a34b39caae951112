//===- ExecutableWriter.cpp - mf + mfexec module -> model.bin -------------===//
//
// 1. Parameters become a table indexed by position; `mf.param` refers to it.
// 2. Each entry function becomes its op-level program (mf::OpLevelProgram):
//    an op list over numbered values, every value with its type. Each op's
//    attributes go into its kind's table, by the encoder that mf-tblgen
//    generates from the op's ODS
//    (runtime/format/schemas/ExecutableEncoder.inc).
// 3. Each entry's host program (mfexec.entry) becomes its Graph Mode
//    program 1:1: a Buffer per block argument and storage op, a Command
//    per command with its bindings. The kernel table is the
//    mfexec.executable's kernels, in order, and its target; the derived
//    slots are those the host programs name. The initializer entry's
//    function and host program go to Executable.initializer, not to the
//    entries: nobody calls it, Graph Mode runs it when the weights change.
//
//===----------------------------------------------------------------------===//

#include "compiler/Serialize/ExecutableWriter.h"

#include "compiler/Analysis/PipelineSchedule.h"

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/IR/OpLevelProgram.h"
#include "dialects/MFExec/IR/MFExecOps.h"
#include "runtime/format/ContentChecksum.h"
#include "runtime/format/OpRegistry.h"
#include "runtime/format/schemas/mf_executable_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <deque>

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
  if (type.isSignlessInteger(8)) {
    return fb::DType::I8;
  }
  return emitError(loc) << "element type " << type
                        << " has no executable encoding";
}

/// An op's attribute table in the builder (NONE: its op has none).
struct EncodedAttributes {
  fb::OpAttributes type;
  flatbuffers::Offset<void> table;
};

/// What the generated encoder asks of the module around an op.
class OpEncodingContext {
public:
  virtual ~OpEncodingContext() = default;
  /// The index of the parameter `op` names.
  virtual FailureOr<uint32_t> parameterIndex(Operation *op,
                                             StringRef parameter) = 0;
  /// A constant's little-endian values (one value for a splat).
  virtual FailureOr<ArrayRef<char>> elementBytes(Operation *op,
                                                 ElementsAttr value) = 0;
};

#include "runtime/format/schemas/ExecutableEncoder.inc"

static_assert(kEncodedRegistryFingerprint == mfrt::kOpRegistryFingerprint,
              "the writer's encoder and the runtime's op table come from one "
              "registry");

class Writer : public OpEncodingContext {
public:
  Writer(ModuleOp module, StringRef kernelLibrary)
      : module_(module), kernelLibrary_(kernelLibrary) {}

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
    // A sharded program (mf-partition) runs on its grid's ranks; each holds
    // a block of the split parameters.
    shard::GridOp grid;
    for (auto candidate : module_.getOps<shard::GridOp>()) {
      grid = candidate;
    }
    // A pipelined program's parameters are held by the stages that read
    // them (their optimizer state too: each stage's train_step reads it).
    llvm::StringMap<std::vector<int16_t>> stagesReading;
    for (auto function : module_.getOps<func::FuncOp>()) {
      if (auto stage =
              function->getAttrOfType<IntegerAttr>(mf::kStageAttrName)) {
        function.walk([&](mf::ParamOp read) {
          std::vector<int16_t> &stages = stagesReading[read.getName()];
          if (!llvm::is_contained(stages, stage.getInt())) {
            stages.push_back(static_cast<int16_t>(stage.getInt()));
          }
        });
      }
    }
    std::vector<flatbuffers::Offset<fb::Parameter>> parameters;
    size_t declared = 0;
    for (auto parameter : module_.getOps<mf::ParameterOp>()) {
      parameterIndex_[parameter.getSymName()] = declared++;
    }
    for (auto parameter : module_.getOps<mf::ParameterOp>()) {
      auto type = tensorType(parameter.getShardType(grid), parameter.getLoc());
      if (failed(type)) {
        return failure();
      }
      // A quantized weight's companions come after it: the runtime fills
      // them from the float weight.
      auto companion = [&](std::optional<StringRef> name) -> int32_t {
        return name ? static_cast<int32_t>(parameterIndex_.lookup(*name)) : -1;
      };
      int32_t quantScale = companion(parameter.getQuantScale());
      int32_t inputScale = companion(parameter.getQuantInputScale());
      int32_t inputZeroPoint = companion(parameter.getQuantInputZeroPoint());
      int32_t quantBias = companion(parameter.getQuantBias());
      for (int32_t index :
           {quantScale, inputScale, inputZeroPoint, quantBias}) {
        if (index >= 0 && index < static_cast<int32_t>(parameters.size())) {
          return parameter.emitOpError()
                 << "has its scales declared before it; model.bin needs them "
                    "after (the runtime fills them from the float weight)";
        }
      }
      fb::ParameterInit init = fb::ParameterInit::Normal;
      switch (parameter.getInit()) {
      case mf::ParameterInit::zeros:
        init = fb::ParameterInit::Zeros;
        break;
      case mf::ParameterInit::ones:
        init = fb::ParameterInit::Ones;
        break;
      case mf::ParameterInit::normal:
        init = fb::ParameterInit::Normal;
        break;
      case mf::ParameterInit::he_uniform:
        init = fb::ParameterInit::HeUniform;
        break;
      }
      double std = parameter.getStd() ? parameter.getStd()->convertToDouble() : 0;
      int32_t splitDim = -1;
      std::vector<int16_t> splitAxes;
      if (parameter.getSplitAxesAttr()) {
        for (auto [dim, axes] :
             llvm::enumerate(parameter.getSplitAxesAttr().getAxes())) {
          if (axes.empty()) {
            continue;
          }
          if (splitDim >= 0) {
            return parameter.emitOpError()
                   << "is split along two dimensions; model.bin records one";
          }
          splitDim = static_cast<int32_t>(dim);
          splitAxes.assign(axes.asArrayRef().begin(), axes.asArrayRef().end());
        }
      }
      std::vector<int16_t> *stages = nullptr;
      if (auto it = stagesReading.find(parameter.getSymName());
          it != stagesReading.end()) {
        llvm::sort(it->second);
        stages = &it->second;
      }
      std::vector<flatbuffers::Offset<flatbuffers::String>> parts;
      if (ArrayAttr names = parameter.getPartsAttr()) {
        for (StringAttr part : names.getAsRange<StringAttr>()) {
          parts.push_back(builder_.CreateString(part.getValue().str()));
        }
      }
      parameters.push_back(fb::CreateParameterDirect(
          builder_, parameter.getSymName().str().c_str(),
          parameter.getMfName() ? parameter.getMfName()->str().c_str()
                                : nullptr,
          *type, init, std, parameter.getFrozen(), parameter.getState(),
          splitDim, splitAxes.empty() ? nullptr : &splitAxes,
          static_cast<int32_t>(parameter.getSplitPartCount()), quantScale,
          parameter.getQuantGroup().value_or(0),
          static_cast<int8_t>(parameter.getQuantBits().value_or(8)), stages,
          parts.empty() ? nullptr : &parts, inputScale, inputZeroPoint,
          quantBias,
          parameter.getQuantSmoothAlphaAttr()
              ? parameter.getQuantSmoothAlphaAttr().getValueAsDouble()
              : -1.0,
          parameter.getCalibratedScales()
              ? parameter.getCalibratedScales()->str().c_str()
              : nullptr));
    }

    std::vector<flatbuffers::Offset<fb::Entry>> entries;
    flatbuffers::Offset<fb::Entry> initializer;
    for (auto function : module_.getOps<func::FuncOp>()) {
      mfexec::EntryOp host = hostPrograms.lookup(function.getSymName());
      auto entry = writeEntry(function, host);
      if (failed(entry)) {
        return failure();
      }
      if (host && host.getInitializer()) {
        initializer = *entry;
      } else {
        entries.push_back(*entry);
      }
    }

    FailureOr<flatbuffers::Offset<fb::ModelInfo>> info = writeModelInfo();
    if (failed(info)) {
      return failure();
    }
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
    std::vector<flatbuffers::Offset<fb::TensorType>> derived;
    for (auto [slot, type] : llvm::enumerate(derivedSlots_)) {
      if (!type) {
        return module_.emitError() << "derived slot " << slot
                                   << " is named by no host program",
               failure();
      }
      auto encoded = tensorType(type, module_.getLoc());
      if (failed(encoded)) {
        return failure();
      }
      derived.push_back(*encoded);
    }
    std::vector<int64_t> gridShape;
    if (grid) {
      gridShape.assign(grid.getShape().begin(), grid.getShape().end());
    }
    auto root = fb::CreateExecutableDirect(
        builder_, kExecutableFormatVersion, "cpu", *info, &parameters, &entries,
        library.empty() ? nullptr : &library, names.empty() ? nullptr : &names,
        signatures.empty() ? nullptr : &signatures,
        /*content_crc32=*/1, target, derived.empty() ? nullptr : &derived,
        gridShape.empty() ? nullptr : &gridShape, initializer,
        mfrt::kOpRegistryFingerprint);
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
    auto positions = [](std::optional<ArrayRef<int32_t>> inputs) {
      ArrayRef<int32_t> list = inputs.value_or(ArrayRef<int32_t>());
      return std::vector<uint32_t>(list.begin(), list.end());
    };
    std::vector<uint32_t> panels = positions(kernel.getPanelInputs());
    std::vector<uint32_t> dotPanels = positions(kernel.getDotPanelInputs());
    return fb::CreateKernelSignatureDirect(
        builder_, &*inputs, &*outputs, static_cast<uint32_t>(kernel.getTiles()),
        panels.empty() ? nullptr : &panels,
        dotPanels.empty() ? nullptr : &dotPanels);
  }

  /// What the runtime needs beyond the program, from the module's settings
  /// (compiler/Frontend/ModuleSettings.h).
  FailureOr<flatbuffers::Offset<fb::ModelInfo>> writeModelInfo() {
    auto model = module_->getAttrOfType<mf::ModelInfoAttr>(mf::kModelAttrName);
    auto generation =
        module_->getAttrOfType<mf::GenerationAttr>(mf::kGenerationAttrName);
    std::optional<mf::RunMode> runMode = mf::getRunMode(module_);
    if (mf::isTrainingModule(module_) &&
        !module_->hasAttr(mf::kTrainingAttrName)) {
      return module_.emitError()
                 << "a training module needs its " << mf::kTrainingAttrName
                 << " (the learning-rate schedule and epochs), which mfc's "
                    "frontend sets from the config",
             failure();
    }
    if (!model || !generation || !runMode) {
      return module_.emitError()
                 << "the module has no " << mf::kModelAttrName << ", "
                 << mf::kGenerationAttrName
                 << " or mf.run_mode, which model.bin needs (mfc's frontend "
                    "sets them from the config)",
             failure();
    }
    FailureOr<fb::DType> computeDtype =
        toDType(model.getComputeDtype(), module_.getLoc());
    if (failed(computeDtype)) {
      return failure();
    }
    // CreateModelInfoDirect takes C strings; StringAttr's storage is not
    // NUL-terminated in general, so copies (a deque: they do not move).
    std::deque<std::string> strings;
    auto string = [&](Attribute value) -> const char * {
      auto text = dyn_cast_if_present<StringAttr>(value);
      return text ? strings.emplace_back(text.str()).c_str() : nullptr;
    };
    auto tokenizer =
        module_->getAttrOfType<mf::TokenizerAttr>(mf::kTokenizerAttrName);
    auto piece = [&](StringAttr (mf::TokenizerAttr::*get)() const) {
      return tokenizer ? string((tokenizer.*get)()) : nullptr;
    };
    std::vector<int64_t> eosTokenIds(generation.getEosTokenIds().asArrayRef());
    auto contextMode = module_->getAttrOfType<IntegerAttr>("mf.context_mode");
    auto training = writeTraining(model.getLoraScale());
    return fb::CreateModelInfoDirect(
        builder_, string(module_->getAttr("mf.model_name")),
        model.getFamily() == mf::ModelFamily::gpt2 ? fb::ModelFamily::GPT2
                                                   : fb::ModelFamily::Llama,
        mf::stringifyRunMode(*runMode).data(),
        contextMode ? static_cast<int32_t>(contextMode.getInt()) : 0,
        model.getSeed(), model.getBatchSize(), model.getSeqLength(),
        model.getVocabSize(), model.getNumLayers(),
        model.getUsePast().getValue(), generation.getBosTokenId(), &eosTokenIds,
        generation.getPadTokenId(), generation.getIgnoreTokenId(),
        generation.getDoSample().getValue(), generation.getTopK(),
        generation.getTopP().getValueAsDouble(),
        generation.getTemperature().getValueAsDouble(),
        generation.getRepetitionPenalty().getValueAsDouble(),
        generation.getMaxDecodeLength(), *computeDtype, training,
        piece(&mf::TokenizerAttr::getPath), model.getNumHeads(),
        model.getNumKvHeads(), piece(&mf::TokenizerAttr::getChatTemplate),
        piece(&mf::TokenizerAttr::getBosToken),
        piece(&mf::TokenizerAttr::getEosToken),
        string(module_->getAttr(mf::kLoadCheckpointAttrName)),
        piece(&mf::TokenizerAttr::getClassName), model.getKvBlockSize(),
        model.getKvNumBlocks(), contextBlocks());
  }

  /// A training module's schedule and runner settings (#mf.training, the
  /// accumulation from #mf.optimizer), a pipelined module's schedule and
  /// LoRA's scale (in any run mode: merging needs it); 0 for a module with
  /// none of them.
  flatbuffers::Offset<fb::Training> writeTraining(FloatAttr loraScale) {
    auto training =
        module_->getAttrOfType<mf::TrainingAttr>(mf::kTrainingAttrName);
    auto optimizer = module_->getAttrOfType<mf::OptimizerAttr>("mf.optimizer");
    flatbuffers::Offset<fb::Pipeline> pipeline = writePipeline();
    double lora = loraScale ? loraScale.getValueAsDouble() : 0.0;
    if (!training && pipeline.IsNull() && !loraScale) {
      return 0;
    }
    int64_t accumulation =
        optimizer ? optimizer.getGradientAccumulationSteps() : 1;
    if (!training) { // not trained: runtime/format/TrainingSettings.h's
      return fb::CreateTrainingDirect(builder_, 1e-5, "constant", 0, 0, 0, 0,
                                      -1, 1, accumulation, 1, lora, pipeline);
    }
    auto f64 = [](FloatAttr value) { return value.getValueAsDouble(); };
    return fb::CreateTrainingDirect(
        builder_, f64(training.getLearningRate()),
        training.getLrSchedule().str().c_str(), f64(training.getLrEnd()),
        training.getWarmupSteps(), f64(training.getWarmupRatio()),
        f64(training.getWarmupLrInit()), training.getTotalSteps(),
        f64(training.getPower()), accumulation, training.getEpochs(), lora,
        pipeline);
  }

  /// The runs of each sequence's positions a context-parallel rank holds
  /// (the module's mf.context_blocks), or 0.
  int64_t contextBlocks() {
    auto blocks =
        module_->getAttrOfType<IntegerAttr>(mf::kContextBlocksAttrName);
    return blocks ? blocks.getInt() : 0;
  }

  /// A pipelined module's schedule (its grid's axis 2 is the stage).
  flatbuffers::Offset<fb::Pipeline> writePipeline() {
    auto microBatches =
        module_->getAttrOfType<IntegerAttr>(mf::kMicroBatchesAttrName);
    if (!microBatches) {
      return 0;
    }
    int64_t stages = 1;
    for (auto grid : module_.getOps<shard::GridOp>()) {
      // (A hand-written module without the axis: one stage, which the
      // loader refuses.)
      if (grid.getShape().size() > mf::kPipelineGridAxis) {
        stages = grid.getShape()[mf::kPipelineGridAxis];
      }
    }
    std::string scheduler = mf::pipelineSchedulerOf(module_);
    int64_t chunks = mf::pipelineChunksOf(module_);
    std::vector<flatbuffers::Offset<fb::StageSchedule>> written;
    for (const StageSchedule &stage :
         schedulePipeline(scheduler, stages, microBatches.getInt(), chunks)) {
      std::vector<uint8_t> backward;
      std::vector<int32_t> micro;
      std::vector<int16_t> chunk;
      std::vector<uint8_t> weight;
      bool weights = false;
      for (const PipelineSlot &slot : stage.slots) {
        backward.push_back(slot.backward);
        micro.push_back(static_cast<int32_t>(slot.microBatch));
        chunk.push_back(static_cast<int16_t>(slot.chunk));
        weight.push_back(slot.weight);
        weights = weights || slot.weight;
      }
      written.push_back(fb::CreateStageScheduleDirect(
          builder_, &backward, &micro, static_cast<int32_t>(stage.inFlight),
          chunks > 1 ? &chunk : nullptr, weights ? &weight : nullptr));
    }
    return fb::CreatePipelineDirect(builder_, scheduler.c_str(),
                                    static_cast<int32_t>(microBatches.getInt()),
                                    &written, static_cast<int32_t>(chunks));
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
    // The format's roles are the dialect's, after None (the initializer).
    static_assert(static_cast<int>(fb::EntryRole::StageTrainStep) ==
                      static_cast<int>(mf::EntryRole::stage_train_step) + 1,
                  "EntryRole of mf_executable.fbs follows MF_EntryRole");
    fb::EntryRole role = fb::EntryRole::None;
    if (auto attr = function->getAttrOfType<mf::EntryRoleAttr>(
            mf::kEntryRoleAttrName)) {
      role = static_cast<fb::EntryRole>(static_cast<int>(attr.getValue()) + 1);
    } else if (!host || !host.getInitializer()) {
      return function.emitError()
             << "entry @" << function.getSymName() << " has no "
             << mf::kEntryRoleAttrName
             << ", which says what it computes (mfc's frontend and passes set "
                "it on the entries they build)";
    }
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
      const mfrt::OpRow *row = mfrt::opRowNamed(op->getName().getStringRef());
      if (!row) {
        return op->emitOpError() << "cannot be written to the executable: "
                                    "its op sets `inExecutable = 0`";
      }
      FailureOr<EncodedAttributes> attributes =
          encodeAttributes(op, builder_, *this);
      if (failed(attributes)) {
        return failure();
      }
      std::vector<uint32_t> operands, results;
      for (Value operand : op->getOperands()) {
        operands.push_back(program.idOf(operand));
      }
      for (Value result : op->getResults()) {
        results.push_back(program.idOf(result));
      }
      ops.push_back(fb::CreateOpDirect(builder_, row->kind, &operands, &results,
                                       mf::getModelPath(op->getLoc()).c_str(),
                                       attributes->type, attributes->table));
    }
    std::vector<std::string> outputNames;
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      auto name = function.getResultAttrOfType<StringAttr>(i, "mf.name");
      outputNames.push_back(name ? name.str() : "");
    }
    auto inputNameOffsets = builder_.CreateVectorOfStrings(inputNames);
    auto outputNameOffsets = builder_.CreateVectorOfStrings(outputNames);
    auto name = builder_.CreateString(function.getSymName().str());
    auto valueTypes = builder_.CreateVector(values);
    auto inputIds = builder_.CreateVector(inputs);
    auto outputIds = builder_.CreateVector(outputs);
    auto opList = builder_.CreateVector(ops);
    auto stage = function->getAttrOfType<IntegerAttr>(mf::kStageAttrName);
    auto chunk = function->getAttrOfType<IntegerAttr>(mf::kChunkAttrName);
    return fb::CreateEntry(
        builder_, name, valueTypes, inputIds, inputNameOffsets, outputIds,
        outputNameOffsets, opList, graph.host,
        stage ? static_cast<int32_t>(stage.getInt()) : -1,
        chunk ? static_cast<int32_t>(chunk.getInt()) : 0, role);
  }

  /// An entry's Graph Mode program, from its host program.
  struct GraphProgram {
    flatbuffers::Offset<fb::HostProgram> host;
  };

  /// The host program, 1:1: a buffer per block argument and storage op, a
  /// command per command.
  LogicalResult writeHostProgram(mfexec::EntryOp host,
                                 const mf::OpLevelProgram &program,
                                 GraphProgram &graph) {
    if (!host.getArenaBytes()) {
      return host.emitOpError()
             << "has no memory plan: run mfexec-plan-memory first";
    }
    Block &body = host.getBody().front();
    auto returned = cast<mfexec::ReturnOp>(body.getTerminator()).getOutputs();
    llvm::DenseMap<Value, uint32_t> bufferIndex;
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
    auto addBuffer = [&](Value buffer, fb::BufferKind kind,
                         int64_t index) -> LogicalResult {
      auto type = cast<MemRefType>(buffer.getType());
      auto encoded = tensorType(
          RankedTensorType::get(type.getShape(), type.getElementType()),
          host.getLoc());
      if (failed(encoded)) {
        return failure();
      }
      bufferIndex[buffer] = buffers.size();
      auto derived = buffer.getDefiningOp<mfexec::DerivedOp>();
      int64_t holds = derived && derived.getHolds() ? *derived.getHolds() : -1;
      if (holds >= static_cast<int64_t>(program.values().size())) {
        return derived.emitOpError()
               << "holds value " << holds << " of an entry with "
               << program.values().size() << " values";
      }
      buffers.push_back(
          fb::CreateBuffer(builder_, kind, index, *encoded, holds));
      return success();
    };
    for (BlockArgument argument : body.getArguments()) {
      if (failed(addBuffer(argument, fb::BufferKind::Input,
                           argument.getArgNumber()))) {
        return failure();
      }
    }
    std::vector<flatbuffers::Offset<fb::Command>> commands;
    for (Operation &op : body) {
      LogicalResult added = success();
      if (isa<mfexec::TransientOp>(op)) {
        return op.emitOpError() << "is not placed in the arena";
      } else if (auto slice = dyn_cast<mfexec::ArenaOp>(op)) {
        added = addBuffer(slice, fb::BufferKind::Arena, slice.getOffset());
      } else if (auto param = dyn_cast<mfexec::ParamOp>(op)) {
        auto it = parameterIndex_.find(param.getName());
        if (it == parameterIndex_.end()) {
          return param.emitOpError() << "names no parameter of the module";
        }
        added = addBuffer(param, fb::BufferKind::Parameter, it->second);
      } else if (auto output = dyn_cast<mfexec::OutputBufferOp>(op)) {
        auto position = llvm::find(returned, output.getBuffer());
        if (position == returned.end()) {
          return output.emitOpError() << "is not an output of the entry";
        }
        added = addBuffer(output, fb::BufferKind::Output,
                          position - returned.begin());
      } else if (auto derived = dyn_cast<mfexec::DerivedOp>(op)) {
        size_t slot = derived.getSlot();
        derivedSlots_.resize(std::max(derivedSlots_.size(), slot + 1));
        RankedTensorType type = RankedTensorType::get(
            derived.getType().getShape(), derived.getType().getElementType());
        if (derivedSlots_[slot] && derivedSlots_[slot] != type) {
          return derived.emitOpError() << "names slot " << slot << " as "
                                       << type << ", another entry as "
                                       << derivedSlots_[slot];
        }
        derivedSlots_[slot] = type;
        added = addBuffer(derived, fb::BufferKind::Derived, slot);
      } else if (auto constant = dyn_cast<mfexec::ConstantOp>(op)) {
        added = addBuffer(constant, fb::BufferKind::Constant,
                          constant.getOpIndex());
      } else if (auto view = dyn_cast<mfexec::ViewOp>(op)) {
        added = addBuffer(view, fb::BufferKind::View,
                          bufferIndex.lookup(view.getSource()));
      } else if (auto dispatch = dyn_cast<mfexec::DispatchOp>(op)) {
        auto kernel = kernelIndex_.find(dispatch.getKernel().getLeafReference());
        if (kernel == kernelIndex_.end()) {
          return dispatch.emitOpError() << "names a kernel the module does not have";
        }
        added = writeCommand(op, fb::CommandKind::Dispatch, kernel->second,
                             dispatch.getFirstOp(), dispatch.getOpCount(),
                             dispatch.getBindings(), dispatch.getAccesses(),
                             dispatch.getValues(), bufferIndex, program, commands);
      } else if (auto library = dyn_cast<mfexec::LibraryOp>(op)) {
        added = writeCommand(op, fb::CommandKind::Library, 0, library.getOpIndex(),
                             1, library.getBindings(), library.getAccesses(),
                             library.getValues(), bufferIndex, program, commands);
      } else if (auto copy = dyn_cast<mfexec::CopyOp>(op)) {
        added = writeCommand(op, fb::CommandKind::Copy, 0, copy.getOpIndex(), 1,
                             copy.getBindings(), copy.getAccesses(),
                             copy.getValues(), bufferIndex, program, commands);
      }
      if (failed(added)) {
        return failure();
      }
    }
    std::vector<uint32_t> outputs;
    for (Value output : returned) {
      outputs.push_back(bufferIndex.lookup(output));
    }
    graph.host = fb::CreateHostProgramDirect(
        builder_, static_cast<uint64_t>(*host.getArenaBytes()), &buffers,
        &commands, &outputs);
    return success();
  }

  /// Appends the command of `op` (ops [firstOp, firstOp + opCount) of
  /// `program`) to `commands`.
  LogicalResult
  writeCommand(Operation &op, fb::CommandKind kind, uint32_t kernel,
               uint64_t firstOp, uint64_t opCount, ValueRange bindings,
               ArrayAttr accesses, ArrayRef<int64_t> values,
               const llvm::DenseMap<Value, uint32_t> &bufferIndex,
               const mf::OpLevelProgram &program,
               std::vector<flatbuffers::Offset<fb::Command>> &commands) {
    size_t valueCount = program.values().size();
    size_t programOps = program.ops().size();
    if (firstOp + opCount > programOps) {
      return op.emitOpError() << "names ops " << firstOp << ".."
                              << firstOp + opCount << " of an entry with "
                              << programOps << " ops";
    }
    std::vector<fb::Binding> written;
    for (auto [binding, access, value] : llvm::zip(bindings, accesses, values)) {
      if (value >= static_cast<int64_t>(valueCount)) {
        return op.emitOpError() << "names value " << value
                                << " of an entry with " << valueCount
                                << " values";
      }
      fb::Access encoded = fb::Access::Read;
      switch (cast<mfexec::AccessAttr>(access).getValue()) {
      case mfexec::Access::read:
        encoded = fb::Access::Read;
        break;
      case mfexec::Access::write:
        encoded = fb::Access::Write;
        break;
      case mfexec::Access::readwrite:
        encoded = fb::Access::ReadWrite;
        break;
      }
      written.emplace_back(bufferIndex.lookup(binding),
                           static_cast<uint32_t>(value), encoded);
    }
    commands.push_back(fb::CreateCommandDirect(
        builder_, kind, kernel, static_cast<uint32_t>(firstOp),
        static_cast<uint32_t>(opCount), &written));
    return success();
  }

  FailureOr<uint32_t> parameterIndex(Operation *op,
                                     StringRef parameter) override {
    auto it = parameterIndex_.find(parameter);
    if (it == parameterIndex_.end()) {
      return op->emitOpError() << "names parameter @" << parameter
                               << ", which the module does not declare";
    }
    return static_cast<uint32_t>(it->second);
  }

  FailureOr<ArrayRef<char>> elementBytes(Operation *op,
                                         ElementsAttr value) override {
    auto dense = dyn_cast<DenseElementsAttr>(value);
    if (!dense) {
      return op->emitOpError() << "holds a constant that is not dense, which "
                                  "the executable cannot store";
    }
    return dense.getRawData(); // a splat: its one element
  }

  ModuleOp module_;
  StringRef kernelLibrary_;
  std::vector<mfexec::KernelOp> kernels_;
  llvm::StringMap<uint32_t> kernelIndex_;
  std::vector<RankedTensorType> derivedSlots_; // by slot
  flatbuffers::FlatBufferBuilder builder_;
  llvm::StringMap<size_t> parameterIndex_;
};

} // namespace

FailureOr<std::vector<uint8_t>> mfc::writeExecutable(ModuleOp module,
                                                     StringRef kernelLibrary) {
  return Writer(module, kernelLibrary).write();
}
