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
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
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
  return isa<BroadcastOp>(op) ||
         (op->hasTrait<OpTrait::Elementwise>() && op->getNumResults() == 1 &&
          op->getDialect() && isa<MFDialect>(op->getDialect()));
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

/// The values a group reads from outside and those it must return.
struct Boundary {
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Value> results;
};

Boundary boundaryOf(const Group &group) {
  Boundary boundary;
  for (Operation *op : group.ops) {
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || !group.members.contains(producer)) {
        boundary.inputs.insert(operand);
      }
    }
    for (Value result : op->getResults()) {
      for (Operation *user : result.getUsers()) {
        if (!group.members.contains(user)) {
          boundary.results.insert(result);
          break;
        }
      }
    }
  }
  return boundary;
}

int64_t bytesOf(ValueRange values) {
  int64_t bytes = 0;
  for (Value value : values) {
    auto type = cast<RankedTensorType>(value.getType());
    bytes += type.getNumElements() *
             std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  }
  return bytes;
}

/// Fusing pays when the group's boundary moves fewer bytes than its ops do
/// one by one.
bool fusionPays(const Group &group, const Boundary &boundary) {
  int64_t separate = 0;
  for (Operation *op : group.ops) {
    if (auto cost = dyn_cast<CostOpInterface>(op)) {
      separate += cost.getBytesAccessed();
    }
  }
  int64_t fused = bytesOf(boundary.inputs.getArrayRef()) +
                  bytesOf(boundary.results.getArrayRef());
  return fused < separate;
}

void outline(const Group &group, const Boundary &boundary) {
  Operation *last = group.ops.back();
  OpBuilder builder(last);
  SmallVector<Type> resultTypes;
  for (Value result : boundary.results) {
    resultTypes.push_back(result.getType());
  }
  SmallVector<Value> inputs(boundary.inputs.begin(), boundary.inputs.end());
  auto fusion = FusionOp::create(builder, last->getLoc(), resultTypes, inputs,
                                 builder.getStringAttr("elementwise"));
  Block *body = builder.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs) {
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  }
  for (Operation *op : group.ops) {
    builder.clone(*op, mapping);
  }
  SmallVector<Value> yielded;
  for (Value result : boundary.results) {
    yielded.push_back(mapping.lookup(result));
  }
  YieldOp::create(builder, last->getLoc(), yielded);
  for (auto [index, result] : llvm::enumerate(boundary.results)) {
    Value original = result;
    original.replaceAllUsesWith(fusion.getResult(index));
  }
  for (Operation *op : llvm::reverse(group.ops)) {
    op->erase();
  }
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
      Boundary boundary = boundaryOf(group);
      if (!fusionPays(group, boundary)) {
        LLVM_DEBUG(llvm::dbgs() << "not fusing a group of " << group.ops.size()
                                << " ops: no bytes saved\n");
        continue;
      }
      outline(group, boundary);
    }
  }
};

} // namespace
