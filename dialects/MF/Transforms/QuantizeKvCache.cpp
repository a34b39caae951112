//===- QuantizeKvCache.cpp - KV caches as int8 with scales
//-----------------===//
//
// MindFormers' int8 KV cache (kvcache_dtype: int8; golden-stick quantizes
// the rows ReshapeAndCache writes with calibrated per-channel scales and
// PagedAttention reads them back): each cache an entry takes becomes i8,
// its new rows mf.quantize of the float ones, and the attention reading it
// takes the scales. The scales are parameters the runtime computes from a
// calibration (docs/quantization.md).
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFQUANTIZEKVCACHEPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

struct MFQuantizeKvCachePass
    : mf::impl::MFQuantizeKvCachePassBase<MFQuantizeKvCachePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.walk([](AssignOp) { return WalkResult::interrupt(); })
            .wasInterrupted()) {
      emitError(module.getLoc())
          << "mf-quantize-kv-cache: the module updates its parameters "
             "(training); an int8 KV cache is for inference";
      return signalPassFailure();
    }
    OpBuilder declarations(module.getBodyRegion());
    // After the last parameter, so that the scales follow the weights.
    for (auto parameter : module.getOps<ParameterOp>()) {
      declarations.setInsertionPointAfter(parameter);
    }
    llvm::StringSet<> declared;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal()) {
        continue;
      }
      SmallVector<AttentionOp> attentions(
          function.getBody().getOps<AttentionOp>());
      bool changed = false;
      for (AttentionOp attention : attentions) {
        auto writeKey = attention.getKey().getDefiningOp<KvCacheWriteOp>();
        auto writeValue = attention.getValue().getDefiningOp<KvCacheWriteOp>();
        if (!writeKey && !writeValue) {
          continue; // no cache
        }
        if (attention.getKeyScale()) {
          continue; // quantized already
        }
        std::string attentionPath = getModelPath(attention.getLoc());
        if (!writeKey || !writeValue || attentionPath.empty()) {
          attention.emitError()
              << "mf-quantize-kv-cache: expected an attention (with a model "
                 "path) that reads a key cache and a value cache";
          return signalPassFailure();
        }
        Value scales[2];
        KvCacheWriteOp writes[2] = {writeKey, writeValue};
        for (int index : {0, 1}) {
          if (failed(quantizeWrite(writes[index], index == 0, attentionPath,
                                   declarations, declared, scales[index]))) {
            return signalPassFailure();
          }
        }
        attention.getKeyScaleMutable().assign(scales[0]);
        attention.getValueScaleMutable().assign(scales[1]);
        changed = true;
      }
      if (changed) {
        // The caches' new types, in and out.
        Block &body = function.getBody().front();
        function.setType(
            FunctionType::get(&getContext(), body.getArgumentTypes(),
                              body.getTerminator()->getOperandTypes()));
      }
    }
  }

  /// The module's device grid when it splits the model over ranks (its
  /// attention then splits the heads: mf-partition's rule), else null.
  shard::GridOp tensorParallelGrid() {
    for (auto grid : getOperation().getOps<shard::GridOp>()) {
      if (grid.getRank() > mfshapes::kModelAxis &&
          grid.getShape()[mfshapes::kModelAxis] > 1) {
        return grid;
      }
    }
    return nullptr;
  }

  /// `write` extends an entry input with rows quantized by a new parameter
  /// of scales (returned in `scales`), read where the rows are.
  LogicalResult quantizeWrite(KvCacheWriteOp write, bool keys,
                              StringRef attentionPath, OpBuilder &declarations,
                              llvm::StringSet<> &declared, Value &scales) {
    auto cache = dyn_cast<BlockArgument>(write.getCache());
    bool onlyWritten =
        cache && llvm::all_of(cache.getUses(), [](OpOperand &use) {
          auto user = dyn_cast<KvCacheWriteOp>(use.getOwner());
          return user && use.get() == user.getCache();
        });
    std::string cachePath = getModelPath(write.getLoc());
    if (!onlyWritten || cachePath.empty()) {
      return write.emitError()
             << "mf-quantize-kv-cache: expected a cache that is an entry "
                "input only KV-cache writes read (with a model path)";
    }
    RankedTensorType update = write.getUpdate().getType();
    auto scaleType = RankedTensorType::get(
        {update.getDimSize(2), update.getDimSize(3)}, update.getElementType());
    std::string name = cachePath + (keys ? ".key_scale" : ".value_scale");
    if (declared.insert(name).second) {
      // Under tensor parallelism each rank caches its KV heads: its scales
      // are theirs.
      FlatSymbolRefAttr grid;
      shard::GridAxesArrayAttr byHeads;
      if (shard::GridOp tensorParallel = tensorParallelGrid()) {
        grid = FlatSymbolRefAttr::get(tensorParallel.getSymNameAttr());
        byHeads = shard::GridAxesArrayAttr::get(
            &getContext(),
            {declarations.getDenseI16ArrayAttr({mfshapes::kModelAxis}),
             declarations.getDenseI16ArrayAttr({})});
      }
      ParameterOp::create(declarations, write.getLoc(), name, scaleType,
                          ParameterInit::ones, FloatAttr(), StringAttr(),
                          /*frozen=*/false, /*state=*/false,
                          /*panels=*/false, /*dot_panels=*/false, grid, byHeads,
                          IntegerAttr(), FlatSymbolRefAttr(), IntegerAttr(),
                          IntegerAttr(), FlatSymbolRefAttr(),
                          FlatSymbolRefAttr(), FlatSymbolRefAttr(), FloatAttr(),
                          /*parts=*/ArrayAttr(),
                          declarations.getStringAttr(
                              attentionPath + (keys ? ".key" : ".value")));
    }
    OpBuilder builder(write);
    scales = ParamOp::create(builder, write.getLoc(), scaleType, name);
    Value rows = QuantizeOp::create(builder, write.getLoc(), write.getUpdate(),
                                    scales, /*zero_point=*/Value());
    write.getUpdateMutable().assign(rows);
    Type int8 = builder.getI8Type();
    cache.setType(cast<RankedTensorType>(cache.getType()).clone(int8));
    write.getResult().setType(write.getResult().getType().clone(int8));
    return success();
  }
};

} // namespace
