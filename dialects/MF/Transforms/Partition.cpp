//===- Partition.cpp - one rank's program of a tensor-parallel graph ------===//
//
// The frontend declares how parameters are split over the device grid
// (mf.parameter ... sharding(@grid, split_axes)); this pass propagates the
// splits forward through the graph in program order. Each op's sharding
// rule (ShardingOpInterface, MFSharding.cpp) says how a rank holds its
// result and adds the collectives the layout needs: an mf.all_reduce after
// a matmul that leaves partial sums (Megatron's g), an mf.replicate before
// the replicated input of column-parallel matmuls (Megatron's f, whose
// gradient is the all-reduce). Every split value gets its per-rank type.
// Every rank runs the result (SPMD): only the blocks of the weights it
// reads differ.
//
// A value is split along at most one dimension here, which is all that
// Megatron's tensor-parallel layout needs; upstream's shard-partition
// handles more general shardings but only for ops implementing its
// ShardingInterface, which mf's model-level ops (attention, rope, KV-cache
// writes) do not, and it reshards on 1-D grids only.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/Sharding.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFPARTITIONPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

/// One function's partitioning: the split of every value so far, and the
/// collectives made for them.
class Partitioner : public Partitioning {
public:
  Partitioner(shard::GridOp grid, bool sequenceParallel)
      : grid_(grid), sequenceParallel_(sequenceParallel) {}

  LogicalResult run(func::FuncOp func) {
    sequenceSplit_ = sequenceParallel_ && canSplitSequence(func);
    // A pipeline stage passes its hidden states on as its layers hold them:
    // under sequence parallelism split along the sequence (what the next
    // stage receives and keeps is the rank's block, not all of it).
    stageHidden_ = sequenceSplit_ && func->hasAttr(kStageAttrName);
    for (BlockArgument argument : func.getArguments()) {
      auto name =
          func.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "mf.name");
      if (stageHidden_ && name && name.getValue() == "hidden" &&
          failed(assign(argument, sequenceSplit(), func))) {
        return failure();
      }
    }
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      if (failed(visit(&op))) {
        return failure();
      }
    }
    // The signature follows the arguments and what is returned.
    auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    func.setFunctionType(FunctionType::get(
        func.getContext(), func.getBody().front().getArgumentTypes(),
        returnOp.getOperandTypes()));
    return success();
  }

  shard::GridOp grid() const override { return grid_; }

  /// By value: assigning a split to another value may move the map's
  /// entries.
  Split splitOf(Value value) const override {
    auto it = splits_.find(value);
    return it == splits_.end() ? Split() : it->second;
  }

  bool splitsSequence() const override { return sequenceSplit_; }

  LogicalResult assign(Value value, Split split, Operation *at) override {
    if (!split.replicated() && !split.partial) {
      auto type = cast<RankedTensorType>(value.getType());
      SmallVector<int64_t> shape(type.getShape());
      int64_t n = ways(split.axes);
      if (shape[split.dim] % (n * split.parts) != 0) {
        return at->emitOpError()
               << "cannot be partitioned: dimension " << split.dim << " ("
               << shape[split.dim] << ") of its result does not split " << n
               << " ways" << (split.parts > 1 ? " in each part" : "");
      }
      shape[split.dim] /= n;
      value.setType(type.clone(shape));
    }
    splits_[value] = std::move(split);
    return success();
  }

  void record(Value value, Split split) override {
    splits_[value] = std::move(split);
  }

  LogicalResult noRule(Operation *op) override {
    InFlightDiagnostic diag = op->emitOpError()
                              << "cannot be partitioned: no sharding rule for "
                                 "its operands' splits (";
    llvm::interleaveComma(op->getOperands(), diag, [&](Value operand) {
      const Split split = splitOf(operand);
      if (split.replicated()) {
        diag << "replicated";
      } else if (split.partial) {
        diag << "partial";
      } else {
        diag << "dim " << split.dim;
        if (split.parts > 1) {
          diag << " in " << split.parts << " parts";
        }
      }
    });
    diag << ")";
    return failure();
  }

  Value replicated(Value value, ArrayRef<int16_t> axes) override {
    if (auto existing = value.getDefiningOp<ReplicateOp>();
        existing && existing.getGridAxes() == axes) {
      return existing; // a matmul visited again reads it already
    }
    Value &replica = replicas_[value];
    if (!replica) {
      OpBuilder builder(value.getContext());
      builder.setInsertionPointAfterValue(value);
      replica = ReplicateOp::create(builder, value.getLoc(), value,
                                    grid_.getSymName(),
                                    builder.getDenseI16ArrayAttr(axes));
    }
    return replica;
  }

  Value gathered(Value value, const Split &split) override {
    Value &gather = gathers_[value]; // one for q, k and v (and w1, w3)
    if (gather) {
      return gather;
    }
    OpBuilder builder(value.getContext());
    builder.setInsertionPointAfterValue(value);
    auto local = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(local.getShape());
    shape[split.dim] *= ways(split.axes);
    gather = AllGatherOp::create(builder, value.getLoc(), local.clone(shape),
                                 value, grid_.getSymName(),
                                 builder.getDenseI16ArrayAttr(split.axes),
                                 split.dim);
    return gather;
  }

  Value blockOf(Value value, const Split &split) override {
    auto whole = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(whole.getShape());
    shape[split.dim] /= ways(split.axes);
    OpBuilder builder(value.getContext());
    builder.setInsertionPointAfterValue(value);
    // A splat is the same on every rank (LoRA's scale).
    auto constant = value.getDefiningOp<ConstantOp>();
    if (auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue())
                              : SplatElementsAttr()) {
      return ConstantOp::create(builder, value.getLoc(),
                                splat.resizeSplat(whole.clone(shape)));
    }
    if (split.parts > 1) {
      return Value();
    }
    // Its gradient all-gathers.
    auto scatter = ScatterOp::create(builder, value.getLoc(), whole.clone(shape),
                                     value, grid_.getSymName(),
                                     builder.getDenseI16ArrayAttr(split.axes),
                                     split.dim);
    record(scatter.getResult(), split);
    return scatter;
  }

private:
  /// Whether sequence parallelism applies to `func`: no KV cache (one
  /// decode token does not split) and a sequence the ranks divide.
  bool canSplitSequence(func::FuncOp func) {
    bool cache = false, divides = true;
    func.walk([&](Operation *op) {
      cache |= isa<KvCacheWriteOp>(op);
      if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
        divides &= embedding.getType().getShape()[kSequenceDim] %
                       grid_.getShape()[kModelAxis] == 0;
      }
    });
    return !cache && divides;
  }

  LogicalResult visit(Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      return visitParam(param);
    }
    if (auto rule = dyn_cast<ShardingOpInterface>(op)) {
      return rule.partition(*this);
    }
    if (!anySplit(op)) {
      return success();
    }
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      return visitReturn(returnOp);
    }
    if (op->hasTrait<OpTrait::Elementwise>()) {
      return partitionElementwise(op, *this);
    }
    return noRule(op);
  }

  LogicalResult visitParam(ParamOp param) {
    auto parameter = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(
        param, param.getNameAttr());
    if (!parameter || !parameter.getSplitAxesAttr()) {
      return success();
    }
    Split split;
    for (auto [dim, axes] : llvm::enumerate(parameter.getSplitAxesAttr().getAxes())) {
      if (axes.empty()) {
        continue;
      }
      if (!split.replicated()) {
        return parameter.emitOpError()
               << "is split along two dimensions; mf-partition splits one";
      }
      split = Split::along(dim, axes.asArrayRef(), parameter.getSplitPartCount());
    }
    param.getResult().setType(parameter.getTensorType());
    return assign(param.getResult(), split, param);
  }

  /// What an entry returns is whole (the logits of a vocabulary-parallel
  /// lm_head are all-gathered), except the KV caches: each rank keeps its
  /// heads' block, which the runtime passes back in; and a pipeline stage's
  /// hidden states split along the sequence, as the next stage takes them.
  LogicalResult visitReturn(func::ReturnOp returnOp) {
    auto func = returnOp->getParentOfType<func::FuncOp>();
    for (OpOperand &operand : returnOp->getOpOperands()) {
      const Split split = splitOf(operand.get());
      if (split.replicated() || operand.get().getDefiningOp<KvCacheWriteOp>()) {
        continue;
      }
      auto name = func.getResultAttrOfType<StringAttr>(
          operand.getOperandNumber(), "mf.name");
      if (stageHidden_ && name && name.getValue() == "hidden" &&
          split == sequenceSplit()) {
        continue;
      }
      if (split.partial || split.parts > 1) {
        return noRule(returnOp);
      }
      operand.set(gathered(operand.get(), split));
    }
    return success();
  }

  static Split sequenceSplit() {
    return Split::along(kSequenceDim, {kModelAxis});
  }

  shard::GridOp grid_;
  bool sequenceParallel_ = false, sequenceSplit_ = false, stageHidden_ = false;
  DenseMap<Value, Split> splits_;
  DenseMap<Value, Value> replicas_, gathers_;
};

struct MFPartitionPass : mf::impl::MFPartitionPassBase<MFPartitionPass> {
  using MFPartitionPassBase::MFPartitionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid;
    for (ParameterOp parameter : module.getOps<ParameterOp>()) {
      if (!parameter.getGrid()) {
        continue;
      }
      auto named = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
          module, parameter.getGridAttr());
      if (grid && named != grid) {
        parameter.emitOpError() << "names another grid than the parameters "
                                   "before it; one program has one grid";
        return signalPassFailure();
      }
      grid = named;
    }
    if (!grid) {
      return;
    }
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      if (failed(Partitioner(grid, sequenceParallel).run(func))) {
        return signalPassFailure();
      }
    }
  }
};

} // namespace
