//===- Partition.cpp - one rank's program of a tensor-parallel graph ------===//
//
// The frontend declares how parameters are split over the device grid
// (mf.parameter ... sharding(@grid, split_axes)); this pass propagates the
// splits forward through the graph, op by op, with one rule per op kind,
// gives every split value its per-rank type, puts an mf.all_reduce after
// each matmul that leaves partial sums (Megatron's g) and an mf.replicate
// before the replicated input of column-parallel matmuls (Megatron's f,
// whose gradient is the all-reduce). Every rank runs the result (SPMD):
// only the blocks of the weights it reads differ.
//
// A value is split along at most one dimension here, which is all that
// Megatron's tensor-parallel layout needs; upstream's shard-partition
// handles more general shardings but only for ops implementing its
// ShardingInterface, which mf's model-level ops (attention, rope, KV-cache
// writes) do not, and it reshards on 1-D grids only.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFPARTITIONPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

/// How one rank holds a value: whole (replicated), one dimension split over
/// grid axes, or a partial sum over grid axes. A split dimension may hold
/// `parts` equal parts each split the same way (GPT-2's fused q, k, v: the
/// rank holds its share of each).
struct Split {
  int64_t dim = -1;
  SmallVector<int16_t> axes;
  bool partial = false;
  int64_t parts = 1;

  bool replicated() const { return axes.empty(); }
  bool operator==(const Split &other) const {
    return dim == other.dim && axes == other.axes && partial == other.partial &&
           parts == other.parts;
  }
  bool operator!=(const Split &other) const { return !(*this == other); }
  static Split along(int64_t dim, ArrayRef<int16_t> axes, int64_t parts = 1) {
    return Split{dim, SmallVector<int16_t>(axes), false, parts};
  }
};

class Partitioner {
public:
  Partitioner(shard::GridOp grid, bool sequenceParallel)
      : grid_(grid), sequenceParallel_(sequenceParallel) {}

  LogicalResult run(func::FuncOp func) {
    sequenceSplit_ = sequenceParallel_ && splitsSequence(func);
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

private:
  /// The model-parallel axis sequence parallelism splits along.
  static constexpr int16_t kModelAxis = 1;
  static constexpr int64_t kSequenceDim = 1;

  /// Whether sequence parallelism applies to `func`: no KV cache (one
  /// decode token does not split) and a sequence the ranks divide.
  bool splitsSequence(func::FuncOp func) {
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

  /// `value`, split along the sequence and replicated, all-gathered (the
  /// input of the column-parallel projections, or of the lm_head).
  Value gathered(Value value, const Split &split) {
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

  /// By value: assigning a split to another value may move the map's
  /// entries.
  Split splitOf(Value value) const {
    auto it = splits_.find(value);
    return it == splits_.end() ? Split() : it->second;
  }

  int64_t ways(ArrayRef<int16_t> axes) {
    int64_t product = 1;
    for (int16_t axis : axes) {
      product *= grid_.getShape()[axis];
    }
    return product;
  }

  /// Records `split` for `value` and gives it its per-rank type.
  LogicalResult assign(Value value, Split split, Operation *at) {
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

  LogicalResult noRule(Operation *op) {
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

  LogicalResult visit(Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      return visitParam(param);
    }
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      return visitEmbedding(embedding);
    }
    bool anySplit = llvm::any_of(op->getOperands(), [&](Value operand) {
      return !splitOf(operand).replicated();
    });
    if (!anySplit) {
      return success();
    }
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      return visitReturn(returnOp);
    }
    return TypeSwitch<Operation *, LogicalResult>(op)
        .Case<MatmulOp>([&](MatmulOp matmul) { return visitMatmul(matmul); })
        .Case<ReshapeOp>([&](ReshapeOp reshape) { return visitReshape(reshape); })
        .Case<BroadcastOp>([&](BroadcastOp broadcast) {
          return visitBroadcast(broadcast);
        })
        .Case<RopeOp>([&](RopeOp rope) {
          const Split input = splitOf(rope.getInput());
          int64_t headDim = rope.getInput().getType().getRank() - 1;
          if (!splitOf(rope.getPositions()).replicated() ||
              input.dim == headDim) {
            return (noRule(rope));
          }
          return assign(rope.getResult(), input, rope);
        })
        .Case<AttentionOp>([&](AttentionOp attention) {
          // Query, key and value split by heads (dimension 2) the same way:
          // each rank attends with its heads (and its KV heads).
          const Split query = splitOf(attention.getQuery());
          if (query.dim != 2 || splitOf(attention.getKey()) != query ||
              splitOf(attention.getValue()) != query ||
              (attention.getPastLength() &&
               !splitOf(attention.getPastLength()).replicated())) {
            return (noRule(attention));
          }
          return assign(attention.getResult(), query, attention);
        })
        .Case<ReduceScatterOp, AllGatherOp, ScatterOp>([&](Operation *) {
          return success(); // made by this pass, their splits assigned
        })
        .Case<AllReduceOp>([&](AllReduceOp reduce) {
          const Split input = splitOf(reduce.getInput());
          if (!input.partial || ArrayRef<int16_t>(input.axes) !=
                                    reduce.getGridAxes()) {
            return (noRule(reduce));
          }
          return success(); // replicated
        })
        .Case<KvCacheWriteOp>([&](KvCacheWriteOp write) {
          return visitKvCacheWrite(write);
        })
        .Case<CrossEntropyOp>([&](CrossEntropyOp loss) {
          // Megatron's vocab-parallel cross-entropy: each rank holds a
          // block of the vocabulary; the loss is whole on every rank.
          const Split logits = splitOf(loss.getLogits());
          if (logits.partial || logits.dim != 1 ||
              !splitOf(loss.getLabels()).replicated()) {
            return noRule(loss);
          }
          setVocabSplit(loss, logits.axes);
          return success();
        })
        .Case<RmsNormOp, LayerNormOp>([&](Operation *norm) {
          // Sequence parallelism: the norm of the rank's tokens. Its weight
          // (and bias) go through mf.replicate: each rank's gradient of
          // them is the part from its tokens.
          Value input = norm->getOperand(0);
          const Split split = splitOf(input);
          int64_t last = cast<RankedTensorType>(input.getType()).getRank() - 1;
          if (split.partial || split.dim == last) {
            return noRule(norm);
          }
          for (OpOperand &operand : llvm::drop_begin(norm->getOpOperands())) {
            if (!splitOf(operand.get()).replicated()) {
              return noRule(norm);
            }
            operand.set(replicated(operand.get(), split.axes));
          }
          return assign(norm->getResult(0), split, norm);
        })
        .Case<SliceOp>([&](SliceOp slice) { return visitSlice(slice); })
        .Default([&](Operation *other) {
          if (other->hasTrait<OpTrait::Elementwise>()) {
            return visitElementwise(other);
          }
          return (noRule(other));
        });
  }

  template <typename OpT>
  void setVocabSplit(OpT op, ArrayRef<int16_t> axes) {
    OpBuilder builder(op->getContext());
    op.setGridAttr(FlatSymbolRefAttr::get(grid_.getSymNameAttr()));
    op.setGridAxesAttr(builder.getDenseI16ArrayAttr(axes));
  }

  /// The token embedding: a vocabulary-parallel table (rows split) gives
  /// partial sums, all-reduced; under sequence parallelism each rank keeps
  /// its part of the sequence (reduce-scatter, or mf.scatter of a
  /// replicated lookup, which needs no communication).
  LogicalResult visitEmbedding(EmbeddingOp embedding) {
    const Split table = splitOf(embedding.getTable());
    const Split ids = splitOf(embedding.getIds());
    if (table.partial || ids.partial || (!table.replicated() && table.dim != 0) ||
        (!table.replicated() && !ids.replicated())) {
      return noRule(embedding);
    }
    if (!ids.replicated()) {
      return assign(embedding.getResult(), ids, embedding);
    }
    OpBuilder builder(embedding->getContext());
    builder.setInsertionPointAfter(embedding);
    Location loc = embedding.getLoc();
    Value result = embedding.getResult();
    SmallVector<int16_t> sequenceAxes = {kModelAxis};
    Operation *after = nullptr;
    if (!table.replicated()) {
      setVocabSplit(embedding, table.axes);
      sequenceAxes = table.axes;
      auto axes = builder.getDenseI16ArrayAttr(table.axes);
      if (sequenceSplit_) {
        after = ReduceScatterOp::create(
            builder, loc, sequenceBlock(embedding.getType(), table.axes),
            result, grid_.getSymName(), axes, kSequenceDim);
      } else {
        after = AllReduceOp::create(builder, loc, result, grid_.getSymName(),
                                    axes);
      }
      splits_[result] = Split{-1, table.axes, true};
    } else if (sequenceSplit_) {
      after = ScatterOp::create(builder, loc,
                                sequenceBlock(embedding.getType(), sequenceAxes),
                                result, grid_.getSymName(),
                                builder.getDenseI16ArrayAttr(sequenceAxes),
                                kSequenceDim);
    }
    if (!after) {
      return success();
    }
    result.replaceAllUsesExcept(after->getResult(0), after);
    if (sequenceSplit_) {
      splits_[after->getResult(0)] = Split::along(kSequenceDim, sequenceAxes);
    }
    return success();
  }

  /// `whole` with its sequence split over `axes`.
  RankedTensorType sequenceBlock(RankedTensorType whole, ArrayRef<int16_t> axes) {
    SmallVector<int64_t> shape(whole.getShape());
    shape[kSequenceDim] /= ways(axes);
    return whole.clone(shape);
  }

  /// What an entry returns is whole (the logits of a vocabulary-parallel
  /// lm_head are all-gathered), except the KV caches: each rank keeps its
  /// heads' block, which the runtime passes back in.
  LogicalResult visitReturn(func::ReturnOp returnOp) {
    for (OpOperand &operand : returnOp->getOpOperands()) {
      const Split split = splitOf(operand.get());
      if (split.replicated() || operand.get().getDefiningOp<KvCacheWriteOp>()) {
        continue;
      }
      if (split.partial || split.parts > 1) {
        return noRule(returnOp);
      }
      operand.set(gathered(operand.get(), split));
    }
    return success();
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

  /// Elementwise ops keep a split when every operand has the same one. A
  /// replicated operand among split ones is a splat of the block's type (a
  /// constant: LoRA's scale) or scattered (a bias added after a
  /// reduce-scatter): each rank keeps its block.
  LogicalResult visitElementwise(Operation *op) {
    Split first;
    for (Value operand : op->getOperands()) {
      if (!splitOf(operand).replicated()) {
        first = splitOf(operand);
        break;
      }
    }
    for (OpOperand &operand : op->getOpOperands()) {
      const Split split = splitOf(operand.get());
      if (split.replicated() && !first.partial) {
        if (Value splat = splatBlock(operand.get(), first)) {
          operand.set(splat);
          continue;
        }
      }
      if (split.replicated() && !first.partial && first.parts == 1) {
        operand.set(scattered(operand.get(), first));
        continue;
      }
      if (split != first || first.partial) {
        return noRule(op);
      }
    }
    for (Value result : op->getResults()) {
      if (failed(assign(result, first, op))) {
        return failure();
      }
    }
    return success();
  }

  LogicalResult visitMatmul(MatmulOp matmul) {
    const Split lhs = splitOf(matmul.getLhs());
    const Split rhs = splitOf(matmul.getRhs());
    int64_t lhsRank = matmul.getLhs().getType().getRank();
    int64_t rhsRank = matmul.getRhs().getType().getRank();
    int64_t resultRank = matmul.getResult().getType().getRank();
    int64_t lhsK = matmul.getTransposeLhs() ? lhsRank - 2 : lhsRank - 1;
    int64_t lhsM = matmul.getTransposeLhs() ? lhsRank - 1 : lhsRank - 2;
    int64_t rhsK = matmul.getTransposeRhs() ? rhsRank - 1 : rhsRank - 2;
    int64_t rhsN = matmul.getTransposeRhs() ? rhsRank - 2 : rhsRank - 1;
    if (lhs.partial || rhs.partial) {
      return noRule(matmul);
    }
    if (lhs.replicated() && rhs.replicated()) {
      return success(); // gathered just now
    }
    // Sequence parallelism: the projections (and the lm_head) read the
    // whole sequence.
    if (sequenceSplit_ && !lhs.replicated() && lhs.dim != lhsK &&
        rhsRank == 2 && (rhs.replicated() || rhs.dim == rhsN)) {
      matmul.getLhsMutable().assign(gathered(matmul.getLhs(), lhs));
      return visitMatmul(matmul);
    }
    // Column parallel: a weight split along its output features. The input
    // goes through mf.replicate, so that its gradient is summed over the
    // ranks (each computes it from its block of the weight).
    if (lhs.replicated() && rhsRank == 2 && rhs.dim == rhsN) {
      matmul.getLhsMutable().assign(replicated(matmul.getLhs(), rhs.axes));
      return assign(matmul.getResult(),
                    Split::along(resultRank - 1, rhs.axes, rhs.parts), matmul);
    }
    // Row parallel: both split along the contracted dimension; each rank
    // holds a partial sum, which an all-reduce over the same axes sums.
    bool rowParallel = lhs.dim == lhsK && rhs.dim == rhsK &&
                       lhs.axes == rhs.axes && lhs.parts == 1 && rhs.parts == 1;
    if (rowParallel && sequenceSplit_) {
      // Sequence parallelism: the sum, of which each rank keeps its part
      // of the sequence.
      OpBuilder builder(matmul->getContext());
      builder.setInsertionPointAfter(matmul);
      auto reduced = ReduceScatterOp::create(
          builder, matmul.getLoc(), sequenceBlock(matmul.getType(), lhs.axes),
          matmul.getResult(),
          grid_.getSymName(), builder.getDenseI16ArrayAttr(lhs.axes),
          kSequenceDim);
      matmul.getResult().replaceAllUsesExcept(reduced, reduced);
      splits_[reduced.getResult()] = Split::along(kSequenceDim, lhs.axes);
      return assign(matmul.getResult(), Split{-1, lhs.axes, true}, matmul);
    }
    if (rowParallel) {
      OpBuilder builder(matmul->getContext());
      builder.setInsertionPointAfter(matmul);
      auto reduced = AllReduceOp::create(
          builder, matmul.getLoc(), matmul.getResult(), grid_.getSymName(),
          builder.getDenseI16ArrayAttr(lhs.axes));
      matmul.getResult().replaceAllUsesExcept(reduced, reduced);
      return assign(matmul.getResult(), Split{-1, lhs.axes, true}, matmul);
    }
    // Rows (or a batch dimension) of the input split, the weight whole.
    if (rhs.replicated() && rhsRank == 2 && lhs.dim != lhsK &&
        (lhs.dim < lhsRank - 2 || lhs.dim == lhsM)) {
      int64_t dim = lhs.dim < lhsRank - 2 ? lhs.dim : resultRank - 2;
      return assign(matmul.getResult(), Split::along(dim, lhs.axes, lhs.parts),
                    matmul);
    }
    return noRule(matmul);
  }

  /// `value` through one mf.replicate over `axes` (shared by all the
  /// column-parallel matmuls that read it: q, k and v read one).
  Value replicated(Value value, ArrayRef<int16_t> axes) {
    if (auto existing = value.getDefiningOp<ReplicateOp>()) {
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

  /// A slice that keeps the split dimension whole keeps the split; one
  /// that takes exactly one part of a split in parts (q of the fused q, k,
  /// v) is that part's split: the rank's share of it, at the part's offset
  /// in the rank's block.
  LogicalResult visitSlice(SliceOp slice) {
    const Split input = splitOf(slice.getInput());
    if (input.partial) {
      return noRule(slice);
    }
    RankedTensorType from = slice.getInput().getType();
    int64_t whole = from.getShape()[input.dim] * ways(input.axes);
    int64_t taken = slice.getType().getShape()[input.dim];
    int64_t offset = slice.getOffsets()[input.dim];
    if (taken == whole && offset == 0) {
      return assign(slice.getResult(), input, slice);
    }
    int64_t part = whole / input.parts;
    if (input.parts == 1 || taken != part || offset % part != 0) {
      return noRule(slice);
    }
    SmallVector<int64_t> offsets(slice.getOffsets());
    offsets[input.dim] = offset / part * from.getShape()[input.dim] / input.parts;
    slice.setOffsets(offsets);
    return assign(slice.getResult(), Split::along(input.dim, input.axes), slice);
  }

  /// A splat constant `value` of `split`'s block type on this rank (a
  /// splat is the same on every rank), or null for any other value.
  Value splatBlock(Value value, const Split &split) {
    auto constant = value.getDefiningOp<ConstantOp>();
    auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue())
                          : SplatElementsAttr();
    if (!splat) {
      return Value();
    }
    auto whole = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(whole.getShape());
    shape[split.dim] /= ways(split.axes);
    OpBuilder builder(value.getContext());
    builder.setInsertionPointAfterValue(value);
    return ConstantOp::create(builder, value.getLoc(),
                              splat.resizeSplat(whole.clone(shape)));
  }

  /// `value`, replicated, as `split`'s block on this rank (mf.scatter, no
  /// communication; its gradient all-gathers).
  Value scattered(Value value, const Split &split) {
    OpBuilder builder(value.getContext());
    builder.setInsertionPointAfterValue(value);
    auto whole = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(whole.getShape());
    shape[split.dim] /= ways(split.axes);
    auto scatter = ScatterOp::create(builder, value.getLoc(), whole.clone(shape),
                                     value, grid_.getSymName(),
                                     builder.getDenseI16ArrayAttr(split.axes),
                                     split.dim);
    splits_[scatter.getResult()] = split;
    return scatter;
  }

  /// A split moves to the result dimension with the same outer extent (the
  /// product of the dimensions before it): [B, S, H*D] split along H*D is
  /// [B, S, H, D] split along H, when H (and H*D) divide by the ranks.
  LogicalResult visitReshape(ReshapeOp reshape) {
    const Split input = splitOf(reshape.getInput());
    if (input.partial || input.parts > 1) {
      return noRule(reshape);
    }
    ArrayRef<int64_t> from = reshape.getInput().getType().getShape();
    ArrayRef<int64_t> to = reshape.getResult().getType().getShape();
    int64_t n = ways(input.axes);
    // Per rank the input's split dimension is already divided: the global
    // extent is n times larger.
    int64_t outer = 1;
    for (int64_t d = 0; d < input.dim; ++d) {
      outer *= from[d];
    }
    int64_t resultOuter = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(to.size()); ++d) {
      if (resultOuter == outer && to[d] % n == 0 && to[d] > 1) {
        return assign(reshape.getResult(), Split::along(d, input.axes), reshape);
      }
      resultOuter *= to[d];
    }
    return noRule(reshape);
  }

  /// A bias broadcast to the rows of a split matmul result.
  LogicalResult visitBroadcast(BroadcastOp broadcast) {
    const Split input = splitOf(broadcast.getInput());
    ArrayRef<int64_t> from = broadcast.getInput().getType().getShape();
    ArrayRef<int64_t> to = broadcast.getResult().getType().getShape();
    int64_t dim = input.dim + static_cast<int64_t>(to.size() - from.size());
    if (input.partial || to[dim] != from[input.dim] * ways(input.axes)) {
      return noRule(broadcast);
    }
    return assign(broadcast.getResult(),
                  Split::along(dim, input.axes, input.parts), broadcast);
  }

  /// The cache holds the rank's KV heads: a cache that is an entry argument
  /// takes the split of what is written into it.
  LogicalResult visitKvCacheWrite(KvCacheWriteOp write) {
    const Split update = splitOf(write.getUpdate());
    Value cache = write.getCache();
    if (update.dim != 2 || !splitOf(write.getPosition()).replicated()) {
      return noRule(write);
    }
    if (splitOf(cache).replicated() && isa<BlockArgument>(cache)) {
      if (failed(assign(cache, update, write))) {
        return failure();
      }
    }
    if (splitOf(cache) != update) {
      return noRule(write);
    }
    return assign(write.getResult(), update, write);
  }

  shard::GridOp grid_;
  bool sequenceParallel_ = false, sequenceSplit_ = false;
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
