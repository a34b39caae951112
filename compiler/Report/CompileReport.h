//===- CompileReport.h - what the compiler decided, readable ----*- C++ -*-===//

#ifndef MFC_COMPILER_REPORT_COMPILEREPORT_H
#define MFC_COMPILER_REPORT_COMPILEREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mfc {

/// One planned training step: its peak (trained and frozen parameters,
/// optimizer state, train_step's arena with the gradients, and what derives
/// from the weights), its FLOPs and the share of them recomputed. nullopt
/// without a train_step or before memory planning.
struct TrainStepCost {
  int64_t peakBytes = 0;
  int64_t flops = 0;
  int64_t recomputedFlops = 0;
};
std::optional<TrainStepCost> trainStepCost(mlir::ModuleOp module);

/// What recompute did to the training step, for the report: the planned
/// peak without any recompute and as compiled; with --memory-budget, the
/// budget, the choice per layer and how many plans the search compiled.
struct RecomputeSummary {
  int64_t peakWithout = -1;
  int64_t peakWith = -1;
  int64_t budget = -1;
  std::vector<std::string> layerChoices;
  int plansCompiled = 0;
};

/// A collective `op` performs (two for a vocabulary-parallel
/// cross-entropy's statistics; none for other ops): its kind (all_reduce,
/// reduce_scatter, all_gather, all_to_all...), grid axes and payload (the
/// whole tensor: what an all-reduce sums, an all-gather assembles).
struct CollectivePayload {
  std::string kind;
  llvm::SmallVector<int16_t> gridAxes;
  int64_t bytes = 0;
};
llvm::SmallVector<CollectivePayload, 2> collectivePayloads(mlir::Operation *op);

/// What a ring algorithm sends from each of `ranks` ranks for a collective
/// of `kind` over a payload of `bytes`: 2 (n - 1) / n payloads for an
/// all-reduce, (n - 1) / n for the others (an all-to-all of even shares,
/// sent directly).
int64_t ringWireBytes(llvm::StringRef kind, int64_t bytes, int64_t ranks);

/// Per entry: op count, FLOPs, bytes moved, every fusion group with the model
/// paths of its ops, and the memory plan (arena vs lower bound).
void writeCompileReportJson(mlir::ModuleOp module, llvm::raw_ostream &os,
                            const RecomputeSummary *recompute = nullptr);
void writeCompileReportText(mlir::ModuleOp module, llvm::raw_ostream &os,
                            const RecomputeSummary *recompute = nullptr);

} // namespace mfc

#endif // MFC_COMPILER_REPORT_COMPILEREPORT_H
