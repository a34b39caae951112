//===- RecomputePlan.cpp - recompute_config as mf-recompute options -------===//

#include "compiler/Frontend/RecomputePlan.h"

#include <algorithm>
#include <set>

using namespace mfc;

const char *const mfc::kDefaultSelectPatterns[2] = {
    "feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu"};

std::vector<StageLayers> mfc::stageLayers(const ModelSpec &spec) {
  int64_t stages = std::max<int64_t>(1, spec.parallel.pipelineStage);
  int64_t each = spec.model.numLayers / stages;
  std::vector<int64_t> offsets = spec.model.stageOffsets(stages);
  std::vector<StageLayers> result;
  int64_t first = 0;
  for (int64_t stage = 0; stage < stages; ++stage) {
    int64_t count =
        each + (stage < static_cast<int64_t>(offsets.size()) ? offsets[stage] : 0);
    result.push_back({first, count});
    first += count;
  }
  return result;
}

std::string mfc::layerPath(const ModelSpec &spec, int64_t index) {
  return (spec.model.family == ModelFamily::GPT2 ? "transformer.h."
                                                 : "model.layers.") +
         std::to_string(index);
}

namespace {

/// The layers a selection of "the first n layers of each stage" (or all)
/// chooses.
std::set<int64_t> chosenLayers(const ModelSpec &spec,
                               const std::vector<int64_t> &perStage) {
  std::set<int64_t> layers;
  std::vector<StageLayers> stages = stageLayers(spec);
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    int64_t count = perStage.empty()
                        ? stages[stage].count
                        : std::min(stages[stage].count,
                                   stage < perStage.size() ? perStage[stage] : 0);
    for (int64_t i = 0; i < count; ++i) {
      layers.insert(stages[stage].first + i);
    }
  }
  return layers;
}

} // namespace

RecomputePlan mfc::planRecompute(const ModelSpec &spec) {
  RecomputePlan plan;
  using Kind = RecomputeSelection::Kind;
  std::set<int64_t> full;
  const RecomputeSelection &recompute = spec.recompute.recompute;
  if (recompute.kind == Kind::All || recompute.kind == Kind::LayersPerStage) {
    full = chosenLayers(spec, recompute.kind == Kind::All
                                  ? std::vector<int64_t>()
                                  : recompute.layersPerStage);
  }
  for (int64_t layer : full) {
    plan.fullLayers.push_back(layerPath(spec, layer));
  }
  // Op patterns, each on the layers it names (every layer: no prefix).
  auto select = [&](const std::string &pattern,
                    const std::vector<int64_t> &perStage, bool everyLayer) {
    if (everyLayer) {
      plan.selectedOps.push_back(pattern);
      return;
    }
    for (int64_t layer : chosenLayers(spec, perStage)) {
      if (!full.count(layer)) {
        plan.selectedOps.push_back(layerPath(spec, layer) + ":" + pattern);
      }
    }
  };
  const RecomputeSelection &selective = spec.recompute.selectRecompute;
  for (const RecomputeSelection *selection : {&recompute, &selective}) {
    if (selection->kind == Kind::OpPatterns) {
      for (const RecomputeSelection::Pattern &pattern : selection->patterns) {
        select(pattern.regex, pattern.layersPerStage,
               pattern.layersPerStage.empty());
      }
    }
  }
  if (selective.kind == Kind::All || selective.kind == Kind::LayersPerStage) {
    for (const char *pattern : kDefaultSelectPatterns) {
      select(pattern, selective.layersPerStage, selective.kind == Kind::All);
    }
  }
  return plan;
}
