//===- SplitWeightGradients.cpp - a backward's weight gradients apart -----===//
//
// Zero-bubble pipeline schedules (Qi et al., "Zero Bubble Pipeline
// Parallelism", 2024) split a part's backward in two: B, the gradient of
// its input, which the part before waits for, and W, its parameters'
// gradients, which nothing waits for and which the schedule runs later, in
// what would be bubbles. In a module scheduled zero_bubble_v, per part that
// returns an input gradient, <prefix>accumulate_gradients(inputs...) ->
// (loss?, input_gradient) becomes:
// 1. B's ops: those its results depend on. Reads of parameters and
//    constants (no operands) are on both sides.
// 2. The values W reads from B: B's results a W op reads (`wsaved.<i>`).
// 3. <prefix>input_gradients(inputs...) -> (loss?, input_gradient,
//    wsaved...) from B's ops, and <prefix>weight_gradients(the inputs it
//    reads..., wsaved...) from the rest: the additions to the gradient
//    sums.
// The model's first part (no input gradient) keeps its
// accumulate_gradients: all of it is W, and nothing waits for it.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/EntryNames.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFSPLITWEIGHTGRADIENTSPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

struct MFSplitWeightGradientsPass
    : mf::impl::MFSplitWeightGradientsPassBase<MFSplitWeightGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(kMicroBatchesAttrName) ||
        !mfshapes::isVShapedScheduler(pipelineSchedulerOf(module))) {
      return;
    }
    for (auto backward : llvm::to_vector(module.getOps<func::FuncOp>())) {
      StringRef name = backward.getSymName();
      if (!backward->hasAttr(kStageAttrName) ||
          !name.ends_with("_accumulate_gradients") ||
          !resultNamed(backward, "input_gradient")) {
        continue; // not a backward, or the first part's
      }
      std::string prefix = name.drop_back(strlen("accumulate_gradients")).str();
      if (failed(split(backward, prefix))) {
        return signalPassFailure();
      }
    }
  }

  LogicalResult split(func::FuncOp backward, const std::string &prefix) {
    Block &body = backward.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // 1. B: what the results depend on.
    BackwardSliceOptions sliceOptions;
    sliceOptions.inclusive = true;
    sliceOptions.omitBlockArguments = true;
    llvm::SetVector<Operation *> slice;
    for (Value result : ret.getOperands()) {
      if (failed(getBackwardSlice(result, &slice, sliceOptions))) {
        return backward.emitError() << "has a backward that cannot be sliced";
      }
    }
    llvm::DenseSet<Operation *> inputSide(slice.begin(), slice.end());
    for (Operation *op : inputSide) {
      // (A recompute barrier's effect only keeps CSE from merging a
      // recomputed clone into its original: it moves with its clone.)
      if (!isMemoryEffectFree(op) && !isa<RecomputeBarrierOp>(op)) {
        return op->emitOpError()
               << "in the input gradient of a pipeline part has side "
                  "effects; its weight gradients cannot be split off";
      }
    }

    // 2. What W reads from B, in program order.
    llvm::SetVector<Value> crossing;
    for (Operation &op : body) {
      if (inputSide.contains(&op) || &op == ret.getOperation()) {
        continue;
      }
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && inputSide.contains(def) && !isReadOnEachSide(def)) {
          crossing.insert(operand);
        }
      }
    }

    // 3. The two entries.
    OpBuilder builder(backward);
    SmallVector<Type> inputResults(ret.getOperandTypes());
    SmallVector<Type> weightArguments(backward.getArgumentTypes());
    for (Value value : crossing) {
      inputResults.push_back(value.getType());
      weightArguments.push_back(value.getType());
    }
    auto copyMarks = [&](func::FuncOp entry) {
      for (StringRef mark : {kStageAttrName, kChunkAttrName}) {
        if (Attribute value = backward->getAttr(mark)) {
          entry->setAttr(mark, value);
        }
      }
    };

    auto inputEntry = func::FuncOp::create(
        builder, backward.getLoc(), prefix + "input_gradients",
        builder.getFunctionType(backward.getArgumentTypes(), inputResults));
    copyMarks(inputEntry);
    setEntryRole(inputEntry, EntryRole::stage_input_gradients);
    inputEntry.setAllArgAttrs(backward.getAllArgAttrs());
    {
      OpBuilder inside = OpBuilder::atBlockEnd(inputEntry.addEntryBlock());
      IRMapping mapping;
      mapping.map(backward.getArguments(), inputEntry.getArguments());
      for (Operation &op : body) {
        if (inputSide.contains(&op)) {
          inside.clone(op, mapping);
        }
      }
      SmallVector<Value> results;
      for (Value value : ret.getOperands()) {
        results.push_back(mapping.lookup(value));
      }
      for (Value value : crossing) {
        results.push_back(mapping.lookup(value));
      }
      func::ReturnOp::create(inside, ret.getLoc(), results);
    }
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      inputEntry.setResultAttrs(i, backward.getResultAttrDict(i));
    }
    for (unsigned i = 0; i < crossing.size(); ++i) {
      inputEntry.setResultAttrs(ret.getNumOperands() + i,
                                valueName(builder, "wsaved." + Twine(i)));
    }

    auto weightEntry = func::FuncOp::create(
        builder, backward.getLoc(), prefix + "weight_gradients",
        builder.getFunctionType(weightArguments, {}));
    copyMarks(weightEntry);
    setEntryRole(weightEntry, EntryRole::stage_weight_gradients);
    {
      OpBuilder inside = OpBuilder::atBlockEnd(weightEntry.addEntryBlock());
      IRMapping mapping;
      mapping.map(
          backward.getArguments(),
          weightEntry.getArguments().take_front(backward.getNumArguments()));
      for (auto [index, value] : llvm::enumerate(crossing)) {
        mapping.map(
            value, weightEntry.getArgument(backward.getNumArguments() + index));
      }
      for (Operation &op : body) {
        if (&op == ret.getOperation()) {
          continue;
        }
        bool readByW = llvm::any_of(op.getUsers(), [&](Operation *user) {
          return !inputSide.contains(user) && user != ret.getOperation();
        });
        if (!inputSide.contains(&op) || (isReadOnEachSide(&op) && readByW)) {
          inside.clone(op, mapping);
        }
      }
      func::ReturnOp::create(inside, ret.getLoc());
    }
    for (unsigned i = 0; i < backward.getNumArguments(); ++i) {
      weightEntry.setArgAttrs(i, backward.getArgAttrDict(i));
    }
    for (unsigned i = 0; i < crossing.size(); ++i) {
      weightEntry.setArgAttrs(backward.getNumArguments() + i,
                              valueName(builder, "wsaved." + Twine(i)));
    }
    // W takes only the backward's inputs it reads: the rest need not be
    // kept from the B until the W.
    llvm::BitVector unread(weightEntry.getNumArguments());
    for (unsigned i = 0; i < backward.getNumArguments(); ++i) {
      unread[i] = weightEntry.getArgument(i).use_empty();
    }
    if (failed(weightEntry.eraseArguments(unread))) {
      return weightEntry.emitError()
             << "cannot drop the inputs it does not read";
    }
    backward.erase();
    return success();
  }
};

} // namespace
