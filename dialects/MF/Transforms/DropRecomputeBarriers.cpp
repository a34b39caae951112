//===- DropRecomputeBarriers.cpp - barriers out once fusion is done -------===//
//
// mf.recompute_barrier keeps CSE and folding from merging a recomputed clone
// with its original (Recompute.cpp). After fusion no pass of mfc's pipeline
// merges values, so each barrier is replaced by its input: later phases see
// plain values.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFDROPRECOMPUTEBARRIERSPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

struct MFDropRecomputeBarriersPass
    : mf::impl::MFDropRecomputeBarriersPassBase<MFDropRecomputeBarriersPass> {
  void runOnOperation() override {
    getOperation().walk([](RecomputeBarrierOp barrier) {
      barrier.getResult().replaceAllUsesWith(barrier.getInput());
      barrier.erase();
    });
  }
};

} // namespace
