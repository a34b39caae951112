//===- FuseMatmulEpilogue.cpp - matmuls into their consumers --------------===//
//
// 1. Find consumers: elementwise ops and elementwise fusions.
// 2. Collect the matmuls among their producers whose only user is the
//    consumer (a matmul whose result is needed elsewhere must be stored).
// 3. Re-outline matmuls + consumer body as one "matmul_epilogue" region when
//    the cost model says it moves fewer bytes.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFFUSEMATMULEPILOGUEPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

#define DEBUG_TYPE "mf-fuse-matmul-epilogue"

using namespace mlir;
using namespace mlir::mf;

namespace {

bool isEpilogue(Operation *op) {
  if (auto fusion = dyn_cast<FusionOp>(op)) {
    return fusion.getKind() == FusionKind::elementwise;
  }
  return isElementwiseOp(op);
}

int64_t bytesOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

/// Whether moving `matmul` down to `consumer` keeps the peak memory: its
/// operands then stay alive until the consumer. That is free when nothing
/// that allocates runs in between, or when the operands are read there or
/// later anyway, or they are no larger than the result it no longer stores.
/// (A weight gradient fused into an optimizer update that waits for the
/// global norm would otherwise keep every layer's activations, recomputed or
/// not, alive to the end of train_step.)
bool movingKeepsMemory(MatmulOp matmul, Operation *consumer,
                       ArrayRef<Operation *> fused) {
  bool adjacent = true;
  for (Operation *op = matmul->getNextNode(); op && op != consumer;
       op = op->getNextNode()) {
    if (!isa<ParamOp, ConstantOp, ReshapeOp, DequantizeOp>(op) &&
        !llvm::is_contained(fused, op)) {
      adjacent = false;
      break;
    }
  }
  if (adjacent) {
    return true;
  }
  int64_t extended = 0;
  for (Value operand : matmul->getOperands()) {
    Operation *def = operand.getDefiningOp();
    // Entry inputs and weights live throughout; a dequantized weight (or
    // quantized rows) is computed in the region from them
    // (FusionUtils.cpp), never stored.
    if (!def || isa<ParamOp, ConstantOp, DequantizeOp>(def) ||
        quantizedRowsOf(operand)) {
      continue;
    }
    bool readLater = llvm::any_of(operand.getUsers(), [&](Operation *user) {
      Operation *at = consumer->getBlock()->findAncestorOpInBlock(*user);
      return at && at != matmul.getOperation() &&
             (at == consumer || consumer->isBeforeInBlock(at));
    });
    if (!readLater) {
      extended += bytesOf(operand);
    }
  }
  return extended <= bytesOf(matmul.getResult());
}

struct MFFuseMatmulEpiloguePass
    : mf::impl::MFFuseMatmulEpiloguePassBase<MFFuseMatmulEpiloguePass> {
  void runOnOperation() override {
    SmallVector<Operation *> consumers;
    for (Operation &op : getOperation().getBody().front()) {
      if (isEpilogue(&op)) {
        consumers.push_back(&op);
      }
    }
    for (Operation *consumer : consumers) {
      SmallVector<Operation *> matmuls;
      for (Value operand : consumer->getOperands()) {
        auto matmul = operand.getDefiningOp<MatmulOp>();
        if (matmul && matmul->hasOneUse() &&
            matmul->getBlock() == consumer->getBlock() &&
            !llvm::is_contained(matmuls, matmul.getOperation())) {
          matmuls.push_back(matmul);
        }
      }
      if (matmuls.empty()) {
        continue;
      }
      llvm::sort(matmuls, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      if (llvm::any_of(matmuls, [&](Operation *matmul) {
            return !movingKeepsMemory(cast<MatmulOp>(matmul), consumer, matmuls);
          })) {
        continue;
      }
      SmallVector<Operation *> ops(matmuls);
      if (auto fusion = dyn_cast<FusionOp>(consumer)) {
        ops.append(inlineFusion(fusion));
      } else {
        ops.push_back(consumer);
      }
      // The matmuls move down to the consumer: their operands are defined
      // before them, and their only user is the consumer, so this is legal.
      if (!fusionCost(ops).pays()) {
        continue;
      }
      outlineIntoFusion(ops, FusionKind::matmul_epilogue);
    }
  }
};

} // namespace
