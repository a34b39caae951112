//===- QuantizeWeights.cpp - Linear weights as int8 and scales ------------===//
//
// Weight-only RTN quantization (MindFormers' quant_method: rtn or ptq,
// weight_dtype: int8 or int4): each Linear weight becomes an i8 parameter
// (int4 values two to a byte) and a parameter of per-row or per-group
// scales, and each read of it their mf.dequantize, which Graph
// Mode's matmul kernels fuse (no float copy of the weight exists at run
// time). Which values the two hold is the runtime's to compute from a float
// checkpoint, or to read from a quantized one (docs/quantization.md).
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"
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
  return llvm::all_of(value.getUses(), isTransposedRhs);
}

/// A tied embedding table's lookup of a read: `use` is the table of an
/// mf.embedding (not vocabulary-parallel).
bool isTableLookup(OpOperand &use) {
  auto embedding = dyn_cast<EmbeddingOp>(use.getOwner());
  return embedding && use.getOperandNumber() == 0 && !embedding.getGrid();
}

/// The type a read of a parameter is multiplied in, when it is only ever a
/// Linear's weight: its own, or the compute dtype it is cast to first
/// (every cast to one type whose uses are all such products). Lookups in
/// it as an embedding table (a tied lm_head's) are allowed beside, and
/// noted in `looksUp`; a read with no product at all is not a Linear's.
Type linearWeightType(ParamOp read, bool &looksUp) {
  Type computed;
  bool multiplied = false;
  for (OpOperand &use : read->getUses()) {
    if (isTableLookup(use)) {
      looksUp = true;
      continue;
    }
    Type element;
    auto cast = dyn_cast<CastOp>(use.getOwner());
    if (cast && onlyTransposedRhs(cast.getResult())) {
      element = cast.getType().getElementType();
    } else if (isTransposedRhs(use)) {
      element = read.getType().getElementType();
    } else {
      return Type();
    }
    if (computed && computed != element) {
      return Type();
    }
    computed = element;
    multiplied = true;
  }
  return multiplied ? computed : Type();
}

/// The rows of a quantized table (values `values`, scales `scales` [V])
/// that `embedding` looked up, as `embedding` returned them: the i8 rows
/// and their scales looked up alike, multiplied in the table's type.
Value lookUpQuantized(OpBuilder &builder, EmbeddingOp embedding, Value values,
                      Value scales) {
  Location loc = embedding.getLoc();
  RankedTensorType rowsType = embedding.getType();
  Value ids = embedding.getIds();
  auto scalesType = cast<RankedTensorType>(scales.getType());
  Value rows = EmbeddingOp::create(builder, loc, values, ids);
  Value column = ReshapeOp::create(
      builder, loc, scalesType.clone({scalesType.getDimSize(0), 1}), scales);
  Value rowScales = EmbeddingOp::create(builder, loc, column, ids);
  Type element = rowsType.getElementType();
  if (scalesType.getElementType() != element) {
    rowScales = CastOp::create(
        builder, loc,
        cast<RankedTensorType>(rowScales.getType()).clone(element), rowScales);
  }
  Value floats = CastOp::create(builder, loc, rowsType, rows);
  Value spread = BroadcastOp::create(builder, loc, rowsType, rowScales);
  return MulOp::create(builder, loc, floats, spread);
}

/// The same for an int4 table (values [V, K / 2], scales [K / G, V] per
/// group of G columns): the looked-up rows of bytes dequantized with their
/// scales, which the lookup reads from the scales transposed ([V, K / G],
/// derived once from the weights) and transposes back.
Value lookUpInt4(OpBuilder &builder, EmbeddingOp embedding, Value values,
                 Value scales, int64_t group) {
  Location loc = embedding.getLoc();
  RankedTensorType rowsType = embedding.getType();
  Value ids = embedding.getIds();
  auto scalesType = cast<RankedTensorType>(scales.getType());
  int64_t lookups = rowsType.getNumElements() / rowsType.getShape().back();
  // The ids as one list: the looked-up rows are then the 2-D weight that
  // mf.dequantize takes.
  auto idsType = cast<RankedTensorType>(ids.getType());
  Value flatIds =
      ReshapeOp::create(builder, loc, idsType.clone({lookups}), ids);
  Value rows = EmbeddingOp::create(builder, loc, values, flatIds);
  Value byRow =
      TransposeOp::create(builder, loc, scales, ArrayRef<int64_t>{1, 0});
  Value rowScales = EmbeddingOp::create(builder, loc, byRow, flatIds);
  rowScales =
      TransposeOp::create(builder, loc, rowScales, ArrayRef<int64_t>{1, 0});
  Value floats =
      DequantizeOp::create(builder, loc, rows, rowScales, group, /*bits=*/4);
  Type element = rowsType.getElementType();
  if (scalesType.getElementType() != element) {
    floats = CastOp::create(
        builder, loc, cast<RankedTensorType>(floats.getType()).clone(element),
        floats);
  }
  return ReshapeOp::create(builder, loc, rowsType, floats);
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

/// Declares companion `name` of quantized `parameter`, of `type` (float:
/// ones; i8 zero points: zeros), which the runtime fills from the float
/// weight, split over the grid as `parameter` is along the dimensions `dims`
/// names (companionSplitAxes).
void addCompanion(OpBuilder &builder, ParameterOp parameter, StringRef name,
                  RankedTensorType type, StringAttr mfName,
                  CompanionDims dims) {
  shard::GridAxesArrayAttr splitAxes =
      companionSplitAxes(parameter, type.getRank(), dims);
  FlatSymbolRefAttr grid = splitAxes ? parameter.getGridAttr() : nullptr;
  // GPT-2's fused q, k, v: their rows' scales are in parts alike.
  IntegerAttr groups;
  if (splitAxes && dims.n >= 0 && !splitAxes.getAxes()[dims.n].empty()) {
    groups = parameter.getSplitGroupsAttr();
  }
  ParameterOp::create(builder, parameter.getLoc(), name, type,
                      type.getElementType().isInteger(8) ? ParameterInit::zeros
                                                         : ParameterInit::ones,
                      FloatAttr(), mfName, parameter.getFrozen(),
                      /*state=*/false, /*panels=*/false, /*dot_panels=*/false,
                      grid, splitAxes, groups, FlatSymbolRefAttr(),
                      IntegerAttr(), IntegerAttr(), FlatSymbolRefAttr(),
                      FlatSymbolRefAttr(), FlatSymbolRefAttr(), FloatAttr(),
                      /*parts=*/ArrayAttr(),
                      /*calibrated_scales=*/StringAttr());
}

/// A calibrated weight's parameters that the rows of its products read
/// (input scales, zero points) and the bias added to them.
struct StaticRows {
  std::string scaleName;
  RankedTensorType scaleType;
  std::string zeroPointName;
  RankedTensorType zeroPointType;
  std::string biasName;
  RankedTensorType biasType;
};

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
    llvm::StringSet<> otherwiseRead, tied;
    module.walk([&](ParamOp read) {
      bool looksUp = false;
      Type type = linearWeightType(read, looksUp);
      if (looksUp) {
        tied.insert(read.getName());
      }
      auto [known, added] = computeType.try_emplace(read.getName(), type);
      if (!type || (!added && known->second != type)) {
        otherwiseRead.insert(read.getName());
      } else {
        reads[read.getName()].push_back(read);
      }
    });
    // A tied embedding table is also the lm_head: excluding that excludes
    // it (MindFormers' configs keep lm_head float so).
    auto excluded = [&](ParameterOp parameter) {
      return llvm::any_of(exclude, [&](const std::string &part) {
        return parameter.getSymName().contains(part) ||
               (parameter.getMfName() &&
                parameter.getMfName()->contains(part)) ||
               (tied.contains(parameter.getSymName()) &&
                StringRef("lm_head.weight").contains(part));
      });
    };
    MLIRContext *context = &getContext();
    if (activations != "none" && activations != "per-token" &&
        activations != "per-tensor") {
      emitError(module.getLoc())
          << "mf-quantize-weights: activations is none, per-token or "
             "per-tensor, not '"
          << activations << "'";
      return signalPassFailure();
    }
    bool int8Rows = activations == "per-token";
    bool calibrated = activations == "per-tensor";
    if (smoothAlpha > 1.0 || (smoothAlpha >= 0.0 && !calibrated)) {
      emitError(module.getLoc())
          << "mf-quantize-weights: smooth-alpha=" << smoothAlpha
          << " needs activations=per-tensor and a value in [0, 1]";
      return signalPassFailure();
    }
    if ((int8Rows || calibrated) && (bits != 8 || groupSize != 0)) {
      emitError(module.getLoc())
          << "mf-quantize-weights: int8 activations take int8 weights with "
             "one scale per row (bits=8 group-size=0), as golden-stick's W8A8";
      return signalPassFailure();
    }
    if ((bits != 8 && bits != 4) || groupSize < 0 ||
        (bits == 4 && (groupSize == 0 || groupSize % 2 != 0))) {
      emitError(module.getLoc())
          << "mf-quantize-weights: bits=" << static_cast<int64_t>(bits)
          << " group-size=" << static_cast<int64_t>(groupSize)
          << " is not supported (8 bits per row or per group; 4 bits per "
             "even group)";
      return signalPassFailure();
    }
    llvm::DenseMap<Value, Value> rowsOf;
    for (auto parameter :
         llvm::make_early_inc_range(module.getOps<ParameterOp>())) {
      RankedTensorType type = parameter.getTensorType();
      StringRef name = parameter.getSymName();
      if (type.getRank() != 2 || !isa<FloatType>(type.getElementType()) ||
          parameter.getState() || parameter.getPartsAttr() ||
          !reads.count(name) || otherwiseRead.contains(name) ||
          excluded(parameter)) {
        continue;
      }
      int64_t n = type.getDimSize(0), k = type.getDimSize(1);
      // (int4 groups are even, so a K they divide is whole bytes.)
      int64_t group = groupSize;
      if (group > 0 && k % group != 0) {
        parameter.emitError()
            << "mf-quantize-weights: K = " << k << " of this [" << n << ", "
            << k << "] weight is not a multiple of the group size " << group
            << "; choose a group_size that divides it or add the layer to "
               "modules_to_not_convert";
        return signalPassFailure();
      }
      // A row-parallel weight's rank holds whole groups of its columns
      // (one block of them: its companions split along K in one block).
      shard::GridOp grid =
          parameter.getGrid()
              ? SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
                    parameter, parameter.getGridAttr())
              : shard::GridOp();
      int64_t rankColumns = parameter.getShardType(grid).getDimSize(1);
      if (rankColumns != k && parameter.getSplitPartCount() > 1) {
        parameter.emitError()
            << "mf-quantize-weights: this weight's columns split over ranks "
               "in "
            << parameter.getSplitPartCount()
            << " parts, which its scales cannot follow; add the layer to "
               "modules_to_not_convert";
        return signalPassFailure();
      }
      if (group > 0 && rankColumns % group != 0) {
        parameter.emitError()
            << "mf-quantize-weights: K = " << k << " of this [" << n << ", "
            << k << "] weight splits " << k / rankColumns
            << " ways (model_parallel) into " << rankColumns
            << " columns a rank, not a multiple of the group size " << group
            << "; choose a group_size that divides " << rankColumns
            << " or add the layer to modules_to_not_convert";
        return signalPassFailure();
      }
      if (calibrated && tied.contains(name)) {
        // Its scales hold the activations' scale too, which a lookup has
        // no use for.
        parameter.emitError()
            << "mf-quantize-weights: a tied embedding table with calibrated "
               "int8 activations is not supported; add 'lm_head' to "
               "modules_to_not_convert (as MindFormers' configs do)";
        return signalPassFailure();
      }
      if (bits == 8 && group > 0 && tied.contains(name)) {
        // Its lookups read one scale a row ([V, 1] columns).
        parameter.emitError()
            << "mf-quantize-weights: a tied embedding table with int8 scales "
               "per group is not supported; add 'lm_head' to "
               "modules_to_not_convert";
        return signalPassFailure();
      }
      std::string scaleName = (name + "_scale").str();
      Type element = computeType.lookup(name);
      // Calibrated: the scales hold the activations' per-tensor scale times
      // the weight's, in f32 (as golden-stick keeps them: in float16 they
      // would be subnormal).
      Type scaleElement = calibrated ? Float32Type::get(context) : element;
      auto scaleType = groupSize > 0 ? RankedTensorType::get({k / groupSize, n},
                                                             scaleElement)
                                     : RankedTensorType::get({n}, scaleElement);
      OpBuilder builder(context);
      builder.setInsertionPointAfter(parameter);
      addCompanion(builder, parameter, scaleName, scaleType,
                   calibrated ? StringAttr() : mindFormersScaleName(parameter),
                   groupSize > 0 ? CompanionDims{1, 0} : CompanionDims{0, -1});
      std::optional<StaticRows> rows;
      if (calibrated) {
        // mfc's own names: golden-stick's deployed SmoothQuant checkpoints
        // keep the weight's scales otherwise (docs/quantization.md).
        rows =
            StaticRows{(name + "_input_scale").str(),
                       RankedTensorType::get({k}, element),
                       (name + "_input_zero_point").str(),
                       RankedTensorType::get({k}, IntegerType::get(context, 8)),
                       (name + "_bias").str(),
                       RankedTensorType::get({n}, element)};
        addCompanion(builder, parameter, rows->scaleName, rows->scaleType,
                     StringAttr(), CompanionDims{-1, 0});
        addCompanion(builder, parameter, rows->zeroPointName,
                     rows->zeroPointType, StringAttr(), CompanionDims{-1, 0});
        // Added after a row-parallel product's partial sums are summed:
        // whole there.
        addCompanion(builder, parameter, rows->biasName, rows->biasType,
                     StringAttr(), CompanionDims{0, -1});
        parameter.setQuantInputScaleAttr(
            FlatSymbolRefAttr::get(context, rows->scaleName));
        parameter.setQuantInputZeroPointAttr(
            FlatSymbolRefAttr::get(context, rows->zeroPointName));
        parameter.setQuantBiasAttr(
            FlatSymbolRefAttr::get(context, rows->biasName));
        if (smoothAlpha >= 0.0) {
          parameter.setQuantSmoothAlphaAttr(
              FloatAttr::get(Float64Type::get(context), smoothAlpha));
        }
      }
      auto quantizedType = RankedTensorType::get({n, bits == 4 ? k / 2 : k},
                                                 IntegerType::get(context, 8));
      parameter.setType(quantizedType);
      parameter.setQuantScaleAttr(FlatSymbolRefAttr::get(context, scaleName));
      IntegerType i64 = IntegerType::get(context, 64);
      if (groupSize > 0) {
        parameter.setQuantGroupAttr(IntegerAttr::get(i64, groupSize));
      }
      if (bits != 8) {
        parameter.setQuantBitsAttr(IntegerAttr::get(i64, bits));
      }
      for (ParamOp read : reads[name]) {
        builder.setInsertionPoint(read);
        Location loc = read.getLoc();
        Value values = ParamOp::create(builder, loc, quantizedType, name);
        Value scales = ParamOp::create(builder, loc, scaleType, scaleName);
        Value weight =
            DequantizeOp::create(builder, loc, values, scales, groupSize, bits);

        // The casts to the compute dtype are the dequantization's now;
        // lookups in a tied table read its rows and their scales. (A
        // calibrated weight's f32 values are multiplied in f32: the products
        // are rebuilt by quantizeRowsStatically.)
        for (Operation *user : llvm::make_early_inc_range(read->getUsers())) {
          if (isa<CastOp>(user)) {
            user->getResult(0).replaceAllUsesWith(weight);
            user->erase();
          } else if (auto embedding = dyn_cast<EmbeddingOp>(user)) {
            builder.setInsertionPoint(embedding);
            embedding.getResult().replaceAllUsesWith(
                bits == 4
                    ? lookUpInt4(builder, embedding, values, scales, groupSize)
                    : lookUpQuantized(builder, embedding, values, scales));
            embedding.erase();
          }
        }
        read.getResult().replaceAllUsesWith(weight);
        read.erase();
        if (weight.use_empty()) { // the read was only looked up in
          weight.getDefiningOp()->erase();
        } else if (int8Rows) {
          quantizeRows(weight, rowsOf);
        } else if (calibrated) {
          quantizeRowsStatically(weight, *rows);
        }
      }
    }
  }

  /// SmoothQuant: the rows of each product by `weight` quantized by the
  /// weight's own calibrated scales and zero points (mf.quantize), which
  /// the product multiplies as they are; the bias corrects it for the zero
  /// point.
  void quantizeRowsStatically(Value weight, const StaticRows &companions) {
    for (Operation *user : llvm::make_early_inc_range(weight.getUsers())) {
      // The product of the int8 values in f32, as golden-stick's
      // QuantBatchMatmul scales its int32 sums by the f32 scales, then in
      // the compute dtype with the bias added.
      auto matmul = cast<MatmulOp>(user);
      OpBuilder builder(matmul);
      Location loc = matmul.getLoc();
      Value lhs = matmul.getLhs();
      Type f32 = builder.getF32Type();
      Value scales = ParamOp::create(builder, loc, companions.scaleType,
                                     companions.scaleName);
      Value zeroPoints = ParamOp::create(builder, loc, companions.zeroPointType,
                                         companions.zeroPointName);
      Value values = QuantizeOp::create(builder, loc, lhs, scales, zeroPoints);
      Value rows = CastOp::create(
          builder, loc, cast<RankedTensorType>(lhs.getType()).clone(f32),
          values);
      RankedTensorType resultType = matmul.getType();
      Value product =
          MatmulOp::create(builder, loc, rows, weight, matmul.getTransposeLhs(),
                           matmul.getTransposeRhs());
      if (resultType.getElementType() != f32) {
        product = CastOp::create(builder, loc, resultType, product);
      }
      Value bias = ParamOp::create(builder, loc, companions.biasType,
                                   companions.biasName);
      Value spread = BroadcastOp::create(builder, loc, resultType, bias);
      Value sum = AddOp::create(builder, loc, product, spread);
      matmul.getResult().replaceAllUsesWith(sum);
      matmul.erase();
    }
  }

  /// W8A8: the rows that each product by `weight` (an mf.dequantize)
  /// multiplies, quantized per token; `rowsOf` shares one quantization of
  /// an operand among its products (a layer's q, k and v).
  void quantizeRows(Value weight, llvm::DenseMap<Value, Value> &rowsOf) {
    for (Operation *user : weight.getUsers()) {
      // (A Linear's product: its rows [..., M, K] are not transposed.)
      auto matmul = cast<MatmulOp>(user);
      Value lhs = matmul.getLhs();
      auto [known, added] = rowsOf.try_emplace(lhs);
      if (added) {
        OpBuilder builder(matmul);
        if (Operation *producer = lhs.getDefiningOp()) {
          builder.setInsertionPointAfter(producer);
        } else {
          builder.setInsertionPointToStart(cast<BlockArgument>(lhs).getOwner());
        }
        auto quantize =
            DynamicQuantizeOp::create(builder, matmul.getLoc(), lhs);
        known->second = DequantizeOp::create(
            builder, matmul.getLoc(), quantize.getValues(),
            quantize.getScales(), /*group_size=*/0, /*bits=*/8);
      }
      matmul.getLhsMutable().assign(known->second);
    }
  }
};

} // namespace
