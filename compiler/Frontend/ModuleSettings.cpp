//===- ModuleSettings.cpp - the config's settings as module attributes ----===//

#include "compiler/Frontend/ModuleSettings.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mfc;

namespace {

StringAttr stringOrNull(Builder &builder, const std::string &text) {
  return text.empty() ? StringAttr() : builder.getStringAttr(text);
}

ArrayAttr listOrNull(Builder &builder, const std::vector<std::string> &items) {
  if (items.empty()) {
    return ArrayAttr();
  }
  return builder.getStrArrayAttr(llvm::to_vector_of<StringRef>(llvm::map_range(
      items, [](const std::string &item) { return StringRef(item); })));
}

void setOptimizer(ModuleOp module, Builder &builder, const ModelSpec &spec) {
  const OptimizerConfig &optimizer = spec.optimizer;
  auto f64 = [&](double value) { return builder.getF64FloatAttr(value); };
  module->setAttr(
      "mf.optimizer",
      mf::OptimizerAttr::get(
          builder.getContext(), *mf::symbolizeOptimizerKind(optimizer.type),
          f64(optimizer.beta1), f64(optimizer.beta2), f64(optimizer.eps),
          f64(optimizer.weightDecay), spec.runner.gradientAccumulationSteps,
          spec.runner.useClipGrad ? f64(spec.runner.maxGradNorm) : FloatAttr(),
          spec.parallelOptimizer ? builder.getUnitAttr() : UnitAttr(),
          spec.shardedDataParallel > 1 ? spec.parallel.gradientAggregationGroup
                                       : 1));
}

/// The schedule reduced to the four shapes the runtime implements, and the
/// runner's settings.
void setTraining(ModuleOp module, Builder &builder, const ModelSpec &spec) {
  const LrScheduleConfig &lr = spec.lrSchedule;
  StringRef type = lr.type;
  const char *schedule = type.contains_insensitive("cosine")   ? "cosine"
                         : type.contains_insensitive("linear") ? "linear"
                         : type.contains_insensitive("polynomial")
                             ? "polynomial"
                             : "constant";
  // MindFormers replaces the optimizer's rate by the schedule; a bare
  // optimizer.learning_rate counts when the schedule is the default.
  double rate = lr.type == "constant" && spec.optimizer.learningRate
                    ? *spec.optimizer.learningRate
                    : lr.learningRate;
  auto f64 = [&](double value) { return builder.getF64FloatAttr(value); };
  module->setAttr(mf::kTrainingAttrName,
                  mf::TrainingAttr::get(
                      builder.getContext(), f64(rate),
                      builder.getStringAttr(schedule), f64(lr.lrEnd),
                      lr.warmupSteps, f64(lr.warmupRatio), f64(lr.warmupLrInit),
                      lr.totalSteps, f64(lr.power), spec.runner.epochs));
}

} // namespace

Type mfc::elementTypeOf(Builder &builder, DType type) {
  switch (type) {
  case DType::F16:
    return builder.getF16Type();
  case DType::BF16:
    return builder.getBF16Type();
  case DType::F32:
    break;
  }
  return builder.getF32Type();
}

void mfc::recordRuntimeSettings(ModuleOp module, const ModelSpec &spec) {
  Builder builder(module.getContext());
  MLIRContext *context = builder.getContext();
  const ModelConfig &model = spec.model;
  module->setAttr("mf.model_name", builder.getStringAttr(spec.modelName));
  module->setAttr("mf.run_mode",
                  mf::RunModeAttr::get(
                      context, *mf::symbolizeRunMode(toString(spec.runMode))));
  module->setAttr("mf.context_mode",
                  builder.getI64IntegerAttr(spec.contextMode));
  module->setAttr(
      mf::kModelAttrName,
      mf::ModelInfoAttr::get(
          context,
          model.family == ModelFamily::GPT2 ? mf::ModelFamily::gpt2
                                            : mf::ModelFamily::llama,
          spec.seed, spec.entryBatchSize(), model.seqLength, model.vocabSize,
          model.numLayers, model.numHeads, model.kvHeads(),
          elementTypeOf(builder, model.computeDtype),
          builder.getBoolAttr(model.usePast),
          model.pagedCache() ? model.kvBlockSize : 0,
          model.pagedCache() ? model.kvNumBlocks : 0,
          model.pet.petType == "lora"
              ? builder.getF64FloatAttr(model.pet.loraAlpha /
                                        model.pet.loraRank)
              : FloatAttr()));
  auto f64 = [&](double value) { return builder.getF64FloatAttr(value); };
  module->setAttr(mf::kGenerationAttrName,
                  mf::GenerationAttr::get(
                      context, model.bosTokenId,
                      builder.getDenseI64ArrayAttr(model.eosTokenIds),
                      model.padTokenId, model.ignoreTokenId,
                      builder.getBoolAttr(model.doSample), model.topK,
                      f64(model.topP), f64(model.temperature),
                      f64(model.repetitionPenalty), model.maxDecodeLength));
  auto tokenizer =
      mf::TokenizerAttr::get(context, stringOrNull(builder, spec.tokenizerPath),
                             stringOrNull(builder, spec.tokenizerClass),
                             stringOrNull(builder, spec.chatTemplate),
                             stringOrNull(builder, spec.bosToken),
                             stringOrNull(builder, spec.eosToken));
  if (tokenizer.getPath() || tokenizer.getClassName() ||
      tokenizer.getChatTemplate() || tokenizer.getBosToken() ||
      tokenizer.getEosToken()) {
    module->setAttr(mf::kTokenizerAttrName, tokenizer);
  }
  if (!spec.loadCheckpoint.empty()) {
    module->setAttr(mf::kLoadCheckpointAttrName,
                    builder.getStringAttr(spec.loadCheckpoint));
  }
  if (spec.runMode == RunMode::Train || spec.runMode == RunMode::Finetune) {
    setOptimizer(module, builder, spec);
    setTraining(module, builder, spec);
  }
}

void mfc::setRecomputeDecision(ModuleOp module, const RecomputePlan &plan) {
  if (plan.fullLayers.empty() && plan.selectedOps.empty() &&
      plan.selectedCommOps.empty() && plan.excludedOps.empty()) {
    module->removeAttr(mf::kRecomputeAttrName);
    return;
  }
  Builder builder(module.getContext());
  module->setAttr(mf::kRecomputeAttrName,
                  mf::RecomputeAttr::get(
                      module.getContext(), listOrNull(builder, plan.fullLayers),
                      listOrNull(builder, plan.selectedOps),
                      listOrNull(builder, plan.selectedCommOps),
                      listOrNull(builder, plan.excludedOps)));
}

void mfc::recordCompileDecisions(ModuleOp module, const ModelSpec &spec,
                                 bool calibrationModel) {
  Builder builder(module.getContext());
  const QuantizationConfig &quantization = spec.model.quantization;
  if (!quantization.quantMethod.empty() && !calibrationModel) {
    const char *activations =
        quantization.activationDtype != "int8"               ? "none"
        : quantization.activationGranularity == "per_tensor" ? "per-tensor"
                                                             : "per-token";
    module->setAttr(
        mf::kQuantizeWeightsAttrName,
        mf::QuantizeWeightsAttr::get(
            builder.getContext(), quantization.weightDtype == "int4" ? 4 : 8,
            quantization.groupSize, builder.getStringAttr(activations),
            quantization.smoothAlpha >= 0
                ? builder.getF64FloatAttr(quantization.smoothAlpha)
                : FloatAttr(),
            listOrNull(builder, quantization.modulesToNotConvert)));
  }
  if (quantization.kvcacheDtype == "int8" && !calibrationModel) {
    module->setAttr(mf::kQuantizeKvCacheAttrName, builder.getUnitAttr());
  }
  if (spec.runMode == RunMode::Train || spec.runMode == RunMode::Finetune) {
    setRecomputeDecision(module, planRecompute(spec));
  }
  if (spec.parallel.useSeqParallel && spec.shardedModelParallel > 1) {
    module->setAttr(mf::kSequenceParallelAttrName, builder.getUnitAttr());
  }
}
