//===- Pipelines.cpp - the named compiler phases --------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Transforms/OutputFile.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mfc;

/// What the config asks of the phases, as the module records it.
struct mfc::ModuleDecisions {
  /// mf-quantize-weights' options (#mf.quantize_weights), when it runs.
  std::optional<mf::MFQuantizeWeightsPassOptions> quantizeWeights;
  /// mf.quantize_kv_cache: whether mf-quantize-kv-cache runs.
  bool quantizeKvCache = false;
  /// mf-recompute's options (#mf.recompute; none: recompute nothing).
  mf::MFRecomputePassOptions recompute;
  /// mf.sequence_parallel: mf-partition's sequence parallelism.
  bool sequenceParallel = false;

  static ModuleDecisions of(ModuleOp module);
};

namespace {

/// An attribute's list of strings (absent: empty).
SmallVector<std::string> strings(ArrayAttr list) {
  SmallVector<std::string> items;
  for (Attribute item : list ? list.getValue() : ArrayRef<Attribute>()) {
    items.push_back(cast<StringAttr>(item).str());
  }
  return items;
}

} // namespace

ModuleDecisions ModuleDecisions::of(ModuleOp module) {
  ModuleDecisions decisions;
  if (auto weights = module->getAttrOfType<mf::QuantizeWeightsAttr>(
          mf::kQuantizeWeightsAttrName)) {
    mf::MFQuantizeWeightsPassOptions &quantize =
        decisions.quantizeWeights.emplace();
    quantize.exclude = strings(weights.getExclude());
    quantize.bits = weights.getBits();
    quantize.groupSize = weights.getGroupSize();
    quantize.activations = weights.getActivations().str();
    if (FloatAttr alpha = weights.getSmoothAlpha()) {
      quantize.smoothAlpha = alpha.getValueAsDouble();
    }
  }
  decisions.quantizeKvCache = module->hasAttr(mf::kQuantizeKvCacheAttrName);
  if (auto plan =
          module->getAttrOfType<mf::RecomputeAttr>(mf::kRecomputeAttrName)) {
    decisions.recompute.full = strings(plan.getFull());
    decisions.recompute.select = strings(plan.getSelect());
    decisions.recompute.selectComm = strings(plan.getSelectComm());
    decisions.recompute.exclude = strings(plan.getExclude());
  }
  decisions.sequenceParallel = module->hasAttr(mf::kSequenceParallelAttrName);
  return decisions;
}

namespace {

void addGraphCleanup(OpPassManager &pm, const CompileOptions &,
                     const ModuleDecisions &) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addQuantization(OpPassManager &pm, const CompileOptions &,
                     const ModuleDecisions &decisions) {
  if (decisions.quantizeKvCache) {
    pm.addPass(mf::createMFQuantizeKvCachePass());
  }
  if (decisions.quantizeWeights) {
    pm.addPass(mf::createMFQuantizeWeightsPass(*decisions.quantizeWeights));
  }
}

void addSharding(OpPassManager &pm, const CompileOptions &,
                 const ModuleDecisions &decisions) {
  mf::MFPartitionPassOptions partition;
  partition.sequenceParallel = decisions.sequenceParallel;
  pm.addPass(mf::createMFPartitionPass(partition));
}

void addAutodiff(OpPassManager &pm, const CompileOptions &,
                 const ModuleDecisions &) {
  pm.addPass(mf::createMFAutodiffPass());
  pm.addPass(mf::createMFTrainStepPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addRecompute(OpPassManager &pm, const CompileOptions &,
                  const ModuleDecisions &decisions) {
  pm.addNestedPass<func::FuncOp>(
      mf::createMFRecomputePass(decisions.recompute));
  pm.addPass(mf::createMFSplitStagesPass());
  pm.addPass(mf::createMFSplitWeightGradientsPass());
}

void addFusion(OpPassManager &pm, const CompileOptions &,
               const ModuleDecisions &) {
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseNormPass());
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseElementwisePass());
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseMatmulEpiloguePass());
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseAttentionPass());
  pm.addNestedPass<func::FuncOp>(mf::createMFDropRecomputeBarriersPass());
  pm.addNestedPass<func::FuncOp>(mf::createMFScheduleUpdatesPass());
}

void addHostPrograms(OpPassManager &pm, const CompileOptions &,
                     const ModuleDecisions &) {
  pm.addPass(createMFLowerToMFExecPass());
}

void addMemoryPlanning(OpPassManager &pm, const CompileOptions &options,
                       const ModuleDecisions &) {
  MFExecPlanMemoryPassOptions planOptions;
  planOptions.csvFile = options.memoryPlanCsv;
  planOptions.svgFile = options.memoryPlanSvg;
  if (options.memoryPlanSeconds >= 0) {
    planOptions.timeLimit = options.memoryPlanSeconds;
  }
  pm.addPass(createMFExecPlanMemoryPass(planOptions));
}

void addCodegen(OpPassManager &pm, const CompileOptions &options,
                const ModuleDecisions &) {
  pm.addPass(createMFOutlineLoneMatmulsPass());
  MFChooseWeightLayoutPassOptions layoutOptions;
  layoutOptions.cpu = options.cpu;
  layoutOptions.packWeights = options.packWeights;
  pm.addPass(createMFChooseWeightLayoutPass(layoutOptions));
  MFCodegenCPUPassOptions codegenOptions;
  codegenOptions.cpu = options.cpu;
  pm.addPass(createMFCodegenCPUPass(codegenOptions));
  MFExecLowerKernelsPassOptions lowering;
  lowering.objectFile = options.kernelsObject;
  pm.addPass(createMFExecLowerKernelsPass(lowering));
}

const Phase kPhases[] = {
    {"mf", "the mf graph: the model as built from YAML, canonicalized",
     addGraphCleanup},
    {"quantize",
     "quantized models (quantization_config): Linear weights as i8 "
     "parameters with scales, read through mf.dequantize "
     "(mf-quantize-weights), and with kvcache_dtype int8 the KV caches as "
     "i8 with calibrated scales (mf-quantize-kv-cache); other modules "
     "unchanged",
     addQuantization},
    {"sharding",
     "tensor-parallel modules (parallel_config.model_parallel > 1): one "
     "rank's program, with per-rank types and an mf.all_reduce after each "
     "row-parallel matmul (mf-partition); other modules unchanged",
     addSharding},
    {"autodiff",
     "training modules: the forward_backward entry (loss and parameter "
     "gradients) built by reverse-mode differentiation, and train_step "
     "(forward, backward, clipping and the AdamW update)",
     addAutodiff},
    {"recompute",
     "training modules: the backward reads recomputed copies of the forward "
     "values recompute_config selects (mf.recomputed), not the originals; "
     "a pipeline stage's forward returns the values its backward reads "
     "(mf-split-stages)",
     addRecompute},
    {"fusion",
     "mf ops grouped into mf.fusion regions, one per future kernel; in "
     "training, each parameter's update moved up to just after its gradient "
     "(mf-schedule-updates)",
     addFusion},
    {"codegen",
     "native kernels for the regions, in an mfexec.executable for the target "
     "CPU; regions without a kernel become eager ops again",
     addCodegen},
    {"mfexec",
     "each entry's host program (mfexec.entry): kernel dispatches, library "
     "ops and copies on the buffers of its values",
     addHostPrograms},
    {"memory-plan",
     "every transient buffer of each host program placed in one static arena",
     addMemoryPlanning},
};

/// Writes the IR after a phase; a pass so that it runs in pipeline order and
/// shows up in --mlir-timing.
struct DumpIRPass : PassWrapper<DumpIRPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DumpIRPass)

  DumpIRPass(std::string dir, unsigned index, std::string phase)
      : dir(std::move(dir)), index(index), phase(std::move(phase)) {}
  StringRef getArgument() const override { return "mfc-dump-ir"; }
  StringRef getDescription() const override {
    return "Writes the IR after a phase";
  }
  void runOnOperation() override {
    if (failed(dumpModule(getOperation(), dir, index, phase))) {
      signalPassFailure();
    }
    markAllAnalysesPreserved();
  }

  std::string dir;
  unsigned index;
  std::string phase;
};

/// Records on the module the phase it has gone through, so that compiling
/// resumes after it (mfc compile x.mlir).
struct MarkPhasePass
    : public PassWrapper<MarkPhasePass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MarkPhasePass)
  explicit MarkPhasePass(StringRef phase) : phase(phase.str()) {}
  StringRef getArgument() const override { return "mfc-mark-phase"; }
  StringRef getDescription() const override {
    return "Records the phase the module went through";
  }
  void runOnOperation() override {
    getOperation()->setAttr(mf::kPhaseAttrName,
                            StringAttr::get(&getContext(), phase));
    markAllAnalysesPreserved();
  }

  std::string phase;
};

/// mf-opt's --mfc-phase-<name>: the phase as the module's attributes decide
/// it (a pipeline is built before it sees the module, so this pass builds
/// the phase's passes when it runs).
struct RunPhasePass
    : public PassWrapper<RunPhasePass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RunPhasePass)
  explicit RunPhasePass(const Phase &phase) : phase(phase) {}
  StringRef getArgument() const override { return "mfc-run-phase"; }
  StringRef getDescription() const override {
    return "Runs a compiler phase as the module's attributes decide it";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    // Every pass the phase may add, whatever the module decides.
    ModuleDecisions all;
    all.quantizeWeights.emplace();
    all.quantizeKvCache = true;
    OpPassManager pm(ModuleOp::getOperationName());
    phase.addPasses(pm, CompileOptions(), all);
    pm.getDependentDialects(registry);
  }
  void runOnOperation() override {
    OpPassManager pm(ModuleOp::getOperationName());
    phase.addPasses(pm, CompileOptions(), ModuleDecisions::of(getOperation()));
    pm.addPass(std::make_unique<MarkPhasePass>(phase.name));
    if (failed(runPipeline(pm, getOperation()))) {
      signalPassFailure();
    }
  }

  const Phase &phase;
};

} // namespace

ArrayRef<Phase> mfc::compilerPhases() { return kPhases; }

StringRef mfc::phaseAfter(StringRef name) {
  for (auto [index, phase] : llvm::enumerate(kPhases)) {
    if (phase.name == name) {
      return index + 1 < std::size(kPhases) ? StringRef(kPhases[index + 1].name)
                                            : StringRef();
    }
  }
  return StringRef();
}

const Phase *mfc::findPhase(StringRef name) {
  for (const Phase &phase : kPhases) {
    if (phase.name == name) {
      return &phase;
    }
  }
  return nullptr;
}

LogicalResult mfc::dumpModule(Operation *module, StringRef dir, unsigned index,
                              StringRef name) {
  if (std::error_code error = llvm::sys::fs::create_directories(dir)) {
    return emitError(module->getLoc()) << "cannot create --dump-ir-dir '" << dir
                               << "': " << error.message();
  }
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, llvm::formatv("{0:02}-{1}.mlir", index, name).str());
  // With locations, in the form mf-opt parses back.
  std::string error = writeOutputFile(path, [&](llvm::raw_ostream &os) {
    module->print(os, OpPrintingFlags().enableDebugInfo(true, /*pretty=*/false));
  });
  if (!error.empty()) {
    return emitError(module->getLoc()) << error;
  }
  return success();
}

bool mfc::runsPhase(const CompileOptions &options, StringRef name) {
  for (const Phase &phase : kPhases) {
    if (phase.name == name) {
      return true;
    }
    if (phase.name == options.compileTo) {
      return false;
    }
  }
  return false;
}

void mfc::buildCompilePipeline(OpPassManager &pm, ModuleOp module,
                               const CompileOptions &options,
                               StringRef firstPhase) {
  ModuleDecisions decisions = ModuleDecisions::of(module);
  unsigned index = 1;
  bool started = firstPhase.empty();
  for (const Phase &phase : kPhases) {
    started = started || phase.name == firstPhase;
    if (!started) {
      ++index;
      continue;
    }
    phase.addPasses(pm, options, decisions);
    pm.addPass(std::make_unique<MarkPhasePass>(phase.name));
    if (!options.dumpIrDir.empty()) {
      pm.addPass(std::make_unique<DumpIRPass>(options.dumpIrDir, index,
                                              phase.name.str()));
    }
    ++index;
    if (phase.name == options.compileTo) {
      return;
    }
  }
}

void mfc::registerPhasePipelines() {
  for (const Phase &phase : kPhases) {
    PassPipelineRegistration<>(("mfc-phase-" + phase.name).str(),
                               phase.description, [&phase](OpPassManager &pm) {
                                 pm.addPass(
                                     std::make_unique<RunPhasePass>(phase));
                               });
  }
}
