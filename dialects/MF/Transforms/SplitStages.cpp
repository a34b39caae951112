//===- SplitStages.cpp - a pipeline stage's forward keeps what its backward
//reads ===//
//
// Per stage but the last, in stage<s>_accumulate_gradients(x, dy, ...):
// 1. The forward ops: those the `hidden` result depends on. Reads of
//    parameters and constants (no operands) are on both sides.
// 2. The saved values: forward results a backward op (or the return) reads.
// 3. A new stage<s>_forward(x) -> (hidden, saved...) from the forward ops,
//    in order; the backward takes the saved values as inputs, loses its
//    forward ops and its `hidden` result.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/EntryNames.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFSPLITSTAGESPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

struct MFSplitStagesPass : mf::impl::MFSplitStagesPassBase<MFSplitStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(kMicroBatchesAttrName)) {
      return;
    }
    for (auto backward : llvm::to_vector(module.getOps<func::FuncOp>())) {
      StringRef name = backward.getSymName();
      if (!backward->hasAttr(kStageAttrName) ||
          !name.ends_with("_accumulate_gradients") ||
          !argumentNamed(backward, "output_gradient")) {
        continue; // not a backward, or the last stage's (no forward apart)
      }
      std::string prefix = name.drop_back(strlen("accumulate_gradients")).str();
      if (failed(split(module, backward, prefix))) {
        return signalPassFailure();
      }
    }
  }

  LogicalResult split(ModuleOp module, func::FuncOp backward,
                      const std::string &prefix) {
    Block &body = backward.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    std::optional<unsigned> hiddenAt = resultNamed(backward, "hidden");
    if (!hiddenAt) {
      return backward.emitError()
             << "returns no 'hidden' (its stage's output): run mf-autodiff's "
                "pipeline form first";
    }
    Value hidden = ret.getOperand(*hiddenAt);
    Value input = backward.getArgument(0);

    // 1. The forward: what `hidden` depends on.
    BackwardSliceOptions sliceOptions;
    sliceOptions.inclusive = true;
    sliceOptions.omitBlockArguments = true;
    llvm::SetVector<Operation *> slice;
    if (failed(getBackwardSlice(hidden, &slice, sliceOptions))) {
      return backward.emitError() << "has a forward that cannot be sliced";
    }
    llvm::DenseSet<Operation *> forward(slice.begin(), slice.end());
    for (Operation *op : forward) {
      if (!isMemoryEffectFree(op)) {
        return op->emitOpError()
               << "in a pipeline stage's forward has side effects; the "
                  "stage cannot be split";
      }
    }

    // 2. The saved values, in program order.
    llvm::SetVector<Value> saved;
    for (Operation &op : body) {
      if (forward.contains(&op)) {
        continue;
      }
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && forward.contains(def) && !isReadOnEachSide(def) &&
            !(&op == ret.getOperation() && operand == hidden &&
              llvm::count(ret.getOperands(), hidden) == 1)) {
          saved.insert(operand);
        }
      }
    }

    // 3. The new forward.
    OpBuilder builder(module.getContext());
    builder.setInsertionPoint(backward);
    SmallVector<Type> resultTypes{hidden.getType()};
    for (Value value : saved) {
      resultTypes.push_back(value.getType());
    }
    auto old = module.lookupSymbol<func::FuncOp>(prefix + "forward");
    auto stageForward = func::FuncOp::create(
        builder, old ? old.getLoc() : backward.getLoc(), prefix + "forward",
        builder.getFunctionType({input.getType()}, resultTypes));
    stageForward->setAttr(kStageAttrName, backward->getAttr(kStageAttrName));
    setEntryRole(stageForward, EntryRole::stage_forward);
    if (Attribute chunk = backward->getAttr(kChunkAttrName)) {
      stageForward->setAttr(kChunkAttrName, chunk);
    }
    stageForward.setArgAttrs(0, backward.getArgAttrDict(0));
    Block *forwardBody = stageForward.addEntryBlock();
    OpBuilder inside = OpBuilder::atBlockEnd(forwardBody);
    IRMapping mapping;
    mapping.map(input, stageForward.getArgument(0));
    for (Operation &op : body) {
      if (forward.contains(&op)) {
        inside.clone(op, mapping);
      }
    }
    SmallVector<Value> results{mapping.lookup(hidden)};
    for (Value value : saved) {
      results.push_back(mapping.lookup(value));
    }
    func::ReturnOp::create(inside, ret.getLoc(), results);
    stageForward.setResultAttrs(0, valueName(builder, "hidden"));
    for (unsigned i = 0; i < saved.size(); ++i) {
      stageForward.setResultAttrs(i + 1,
                                  valueName(builder, "saved." + Twine(i)));
    }
    if (old) {
      old.erase();
    }

    // 4. The backward without its forward.
    for (auto [index, value] : llvm::enumerate(saved)) {
      (void)backward.insertArgument(backward.getNumArguments(), value.getType(),
                                    valueName(builder, "saved." + Twine(index)),
                                    value.getLoc());
      Value argument = backward.getArguments().back();
      Value original = value;
      original.replaceUsesWithIf(argument, [&](OpOperand &use) {
        return !forward.contains(use.getOwner());
      });
    }
    SmallVector<Value> kept;
    SmallVector<DictionaryAttr> keptNames;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (i != *hiddenAt) {
        kept.push_back(ret.getOperand(i));
        keptNames.push_back(backward.getResultAttrDict(i));
      }
    }
    builder.setInsertionPoint(ret);
    func::ReturnOp::create(builder, ret.getLoc(), kept);
    ret.erase();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (forward.contains(&op) && op.use_empty()) {
        op.erase();
      }
    }
    SmallVector<Type> keptTypes;
    for (Value value : kept) {
      keptTypes.push_back(value.getType());
    }
    backward.setFunctionType(
        builder.getFunctionType(backward.getArgumentTypes(), keptTypes));
    backward.setAllResultAttrs(ArrayRef<DictionaryAttr>(keptNames));
    return success();
  }
};

} // namespace
