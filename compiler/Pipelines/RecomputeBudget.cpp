//===- RecomputeBudget.cpp - recompute chosen to fit a memory budget ------===//

#include "compiler/Pipelines/RecomputeBudget.h"

#include "compiler/Frontend/ModuleSettings.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mfc;

RecomputeEvaluator::RecomputeEvaluator(ModuleOp afterAutodiff,
                                       const ModelSpec &spec,
                                       const CompileOptions &options)
    : module_(afterAutodiff), spec_(spec), options_(options) {
  // Only the plan matters: no files, no dumps, up to memory planning.
  options_.compileTo = "memory-plan";
  options_.dumpIrDir.clear();
  options_.memoryPlanCsv.clear();
  options_.memoryPlanSvg.clear();
  options_.kernelsObject.clear();
}

std::optional<TrainStepCost>
RecomputeEvaluator::evaluate(const std::vector<LayerRecompute> &layers) {
  auto [it, inserted] = cache_.try_emplace(layers);
  if (inserted) {
    it->second = evaluate(planRecompute(spec_, layers));
  }
  return it->second;
}

std::optional<TrainStepCost>
RecomputeEvaluator::evaluate(const RecomputePlan &plan) {
  ++compiled_;
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module_->clone()));
  // train_step alone: the other entries do not change its plan.
  for (auto entry : llvm::make_early_inc_range(copy->getOps<func::FuncOp>())) {
    if (entry.getSymName() != "train_step") {
      entry.erase();
    }
  }
  setRecomputeDecision(*copy, plan);
  PassManager pm(module_->getContext());
  buildCompilePipeline(pm, *copy, options_, "recompute");
  if (failed(pm.run(*copy))) {
    return std::nullopt;
  }
  return trainStepCost(*copy);
}

namespace {

std::string megabytes(int64_t bytes) {
  return llvm::formatv("{0:F3} MB", bytes / 1e6).str();
}

/// Whether `a` is the better fitting choice: fewer recomputed FLOPs, then a
/// lower peak.
bool better(const TrainStepCost &a, const TrainStepCost &b) {
  return a.recomputedFlops != b.recomputedFlops
             ? a.recomputedFlops < b.recomputedFlops
             : a.peakBytes < b.peakBytes;
}

std::vector<LayerRecompute> prefixChoice(int64_t layers, int64_t full,
                                         int64_t selective) {
  std::vector<LayerRecompute> choice(layers, LayerRecompute::None);
  for (int64_t i = 0; i < full + selective; ++i) {
    choice[i] = i < full ? LayerRecompute::Full : LayerRecompute::Selective;
  }
  return choice;
}

} // namespace

std::optional<BudgetChoice>
mfc::chooseRecompute(RecomputeEvaluator &evaluator, int64_t budgetBytes,
                     BudgetSearch search, std::string &error) {
  int64_t layers = evaluator.numLayers();
  auto evaluate = [&](const std::vector<LayerRecompute> &choice)
      -> std::optional<TrainStepCost> {
    std::optional<TrainStepCost> cost = evaluator.evaluate(choice);
    if (!cost) {
      error = "--memory-budget: a candidate recompute plan failed to compile "
              "(see the diagnostics above)";
    }
    return cost;
  };
  std::optional<TrainStepCost> none =
      evaluate(prefixChoice(layers, 0, 0));
  std::optional<TrainStepCost> full =
      none ? evaluate(prefixChoice(layers, layers, 0)) : std::nullopt;
  if (!none || !full) {
    return std::nullopt;
  }
  if (none->peakBytes <= budgetBytes) {
    return BudgetChoice{prefixChoice(layers, 0, 0), *none};
  }
  if (full->peakBytes > budgetBytes) {
    error = "--memory-budget: " + megabytes(budgetBytes) +
            " cannot be met: the smallest planned peak of a training step is " +
            megabytes(full->peakBytes) + ", recomputing every layer whole (" +
            llvm::formatv("{0:F1}", 100.0 * full->recomputedFlops /
                                        std::max<int64_t>(1, full->flops))
                .str() +
            "% of the step's FLOPs again; without recompute it is " +
            megabytes(none->peakBytes) +
            "); raise the budget, or shrink batch_size or seq_length";
    return std::nullopt;
  }
  BudgetChoice best{prefixChoice(layers, layers, 0), *full};
  auto consider = [&](std::vector<LayerRecompute> choice,
                      const TrainStepCost &cost) {
    if (cost.peakBytes <= budgetBytes && better(cost, best.step)) {
      best = {std::move(choice), cost};
    }
  };
  if (search == BudgetSearch::Exhaustive) {
    std::vector<LayerRecompute> choice(layers, LayerRecompute::None);
    int64_t count = 1;
    for (int64_t i = 0; i < layers; ++i) {
      count *= 3;
    }
    for (int64_t code = 0; code < count; ++code) {
      for (int64_t i = 0, rest = code; i < layers; ++i, rest /= 3) {
        choice[i] = static_cast<LayerRecompute>(rest % 3);
      }
      std::optional<TrainStepCost> cost = evaluate(choice);
      if (!cost) {
        return std::nullopt;
      }
      consider(choice, *cost);
    }
    return best;
  }
  // Layers cost alike, so a choice with `wholeLayers` whole costs at least
  // wholeLayers times one layer's full recompute.
  double wholeLayerFlops = double(full->recomputedFlops) / layers;
  for (int64_t whole = 0; whole < layers; ++whole) {
    if (whole * wholeLayerFlops > double(best.step.recomputedFlops)) {
      break;
    }
    int64_t hi = layers - whole;
    std::optional<TrainStepCost> most = evaluate(prefixChoice(layers, whole, hi));
    if (!most) {
      return std::nullopt;
    }
    if (most->peakBytes > budgetBytes) {
      continue;
    }
    // The fewest selective layers that fit: the peak falls as they grow.
    TrainStepCost fitting = *most;
    int64_t lo = 0;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      std::optional<TrainStepCost> cost =
          evaluate(prefixChoice(layers, whole, mid));
      if (!cost) {
        return std::nullopt;
      }
      if (cost->peakBytes <= budgetBytes) {
        hi = mid;
        fitting = *cost;
      } else {
        lo = mid + 1;
      }
    }
    consider(prefixChoice(layers, whole, hi), fitting);
  }
  return best;
}

std::optional<int64_t> mfc::parseByteSize(llvm::StringRef text) {
  // Longest units first: "MiB" before "B".
  static const struct {
    const char *name;
    double scale;
  } kUnits[] = {{"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30},
                {"TiB", 0x1p40}, {"Ki", 0x1p10},  {"Mi", 0x1p20},
                {"Gi", 0x1p30},  {"Ti", 0x1p40},  {"kB", 1e3},
                {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},
                {"TB", 1e12},    {"k", 1e3},      {"K", 1e3},
                {"M", 1e6},      {"G", 1e9},      {"T", 1e12},
                {"B", 1},        {"", 1}};
  text = text.trim();
  for (const auto &unit : kUnits) {
    llvm::StringRef number = text;
    double value;
    if (!number.consume_back(unit.name) ||
        number.trim().getAsDouble(value) || !(value >= 0)) {
      continue;
    }
    double bytes = std::round(value * unit.scale);
    if (bytes > 0x1p62) {
      return std::nullopt;
    }
    return static_cast<int64_t>(bytes);
  }
  return std::nullopt;
}
