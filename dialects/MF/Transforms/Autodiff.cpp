//===- Autodiff.cpp - reverse-mode differentiation of forward_loss --------===//
//
// 1. Clone `forward_loss` into `forward_backward`.
// 2. Walk its ops backwards from the loss (seeded with 1): each op with a
//    gradient for its result asks its GradientOpInterface rule for its
//    operands' gradients, built before the return; a value with several
//    users sums them (mf.add); a parameter read adds to the parameter's
//    gradient.
// 3. Return the loss and the gradient of every trained parameter (not
//    frozen, not state), in module order (zeros for one the loss does not
//    depend on).
//
// A pipeline stage's `stage<s>_forward` (attribute mf.stage) becomes
// `stage<s>_forward_backward` the same way, but its output may be hidden
// states, not a loss: then the gradient of its output is an input
// (`output_gradient`, sent back by the next stage) instead of 1. It returns
// its loss (the last stage's), the gradient of its float input
// (`input_gradient`, for the previous stage), a stage's own output
// (`hidden`, which mf-split-stages sends on from the forward) and the
// gradients of the trained parameters it reads.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFAUTODIFFPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

Value zerosOf(OpBuilder &builder, Location loc, RankedTensorType type) {
  return ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(type, builder.getFloatAttr(type.getElementType(), 0)));
}

struct MFAutodiffPass : mf::impl::MFAutodiffPassBase<MFAutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!isTrainingModule(module)) {
      return;
    }
    SmallVector<std::pair<func::FuncOp, std::string>> forwards;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func->hasAttr(kStageAttrName) &&
          func.getSymName().ends_with("_forward")) {
        forwards.emplace_back(func, func.getSymName().str() + "_backward");
      }
    }
    if (forwards.empty()) {
      auto forward = module.lookupSymbol<func::FuncOp>("forward_loss");
      if (!forward) {
        emitError(module.getLoc())
            << "a training module needs a forward_loss entry (or pipeline "
               "stages' stage<s>_forward)";
        return signalPassFailure();
      }
      forwards.emplace_back(forward, "forward_backward");
    }
    for (auto [forward, name] : forwards) {
      if (module.lookupSymbol(name)) {
        continue; // differentiated already
      }
      OpBuilder builder(forward);
      builder.setInsertionPointAfter(forward);
      auto entry = cast<func::FuncOp>(builder.clone(*forward));
      entry.setSymName(name);
      setEntryRole(entry, entry->hasAttr(kStageAttrName)
                              ? EntryRole::stage_forward_backward
                              : EntryRole::forward_backward);
      if (failed(differentiate(entry, entry->hasAttr(kStageAttrName)))) {
        entry.erase();
        return signalPassFailure();
      }
    }
  }

  /// `stage`: a pipeline stage's (see the file comment).
  LogicalResult differentiate(func::FuncOp entry, bool stage) {
    Block &body = entry.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() != 1) {
      return ret.emitError()
             << entry.getSymName() << " must return just the loss"
             << (stage ? " or its hidden states" : "");
    }
    Value output = ret.getOperand(0);
    auto outputType = cast<RankedTensorType>(output.getType());
    bool isLoss = outputType.getRank() == 0;
    if (!isLoss && !stage) {
      return ret.emitError() << "forward_loss must return a scalar loss";
    }
    OpBuilder builder(ret);
    llvm::DenseMap<Value, Value> gradientOf;
    llvm::MapVector<StringRef, Value> parameterGradients;
    auto accumulate = [&](Value &slot, Value gradient, Location loc) {
      slot = slot ? Value(AddOp::create(builder, loc, slot, gradient)) : gradient;
    };
    SmallVector<Value> inputs(entry.getArguments());
    if (isLoss) {
      gradientOf[output] = ConstantOp::create(
          builder, output.getLoc(),
          DenseElementsAttr::get(outputType, builder.getF32FloatAttr(1.0f)));
    } else {
      (void)entry.insertArgument(
          entry.getNumArguments(), outputType,
          builder.getDictionaryAttr(builder.getNamedAttr(
              "mf.name", builder.getStringAttr("output_gradient"))),
          output.getLoc());
      gradientOf[output] = entry.getArguments().back();
    }

    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator()) {
      forwardOps.push_back(&op);
    }
    for (Operation *op : llvm::reverse(forwardOps)) {
      if (op->getNumResults() == 0) {
        continue;
      }
      // A multi-result op's later results are integers (mf.top_k's
      // indices, mf.moe_route's): no gradient reaches them.
      if (llvm::any_of(op->getResults().drop_front(), [&](Value result) {
            return gradientOf.count(result);
          })) {
        return op->emitOpError()
               << "has no gradient rule for results beyond its first";
      }
      Value gradient = gradientOf.lookup(op->getResult(0));
      if (!gradient) {
        continue; // the loss does not depend on it
      }
      if (auto param = dyn_cast<ParamOp>(op)) {
        accumulate(parameterGradients[param.getName()], gradient, op->getLoc());
        continue;
      }
      if (op->getNumOperands() == 0) {
        continue; // a constant (or iota): nothing to pass the gradient to
      }
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule) {
        return op->emitOpError() << "has no gradient rule; the loss depends on it";
      }
      SmallVector<Value> operandGradients;
      if (failed(rule.buildGradients(builder, gradient, operandGradients))) {
        return failure();
      }
      for (auto [operand, operandGradient] :
           llvm::zip(op->getOperands(), operandGradients)) {
        if (operandGradient) {
          accumulate(gradientOf[operand], operandGradient, op->getLoc());
        }
      }
    }

    // The loss, a stage's input gradient, then every parameter's gradient
    // in module order.
    SmallVector<Value> results;
    SmallVector<Type> resultTypes;
    SmallVector<Attribute> names;
    auto addResult = [&](Value value, StringRef name) {
      results.push_back(value);
      resultTypes.push_back(value.getType());
      names.push_back(builder.getDictionaryAttr(
          builder.getNamedAttr("mf.name", builder.getStringAttr(name))));
    };
    if (isLoss) {
      addResult(output, "loss");
    } else {
      // What the backward differentiates (mf-recompute's forward is what
      // it depends on; mf-split-stages sends it on).
      addResult(output, "hidden");
    }
    for (Value input : inputs) {
      auto type = cast<RankedTensorType>(input.getType());
      if (stage && isa<FloatType>(type.getElementType())) {
        Value gradient = gradientOf.lookup(input);
        addResult(gradient ? gradient : zerosOf(builder, entry.getLoc(), type),
                  "input_gradient");
      }
    }
    llvm::DenseSet<StringRef> read; // a stage's parameters
    entry.walk([&](ParamOp op) { read.insert(op.getName()); });
    auto module = entry->getParentOfType<ModuleOp>();
    for (auto parameter : module.getOps<ParameterOp>()) {
      if (!parameter.isTrained()) {
        continue; // frozen or state: no gradient (its computation is dead code)
      }
      if (stage && !read.contains(parameter.getSymName())) {
        continue; // another stage's
      }
      Value gradient = parameterGradients.lookup(parameter.getSymName());
      if (!gradient) {
        shard::GridOp grid;
        if (parameter.getGrid()) { // a sharded program's: the rank's block
          grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
              parameter, parameter.getGridAttr());
        }
        gradient = zerosOf(builder, parameter.getLoc(),
                           parameter.getShardType(grid));
      }
      addResult(gradient, "grad." + parameter.getSymName().str());
    }
    func::ReturnOp::create(builder, ret.getLoc(), results);
    ret.erase();
    entry.setFunctionType(
        builder.getFunctionType(entry.getArgumentTypes(), resultTypes));
    entry.setAllResultAttrs(names);
    return success();
  }
};

} // namespace
