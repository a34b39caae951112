//===- ParallelSearch.cpp - the parallel layout chosen for a machine ------===//

#include "compiler/Pipelines/ParallelSearch.h"

#include "compiler/Frontend/ModelBuilder.h"
#include "compiler/Frontend/ModelSpecReader.h"
#include "compiler/Frontend/ModuleSettings.h"
#include "compiler/Pipelines/Pipelines.h"
#include "dialects/MF/IR/MFDialect.h"
#include "dialects/MFExec/IR/MFExecOps.h"
#include "shapes/GridAxes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>

using namespace mlir;
using namespace mfc;

int64_t ParallelCandidate::Prediction::peakBytes() const {
  int64_t most = 0;
  for (int64_t bytes : stagePeakBytes) {
    most = std::max(most, bytes);
  }
  return most;
}

std::string ParallelCandidate::layoutText() const {
  return llvm::formatv("dp{0} mp{1} pp{2} cp{3}", dataParallel, modelParallel,
                       pipelineStages, contextParallel);
}

std::string ParallelCandidate::scheduleText() const {
  if (pipelineStages == 1) {
    return "-";
  }
  if (scheduler == "1f1b" && chunks > 1) {
    return "1f1b x" + std::to_string(chunks);
  }
  return scheduler;
}

namespace {

/// "[1,0,2]", or per chunk "[[1,0],[0,1]]".
std::string countsText(const std::vector<std::vector<int64_t>> &perStage,
                       int64_t chunks) {
  auto row = [](const std::vector<int64_t> &values) {
    std::string text = "[";
    for (size_t i = 0; i < values.size(); ++i) {
      text += (i ? "," : "") + std::to_string(values[i]);
    }
    return text + "]";
  };
  if (chunks == 1) {
    std::vector<int64_t> values;
    for (const std::vector<int64_t> &stage : perStage) {
      values.push_back(stage[0]);
    }
    return row(values);
  }
  std::string text = "[";
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    std::vector<int64_t> values;
    for (const std::vector<int64_t> &stage : perStage) {
      values.push_back(stage[static_cast<size_t>(chunk)]);
    }
    text += (chunk ? "," : "") + row(values);
  }
  return text + "]";
}

bool anyAbove0(const std::vector<std::vector<int64_t>> &counts) {
  for (const std::vector<int64_t> &stage : counts) {
    for (int64_t count : stage) {
      if (count > 0) {
        return true;
      }
    }
  }
  return false;
}

} // namespace

std::string ParallelCandidate::recomputeText() const {
  if (fullLayers.empty()) {
    return "as configured";
  }
  // MindFormers' counts are the first layers of a stage or chunk; full
  // recompute wins where both select, so the selective list counts both.
  std::vector<std::vector<int64_t>> selecting = fullLayers;
  for (size_t s = 0; s < selecting.size(); ++s) {
    for (size_t c = 0; c < selecting[s].size(); ++c) {
      selecting[s][c] += selectiveLayers[s][c];
    }
  }
  std::string full =
      anyAbove0(fullLayers) ? countsText(fullLayers, chunks) : "False";
  std::string selective =
      anyAbove0(selectiveLayers) ? countsText(selecting, chunks) : "False";
  return "recompute: " + full + ", select_recompute: " + selective;
}

namespace {

/// Loads the config with `overrides`, its diagnostics kept out of sight;
/// nullopt with the first error's message.
std::optional<ModelSpec> loadQuietly(const std::string &file,
                                     const std::vector<std::string> &overrides,
                                     std::string &error) {
  std::string text;
  llvm::raw_string_ostream os(text);
  ConfigDiagnostics diagnostics(os);
  std::optional<ModelSpec> spec = loadModelSpec(diagnostics, file, overrides);
  if (!spec) {
    // "file:3:5: error: message" -> "message".
    StringRef all(text);
    size_t at = all.find("error: ");
    error = at == StringRef::npos
                ? "the config did not load"
                : all.drop_front(at + 7)
                      .take_until([](char c) { return c == '\n'; })
                      .str();
  }
  return spec;
}

/// `spec` compiled through memory planning with a recompute choice per
/// layer; null with the first diagnostic's message.
OwningOpRef<ModuleOp> compileQuietly(MLIRContext &context,
                                     const ModelSpec &spec,
                                     const RecomputePlan &plan,
                                     double planSeconds, std::string &error) {
  std::string first;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() == DiagnosticSeverity::Error &&
        first.empty()) {
      first = diagnostic.str();
    }
    return success();
  });
  OwningOpRef<ModuleOp> module = buildModelModule(context, spec);
  if (!module) {
    error = first.empty() ? "the frontend built nothing" : first;
    return nullptr;
  }
  setRecomputeDecision(*module, plan);
  CompileOptions options;
  options.compileTo = "memory-plan";
  options.memoryPlanSeconds = planSeconds;
  PassManager pm(&context);
  buildCompilePipeline(pm, *module, options);
  if (failed(pm.run(*module))) {
    error = first.empty() ? "a pass failed" : first;
    return nullptr;
  }
  return module;
}

/// `total` layers spread over chunks of `sizes` layers round-robin (as
/// MindFormers spreads a stage's count over its chunks).
std::vector<int64_t> spread(int64_t total, const std::vector<int64_t> &sizes) {
  std::vector<int64_t> taken(sizes.size(), 0);
  for (int64_t left = total; left > 0;) {
    bool placed = false;
    for (size_t i = 0; i < sizes.size() && left > 0; ++i) {
      if (taken[i] < sizes[i]) {
        ++taken[i];
        --left;
        placed = true;
      }
    }
    if (!placed) {
      break;
    }
  }
  return taken;
}

/// What a rank of `stage` plans with `counts` (per chunk) layers of each
/// choice: its state, its update's arena, its chunks' arenas, and the most
/// its micro-batches keep under `schedule` (null: nothing kept apart).
int64_t stagePeakBytes(const StageCosts &stage,
                       const std::vector<ChoiceCounts> &counts,
                       const StageSchedule *schedule) {
  ChoiceCounts stageLayers{};
  std::vector<int64_t> kept, weightKept;
  std::vector<bool> last;
  double chunkArenas = 0;
  for (auto [c, chunk] : llvm::enumerate(stage.chunks)) {
    for (size_t choice = 0; choice < stageLayers.size(); ++choice) {
      stageLayers[choice] += counts[c][choice];
    }
    kept.push_back(static_cast<int64_t>(chunk.kept.at(counts[c])));
    weightKept.push_back(static_cast<int64_t>(chunk.weightKept.at(counts[c])));
    last.push_back(chunk.lastPart);
    chunkArenas += chunk.arena.at(counts[c]);
  }
  return static_cast<int64_t>(stage.staticBytes.at(stageLayers) +
                              stage.arena.at(stageLayers) + chunkArenas) +
         (schedule ? peakKeptBytes(*schedule, kept, weightKept, last) : 0);
}

/// The step a candidate's costs predict with `counts` (per stage, per
/// chunk) layers of each choice.
ParallelCandidate::Prediction
predict(const std::vector<StageCosts> &stages,
        const std::vector<std::vector<ChoiceCounts>> &counts,
        const std::vector<StageSchedule> &schedule,
        const std::string &scheduler, int64_t microBatches,
        const CostModel &machine) {
  ParallelCandidate::Prediction prediction;
  double update = 0;
  for (auto [s, stage] : llvm::enumerate(stages)) {
    prediction.stagePeakBytes.push_back(stagePeakBytes(
        stage, counts[s], schedule.empty() ? nullptr : &schedule[s]));
    ChoiceCounts stageLayers{};
    for (const ChoiceCounts &chunk : counts[s]) {
      for (size_t choice = 0; choice < stageLayers.size(); ++choice) {
        stageLayers[choice] += chunk[choice];
      }
    }
    update = std::max(update, stage.update.at(stageLayers));
  }
  if (schedule.empty()) {
    // One stage: micro-batches one after the other, then the update.
    prediction.stepSeconds = static_cast<double>(microBatches) *
                                 stages[0].chunks[0].backward.at(counts[0][0]) +
                             update;
    return prediction;
  }
  int64_t stageCount = static_cast<int64_t>(stages.size());
  bool vShape = mfshapes::isVShapedScheduler(scheduler);
  TimedStep step = simulateStepTimes(
      scheduler, schedule,
      [&](int64_t s, const PipelineSlot &slot, bool, bool) {
        const ChunkCosts &chunk = stages[static_cast<size_t>(s)]
                                      .chunks[static_cast<size_t>(slot.chunk)];
        const ChoiceCounts &layers =
            counts[static_cast<size_t>(s)][static_cast<size_t>(slot.chunk)];
        return (slot.weight     ? chunk.weights
                : slot.backward ? chunk.backward
                                : chunk.forward)
            .at(layers);
      },
      [&](int64_t from, int64_t to) {
        mfshapes::PipelinePlace a =
            mfshapes::pipelinePlaceOf(from, stageCount, vShape);
        mfshapes::PipelinePlace b =
            mfshapes::pipelinePlaceOf(to, stageCount, vShape);
        if (a.stage == b.stage) {
          return 0.0; // handed over in memory
        }
        mfshapes::PipelinePlace later = from > to ? a : b;
        return machine.messageSeconds(
            stages[static_cast<size_t>(later.stage)]
                .chunks[static_cast<size_t>(later.chunk)]
                .inputBytes);
      });
  double busy = 0;
  for (double stageBusy : step.busy) {
    busy += stageBusy;
  }
  prediction.idleFraction =
      step.length > 0 ? 1.0 - busy / (step.length * stages.size()) : 0;
  prediction.stepSeconds = step.length + update;
  return prediction;
}

class Search {
public:
  Search(const ParallelSearchOptions &options, MLIRContext &context)
      : options_(options), context_(context) {}

  std::optional<ParallelSearchResult> run(std::string &error);

private:
  std::vector<std::string> settingsOf(const ParallelLayout &layout) const;
  /// The config with the user's overrides, then `settings`, with the
  /// recompute keys cleared (the search chooses per layer).
  std::optional<ModelSpec> loadWith(llvm::ArrayRef<std::string> settings,
                                    std::string &why) const;
  /// `spec` compiled with `plan` and measured on `machine`, each layer's
  /// costs attributed to its entry in `choices`.
  std::optional<std::vector<StageCosts>>
  compileAndMeasure(const ModelSpec &spec,
                    const std::vector<LayerRecompute> &choices,
                    const RecomputePlan &plan, const CostModel &machine,
                    double planSeconds, std::string &why);
  CostModel machineFor(const ParallelLayout &layout) const;
  /// The layout's costs from probes; nullopt with why.
  std::optional<std::vector<StageCosts>> probe(const ParallelLayout &layout,
                                               std::string &why);
  std::optional<std::vector<StageCosts>>
  probePipeline(const ParallelLayout &layout, std::string &why);
  /// `layout` compiled with `layers` layers recomputing `choices` (empty:
  /// three a part, whole, selective, none), measured on machine_.
  std::optional<std::vector<StageCosts>>
  compileProbe(const ParallelLayout &layout, int64_t layers,
               std::vector<LayerRecompute> choices, std::string &why);
  /// The recompute counts that fit each stage with the least recomputed
  /// time, and the prediction they give.
  ParallelCandidate choose(const ParallelLayout &layout, const ModelSpec &spec,
                           const std::vector<StageCosts> &costs);
  /// The candidate compiled at full size.
  std::optional<ParallelCandidate::Prediction>
  compileFull(const ParallelCandidate &candidate, std::string &why);
  std::optional<ParallelCandidate::Prediction>
  measureFull(const ModelSpec &spec, const RecomputePlan &plan,
              const CostModel &machine,
              const std::vector<LayerRecompute> &choices, std::string &why);

  void log(const llvm::Twine &line) {
    if (options_.log) {
      *options_.log << line << "\n";
      options_.log->flush();
    }
  }

  const ParallelSearchOptions &options_;
  MLIRContext &context_;
  /// The candidate being probed's machine (its grid places the ranks).
  CostModel machine_;
  /// Pipeline probes by dp, mp, cp, micro-batch size and V shape: shared
  /// by the schedules and chunk counts of a layout.
  struct Probed {
    std::optional<std::vector<StageCosts>> costs;
    std::string why; ///< when it failed
  };
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, Probed>
      pipelineProbes_;
  int probes_ = 0;
};

std::vector<std::string>
Search::settingsOf(const ParallelLayout &layout) const {
  bool pipelined = layout.pipelineStages > 1;
  return {
      "use_parallel=True",
      "parallel_config.data_parallel=" + std::to_string(layout.dataParallel),
      "parallel_config.model_parallel=" + std::to_string(layout.modelParallel),
      "parallel_config.pipeline_stage=" + std::to_string(layout.pipelineStages),
      "parallel_config.context_parallel=" +
          std::to_string(layout.contextParallel),
      "parallel_config.micro_batch_num=" +
          std::to_string(pipelined ? layout.microBatches : 1),
      "runner_config.batch_size=" + std::to_string(layout.batchSize),
      "runner_config.gradient_accumulation_steps=" +
          std::to_string(pipelined ? 1 : layout.microBatches),
      "model.model_config.pp_interleave_num=" + std::to_string(layout.chunks),
      std::string("parallel.pipeline_config.pipeline_interleave=") +
          (layout.chunks > 1 ? "True" : "False"),
      "parallel.pipeline_config.pipeline_scheduler=" + layout.scheduler,
      "model.model_config.offset=0",
  };
}

CostModel Search::machineFor(const ParallelLayout &layout) const {
  CostModel machine = options_.machine;
  machine.grid = {layout.dataParallel, layout.modelParallel,
                  layout.pipelineStages, layout.contextParallel};
  return machine;
}

/// The keys that let the search choose what each layer recomputes.
const char *const kNoRecompute[] = {
    "recompute_config.recompute=False",
    "recompute_config.select_recompute=False",
    "recompute_config.select_comm_recompute=False",
};

std::optional<std::vector<StageCosts>>
Search::compileProbe(const ParallelLayout &layout, int64_t layers,
                     std::vector<LayerRecompute> choices, std::string &why) {
  std::vector<std::string> settings = settingsOf(layout);
  settings.push_back("model.model_config.num_layers=" + std::to_string(layers));
  std::optional<ModelSpec> spec = loadWith(settings, why);
  if (!spec) {
    return std::nullopt;
  }
  if (choices.empty()) {
    // Three layers a part: whole, selective, none (the first layers of a
    // chunk are the ones counts choose).
    choices.assign(static_cast<size_t>(layers), LayerRecompute::None);
    for (const LayerChunk &chunk : layerChunks(*spec)) {
      for (int64_t i = 0; i < chunk.count && i < 3; ++i) {
        choices[static_cast<size_t>(chunk.first + i)] =
            i == 0   ? LayerRecompute::Full
            : i == 1 ? LayerRecompute::Selective
                     : LayerRecompute::None;
      }
    }
  }
  ++probes_;
  // A probe's arenas are its first plans: the search below them takes
  // most of a small module's compilation.
  return compileAndMeasure(*spec, choices, planRecompute(*spec, choices),
                           machine_, /*planSeconds=*/0, why);
}

std::optional<ModelSpec> Search::loadWith(llvm::ArrayRef<std::string> settings,
                                          std::string &why) const {
  std::vector<std::string> all = options_.overrides;
  llvm::append_range(all, settings);
  llvm::append_range(all, kNoRecompute);
  return loadQuietly(options_.configFile, all, why);
}

std::optional<std::vector<StageCosts>>
Search::compileAndMeasure(const ModelSpec &spec,
                          const std::vector<LayerRecompute> &choices,
                          const RecomputePlan &plan, const CostModel &machine,
                          double planSeconds, std::string &why) {
  OwningOpRef<ModuleOp> module =
      compileQuietly(context_, spec, plan, planSeconds, why);
  if (!module) {
    return std::nullopt;
  }
  std::optional<std::vector<StageCosts>> costs =
      measureStageCosts(*module, machine, [&](int64_t layer) {
        return layer < static_cast<int64_t>(choices.size())
                   ? choices[static_cast<size_t>(layer)]
                   : LayerRecompute::None;
      });
  if (!costs) {
    why = "the compiled module is not a planned training step";
  }
  return costs;
}

std::optional<std::vector<StageCosts>>
Search::probe(const ParallelLayout &layout, std::string &why) {
  machine_ = machineFor(layout);
  if (layout.pipelineStages > 1) {
    return probePipeline(layout, why);
  }
  // One part: its arena holds what the layers keep, so each layer's share
  // is what one more layer adds.
  // None at one and two layers gives what lies outside the layers; the
  // other choices at one layer each give theirs.
  std::optional<std::vector<StageCosts>> merged =
      compileProbe(layout, 1, {LayerRecompute::None}, why);
  std::optional<std::vector<StageCosts>> two =
      merged ? compileProbe(layout, 2,
                            {LayerRecompute::None, LayerRecompute::None}, why)
             : merged;
  if (!two) {
    return std::nullopt;
  }
  ChoiceCounts oneNone{}, twoNone{};
  oneNone[0] = 1;
  twoNone[0] = 2;
  StageCosts &stage = (*merged)[0];
  const StageCosts &other = (*two)[0];
  auto fitNone = [&](LayerLinear &into, const LayerLinear &twoLayers) {
    double first = into.at(oneNone), second = twoLayers.at(twoNone);
    into = LayerLinear{2 * first - second, {second - first, 0, 0}};
  };
  fitNone(stage.staticBytes, other.staticBytes);
  fitNone(stage.arena, other.arena);
  fitNone(stage.update, other.update);
  fitNone(stage.chunks[0].backward, other.chunks[0].backward);
  for (LayerRecompute choice :
       {LayerRecompute::Selective, LayerRecompute::Full}) {
    std::optional<std::vector<StageCosts>> one =
        compileProbe(layout, 1, {choice}, why);
    if (!one) {
      return std::nullopt;
    }
    size_t k = static_cast<size_t>(choice);
    ChoiceCounts oneLayer{};
    oneLayer[k] = 1;
    auto fit = [&](LayerLinear &into, const LayerLinear &measured) {
      into.perLayer[k] = measured.at(oneLayer) - into.fixed;
    };
    const StageCosts &measured = (*one)[0];
    fit(stage.staticBytes, measured.staticBytes);
    fit(stage.arena, measured.arena);
    fit(stage.update, measured.update);
    fit(stage.chunks[0].backward, measured.chunks[0].backward);
  }
  return merged;
}

std::optional<std::vector<StageCosts>>
Search::probePipeline(const ParallelLayout &layout, std::string &why) {
  // A pipeline's parts are the first (the embedding), the last (norm,
  // lm_head, loss) and the ones between, which differ only in their
  // layers: a probe of 3 stages (ZB-V: 2 stages of 2 chunks, whose middle
  // parts are stage 1's) has each, 3 layers a part, at the candidate's
  // other splits and micro-batch size; the candidate's stages are made of
  // them.
  bool vShape = mfshapes::isVShapedScheduler(layout.scheduler);
  ParallelLayout small = layout;
  small.pipelineStages = vShape ? 2 : 3;
  small.chunks = vShape ? 2 : 1;
  small.microBatches = 2 * small.pipelineStages;
  std::tuple<int64_t, int64_t, int64_t, int64_t, bool> key{
      layout.dataParallel, layout.modelParallel, layout.contextParallel,
      layout.batchSize, vShape};
  auto cached = pipelineProbes_.find(key);
  if (cached == pipelineProbes_.end()) {
    Probed probed;
    probed.costs = compileProbe(small, 3 * small.pipelineStages * small.chunks,
                                {}, probed.why);
    cached = pipelineProbes_.emplace(key, std::move(probed)).first;
  }
  if (!cached->second.costs) {
    why = cached->second.why;
    return std::nullopt;
  }
  const std::vector<StageCosts> &probed = *cached->second.costs;
  // Per kind of part (first, between, last): its chunk, and the probe
  // stage whose state and arena it stands for.
  const StageCosts &firstStage = probed[0];
  const StageCosts &middleStage = probed[1];
  const StageCosts &lastStage = vShape ? probed[0] : probed[2];
  const ChunkCosts &first = probed[0].chunks[0];
  const ChunkCosts &middle = probed[1].chunks[0];
  const ChunkCosts &probedLast =
      vShape ? probed[0].chunks[1] : probed[2].chunks[0];
  // The last part's backward runs its forward too: its arena holds what a
  // between part keeps per layer.
  ChunkCosts last = probedLast;
  last.arena.perLayer = middle.kept.perLayer;
  last.arena.fixed = probedLast.arena.fixed -
                     (middle.kept.at(probedLast.layers) - middle.kept.fixed);
  // The update's arena grows with the stage's parameters: per layer as the
  // between stage's (which holds nothing else).
  auto layersOf = [](const StageCosts &stage) {
    int64_t layers = 0;
    for (const ChunkCosts &chunk : stage.chunks) {
      for (int64_t count : chunk.layers) {
        layers += count;
      }
    }
    return layers;
  };
  double updateArenaPerLayer =
      middleStage.arena.fixed /
      static_cast<double>(std::max<int64_t>(1, layersOf(middleStage)));
  auto updateArenaFixed = [&](const StageCosts &probedStage) {
    return std::max(0.0, probedStage.arena.fixed -
                             updateArenaPerLayer *
                                 static_cast<double>(layersOf(probedStage)));
  };
  int64_t parts = layout.pipelineStages * layout.chunks;
  std::vector<StageCosts> stages(static_cast<size_t>(layout.pipelineStages));
  for (int64_t s = 0; s < layout.pipelineStages; ++s) {
    StageCosts &stage = stages[static_cast<size_t>(s)];
    // Per layer as the probe's between stage; what lies outside the layers
    // from the stages its parts come from (ZB-V's probe stage 0 holds both
    // the first and the last part, its stage 1 two between).
    stage.staticBytes = middleStage.staticBytes;
    stage.update = middleStage.update;
    stage.staticBytes.fixed = stage.update.fixed = 0;
    stage.arena.perLayer.fill(updateArenaPerLayer);
    bool holdsFirst = false, holdsLast = false;
    int64_t between = 0;
    for (int64_t c = 0; c < layout.chunks; ++c) {
      int64_t part =
          mfshapes::pipelinePartOf(s, c, layout.pipelineStages, vShape);
      holdsFirst |= part == 0;
      holdsLast |= part == parts - 1;
      between += part != 0 && part != parts - 1 ? 1 : 0;
      stage.chunks.push_back(part == 0           ? first
                             : part == parts - 1 ? last
                                                 : middle);
    }
    auto addFixed = [&](const StageCosts &from, double weight) {
      stage.staticBytes.fixed += weight * from.staticBytes.fixed;
      stage.update.fixed += weight * from.update.fixed;
      stage.arena.fixed = std::max(stage.arena.fixed, updateArenaFixed(from));
    };
    if (vShape && holdsFirst) {
      addFixed(firstStage, 1); // first and last together
    } else {
      if (holdsFirst) {
        addFixed(firstStage, 1);
      }
      if (holdsLast) {
        addFixed(lastStage, 1);
      }
    }
    if (between > 0) {
      // The probe's between stage holds one between part (ZB-V's two).
      addFixed(middleStage, static_cast<double>(between) / (vShape ? 2 : 1));
    }
  }
  return stages;
}

ParallelCandidate Search::choose(const ParallelLayout &layout,
                                 const ModelSpec &spec,
                                 const std::vector<StageCosts> &costs) {
  ParallelCandidate candidate;
  static_cast<ParallelLayout &>(candidate) = layout;
  candidate.settings = settingsOf(layout);
  std::vector<StageSchedule> schedule =
      layout.pipelineStages > 1
          ? schedulePipeline(layout.scheduler, layout.pipelineStages,
                             layout.microBatches, layout.chunks)
          : std::vector<StageSchedule>();
  // The full model's layers per stage and chunk.
  std::vector<std::vector<int64_t>> sizes(
      static_cast<size_t>(layout.pipelineStages),
      std::vector<int64_t>(static_cast<size_t>(layout.chunks), 0));
  if (layout.pipelineStages > 1) {
    for (const LayerChunk &chunk : layerChunks(spec)) {
      sizes[static_cast<size_t>(chunk.stage)]
           [static_cast<size_t>(chunk.chunk)] = chunk.count;
    }
  } else {
    sizes[0][0] = spec.model.numLayers;
  }
  std::vector<std::vector<ChoiceCounts>> counts(costs.size());
  candidate.fits = true;
  for (size_t s = 0; s < costs.size(); ++s) {
    int64_t layers = 0;
    for (int64_t size : sizes[s]) {
      layers += size;
    }
    auto countsFor = [&](int64_t full, int64_t selective) {
      std::vector<int64_t> whole = spread(full, sizes[s]);
      std::vector<int64_t> both = spread(full + selective, sizes[s]);
      std::vector<ChoiceCounts> chunks;
      for (size_t c = 0; c < sizes[s].size(); ++c) {
        ChoiceCounts layerCounts{};
        layerCounts[static_cast<size_t>(LayerRecompute::Full)] = whole[c];
        layerCounts[static_cast<size_t>(LayerRecompute::Selective)] =
            both[c] - whole[c];
        layerCounts[static_cast<size_t>(LayerRecompute::None)] =
            sizes[s][c] - both[c];
        chunks.push_back(layerCounts);
      }
      return chunks;
    };
    // The stage alone: its memory and its recomputed time per micro-batch.
    auto stageCost = [&](const std::vector<ChoiceCounts> &chunks) {
      double time = 0;
      for (size_t c = 0; c < chunks.size(); ++c) {
        time += costs[s].chunks[c].backward.at(chunks[c]) +
                costs[s].chunks[c].weights.at(chunks[c]);
      }
      int64_t memory = stagePeakBytes(
          costs[s], chunks, schedule.empty() ? nullptr : &schedule[s]);
      return std::pair<int64_t, double>(memory, time);
    };
    std::optional<std::tuple<double, int64_t, int64_t, int64_t>> best;
    std::tuple<int64_t, int64_t, int64_t> smallest{INT64_MAX, 0, 0};
    for (int64_t full = 0; full <= layers; ++full) {
      for (int64_t selective = 0; full + selective <= layers; ++selective) {
        auto [memory, time] = stageCost(countsFor(full, selective));
        if (memory < std::get<0>(smallest)) {
          smallest = {memory, full, selective};
        }
        if (memory <= options_.memoryPerRank &&
            (!best || std::tie(time, memory) <
                          std::tie(std::get<0>(*best), std::get<1>(*best)))) {
          best = std::tuple<double, int64_t, int64_t, int64_t>{time, memory,
                                                               full, selective};
        }
      }
    }
    int64_t full = best ? std::get<2>(*best) : std::get<1>(smallest);
    int64_t selective = best ? std::get<3>(*best) : std::get<2>(smallest);
    candidate.fits = candidate.fits && best.has_value();
    counts[s] = countsFor(full, selective);
    std::vector<int64_t> fullPerChunk, selectivePerChunk;
    for (const ChoiceCounts &chunk : counts[s]) {
      fullPerChunk.push_back(chunk[static_cast<size_t>(LayerRecompute::Full)]);
      selectivePerChunk.push_back(
          chunk[static_cast<size_t>(LayerRecompute::Selective)]);
    }
    candidate.fullLayers.push_back(fullPerChunk);
    candidate.selectiveLayers.push_back(selectivePerChunk);
  }
  candidate.predicted = predict(costs, counts, schedule, layout.scheduler,
                                layout.microBatches, machineFor(layout));
  return candidate;
}

std::optional<ParallelCandidate::Prediction> Search::measureFull(
    const ModelSpec &spec, const RecomputePlan &plan, const CostModel &machine,
    const std::vector<LayerRecompute> &choices, std::string &why) {
  std::optional<std::vector<StageCosts>> costs =
      compileAndMeasure(spec, choices, plan, machine, /*planSeconds=*/-1, why);
  if (!costs) {
    return std::nullopt;
  }
  // Each chunk at the layers it has: the measured totals.
  std::vector<std::vector<ChoiceCounts>> counts;
  for (const StageCosts &stage : *costs) {
    std::vector<ChoiceCounts> chunks;
    for (const ChunkCosts &chunk : stage.chunks) {
      chunks.push_back(chunk.layers);
    }
    counts.push_back(chunks);
  }
  int64_t stages = spec.shardedPipelineStages;
  int64_t micro = stages > 1 ? spec.parallel.microBatchNum
                             : spec.runner.gradientAccumulationSteps;
  std::vector<StageSchedule> schedule =
      stages > 1 ? schedulePipeline(spec.parallel.pipelineScheduler, stages,
                                    micro, spec.model.ppInterleaveNum)
                 : std::vector<StageSchedule>();
  return predict(*costs, counts, schedule, spec.parallel.pipelineScheduler,
                 micro, machine);
}

std::optional<ParallelCandidate::Prediction>
Search::compileFull(const ParallelCandidate &candidate, std::string &why) {
  std::optional<ModelSpec> spec = loadWith(candidate.settings, why);
  if (!spec) {
    return std::nullopt;
  }
  std::vector<LayerRecompute> choices(
      static_cast<size_t>(spec->model.numLayers), LayerRecompute::None);
  std::vector<LayerChunk> chunks = layerChunks(*spec);
  if (candidate.pipelineStages == 1) {
    chunks = {LayerChunk{0, 0, 0, spec->model.numLayers}};
  }
  for (const LayerChunk &chunk : chunks) {
    int64_t full = candidate.fullLayers[static_cast<size_t>(chunk.stage)]
                                       [static_cast<size_t>(chunk.chunk)];
    int64_t selective =
        candidate.selectiveLayers[static_cast<size_t>(chunk.stage)]
                                 [static_cast<size_t>(chunk.chunk)];
    for (int64_t i = 0; i < chunk.count && i < full + selective; ++i) {
      choices[static_cast<size_t>(chunk.first + i)] =
          i < full ? LayerRecompute::Full : LayerRecompute::Selective;
    }
  }
  CostModel machine = options_.machine;
  machine.grid = {candidate.dataParallel, candidate.modelParallel,
                  candidate.pipelineStages, candidate.contextParallel};
  return measureFull(*spec, planRecompute(*spec, choices), machine, choices,
                     why);
}

std::optional<ParallelSearchResult> Search::run(std::string &error) {
  auto started = std::chrono::steady_clock::now();
  std::optional<ModelSpec> spec =
      loadQuietly(options_.configFile, options_.overrides, error);
  if (!spec) {
    error = "'" + options_.configFile + "' does not load: " + error +
            " (mfc compile prints where)";
    return std::nullopt;
  }
  if (spec->runMode != RunMode::Train && spec->runMode != RunMode::Finetune) {
    error = "plan-parallel plans training steps, but run_mode is " +
            std::string(toString(spec->runMode)) +
            "; set run_mode: train (or --set run_mode=train)";
    return std::nullopt;
  }
  ParallelSearchResult result;
  int64_t stages = spec->shardedPipelineStages;
  result.globalBatch = spec->model.batchSize * spec->shardedDataParallel *
                       (stages > 1 ? spec->parallel.microBatchNum
                                   : spec->runner.gradientAccumulationSteps);
  result.seqLength = spec->model.seqLength;
  int64_t configuredRanks =
      spec->useParallel ? spec->parallel.deviceCount() : 1;
  if (configuredRanks == options_.ranks) {
    std::string why;
    ParallelCandidate configured;
    configured.dataParallel = spec->parallel.dataParallel;
    configured.modelParallel = spec->parallel.modelParallel;
    configured.pipelineStages = spec->parallel.pipelineStage;
    configured.contextParallel = spec->parallel.contextParallel;
    configured.scheduler = spec->parallel.pipelineScheduler;
    configured.chunks = spec->model.ppInterleaveNum;
    configured.batchSize = spec->model.batchSize;
    configured.microBatches = stages > 1
                                  ? spec->parallel.microBatchNum
                                  : spec->runner.gradientAccumulationSteps;
    CostModel machine = options_.machine;
    machine.grid = {configured.dataParallel, configured.modelParallel,
                    configured.pipelineStages, configured.contextParallel};
    log("compiling the config as written");
    configured.compiled =
        measureFull(*spec, planRecompute(*spec), machine, {}, why);
    if (configured.compiled) {
      configured.predicted = *configured.compiled;
      configured.fits =
          configured.predicted.peakBytes() <= options_.memoryPerRank;
      result.asConfigured = configured;
    } else {
      log("the config as written did not compile: " + why);
    }
  }

  std::vector<int64_t> batchSizes = options_.microBatchSizes;
  if (batchSizes.empty()) {
    batchSizes.push_back(spec->model.batchSize);
  }
  std::vector<ParallelLayout> layouts;
  int64_t n = options_.ranks;
  for (int64_t dp = 1; dp <= n; ++dp) {
    for (int64_t mp = 1; n % dp == 0 && mp <= n / dp; ++mp) {
      for (int64_t pp = 1; (n / dp) % mp == 0 && pp <= n / dp / mp; ++pp) {
        if ((n / dp / mp) % pp != 0) {
          continue;
        }
        int64_t cp = n / dp / mp / pp;
        std::vector<std::pair<std::string, int64_t>> schedules{{"1f1b", 1}};
        if (pp > 1) {
          schedules.push_back({"1f1b", 2});
          schedules.push_back({"zero_bubble_v", 2});
        }
        for (auto [scheduler, chunks] : schedules) {
          for (int64_t batch : batchSizes) {
            if (result.globalBatch % (dp * batch) != 0) {
              ++result.refused
                    ["the global batch of " +
                     std::to_string(result.globalBatch) +
                     " sequences does not split into dp x micro-batch size"];
              continue;
            }
            layouts.push_back({dp, mp, pp, cp, scheduler, chunks, batch,
                               result.globalBatch / (dp * batch)});
          }
        }
      }
    }
  }
  log(llvm::formatv("{0} layouts of {1} ranks to try", layouts.size(), n));
  for (const ParallelLayout &layout : layouts) {
    std::string why;
    std::optional<ModelSpec> full = loadWith(settingsOf(layout), why);
    if (!full) {
      ++result.refused[why];
      continue;
    }
    std::optional<std::vector<StageCosts>> costs = probe(layout, why);
    if (!costs) {
      ++result.refused["probe: " + why];
      continue;
    }
    ParallelCandidate candidate = choose(layout, *full, *costs);
    log(llvm::formatv(
        "  {0} {1} micro-batch {2} x {3}: {4:F3} s, peak {5:F2} GB{6}",
        candidate.layoutText(), candidate.scheduleText(), candidate.batchSize,
        candidate.microBatches, candidate.predicted.stepSeconds,
        candidate.predicted.peakBytes() / 1e9,
        candidate.fits ? "" : " (does not fit)"));
    result.candidates.push_back(std::move(candidate));
  }
  auto rank = [](std::vector<ParallelCandidate> &candidates) {
    std::stable_sort(
        candidates.begin(), candidates.end(),
        [](const ParallelCandidate &a, const ParallelCandidate &b) {
          if (a.fits != b.fits) {
            return a.fits;
          }
          return a.fits ? a.predicted.stepSeconds < b.predicted.stepSeconds
                        : a.predicted.peakBytes() < b.predicted.peakBytes();
        });
  };
  rank(result.candidates);
  // The best few at full size: a prediction the exact plan overturns
  // drops out of the fitting ones.
  int confirmed = 0;
  for (ParallelCandidate &candidate : result.candidates) {
    if (confirmed >= options_.confirm || !candidate.fits) {
      break;
    }
    log("compiling " + candidate.layoutText() + " " + candidate.scheduleText() +
        " at full size");
    std::string why;
    candidate.compiled = compileFull(candidate, why);
    if (!candidate.compiled) {
      log("  did not compile: " + why);
      candidate.fits = false;
      continue;
    }
    candidate.fits = candidate.compiled->peakBytes() <= options_.memoryPerRank;
    confirmed += candidate.fits ? 1 : 0;
  }
  rank(result.candidates);
  result.probesCompiled = probes_;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  return result;
}

} // namespace

std::optional<ParallelSearchResult>
mfc::searchParallelPlans(const ParallelSearchOptions &options,
                         std::string &error) {
  DialectRegistry registry;
  registry.insert<mf::MFDialect, mfexec::MFExecDialect, func::FuncDialect,
                  shard::ShardDialect>();
  MLIRContext context(registry);
  context.disableMultithreading();
  Search search(options, context);
  return search.run(error);
}
