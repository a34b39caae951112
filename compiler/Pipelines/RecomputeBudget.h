//===- RecomputeBudget.h - recompute chosen to fit a memory budget -*- C++ -*-===//
//
// `mfc compile --memory-budget=SIZE`: which layers a training step
// recomputes (none, MindFormers' selected ops, or whole) so that its planned
// peak fits, with the fewest recomputed FLOPs. Every candidate is compiled
// through codegen and memory planning: the peak is the planner's arena, not
// a formula.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_PIPELINES_RECOMPUTEBUDGET_H
#define MFC_COMPILER_PIPELINES_RECOMPUTEBUDGET_H

#include "compiler/Frontend/RecomputePlan.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Report/CompileReport.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mfc {

/// Compiles copies of a training module (after the autodiff phase) with
/// recompute plans and returns each one's planned train step.
class RecomputeEvaluator {
public:
  RecomputeEvaluator(mlir::ModuleOp afterAutodiff, const ModelSpec &spec,
                     const CompileOptions &options);

  /// The planned step with `layers`' choices (cached), or nullopt with the
  /// diagnostics of a failed compilation.
  std::optional<TrainStepCost> evaluate(const std::vector<LayerRecompute> &layers);
  /// The planned step with `plan`, uncached.
  std::optional<TrainStepCost> evaluate(const RecomputePlan &plan);

  int plansCompiled() const { return compiled_; }
  int64_t numLayers() const { return spec_.model.numLayers; }

private:
  mlir::ModuleOp module_;
  const ModelSpec &spec_;
  CompileOptions options_;
  std::map<std::vector<LayerRecompute>, std::optional<TrainStepCost>> cache_;
  int compiled_ = 0;
};

enum class BudgetSearch {
  /// The first a layers whole, the next b selective: for each a, the
  /// fewest b that fit (binary search, the peak falling with b).
  Prefix,
  /// Every assignment of {none, selective, full} to the layers (3^L plans:
  /// the true optimum of the same choices, for small models).
  Exhaustive,
};

struct BudgetChoice {
  std::vector<LayerRecompute> layers;
  TrainStepCost step;
};

/// The choice with the fewest recomputed FLOPs (then the lowest peak) whose
/// step fits `budgetBytes`; an error string when none does (it names the
/// smallest peak reachable and what that recomputes) or a plan failed to
/// compile.
std::optional<BudgetChoice>
chooseRecompute(RecomputeEvaluator &evaluator, int64_t budgetBytes,
                BudgetSearch search, std::string &error);

/// "40MB", "12GiB", "512k", "1e9": bytes (k/M/G/T decimal, Ki/Mi/Gi/Ti
/// binary, an optional trailing B), or nullopt.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

} // namespace mfc

#endif // MFC_COMPILER_PIPELINES_RECOMPUTEBUDGET_H
