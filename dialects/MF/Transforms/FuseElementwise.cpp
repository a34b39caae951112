//===- FuseElementwise.cpp - group elementwise chains ---------------------===//
//
// 1. Walk the entry's ops in order. An elementwise op joins the groups of
//    its producers that compute values of its shape (one kernel iterates
//    one shape), merging them, if no value of those groups is used, before
//    this op, by an op outside them (so the group can sit where its last op
//    is); failing that, the first such group that can take it alone; else
//    it starts a group. Broadcasts and splat constants join no group: each
//    region that reads one computes it itself (FusionUtils).
// 2. A group of two or more ops, or one op reading a broadcast, is outlined
//    into an mf.fusion when the cost model says fusing moves fewer bytes.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFFUSEELEMENTWISEPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

#define DEBUG_TYPE "mf-fuse-elementwise"

using namespace mlir;
using namespace mlir::mf;

namespace {

bool isFusible(Operation *op) { return isElementwiseOp(op); }

struct Group {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 8> members;
};

ArrayRef<int64_t> shapeOf(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
}

/// Moves the ops of `from` into `into` (number `intoIndex`), keeping
/// program order; `from` is left empty.
void merge(Group &into, Group &from, llvm::DenseMap<Operation *, size_t> &groupOf,
           size_t intoIndex) {
  for (Operation *op : from.ops) {
    groupOf[op] = intoIndex;
    into.members.insert(op);
  }
  into.ops.append(from.ops.begin(), from.ops.end());
  llvm::sort(into.ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  from.ops.clear();
  from.members.clear();
}

/// True if no value of `groups` is used by an op outside them that comes
/// before `op`: then their union can be placed at `op`.
bool canJoin(ArrayRef<const Group *> groups, Operation *op) {
  auto isMember = [&](Operation *user) {
    return llvm::any_of(groups, [&](const Group *group) {
      return group->members.contains(user);
    });
  };
  for (const Group *group : groups) {
    for (Operation *member : group->ops) {
      for (Operation *user : member->getUsers()) {
        if (user != op && !isMember(user) && user->isBeforeInBlock(op)) {
          return false;
        }
      }
    }
  }
  return true;
}

struct MFFuseElementwisePass
    : mf::impl::MFFuseElementwisePassBase<MFFuseElementwisePass> {
  void runOnOperation() override {
    std::vector<Group> groups;
    llvm::DenseMap<Operation *, size_t> groupOf;
    for (Block &block : getOperation().getBody()) {
      for (Operation &op : block) {
        if (!isFusible(&op)) {
          continue;
        }
        // The producer groups of this op's shape, in first-operand order.
        SmallVector<size_t> candidates;
        for (Value operand : op.getOperands()) {
          Operation *producer = operand.getDefiningOp();
          auto it = producer ? groupOf.find(producer) : groupOf.end();
          if (it != groupOf.end() && !groups[it->second].ops.empty() &&
              shapeOf(groups[it->second].ops.front()) == shapeOf(&op) &&
              !llvm::is_contained(candidates, it->second)) {
            candidates.push_back(it->second);
          }
        }
        SmallVector<const Group *> all;
        for (size_t index : candidates) {
          all.push_back(&groups[index]);
        }
        std::optional<size_t> chosen;
        if (!candidates.empty() && canJoin(all, &op)) {
          chosen = candidates.front();
          for (size_t index : ArrayRef(candidates).drop_front()) {
            merge(groups[*chosen], groups[index], groupOf, *chosen);
          }
        } else {
          for (size_t index : candidates) {
            if (canJoin({&groups[index]}, &op)) {
              chosen = index;
              break;
            }
          }
        }
        if (!chosen) {
          chosen = groups.size();
          groups.emplace_back();
        }
        groups[*chosen].ops.push_back(&op);
        groups[*chosen].members.insert(&op);
        groupOf[&op] = *chosen;
      }
    }
    for (const Group &group : groups) {
      if (group.ops.empty() ||
          (group.ops.size() == 1 && !readsBroadcast(group.ops.front()))) {
        continue;
      }
      if (!fusionCost(group.ops).pays()) {
        LLVM_DEBUG(llvm::dbgs() << "not fusing a group of " << group.ops.size()
                                << " ops: no bytes saved\n");
        continue;
      }
      outlineIntoFusion(group.ops, FusionKind::elementwise);
    }
  }
};

} // namespace
