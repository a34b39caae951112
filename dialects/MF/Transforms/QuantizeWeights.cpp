//===- QuantizeWeights.cpp - Linear weights as int8 and scales ------------===//
//
// Weight-only RTN quantization (MindFormers' quant_method: rtn, weight_dtype:
// int8): each Linear weight becomes an i8 parameter and a parameter of
// per-row scales, and each read of it their mf.dequantize, which Graph
// Mode's matmul kernels fuse (no float copy of the weight exists at run
// time). Which values the two hold is the runtime's to compute from a float
// checkpoint, or to read from a quantized one (docs/quantization.md).
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFQUANTIZEWEIGHTSPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

/// Whether every use of `value` multiplies by it transposed (a Linear's
/// [N, K] weight).
bool onlyTransposedRhs(Value value) {
  return llvm::all_of(value.getUses(), [](OpOperand &use) {
    auto matmul = dyn_cast<MatmulOp>(use.getOwner());
    return matmul && use.getOperandNumber() == 1 && matmul.getTransposeRhs() &&
           !matmul.getTransposeLhs();
  });
}

/// The type a read of a parameter is multiplied in, when it is only ever a
/// Linear's weight: its own, or the compute dtype it is cast to first
/// (every use a cast to one type whose uses are all such products).
Type linearWeightType(ParamOp read) {
  if (onlyTransposedRhs(read.getResult())) {
    return read.getType().getElementType();
  }
  Type computed;
  for (Operation *user : read->getUsers()) {
    auto cast = dyn_cast<CastOp>(user);
    Type element = cast ? cast.getType().getElementType() : Type();
    if (!cast || !onlyTransposedRhs(cast.getResult()) ||
        (computed && computed != element)) {
      return Type();
    }
    computed = element;
  }
  return computed;
}

/// MindFormers' (golden-stick's) name of the scales of a quantized Linear
/// whose weight it calls `<layer>.weight`: `<layer>._weight_quantizer.scale`.
StringAttr mindFormersScaleName(ParameterOp parameter) {
  std::optional<StringRef> name = parameter.getMfName();
  if (!name || !name->ends_with(".weight")) {
    return StringAttr();
  }
  return StringAttr::get(parameter.getContext(),
                         name->drop_back(strlen(".weight")).str() +
                             "._weight_quantizer.scale");
}

struct MFQuantizeWeightsPass
    : mf::impl::MFQuantizeWeightsPassBase<MFQuantizeWeightsPass> {
  using MFQuantizeWeightsPassBase::MFQuantizeWeightsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.walk([](AssignOp) { return WalkResult::interrupt(); })
            .wasInterrupted()) {
      emitError(module.getLoc())
          << "mf-quantize-weights: the module updates its parameters "
             "(training); quantized weights are for inference";
      return signalPassFailure();
    }
    // Each Linear weight's reads and the one type they are multiplied in
    // (which its scales and mf.dequantize take: MindFormers keeps the
    // scales in the compute dtype).
    llvm::StringMap<SmallVector<ParamOp>> reads;
    llvm::StringMap<Type> computeType;
    llvm::StringSet<> otherwiseRead;
    module.walk([&](ParamOp read) {
      Type type = linearWeightType(read);
      auto [known, added] = computeType.try_emplace(read.getName(), type);
      if (!type || (!added && known->second != type)) {
        otherwiseRead.insert(read.getName());
      } else {
        reads[read.getName()].push_back(read);
      }
    });
    auto excluded = [&](ParameterOp parameter) {
      return llvm::any_of(exclude, [&](const std::string &part) {
        return parameter.getSymName().contains(part) ||
               (parameter.getMfName() && parameter.getMfName()->contains(part));
      });
    };
    MLIRContext *context = &getContext();
    for (auto parameter :
         llvm::make_early_inc_range(module.getOps<ParameterOp>())) {
      RankedTensorType type = parameter.getTensorType();
      StringRef name = parameter.getSymName();
      if (type.getRank() != 2 || !isa<FloatType>(type.getElementType()) ||
          parameter.getState() || parameter.getSplitAxesAttr() ||
          !reads.count(name) || otherwiseRead.contains(name) ||
          excluded(parameter)) {
        continue;
      }
      std::string scaleName = (name + "_scale").str();
      Type element = computeType.lookup(name);
      auto scaleType = RankedTensorType::get({type.getDimSize(0)}, element);
      OpBuilder builder(context);
      builder.setInsertionPointAfter(parameter);
      ParameterOp::create(builder, parameter.getLoc(), scaleName, scaleType,
                          ParameterInit::ones, FloatAttr(),
                          mindFormersScaleName(parameter),
                          parameter.getFrozen(),
                          /*state=*/false, /*panels=*/false,
                          FlatSymbolRefAttr(), shard::GridAxesArrayAttr(),
                          IntegerAttr(), FlatSymbolRefAttr(), IntegerAttr());
      auto quantizedType =
          RankedTensorType::get(type.getShape(), IntegerType::get(context, 8));
      parameter.setType(quantizedType);
      parameter.setQuantScaleAttr(FlatSymbolRefAttr::get(context, scaleName));
      for (ParamOp read : reads[name]) {
        builder.setInsertionPoint(read);
        Location loc = read.getLoc();
        Value values = ParamOp::create(builder, loc, quantizedType, name);
        Value scales = ParamOp::create(builder, loc, scaleType, scaleName);
        Value weight = DequantizeOp::create(builder, loc, values, scales);
        // The casts to the compute dtype are the dequantization's now.
        for (Operation *user : llvm::make_early_inc_range(read->getUsers())) {
          if (isa<CastOp>(user)) {
            user->getResult(0).replaceAllUsesWith(weight);
            user->erase();
          }
        }
        read.getResult().replaceAllUsesWith(weight);
        read.erase();
      }
    }
  }
};

} // namespace
