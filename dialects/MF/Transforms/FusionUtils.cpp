//===- FusionUtils.cpp - building mf.fusion regions -----------------------===//

#include "dialects/MF/Transforms/FusionUtils.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <functional>

using namespace mlir;
using namespace mlir::mf;

namespace {

struct Boundary {
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Value> results;
};

/// A splat constant: a region computes it in place instead of reading a
/// buffer of repeated values.
bool isSplatConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return constant && isa<SplatElementsAttr>(constant.getValue());
}

/// What a region reads for `operand` of a member: nothing for a splat, the
/// input of a broadcast (the region broadcasts it itself), a quantized
/// weight's values and scales for its mf.dequantize (the region's matmul
/// reads them: no float copy of the weight is stored), else the value.
SmallVector<Value, 2> readsFor(Value operand) {
  if (QuantizeOp quantize = quantizedRowsOf(operand)) {
    // Rows quantized with static scales: the region quantizes them itself.
    SmallVector<Value, 2> reads{quantize.getInput(), quantize.getScale()};
    if (Value zeroPoints = quantize.getZeroPoint()) {
      reads.push_back(zeroPoints);
    }
    return reads;
  }
  if (auto dequantize = operand.getDefiningOp<DequantizeOp>()) {
    // Rows quantized per token: the region quantizes them itself.
    auto rows = dequantize.getInput().getDefiningOp<DynamicQuantizeOp>();
    if (rows && dequantize.getScale() == rows.getScales()) {
      return {rows.getInput()};
    }
    return {dequantize.getInput(), dequantize.getScale()};
  }
  if (auto broadcast = operand.getDefiningOp<BroadcastOp>()) {
    operand = broadcast.getInput();
  }
  if (isSplatConstant(operand)) {
    return {};
  }
  return {operand};
}

Boundary boundaryOf(ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  Boundary boundary;
  for (Operation *op : ops) {
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || !members.contains(producer)) {
        for (Value read : readsFor(operand)) {
          Operation *source = read.getDefiningOp();
          if (!(source && members.contains(source))) {
            boundary.inputs.insert(read);
          }
        }
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

QuantizeOp mf::quantizedRowsOf(Value value) {
  auto cast = value.getDefiningOp<CastOp>();
  return cast ? cast.getInput().getDefiningOp<QuantizeOp>() : QuantizeOp();
}

bool mf::isElementwiseOp(Operation *op) {
  // (Rows quantized with static scales belong to the matmuls that
  // multiply them: the region computes them.)
  return op->hasTrait<OpTrait::Elementwise>() && op->getNumResults() == 1 &&
         isa_and_nonnull<MFDialect>(op->getDialect()) &&
         !quantizedRowsOf(op->getResult(0));
}

bool mf::isTransposedRhs(OpOperand &use) {
  auto matmul = dyn_cast<MatmulOp>(use.getOwner());
  return matmul && use.getOperandNumber() == 1 && matmul.getTransposeRhs() &&
         !matmul.getTransposeLhs();
}

bool mf::readsBroadcast(Operation *op) {
  return llvm::any_of(op->getOperands(), [](Value operand) {
    return operand.getDefiningOp<BroadcastOp>() != nullptr;
  });
}

FusionCost mf::fusionCost(ArrayRef<Operation *> ops) {
  FusionCost cost;
  llvm::SmallPtrSet<Operation *, 16> counted;
  auto count = [&](Operation *op) {
    auto costed = dyn_cast<CostOpInterface>(op);
    if (costed && counted.insert(op).second) {
      cost.separateBytes += costed.getBytesAccessed();
    }
  };
  for (Operation *op : ops) {
    count(op);
    for (Value operand : op->getOperands()) {
      if (QuantizeOp quantize = quantizedRowsOf(operand)) {
        count(quantize);
        count(operand.getDefiningOp());
      }
      if (isa_and_nonnull<BroadcastOp, DequantizeOp>(operand.getDefiningOp())) {
        count(operand.getDefiningOp());
        if (Operation *rows =
                operand.getDefiningOp()->getOperand(0).getDefiningOp();
            isa_and_nonnull<DynamicQuantizeOp>(rows)) {
          count(rows);
        }
      }
    }
  }
  Boundary boundary = boundaryOf(ops);
  // A KV cache the region updates in place moves as its input only.
  SmallVector<Value> stored;
  for (Value result : boundary.results) {
    auto write = result.getDefiningOp<KvCacheWriteOp>();
    if (!write || !boundary.inputs.contains(write.getCache())) {
      stored.push_back(result);
    }
  }
  cost.fusedBytes = bytesOf(boundary.inputs.getArrayRef()) + bytesOf(stored);
  return cost;
}

/// The mf-train-step mark (kUpdateAttrName) a region of `ops` carries: the
/// parameter when its marked members are all of one parameter's update, a
/// unit when they are of several (or shared), none when none is marked.
/// Constants and parameter reads do not count: canonicalization shares one
/// splat among the updates of several parameters.
static Attribute updateMarkOf(ArrayRef<Operation *> ops) {
  Attribute mark;
  for (Operation *op : ops) {
    Attribute own = op->getAttr(kUpdateAttrName);
    if (!own || own == mark || op->getNumOperands() == 0) {
      continue;
    }
    if (!mark || isa<UnitAttr>(mark)) {
      mark = own;
    } else if (!isa<UnitAttr>(own)) {
      return UnitAttr::get(op->getContext()); // two parameters' updates
    }
  }
  return mark;
}

FusionOp mf::outlineIntoFusion(ArrayRef<Operation *> ops, FusionKind kind) {
  Boundary boundary = boundaryOf(ops);
  Operation *last = ops.back();
  OpBuilder builder(last);
  SmallVector<Type> resultTypes;
  for (Value result : boundary.results) {
    resultTypes.push_back(result.getType());
  }
  SmallVector<Value> inputs(boundary.inputs.begin(), boundary.inputs.end());
  auto fusion = FusionOp::create(builder, last->getLoc(), resultTypes, inputs,
                                 kind, /*kernel=*/nullptr);
  if (Attribute mark = updateMarkOf(ops)) {
    fusion->setAttr(kUpdateAttrName, mark);
  }
  Block *body = builder.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs) {
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  }
  // Splats, broadcasts, dequantized weights and quantized rows the members
  // read are computed in the region (cloned in; the originals
  // go if nothing else needs them).
  llvm::SetVector<Operation *> sunk;
  std::function<void(Value)> sink = [&](Value value) {
    Operation *producer = value.getDefiningOp();
    if (mapping.contains(value) || !producer ||
        !(isSplatConstant(value) || quantizedRowsOf(value) ||
          isa<BroadcastOp, DequantizeOp, DynamicQuantizeOp, QuantizeOp>(
              producer))) {
      return;
    }
    for (Value operand : producer->getOperands()) {
      sink(operand);
    }
    sunk.insert(producer);
    builder.clone(*producer, mapping);
  };
  for (Operation *op : ops) {
    for (Value operand : op->getOperands()) {
      sink(operand);
    }
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
  for (Operation *op : llvm::reverse(sunk)) {
    if (op->use_empty()) {
      op->erase();
    }
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
