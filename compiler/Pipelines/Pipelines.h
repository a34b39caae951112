//===- Pipelines.h - the named compiler phases ------------------*- C++ -*-===//
//
// mfc and mf-opt build their pipelines with these functions, so anything mfc
// does can be replayed in mf-opt (`--mfc-phase-<name>`) and pinned in a lit
// test.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_PIPELINES_PIPELINES_H
#define MFC_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace mfc {

struct CompileOptions;
struct ModuleDecisions;

/// One named phase of the pipeline: its passes for the command line's
/// options and the config's decisions the module records.
struct Phase {
  llvm::StringLiteral name;
  llvm::StringLiteral description;
  void (*addPasses)(mlir::OpPassManager &pm, const CompileOptions &options,
                    const ModuleDecisions &decisions);
};

/// The phases after the frontend, in order.
llvm::ArrayRef<Phase> compilerPhases();

/// The phase called `name`, or null.
const Phase *findPhase(llvm::StringRef name);

/// The command line's options of one compilation. What the config asks of
/// the phases (quantization, recompute, sequence parallelism) is not here:
/// the frontend records it on the module (ModuleSettings.h), and each
/// phase is built from the module's record.
struct CompileOptions {
  /// Stop after this phase ("" = run everything).
  std::string compileTo;
  /// Write the IR after every phase into this directory ("" = don't).
  std::string dumpIrDir;
  /// Memory planning: write the problem (MiniMalloc CSV) / a picture (SVG).
  std::string memoryPlanCsv;
  std::string memoryPlanSvg;
  /// Seconds each entry's plan may search below its first arena, within
  /// mfexec-plan-memory's work limit (negative: no time limit, the work
  /// limit alone: the same plan on any machine).
  double memoryPlanSeconds = -1;
  /// Code generation: the target CPU, and where to write the kernels.
  std::string cpu = "native";
  std::string kernelsObject;
  /// Inference: products by f32 parameters read panels packed once.
  std::string packWeights = "auto"; ///< auto, true or false
};

/// Adds every phase from `firstPhase` ("": the first) up to and including
/// `options.compileTo`, as `module`'s attributes decide them, each followed
/// by a pass that records the phase on the module (mf.phase) and, when
/// asked, one that writes the IR to `dumpIrDir/NN-<phase>.mlir`.
void buildCompilePipeline(mlir::OpPassManager &pm, mlir::ModuleOp module,
                          const CompileOptions &options,
                          llvm::StringRef firstPhase = "");

/// The phase after `name` ("" after the last one).
llvm::StringRef phaseAfter(llvm::StringRef name);

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
