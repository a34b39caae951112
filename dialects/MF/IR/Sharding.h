//===- Sharding.h - the ops' sharding rules and what they use ---*- C++ -*-===//
//
// mf-partition visits a function op by op; an op implementing
// ShardingOpInterface states, through a Partitioning, how a rank holds its
// result given how it holds the operands. The rules are in MFSharding.cpp,
// the pass (and what it tracks) in Transforms/Partition.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_DIALECTS_MF_IR_SHARDING_H
#define MFC_DIALECTS_MF_IR_SHARDING_H

#include "dialects/MF/IR/MFOps.h"

namespace mlir::mf {

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
  static Split partialSum(ArrayRef<int16_t> axes) {
    return Split{-1, SmallVector<int16_t>(axes), true, 1};
  }
};

/// The state of one function's partitioning, as the sharding rules see it.
class Partitioning {
public:
  /// Activations are [batch, seq, ...]: sequence parallelism splits
  /// dimension 1 over the model-parallel axis (1) of the grid.
  static constexpr int64_t kSequenceDim = 1;
  static constexpr int16_t kModelAxis = 1;

  virtual ~Partitioning() = default;

  virtual shard::GridOp grid() const = 0;
  /// How the rank holds `value` (whole, for a value not split so far).
  virtual Split splitOf(Value value) const = 0;
  /// Whether the function runs its tokens split along the sequence.
  virtual bool splitsSequence() const = 0;

  /// Records `split` for `value` and gives it its per-rank type; an error
  /// at `at` when the dimension does not divide.
  virtual LogicalResult assign(Value value, Split split, Operation *at) = 0;
  /// Records `split` for a value that already has its per-rank type (a
  /// collective's result).
  virtual void record(Value value, Split split) = 0;
  /// The error for operand splits a rule does not cover, naming them.
  virtual LogicalResult noRule(Operation *op) = 0;

  /// `value` through one mf.replicate over `axes`, shared by its readers
  /// (Megatron's f: its gradient is the all-reduce).
  virtual Value replicated(Value value, ArrayRef<int16_t> axes) = 0;
  /// `value`, held as `split`, all-gathered once (sequence parallelism's
  /// input of the column-parallel projections; logits an entry returns).
  virtual Value gathered(Value value, const Split &split) = 0;
  /// A replicated `value` as `split`'s block on this rank: a splat
  /// constant retyped, anything else through mf.scatter (no
  /// communication); null when `split` is in parts.
  virtual Value blockOf(Value value, const Split &split) = 0;

  /// The ranks along `axes`.
  int64_t ways(ArrayRef<int16_t> axes) const;
  /// Whether some operand of `op` is split or partial.
  bool anySplit(Operation *op) const;
  /// `whole` with its sequence split over `axes`.
  RankedTensorType sequenceBlock(RankedTensorType whole,
                                 ArrayRef<int16_t> axes) const;
  /// Completes `partial`, a sum over the ranks of `axes` (Megatron's g):
  /// an mf.all_reduce, or under sequence parallelism an mf.reduce_scatter
  /// that leaves each rank its tokens; its readers read that instead.
  LogicalResult sumPartial(Value partial, ArrayRef<int16_t> axes, Operation *at);
};

/// The rule of ops without ShardingOpInterface that are elementwise: the
/// operands' common split; replicated operands among split ones take the
/// rank's block (Partitioning::blockOf).
LogicalResult partitionElementwise(Operation *op, Partitioning &partitioning);

} // namespace mlir::mf

#endif // MFC_DIALECTS_MF_IR_SHARDING_H
