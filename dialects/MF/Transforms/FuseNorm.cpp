//===- FuseNorm.cpp - row reductions with their elementwise neighbours ----===//
//
// 1. Seeds: RMSNorm, LayerNorm and a softmax over the last dimension, each
//    a reduction along rows followed by an elementwise use of its result.
// 2. Producers: the elementwise ops of the seed's shape that compute its
//    input and are read by nothing else, transitively (casts up to f32 in a
//    16-bit model, a residual add read only here).
// 3. Consumers: while the last value has exactly one user, an elementwise
//    op of the same shape (the cast back to f16, a scale).
// 4. Outline as a "norm" region when the cost model says it moves fewer
//    bytes: its kernel keeps a block of rows in cache from the producers to
//    the consumers. An RMSNorm or LayerNorm alone (its producer is a
//    matmul's residual epilogue, as in every LLaMA layer) is a region too:
//    it moves the same bytes either way, but in Graph Mode a kernel
//    dispatch costs less host work than the runtime's eager op (llama-tiny
//    decode, four lone norms a token: 47.7-51.3K -> 51.5-53.8K tokens/s).
//    A softmax alone stays the runtime's op.
//
// Runs before mf-fuse-elementwise, which would otherwise take the casts
// into the producers' and consumers' groups.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFFUSENORMPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

#define DEBUG_TYPE "mf-fuse-norm"

using namespace mlir;
using namespace mlir::mf;

namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// A reduction along the last dimension followed by elementwise work.
bool isRowNorm(Operation *op) {
  if (isa<RmsNormOp, LayerNormOp>(op)) {
    return true;
  }
  auto softmax = dyn_cast<SoftmaxOp>(op);
  return softmax &&
         static_cast<int64_t>(softmax.getDimension()) + 1 ==
             static_cast<int64_t>(shapeOf(softmax.getResult()).size());
}

/// An elementwise op of `shape` in `block` whose only user is `user`.
bool isSoleProducer(Operation *op, Operation *user, ArrayRef<int64_t> shape) {
  return op && isElementwiseOp(op) && op->getBlock() == user->getBlock() &&
         op->hasOneUse() && *op->getUsers().begin() == user &&
         shapeOf(op->getResult(0)) == shape;
}

SmallVector<Operation *> normGroup(Operation *norm) {
  ArrayRef<int64_t> shape = shapeOf(norm->getResult(0));
  llvm::SetVector<Operation *> group;
  group.insert(norm);
  // Producers of the normalized input, depth first.
  SmallVector<Operation *> work{norm};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    // The norm's weights are rows, not producers: only its input.
    auto operands =
        op == norm ? op->getOperands().take_front(1) : op->getOperands();
    for (Value operand : operands) {
      Operation *producer = operand.getDefiningOp();
      if (isSoleProducer(producer, op, shape) && group.insert(producer)) {
        work.push_back(producer);
      }
    }
  }
  // Consumers: a chain of sole users.
  Operation *last = norm;
  while (last->hasOneUse()) {
    Operation *user = *last->getUsers().begin();
    if (!isElementwiseOp(user) || user->getBlock() != norm->getBlock() ||
        shapeOf(user->getResult(0)) != shape) {
      break;
    }
    group.insert(user);
    last = user;
  }
  SmallVector<Operation *> ops = group.takeVector();
  llvm::sort(ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ops;
}

struct MFFuseNormPass : mf::impl::MFFuseNormPassBase<MFFuseNormPass> {
  void runOnOperation() override {
    SmallVector<Operation *> norms;
    for (Operation &op : getOperation().getBody().front()) {
      if (isRowNorm(&op)) {
        norms.push_back(&op);
      }
    }
    for (Operation *norm : norms) {
      SmallVector<Operation *> group = normGroup(norm);
      bool outline = group.size() > 1 ? fusionCost(group).pays()
                                      : isa<RmsNormOp, LayerNormOp>(norm);
      if (outline) {
        outlineIntoFusion(group, FusionKind::norm);
      }
    }
  }
};

} // namespace
