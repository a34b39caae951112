//===- TrainStep.cpp - one compiled training step -------------------------===//
//
// 1. Read the optimizer from the module's `mf.optimizer` dictionary and
//    declare the state parameters: AdamW's m and v per trained parameter
//    (fp32), and the gradient sums when gradients are accumulated.
// 2. With accumulation, clone forward_backward into accumulate_gradients,
//    whose gradients / N are added to the sums.
// 3. Clone forward_backward into train_step and replace its return by the
//    update, in mf ops: the step's gradients (plus the sums), their global
//    norm and clipping, the per-step scalars (bias corrections from `step`),
//    and per parameter the new m, v and weight, each stored by mf.assign.
//    Splat constants stand for the hyperparameters, so fusion turns each
//    parameter's update into one elementwise kernel.
//
// A pipelined module does this per stage: `stage<s>_forward_backward`
// becomes `stage<s>_accumulate_gradients` (every micro-batch's backward;
// `mf.micro_batches` of them make a step) over the parameters the stage
// reads, and `stage<s>_train_step(learning_rate, step)` is the update alone,
// of the sums (with interleaving, each chunk's
// `stage<s>_chunk<c>_forward_backward` has its accumulate_gradients and
// the stage's one train_step updates every chunk's parameters, so that its
// norm is the stage's). The global norm sums every stage's squares (an
// mf.all_reduce over the pipeline axis), and a parameter two stages read
// (tied embeddings) has its gradient summed over them first.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <map>

namespace mlir::mf {
#define GEN_PASS_DEF_MFTRAINSTEPPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

struct OptimizerSettings {
  bool biasCorrected = true; // AdamW; MindSpore's AdamWeightDecay is not
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
  std::optional<double> maxGradNorm;
  int64_t accumulation = 1;
  /// ZeRO-1: AdamW's state and update sharded over the data-parallel ranks.
  bool parallelOptimizer = false;
  /// The all-reduces that average the (unsharded) gradients over the
  /// data-parallel ranks (MindFormers' gradient_aggregation_group).
  int64_t gradientBuckets = 1;
};

FailureOr<OptimizerSettings> readSettings(ModuleOp module) {
  // The dialect verified the attribute's values.
  auto optimizer = module->getAttrOfType<OptimizerAttr>("mf.optimizer");
  if (!optimizer) {
    return emitError(module.getLoc())
           << "a training module needs an 'mf.optimizer' (#mf.optimizer<kind "
              "= AdamW, beta1 = ..., beta2 = ..., eps = ..., weight_decay = "
              "..., gradient_accumulation_steps = ...>)";
  }
  OptimizerSettings settings;
  settings.biasCorrected = optimizer.getKind() == OptimizerKind::AdamW;
  settings.beta1 = optimizer.getBeta1().getValueAsDouble();
  settings.beta2 = optimizer.getBeta2().getValueAsDouble();
  settings.eps = optimizer.getEps().getValueAsDouble();
  settings.weightDecay = optimizer.getWeightDecay().getValueAsDouble();
  if (FloatAttr norm = optimizer.getMaxGradNorm()) {
    settings.maxGradNorm = norm.getValueAsDouble();
  }
  settings.accumulation = optimizer.getGradientAccumulationSteps();
  settings.parallelOptimizer = optimizer.getParallelOptimizer() != nullptr;
  settings.gradientBuckets = optimizer.getGradientAggregationGroup();
  return settings;
}

/// One trained parameter and its optimizer state.
struct Trained {
  ParameterOp parameter;
  ParameterOp m, v, gradientSum; // gradientSum: only with accumulation
  /// With the parallel optimizer: the dimension m and v (and the update)
  /// are split along over the data-parallel ranks, when it divides.
  std::optional<int64_t> shardedDim;
};

/// Marks the ops strictly between `after` and `before` that have no mark
/// yet with `mark` (kUpdateAttrName: mf-schedule-updates moves them), but
/// not constants and parameter reads, which need no moving.
void markUpdateOps(Operation *after, Operation *before, Attribute mark) {
  for (Operation *op = after ? after->getNextNode()
                             : &before->getBlock()->front();
       op != before; op = op->getNextNode()) {
    if (!op->hasAttr(kUpdateAttrName) && op->getNumOperands() > 0) {
      op->setAttr(kUpdateAttrName, mark);
    }
  }
}

/// mf ops on f32 tensors, at one location.
class MathBuilder {
public:
  MathBuilder(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  RankedTensorType f32(RankedTensorType like) {
    return RankedTensorType::get(like.getShape(), b.getF32Type());
  }
  Value splat(double value, RankedTensorType type) {
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value)));
  }
  Value scalar(double value) {
    return splat(value, RankedTensorType::get({}, b.getF32Type()));
  }
  /// `value` with the type (shape and element type) of `like`.
  Value broadcastLike(Value value, Value like) {
    return value.getType() == like.getType()
               ? value
               : Value(BroadcastOp::create(b, loc, like.getType(), value));
  }
  Value castTo(Value value, Type elementType) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == elementType) {
      return value;
    }
    return CastOp::create(b, loc, RankedTensorType::get(type.getShape(), elementType),
                          value);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, broadcastLike(y, x)); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, broadcastLike(y, x)); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, broadcastLike(y, x)); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, broadcastLike(y, x)); }
  Value min(Value x, Value y) { return MinOp::create(b, loc, x, broadcastLike(y, x)); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x); }
  /// The sum of all elements, as a 0-d tensor.
  Value sumAll(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    Value flat = ReshapeOp::create(
        b, loc, RankedTensorType::get({type.getNumElements()}, type.getElementType()), x);
    Value sum = ReduceSumOp::create(b, loc, flat, 0);
    return ReshapeOp::create(b, loc, RankedTensorType::get({}, type.getElementType()),
                             sum);
  }

  OpBuilder &b;
  Location loc;
};

struct MFTrainStepPass : mf::impl::MFTrainStepPassBase<MFTrainStepPass> {
  /// The module's device grid (a sharded program's), or null; the same
  /// grid when its data axes have several ranks, else null.
  shard::GridOp grid_, dataGrid_;
  /// The axes whose ranks each compute the gradient of their own part of
  /// the global batch: data_parallel's (axis 0) and, with context
  /// parallelism, context_parallel's (each rank holds a block of every
  /// sequence); and how many ranks they have together.
  SmallVector<int16_t> dataAxes_ = {0};
  int64_t dataRanks_ = 1;

  /// A pipelined module's stage count (its grid's axis 2), else 0.
  int64_t stages_ = 0;
  /// Per parameter, the stages whose forward reads it.
  llvm::StringMap<SmallVector<int64_t>> readingStages_;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!isTrainingModule(module) || module.lookupSymbol("train_step")) {
      return; // not training, or built already
    }
    // The entries to build from: forward_backward, or each stage's.
    SmallVector<std::pair<func::FuncOp, std::string>> backwards;
    for (auto func : module.getOps<func::FuncOp>()) {
      StringRef name = func.getSymName();
      if (func->hasAttr(kStageAttrName) &&
          name.ends_with("_forward_backward")) {
        backwards.emplace_back(
            func, name.drop_back(strlen("forward_backward")).str());
      }
    }
    if (backwards.empty()) {
      auto backward = module.lookupSymbol<func::FuncOp>("forward_backward");
      if (!backward) {
        emitError(module.getLoc())
            << "a training module needs forward_backward "
               "(run mf-autodiff first)";
        return signalPassFailure();
      }
      backwards.emplace_back(backward, "");
    } else if (module.lookupSymbol(backwards.front().second +
                                   "accumulate_gradients")) {
      return; // built already
    }
    FailureOr<OptimizerSettings> settings = readSettings(module);
    if (failed(settings)) {
      return signalPassFailure();
    }
    // Data parallelism: axis 0 of the module's grid (MindFormers'
    // data_parallel x model_parallel (x pipeline_stage (x
    // context_parallel))), and the context axis: each of their ranks
    // computes the gradient of its part of the global batch.
    for (auto grid : module.getOps<shard::GridOp>()) {
      grid_ = grid;
      if (grid.getShape().size() > kContextGridAxis &&
          grid.getShape()[kContextGridAxis] > 1) {
        dataAxes_.push_back(kContextGridAxis);
      }
      for (int16_t axis : dataAxes_) {
        dataRanks_ *= grid.getShape()[axis];
      }
      if (dataRanks_ > 1) {
        dataGrid_ = grid;
      }
    }
    if (auto microBatches =
            module->getAttrOfType<IntegerAttr>(kMicroBatchesAttrName)) {
      if (!grid_ || grid_.getShape().size() <= kPipelineGridAxis) {
        emitError(module.getLoc())
            << "a pipelined module (" << kMicroBatchesAttrName
            << ") needs a data x model x pipeline grid";
        return signalPassFailure();
      }
      stages_ = grid_.getShape()[kPipelineGridAxis];
      settings->accumulation *= microBatches.getInt();
      for (auto func : module.getOps<func::FuncOp>()) {
        if (func->hasAttr(kStageAttrName) &&
            func.getSymName().ends_with("_forward")) {
          int64_t stage =
              func->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
          llvm::SmallSet<StringRef, 16> seen;
          func.walk([&](ParamOp read) {
            SmallVector<int64_t> &stages = readingStages_[read.getName()];
            if (seen.insert(read.getName()).second &&
                !llvm::is_contained(stages, stage)) {
              stages.push_back(stage);
            }
          });
        }
      }
    }
    SmallVector<Trained> trained = declareState(module, *settings);
    // Per pipeline stage, the parameters its chunks' backwards return.
    std::map<int64_t, StageUpdate> stageUpdates;
    for (auto [backward, prefix] : backwards) {
      if (stages_) {
        ++stageUpdates[backward->getAttrOfType<IntegerAttr>(kStageAttrName)
                           .getInt()]
              .backwardsLeft;
      }
    }
    for (auto [backward, prefix] : backwards) {
      // forward_backward: the loss, then every trained parameter's
      // gradient in order. A stage's: its loss and input gradient, then
      // the gradients of its parameters, by name.
      SmallVector<Trained> returned;
      unsigned leading = 0;
      if (prefix.empty()) {
        if (trained.size() + 1 != backward.getNumResults()) {
          backward.emitError() << "returns " << backward.getNumResults()
                               << " values; expected the loss and one "
                                  "gradient per trained parameter ("
                               << trained.size() << ")";
          return signalPassFailure();
        }
        returned = trained;
        leading = 1;
      }
      for (unsigned i = 0; !prefix.empty() && i < backward.getNumResults();
           ++i) {
        auto name = backward.getResultAttrOfType<StringAttr>(i, "mf.name");
        if (!name || !name.getValue().starts_with("grad.")) {
          if (!returned.empty()) {
            backward.emitError() << "returns result " << i
                                 << " after the gradients; expected the loss "
                                    "(and an input gradient) first";
            return signalPassFailure();
          }
          ++leading;
          continue;
        }
        StringRef parameter = name.getValue().drop_front(strlen("grad."));
        auto found = llvm::find_if(trained, [&](Trained &t) {
          return t.parameter.getSymName() == parameter;
        });
        if (found == trained.end()) {
          backward.emitError() << "returns the gradient of '" << parameter
                               << "', which is not a trained parameter";
          return signalPassFailure();
        }
        returned.push_back(*found);
      }
      OpBuilder builder(module.getContext());
      builder.setInsertionPointToEnd(module.getBody());
      if (settings->accumulation > 1 || stages_) {
        auto accumulate = cast<func::FuncOp>(builder.clone(*backward));
        accumulate.setSymName(prefix + "accumulate_gradients");
        setEntryRole(accumulate, accumulate->hasAttr(kStageAttrName)
                                     ? EntryRole::stage_accumulate_gradients
                                     : EntryRole::accumulate_gradients);
        if (failed(
                buildAccumulation(accumulate, leading, returned, *settings))) {
          return signalPassFailure();
        }
      }
      if (stages_) {
        // A stage's update (every chunk's parameters) runs alone, after its
        // last backward: the global norm waits for every stage, so it must
        // not hold back a gradient that another stage waits for.
        int64_t stage =
            backward->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
        StageUpdate &update = stageUpdates[stage];
        for (Trained &parameter : returned) {
          update.parameters.insert(parameter.parameter);
        }
        if (--update.backwardsLeft == 0 &&
            failed(buildStageUpdate(module, backward, stage, trained,
                                    update.parameters, *settings))) {
          return signalPassFailure();
        }
        continue;
      }
      auto step = cast<func::FuncOp>(builder.clone(*backward));
      step.setSymName(prefix + "train_step");
      setEntryRole(step, EntryRole::train_step);
      if (failed(buildUpdate(step, leading, returned, *settings))) {
        return signalPassFailure();
      }
    }
  }

  struct StageUpdate {
    int64_t backwardsLeft = 0;
    llvm::SmallSetVector<Operation *, 16> parameters;
  };

  /// `stage<s>_train_step(learning_rate, step)`: the update of the
  /// `parameters` (of `trained`) that the stage's backwards returned, from
  /// their gradient sums.
  LogicalResult
  buildStageUpdate(ModuleOp module, func::FuncOp backward, int64_t stage,
                   ArrayRef<Trained> trained,
                   const llvm::SmallSetVector<Operation *, 16> &parameters,
                   const OptimizerSettings &settings) {
    SmallVector<Trained> updated;
    for (const Trained &parameter : trained) {
      if (parameters.contains(parameter.parameter)) {
        updated.push_back(parameter);
      }
    }
    OpBuilder builder(module.getContext());
    builder.setInsertionPointToEnd(module.getBody());
    auto step = func::FuncOp::create(builder, backward.getLoc(),
                                     mfshapes::stageEntryPrefix(stage, 0, 1) +
                                         "train_step",
                                     builder.getFunctionType({}, {}));
    step->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
    setEntryRole(step, EntryRole::stage_train_step);
    OpBuilder body = OpBuilder::atBlockEnd(step.addEntryBlock());
    func::ReturnOp::create(body, backward.getLoc());
    return buildUpdate(step, 0, updated, settings, /*fromSums=*/true);
  }

  /// A parameter that several stages read (tied embeddings): its gradient
  /// is the sum of theirs, which every stage reading it must join. Each of
  /// them counts its share of its squares in the global norm.
  FailureOr<bool> sharedByStages(ParameterOp parameter) const {
    auto it = readingStages_.find(parameter.getSymName());
    if (it == readingStages_.end() || it->second.size() < 2) {
      return false;
    }
    if (static_cast<int64_t>(it->second.size()) != stages_) {
      return parameter.emitError()
             << "is read by " << it->second.size() << " of the " << stages_
             << " pipeline stages; a parameter shared by some stages but not "
                "all is not supported yet";
    }
    return true;
  }

  /// The state parameters, after the model's, in the same order.
  SmallVector<Trained> declareState(ModuleOp module,
                                    const OptimizerSettings &settings) {
    SmallVector<Trained> trained;
    Operation *lastParameter = nullptr;
    for (auto parameter : module.getOps<ParameterOp>()) {
      lastParameter = parameter;
      if (parameter.isTrained()) {
        trained.push_back({parameter, {}, {}, {}, std::nullopt});
      }
    }
    OpBuilder builder(module.getContext());
    if (lastParameter) {
      builder.setInsertionPointAfter(lastParameter);
    } else {
      builder.setInsertionPointToStart(module.getBody());
    }
    // Split like its parameter (each rank updates its block), and with the
    // parallel optimizer also over the data-parallel ranks along
    // `shardedDim`.
    auto declare = [&](ParameterOp of, StringRef kind,
                       std::optional<int64_t> shardedDim) {
      auto type = RankedTensorType::get(of.getTensorType().getShape(),
                                        builder.getF32Type());
      FlatSymbolRefAttr grid = of.getGridAttr();
      shard::GridAxesArrayAttr splitAxes = of.getSplitAxesAttr();
      if (shardedDim) {
        SmallVector<DenseI16ArrayAttr> axes;
        if (splitAxes) {
          axes.assign(splitAxes.getAxes().begin(), splitAxes.getAxes().end());
        }
        axes.resize(std::max<size_t>(axes.size(), *shardedDim + 1),
                    builder.getDenseI16ArrayAttr({}));
        SmallVector<int16_t> dimAxes(axes[*shardedDim].asArrayRef());
        // Within the model-parallel block, if any.
        dimAxes.append(dataAxes_.begin(), dataAxes_.end());
        axes[*shardedDim] = builder.getDenseI16ArrayAttr(dimAxes);
        grid = FlatSymbolRefAttr::get(dataGrid_.getSymNameAttr());
        splitAxes = shard::GridAxesArrayAttr::get(builder.getContext(), axes);
      }
      // A stacked weight's state is stacked alike, its parts named after
      // the weight's (checkpoints keep the state of each expert).
      ArrayAttr parts;
      if (ArrayAttr weightParts = of.getPartsAttr()) {
        SmallVector<Attribute> names;
        for (StringAttr part : weightParts.getAsRange<StringAttr>()) {
          names.push_back(builder.getStringAttr("optimizer." + kind + "." +
                                                part.getValue()));
        }
        parts = builder.getArrayAttr(names);
      }
      return ParameterOp::create(
          builder, of.getLoc(),
          ("optimizer." + kind + "." + of.getSymName()).str(), type,
          ParameterInit::zeros, FloatAttr(), StringAttr(),
          /*frozen=*/false, /*state=*/true, /*panels=*/false,
          /*dot_panels=*/false, grid, splitAxes, of.getSplitGroupsAttr(),
          /*quant_scale=*/FlatSymbolRefAttr(),
          /*quant_group=*/IntegerAttr(), /*quant_bits=*/IntegerAttr(),
          FlatSymbolRefAttr(), FlatSymbolRefAttr(), FlatSymbolRefAttr(),
          FloatAttr(), parts, /*calibrated_scales=*/StringAttr());
    };
    for (Trained &entry : trained) {
      entry.shardedDim = shardedDimOf(entry.parameter, settings);
      entry.m = declare(entry.parameter, "m", entry.shardedDim);
      entry.v = declare(entry.parameter, "v", entry.shardedDim);
      if (settings.accumulation > 1 || stages_) {
        entry.gradientSum = declare(entry.parameter, "grad_sum", std::nullopt);
      }
    }
    return trained;
  }

  static Location locationOf(ParameterOp parameter) {
    return NameLoc::get(
        StringAttr::get(parameter.getContext(),
                        "optimizer." + parameter.getSymName().str()),
        parameter.getLoc());
  }

  /// The dimension the parallel optimizer shards a parameter's state along:
  /// its model-parallel split dimension if it has one, else 0; none when
  /// the rank's block does not divide by the data-parallel ranks, or is
  /// its share of several parts (fused q, k, v: a block of it would not
  /// be one block of the whole).
  std::optional<int64_t> shardedDimOf(ParameterOp parameter,
                                      const OptimizerSettings &settings) {
    if (!settings.parallelOptimizer || !dataGrid_ ||
        parameter.getSplitPartCount() > 1 || splitOverData(parameter)) {
      return std::nullopt;
    }
    int64_t dim = 0;
    if (auto axes = parameter.getSplitAxesAttr()) {
      for (auto [index, dimAxes] : llvm::enumerate(axes.getAxes())) {
        if (!dimAxes.empty()) {
          dim = index;
        }
      }
    }
    RankedTensorType block = blockType(parameter);
    if (block.getRank() == 0 || block.getShape()[dim] % dataRanks_ != 0) {
      return std::nullopt;
    }
    return dim;
  }

  /// Whether the data-parallel ranks hold blocks of `parameter` (an
  /// expert-parallel layer's experts): its gradient on each rank is
  /// already the sum over all ranks' tokens (mf.all_to_all brought them).
  static bool splitOverData(ParameterOp parameter) {
    return parameter.getSplitAxesAttr() &&
           llvm::is_contained(splitAxesOf(parameter), int16_t(0));
  }

  /// Every grid axis a split parameter is split over.
  static SmallVector<int16_t> splitAxesOf(ParameterOp parameter) {
    SmallVector<int16_t> axes;
    for (DenseI16ArrayAttr dim : parameter.getSplitAxesAttr().getAxes()) {
      axes.append(dim.asArrayRef().begin(), dim.asArrayRef().end());
    }
    llvm::sort(axes);
    return axes;
  }

  /// A parameter as this rank holds it (its block, when it is split).
  RankedTensorType blockType(ParameterOp parameter) {
    return parameter.getShardType(grid_);
  }

  Value read(OpBuilder &builder, ParameterOp parameter, Location loc) {
    return ParamOp::create(builder, loc, blockType(parameter),
                           parameter.getSymName());
  }

  /// The mean over the data-parallel ranks of `value` (each rank's is of
  /// its own part of the global batch), as MindFormers averages gradients
  /// and the loss; `value` itself on one rank.
  Value meanOverDataParallel(MathBuilder &math, Value value) {
    if (!dataGrid_) {
      return value;
    }
    Value sum =
        AllReduceOp::create(math.b, math.loc, value, dataGrid_.getSymName(),
                            math.b.getDenseI16ArrayAttr(dataAxes_));
    return math.mul(sum, math.scalar(1.0 / static_cast<double>(dataRanks_)));
  }

  /// The most elements one fused all-reduce carries: bigger ones are
  /// slower than their tensors' own all-reduces on this project's machines
  /// (OpenMPI over shared memory: a 100 MB bucket took 4.3x the time of its
  /// tensors' all-reduces, bench/parallel.py) and cost their copy's memory.
  static constexpr int64_t kMaxBucketElements = 1 << 22; // 16 MB of f32

  /// The data-parallel means of `gradients` in `buckets` groups
  /// (MindSpore's communication fusion, which MindFormers'
  /// gradient_aggregation_group sets): gradients smaller than a message's
  /// limit, in order, up to an equal share of the elements a group (and
  /// kMaxBucketElements a message), are flattened, concatenated, averaged
  /// at once and sliced back; a bigger one is a message of its own, and
  /// does not close the group the smaller ones around it fill. Sums
  /// are elementwise, so the values are those of one all-reduce per
  /// gradient; the messages are fewer.
  SmallVector<Value> bucketedMeans(MathBuilder &math, ArrayRef<Value> gradients,
                                   int64_t buckets) {
    auto elementsOf = [](Value g) {
      return cast<RankedTensorType>(g.getType()).getNumElements();
    };
    int64_t total = 0;
    for (Value g : gradients) {
      total += elementsOf(g);
    }
    int64_t share = std::clamp<int64_t>(llvm::divideCeil(total, buckets), 1,
                                        kMaxBucketElements);
    SmallVector<Value> means(gradients.size());
    auto flush = [&](ArrayRef<size_t> bucket) {
      if (bucket.size() == 1) {
        means[bucket.front()] =
            meanOverDataParallel(math, gradients[bucket.front()]);
        return;
      }
      SmallVector<Value> flat;
      int64_t elements = 0;
      for (size_t index : bucket) {
        auto type = cast<RankedTensorType>(gradients[index].getType());
        flat.push_back(ReshapeOp::create(math.b, math.loc,
                                         type.clone({type.getNumElements()}),
                                         gradients[index]));
        elements += type.getNumElements();
      }
      auto joinedType = RankedTensorType::get({elements}, math.b.getF32Type());
      Value joined = ConcatOp::create(math.b, math.loc, joinedType, flat, 0);
      Value mean = meanOverDataParallel(math, joined);
      int64_t offset = 0;
      for (size_t index : bucket) {
        auto type = cast<RankedTensorType>(gradients[index].getType());
        Value part = SliceOp::create(
            math.b, math.loc, type.clone({type.getNumElements()}), mean,
            math.b.getDenseI64ArrayAttr({offset}));
        means[index] = ReshapeOp::create(math.b, math.loc, type, part);
        offset += type.getNumElements();
      }
    };
    SmallVector<size_t> bucket;
    int64_t filled = 0;
    for (auto [index, g] : llvm::enumerate(gradients)) {
      int64_t elements = elementsOf(g);
      if (elements >= kMaxBucketElements) {
        flush({index});
        continue;
      }
      if (filled + elements > kMaxBucketElements) {
        flush(bucket);
        bucket.clear();
        filled = 0;
      }
      bucket.push_back(index);
      filled += elements;
      if (filled >= share) {
        flush(bucket);
        bucket.clear();
        filled = 0;
      }
    }
    if (!bucket.empty()) {
      flush(bucket);
    }
    return means;
  }

  /// A micro-batch's gradient in f32, divided by the number of micro-batches.
  static Value microBatchShare(MathBuilder &math, Value gradient,
                               const OptimizerSettings &settings) {
    Value g = math.castTo(gradient, math.b.getF32Type());
    if (settings.accumulation == 1) {
      return g;
    }
    return math.div(g, math.scalar(static_cast<double>(settings.accumulation)));
  }

  /// The results before the gradients (`leading` of them: the loss, a
  /// stage's input gradient), the loss averaged over the data-parallel
  /// ranks, with their names.
  void leadingResults(func::FuncOp entry, func::ReturnOp ret, unsigned leading,
                      MathBuilder &math, SmallVectorImpl<Value> &results,
                      SmallVectorImpl<StringRef> &names) {
    for (unsigned i = 0; i < leading; ++i) {
      // forward_backward's first result is its loss, named or not.
      auto attr = entry.getResultAttrOfType<StringAttr>(i, "mf.name");
      StringRef name = attr ? attr.getValue() : StringRef("loss");
      Value value = ret.getOperand(i);
      results.push_back(name == "loss" ? meanOverDataParallel(math, value)
                                       : value);
      names.push_back(name);
    }
  }

  LogicalResult buildAccumulation(func::FuncOp entry, unsigned leading,
                                  MutableArrayRef<Trained> trained,
                                  const OptimizerSettings &settings) {
    auto ret = cast<func::ReturnOp>(entry.getBody().front().getTerminator());
    OpBuilder builder(ret);
    for (auto [index, parameter] : llvm::enumerate(trained)) {
      Location loc = locationOf(parameter.parameter);
      MathBuilder math(builder, loc);
      Operation *last = ret->getPrevNode();
      Value share =
          microBatchShare(math, ret.getOperand(leading + index), settings);
      Value sum = math.add(read(builder, parameter.gradientSum, loc), share);
      AssignOp::create(builder, loc, parameter.gradientSum.getSymName(), sum);
      markUpdateOps(last, ret, FlatSymbolRefAttr::get(parameter.parameter));
    }
    MathBuilder shared(builder, entry.getLoc());
    SmallVector<Value> results;
    SmallVector<StringRef> names;
    leadingResults(entry, ret, leading, shared, results, names);
    setResults(entry, ret, results, names);
    return success();
  }

  /// `fromSums`: the entry is the update alone, of the gradient sums that
  /// accumulate_gradients made (a pipeline stage's).
  LogicalResult buildUpdate(func::FuncOp entry, unsigned leading,
                            MutableArrayRef<Trained> trained,
                            const OptimizerSettings &settings,
                            bool fromSums = false) {
    MLIRContext *context = entry.getContext();
    auto scalarType = RankedTensorType::get({}, Float32Type::get(context));
    unsigned argumentCount = entry.getNumArguments();
    Location entryLoc = entry.getLoc();
    for (StringRef name : {"learning_rate", "step"}) {
      (void)entry.insertArgument(
          entry.getNumArguments(), scalarType,
          DictionaryAttr::get(context, {NamedAttribute(
                                           StringAttr::get(context, "mf.name"),
                                           StringAttr::get(context, name))}),
          entryLoc);
    }
    Value learningRate = entry.getArgument(argumentCount);
    Value step = entry.getArgument(argumentCount + 1);

    auto ret = cast<func::ReturnOp>(entry.getBody().front().getTerminator());
    OpBuilder builder(ret);
    // The backward's last op: what follows is the optimizer.
    Operation *backwardEnd = ret->getPrevNode();
    Location optimizerLoc =
        NameLoc::get(StringAttr::get(context, "optimizer"), entryLoc);
    MathBuilder shared(builder, optimizerLoc);

    // This step's gradients, in f32, averaged over the data-parallel ranks
    // (the unsharded ones in buckets, after this loop).
    SmallVector<Value> gradients, unsharded;
    SmallVector<size_t> unshardedAt; // their positions in `gradients`
    for (auto [index, parameter] : llvm::enumerate(trained)) {
      MathBuilder math(builder, locationOf(parameter.parameter));
      Operation *last = ret->getPrevNode();
      Value g;
      if (fromSums) {
        g = read(builder, parameter.gradientSum, math.loc);
      } else {
        g = microBatchShare(math, ret.getOperand(leading + index), settings);
        if (settings.accumulation > 1) {
          g = math.add(read(builder, parameter.gradientSum, math.loc), g);
        }
      }
      FailureOr<bool> shared = sharedByStages(parameter.parameter);
      if (failed(shared)) {
        return failure();
      }
      if (*shared) {
        g = AllReduceOp::create(
            builder, math.loc, g, grid_.getSymName(),
            builder.getDenseI16ArrayAttr({kPipelineGridAxis}));
      }
      if (dataGrid_ && splitOverData(parameter.parameter)) {
        // The sum of every rank's loss's gradient: their mean is 1/dp of it.
        gradients.push_back(
            math.mul(g, math.scalar(1.0 / static_cast<double>(dataRanks_))));
      } else if (parameter.shardedDim) {
        // ZeRO-1: the rank's shard of the data-parallel mean.
        auto shardType = blockType(parameter.m);
        g = ReduceScatterOp::create(
            builder, math.loc, shardType, g, dataGrid_.getSymName(),
            builder.getDenseI16ArrayAttr(dataAxes_), *parameter.shardedDim);
        gradients.push_back(
            math.mul(g, math.scalar(1.0 / static_cast<double>(dataRanks_))));
      } else {
        unshardedAt.push_back(gradients.size());
        unsharded.push_back(g);
        gradients.push_back(g);
      }
      markUpdateOps(last, ret, FlatSymbolRefAttr::get(parameter.parameter));
    }
    if (dataGrid_) {
      SmallVector<Value> means =
          bucketedMeans(shared, unsharded, settings.gradientBuckets);
      for (auto [at, mean] : llvm::zip(unshardedAt, means)) {
        gradients[at] = mean;
      }
    }

    // Global-norm clipping, as torch.nn.utils.clip_grad_norm_.
    Value norm;
    if (settings.maxGradNorm) {
      // A split parameter's squares are summed over the ranks holding its
      // blocks; a replicated one's count once.
      Value total;
      std::map<SmallVector<int16_t>, Value> splitTotals;
      for (auto [parameter, g] : llvm::zip(trained, gradients)) {
        Value squares = shared.sumAll(shared.mul(g, g));
        // A shared parameter's (summed over its stages already): each stage
        // counts its share, so that every stage's norm reads the sum's
        // all-reduce (the stages run their pipeline-axis all-reduces in
        // the same order whatever moves independent ops).
        auto readers = readingStages_.find(parameter.parameter.getSymName());
        if (readers != readingStages_.end() && readers->second.size() > 1) {
          squares = shared.mul(
              squares,
              shared.scalar(1.0 / static_cast<double>(readers->second.size())));
        }
        SmallVector<int16_t> axes =
            parameter.shardedDim ? splitAxesOf(parameter.m)
            : parameter.parameter.getSplitAxesAttr()
                ? splitAxesOf(parameter.parameter)
                : SmallVector<int16_t>();
        Value &sum = axes.empty() ? total : splitTotals[axes];
        sum = sum ? shared.add(sum, squares) : squares;
      }
      for (auto &[axes, sum] : splitTotals) {
        Value whole = AllReduceOp::create(builder, optimizerLoc, sum,
                                          grid_.getSymName(),
                                          builder.getDenseI16ArrayAttr(axes));
        total = total ? shared.add(total, whole) : whole;
      }
      if (!total) { // a stage whose parameters another stage counts
        total = shared.scalar(0.0);
      }
      if (stages_) { // every stage's squares
        total = AllReduceOp::create(
            builder, optimizerLoc, total, grid_.getSymName(),
            builder.getDenseI16ArrayAttr({kPipelineGridAxis}));
      }
      norm = shared.sqrt(total);
      Value scale =
          shared.min(shared.div(shared.scalar(*settings.maxGradNorm),
                                shared.add(norm, shared.scalar(1e-6))),
                     shared.scalar(1.0));
      for (Value &g : gradients) {
        g = shared.mul(g, scale);
      }
    }

    // Per-step scalars: AdamW's step size lr / (1 - beta1^t), the square
    // root of 1 - beta2^t and the decay factor 1 - lr * wd.
    Value stepSize = learningRate, correction2Root, shrink;
    if (settings.biasCorrected) {
      auto correction = [&](double beta) {
        return shared.sub(shared.scalar(1.0),
                          shared.exp(shared.mul(step, shared.scalar(std::log(beta)))));
      };
      stepSize = shared.div(learningRate, correction(settings.beta1));
      correction2Root = shared.sqrt(correction(settings.beta2));
      shrink = shared.sub(shared.scalar(1.0),
                          shared.mul(learningRate, shared.scalar(settings.weightDecay)));
    }

    for (auto [parameter, g] : llvm::zip(trained, gradients)) {
      Location loc = locationOf(parameter.parameter);
      MathBuilder math(builder, loc);
      Operation *last = ret->getPrevNode();
      // The rank's state and weights: its shard with the parallel optimizer.
      auto type = math.f32(blockType(parameter.m));
      Value weight = math.castTo(read(builder, parameter.parameter, loc),
                                 builder.getF32Type());
      if (parameter.shardedDim) {
        weight = ScatterOp::create(
            builder, loc, type, weight, dataGrid_.getSymName(),
            builder.getDenseI16ArrayAttr(dataAxes_), *parameter.shardedDim);
      }
      Value m = math.add(math.mul(read(builder, parameter.m, loc),
                                  math.splat(settings.beta1, type)),
                         math.mul(g, math.splat(1.0 - settings.beta1, type)));
      Value v = math.add(math.mul(read(builder, parameter.v, loc),
                                  math.splat(settings.beta2, type)),
                         math.mul(math.mul(g, g), math.splat(1.0 - settings.beta2, type)));
      Value next;
      if (settings.biasCorrected) {
        // p (1 - lr wd) - lr / c1 * m / (sqrt(v) / sqrt(c2) + eps)
        Value denominator = math.add(math.div(math.sqrt(v), correction2Root),
                                     math.splat(settings.eps, type));
        next = math.sub(math.mul(weight, shrink),
                        math.mul(math.div(m, denominator), stepSize));
      } else {
        // p - lr (m / (sqrt(v) + eps) + wd p)
        Value update = math.div(m, math.add(math.sqrt(v), math.splat(settings.eps, type)));
        if (settings.weightDecay != 0.0) {
          update = math.add(update, math.mul(weight, math.splat(settings.weightDecay, type)));
        }
        next = math.sub(weight, math.mul(update, learningRate));
      }
      AssignOp::create(builder, loc, parameter.m.getSymName(), m);
      AssignOp::create(builder, loc, parameter.v.getSymName(), v);
      next = math.castTo(next, parameter.parameter.getTensorType().getElementType());
      if (parameter.shardedDim) {
        // Every rank's updated shard, to every rank.
        next = AllGatherOp::create(builder, loc, blockType(parameter.parameter),
                                   next, dataGrid_.getSymName(),
                                   builder.getDenseI16ArrayAttr(dataAxes_),
                                   *parameter.shardedDim);
      }
      AssignOp::create(builder, loc, parameter.parameter.getSymName(), next);
      if (parameter.gradientSum) {
        AssignOp::create(builder, loc, parameter.gradientSum.getSymName(),
                         math.splat(0.0, blockType(parameter.gradientSum)));
      }
      markUpdateOps(last, ret, FlatSymbolRefAttr::get(parameter.parameter));
    }
    // The rest (per-step scalars, clipping, buckets) serve several updates.
    markUpdateOps(backwardEnd, ret, UnitAttr::get(context));

    SmallVector<Value> results;
    SmallVector<StringRef> names;
    leadingResults(entry, ret, leading, shared, results, names);
    if (norm) {
      results.push_back(norm);
      names.push_back("grad_norm");
    }
    setResults(entry, ret, results, names);
    return success();
  }

  /// Replaces the entry's return by one of `results`, named `names`.
  static void setResults(func::FuncOp entry, func::ReturnOp ret,
                         ArrayRef<Value> results, ArrayRef<StringRef> names) {
    OpBuilder builder(ret);
    func::ReturnOp::create(builder, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    SmallVector<Attribute> attributes;
    for (auto [result, name] : llvm::zip(results, names)) {
      types.push_back(result.getType());
      attributes.push_back(builder.getDictionaryAttr(
          builder.getNamedAttr("mf.name", builder.getStringAttr(name))));
    }
    entry.setFunctionType(builder.getFunctionType(entry.getArgumentTypes(), types));
    entry.setAllResultAttrs(attributes);
  }
};

} // namespace
