//===- StageCosts.cpp - a compiled training step's costs, by layer --------===//

#include "compiler/Pipelines/StageCosts.h"

#include "compiler/Report/CompileReport.h"
#include "dialects/MF/IR/MFOps.h"
#include "dialects/MFExec/IR/MFExecOps.h"
#include "shapes/GridAxes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <map>
#include <set>

using namespace mlir;
using namespace mfc;

double CostModel::collectiveSeconds(StringRef kind, ArrayRef<int16_t> axes,
                                    int64_t bytes) const {
  // Ranks are row-major over the grid: a group stays in one node when the
  // block its outermost axis spans does.
  int64_t ranks = 1, span = 1;
  for (int16_t axis : axes) {
    int64_t stride = 1;
    for (size_t later = static_cast<size_t>(axis) + 1; later < grid.size();
         ++later) {
      stride *= grid[later];
    }
    ranks *= grid[static_cast<size_t>(axis)];
    span = std::max(span, stride * grid[static_cast<size_t>(axis)]);
  }
  if (ranks <= 1) {
    return 0;
  }
  double bandwidth =
      span <= ranksPerNode ? intraNodeBandwidth : interNodeBandwidth;
  return latency +
         static_cast<double>(ringWireBytes(kind, bytes, ranks)) / bandwidth;
}

double CostModel::messageSeconds(int64_t bytes) const {
  int64_t span = grid[mfshapes::kPipelineAxis];
  for (size_t later = mfshapes::kPipelineAxis + 1; later < grid.size();
       ++later) {
    span *= grid[later];
  }
  double bandwidth =
      span <= ranksPerNode ? intraNodeBandwidth : interNodeBandwidth;
  return latency + static_cast<double>(bytes) / bandwidth;
}

namespace {

int64_t bytesOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() *
         std::max<int64_t>(1, tensor.getElementTypeBitWidth() / 8);
}

/// The layer a model path or parameter name is in ("model.layers.3.x",
/// "optimizer.adam_m.transformer.h.3.x"), or nullopt.
std::optional<int64_t> layerOf(StringRef name) {
  static const llvm::Regex layer("(^|\\.)(layers|h)\\.([0-9]+)(\\.|$)");
  SmallVector<StringRef> match;
  int64_t index = 0;
  if (!layer.match(name, &match) || match[3].getAsInteger(10, index)) {
    return std::nullopt;
  }
  return index;
}

/// A quantity summed outside the layers and per choice inside them.
struct Totals {
  double fixed = 0;
  PerChoice byChoice{};

  LayerLinear perLayer(const ChoiceCounts &layers) const {
    LayerLinear linear{fixed, {}};
    for (size_t choice = 0; choice < layers.size(); ++choice) {
      // A choice with no layer has no share; its total is 0 too.
      linear.perLayer[choice] =
          layers[choice]
              ? byChoice[choice] / static_cast<double>(layers[choice])
              : 0;
    }
    return linear;
  }
};

class Measurer {
public:
  Measurer(ModuleOp module, const CostModel &model,
           function_ref<LayerRecompute(int64_t)> choiceOf)
      : module_(module), model_(model), choiceOf_(choiceOf) {
    auto grids = module.getOps<shard::GridOp>();
    grid_ = grids.empty() ? shard::GridOp() : *grids.begin();
  }

  void add(Totals &totals, StringRef name, double value) {
    if (std::optional<int64_t> layer = layerOf(name)) {
      totals.byChoice[static_cast<size_t>(choiceOf_(*layer))] += value;
    } else {
      totals.fixed += value;
    }
  }

  /// One run's seconds: its ops' FLOPs and its collectives.
  Totals secondsOf(func::FuncOp function) {
    Totals totals;
    function.walk([&](Operation *op) {
      if (isa<mf::FusionOp>(op)) {
        return; // its ops count
      }
      std::string path = mf::getModelPath(op->getLoc());
      if (auto cost = dyn_cast<mf::CostOpInterface>(op)) {
        add(totals, path,
            static_cast<double>(cost.getFlops()) / model_.rankFlops);
      }
      for (const CollectivePayload &payload : collectivePayloads(op)) {
        add(totals, path,
            model_.collectiveSeconds(payload.kind, payload.gridAxes,
                                     payload.bytes));
      }
    });
    return totals;
  }

  /// The layers whose parameters `function` reads.
  std::set<int64_t> layersRead(func::FuncOp function) {
    std::set<int64_t> layers;
    function.walk([&](mf::ParamOp op) {
      if (!op.getName().starts_with("optimizer.")) {
        if (std::optional<int64_t> layer = layerOf(op.getName())) {
          layers.insert(*layer);
        }
      }
    });
    return layers;
  }

  ChoiceCounts countChoices(const std::set<int64_t> &layers) {
    ChoiceCounts counts{};
    for (int64_t layer : layers) {
      ++counts[static_cast<size_t>(choiceOf_(layer))];
    }
    return counts;
  }

  int64_t arenaOf(StringRef function) {
    for (auto host : module_.getOps<mfexec::EntryOp>()) {
      if (host.getFunction() == function && host.getArenaBytes()) {
        return *host.getArenaBytes();
      }
    }
    return 0;
  }

  /// The bytes of every parameter `function` reads, by layer.
  Totals parameterBytes(std::optional<func::FuncOp> function) {
    llvm::StringSet<> read;
    if (function) {
      function->walk([&](mf::ParamOp op) { read.insert(op.getName()); });
    }
    Totals totals;
    for (auto parameter : module_.getOps<mf::ParameterOp>()) {
      if (!function || read.contains(parameter.getSymName())) {
        add(totals, parameter.getSymName(),
            static_cast<double>(bytesOf(parameter.getShardType(grid_))));
      }
    }
    return totals;
  }

  /// The model path of the op computing result `index` of `function`.
  static std::string resultPath(func::FuncOp function, unsigned index) {
    Value value = function.getBody().front().getTerminator()->getOperand(index);
    Operation *op = value.getDefiningOp();
    if (auto fusion = dyn_cast_or_null<mf::FusionOp>(op)) {
      Operation *yield = fusion.getBody().front().getTerminator();
      if (Operation *inner =
              yield->getOperand(cast<OpResult>(value).getResultNumber())
                  .getDefiningOp()) {
        op = inner;
      }
    }
    return op ? mf::getModelPath(op->getLoc()) : "";
  }

  /// The model paths of `function`'s named results ("saved.3" -> path).
  static llvm::StringMap<std::string> resultPaths(func::FuncOp function) {
    llvm::StringMap<std::string> paths;
    if (!function || function.getBody().empty()) {
      return paths;
    }
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      if (auto name = function.getResultAttrOfType<StringAttr>(i, "mf.name")) {
        paths[name.getValue()] = resultPath(function, i);
      }
    }
    return paths;
  }

  std::optional<std::vector<StageCosts>> pipelined(int64_t stageCount) {
    int64_t chunks = mf::pipelineChunksOf(module_);
    bool vShape =
        mfshapes::isVShapedScheduler(mf::pipelineSchedulerOf(module_));
    std::vector<StageCosts> stages(static_cast<size_t>(stageCount));
    struct ChunkTotals {
      Totals forward, backward, weights, kept, weightKept;
      std::set<int64_t> layers;
    };
    std::vector<std::vector<ChunkTotals>> totals(
        static_cast<size_t>(stageCount),
        std::vector<ChunkTotals>(static_cast<size_t>(chunks)));
    std::vector<Totals> staticBytes(static_cast<size_t>(stageCount)),
        update(static_cast<size_t>(stageCount));
    std::vector<int64_t> arena(static_cast<size_t>(stageCount), 0);
    std::vector<std::vector<int64_t>> chunkArena(
        static_cast<size_t>(stageCount),
        std::vector<int64_t>(static_cast<size_t>(chunks), 0));
    for (auto [s, stage] : llvm::enumerate(stages)) {
      stage.chunks.resize(static_cast<size_t>(chunks));
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        stage.chunks[static_cast<size_t>(chunk)].lastPart =
            mfshapes::pipelinePartOf(static_cast<int64_t>(s), chunk, stageCount,
                                     vShape) +
                1 ==
            stageCount * chunks;
      }
    }
    for (auto function : module_.getOps<func::FuncOp>()) {
      auto stageAttr = function->getAttrOfType<IntegerAttr>(mf::kStageAttrName);
      if (!stageAttr || stageAttr.getInt() < 0 ||
          stageAttr.getInt() >= stageCount) {
        continue;
      }
      size_t s = static_cast<size_t>(stageAttr.getInt());
      StringRef name = function.getSymName();
      if (name.ends_with("_train_step")) {
        arena[s] = arenaOf(name);
        staticBytes[s] = parameterBytes(function);
        update[s] = secondsOf(function);
        continue;
      }
      auto chunkAttr = function->getAttrOfType<IntegerAttr>(mf::kChunkAttrName);
      int64_t chunk = chunkAttr ? chunkAttr.getInt() : 0;
      if (chunk < 0 || chunk >= chunks) {
        continue;
      }
      ChunkTotals &own = totals[s][static_cast<size_t>(chunk)];
      std::string prefix =
          mfshapes::stageEntryPrefix(static_cast<int64_t>(s), chunk, chunks);
      if (name.ends_with("_forward")) {
        own.forward = secondsOf(function);
        chunkArena[s][static_cast<size_t>(chunk)] += arenaOf(name);
        continue;
      }
      bool weights = name.ends_with("_weight_gradients");
      if (!weights && !name.ends_with("_accumulate_gradients") &&
          !name.ends_with("_input_gradients")) {
        continue; // not run in a step (forward_backward: their source)
      }
      chunkArena[s][static_cast<size_t>(chunk)] += arenaOf(name);
      (weights ? own.weights : own.backward) = secondsOf(function);
      if (!weights) {
        own.layers = layersRead(function);
      }
      // What a micro-batch keeps: its input and its forward's saved values
      // (a W's: all it takes), each in the layer that computed it.
      auto forward = module_.lookupSymbol<func::FuncOp>(prefix + "forward");
      auto inputGradients =
          module_.lookupSymbol<func::FuncOp>(prefix + "input_gradients");
      llvm::StringMap<std::string> saved = resultPaths(forward);
      llvm::StringMap<std::string> weightSaved = resultPaths(inputGradients);
      for (unsigned i = 0; i < function.getNumArguments(); ++i) {
        auto argument = function.getArgAttrOfType<StringAttr>(i, "mf.name");
        StringRef what = argument ? argument.getValue() : "";
        if (!weights && i != 0 && !what.starts_with("saved.")) {
          continue;
        }
        double bytes =
            static_cast<double>(bytesOf(function.getArgumentTypes()[i]));
        if (!weights && i == 0) {
          stages[s].chunks[static_cast<size_t>(chunk)].inputBytes =
              static_cast<int64_t>(bytes);
        }
        std::string path = saved.lookup(what);
        if (path.empty()) {
          path = weightSaved.lookup(what);
        }
        add(weights ? own.weightKept : own.kept, i == 0 ? "" : path, bytes);
      }
    }
    for (auto [s, stage] : llvm::enumerate(stages)) {
      ChoiceCounts stageLayers{};
      for (auto [chunk, costs] : llvm::enumerate(stage.chunks)) {
        const ChunkTotals &own = totals[s][chunk];
        costs.layers = countChoices(own.layers);
        for (size_t choice = 0; choice < stageLayers.size(); ++choice) {
          stageLayers[choice] += costs.layers[choice];
        }
        costs.forward = own.forward.perLayer(costs.layers);
        costs.backward = own.backward.perLayer(costs.layers);
        costs.weights = own.weights.perLayer(costs.layers);
        costs.kept = own.kept.perLayer(costs.layers);
        costs.weightKept = own.weightKept.perLayer(costs.layers);
        costs.arena.fixed = static_cast<double>(chunkArena[s][chunk]);
      }
      stage.staticBytes = staticBytes[s].perLayer(stageLayers);
      stage.update = update[s].perLayer(stageLayers);
      stage.arena.fixed = static_cast<double>(arena[s]);
    }
    return stages;
  }

  std::optional<std::vector<StageCosts>> whole() {
    auto step = module_.lookupSymbol<func::FuncOp>("train_step");
    if (!step || !arenaOf("train_step")) {
      return std::nullopt;
    }
    auto accumulate =
        module_.lookupSymbol<func::FuncOp>("accumulate_gradients");
    StageCosts stage;
    stage.chunks.resize(1);
    ChunkCosts &chunk = stage.chunks[0];
    chunk.lastPart = true;
    chunk.layers = countChoices(layersRead(step));
    Totals stepSeconds = secondsOf(step);
    Totals backward = accumulate ? secondsOf(accumulate) : stepSeconds;
    chunk.backward = backward.perLayer(chunk.layers);
    // The update: what train_step runs beyond one micro-batch.
    Totals update;
    update.fixed = std::max(0.0, stepSeconds.fixed - backward.fixed);
    for (size_t choice = 0; choice < update.byChoice.size(); ++choice) {
      update.byChoice[choice] = std::max(0.0, stepSeconds.byChoice[choice] -
                                                  backward.byChoice[choice]);
    }
    stage.update = update.perLayer(chunk.layers);
    stage.staticBytes = parameterBytes(std::nullopt).perLayer(chunk.layers);
    // Each entry the step runs has its arena.
    stage.arena.fixed =
        static_cast<double>(arenaOf("train_step") +
                            (accumulate ? arenaOf("accumulate_gradients") : 0));
    return std::vector<StageCosts>{stage};
  }

private:
  ModuleOp module_;
  const CostModel &model_;
  function_ref<LayerRecompute(int64_t)> choiceOf_;
  shard::GridOp grid_;
};

} // namespace

std::optional<std::vector<StageCosts>>
mfc::measureStageCosts(ModuleOp module, const CostModel &model,
                       function_ref<LayerRecompute(int64_t layer)> choiceOf) {
  Measurer measurer(module, model, choiceOf);
  auto grids = module.getOps<shard::GridOp>();
  if (module->hasAttr(mf::kMicroBatchesAttrName) && !grids.empty()) {
    ArrayRef<int64_t> shape = (*grids.begin()).getShape();
    if (shape.size() > mfshapes::kPipelineAxis &&
        shape[mfshapes::kPipelineAxis] > 1) {
      return measurer.pipelined(shape[mfshapes::kPipelineAxis]);
    }
  }
  return measurer.whole();
}
