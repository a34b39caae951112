//===- RecomputePlan.cpp - recompute_config as mf-recompute options -------===//

#include "compiler/Frontend/RecomputePlan.h"

#include "shapes/GridAxes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <set>

using namespace mfc;

const char *const mfc::kDefaultSelectPatterns[2] = {
    "feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu"};
const char *const mfc::kDefaultCommPatterns[4] = {"attention_norm", "ffn_norm",
                                                  "ln_1", "ln_2"};

const char *mfc::toString(LayerRecompute choice) {
  switch (choice) {
  case LayerRecompute::None:
    return "none";
  case LayerRecompute::Selective:
    return "selective";
  case LayerRecompute::Full:
    return "full";
  }
  return "?";
}

std::vector<LayerChunk> mfc::layerChunks(const ModelSpec &spec) {
  int64_t stages = std::max<int64_t>(1, spec.parallel.pipelineStage);
  int64_t chunks = std::max<int64_t>(1, spec.model.ppInterleaveNum);
  int64_t each = spec.model.numLayers / (stages * chunks);
  bool vShape = mfshapes::isVShapedScheduler(spec.parallel.pipelineScheduler);
  std::vector<LayerChunk> result;
  int64_t first = 0;
  for (int64_t part = 0; part < stages * chunks; ++part) {
    auto [stage, chunk] = mfshapes::pipelinePlaceOf(part, stages, vShape);
    int64_t count = each + spec.model.chunkOffset(chunk, stage);
    result.push_back({stage, chunk, first, count});
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

/// The layers that "the first n layers" counts choose (empty counts: all).
/// One row of per-stage counts with several chunks is spread over the
/// stage's chunks round-robin, as MindFormers' _alloc_recompute_layer does.
std::set<int64_t> chosenLayers(const ModelSpec &spec, const LayerCounts &counts) {
  std::vector<LayerChunk> layout = layerChunks(spec);
  std::vector<int64_t> taken(layout.size(), 0);
  if (counts.empty()) {
    for (size_t i = 0; i < layout.size(); ++i) {
      taken[i] = layout[i].count;
    }
  } else if (counts.perChunk) {
    for (size_t i = 0; i < layout.size(); ++i) {
      const std::vector<int64_t> &row = counts.rows[layout[i].chunk];
      taken[i] = std::min(layout[i].count, row[layout[i].stage]);
    }
  } else {
    const std::vector<int64_t> &row = counts.rows.front();
    for (size_t stage = 0; stage < row.size(); ++stage) {
      std::vector<size_t> chunksOfStage;
      int64_t layers = 0;
      for (size_t i = 0; i < layout.size(); ++i) {
        if (layout[i].stage == static_cast<int64_t>(stage)) {
          chunksOfStage.push_back(i);
          layers += layout[i].count;
        }
      }
      for (int64_t left = std::min(row[stage], layers); left > 0;) {
        for (size_t i : chunksOfStage) {
          if (left > 0 && taken[i] < layout[i].count) {
            ++taken[i];
            --left;
          }
        }
      }
    }
  }
  std::set<int64_t> layers;
  for (size_t i = 0; i < layout.size(); ++i) {
    for (int64_t j = 0; j < taken[i]; ++j) {
      layers.insert(layout[i].first + j);
    }
  }
  return layers;
}

/// MindFormers' _check_repeat_pattern: same number of levels, and at each
/// level one pattern full-matches the other.
bool conflicts(llvm::StringRef a, llvm::StringRef b) {
  llvm::SmallVector<llvm::StringRef> levelsA, levelsB;
  a.split(levelsA, "\\.");
  b.split(levelsB, "\\.");
  if (levelsA.size() != levelsB.size()) {
    return false;
  }
  auto fullMatch = [](llvm::StringRef pattern, llvm::StringRef text) {
    return llvm::Regex("^(" + pattern.str() + ")$").match(text);
  };
  for (size_t i = 0; i < levelsA.size(); ++i) {
    if (!fullMatch(levelsA[i], levelsB[i]) && !fullMatch(levelsB[i], levelsA[i])) {
      return false;
    }
  }
  return true;
}

/// Each pattern of `selection`, on the layers it applies to; True and
/// counts apply `defaults` (MindFormers' default patterns).
void forEachPattern(
    const ModelSpec &spec, const RecomputeSelection &selection,
    llvm::ArrayRef<const char *> defaults,
    llvm::function_ref<void(const std::string &, const std::set<int64_t> &)>
        apply) {
  using Kind = RecomputeSelection::Kind;
  if (selection.kind == Kind::OpPatterns) {
    for (const RecomputeSelection::Pattern &pattern : selection.patterns) {
      apply(pattern.regex, chosenLayers(spec, pattern.layers));
    }
  } else if (selection.kind == Kind::All ||
             selection.kind == Kind::LayersPerStage) {
    std::set<int64_t> layers = chosenLayers(spec, selection.layers);
    for (const char *pattern : defaults) {
      apply(pattern, layers);
    }
  }
}

/// The config's exclusions, per layer, and the patterns they remove.
void addExclusions(const ModelSpec &spec, RecomputePlan &plan,
                   std::vector<std::string> &excludePatterns) {
  forEachPattern(spec, spec.recompute.selectRecomputeExclude, {},
                 [&](const std::string &pattern, const std::set<int64_t> &layers) {
                   excludePatterns.push_back(pattern);
                   for (int64_t layer : layers) {
                     plan.excludedOps.push_back(layerPath(spec, layer) + ":" +
                                                pattern);
                   }
                 });
}

} // namespace

RecomputePlan mfc::planRecompute(const ModelSpec &spec) {
  RecomputePlan plan;
  std::vector<std::string> excludePatterns;
  addExclusions(spec, plan, excludePatterns);
  using Kind = RecomputeSelection::Kind;
  std::set<int64_t> full;
  const RecomputeSelection &recompute = spec.recompute.recompute;
  if (recompute.kind == Kind::All || recompute.kind == Kind::LayersPerStage) {
    full = chosenLayers(spec, recompute.layers);
  }
  for (int64_t layer : full) {
    plan.fullLayers.push_back(layerPath(spec, layer));
  }
  auto select = [&](const std::string &pattern, const std::set<int64_t> &layers) {
    if (llvm::any_of(excludePatterns, [&](const std::string &exclude) {
          return conflicts(pattern, exclude);
        })) {
      return;
    }
    for (int64_t layer : layers) {
      if (!full.count(layer)) {
        plan.selectedOps.push_back(layerPath(spec, layer) + ":" + pattern);
      }
    }
  };
  forEachPattern(spec, spec.recompute.selectRecompute, kDefaultSelectPatterns,
                 select);
  // select_comm_recompute: the chosen cells' all-gathers, minus what its
  // own exclusions conflict with.
  std::vector<std::string> commExcludePatterns;
  forEachPattern(spec, spec.recompute.selectCommRecomputeExclude, {},
                 [&](const std::string &pattern, const std::set<int64_t> &) {
                   commExcludePatterns.push_back(pattern);
                 });
  forEachPattern(
      spec, spec.recompute.selectCommRecompute, kDefaultCommPatterns,
      [&](const std::string &pattern, const std::set<int64_t> &layers) {
        if (llvm::any_of(commExcludePatterns, [&](const std::string &exclude) {
              return conflicts(pattern, exclude);
            })) {
          return;
        }
        for (int64_t layer : layers) {
          if (!full.count(layer)) {
            plan.selectedCommOps.push_back(layerPath(spec, layer) + ":" +
                                           pattern);
          }
        }
      });
  return plan;
}

RecomputePlan mfc::planRecompute(const ModelSpec &spec,
                                 llvm::ArrayRef<LayerRecompute> layers) {
  RecomputePlan plan;
  std::vector<std::string> excludePatterns;
  addExclusions(spec, plan, excludePatterns);
  for (auto [index, choice] : llvm::enumerate(layers)) {
    std::string layer = layerPath(spec, static_cast<int64_t>(index));
    if (choice == LayerRecompute::Full) {
      plan.fullLayers.push_back(layer);
    } else if (choice == LayerRecompute::Selective) {
      for (const char *pattern : kDefaultSelectPatterns) {
        plan.selectedOps.push_back(layer + ":" + pattern);
      }
    }
  }
  return plan;
}
