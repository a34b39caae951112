//===- ScheduleUpdates.cpp - each parameter's update as its gradient is done ===//
//
// mf-train-step appends the optimizer after the whole backward, so each
// gradient (or, once fusion puts a weight gradient's matmul into its update,
// the activations that matmul reads) stays live to the end of the step:
// recompute then shrinks forward_backward but not train_step.
//
// mf-train-step marks the ops it builds with `mf.update`: the parameter
// (a symbol) for the ops of that parameter's update, a unit for those
// several share (AdamW's per-step scalars, clipping, a data-parallel
// bucket's all-reduce); fusion marks a region as its members are marked.
// After fusion (whose regions sit at their last member, so a move before
// it could put a read of a parameter after its assignment again), this pass
// 1. moves each shared op up to just after its latest operand,
// 2. moves each parameter's ops, in their order, up to just after the
//    latest value they read from outside and every read of a parameter they
//    assign (a read sees the value at entry: mf.assign's contract),
// until nothing moves, then drops the marks. Nothing moves past another
// update op, so this ends. With clipping the scale depends on every
// gradient, so the updates stay after it; without, each runs as soon as its
// gradient exists.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFSCHEDULEUPDATESPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

/// Constants and parameter reads: they read nothing, so they can go
/// anywhere above their users.
bool isSource(Operation *op) { return op->getNumOperands() == 0; }

/// The latest op of `block` that defines one of `values` and is neither in
/// `skip` nor a source, or null when there is none.
Operation *latestDefinition(Block &block, ValueRange values,
                            const llvm::SetVector<Operation *> &skip) {
  Operation *latest = nullptr;
  for (Value value : values) {
    Operation *def = value.getDefiningOp();
    if (!def || def->getBlock() != &block || skip.contains(def) ||
        isSource(def)) {
      continue;
    }
    if (!latest || latest->isBeforeInBlock(def)) {
      latest = def;
    }
  }
  return latest;
}

/// Whether an op that is not an update and computes something (not a
/// constant or a parameter read) lies between `anchor` (the block's start
/// when null) and `op`: only then is moving up worth it.
bool workBetween(Operation *anchor, Operation *op,
                 const llvm::SetVector<Operation *> &updates) {
  Operation *at = anchor ? anchor->getNextNode() : &op->getBlock()->front();
  for (; at && at != op; at = at->getNextNode()) {
    if (!updates.contains(at) && !isSource(at)) {
      return true;
    }
  }
  return false;
}

/// Moves `ops` (in block order) to just after `anchor`, or to the block's
/// start when it is null, with the sources they read from below it.
void moveAfter(ArrayRef<Operation *> ops, Operation *anchor) {
  Block *block = ops.front()->getBlock();
  llvm::SetVector<Operation *> moving;
  for (Operation *op : ops) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && def->getBlock() == block && isSource(def) &&
          (!anchor || anchor->isBeforeInBlock(def)) &&
          !llvm::is_contained(ops, def)) {
        moving.insert(def);
      }
    }
    moving.insert(op);
  }
  for (Operation *op : moving) {
    if (anchor) {
      op->moveAfter(anchor);
    } else {
      op->moveBefore(&block->front());
    }
    anchor = op;
  }
}

/// The ops that read a parameter named in `names`: the users of its
/// mf.param reads and, through views (reshape) and recompute barriers, of
/// theirs.
SmallVector<Operation *> readersOf(Block &block, const llvm::StringSet<> &names) {
  SmallVector<Value> reads;
  for (Operation &op : block) {
    if (auto read = dyn_cast<ParamOp>(op); read && names.contains(read.getName())) {
      reads.push_back(read.getResult());
    }
  }
  SmallVector<Operation *> readers;
  for (size_t i = 0; i < reads.size(); ++i) {
    for (Operation *user : reads[i].getUsers()) {
      readers.push_back(user);
      if (isa<ReshapeOp, RecomputeBarrierOp>(user)) {
        reads.push_back(user->getResult(0));
      }
    }
  }
  return readers;
}

struct MFScheduleUpdatesPass
    : mf::impl::MFScheduleUpdatesPassBase<MFScheduleUpdatesPass> {
  void runOnOperation() override {
    Block &block = getOperation().getBody().front();
    llvm::SetVector<Operation *> updates, shared;
    llvm::MapVector<Attribute, SmallVector<Operation *>> byParameter;
    for (Operation &op : block) {
      Attribute mark = op.getAttr(kUpdateAttrName);
      if (!mark) {
        continue;
      }
      updates.insert(&op);
      if (isa<UnitAttr>(mark)) {
        shared.insert(&op);
      } else {
        byParameter[mark].push_back(&op);
      }
    }
    bool moved = !updates.empty();
    while (moved) {
      moved = false;
      for (Operation *op : shared) {
        Operation *anchor = latestDefinition(block, op->getOperands(), {});
        if (workBetween(anchor, op, updates)) {
          moveAfter(op, anchor);
          moved = true;
        }
      }
      for (auto &[parameter, ops] : byParameter) {
        moved |= placeGroup(block, ops, updates);
      }
    }
    getOperation().walk([](Operation *op) { op->removeAttr(kUpdateAttrName); });
  }

  /// Moves `group` (one parameter's update) up to after what it reads and
  /// what reads the parameters it assigns. Returns whether it moved.
  static bool placeGroup(Block &block, SmallVector<Operation *> &group,
                         const llvm::SetVector<Operation *> &updates) {
    llvm::sort(group, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    llvm::SetVector<Operation *> members(group.begin(), group.end());
    llvm::StringSet<> assigned;
    SmallVector<Value> needed;
    for (Operation *op : group) {
      llvm::append_range(needed, op->getOperands());
      if (auto assign = dyn_cast<AssignOp>(op)) {
        assigned.insert(assign.getName());
      }
    }
    Operation *anchor = latestDefinition(block, needed, members);
    for (Operation *reader : readersOf(block, assigned)) {
      if (!members.contains(reader) &&
          (!anchor || anchor->isBeforeInBlock(reader))) {
        anchor = reader;
      }
    }
    // Members already above the anchor stay; the rest follow it.
    ArrayRef<Operation *> tail = group;
    while (anchor && !tail.empty() && tail.front()->isBeforeInBlock(anchor)) {
      tail = tail.drop_front();
    }
    if (tail.empty() || !workBetween(anchor, tail.back(), updates)) {
      return false;
    }
    moveAfter(tail, anchor);
    return true;
  }
};

} // namespace
