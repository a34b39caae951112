//===- Pipelines.h - the named compiler phases ------------------*- C++ -*-===//
//
// mfc and mf-opt build their pipelines with these functions, so anything mfc
// does can be replayed in mf-opt (`--mfc-phase-<name>`) and pinned in a lit
// test.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_PIPELINES_PIPELINES_H
#define MFC_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace mfc {

struct CompileOptions;

/// One named phase of the pipeline.
struct Phase {
  llvm::StringLiteral name;
  llvm::StringLiteral description;
  void (*addPasses)(mlir::OpPassManager &pm, const CompileOptions &options);
};

/// The phases after the frontend, in order.
llvm::ArrayRef<Phase> compilerPhases();

/// The phase called `name`, or null.
const Phase *findPhase(llvm::StringRef name);

/// Options of one compilation.
struct CompileOptions {
  /// Stop after this phase ("" = run everything).
  std::string compileTo;
  /// Write the IR after every phase into this directory ("" = don't).
  std::string dumpIrDir;
  /// Memory planning: write the problem (MiniMalloc CSV) / a picture (SVG).
  std::string memoryPlanCsv;
  std::string memoryPlanSvg;
  /// Seconds each entry's plan may search below its first arena (negative:
  /// mfexec-plan-memory's default).
  double memoryPlanSeconds = -1;
  /// Code generation: the target CPU, and where to write the kernels.
  std::string cpu = "native";
  std::string kernelsObject;
  /// Inference: products by f32 parameters read panels packed once.
  std::string packWeights = "auto"; ///< auto, true or false
  /// Training: what mf-recompute recomputes and keeps (its `full`,
  /// `select`, `select-comm` and `exclude`).
  std::vector<std::string> recomputeFull;
  std::vector<std::string> recomputeSelect;
  std::vector<std::string> recomputeSelectComm;
  std::vector<std::string> recomputeExclude;
  /// Weight-only quantization (quantization_config): whether to run
  /// mf-quantize-weights, and the names it leaves float.
  bool quantizeWeights = false;
  /// kvcache_dtype: int8: whether to run mf-quantize-kv-cache.
  bool quantizeKvCache = false;
  std::vector<std::string> quantizeExclude;
  /// Its bits (8 or 4) and scales' group size (0: one scale per row).
  int64_t quantizeBits = 8;
  int64_t quantizeGroupSize = 0;
  /// Its activations: "none", or "per-token" (int8 rows: W8A8).
  std::string quantizeActivations = "none";
  /// With "per-tensor" activations: SmoothQuant's migration strength
  /// (negative: no smoothing).
  double quantizeSmoothAlpha = -1;
  /// Tensor-parallel modules: mf-partition's sequence parallelism
  /// (parallel_config.use_seq_parallel).
  bool sequenceParallel = false;
};

/// Adds every phase from `firstPhase` ("": the first) up to and including
/// `options.compileTo`, and a pass that writes the IR to
/// `dumpIrDir/NN-<phase>.mlir` after each when asked.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options,
                          llvm::StringRef firstPhase = "");

/// Whether the pipeline up to `options.compileTo` runs phase `name`.
bool runsPhase(const CompileOptions &options, llvm::StringRef name);

/// Writes `module` to `dumpIrDir/NN-<name>.mlir`. Fails with a diagnostic if
/// the file cannot be written.
llvm::LogicalResult dumpModule(mlir::Operation *module, llvm::StringRef dir,
                               unsigned index, llvm::StringRef name);

/// Registers `--mfc-phase-<name>` pipelines for mf-opt.
void registerPhasePipelines();

} // namespace mfc

#endif // MFC_COMPILER_PIPELINES_PIPELINES_H
