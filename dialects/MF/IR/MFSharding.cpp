//===- MFSharding.cpp - the sharding rules of mf ops ----------------------===//
//
// One rule per op (ShardingOpInterface), for Megatron-LM's layouts: column-
// and row-parallel matmuls, attention by heads, sequence parallelism
// (Korthikanti et al. 2022) and vocabulary parallelism. mf-partition calls
// them in program order; Sharding.h says what a Partitioning offers.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/Sharding.h"

using namespace mlir;
using namespace mlir::mf;

//===----------------------------------------------------------------------===//
// Partitioning helpers
//===----------------------------------------------------------------------===//

int64_t Partitioning::ways(ArrayRef<int16_t> axes) const {
  int64_t product = 1;
  for (int16_t axis : axes) {
    product *= grid().getShape()[axis];
  }
  return product;
}

bool Partitioning::anySplit(Operation *op) const {
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    return !splitOf(operand).replicated();
  });
}

RankedTensorType Partitioning::sequenceBlock(RankedTensorType whole,
                                             ArrayRef<int16_t> axes) const {
  SmallVector<int64_t> shape(whole.getShape());
  shape[kSequenceDim] /= ways(axes);
  return whole.clone(shape);
}

LogicalResult Partitioning::sumPartial(Value partial, ArrayRef<int16_t> axes,
                                       Operation *at) {
  OpBuilder builder(partial.getContext());
  builder.setInsertionPointAfterValue(partial);
  auto type = cast<RankedTensorType>(partial.getType());
  auto gridName = grid().getSymName();
  auto axesAttr = builder.getDenseI16ArrayAttr(axes);
  Operation *sum;
  if (splitsSequence()) {
    sum = ReduceScatterOp::create(builder, partial.getLoc(),
                                  sequenceBlock(type, axes), partial, gridName,
                                  axesAttr, kSequenceDim);
    record(sum->getResult(0), Split::along(kSequenceDim, axes));
  } else {
    sum = AllReduceOp::create(builder, partial.getLoc(), partial, gridName,
                              axesAttr);
  }
  partial.replaceAllUsesExcept(sum->getResult(0), sum);
  return assign(partial, Split::partialSum(axes), at);
}

LogicalResult mlir::mf::partitionElementwise(Operation *op,
                                             Partitioning &partitioning) {
  Split first;
  for (Value operand : op->getOperands()) {
    if (!partitioning.splitOf(operand).replicated()) {
      first = partitioning.splitOf(operand);
      break;
    }
  }
  for (OpOperand &operand : op->getOpOperands()) {
    const Split split = partitioning.splitOf(operand.get());
    if (split.replicated() && !first.partial) {
      if (Value block = partitioning.blockOf(operand.get(), first)) {
        operand.set(block);
        continue;
      }
    }
    if (split != first || first.partial) {
      return partitioning.noRule(op);
    }
  }
  for (Value result : op->getResults()) {
    if (failed(partitioning.assign(result, first, op))) {
      return failure();
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

namespace {

/// Marks a lookup or loss as vocabulary parallel over `axes`.
template <typename OpT>
void setVocabularySplit(OpT op, Partitioning &p, ArrayRef<int16_t> axes) {
  OpBuilder builder(op->getContext());
  op.setGridAttr(FlatSymbolRefAttr::get(p.grid().getSymNameAttr()));
  op.setGridAxesAttr(builder.getDenseI16ArrayAttr(axes));
}

/// RMSNorm and LayerNorm under sequence parallelism: the norm of the rank's
/// tokens. The weight (and bias) go through mf.replicate: each rank's
/// gradient of them is the part from its tokens.
LogicalResult partitionNorm(Operation *norm, Partitioning &p) {
  if (!p.anySplit(norm)) {
    return success();
  }
  Value input = norm->getOperand(0);
  const Split split = p.splitOf(input);
  int64_t last = cast<RankedTensorType>(input.getType()).getRank() - 1;
  if (split.replicated() || split.partial || split.dim == last) {
    return p.noRule(norm);
  }
  for (OpOperand &operand : llvm::drop_begin(norm->getOpOperands())) {
    if (!p.splitOf(operand.get()).replicated()) {
      return p.noRule(norm);
    }
    operand.set(p.replicated(operand.get(), split.axes));
  }
  return p.assign(norm->getResult(0), split, norm);
}

} // namespace

LogicalResult MatmulOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split lhs = p.splitOf(getLhs());
  const Split rhs = p.splitOf(getRhs());
  int64_t lhsRank = getLhs().getType().getRank();
  int64_t rhsRank = getRhs().getType().getRank();
  int64_t resultRank = getType().getRank();
  int64_t lhsK = getTransposeLhs() ? lhsRank - 2 : lhsRank - 1;
  int64_t lhsM = getTransposeLhs() ? lhsRank - 1 : lhsRank - 2;
  int64_t rhsK = getTransposeRhs() ? rhsRank - 1 : rhsRank - 2;
  int64_t rhsN = getTransposeRhs() ? rhsRank - 2 : rhsRank - 1;
  if (lhs.partial || rhs.partial) {
    return p.noRule(*this);
  }
  // Sequence parallelism: the projections (and the lm_head) read the whole
  // sequence.
  if (p.splitsSequence() && !lhs.replicated() && lhs.dim != lhsK &&
      rhsRank == 2 && (rhs.replicated() || rhs.dim == rhsN)) {
    getLhsMutable().assign(p.gathered(getLhs(), lhs));
    return partition(p);
  }
  // Column parallel: a weight split along its output features. The input
  // goes through mf.replicate, so that its gradient is summed over the
  // ranks (each computes it from its block of the weight).
  if (lhs.replicated() && rhsRank == 2 && rhs.dim == rhsN) {
    getLhsMutable().assign(p.replicated(getLhs(), rhs.axes));
    return p.assign(getResult(),
                    Split::along(resultRank - 1, rhs.axes, rhs.parts), *this);
  }
  // Row parallel: both split along the contracted dimension; each rank
  // holds a partial sum.
  if (lhs.dim == lhsK && rhs.dim == rhsK && lhs.axes == rhs.axes &&
      lhs.parts == 1 && rhs.parts == 1) {
    return p.sumPartial(getResult(), lhs.axes, *this);
  }
  // Rows (or a batch dimension) of the input split, the weight whole.
  if (rhs.replicated() && rhsRank == 2 && lhs.dim != lhsK &&
      (lhs.dim < lhsRank - 2 || lhs.dim == lhsM)) {
    int64_t dim = lhs.dim < lhsRank - 2 ? lhs.dim : resultRank - 2;
    return p.assign(getResult(), Split::along(dim, lhs.axes, lhs.parts),
                    *this);
  }
  return p.noRule(*this);
}

/// A split moves to the result dimension with the same outer extent (the
/// product of the dimensions before it): [B, S, H*D] split along H*D is
/// [B, S, H, D] split along H, when H (and H*D) divide by the ranks.
LogicalResult ReshapeOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split input = p.splitOf(getInput());
  if (input.partial || input.parts > 1) {
    return p.noRule(*this);
  }
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> to = getType().getShape();
  int64_t n = p.ways(input.axes);
  // Per rank the input's split dimension is already divided: the global
  // extent is n times larger.
  int64_t outer = 1;
  for (int64_t d = 0; d < input.dim; ++d) {
    outer *= from[d];
  }
  int64_t resultOuter = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(to.size()); ++d) {
    if (resultOuter == outer && to[d] % n == 0 && to[d] > 1) {
      return p.assign(getResult(), Split::along(d, input.axes), *this);
    }
    resultOuter *= to[d];
  }
  return p.noRule(*this);
}

/// A bias broadcast to the rows of a split matmul result.
LogicalResult BroadcastOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split input = p.splitOf(getInput());
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> to = getType().getShape();
  int64_t dim = input.dim + static_cast<int64_t>(to.size() - from.size());
  if (input.partial || to[dim] != from[input.dim] * p.ways(input.axes)) {
    return p.noRule(*this);
  }
  return p.assign(getResult(), Split::along(dim, input.axes, input.parts),
                  *this);
}

/// A quantized weight [N, K] splits as its float one: the values along N
/// (column parallel) or K (row parallel), each rank's scales beside them
/// (per-row scales [N] with N, whole with K; group scales [K / group, N]
/// with either). The result is the rank's block of the float weight.
/// Rows quantized per token ([..., M, K], scales [..., M]) split alike: a
/// row-parallel rank's scales are its own (mf.dynamic_quantize).
LogicalResult DequantizeOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split values = p.splitOf(getInput());
  const Split scales = p.splitOf(getScale());
  int64_t rank = getInput().getType().getRank();
  if (values.replicated() || values.partial ||
      (getGroupSize() > 0 && rank != 2)) {
    return p.noRule(*this);
  }
  // The scales' dimension that holds the values' split one (-1: none).
  int64_t scaleDim = getGroupSize() > 0      ? 1 - values.dim
                     : values.dim < rank - 1 ? values.dim
                                             : -1;
  Split expected = scaleDim < 0
                       ? Split()
                       : Split::along(scaleDim, values.axes, values.parts);
  if (scales != expected) {
    return p.noRule(*this);
  }
  return p.assign(getResult(), values, *this);
}

/// Rows quantized per token: split along the tokens' rows, each rank has
/// its rows' scales; along the channels (a row-parallel product's input),
/// each rank quantizes its block of every token with a scale of its own,
/// as golden-stick's DynamicQuantCell does on a row-parallel rank. The
/// scales then have every rank's shape but not its values: only the
/// mf.dequantize beside them reads them.
LogicalResult DynamicQuantizeOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split input = p.splitOf(getInput());
  if (input.partial) {
    return p.noRule(*this);
  }
  int64_t last = getInput().getType().getRank() - 1;
  if (input.dim < last && failed(p.assign(getScales(), input, *this))) {
    return failure();
  }
  return p.assign(getValues(), input, *this);
}

/// Rows quantized by static per-channel scales (SmoothQuant's, before a
/// row-parallel product): split along a channel dimension, each rank's
/// scales and zero points are its channels' (split alike); along another,
/// they are whole.
LogicalResult QuantizeOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split input = p.splitOf(getInput());
  if (input.replicated() || input.partial) {
    return p.noRule(*this);
  }
  int64_t firstChannel =
      getInput().getType().getRank() - getScale().getType().getRank();
  Split expected =
      input.dim >= firstChannel
          ? Split::along(input.dim - firstChannel, input.axes, input.parts)
          : Split();
  if (p.splitOf(getScale()) != expected ||
      (getZeroPoint() && p.splitOf(getZeroPoint()) != expected)) {
    return p.noRule(*this);
  }
  return p.assign(getResult(), input, *this);
}

/// A slice that keeps the split dimension whole keeps the split; one that
/// takes exactly one part of a split in parts (q of the fused q, k, v) is
/// that part's split: the rank's share, at the part's offset in its block.
LogicalResult SliceOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split input = p.splitOf(getInput());
  if (input.partial) {
    return p.noRule(*this);
  }
  RankedTensorType from = getInput().getType();
  int64_t whole = from.getShape()[input.dim] * p.ways(input.axes);
  int64_t taken = getType().getShape()[input.dim];
  int64_t offset = getOffsets()[input.dim];
  if (taken == whole && offset == 0) {
    return p.assign(getResult(), input, *this);
  }
  int64_t part = whole / input.parts;
  if (input.parts == 1 || taken != part || offset % part != 0) {
    return p.noRule(*this);
  }
  SmallVector<int64_t> offsets(getOffsets());
  offsets[input.dim] = offset / part * from.getShape()[input.dim] / input.parts;
  setOffsets(offsets);
  return p.assign(getResult(), Split::along(input.dim, input.axes), *this);
}

/// Rotation within each head: heads (or tokens) may be split, not the head
/// dimension.
LogicalResult RopeOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split input = p.splitOf(getInput());
  int64_t headDim = getInput().getType().getRank() - 1;
  if (!p.splitOf(getPositions()).replicated() || input.partial ||
      input.dim == headDim) {
    return p.noRule(*this);
  }
  return p.assign(getResult(), input, *this);
}

/// Query, key and value split by heads (dimension 2, of a paged pool too)
/// the same way: each rank attends with its heads (and its KV heads).
LogicalResult AttentionOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split query = p.splitOf(getQuery());
  // An int8 cache's scales [kv_heads, head_dim] are the rank's heads'.
  auto headsOf = [&](Value scales) {
    return !scales || p.splitOf(scales) == Split::along(0, query.axes);
  };
  if (query.dim != 2 || query.partial || p.splitOf(getKey()) != query ||
      p.splitOf(getValue()) != query || !headsOf(getKeyScale()) ||
      !headsOf(getValueScale()) ||
      (getPastLength() && !p.splitOf(getPastLength()).replicated()) ||
      (getBlockTable() && !p.splitOf(getBlockTable()).replicated())) {
    return p.noRule(*this);
  }
  return p.assign(getResult(), query, *this);
}

/// The cache (or a paged cache's pool: heads are dimension 2 of both) holds
/// the rank's KV heads: a cache that is an entry argument takes the split
/// of what is written into it; block tables are every rank's.
LogicalResult KvCacheWriteOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split update = p.splitOf(getUpdate());
  Value cache = getCache();
  if (update.dim != 2 || update.partial ||
      !p.splitOf(getPosition()).replicated() ||
      (getBlockTable() && !p.splitOf(getBlockTable()).replicated())) {
    return p.noRule(*this);
  }
  if (p.splitOf(cache).replicated() && isa<BlockArgument>(cache) &&
      failed(p.assign(cache, update, *this))) {
    return failure();
  }
  if (p.splitOf(cache) != update) {
    return p.noRule(*this);
  }
  return p.assign(getResult(), update, *this);
}

/// The token embedding: a vocabulary-parallel table (rows split) gives
/// partial sums, completed by an all-reduce (a reduce-scatter under
/// sequence parallelism); a replicated lookup under sequence parallelism
/// keeps the rank's tokens (mf.scatter, no communication).
LogicalResult EmbeddingOp::partition(Partitioning &p) {
  const Split table = p.splitOf(getTable());
  const Split ids = p.splitOf(getIds());
  if (table.partial || ids.partial ||
      (!table.replicated() && (table.dim != 0 || !ids.replicated()))) {
    return p.noRule(*this);
  }
  if (!ids.replicated()) {
    return p.assign(getResult(), ids, *this);
  }
  if (!table.replicated()) {
    setVocabularySplit(*this, p, table.axes);
    return p.sumPartial(getResult(), table.axes, *this);
  }
  if (!p.splitsSequence()) {
    return success();
  }
  Value block = p.blockOf(getResult(),
                          Split::along(Partitioning::kSequenceDim,
                                       {Partitioning::kModelAxis}));
  getResult().replaceAllUsesExcept(block, block.getDefiningOp());
  return success();
}

/// Megatron's vocab-parallel cross-entropy: each rank holds a block of the
/// vocabulary; the loss is whole on every rank.
LogicalResult CrossEntropyOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split logits = p.splitOf(getLogits());
  if (logits.partial || logits.dim != 1 || logits.parts > 1 ||
      !p.splitOf(getLabels()).replicated()) {
    return p.noRule(*this);
  }
  setVocabularySplit(*this, p, logits.axes);
  return success();
}

LogicalResult RmsNormOp::partition(Partitioning &p) {
  return partitionNorm(*this, p);
}

LogicalResult LayerNormOp::partition(Partitioning &p) {
  return partitionNorm(*this, p);
}

/// An all-reduce completes the partial sum over its axes.
LogicalResult AllReduceOp::partition(Partitioning &p) {
  const Split input = p.splitOf(getInput());
  if (input.replicated()) {
    return success();
  }
  if (!input.partial || ArrayRef<int16_t>(input.axes) != getGridAxes()) {
    return p.noRule(*this);
  }
  return success(); // replicated
}

/// An op that acts on every block alike along another dimension than its
/// input's split: its result is split as the input is (not a partial sum,
/// nor a split in parts).
static LogicalResult splitLikeInput(Operation *op, Value input,
                                    Partitioning &p) {
  const Split split = p.splitOf(input);
  if (split.partial || split.parts > 1) {
    return p.noRule(op);
  }
  return p.assign(op->getResult(0), split, op);
}

// The collectives mf-partition makes record their results' splits.
// What mf-partition gathers is per rank already. A gather the frontend
// built (context parallelism's keys, along the sequence) of a value that
// tensor parallelism splits along another dimension (the heads) gathers
// each rank's block: the result is split as the input is.
LogicalResult AllGatherOp::partition(Partitioning &p) {
  const Split input = p.splitOf(getInput());
  if (input.replicated() || input.dim == getDimension()) {
    return success();
  }
  return splitLikeInput(*this, getInput(), p);
}
LogicalResult ReduceScatterOp::partition(Partitioning &) { return success(); }
LogicalResult ScatterOp::partition(Partitioning &) { return success(); }
/// Inputs split alike along another dimension than the one joined (context
/// parallelism's runs of positions, heads split): the result is split so.
LogicalResult ConcatOp::partition(Partitioning &p) {
  if (!p.anySplit(*this)) {
    return success();
  }
  const Split first = p.splitOf(getInputs().front());
  if (first.partial || first.parts > 1 ||
      first.dim == static_cast<int64_t>(getDimension()) ||
      llvm::any_of(getInputs(),
                   [&](Value input) { return p.splitOf(input) != first; })) {
    return p.noRule(*this);
  }
  return p.assign(getResult(), first, *this);
}

/// A replicate the frontend built (context parallelism's gathered keys)
/// over a value split along other axes: the identity, split alike.
LogicalResult ReplicateOp::partition(Partitioning &p) {
  return p.anySplit(*this) ? splitLikeInput(*this, getInput(), p) : success();
}

/// Context parallelism's exchange of a tensor-parallel rank's heads: the
/// model-parallel split stays where it is (each rank trades its block of
/// the heads it holds), so the result is split as the input is.
LogicalResult AllToAllDimsOp::partition(Partitioning &p) {
  return p.anySplit(*this) ? splitLikeInput(*this, getInput(), p) : success();
}

// Expert parallelism: a stacked expert weight split along its experts
// (dimension 0) holds this rank's experts; the rows are the ones the ranks
// sent them (mf.all_to_all), in groups of the local experts, so the result
// is whole. Tensor parallelism: every expert split by width. Every other
// split is refused.
LogicalResult GroupedMatmulOp::partition(Partitioning &partitioning) {
  if (!partitioning.anySplit(*this)) {
    return success();
  }
  const Split rows = partitioning.splitOf(getRows());
  const Split offsets = partitioning.splitOf(getOffsets());
  const Split weight = partitioning.splitOf(getWeights().front());
  if (!offsets.replicated() || rows.partial || weight.partial ||
      weight.parts != 1 || llvm::any_of(getWeights(), [&](Value other) {
        return partitioning.splitOf(other) != weight;
      })) {
    return partitioning.noRule(*this);
  }
  bool stacked =
      getWeights().size() == 1 &&
      cast<RankedTensorType>(getWeights().front().getType()).getRank() == 3;
  if (stacked) {
    return rows.replicated() && weight.dim == 0 ? success()
                                                : partitioning.noRule(*this);
  }
  // Tensor parallelism inside each expert (every expert's weight split
  // alike), as a Linear's: column parallel, the rows through mf.replicate
  // so that their gradient sums the ranks'; row parallel, a partial sum.
  int64_t outDim = getTransposeRhs() ? 0 : 1, inDim = 1 - outDim;
  if (rows.replicated() && weight.dim == outDim) {
    getRowsMutable().assign(partitioning.replicated(getRows(), weight.axes));
    return partitioning.assign(getResult(), Split::along(1, weight.axes),
                               *this);
  }
  if (rows.dim == 1 && weight.dim == inDim && rows.axes == weight.axes &&
      rows.parts == 1) {
    // Partial sums that mf.moe_combine sums: its weighted sum is linear,
    // so one all-reduce of its [tokens, h] result completes them, k times
    // fewer rows than the [tokens k, h] here.
    bool combined = llvm::all_of(getResult().getUsers(), [&](Operation *user) {
      auto combine = dyn_cast<MoeCombineOp>(user);
      return combine && combine.getRows() == getResult();
    });
    if (combined) {
      partitioning.record(getResult(), Split::partialSum(rows.axes));
      return success();
    }
    return partitioning.sumPartial(getResult(), rows.axes, *this);
  }
  return partitioning.noRule(*this);
}

// Rows that are partial sums over ranks (a row-parallel expert projection)
// give a partial sum: the combine is linear in them. The routing weights'
// gradient is then a dot product with partial rows: they go through
// mf.replicate, whose gradient sums it over the ranks.
LogicalResult MoeCombineOp::partition(Partitioning &partitioning) {
  if (!partitioning.anySplit(*this)) {
    return success();
  }
  const Split rows = partitioning.splitOf(getRows());
  if (!rows.partial || !partitioning.splitOf(getPositions()).replicated() ||
      !partitioning.splitOf(getWeights()).replicated()) {
    return partitioning.noRule(*this);
  }
  getWeightsMutable().assign(partitioning.replicated(getWeights(), rows.axes));
  return partitioning.sumPartial(getResult(), rows.axes, *this);
}
