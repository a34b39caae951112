//===- ParallelSearch.h - the parallel layout chosen for a machine -*- C++
//-*-===//
//
// `mfc plan-parallel CONFIG --ranks N --memory-per-rank SIZE`: which
// data/model/pipeline/context parallel split, pipeline schedule (1F1B,
// interleaved, ZB-V), micro-batch size and per-stage recompute counts
// train the config's global batch fastest within the memory.
//
// Each candidate layout is compiled by the compiler itself, as a probe of
// three layers a pipeline part (recomputing whole, selectively, nothing)
// or, without pipelining, of one and of two layers per choice; its
// memory-planned stages give each layer's share of time, kept activations
// and state by choice (StageCosts.h), which predict the full model's
// stages for any counts. The time is the compiled schedule simulated with
// each pass's FLOPs and collectives on a stated machine (CostModel). The
// best candidates are then compiled at full size, and their exact plans
// reported beside the prediction.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_PIPELINES_PARALLELSEARCH_H
#define MFC_COMPILER_PIPELINES_PARALLELSEARCH_H

#include "compiler/Pipelines/StageCosts.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <vector>

namespace mfc {

struct ParallelSearchOptions {
  std::string configFile;
  /// The user's --set overrides, applied before each candidate's.
  std::vector<std::string> overrides;
  int64_t ranks = 1;
  int64_t memoryPerRank = 0;
  CostModel machine;
  /// The per-rank micro-batch sizes tried (runner_config.batch_size;
  /// empty: the config's).
  std::vector<int64_t> microBatchSizes;
  /// How many of the best are compiled at full size.
  int confirm = 3;
  /// Progress and probe failures, one line each ("" = quiet).
  llvm::raw_ostream *log = nullptr;
};

/// One layout with the recompute counts chosen for it.
/// A layout the search tries: the parallel degrees, the pipeline's
/// schedule and chunks, and the micro-batches.
struct ParallelLayout {
  int64_t dataParallel = 1, modelParallel = 1, pipelineStages = 1,
          contextParallel = 1;
  std::string scheduler = "1f1b";
  int64_t chunks = 1;
  int64_t batchSize = 1, microBatches = 1;
};

/// A layout with the recompute chosen for it and what it costs.
struct ParallelCandidate : ParallelLayout {
  /// Per stage, per chunk: layers recomputed whole and selectively.
  std::vector<std::vector<int64_t>> fullLayers, selectiveLayers;
  /// The keys (--set form) that make the config this candidate.
  std::vector<std::string> settings;

  struct Prediction {
    double stepSeconds = 0;
    double idleFraction = 0; ///< of the stages' time, waiting
    std::vector<int64_t> stagePeakBytes;
    int64_t peakBytes() const;
  };
  Prediction predicted;
  /// At full size, when compiled (the best few, and the config itself).
  std::optional<Prediction> compiled;
  bool fits = false;

  std::string layoutText() const; ///< "dp1 mp4 pp8 cp1"
  std::string
  scheduleText() const; ///< "1f1b", "interleaved x2", "zero_bubble_v"
  std::string recomputeText() const; ///< the counts as recompute_config keys
};

struct ParallelSearchResult {
  int64_t globalBatch = 0, seqLength = 0;
  /// Every candidate that compiled, best first (fitting ones by step time,
  /// then the others by peak).
  std::vector<ParallelCandidate> candidates;
  /// Layouts refused before probing, by the reason (the frontend's first
  /// error, or the search's own rule) with how many.
  std::map<std::string, int> refused;
  int probesCompiled = 0;
  double seconds = 0;
  /// The config as written (its own layout and recompute_config), compiled
  /// at full size when it is a training config for `ranks` ranks.
  std::optional<ParallelCandidate> asConfigured;
};

/// The search; an error string (a config that does not load, is not a
/// training config, or an internal failure) instead of a result.
std::optional<ParallelSearchResult>
searchParallelPlans(const ParallelSearchOptions &options, std::string &error);

} // namespace mfc

#endif // MFC_COMPILER_PIPELINES_PARALLELSEARCH_H
