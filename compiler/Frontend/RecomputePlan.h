//===- RecomputePlan.h - recompute_config as mf-recompute options -*- C++ -*-===//
//
// MindFormers' recompute forms (bool, per-stage layer counts, op patterns,
// a map of pattern -> bool or counts) resolved against the model's layers:
// which layers mf-recompute recomputes whole and which ops alone.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_FRONTEND_RECOMPUTEPLAN_H
#define MFC_COMPILER_FRONTEND_RECOMPUTEPLAN_H

#include "compiler/Frontend/ModelSpec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mfc {

/// The layers of one pipeline stage: [first, first + count).
struct StageLayers {
  int64_t first;
  int64_t count;
};

/// The layers of each pipeline stage as MindFormers assigns them:
/// num_layers / pipeline_stage each, plus the stage's `offset` (validated:
/// the offsets add up to the remainder). Shared with pipeline sharding.
std::vector<StageLayers> stageLayers(const ModelSpec &spec);

/// The model path of layer `index` ("model.layers.3", "transformer.h.3").
std::string layerPath(const ModelSpec &spec, int64_t index);

/// mf-recompute's options: layer prefixes recomputed whole (`recompute`),
/// and op patterns recomputed alone (`select_recompute`), each pattern
/// prefixed by its layer when it applies to some layers only. A layer
/// recomputed whole needs no selected ops: full recompute wins.
struct RecomputePlan {
  std::vector<std::string> fullLayers;
  std::vector<std::string> selectedOps;
};
RecomputePlan planRecompute(const ModelSpec &spec);

/// The ops `select_recompute: True` (or per-stage counts) selects in every
/// chosen layer, as MindFormers' LLaMA does.
extern const char *const kDefaultSelectPatterns[2];

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_RECOMPUTEPLAN_H
