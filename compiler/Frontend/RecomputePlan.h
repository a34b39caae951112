//===- RecomputePlan.h - recompute_config as mf-recompute options -*- C++ -*-===//
//
// MindFormers' recompute forms (bool, per-stage layer counts, op patterns,
// a map of pattern -> bool or counts, and their exclusions) resolved
// against the model's layers: which layers mf-recompute recomputes whole,
// which ops alone, and which ops it must keep.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_FRONTEND_RECOMPUTEPLAN_H
#define MFC_COMPILER_FRONTEND_RECOMPUTEPLAN_H

#include "compiler/Frontend/ModelSpec.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mfc {

/// The layers [first, first + count) of one interleave chunk of one
/// pipeline stage.
struct LayerChunk {
  int64_t stage;
  int64_t chunk;
  int64_t first;
  int64_t count;
};

/// The model's layers in chunks as MindFormers assigns them, in layer order
/// (chunk 0 of every stage, then chunk 1, ...; under zero_bubble_v chunk 1
/// from the last stage back to the first): num_layers / (stages *
/// pp_interleave_num) each, plus the chunk's `offset` (validated: the
/// offsets add up to the remainder). Shared with pipeline sharding.
std::vector<LayerChunk> layerChunks(const ModelSpec &spec);

/// The model path of layer `index` ("model.layers.3", "transformer.h.3").
std::string layerPath(const ModelSpec &spec, int64_t index);

/// mf-recompute's options, each op pattern prefixed by its layer
/// ("model.layers.3:feed_forward\.mul"):
/// - fullLayers: layer prefixes recomputed whole (`recompute`);
/// - selectedOps: ops recomputed alone (`select_recompute`), in layers not
///   recomputed whole (full recompute wins), minus the patterns an
///   exclusion conflicts with, as MindFormers removes them;
/// - selectedCommOps: cells whose all-gathers are recomputed
///   (`select_comm_recompute`), minus what `select_comm_recompute_exclude`
///   conflicts with;
/// - excludedOps: ops kept whatever else says (`select_recompute_exclude`).
struct RecomputePlan {
  std::vector<std::string> fullLayers;
  std::vector<std::string> selectedOps;
  std::vector<std::string> selectedCommOps;
  std::vector<std::string> excludedOps;
};
RecomputePlan planRecompute(const ModelSpec &spec);

/// What one layer recomputes in a plan the compiler chooses
/// (--memory-budget): nothing, MindFormers' default ops, or all of it.
enum class LayerRecompute { None, Selective, Full };
const char *toString(LayerRecompute choice);

/// The plan for one choice per layer; the config's exclusions still hold.
RecomputePlan planRecompute(const ModelSpec &spec,
                            llvm::ArrayRef<LayerRecompute> layers);

/// The ops `select_recompute: True` (or per-stage counts) selects in every
/// chosen layer, as MindFormers' LLaMA does.
extern const char *const kDefaultSelectPatterns[2];
/// The cells whose communication `select_comm_recompute: True` (or counts)
/// recomputes: MindFormers' default '.*\.norm' matches its LLaMA's
/// attention_norm.norm and ffn_norm.norm, mfc's attention_norm and
/// ffn_norm (GPT-2's ln_1 and ln_2).
extern const char *const kDefaultCommPatterns[4];

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_RECOMPUTEPLAN_H
