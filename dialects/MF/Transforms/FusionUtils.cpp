//===- FusionUtils.cpp - building mf.fusion regions -----------------------===//

#include "dialects/MF/Transforms/FusionUtils.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::mf;

namespace {

struct Boundary {
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Value> results;
};

Boundary boundaryOf(ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  Boundary boundary;
  for (Operation *op : ops) {
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || !members.contains(producer)) {
        boundary.inputs.insert(operand);
      }
    }
    for (Value result : op->getResults()) {
      for (Operation *user : result.getUsers()) {
        if (!members.contains(user)) {
          boundary.results.insert(result);
          break;
        }
      }
    }
  }
  return boundary;
}

int64_t bytesOf(ArrayRef<Value> values) {
  int64_t bytes = 0;
  for (Value value : values) {
    auto type = cast<RankedTensorType>(value.getType());
    bytes += type.getNumElements() *
             std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  }
  return bytes;
}

} // namespace

bool mf::isElementwiseOp(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() && op->getNumResults() == 1 &&
         isa_and_nonnull<MFDialect>(op->getDialect());
}

FusionCost mf::fusionCost(ArrayRef<Operation *> ops) {
  FusionCost cost;
  for (Operation *op : ops) {
    if (auto costed = dyn_cast<CostOpInterface>(op)) {
      cost.separateBytes += costed.getBytesAccessed();
    }
  }
  Boundary boundary = boundaryOf(ops);
  cost.fusedBytes = bytesOf(boundary.inputs.getArrayRef()) +
                    bytesOf(boundary.results.getArrayRef());
  return cost;
}

FusionOp mf::outlineIntoFusion(ArrayRef<Operation *> ops, StringRef kind) {
  Boundary boundary = boundaryOf(ops);
  Operation *last = ops.back();
  OpBuilder builder(last);
  SmallVector<Type> resultTypes;
  for (Value result : boundary.results) {
    resultTypes.push_back(result.getType());
  }
  SmallVector<Value> inputs(boundary.inputs.begin(), boundary.inputs.end());
  auto fusion = FusionOp::create(builder, last->getLoc(), resultTypes, inputs,
                                 builder.getStringAttr(kind));
  Block *body = builder.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs) {
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  }
  for (Operation *op : ops) {
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
  for (Operation *op : llvm::reverse(ops)) {
    op->erase();
  }
  return fusion;
}

SmallVector<Operation *> mf::inlineFusion(FusionOp fusion) {
  Block &body = fusion.getBody().front();
  IRMapping mapping;
  for (auto [argument, input] :
       llvm::zip(body.getArguments(), fusion.getInputs())) {
    mapping.map(argument, input);
  }
  OpBuilder builder(fusion);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    ops.push_back(builder.clone(op, mapping));
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  for (auto [result, yielded] : llvm::zip(fusion.getResults(), yield.getValues())) {
    result.replaceAllUsesWith(mapping.lookup(yielded));
  }
  fusion.erase();
  return ops;
}
