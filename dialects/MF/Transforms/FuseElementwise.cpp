//===- FuseElementwise.cpp - group elementwise chains ---------------------===//
//
// 1. Walk the entry's ops in order. A fusible op (Elementwise, or a
//    broadcast) joins the group of one of its producers if no value of that
//    group is used, before this op, by an op outside the group (so the group
//    can sit where its last op is); otherwise it starts a group.
// 2. A group of two or more ops is outlined into an mf.fusion when the cost
//    model says fusing moves fewer bytes.
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

bool isFusible(Operation *op) {
  return isa<BroadcastOp>(op) || isElementwiseOp(op);
}

struct Group {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 8> members;
};

/// True if no value of `group` is used by an op outside it that comes
/// before `op`: then the group can be placed at `op`.
bool canJoin(const Group &group, Operation *op) {
  for (Operation *member : group.ops) {
    for (Operation *user : member->getUsers()) {
      if (user != op && !group.members.contains(user) &&
          user->isBeforeInBlock(op)) {
        return false;
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
        std::optional<size_t> chosen;
        for (Value operand : op.getOperands()) {
          Operation *producer = operand.getDefiningOp();
          auto it = producer ? groupOf.find(producer) : groupOf.end();
          if (it != groupOf.end() && canJoin(groups[it->second], &op)) {
            chosen = it->second;
            break;
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
      if (group.ops.size() < 2) {
        continue;
      }
      if (!fusionCost(group.ops).pays()) {
        LLVM_DEBUG(llvm::dbgs() << "not fusing a group of " << group.ops.size()
                                << " ops: no bytes saved\n");
        continue;
      }
      outlineIntoFusion(group.ops, "elementwise");
    }
  }
};

} // namespace
