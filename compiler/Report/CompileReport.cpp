//===- CompileReport.cpp - what the compiler decided, readable ------------===//

#include "compiler/Report/CompileReport.h"
#include "compiler/Analysis/PipelineSchedule.h"

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/IR/OpLevelProgram.h"
#include "dialects/MFExec/IR/MFExecOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Regex.h"

#include <map>
#include <optional>

using namespace mlir;
using namespace mfc;

namespace {

struct FusionGroup {
  std::string kind;
  std::string kernel; ///< empty before codegen
  int64_t tiles = 0;
  std::vector<std::string> ops; ///< "mf.add @ model.layers.0.attention_add"
  /// Parameters its kernel reads packed into panels, and into dot panels
  /// (int8 weights that int8 rows multiply).
  std::vector<std::string> panels, dotPanels;
  int64_t flops = 0;
  int64_t bytes = 0;
};

/// Model paths in layer order: model.layers.2 before model.layers.10.
struct LayerOrder {
  bool operator()(const std::string &a, const std::string &b) const {
    auto key = [](StringRef path) {
      auto [prefix, last] = path.rsplit('.');
      int64_t index;
      return last.getAsInteger(10, index) ? std::make_pair(path, int64_t(-1))
                                          : std::make_pair(prefix, index);
    };
    return key(a) < key(b);
  }
};

struct EntryReport {
  std::string name;
  bool initializer = false; ///< computes what the weights alone determine
  int64_t ops = 0;
  int64_t flops = 0;
  int64_t bytes = 0;
  int64_t arenaBytes = -1;
  int64_t arenaLowerBound = -1;
  int64_t derivedBytes = 0; // values derived from the weights alone
  std::vector<FusionGroup> groups;
  /// Ops mf-recompute cloned for the backward, by layer ("model.layers.3"),
  /// each as its path within the layer; and their FLOPs.
  std::map<std::string, std::vector<std::string>, LayerOrder> recomputed;
  int64_t recomputedFlops = 0;
};

/// The host program of entry function `name`, if the module has one.
mfexec::EntryOp hostProgramOf(ModuleOp module, StringRef name) {
  for (auto host : module.getOps<mfexec::EntryOp>()) {
    if (host.getFunction() == name) {
      return host;
    }
  }
  return {};
}

/// What a training step keeps in memory, by kind.
struct TrainingMemory {
  int64_t trainedParameters = 0, frozenParameters = 0;
  int64_t gradients = 0;      ///< one per trained parameter, in the arena
  int64_t optimizerState = 0; ///< the state parameters (AdamW m, v, sums)
  int64_t activations = -1;   ///< train_step's arena (gradients included)
};

int64_t bytesOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() *
         std::max<int64_t>(1, tensor.getElementTypeBitWidth() / 8);
}

/// The device grid of a sharded program, or null.
shard::GridOp gridOf(ModuleOp module) {
  auto grids = module.getOps<shard::GridOp>();
  return grids.empty() ? shard::GridOp() : *grids.begin();
}

/// Per rank: a split parameter's block.
std::optional<TrainingMemory> trainingMemory(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step) {
    return std::nullopt;
  }
  TrainingMemory memory;
  shard::GridOp grid = gridOf(module);
  for (auto parameter : module.getOps<mf::ParameterOp>()) {
    int64_t bytes = bytesOf(parameter.getShardType(grid));
    if (parameter.getFrozen()) {
      memory.frozenParameters += bytes;
    } else if (parameter.getState()) {
      memory.optimizerState += bytes;
    } else {
      memory.trainedParameters += bytes;
      memory.gradients += bytes;
    }
  }
  mfexec::EntryOp host = hostProgramOf(module, "train_step");
  if (host && host.getArenaBytes()) {
    memory.activations = *host.getArenaBytes();
  }
  return memory;
}

/// The collectives of one kind one run of an entry performs over some grid
/// axes: how many and their payload (the whole tensor: what an all-reduce
/// sums, a reduce-scatter reduces, an all-gather assembles).
struct Collectives {
  std::string kind; ///< all_reduce, reduce_scatter, all_gather
  std::string axes; ///< "model_parallel", "data_parallel", ...
  int64_t count = 0, bytes = 0, ranks = 1;
  /// What a ring algorithm sends from each rank.
  int64_t wireBytes() const { return ringWireBytes(kind, bytes, ranks); }
};

/// Per entry, its all-reduces grouped by axes (entries without are left out).
std::vector<std::pair<std::string, std::vector<Collectives>>>
collectivesOf(ModuleOp module, shard::GridOp grid) {
  std::vector<std::pair<std::string, std::vector<Collectives>>> entries;
  for (auto function : module.getOps<func::FuncOp>()) {
    std::map<std::pair<std::string, std::string>, Collectives> byAxes;
    auto count = [&](StringRef kind, ArrayRef<int16_t> gridAxes, int64_t bytes) {
      std::string axes;
      int64_t ranks = 1;
      for (int16_t axis : gridAxes) {
        axes += (axes.empty() ? "" : " x ") + mfshapes::gridAxisName(axis);
        ranks *= grid.getShape()[axis];
      }
      Collectives &collectives = byAxes[{kind.str(), axes}];
      collectives.kind = kind.str();
      collectives.axes = axes;
      collectives.ranks = ranks;
      ++collectives.count;
      collectives.bytes += bytes;
    };
    function.walk([&](Operation *op) {
      for (const CollectivePayload &payload : collectivePayloads(op)) {
        count(payload.kind, payload.gridAxes, payload.bytes);
      }
    });
    if (!byAxes.empty()) {
      std::vector<Collectives> list;
      for (auto &[axes, collectives] : byAxes) {
        list.push_back(collectives);
      }
      entries.emplace_back(function.getSymName().str(), std::move(list));
    }
  }
  return entries;
}

/// One pipeline stage of a pipelined training module, per rank.
struct StageReport {
  /// Per chunk (one without interleaving), the layers it runs.
  std::vector<std::pair<int64_t, int64_t>> layers;
  int64_t parameterBytes = 0, gradientBytes = 0, optimizerBytes = 0;
  int64_t backwardArena = -1; ///< its backward entries' plans, the most
  /// Per chunk, what one micro-batch in flight keeps: the chunk's input and
  /// the values its forward saved for the backward; and, when its weight
  /// gradients run apart (W), what the W takes (kept from its B on): the
  /// backward's inputs and what the B saved for it.
  std::vector<int64_t> keptBytes, weightKeptBytes;
  /// Per chunk: the model's last part (its forward runs in its backward).
  std::vector<bool> lastPart;
  /// What a forward keeps for its backward (each chunk's saved values):
  /// the op computing it, its model path, its bytes.
  struct Saved {
    int64_t chunk;
    std::string op, path, dtype;
    int64_t bytes;
  };
  std::vector<Saved> saved;
  StageSchedule schedule;

  /// The most its ranks keep at once under the schedule.
  int64_t peakKeptBytes() const {
    return mfc::peakKeptBytes(schedule, keptBytes, weightKeptBytes, lastPart);
  }

  /// "0-3", with chunks "0-1 + 4-5".
  std::string layerText() const {
    std::string text;
    for (auto [first, last] : layers) {
      text += (text.empty() ? "" : " + ") + std::to_string(first) + "-" +
              std::to_string(last);
    }
    return text;
  }
};

/// The stages of a pipelined module (mf.micro_batches), else empty.
std::vector<StageReport> pipelineStagesOf(ModuleOp module, shard::GridOp grid) {
  auto microBatches =
      module->getAttrOfType<IntegerAttr>(mf::kMicroBatchesAttrName);
  if (!microBatches || !grid ||
      grid.getShape().size() <= mf::kPipelineGridAxis) {
    return {};
  }
  int64_t stageCount = grid.getShape()[mf::kPipelineGridAxis];
  int64_t chunks = mf::pipelineChunksOf(module);
  std::vector<StageReport> stages(static_cast<size_t>(stageCount));
  std::vector<StageSchedule> schedule =
      schedulePipeline(mf::pipelineSchedulerOf(module), stageCount,
                       microBatches.getInt(), chunks);
  bool vShape = mfshapes::isVShapedScheduler(mf::pipelineSchedulerOf(module));
  for (auto [index, stage] : llvm::enumerate(stages)) {
    stage.schedule = schedule[index];
    stage.layers.assign(static_cast<size_t>(chunks), {-1, -1});
    stage.keptBytes.assign(static_cast<size_t>(chunks), 0);
    stage.weightKeptBytes.assign(static_cast<size_t>(chunks), 0);
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      stage.lastPart.push_back(
          mfshapes::pipelinePartOf(static_cast<int64_t>(index), chunk,
                                   stageCount, vShape) +
              1 ==
          stageCount * chunks);
    }
  }
  llvm::Regex layer("\\.(layers|h)\\.([0-9]+)\\.");
  for (auto function : module.getOps<func::FuncOp>()) {
    auto stageAttr = function->getAttrOfType<IntegerAttr>(mf::kStageAttrName);
    if (!stageAttr) {
      continue;
    }
    StageReport &stage = stages[static_cast<size_t>(stageAttr.getInt())];
    if (function.getSymName().ends_with("_train_step")) {
      // What its update reads: its parameters and their state.
      llvm::StringSet<> read;
      function.walk([&](mf::ParamOp op) { read.insert(op.getName()); });
      for (auto parameter : module.getOps<mf::ParameterOp>()) {
        StringRef name = parameter.getSymName();
        if (!read.contains(name)) {
          continue;
        }
        int64_t bytes = bytesOf(parameter.getShardType(grid));
        if (name.starts_with("optimizer.grad_sum.")) {
          stage.gradientBytes += bytes;
        } else if (parameter.getState()) {
          stage.optimizerBytes += bytes;
        } else {
          stage.parameterBytes += bytes;
        }
      }
      continue;
    }
    StringRef name = function.getSymName();
    if (name.ends_with("_forward") && !function.getBody().empty()) {
      auto chunkAttr = function->getAttrOfType<IntegerAttr>(mf::kChunkAttrName);
      auto ret = function.getBody().front().getTerminator();
      for (unsigned i = 0; i < function.getNumResults(); ++i) {
        auto result = function.getResultAttrOfType<StringAttr>(i, "mf.name");
        if (!result || !result.getValue().starts_with("saved.")) {
          continue;
        }
        // The op that computes it (inside a fusion group: its yield's).
        Value value = ret->getOperand(i);
        Operation *op = value.getDefiningOp();
        if (auto fusion = dyn_cast_or_null<mf::FusionOp>(op)) {
          Operation *yield = fusion.getBody().front().getTerminator();
          unsigned index = cast<OpResult>(value).getResultNumber();
          if (Operation *inner = yield->getOperand(index).getDefiningOp()) {
            op = inner;
          }
        }
        std::string dtype;
        llvm::raw_string_ostream dtypeText(dtype);
        dtypeText << cast<ShapedType>(value.getType()).getElementType();
        stage.saved.push_back(
            {chunkAttr ? chunkAttr.getInt() : 0,
             op ? op->getName().getStringRef().str() : "argument",
             op ? mf::getModelPath(op->getLoc()) : "", dtype,
             bytesOf(value.getType())});
      }
      continue;
    }
    bool weights = name.ends_with("_weight_gradients");
    if (!name.ends_with("_accumulate_gradients") &&
        !name.ends_with("_input_gradients") && !weights) {
      continue;
    }
    auto chunkAttr = function->getAttrOfType<IntegerAttr>(mf::kChunkAttrName);
    size_t chunk = chunkAttr ? static_cast<size_t>(chunkAttr.getInt()) : 0;
    auto &[firstLayer, lastLayer] = stage.layers[chunk];
    function.walk([&](mf::ParamOp op) {
      SmallVector<StringRef> match;
      if (!op.getName().starts_with("optimizer.") &&
          layer.match(op.getName(), &match)) {
        int64_t index = std::stoll(match[2].str());
        firstLayer = firstLayer < 0 ? index : std::min(firstLayer, index);
        lastLayer = std::max(lastLayer, index);
      }
    });
    if (mfexec::EntryOp host = hostProgramOf(module, function.getSymName())) {
      if (host.getArenaBytes()) {
        stage.backwardArena =
            std::max<int64_t>(stage.backwardArena, *host.getArenaBytes());
      }
    }
    // Its input, and what its forward saved for it (mf-split-stages); a
    // W's: all it takes (mf-split-weight-gradients).
    for (unsigned i = 0; i < function.getNumArguments(); ++i) {
      auto argument = function.getArgAttrOfType<StringAttr>(i, "mf.name");
      StringRef what = argument ? argument.getValue() : "";
      if (weights || i == 0 || what.starts_with("saved.")) {
        (weights ? stage.weightKeptBytes : stage.keptBytes)[chunk] +=
            bytesOf(function.getArgumentTypes()[i]);
      }
    }
  }
  return stages;
}

/// The stages' schedules, and their timeline as the ranks would run them.
std::pair<std::vector<StageSchedule>, Timeline>
timelineOf(ModuleOp module, const std::vector<StageReport> &stages) {
  std::vector<StageSchedule> schedule;
  for (const StageReport &stage : stages) {
    schedule.push_back(stage.schedule);
  }
  Timeline timeline =
      simulateTimeline(mf::pipelineSchedulerOf(module), schedule);
  return {std::move(schedule), std::move(timeline)};
}

/// "none 0-3, selective 4-5, full 6-11": runs of equal choices.
/// The KV caches a predict module's decode takes (per rank when sharded).
struct KvCacheReport {
  int64_t caches = 0, bytes = 0, slots = 0, seqLength = 0;
  int64_t blocks = 0, blockSize = 0; // a paged cache's pool, else 0
  std::string dtype;                 // the caches' element type
  /// What caches of a row of seq_length for every slot would take.
  int64_t rowsBytes() const {
    return blocks ? bytes / (blocks * blockSize) * slots * seqLength : bytes;
  }
};

std::optional<KvCacheReport> kvCacheOf(ModuleOp module) {
  auto decode = module.lookupSymbol<func::FuncOp>("decode");
  auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
  if (!decode || !prefill) {
    return std::nullopt;
  }
  KvCacheReport report;
  auto ids = cast<RankedTensorType>(prefill.getArgumentTypes()[0]);
  report.slots = ids.getDimSize(0);
  report.seqLength = ids.getDimSize(1);
  for (unsigned i = 0; i < decode.getNumArguments(); ++i) {
    auto name = decode.getArgAttrOfType<StringAttr>(i, "mf.name");
    auto type = cast<RankedTensorType>(decode.getArgumentTypes()[i]);
    if (name && name.getValue().starts_with("cache.")) {
      ++report.caches;
      report.bytes += bytesOf(type);
      std::string element;
      llvm::raw_string_ostream(element) << type.getElementType();
      report.dtype = element;
    } else if (name && name.getValue() == "block_tables") {
      report.blocks = -1; // the pool's shape, from a cache
    }
  }
  if (report.caches == 0) {
    return std::nullopt;
  }
  if (report.blocks) {
    for (unsigned i = 0; i < decode.getNumArguments(); ++i) {
      auto name = decode.getArgAttrOfType<StringAttr>(i, "mf.name");
      if (name && name.getValue().starts_with("cache.")) {
        auto type = cast<RankedTensorType>(decode.getArgumentTypes()[i]);
        report.blocks = type.getDimSize(0);
        report.blockSize = type.getDimSize(1);
        break;
      }
    }
  }
  return report;
}

std::string describeChoices(const std::vector<std::string> &choices) {
  std::string text;
  for (size_t first = 0; first < choices.size();) {
    size_t last = first;
    while (last + 1 < choices.size() && choices[last + 1] == choices[first]) {
      ++last;
    }
    text += (text.empty() ? "" : ", ") + choices[first] + " " +
            std::to_string(first) +
            (last > first ? "-" + std::to_string(last) : "");
    first = last + 1;
  }
  return text;
}

/// The op-level values `host` reads from the initializer's slots.
llvm::DenseSet<int64_t> derivedValues(mfexec::EntryOp host) {
  llvm::DenseSet<int64_t> derived;
  host.walk([&](mfexec::DerivedOp value) {
    if (value.getHolds()) {
      derived.insert(*value.getHolds());
    }
  });
  return derived;
}

/// A routed layer of an entry, as its mf.moe_route says.
struct RoutedLayer {
  std::string path; ///< model.layers.0.feed_forward.dispatch
  int64_t experts, perToken, tokens, capacity, width;
};

/// Each entry's routed layers (recomputed copies left out), by entry.
std::vector<std::pair<std::string, std::vector<RoutedLayer>>>
routedLayersOf(ModuleOp module) {
  std::vector<std::pair<std::string, std::vector<RoutedLayer>>> entries;
  for (auto function : module.getOps<func::FuncOp>()) {
    std::vector<RoutedLayer> layers;
    function.walk([&](mf::MoeRouteOp route) {
      if (route->hasAttr("mf.recomputed")) {
        return;
      }
      ArrayRef<int64_t> shape = route.getIndices().getType().getShape();
      int64_t width = 0;
      // The experts' first projections read the dispatched rows (under
      // expert parallelism: the rows the ranks sent, by their offsets).
      Value groups = route.getOffsets();
      for (Operation *user : groups.getUsers()) {
        if (auto exchange = dyn_cast<mf::AllToAllOffsetsOp>(user)) {
          groups = exchange.getResult();
        }
      }
      for (Operation *user : groups.getUsers()) {
        auto matmul = dyn_cast<mf::GroupedMatmulOp>(user);
        Operation *rows = matmul ? matmul.getRows().getDefiningOp() : nullptr;
        if (isa_and_nonnull<mf::MoeDispatchOp, mf::AllToAllOp>(rows)) {
          width = matmul.getType().getShape()[1];
          break;
        }
      }
      layers.push_back({mf::getModelPath(route.getLoc()),
                        static_cast<int64_t>(route.getNumExperts()), shape[1],
                        shape[0], static_cast<int64_t>(route.getCapacity()),
                        width});
    });
    if (!layers.empty()) {
      entries.emplace_back(function.getSymName().str(), std::move(layers));
    }
  }
  return entries;
}

std::vector<EntryReport> collect(ModuleOp module) {
  std::vector<EntryReport> entries;
  mfexec::ExecutableOp executable;
  for (auto op : module.getOps<mfexec::ExecutableOp>()) {
    executable = op;
  }
  for (auto function : module.getOps<func::FuncOp>()) {
    EntryReport entry;
    entry.name = function.getSymName().str();
    mfexec::EntryOp host = hostProgramOf(module, function.getSymName());
    mf::OpLevelProgram program(function);
    llvm::DenseSet<int64_t> derivedIds;
    if (host) {
      derivedIds = derivedValues(host);
      entry.initializer = host.getInitializer();
    }
    for (Operation &op : function.getBody().front()) {
      auto cost = dyn_cast<mf::CostOpInterface>(&op);
      if (!cost) {
        continue;
      }
      ++entry.ops;
      // What the weights alone determine is computed when they change, not
      // in every run.
      bool derived = op.getNumResults() > 0 &&
                     llvm::all_of(op.getResults(), [&](Value result) {
                       return derivedIds.contains(program.idOf(result));
                     });
      if (!derived) {
        entry.flops += cost.getFlops();
        entry.bytes += cost.getBytesAccessed();
      }
      if (auto fusion = dyn_cast<mf::FusionOp>(op)) {
        FusionGroup group;
        group.kind = mf::stringifyFusionKind(fusion.getKind()).str();
        group.flops = cost.getFlops();
        group.bytes = cost.getBytesAccessed();
        auto kernel = fusion.getKernelAttr()
                          ? SymbolTable::lookupNearestSymbolFrom<mfexec::KernelOp>(
                                fusion, fusion.getKernelAttr())
                          : nullptr;
        if (kernel) {
          group.kernel = kernel.getSymName().str();
          group.tiles = kernel.getTiles();
          auto names = [&](std::optional<ArrayRef<int32_t>> inputs,
                           std::vector<std::string> &into) {
            for (int32_t input : inputs.value_or(ArrayRef<int32_t>())) {
              auto parameter =
                  fusion.getInputs()[input].getDefiningOp<mf::ParamOp>();
              into.push_back(parameter ? parameter.getName().str() : "?");
            }
          };
          names(kernel.getPanelInputs(), group.panels);
          names(kernel.getDotPanelInputs(), group.dotPanels);
        }
        for (Operation &inner : fusion.getBody().front().without_terminator()) {
          group.ops.push_back(inner.getName().getStringRef().str() + " @ " +
                              mf::getModelPath(inner.getLoc()));
        }
        entry.groups.push_back(std::move(group));
      }
    }
    function.walk([&](Operation *op) {
      if (op->hasAttr("mf.recomputed")) {
        // A path outside the layers is its own group.
        std::string path = mf::getModelPath(op->getLoc());
        auto [layer, rest] = mf::splitLayerPath(path);
        entry.recomputed[layer.empty() ? path : layer.str()].push_back(
            op->getName().getStringRef().str() +
            (rest.empty() ? "" : " @ " + rest.str()));
        if (auto cost = dyn_cast<mf::CostOpInterface>(op)) {
          entry.recomputedFlops += cost.getFlops();
        }
      }
    });
    if (host && host.getArenaBytes()) {
      entry.arenaBytes = *host.getArenaBytes();
      entry.arenaLowerBound = host.getArenaLowerBound().value_or(-1);
      host.walk([&](mfexec::DerivedOp derived) {
        entry.derivedBytes += mfexec::bufferBytes(derived.getType());
      });
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

} // namespace

SmallVector<CollectivePayload, 2> mfc::collectivePayloads(Operation *op) {
  // A vocabulary-parallel cross-entropy all-reduces f64 statistics per
  // token: the maximum, then the sum of exponentials and (forward) the
  // label's logit.
  auto tokenBytes = [](Value logits) {
    return cast<RankedTensorType>(logits.getType()).getDimSize(0) * 8;
  };
  auto one = [](StringRef kind, ArrayRef<int16_t> axes, int64_t bytes) {
    return SmallVector<CollectivePayload, 2>{
        {kind.str(), SmallVector<int16_t>(axes), bytes}};
  };
  if (auto reduce = dyn_cast<mf::AllReduceOp>(op)) {
    return one("all_reduce", reduce.getGridAxes(), bytesOf(reduce.getType()));
  }
  if (auto scatter = dyn_cast<mf::ReduceScatterOp>(op)) {
    return one("reduce_scatter", scatter.getGridAxes(),
               bytesOf(scatter.getInput().getType()));
  }
  if (auto gather = dyn_cast<mf::AllGatherOp>(op)) {
    return one("all_gather", gather.getGridAxes(), bytesOf(gather.getType()));
  }
  if (auto exchange = dyn_cast<mf::AllToAllOp>(op)) {
    // A bound: the rows actually sent are known at run time.
    return one("all_to_all of rows (at most)", exchange.getGridAxes(),
               bytesOf(exchange.getRows().getType()));
  }
  if (auto exchange = dyn_cast<mf::AllToAllDimsOp>(op)) {
    return one("all_to_all", exchange.getGridAxes(),
               bytesOf(exchange.getType()));
  }
  if (auto counts = dyn_cast<mf::AllToAllOffsetsOp>(op)) {
    return one("all_to_all of row counts", counts.getGridAxes(),
               bytesOf(counts.getType()));
  }
  if (auto loss = dyn_cast<mf::CrossEntropyOp>(op);
      loss && loss.getGridAxes()) {
    int64_t bytes = tokenBytes(loss.getLogits());
    SmallVector<CollectivePayload, 2> both =
        one("all_reduce", *loss.getGridAxes(), bytes);
    both.push_back(one("all_reduce", *loss.getGridAxes(), 2 * bytes)[0]);
    return both;
  }
  if (auto grad = dyn_cast<mf::CrossEntropyGradOp>(op);
      grad && grad.getGridAxes()) {
    int64_t bytes = tokenBytes(grad.getLogits());
    SmallVector<CollectivePayload, 2> both =
        one("all_reduce", *grad.getGridAxes(), bytes);
    both.push_back(both[0]);
    return both;
  }
  return {};
}

int64_t mfc::ringWireBytes(StringRef kind, int64_t bytes, int64_t ranks) {
  int64_t passes = kind == "all_reduce" ? 2 : 1;
  return ranks <= 1 ? 0 : passes * (ranks - 1) * bytes / ranks;
}

std::optional<TrainStepCost> mfc::trainStepCost(ModuleOp module) {
  std::optional<TrainingMemory> memory = trainingMemory(module);
  if (!memory || memory->activations < 0) {
    return std::nullopt;
  }
  TrainStepCost cost;
  cost.peakBytes = memory->trainedParameters + memory->frozenParameters +
                   memory->optimizerState + memory->activations;
  for (const EntryReport &entry : collect(module)) {
    if (entry.name == "train_step") {
      cost.peakBytes += entry.derivedBytes;
      cost.flops = entry.flops;
      cost.recomputedFlops = entry.recomputedFlops;
    }
  }
  return cost;
}

void mfc::writeCompileReportJson(ModuleOp module, llvm::raw_ostream &os,
                                 const RecomputeSummary *recompute) {
  llvm::json::Array entries;
  for (const EntryReport &entry : collect(module)) {
    llvm::json::Array groups;
    for (const FusionGroup &group : entry.groups) {
      llvm::json::Array ops;
      for (const std::string &op : group.ops) {
        ops.push_back(op);
      }
      llvm::json::Object object{{"kind", group.kind},
                                {"flops", group.flops},
                                {"bytes", group.bytes},
                                {"ops", std::move(ops)}};
      if (!group.kernel.empty()) {
        object["kernel"] = group.kernel;
        object["tiles"] = group.tiles;
      }
      if (!group.panels.empty()) {
        llvm::json::Array panels;
        for (const std::string &name : group.panels) {
          panels.push_back(name);
        }
        object["weights_as_panels"] = std::move(panels);
      }
      if (!group.dotPanels.empty()) {
        llvm::json::Array panels;
        for (const std::string &name : group.dotPanels) {
          panels.push_back(name);
        }
        object["weights_as_dot_panels"] = std::move(panels);
      }
      groups.push_back(std::move(object));
    }
    llvm::json::Object object{
        {"name", entry.name},   {"initializer", entry.initializer},
        {"ops", entry.ops},     {"flops", entry.flops},
        {"bytes", entry.bytes}, {"fusion_groups", std::move(groups)}};
    if (!entry.recomputed.empty()) {
      llvm::json::Object layers;
      for (const auto &[layer, ops] : entry.recomputed) {
        llvm::json::Array list;
        for (const std::string &op : ops) {
          list.push_back(op);
        }
        layers[layer] = std::move(list);
      }
      object["recomputed"] = llvm::json::Object{
          {"flops", entry.recomputedFlops}, {"ops_by_layer", std::move(layers)}};
    }
    if (entry.arenaBytes >= 0) {
      object["arena_bytes"] = entry.arenaBytes;
      object["arena_lower_bound"] = entry.arenaLowerBound;
      object["derived_from_weights_bytes"] = entry.derivedBytes;
    }
    entries.push_back(std::move(object));
  }
  llvm::json::Object root{{"entries", std::move(entries)}};
  if (std::optional<TrainingMemory> memory = trainingMemory(module)) {
    root["training_memory_bytes"] = llvm::json::Object{
        {"trained_parameters", memory->trainedParameters},
        {"frozen_parameters", memory->frozenParameters},
        {"gradients", memory->gradients},
        {"optimizer_state", memory->optimizerState},
        {"activations_arena", memory->activations}};
  }
  if (recompute) {
    llvm::json::Object object{{"peak_bytes_without", recompute->peakWithout},
                              {"peak_bytes", recompute->peakWith},
                              {"bytes_saved",
                               recompute->peakWithout - recompute->peakWith}};
    if (recompute->budget >= 0) {
      llvm::json::Array layers;
      for (const std::string &choice : recompute->layerChoices) {
        layers.push_back(choice);
      }
      object["memory_budget_bytes"] = recompute->budget;
      object["layers"] = std::move(layers);
      object["plans_compiled"] = recompute->plansCompiled;
    }
    root["recompute"] = std::move(object);
  }
  if (auto skipped = module->getAttrOfType<DictionaryAttr>("mf.kernels_skipped")) {
    llvm::json::Object reasons;
    for (NamedAttribute reason : skipped) {
      reasons[reason.getName().str()] =
          cast<IntegerAttr>(reason.getValue()).getInt();
    }
    root["regions_without_kernels"] = std::move(reasons);
  }
  if (auto name = module->getAttrOfType<StringAttr>("mf.model_name")) {
    root["model"] = name.str();
  }
  llvm::json::Object routed;
  for (auto &[entry, layers] : routedLayersOf(module)) {
    llvm::json::Array list;
    for (const RoutedLayer &layer : layers) {
      list.push_back(llvm::json::Object{{"layer", layer.path},
                                        {"experts", layer.experts},
                                        {"experts_per_token", layer.perToken},
                                        {"tokens", layer.tokens},
                                        {"capacity", layer.capacity},
                                        {"expert_width", layer.width}});
    }
    routed[entry] = std::move(list);
  }
  if (!routed.empty()) {
    root["mixture_of_experts"] = std::move(routed);
  }
  if (shard::GridOp grid = gridOf(module)) {
    llvm::json::Array shape;
    for (int64_t extent : grid.getShape()) {
      shape.push_back(extent);
    }
    int64_t parameters = 0;
    for (auto parameter : module.getOps<mf::ParameterOp>()) {
      parameters += bytesOf(parameter.getShardType(grid));
    }
    llvm::json::Object perEntry;
    for (auto &[name, list] : collectivesOf(module, grid)) {
      llvm::json::Array collectives;
      for (const Collectives &c : list) {
        collectives.push_back(llvm::json::Object{
            {"collective", c.kind}, {"axes", c.axes}, {"ranks", c.ranks},
            {"count", c.count}, {"payload_bytes", c.bytes},
            {"ring_bytes_sent_per_rank", c.wireBytes()}});
      }
      perEntry[name] = std::move(collectives);
    }
    llvm::json::Object parallel{{"grid", std::move(shape)},
                                {"parameter_bytes_per_rank", parameters},
                                {"collectives", std::move(perEntry)}};
    std::vector<StageReport> stages = pipelineStagesOf(module, grid);
    if (!stages.empty()) {
      int64_t micro =
          module->getAttrOfType<IntegerAttr>(mf::kMicroBatchesAttrName)
              .getInt();
      llvm::json::Array list;
      int64_t most = 0;
      Timeline timeline = timelineOf(module, stages).second;
      for (auto [index, stage] : llvm::enumerate(stages)) {
        int64_t held =
            stage.parameterBytes + stage.gradientBytes + stage.optimizerBytes;
        most = std::max(most, held);
        list.push_back(llvm::json::Object{
            {"layers", llvm::json::Array{stage.layers.front().first,
                                         stage.layers.back().second}},
            {"parameter_bytes_per_rank", stage.parameterBytes},
            {"gradient_bytes_per_rank", stage.gradientBytes},
            {"optimizer_bytes_per_rank", stage.optimizerBytes},
            {"backward_arena_bytes", stage.backwardArena},
            {"micro_batches_in_flight", stage.schedule.inFlight},
            {"kept_bytes", stage.peakKeptBytes()},
            {"schedule", describe(stage.schedule)},
            {"slot_starts", llvm::json::Array(timeline.starts[index])}});
        llvm::json::Array saved;
        for (const StageReport::Saved &value : stage.saved) {
          saved.push_back(llvm::json::Object{{"chunk", value.chunk},
                                             {"op", value.op},
                                             {"path", value.path},
                                             {"dtype", value.dtype},
                                             {"bytes", value.bytes}});
        }
        (*list.back().getAsObject())["saved"] = std::move(saved);
        if (stage.layers.size() > 1) {
          llvm::json::Array chunkLayers;
          for (auto [first, last] : stage.layers) {
            chunkLayers.push_back(llvm::json::Array{first, last});
          }
          (*list.back().getAsObject())["chunk_layers"] = std::move(chunkLayers);
        }
      }
      parallel["parameter_bytes_per_rank"] = most;
      int64_t chunks = mf::pipelineChunksOf(module);
      parallel["pipeline"] = llvm::json::Object{
          {"scheduler", mf::pipelineSchedulerOf(module)},
          {"micro_batches", micro},
          {"chunks", chunks},
          {"timeline_units", timeline.length},
          {"timeline_idle_fraction", timeline.idle()},
          {"bubble_fraction",
           bubbleFraction(mf::pipelineSchedulerOf(module),
                          static_cast<int64_t>(stages.size()), micro, chunks)}};
      parallel["stages"] = std::move(list);
    }
    root["parallel"] = std::move(parallel);
  }
  if (std::optional<KvCacheReport> cache = kvCacheOf(module)) {
    llvm::json::Object object{{"caches", cache->caches},
                              {"bytes", cache->bytes},
                              {"slots", cache->slots},
                              {"rows_bytes", cache->rowsBytes()},
                              {"dtype", cache->dtype}};
    if (cache->blocks) {
      object["blocks"] = cache->blocks;
      object["block_size"] = cache->blockSize;
    }
    root["kv_cache"] = std::move(object);
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

void mfc::writeCompileReportText(ModuleOp module, llvm::raw_ostream &os,
                                 const RecomputeSummary *recompute) {
  if (shard::GridOp grid = gridOf(module)) {
    int64_t parameters = 0, whole = 0;
    for (auto parameter : module.getOps<mf::ParameterOp>()) {
      parameters += bytesOf(parameter.getShardType(grid));
      whole += bytesOf(parameter.getTensorType());
    }
    std::vector<StageReport> stages = pipelineStagesOf(module, grid);
    if (!stages.empty()) {
      parameters = 0;
      for (const StageReport &stage : stages) {
        parameters =
            std::max(parameters, stage.parameterBytes + stage.gradientBytes +
                                     stage.optimizerBytes);
      }
    }
    os << "parallel: grid " << grid.getShape()[0];
    for (int64_t extent : grid.getShape().drop_front()) {
      os << "x" << extent;
    }
    std::string axes;
    for (int64_t axis = 0; axis < grid.getRank(); ++axis) {
      axes += (axis ? " x " : "") + mfshapes::gridAxisName(axis);
    }
    os << llvm::format(" (%s); each rank holds "
                       "%s%.4g MB of weights and optimizer state (whole: %.4g "
                       "MB)\n",
                       axes.c_str(), stages.empty() ? "" : "at most ",
                       parameters / 1e6, whole / 1e6);
    if (auto runs =
            module->getAttrOfType<IntegerAttr>(mf::kContextBlocksAttrName);
        runs && grid.getShape().size() > mf::kContextGridAxis) {
      os << llvm::format(
          "context parallelism: each of %lld ranks holds %s of each "
          "sequence's positions%s\n",
          static_cast<long long>(grid.getShape()[mf::kContextGridAxis]),
          runs.getInt() > 1 ? "2 runs" : "a block",
          runs.getInt() > 1 ? " (causal load balance: blocks r and 2c-1-r)"
                            : "");
    }
    if (!stages.empty()) {
      int64_t micro =
          module->getAttrOfType<IntegerAttr>(mf::kMicroBatchesAttrName)
              .getInt();
      int64_t chunks = mf::pipelineChunksOf(module);
      std::string scheduler = mf::pipelineSchedulerOf(module);
      bool vShape = mfshapes::isVShapedScheduler(scheduler);
      std::string chunked =
          chunks > 1 ? " of " + std::to_string(chunks) +
                           (vShape ? " chunks in a V" : " interleaved chunks")
                     : "";
      os << llvm::format(
          "pipeline: %zu stages%s, %lld micro-batches a step, "
          "%s (bubble %s = %.1f%%)\n",
          stages.size(), chunked.c_str(), static_cast<long long>(micro),
          vShape                 ? "ZB-V"
          : chunks > 1           ? "interleaved 1F1B"
          : scheduler == "gpipe" ? "GPipe"
                                 : "1F1B",
          vShape       ? "simulated with F = B = W"
          : chunks > 1 ? "(p-1)/(vm+p-1)"
                       : "(p-1)/(m+p-1)",
          100 * bubbleFraction(scheduler, static_cast<int64_t>(stages.size()),
                               micro, chunks));
      for (auto [index, stage] : llvm::enumerate(stages)) {
        os << llvm::format(
            "  stage %zu: layers %s; per rank: parameters %.4g MB, "
            "gradient sums %.4g MB, optimizer state %.4g MB, backward arena "
            "%.4g MB, %lld %s kept (%.4g MB)\n    %s\n",
            index, stage.layerText().c_str(), stage.parameterBytes / 1e6,
            stage.gradientBytes / 1e6, stage.optimizerBytes / 1e6,
            stage.backwardArena / 1e6,
            static_cast<long long>(stage.schedule.inFlight),
            chunks > 1 ? "chunk passes" : "micro-batches",
            stage.peakKeptBytes() / 1e6, describe(stage.schedule, 30).c_str());
      }
      // The schedule in time: what each stage runs when, and where it
      // waits.
      auto [schedule, timeline] = timelineOf(module, stages);
      constexpr int64_t kMostUnitsDrawn = 96;
      os << llvm::format(
          "  timeline: %lld units (%s), %.1f%% waiting%s\n",
          static_cast<long long>(timeline.length),
          vShape ? "F, B and W 1 unit each; the first part's "
                   "backward 2 (its W too), the last part's 2 "
                   "(its F too)"
                 : "a forward 1 unit, a backward 2, the last "
                   "part's 3 (its forward too)",
          100 * timeline.idle(),
          timeline.length > kMostUnitsDrawn
              ? "; not drawn beyond 96 units (--report=FILE.json "
                "gives each slot's start)"
              : ":");
      size_t width = 1;
      for (const StageSchedule &own : schedule) {
        for (const PipelineSlot &slot : own.slots) {
          StageSchedule one{{slot}, 0, own.chunks};
          width = std::max(width, describe(one).size() + 1);
        }
      }
      for (size_t stage = 0;
           timeline.length <= kMostUnitsDrawn && stage < schedule.size();
           ++stage) {
        os << llvm::format("    stage %zu | ", stage)
           << drawTimeline(timeline, schedule, stage, width) << "\n";
      }
    }
    for (auto &[name, list] : collectivesOf(module, grid)) {
      os << "  @" << name << ":";
      for (const Collectives &c : list) {
        // An all-to-all sends each other rank its share directly: (n - 1)
        // / n of the payload when the shares are even (always, for the
        // blocks of mf.all_to_all_dims).
        StringRef kind = c.kind;
        const char *how = !kind.starts_with("all_to_all") ? "by a ring"
                          : kind == "all_to_all"          ? "directly"
                                                 : "if the shares are even";
        os << llvm::format(" %lld %s over %s (%lld ranks) of %.4g MB, "
                           "%.4g MB sent per rank %s;",
                           static_cast<long long>(c.count), c.kind.c_str(),
                           c.axes.c_str(), static_cast<long long>(c.ranks),
                           c.bytes / 1e6, c.wireBytes() / 1e6, how);
      }
      os << "\n";
    }
  }
  if (std::optional<KvCacheReport> cache = kvCacheOf(module)) {
    os << llvm::format("KV cache: %lld caches, %.4g MB",
                       static_cast<long long>(cache->caches),
                       cache->bytes / 1e6);
    if (cache->dtype == "i8") {
      os << " int8";
    }
    if (cache->blocks) {
      os << llvm::format(
          " (paged: pools of %lld blocks of %lld positions that %lld slots "
          "share; a row of seq_length %lld for every slot would take %.4g "
          "MB)",
          static_cast<long long>(cache->blocks),
          static_cast<long long>(cache->blockSize),
          static_cast<long long>(cache->slots),
          static_cast<long long>(cache->seqLength), cache->rowsBytes() / 1e6);
    } else {
      os << llvm::format(" (a row of seq_length %lld for each of %lld slots)",
                         static_cast<long long>(cache->seqLength),
                         static_cast<long long>(cache->slots));
    }
    os << "\n";
  }
  if (std::optional<TrainingMemory> memory = trainingMemory(module)) {
    os << llvm::format(
        "training step memory: parameters %.4g MB trained + %.4g MB frozen, "
        "optimizer state (fp32) %.4g MB, gradients %.4g MB in all (in the "
        "arena, each until its update)",
        memory->trainedParameters / 1e6, memory->frozenParameters / 1e6,
        memory->optimizerState / 1e6, memory->gradients / 1e6);
    if (memory->activations >= 0) {
      os << llvm::format(", arena of train_step (activations, gradients, "
                         "temporaries) %.4g MB",
                         memory->activations / 1e6);
    }
    os << "\n";
  }
  if (recompute) {
    os << llvm::format("recompute: planned step peak %.4g MB without "
                       "recompute, %.4g MB with it (%.4g MB saved)",
                       recompute->peakWithout / 1e6, recompute->peakWith / 1e6,
                       (recompute->peakWithout - recompute->peakWith) / 1e6);
    if (recompute->budget >= 0) {
      os << llvm::format("; --memory-budget %.4g MB, %d plans compiled: ",
                         recompute->budget / 1e6, recompute->plansCompiled)
         << describeChoices(recompute->layerChoices);
    }
    os << "\n";
  }
  for (auto &[entry, layers] : routedLayersOf(module)) {
    const RoutedLayer &first = layers.front();
    os << "mixture of experts @" << entry << ": " << layers.size()
       << " routed layers, " << first.experts << " experts " << first.width
       << " wide, " << first.perToken << " per token, "
       << first.tokens * first.perToken << " (token, choice) pairs a layer";
    // Each data- (and context-) parallel rank routes its own tokens
    // (MindFormers' groups of dp x cp).
    shard::GridOp grid = gridOf(module);
    bool contextRanks = grid && grid.getShape().size() > mf::kContextGridAxis &&
                        grid.getShape()[mf::kContextGridAxis] > 1;
    if (contextRanks) {
      os << " on each data- and context-parallel rank";
    } else if (grid && grid.getShape()[0] > 1) {
      os << " on each data-parallel rank";
    }
    if (first.capacity > 0) {
      os << ", at most " << first.capacity << " per expert (the rest dropped)";
    } else {
      os << ", dropless";
    }
    os << "; run on the eager library (mfexec.library)\n";
  }
  if (auto skipped = module->getAttrOfType<DictionaryAttr>("mf.kernels_skipped")) {
    for (NamedAttribute reason : skipped) {
      os << "regions left to the eager library ("
         << cast<IntegerAttr>(reason.getValue()).getInt()
         << "): " << reason.getName().str() << "\n";
    }
  }
  for (const EntryReport &entry : collect(module)) {
    os << (entry.initializer ? "initializer @" : "entry @") << entry.name
       << ": " << entry.ops << " ops, "
       << llvm::format("%.4g GFLOP, %.4g MB moved", entry.flops / 1e9,
                       entry.bytes / 1e6);
    if (entry.arenaBytes >= 0) {
      os << llvm::format(", arena %.4g MB (lower bound %.4g MB)",
                         entry.arenaBytes / 1e6, entry.arenaLowerBound / 1e6);
      if (entry.derivedBytes > 0) {
        os << llvm::format(", %.4g MB derived from the weights",
                           entry.derivedBytes / 1e6);
      }
    }
    if (!entry.recomputed.empty()) {
      size_t count = 0;
      for (const auto &[layer, ops] : entry.recomputed) {
        count += ops.size();
      }
      os << llvm::format("\n  recomputed for the backward: %zu ops, %.4g "
                         "GFLOP (%.3g%% of the entry)",
                         count, entry.recomputedFlops / 1e9,
                         entry.flops ? 100.0 * entry.recomputedFlops / entry.flops
                                     : 0.0);
      for (const auto &[layer, ops] : entry.recomputed) {
        os << "\n    " << layer << ":";
        for (auto [i, op] : llvm::enumerate(ops)) {
          os << (i ? ", " : " ") << op;
        }
      }
    }
    os << "\n  " << entry.groups.size() << " fusion groups\n";
    for (auto [index, group] : llvm::enumerate(entry.groups)) {
      os << "  group " << index << " (" << group.kind << ", ";
      if (!group.kernel.empty()) {
        os << "kernel " << group.kernel << " in " << group.tiles << " tiles, ";
      }
      os << group.ops.size() << " ops, " << group.bytes << " bytes";
      for (auto [i, name] : llvm::enumerate(group.panels)) {
        os << (i ? ", " : "; weights as panels: ") << name;
      }
      for (auto [i, name] : llvm::enumerate(group.dotPanels)) {
        os << (i ? ", " : "; weights as dot panels: ") << name;
      }
      os << "):\n";
      for (const std::string &op : group.ops) {
        os << "    " << op << "\n";
      }
    }
  }
}
