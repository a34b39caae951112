//===- MFDialect.cpp - the mf graph dialect -------------------------------===//

#include "dialects/MF/IR/MFDialect.h"

#include "dialects/MF/IR/MFOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::mf;

#include "dialects/MF/IR/MFDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/MF/IR/MFAttrs.cpp.inc"

void MFDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/MF/IR/MFOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/MF/IR/MFAttrs.cpp.inc"
      >();
}

std::optional<RunMode> mlir::mf::getRunMode(Operation *module) {
  if (auto mode = module->getAttrOfType<RunModeAttr>("mf.run_mode")) {
    return mode.getValue();
  }
  return std::nullopt;
}

void mlir::mf::setEntryRole(Operation *entry, EntryRole role) {
  entry->setAttr(kEntryRoleAttrName,
                 EntryRoleAttr::get(entry->getContext(), role));
}

bool mlir::mf::isTrainingModule(Operation *module) {
  std::optional<RunMode> mode = getRunMode(module);
  return mode == RunMode::train || mode == RunMode::finetune;
}

LogicalResult
OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      OptimizerKind, FloatAttr beta1, FloatAttr beta2,
                      FloatAttr eps, FloatAttr weightDecay,
                      int64_t gradientAccumulationSteps, FloatAttr maxGradNorm,
                      UnitAttr, int64_t gradientAggregationGroup) {
  for (auto [name, beta] : {std::pair{"beta1", beta1}, {"beta2", beta2}}) {
    double value = beta.getValueAsDouble();
    if (!(value >= 0 && value < 1)) {
      return emitError() << "optimizer " << name << " must be in [0, 1), got "
                         << value;
    }
  }
  if (!(eps.getValueAsDouble() > 0)) {
    return emitError() << "optimizer eps must be positive";
  }
  if (!(weightDecay.getValueAsDouble() >= 0)) {
    return emitError() << "optimizer weight_decay must be non-negative";
  }
  if (maxGradNorm && !(maxGradNorm.getValueAsDouble() > 0)) {
    return emitError() << "optimizer max_grad_norm must be positive (leave it "
                          "out for no clipping)";
  }
  if (gradientAccumulationSteps < 1 || gradientAggregationGroup < 1) {
    return emitError() << "optimizer gradient_accumulation_steps and "
                          "gradient_aggregation_group must be at least 1";
  }
  return success();
}

LogicalResult ModelInfoAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, ModelFamily, int64_t,
    int64_t batchSize, int64_t seqLength, int64_t vocabSize, int64_t numLayers,
    int64_t numHeads, int64_t numKvHeads, Type computeDtype, BoolAttr,
    int64_t kvBlockSize, int64_t kvNumBlocks, FloatAttr loraScale) {
  if (batchSize < 1 || seqLength < 1 || vocabSize < 1 || numLayers < 1) {
    return emitError() << "model batch_size, seq_length, vocab_size and "
                          "num_layers must be positive";
  }
  if (numHeads < 1 || numKvHeads < 1 || numHeads % numKvHeads != 0) {
    return emitError() << "model num_heads (" << numHeads
                       << ") must be a positive multiple of num_kv_heads ("
                       << numKvHeads << ")";
  }
  if (!computeDtype.isF32() && !computeDtype.isF16() &&
      !computeDtype.isBF16()) {
    return emitError() << "model compute_dtype must be f32, f16 or bf16, got "
                       << computeDtype;
  }
  if (kvBlockSize < 0 || kvNumBlocks < 0 ||
      (kvBlockSize == 0) != (kvNumBlocks == 0)) {
    return emitError() << "model kv_block_size and kv_num_blocks are both "
                          "positive (a paged KV cache) or both 0";
  }
  if (loraScale && !(loraScale.getValueAsDouble() > 0)) {
    return emitError() << "model lora_scale must be positive (leave it out "
                          "without LoRA)";
  }
  return success();
}

LogicalResult
GenerationAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t,
                       DenseI64ArrayAttr, int64_t, int64_t, BoolAttr,
                       int64_t topK, FloatAttr topP, FloatAttr temperature,
                       FloatAttr repetitionPenalty, int64_t maxDecodeLength) {
  double p = topP.getValueAsDouble();
  if (topK < 0 || !(p > 0 && p <= 1)) {
    return emitError() << "generation top_k must be non-negative and top_p "
                          "in (0, 1]";
  }
  if (!(temperature.getValueAsDouble() > 0) ||
      !(repetitionPenalty.getValueAsDouble() > 0) || maxDecodeLength < 1) {
    return emitError() << "generation temperature, repetition_penalty and "
                          "max_decode_length must be positive";
  }
  return success();
}

LogicalResult TrainingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FloatAttr, StringAttr lrSchedule, FloatAttr,
                                   int64_t warmupSteps, FloatAttr warmupRatio,
                                   FloatAttr, int64_t totalSteps, FloatAttr,
                                   int64_t epochs) {
  if (!llvm::is_contained({"cosine", "linear", "polynomial", "constant"},
                          lrSchedule.getValue())) {
    return emitError() << "training lr_schedule must be cosine, linear, "
                          "polynomial or constant, got "
                       << lrSchedule;
  }
  double ratio = warmupRatio.getValueAsDouble();
  if (warmupSteps < 0 || !(ratio >= 0 && ratio <= 1) || totalSteps < -1 ||
      epochs < 1) {
    return emitError() << "training warmup_steps must be non-negative, "
                          "warmup_ratio in [0, 1], total_steps at least -1 "
                          "(-1 or 0: the run's) and epochs positive";
  }
  return success();
}

LogicalResult
QuantizeWeightsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            int64_t bits, int64_t groupSize,
                            StringAttr activations, FloatAttr smoothAlpha,
                            ArrayAttr exclude) {
  if (bits != 8 && bits != 4) {
    return emitError() << "quantize_weights bits must be 8 or 4, got " << bits;
  }
  if (groupSize < 0 || (bits == 4 && groupSize == 0)) {
    return emitError() << "quantize_weights group_size must be 0 (a scale a "
                          "row) or positive, and positive for 4 bits";
  }
  if (!llvm::is_contained({"none", "per-token", "per-tensor"},
                          activations.getValue())) {
    return emitError() << "quantize_weights activations must be \"none\", "
                          "\"per-token\" or \"per-tensor\", got "
                       << activations;
  }
  if (smoothAlpha && (activations.getValue() != "per-tensor" ||
                      !(smoothAlpha.getValueAsDouble() >= 0 &&
                        smoothAlpha.getValueAsDouble() <= 1))) {
    return emitError() << "quantize_weights smooth_alpha is SmoothQuant's "
                          "migration strength in [0, 1], with activations "
                          "\"per-tensor\"";
  }
  if (exclude && !llvm::all_of(exclude, llvm::IsaPred<StringAttr>)) {
    return emitError() << "quantize_weights exclude must list model paths "
                          "(strings)";
  }
  return success();
}

LogicalResult
RecomputeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      ArrayAttr full, ArrayAttr select, ArrayAttr selectComm,
                      ArrayAttr exclude) {
  for (auto [name, list] : {std::pair{"full", full},
                            {"select", select},
                            {"select_comm", selectComm},
                            {"exclude", exclude}}) {
    if (list && !llvm::all_of(list, llvm::IsaPred<StringAttr>)) {
      return emitError() << "recompute " << name
                         << " must list patterns (strings)";
    }
  }
  return success();
}

// The mf.* attributes ops outside the dialect carry: the module's settings
// (the frontend's contract with the passes and the writer), what passes
// record for the report, the CPU kernels' tiles and panels.
LogicalResult MFDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().strref();
  Attribute value = attribute.getValue();
  auto expect = [&](bool valid, StringRef expected) -> LogicalResult {
    if (!valid) {
      return op->emitError()
             << "'" << name << "' must be " << expected << ", got " << value;
    }
    return success();
  };
  auto onModule = [&](bool valid, StringRef expected) -> LogicalResult {
    if (!isa<ModuleOp>(op)) {
      return op->emitError() << "'" << name << "' belongs on the module";
    }
    return expect(valid, expected);
  };
  if (name == "mf.run_mode") {
    return onModule(isa<RunModeAttr>(value), "#mf.run_mode<...>");
  }
  if (name == "mf.optimizer") {
    if (failed(onModule(isa<OptimizerAttr>(value), "#mf.optimizer<...>"))) {
      return failure();
    }
    if (!isTrainingModule(op)) {
      return op->emitError() << "'mf.optimizer' belongs to a training module "
                                "(mf.run_mode train or finetune)";
    }
    return success();
  }
  if (name == "mf.model_name" || name == kLoadCheckpointAttrName ||
      name == kPhaseAttrName) {
    return onModule(isa<StringAttr>(value), "a string");
  }
  if (name == kModelAttrName) {
    return onModule(isa<ModelInfoAttr>(value), "#mf.model<...>");
  }
  if (name == kGenerationAttrName) {
    return onModule(isa<GenerationAttr>(value), "#mf.generation<...>");
  }
  if (name == kTokenizerAttrName) {
    return onModule(isa<TokenizerAttr>(value), "#mf.tokenizer<...>");
  }
  if (name == kTrainingAttrName) {
    if (failed(onModule(isa<TrainingAttr>(value), "#mf.training<...>"))) {
      return failure();
    }
    if (!isTrainingModule(op)) {
      return op->emitError() << "'" << name
                             << "' belongs to a training module (mf.run_mode "
                                "train or finetune)";
    }
    return success();
  }
  if (name == kQuantizeWeightsAttrName) {
    return onModule(isa<QuantizeWeightsAttr>(value),
                    "#mf.quantize_weights<...>");
  }
  if (name == kRecomputeAttrName) {
    return onModule(isa<RecomputeAttr>(value), "#mf.recompute<...>");
  }
  if (name == kQuantizeKvCacheAttrName || name == kSequenceParallelAttrName) {
    return onModule(isa<UnitAttr>(value), "a unit attribute");
  }
  if (name == "mf.context_mode") {
    auto mode = dyn_cast<IntegerAttr>(value);
    return onModule(mode && (mode.getInt() == 0 || mode.getInt() == 1),
                    "0 (graph) or 1 (pynative)");
  }
  if (name == kEntryRoleAttrName) {
    if (!isa<func::FuncOp>(op)) {
      return op->emitError() << "'" << name << "' belongs on an entry function";
    }
    auto role = dyn_cast<EntryRoleAttr>(value);
    if (failed(expect(role != nullptr, "#mf.entry_role<...>"))) {
      return failure();
    }
    // A pipeline stage's roles, and only they, belong to a stage.
    bool stageRole = stringifyEntryRole(role.getValue()).starts_with("stage_");
    if (stageRole != op->hasAttr(kStageAttrName)) {
      return op->emitError()
             << "'" << name << "' " << stringifyEntryRole(role.getValue())
             << (stageRole ? " is a pipeline stage's role: the entry needs "
                             "'mf.stage'"
                           : " is not a pipeline stage's role, but the entry "
                             "has 'mf.stage'");
    }
    return success();
  }
  if (name == kStageAttrName) {
    auto stage = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op)) {
      return op->emitError() << "'" << name << "' belongs on an entry function";
    }
    return expect(stage && stage.getInt() >= 0, "a pipeline stage index");
  }
  if (name == kChunkAttrName) {
    auto chunk = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !op->hasAttr(kStageAttrName)) {
      return op->emitError() << "'" << name
                             << "' belongs on a pipeline stage's entry "
                                "(with 'mf.stage')";
    }
    Operation *module = op->getParentOp();
    int64_t chunks = module ? pipelineChunksOf(module) : 1;
    return expect(chunk && chunk.getInt() >= 0 && chunk.getInt() < chunks,
                  "a chunk index below the module's mf.pipeline_chunks (" +
                      std::to_string(chunks) + ")");
  }
  if (name == kPipelineChunksAttrName) {
    auto chunks = dyn_cast<IntegerAttr>(value);
    if (chunks && chunks.getInt() > 1 && pipelineSchedulerOf(op) == "gpipe") {
      return op->emitError() << "'" << name
                             << "' above 1 (chunks a stage) is scheduled as "
                                "interleaved 1F1B or zero_bubble_v; the "
                                "module's scheduler is 'gpipe'";
    }
    return onModule(chunks && chunks.getInt() >= 1, "a positive chunk count");
  }
  if (name == kContextBlocksAttrName) {
    auto blocks = dyn_cast<IntegerAttr>(value);
    return onModule(blocks && (blocks.getInt() == 1 || blocks.getInt() == 2),
                    "1 or 2 runs of positions a rank");
  }
  if (name == kPipelineSchedulerAttrName) {
    auto scheduler = dyn_cast<StringAttr>(value);
    if (scheduler && scheduler.getValue() == "zero_bubble_v" &&
        pipelineChunksOf(op) != 2) {
      return op->emitError() << "'" << name
                             << "' zero_bubble_v places 2 chunks a stage in "
                                "a V; the module's mf.pipeline_chunks is "
                             << pipelineChunksOf(op);
    }
    return onModule(scheduler && (scheduler.getValue() == "1f1b" ||
                                  scheduler.getValue() == "gpipe" ||
                                  scheduler.getValue() == "zero_bubble_v"),
                    "\"1f1b\", \"gpipe\" or \"zero_bubble_v\"");
  }
  if (name == kMicroBatchesAttrName) {
    auto count = dyn_cast<IntegerAttr>(value);
    return onModule(count && count.getInt() >= 1,
                    "a positive micro-batch count");
  }
  if (name == "mf.recomputed") {
    return expect(isa<UnitAttr>(value), "a unit attribute");
  }
  if (name == "mf.update") { // mf-train-step's, for mf-schedule-updates
    return expect(isa<UnitAttr, FlatSymbolRefAttr>(value),
                  "a unit attribute or a parameter's symbol");
  }
  if (name == "mf.tiles") {
    auto tiles = dyn_cast<IntegerAttr>(value);
    return expect(tiles && tiles.getInt() >= 1, "a positive tile count");
  }
  if (name == "mf.panel_inputs" || name == "mf.dot_panel_inputs") {
    return expect(isa<DenseI32ArrayAttr>(value), "an array<i32> of positions");
  }
  if (name == "mf.kernels_skipped") {
    auto counts = dyn_cast<DictionaryAttr>(value);
    return expect(counts &&
                      llvm::all_of(counts,
                                   [](NamedAttribute count) {
                                     return isa<IntegerAttr>(count.getValue());
                                   }),
                  "a dictionary of counts");
  }
  return op->emitError() << "unknown attribute '" << name
                         << "' of the mf dialect";
}

/// Entry functions name their inputs and results for the runtime.
static LogicalResult verifyValueName(Operation *op, NamedAttribute attribute,
                                     StringRef what) {
  if (attribute.getName() != "mf.name") {
    return op->emitError() << "unknown " << what << " attribute '"
                           << attribute.getName().strref()
                           << "' of the mf dialect";
  }
  if (!isa<StringAttr>(attribute.getValue())) {
    return op->emitError() << "'mf.name' of an entry's " << what
                           << " must be a string";
  }
  return success();
}

LogicalResult MFDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned,
                                                  NamedAttribute attribute) {
  return verifyValueName(op, attribute, "argument");
}

LogicalResult MFDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                     unsigned,
                                                     NamedAttribute attribute) {
  return verifyValueName(op, attribute, "result");
}

Operation *MFDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type) {
    return nullptr;
  }
  return ConstantOp::create(builder, loc, elements);
}
