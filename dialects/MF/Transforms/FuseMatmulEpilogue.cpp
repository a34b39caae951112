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
    return fusion.getKind() == "elementwise";
  }
  return isElementwiseOp(op);
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
      outlineIntoFusion(ops, "matmul_epilogue");
    }
  }
};

} // namespace
