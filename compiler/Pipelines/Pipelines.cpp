//===- Pipelines.cpp - the named compiler phases --------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Transforms/OutputFile.h"
#include "compiler/Transforms/Passes.h"
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

namespace {

void addGraphCleanup(OpPassManager &pm, const CompileOptions &) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addQuantization(OpPassManager &pm, const CompileOptions &options) {
  if (options.quantizeKvCache) {
    pm.addPass(mf::createMFQuantizeKvCachePass());
  }
  if (!options.quantizeWeights) {
    return;
  }
  mf::MFQuantizeWeightsPassOptions quantize;
  quantize.exclude.assign(options.quantizeExclude.begin(),
                          options.quantizeExclude.end());
  quantize.bits = options.quantizeBits;
  quantize.groupSize = options.quantizeGroupSize;
  quantize.activations = options.quantizeActivations;
  quantize.smoothAlpha = options.quantizeSmoothAlpha;
  pm.addPass(mf::createMFQuantizeWeightsPass(quantize));
}

void addSharding(OpPassManager &pm, const CompileOptions &options) {
  mf::MFPartitionPassOptions partition;
  partition.sequenceParallel = options.sequenceParallel;
  pm.addPass(mf::createMFPartitionPass(partition));
}

void addAutodiff(OpPassManager &pm, const CompileOptions &) {
  pm.addPass(mf::createMFAutodiffPass());
  pm.addPass(mf::createMFTrainStepPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addRecompute(OpPassManager &pm, const CompileOptions &options) {
  mf::MFRecomputePassOptions recompute;
  recompute.full.assign(options.recomputeFull.begin(),
                        options.recomputeFull.end());
  recompute.select.assign(options.recomputeSelect.begin(),
                          options.recomputeSelect.end());
  recompute.selectComm.assign(options.recomputeSelectComm.begin(),
                              options.recomputeSelectComm.end());
  recompute.exclude.assign(options.recomputeExclude.begin(),
                           options.recomputeExclude.end());
  pm.addNestedPass<func::FuncOp>(mf::createMFRecomputePass(recompute));
  pm.addPass(mf::createMFSplitStagesPass());
  pm.addPass(mf::createMFSplitWeightGradientsPass());
}

void addFusion(OpPassManager &pm, const CompileOptions &) {
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseNormPass());
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseElementwisePass());
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseMatmulEpiloguePass());
  pm.addNestedPass<func::FuncOp>(mf::createMFFuseAttentionPass());
  pm.addNestedPass<func::FuncOp>(mf::createMFDropRecomputeBarriersPass());
  pm.addNestedPass<func::FuncOp>(mf::createMFScheduleUpdatesPass());
}

void addHostPrograms(OpPassManager &pm, const CompileOptions &) {
  pm.addPass(createMFLowerToMFExecPass());
}

void addMemoryPlanning(OpPassManager &pm, const CompileOptions &options) {
  MFExecPlanMemoryPassOptions planOptions;
  planOptions.csvFile = options.memoryPlanCsv;
  planOptions.svgFile = options.memoryPlanSvg;
  if (options.memoryPlanSeconds >= 0) {
    planOptions.timeLimit = options.memoryPlanSeconds;
  }
  pm.addPass(createMFExecPlanMemoryPass(planOptions));
}

void addCodegen(OpPassManager &pm, const CompileOptions &options) {
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

} // namespace

ArrayRef<Phase> mfc::compilerPhases() { return kPhases; }

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

void mfc::buildCompilePipeline(OpPassManager &pm, const CompileOptions &options,
                               StringRef firstPhase) {
  unsigned index = 1;
  bool started = firstPhase.empty();
  for (const Phase &phase : kPhases) {
    started = started || phase.name == firstPhase;
    if (!started) {
      ++index;
      continue;
    }
    phase.addPasses(pm, options);
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
                               phase.description,
                               [&phase](OpPassManager &pm) {
                                 phase.addPasses(pm, CompileOptions());
                               });
  }
}
