//===- MFOps.cpp - mf dialect operations ----------------------------------===//
//
// Verifiers state the expected shape next to the one found; folders and
// canonicalization patterns remove shape no-ops; cost methods feed the
// fusion and memory cost models.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "shapes/ShapeRules.h"

#include <cmath>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>

using namespace mlir;
using namespace mlir::mf;

#include "dialects/MF/IR/MFEnums.cpp.inc"
#include "dialects/MF/IR/MFInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Renders a shape as `[1, 8, 64]` for diagnostics.
std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

int64_t elementBytes(Type elementType) {
  return std::max<int64_t>(1, elementType.getIntOrFloatBitWidth() / 8);
}

int64_t numElements(Value value) { return tensorType(value).getNumElements(); }

} // namespace

static constexpr StringLiteral kModelPathsTag = "model-paths";

std::vector<std::string> mf::getModelPaths(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc)) {
    return {named.getName().str()};
  }
  std::vector<std::string> paths;
  auto fused = dyn_cast<FusedLoc>(loc);
  auto tag = fused ? dyn_cast_or_null<StringAttr>(fused.getMetadata()) : nullptr;
  if (tag && tag.getValue() == kModelPathsTag) {
    for (Location part : fused.getLocations()) {
      if (auto named = dyn_cast<NameLoc>(part)) {
        paths.push_back(named.getName().str());
      }
    }
  }
  return paths;
}

std::pair<StringRef, StringRef> mf::splitLayerPath(StringRef path) {
  SmallVector<StringRef, 4> names;
  path.split(names, '.', /*MaxSplit=*/3);
  unsigned index;
  if (names.size() == 4 && (names[1] == "layers" || names[1] == "h") &&
      !names[2].getAsInteger(10, index)) {
    size_t end = names[0].size() + names[1].size() + names[2].size() + 2;
    return {path.take_front(end), path.drop_front(end + 1)};
  }
  return {"", ""};
}

std::string mf::getModelPath(Location loc) {
  std::vector<std::string> paths = getModelPaths(loc);
  return paths.empty() ? "" : paths.front();
}

Location mf::getModelPathsLoc(MLIRContext *context, ArrayRef<Location> paths) {
  return FusedLoc::get(paths, StringAttr::get(context, kModelPathsTag),
                       context);
}

int64_t mf::detail::countResultElements(Operation *op) {
  int64_t count = 0;
  for (Value result : op->getResults()) {
    count += numElements(result);
  }
  return count;
}

int64_t mf::detail::countOperandAndResultBytes(Operation *op) {
  int64_t bytes = 0;
  auto add = [&](Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (type && type.hasStaticShape()) {
      bytes += type.getNumElements() * elementBytes(type.getElementType());
    }
  };
  llvm::for_each(op->getOperands(), add);
  llvm::for_each(op->getResults(), add);
  return bytes;
}

//===----------------------------------------------------------------------===//
// ParameterOp / ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (getInit() == ParameterInit::normal) {
    if (!getStd() || getStd()->convertToDouble() <= 0.0) {
      return emitOpError() << "init = normal needs a positive 'std' attribute";
    }
  } else if (getStd()) {
    return emitOpError() << "'std' is only meaningful with init = normal";
  }
  if (getGrid().has_value() != (getSplitAxesAttr() != nullptr)) {
    return emitOpError() << "needs both a grid and split_axes, or neither";
  }
  if (getPanels() && (getTensorType().getRank() != 2 || getState())) {
    return emitOpError() << "panels needs a 2-D weight [N, K], not "
                         << (getState() ? "training state"
                                        : "a rank-" +
                                              std::to_string(
                                                  getTensorType().getRank()) +
                                              " tensor");
  }
  if (getDotPanels() &&
      (getPanels() || getState() || !getQuantScale() ||
       getQuantBits().value_or(8) != 8 || getQuantGroup() ||
       getTensorType().getRank() != 2 || getTensorType().getDimSize(1) % 4)) {
    return emitOpError() << "dot_panels needs an int8 weight [N, K] with one "
                            "scale per row and K a multiple of 4, read in one "
                            "layout (not also panels)";
  }
  // i8: a quantized weight's values, or (rank 1, no scales) a calibrated
  // weight's zero points.
  bool i8 = getTensorType().getElementType().isInteger(8);
  bool integer = i8 && (getTensorType().getRank() != 1 || getQuantScale());
  if (integer && getTensorType().getRank() != 2) {
    return emitOpError() << "a quantized parameter is a 2-D weight [N, K], "
                            "not a rank-"
                         << getTensorType().getRank() << " tensor";
  }
  if (integer != getQuantScale().has_value()) {
    return emitOpError() << (integer ? "holds i8 values but names no scales "
                                       "(quantized(@scales))"
                                     : "names scales but holds floats, not i8");
  }
  if ((getQuantGroup() || getQuantBits()) && !integer) {
    return emitOpError() << "has a quantization group or bits but is not "
                            "quantized";
  }
  if (getQuantBits() && *getQuantBits() != 4 && *getQuantBits() != 8) {
    return emitOpError() << "quantized to " << *getQuantBits()
                         << " bits; 8 and 4 are supported";
  }
  bool calibrated = getQuantInputScale() || getQuantInputZeroPoint() ||
                    getQuantBias() || getQuantSmoothAlpha();
  if (calibrated && !(getQuantInputScale() && getQuantInputZeroPoint() &&
                      getQuantBias())) {
    return emitOpError() << "calibrated activations need input scales, zero "
                            "points and a bias (calibrated(@scales, "
                            "@zero_points, @bias))";
  }
  if (calibrated &&
      (!integer || getQuantBits().value_or(8) != 8 || getQuantGroup())) {
    return emitOpError() << "calibrated activations need int8 values with "
                            "one scale per row";
  }
  if (FloatAttr alpha = getQuantSmoothAlphaAttr();
      alpha &&
      !(alpha.getValueAsDouble() >= 0.0 && alpha.getValueAsDouble() <= 1.0)) {
    return emitOpError() << "smooth = " << alpha.getValueAsDouble()
                         << " is not a migration strength in [0, 1]";
  }
  if (getCalibratedScales() &&
      (i8 || getState() || getTensorType().getRank() < 1 ||
       getCalibratedScales()->empty())) {
    return emitOpError() << "calibrated_scales needs a float tensor of "
                            "scales (not training state) and the name of "
                            "the calibration's ranges";
  }
  if (integer && getState()) {
    return emitOpError() << "a quantized parameter is a weight, not training "
                            "state";
  }
  if (getSplitAxesAttr() && static_cast<int64_t>(getSplitAxesAttr().size()) >
                                getTensorType().getRank()) {
    return emitOpError() << "split_axes has " << getSplitAxesAttr().size()
                         << " entries for a rank-" << getTensorType().getRank()
                         << " parameter";
  }
  // Split along its parts if at all (what model.bin records).
  bool splitElsewhere =
      getSplitAxesAttr() &&
      llvm::any_of(llvm::drop_begin(getSplitAxesAttr().getAxes()),
                   [](DenseI16ArrayAttr axes) { return !axes.empty(); });
  if (ArrayAttr parts = getPartsAttr();
      parts &&
      (getTensorType().getRank() < 1 || parts.size() < 1 ||
       getTensorType().getDimSize(0) != static_cast<int64_t>(parts.size()) ||
       integer || getSplitGroups() || splitElsewhere)) {
    return emitOpError() << "has " << parts.size()
                         << " parts, which must be the slices of a float "
                            "weight's dimension 0 ("
                         << getTensorType() << ")";
  }
  if (getSplitGroups()) {
    int64_t splitDims = getSplitAxesAttr()
                            ? llvm::count_if(getSplitAxesAttr().getAxes(),
                                             [](DenseI16ArrayAttr axes) {
                                               return !axes.empty();
                                             })
                            : 0;
    if (splitDims != 1) {
      return emitOpError() << "groups = " << *getSplitGroups()
                           << " needs exactly one split dimension";
    }
  }
  return success();
}

/// The shard.grid `name` refers to from `op`, or a diagnostic.
static FailureOr<shard::GridOp> lookUpGrid(Operation *op, FlatSymbolRefAttr name,
                                           SymbolTableCollection &symbolTable) {
  auto grid = symbolTable.lookupNearestSymbolFrom<shard::GridOp>(op, name);
  if (!grid) {
    return op->emitOpError() << "'" << name.getValue()
                             << "' does not name a shard.grid";
  }
  if (ShapedType::isDynamicShape(grid.getShape())) {
    return op->emitOpError() << "grid '" << name.getValue()
                             << "' must have a static shape";
  }
  return grid;
}

/// Checks that `axes` are distinct axes of `grid`, none used before (in
/// `seen`).
static LogicalResult verifyGridAxes(Operation *op, shard::GridOp grid,
                                    ArrayRef<int16_t> axes,
                                    llvm::SmallBitVector &seen) {
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= grid.getRank()) {
      return op->emitOpError() << "grid axis " << axis << " is not an axis of '"
                               << grid.getSymName() << "' (rank "
                               << grid.getRank() << ")";
    }
    if (seen.test(axis)) {
      return op->emitOpError() << "grid axis " << axis << " is used twice";
    }
    seen.set(axis);
  }
  return success();
}

namespace {
/// A value type as the shape rules (shapes/ShapeRules.h) take it.
mfshapes::TensorInfo infoOf(Type valueType);
mfshapes::TensorInfo infoOf(Value value);
/// `op`'s declared results against what its rule (shapes/ShapeRules.h)
/// infers, or the rule's error.
LogicalResult verifyRule(Operation *op, const mfshapes::Inferred &rule);
/// The rule's problem with `op`'s declared results, if any.
LogicalResult verifyRule(Operation *op, const std::string &problem);
/// `rule`'s result types in `types` (inferReturnTypes), or its error at
/// `loc`.
LogicalResult inferredTypes(MLIRContext *context, std::optional<Location> loc,
                            StringRef opName, const mfshapes::Inferred &rule,
                            SmallVectorImpl<Type> &types);
} // namespace

LogicalResult ParameterOp::verifyCompanionSplit(ParameterOp companion,
                                                CompanionDims dims) {
  shard::GridAxesArrayAttr expected =
      companionSplitAxes(*this, companion.getTensorType().getRank(), dims);
  bool splitAlongN =
      expected && dims.n >= 0 && !expected.getAxes()[dims.n].empty();
  if (companion.getSplitAxesAttr() == expected &&
      (!expected || companion.getGridAttr() == getGridAttr()) &&
      companion.getSplitGroupsAttr() ==
          (splitAlongN ? getSplitGroupsAttr() : IntegerAttr())) {
    return success();
  }
  InFlightDiagnostic diag = emitOpError()
                            << "'" << companion.getSymName()
                            << "' must be split over the grid as this "
                               "weight's block needs: ";
  if (expected) {
    diag << expected;
  } else {
    diag << "whole on every rank";
  }
  return diag;
}

LogicalResult
ParameterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (getQuantScale()) {
    // The values and scales are what mf.dequantize reads: its rule says
    // whether they fit.
    auto scale = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
        *this, getQuantScaleAttr());
    if (!scale || scale.getQuantScale()) {
      return emitOpError() << "scales '" << getQuantScaleAttr().getValue()
                           << "' must name a parameter that is not quantized";
    }
    mfshapes::Inferred rule = mfshapes::inferDequantize(
        infoOf(getType()), infoOf(scale.getType()), getQuantGroup().value_or(0),
        getQuantBits().value_or(8));
    if (!rule) {
      return emitOpError() << "does not fit its scales '"
                           << getQuantScaleAttr().getValue()
                           << "': " << rule.error;
    }
    if (failed(verifyCompanionSplit(scale, getQuantGroup()
                                               ? CompanionDims{1, 0}
                                               : CompanionDims{0, -1}))) {
      return failure();
    }
  }
  if (getQuantInputScale()) {
    // What mf.quantize reads ([K] scales and zero points) and the bias
    // ([N], floats).
    int64_t rows = getTensorType().getDimSize(0);
    int64_t channels = getTensorType().getDimSize(1);
    // The input scales and the bias in one float type (the compute
    // dtype), the weight's scales f32.
    Type floatType;
    auto check = [&](FlatSymbolRefAttr name, int64_t size, bool i8,
                     StringRef what, CompanionDims dims) -> LogicalResult {
      auto companion =
          symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, name);
      Type element =
          companion ? companion.getTensorType().getElementType() : Type();
      bool fits = companion && !companion.getQuantScale() &&
                  !companion.getPartsAttr() &&
                  companion.getTensorType().getShape() ==
                      ArrayRef<int64_t>{size} &&
                  (i8 ? element.isInteger(8)
                      : isa<FloatType>(element) &&
                            (!floatType || element == floatType));
      if (!fits) {
        return emitOpError()
               << what << " '" << name.getValue() << "' must name "
               << (i8 ? "an i8" : "a float") << " parameter [" << size << "]"
               << (i8 ? "" : " (the input scales and the bias of one type)");
      }
      if (!i8) {
        floatType = element;
      }
      return verifyCompanionSplit(companion, dims);
    };
    // The input scales and zero points hold K, the bias N.
    if (failed(check(getQuantInputScaleAttr(), channels, false, "input scales",
                     CompanionDims{-1, 0})) ||
        failed(check(getQuantInputZeroPointAttr(), channels, true,
                     "input zero points", CompanionDims{-1, 0})) ||
        failed(check(getQuantBiasAttr(), rows, false, "bias",
                     CompanionDims{0, -1}))) {
      return failure();
    }
    auto scale = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
        *this, getQuantScaleAttr());
    if (!scale.getTensorType().getElementType().isF32()) {
      return emitOpError() << "a calibrated weight's scales '"
                           << getQuantScaleAttr().getValue()
                           << "' are f32 (they hold the activations' scale "
                              "too)";
    }
  }
  if (!getGrid()) {
    return success();
  }
  FailureOr<shard::GridOp> grid = lookUpGrid(*this, getGridAttr(), symbolTable);
  if (failed(grid)) {
    return failure();
  }
  llvm::SmallBitVector seen(grid->getRank());
  ArrayRef<int64_t> shape = getTensorType().getShape();
  ArrayRef<int64_t> gridShape = grid->getShape();
  for (auto [dim, axes] : llvm::enumerate(getSplitAxesAttr().getAxes())) {
    if (failed(verifyGridAxes(*this, *grid, axes.asArrayRef(), seen))) {
      return failure();
    }
    int64_t ways = 1;
    for (int16_t axis : axes.asArrayRef()) {
      ways *= gridShape[axis];
    }
    int64_t parts = axes.empty() ? 1 : getSplitPartCount();
    if (shape[dim] % (ways * parts) != 0) {
      return emitOpError() << "dimension " << dim << " (" << shape[dim]
                           << ") cannot be split " << ways << " ways"
                           << (parts > 1 ? " in each of its " +
                                               std::to_string(parts) + " parts"
                                         : std::string());
    }
  }
  return success();
}

shard::GridAxesArrayAttr
mf::companionSplitAxes(ParameterOp weight, int64_t rank, CompanionDims dims) {
  shard::GridAxesArrayAttr weightAxes = weight.getSplitAxesAttr();
  if (!weightAxes) {
    return {};
  }
  MLIRContext *context = weight.getContext();
  SmallVector<shard::GridAxesAttr> axes(rank,
                                        DenseI16ArrayAttr::get(context, {}));
  bool split = false;
  for (auto [weightDim, companionDim] :
       {std::pair<int64_t, int64_t>{0, dims.n}, {1, dims.k}}) {
    if (companionDim >= 0 &&
        weightDim < static_cast<int64_t>(weightAxes.size()) &&
        !weightAxes.getAxes()[weightDim].empty()) {
      axes[companionDim] = weightAxes.getAxes()[weightDim];
      split = true;
    }
  }
  return split ? shard::GridAxesArrayAttr::get(context, axes)
               : shard::GridAxesArrayAttr();
}

RankedTensorType ParameterOp::getShardType(shard::GridOp grid) {
  RankedTensorType type = getTensorType();
  if (!getSplitAxesAttr() || !grid) {
    return type;
  }
  SmallVector<int64_t> shape(type.getShape());
  for (auto [dim, axes] : llvm::enumerate(getSplitAxesAttr().getAxes())) {
    for (int16_t axis : axes.asArrayRef()) {
      shape[dim] /= grid.getShape()[axis];
    }
  }
  return type.clone(shape);
}

/// The mf.parameter `name` that `op` reads or writes as a value of `type`.
static FailureOr<ParameterOp>
lookUpParameter(Operation *op, FlatSymbolRefAttr name, Type type,
                SymbolTableCollection &symbolTable) {
  auto parameter = symbolTable.lookupNearestSymbolFrom<ParameterOp>(op, name);
  if (!parameter) {
    return op->emitOpError() << "'" << name.getValue()
                             << "' does not name an mf.parameter";
  }
  if (parameter.getType() == type) {
    return parameter;
  }
  // A sharded program reads each rank's block.
  if (parameter.getGrid()) {
    auto grid = symbolTable.lookupNearestSymbolFrom<shard::GridOp>(
        op, parameter.getGridAttr());
    if (grid && parameter.getShardType(grid) == type) {
      return parameter;
    }
    return op->emitOpError() << "type " << type << " is neither "
                             << parameter.getType() << " of parameter '"
                             << name.getValue() << "' nor its block "
                             << (grid ? Type(parameter.getShardType(grid))
                                      : Type())
                             << " on one rank";
  }
  return op->emitOpError() << "type " << type << " does not match "
                           << parameter.getType() << " of parameter '"
                           << name.getValue() << "'";
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return lookUpParameter(*this, getNameAttr(), getType(), symbolTable);
}

int64_t ParamOp::getFlops() { return 0; }
int64_t ParamOp::getBytesAccessed() { return 0; }

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParameterOp> parameter =
      lookUpParameter(*this, getNameAttr(), getType(), symbolTable);
  if (failed(parameter)) {
    return failure();
  }
  if (parameter->getFrozen()) {
    return emitOpError() << "assigns frozen parameter '" << getName()
                         << "'; frozen parameters are never updated";
  }
  if (parameter->getPanels()) {
    return emitOpError() << "assigns parameter '" << getName()
                         << "', which kernels read as panels packed once; a "
                            "module that updates a weight reads it as stored";
  }
  return success();
}

// A copy into the parameter at most; what it costs is the value's bytes,
// which its producer already counts.
int64_t AssignOp::getFlops() { return 0; }
int64_t AssignOp::getBytesAccessed() { return 0; }

//===----------------------------------------------------------------------===//
// ConstantOp / IotaOp / CastOp / BroadcastOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

int64_t ConstantOp::getFlops() { return 0; }
int64_t ConstantOp::getBytesAccessed() { return 0; }

int64_t IotaOp::getFlops() { return 0; }

LogicalResult IotaOp::verify() {
  return verifyRule(
      *this, mfshapes::checkDimension(getDimension(), getType().getRank()));
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  return {};
}

LogicalResult BroadcastOp::verify() {
  return verifyRule(
      *this, mfshapes::checkBroadcast(infoOf(getInput()), infoOf(getResult())));
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  // x + 0 = x for integers (positions past an empty cache); floats keep
  // the add, which turns -0 into +0.
  auto isIntegerZero = [](Attribute value) {
    auto splat = dyn_cast_or_null<SplatElementsAttr>(value);
    return splat && isa<IntegerType>(splat.getElementType()) &&
           splat.getSplatValue<APInt>().isZero();
  };
  if (isIntegerZero(adaptor.getRhs())) {
    return getLhs();
  }
  if (isIntegerZero(adaptor.getLhs())) {
    return getRhs();
  }
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  // A splat is the same splat at any shape.
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput())) {
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  }
  return {};
}

int64_t BroadcastOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// Elementwise costs (activations without attributes declare theirs in ODS:
// MF_CostedUnaryOp)
//===----------------------------------------------------------------------===//

int64_t GeluOp::getFlops() {
  return (getApproximate() == GeluApproximation::tanh ? 9 : 6) *
         numElements(getResult());
}

int64_t SwiGluOp::getFlops() { return 5 * numElements(getResult()); }

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferReduction(infoOf(adaptor.getInput()),
                                                adaptor.getDimension()),
                       types);
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferReduction(infoOf(adaptor.getInput()),
                                                adaptor.getDimension()),
                       types);
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  return verifyRule(
      *this, mfshapes::checkReshape(infoOf(getInput()), infoOf(getResult())));
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput())) {
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  }
  return {};
}

namespace {
/// reshape(reshape(x)) -> reshape(x): only the final shape matters.
struct ComposeReshapes : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto producer = op.getInput().getDefiningOp<ReshapeOp>();
    if (!producer) {
      return rewriter.notifyMatchFailure(op, "input is not a reshape");
    }
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(),
                                           producer.getInput());
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<ComposeReshapes>(context);
}

int64_t ReshapeOp::getFlops() { return 0; }

int64_t RecomputeBarrierOp::getFlops() { return 0; }
int64_t RecomputeBarrierOp::getBytesAccessed() { return 0; }

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferTranspose(infoOf(adaptor.getInput()),
                                                adaptor.getPermutation().vec()),
                       types);
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> permutation = getPermutation();
  for (auto [index, dim] : llvm::enumerate(permutation)) {
    if (static_cast<int64_t>(index) != dim) {
      return {};
    }
  }
  return getInput();
}

namespace {
/// transpose(transpose(x, p1), p2) -> transpose(x, p1 o p2).
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto producer = op.getInput().getDefiningOp<TransposeOp>();
    if (!producer) {
      return rewriter.notifyMatchFailure(op, "input is not a transpose");
    }
    SmallVector<int64_t> composed;
    for (int64_t dim : op.getPermutation()) {
      composed.push_back(producer.getPermutation()[dim]);
    }
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(),
                                             producer.getInput(), composed);
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ComposeTransposes>(context);
}

int64_t TransposeOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// SliceOp / ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::verify() {
  return verifyRule(*this, mfshapes::checkSlice(infoOf(getInput()),
                                                infoOf(getResult()),
                                                getOffsets().vec()));
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  return {};
}

int64_t SliceOp::getFlops() { return 0; }

LogicalResult ConcatOp::verify() {
  std::vector<mfshapes::TensorInfo> inputs;
  for (Value input : getInputs()) {
    inputs.push_back(infoOf(input));
  }
  return verifyRule(*this, mfshapes::checkConcat(inputs, infoOf(getResult()),
                                                 getDimension()));
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1) {
    return getInputs().front();
  }
  return {};
}

int64_t ConcatOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferEmbedding(infoOf(adaptor.getTable()),
                                                infoOf(adaptor.getIds())),
                       types);
}

int64_t EmbeddingOp::getFlops() { return 0; }

int64_t EmbeddingOp::getBytesAccessed() {
  // Reads the ids and one table row per id, writes the rows.
  int64_t rowBytes = getType().getNumElements() *
                     elementBytes(getType().getElementType());
  return numElements(getIds()) * 4 + 2 * rowBytes;
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::verify() {
  return verifyRule(
      *this,
      mfshapes::inferNorm(infoOf(getInput()), {infoOf(getWeight())}, "weight"));
}

int64_t RmsNormOp::getFlops() { return 4 * numElements(getResult()); }

LogicalResult LayerNormOp::verify() {
  return verifyRule(
      *this, mfshapes::inferNorm(infoOf(getInput()),
                                 {infoOf(getWeight()), infoOf(getBias())},
                                 "weight and bias"));
}

int64_t LayerNormOp::getFlops() { return 8 * numElements(getResult()); }

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// The [rows, cols] of the last two dims of `type`, transposed if asked.
std::pair<int64_t, int64_t> matrixDims(RankedTensorType type, bool transpose) {
  int64_t rank = type.getRank();
  int64_t rows = type.getDimSize(rank - 2), cols = type.getDimSize(rank - 1);
  return transpose ? std::make_pair(cols, rows) : std::make_pair(rows, cols);
}
} // namespace

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferMatmul(infoOf(adaptor.getLhs()),
                                             infoOf(adaptor.getRhs()),
                                             adaptor.getTransposeLhs(),
                                             adaptor.getTransposeRhs()),
                       types);
}

int64_t MatmulOp::getFlops() {
  auto [m, k] = matrixDims(getLhs().getType(), getTransposeLhs());
  int64_t n = getType().getShape().back();
  int64_t batch = getType().getNumElements() / (m * n);
  return 2 * batch * m * n * k;
}

//===----------------------------------------------------------------------===//
// SoftmaxOp / RopeOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return verifyRule(
      *this, mfshapes::checkDimension(getDimension(), getType().getRank()));
}

int64_t SoftmaxOp::getFlops() { return 5 * numElements(getResult()); }

LogicalResult RopeOp::verify() {
  std::vector<double> scales;
  if (std::optional<ArrayRef<double>> frequencyScale = getFrequencyScale()) {
    scales = frequencyScale->vec();
  }
  return verifyRule(
      *this, mfshapes::inferRope(infoOf(getInput()), infoOf(getPositions()),
                                 getTheta().convertToDouble(), scales));
}

int64_t RopeOp::getFlops() { return 6 * numElements(getResult()); }

//===----------------------------------------------------------------------===//
// AttentionOp / KvCacheWriteOp
//===----------------------------------------------------------------------===//

/// A position operand's type: tensor<i32> unless written after a colon
/// (one position per batch row: `%rows : tensor<2xi32>`).
static ParseResult parsePositionType(OpAsmParser &parser, Type &type) {
  if (succeeded(parser.parseOptionalColon())) {
    return parser.parseType(type);
  }
  type = RankedTensorType::get({}, parser.getBuilder().getI32Type());
  return success();
}

static void printPositionType(OpAsmPrinter &printer, Operation *, Type type) {
  if (cast<RankedTensorType>(type).getRank() != 0) {
    printer << " : " << type;
  }
}

/// The same after the op's other types: `, tensor<2xi32>` or nothing.
static ParseResult parseTrailingPositionType(OpAsmParser &parser, Type &type) {
  if (succeeded(parser.parseOptionalComma())) {
    return parser.parseType(type);
  }
  type = RankedTensorType::get({}, parser.getBuilder().getI32Type());
  return success();
}

static void printTrailingPositionType(OpAsmPrinter &printer, Operation *,
                                      Type type) {
  if (cast<RankedTensorType>(type).getRank() != 0) {
    printer << ", " << type;
  }
}

LogicalResult AttentionOp::verify() {
  auto optional = [](Value value) -> std::optional<mfshapes::TensorInfo> {
    if (!value) {
      return std::nullopt;
    }
    return infoOf(value);
  };
  std::optional<mfshapes::TensorInfo> past = optional(getPastLength()),
                                      table = optional(getBlockTable()),
                                      keyScale = optional(getKeyScale()),
                                      valueScale = optional(getValueScale());
  auto pointer = [](std::optional<mfshapes::TensorInfo> &info) {
    return info ? &*info : nullptr;
  };
  return verifyRule(
      *this, mfshapes::inferAttention(infoOf(getQuery()), infoOf(getKey()),
                                      infoOf(getValue()), pointer(past),
                                      pointer(table), pointer(keyScale),
                                      pointer(valueScale), getCausal()));
}

int64_t AttentionOp::getFlops() {
  RankedTensorType query = getQuery().getType(), key = getKey().getType();
  // A paged pool's rows are each row's keys as its block table maps them.
  int64_t keys = key.getDimSize(1);
  if (Value table = getBlockTable()) {
    keys *= cast<RankedTensorType>(table.getType()).getDimSize(1);
  }
  int64_t pairs =
      query.getDimSize(0) * query.getDimSize(2) * query.getDimSize(1) * keys;
  // QK^T and PV are 2*D each per (query, key) pair; softmax about 5.
  return pairs * (4 * query.getDimSize(3) + 5);
}

LogicalResult KvCacheWriteOp::verify() {
  std::optional<mfshapes::TensorInfo> table;
  if (getBlockTable()) {
    table = infoOf(getBlockTable());
  }
  return verifyRule(*this,
                    mfshapes::inferKvCacheWrite(
                        infoOf(getCache()), infoOf(getUpdate()),
                        infoOf(getPosition()), table ? &*table : nullptr));
}

int64_t KvCacheWriteOp::getFlops() { return 0; }

int64_t KvCacheWriteOp::getBytesAccessed() {
  // Updated in place: the new rows are read and written, the rest untouched.
  RankedTensorType update = getUpdate().getType();
  return 2 * update.getNumElements() * elementBytes(update.getElementType()) +
         4;
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferCrossEntropy(infoOf(adaptor.getLogits()),
                                                   infoOf(adaptor.getLabels())),
                       types);
}

int64_t CrossEntropyOp::getFlops() {
  return 5 * getLogits().getType().getNumElements();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

namespace {

} // namespace

int64_t SiluGradOp::getFlops() { return 8 * numElements(getResult()); }

int64_t GeluGradOp::getFlops() { return 14 * numElements(getResult()); }

LogicalResult EmbeddingGradOp::verify() {
  return verifyRule(*this, mfshapes::checkEmbeddingGrad(infoOf(getIds()),
                                                        infoOf(getGrad()),
                                                        infoOf(getResult())));
}

int64_t EmbeddingGradOp::getFlops() { return numElements(getGrad()); }

LogicalResult RmsNormGradOp::verify() {
  return verifyRule(*this, mfshapes::checkNormGrad(
                               infoOf(getInput()), infoOf(getWeight()),
                               infoOf(getGrad()), infoOf(getResult()), getWrt(),
                               /*weights=*/1));
}

int64_t RmsNormGradOp::getFlops() { return 8 * numElements(getInput()); }

LogicalResult LayerNormGradOp::verify() {
  return verifyRule(*this, mfshapes::checkNormGrad(
                               infoOf(getInput()), infoOf(getWeight()),
                               infoOf(getGrad()), infoOf(getResult()), getWrt(),
                               /*weights=*/2));
}

int64_t LayerNormGradOp::getFlops() { return 12 * numElements(getInput()); }

LogicalResult AttentionGradOp::verify() {
  std::optional<mfshapes::TensorInfo> past;
  if (getPastLength()) {
    past = infoOf(getPastLength());
  }
  return verifyRule(
      *this, mfshapes::checkAttentionGrad(infoOf(getQuery()), infoOf(getKey()),
                                          infoOf(getValue()), infoOf(getGrad()),
                                          past ? &*past : nullptr,
                                          infoOf(getResult()), getWrt()));
}

int64_t AttentionGradOp::getFlops() {
  RankedTensorType query = getQuery().getType(), key = getKey().getType();
  int64_t pairs = query.getDimSize(0) * query.getDimSize(2) *
                  query.getDimSize(1) * key.getDimSize(1);
  // The softmax again, then one or two products per pair.
  return pairs * (8 * query.getDimSize(3) + 10);
}

LogicalResult CrossEntropyGradOp::verify() {
  return verifyRule(*this, mfshapes::inferCrossEntropyGrad(infoOf(getLogits()),
                                                           infoOf(getLabels()),
                                                           infoOf(getGrad())));
}

int64_t CrossEntropyGradOp::getFlops() {
  return 6 * getLogits().getType().getNumElements();
}

LogicalResult PadOp::verify() {
  return verifyRule(*this,
                    mfshapes::checkPad(infoOf(getInput()), infoOf(getResult()),
                                       getOffsets().vec()));
}

int64_t PadOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

LogicalResult FusionOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (getKernelAttr() &&
      !symbols.lookupNearestSymbolFrom(getOperation(), getKernelAttr())) {
    return emitOpError() << "names kernel " << getKernelAttr()
                         << ", which the module does not have";
  }
  return success();
}

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes()) {
    return emitOpError() << "expected block arguments of the input types "
                         << getInputs().getTypes();
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes()) {
    return emitOpError() << "yields " << yield.getValues().getTypes()
                         << " but its results are " << getResultTypes();
  }
  return success();
}

int64_t FusionOp::getFlops() {
  int64_t flops = 0;
  getBody().walk([&](CostOpInterface op) { flops += op.getFlops(); });
  return flops;
}

int64_t FusionOp::getBytesAccessed() {
  // Only the inputs and results reach memory: that is the point of fusing.
  return mf::detail::countOperandAndResultBytes(*this);
}

#define GET_OP_CLASSES
#include "dialects/MF/IR/MFOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// The grid a collective names, after checking that its axes are some
/// distinct axes of it.
static FailureOr<shard::GridOp>
verifyCollectiveAxes(Operation *op, FlatSymbolRefAttr gridName,
                     ArrayRef<int16_t> axes, SymbolTableCollection &symbolTable) {
  FailureOr<shard::GridOp> grid = lookUpGrid(op, gridName, symbolTable);
  if (failed(grid)) {
    return failure();
  }
  if (axes.empty()) {
    return op->emitOpError() << "needs at least one grid axis";
  }
  llvm::SmallBitVector seen(grid->getRank());
  if (failed(verifyGridAxes(op, *grid, axes, seen))) {
    return failure();
  }
  return grid;
}

/// The ranks of a group: the product of the grid's extents along `axes`.
static int64_t ranksAlong(shard::GridOp grid, ArrayRef<int16_t> axes) {
  int64_t ranks = 1;
  for (int16_t axis : axes) {
    ranks *= grid.getShape()[axis];
  }
  return ranks;
}

/// An all-to-all's offsets cut the rows into the same number of segments
/// for each rank of the group.
static LogicalResult verifySegmentsPerRank(Operation *op, shard::GridOp grid,
                                           ArrayRef<int16_t> axes,
                                           RankedTensorType offsets) {
  int64_t ranks = ranksAlong(grid, axes);
  int64_t segments = offsets.getRank() == 1 ? offsets.getShape()[0] - 1 : -1;
  if (segments < 1 || segments % ranks != 0) {
    return op->emitOpError() << "expects offsets of a positive multiple of "
                             << ranks << " segments (one share per rank) plus "
                             << "one, got " << offsets;
  }
  return success();
}

/// A vocabulary-parallel op names a grid and its axes together, or neither.
static LogicalResult verifyVocabSplit(Operation *op, FlatSymbolRefAttr gridName,
                                      std::optional<ArrayRef<int16_t>> axes,
                                      SymbolTableCollection &symbolTable) {
  if (!gridName && !axes) {
    return success();
  }
  if (!gridName || !axes) {
    return op->emitOpError() << "names the vocabulary's grid and its axes "
                                "together (`vocab on @grid axes = [...]`)";
  }
  return verifyCollectiveAxes(op, gridName, *axes, symbolTable);
}

LogicalResult EmbeddingOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyVocabSplit(*this, getGridAttr(), getGridAxes(), symbolTable);
}
LogicalResult EmbeddingGradOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyVocabSplit(*this, getGridAttr(), getGridAxes(), symbolTable);
}
LogicalResult CrossEntropyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyVocabSplit(*this, getGridAttr(), getGridAxes(), symbolTable);
}
LogicalResult CrossEntropyGradOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyVocabSplit(*this, getGridAttr(), getGridAxes(), symbolTable);
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyCollectiveAxes(*this, getGridAttr(), getGridAxes(), symbolTable);
}

LogicalResult
ProcessIndexOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyCollectiveAxes(*this, getGridAttr(), getGridAxes(), symbolTable);
}

LogicalResult ReplicateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyCollectiveAxes(*this, getGridAttr(), getGridAxes(), symbolTable);
}

/// Checks a collective along one dimension: the grid and axes, and that
/// the `whole` side's `dimension` is the `block` side's times the ranks.
static LogicalResult verifyDimCollective(Operation *op, FlatSymbolRefAttr gridName,
                                         ArrayRef<int16_t> axes, int64_t dimension,
                                         RankedTensorType whole,
                                         RankedTensorType block,
                                         SymbolTableCollection &symbolTable) {
  FailureOr<shard::GridOp> grid =
      verifyCollectiveAxes(op, gridName, axes, symbolTable);
  if (failed(grid)) {
    return failure();
  }
  int64_t ranks = ranksAlong(*grid, axes);
  SmallVector<int64_t> expected(block.getShape());
  if (dimension >= block.getRank()) {
    return op->emitOpError() << "dimension " << dimension
                             << " is not a dimension of " << block;
  }
  expected[dimension] *= ranks;
  if (ArrayRef<int64_t>(expected) != whole.getShape()) {
    return op->emitOpError() << "expects the whole " << whole << " to be "
                             << ranks << " blocks " << block
                             << " along dimension " << dimension;
  }
  return success();
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyDimCollective(*this, getGridAttr(), getGridAxes(), getDimension(),
                             getResult().getType(), getInput().getType(),
                             symbolTable);
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyDimCollective(*this, getGridAttr(), getGridAxes(), getDimension(),
                             getInput().getType(), getResult().getType(),
                             symbolTable);
}
LogicalResult ScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyDimCollective(*this, getGridAttr(), getGridAxes(), getDimension(),
                             getInput().getType(), getResult().getType(),
                             symbolTable);
}
LogicalResult
AllToAllDimsOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<shard::GridOp> grid =
      verifyCollectiveAxes(*this, getGridAttr(), getGridAxes(), symbolTable);
  if (failed(grid)) {
    return failure();
  }
  mfshapes::Inferred rule = mfshapes::inferAllToAllDims(
      infoOf(getInput().getType()), ranksAlong(*grid, getGridAxes()),
      getSplitDim(), getConcatDim());
  if (!rule) {
    return emitOpError() << rule.error;
  }
  if (tensorType(getResult()).getShape() !=
      ArrayRef<int64_t>(rule.results.front().shape)) {
    return emitOpError() << "expects the result "
                         << mfshapes::formatShape(rule.results.front().shape)
                         << ", got " << getResult().getType();
  }
  return success();
}
int64_t AllToAllDimsOp::getFlops() { return 0; }
int64_t AllToAllDimsOp::getBytesAccessed() {
  return detail::countOperandAndResultBytes(*this);
}
int64_t AllGatherOp::getFlops() { return 0; }
int64_t AllGatherOp::getBytesAccessed() {
  return detail::countOperandAndResultBytes(*this);
}
int64_t ReduceScatterOp::getFlops() { return getInput().getType().getNumElements(); }
int64_t ReduceScatterOp::getBytesAccessed() {
  return detail::countOperandAndResultBytes(*this);
}
LogicalResult ScatterOp::canonicalize(ScatterOp op, PatternRewriter &rewriter) {
  auto sum = op.getInput().getDefiningOp<AllReduceOp>();
  if (!sum || !sum->hasOneUse() || sum.getGrid() != op.getGrid() ||
      sum.getGridAxes() != op.getGridAxes()) {
    return failure();
  }
  rewriter.replaceOpWithNewOp<ReduceScatterOp>(
      op, op.getType(), sum.getInput(), op.getGridAttr(), op.getGridAxesAttr(),
      op.getDimensionAttr());
  return success();
}

int64_t ScatterOp::getFlops() { return 0; }
int64_t ScatterOp::getBytesAccessed() {
  return detail::countOperandAndResultBytes(*this);
}

// Only its gradient rule is of use: kept until mf-autodiff has
// differentiated a training module (the frontend makes some: context
// parallelism's gathered keys), folded away after it and in other modules.
OpFoldResult ReplicateOp::fold(FoldAdaptor) {
  auto module = (*this)->getParentOfType<ModuleOp>();
  bool differentiated =
      !module || !isTrainingModule(module) ||
      llvm::any_of(module.getOps<SymbolOpInterface>(),
                   [](SymbolOpInterface symbol) {
                     return symbol.getName().ends_with("forward_backward");
                   });
  return differentiated ? getInput() : OpFoldResult();
}
int64_t ProcessIndexOp::getFlops() { return 0; }
int64_t ProcessIndexOp::getBytesAccessed() { return 0; }
int64_t ReplicateOp::getFlops() { return 0; }
int64_t ReplicateOp::getBytesAccessed() { return 0; }

// The sum itself: one add per element; every byte read and written once
// (what crosses the network is the report's, not the cost model's).
int64_t AllReduceOp::getFlops() { return detail::countResultElements(*this); }
int64_t AllReduceOp::getBytesAccessed() {
  return detail::countOperandAndResultBytes(*this);
}

//===----------------------------------------------------------------------===//
// Mixture of experts: result types from shapes/ShapeRules.h
//===----------------------------------------------------------------------===//

namespace {

/// The rules' view of a value's type; an element type the rules do not know
/// (the ODS constraints refuse it first) reads as i32, which no float
/// operand accepts.
mfshapes::TensorInfo infoOf(Type valueType) {
  auto type = cast<RankedTensorType>(valueType);
  Type element = type.getElementType();
  mfshapes::Element kind = element.isF32()        ? mfshapes::Element::F32
                           : element.isF16()      ? mfshapes::Element::F16
                           : element.isBF16()     ? mfshapes::Element::BF16
                           : element.isInteger(8) ? mfshapes::Element::I8
                                                  : mfshapes::Element::I32;
  return {kind,
          std::vector<int64_t>(type.getShape().begin(), type.getShape().end())};
}

mfshapes::TensorInfo infoOf(Value value) { return infoOf(value.getType()); }

Type elementTypeOf(MLIRContext *context, mfshapes::Element element) {
  switch (element) {
  case mfshapes::Element::F32:
    return Float32Type::get(context);
  case mfshapes::Element::F16:
    return Float16Type::get(context);
  case mfshapes::Element::BF16:
    return BFloat16Type::get(context);
  case mfshapes::Element::I8:
    return IntegerType::get(context, 8);
  case mfshapes::Element::I32:
    break;
  }
  return IntegerType::get(context, 32);
}

/// The rule's result types, or its message at the op's location.
LogicalResult inferredTypes(MLIRContext *context, std::optional<Location> loc,
                            StringRef opName, const mfshapes::Inferred &rule,
                            SmallVectorImpl<Type> &types) {
  if (!rule) {
    return emitOptionalError(loc, "'", opName, "' op ", rule.error);
  }
  for (const mfshapes::TensorInfo &result : rule.results) {
    types.push_back(RankedTensorType::get(
        result.shape, elementTypeOf(context, result.element)));
  }
  return success();
}

LogicalResult verifyRule(Operation *op, const mfshapes::Inferred &rule) {
  if (!rule) {
    return op->emitOpError() << rule.error;
  }
  for (auto [result, expected] : llvm::zip(op->getResults(), rule.results)) {
    auto declared = cast<RankedTensorType>(result.getType());
    Type element = elementTypeOf(op->getContext(), expected.element);
    bool sameElement = declared.getElementType() == element;
    if (sameElement && declared.getShape() == ArrayRef(expected.shape)) {
      continue;
    }
    InFlightDiagnostic diag = op->emitOpError() << "expected result ";
    if (sameElement) {
      diag << "shape " << formatShape(expected.shape);
    } else {
      diag << RankedTensorType::get(expected.shape, element);
    }
    if (!rule.note.empty()) {
      diag << " (" << rule.note << ")";
    }
    diag << ", got ";
    if (sameElement) {
      diag << formatShape(declared.getShape());
    } else {
      diag << declared;
    }
    return diag;
  }
  return success();
}

LogicalResult verifyRule(Operation *op, const std::string &problem) {
  if (problem.empty()) {
    return success();
  }
  return op->emitOpError() << problem;
}

} // namespace

LogicalResult DequantizeOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferDequantize(infoOf(adaptor.getInput()),
                                                 infoOf(adaptor.getScale()),
                                                 adaptor.getGroupSize(),
                                                 adaptor.getBits()),
                       types);
}

// One multiply per element (the conversion is free beside it).
int64_t DequantizeOp::getFlops() { return numElements(getResult()); }

LogicalResult DynamicQuantizeOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferredTypes(
      context, loc, getOperationName(),
      mfshapes::inferDynamicQuantize(infoOf(adaptor.getInput())), types);
}

// A pass for each row's largest magnitude, then a divide and a round.
int64_t DynamicQuantizeOp::getFlops() { return 3 * numElements(getInput()); }

LogicalResult QuantizeOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  std::optional<mfshapes::TensorInfo> zeroPoint;
  if (adaptor.getZeroPoint()) {
    zeroPoint = infoOf(adaptor.getZeroPoint());
  }
  return inferredTypes(
      context, loc, getOperationName(),
      mfshapes::inferQuantize(infoOf(adaptor.getInput()),
                              infoOf(adaptor.getScale()),
                              zeroPoint ? &*zeroPoint : nullptr),
      types);
}

// A divide, an add and a round per element.
int64_t QuantizeOp::getFlops() { return 3 * numElements(getInput()); }

LogicalResult TopKOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  return inferredTypes(
      context, loc, getOperationName(),
      mfshapes::inferTopK(infoOf(adaptor.getInput()), adaptor.getK()), types);
}

// A pass over the row per choice: k comparisons per element.
int64_t TopKOp::getFlops() {
  return numElements(getInput()) * static_cast<int64_t>(getK());
}

LogicalResult MoeRouteOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferMoeRoute(infoOf(adaptor.getIndices()),
                                               adaptor.getNumExperts(),
                                               adaptor.getCapacity()),
                       types);
}

int64_t MoeRouteOp::getFlops() { return 0; }

LogicalResult MoeDispatchOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  std::optional<mfshapes::TensorInfo> weights;
  if (adaptor.getWeights()) {
    weights = infoOf(adaptor.getWeights());
  }
  return inferredTypes(
      context, loc, getOperationName(),
      mfshapes::inferMoeDispatch(infoOf(adaptor.getTokens()),
                                 infoOf(adaptor.getPositions()),
                                 weights ? &*weights : nullptr),
      types);
}

int64_t MoeDispatchOp::getFlops() { return 0; }
// Each result row is read once from the tokens and written once.
int64_t MoeDispatchOp::getBytesAccessed() {
  return 2 * numElements(getResult()) *
             elementBytes(getResult().getType().getElementType()) +
         numElements(getPositions()) * 4;
}

LogicalResult GroupedMatmulOp::inferReturnTypes(MLIRContext *context,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  std::vector<mfshapes::TensorInfo> weights;
  for (Value weight : adaptor.getWeights()) {
    weights.push_back(infoOf(weight));
  }
  return inferredTypes(
      context, loc, getOperationName(),
      mfshapes::inferGroupedMatmul(infoOf(adaptor.getRows()),
                                   infoOf(adaptor.getOffsets()), weights,
                                   adaptor.getTransposeRhs()),
      types);
}

int64_t GroupedMatmulOp::getFlops() {
  return 2 * numElements(getResult()) * tensorType(getRows()).getShape()[1];
}

LogicalResult MoeCombineOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferMoeCombine(infoOf(adaptor.getRows()),
                                                 infoOf(adaptor.getPositions()),
                                                 infoOf(adaptor.getWeights())),
                       types);
}

int64_t MoeCombineOp::getFlops() { return 2 * numElements(getRows()); }

LogicalResult TopKGradOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferTopKGrad(infoOf(adaptor.getGradient()),
                                               infoOf(adaptor.getIndices()),
                                               adaptor.getWidth()),
                       types);
}

int64_t TopKGradOp::getFlops() { return 0; }

LogicalResult GroupedMatmulWeightGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferredTypes(context, loc, getOperationName(),
                       mfshapes::inferGroupedMatmulWeightGrad(
                           infoOf(adaptor.getGradient()),
                           infoOf(adaptor.getRows()),
                           infoOf(adaptor.getOffsets()), adaptor.getExpert(),
                           adaptor.getStacked()),
                       types);
}

// The cost assumes the expert takes its share, rows / experts; a stacked
// gradient takes every row once.
int64_t GroupedMatmulWeightGradOp::getFlops() {
  int64_t experts = getStacked() > 0
                        ? static_cast<int64_t>(getStacked())
                        : tensorType(getOffsets()).getShape()[0] - 1;
  return 2 * numElements(getResult()) * tensorType(getRows()).getShape()[0] /
         std::max<int64_t>(1, experts);
}

/// An all-to-all's grid and axes, and its offsets' share per rank.
static LogicalResult verifyAllToAll(Operation *op, FlatSymbolRefAttr gridName,
                                    ArrayRef<int16_t> axes,
                                    RankedTensorType offsets,
                                    SymbolTableCollection &symbolTable) {
  FailureOr<shard::GridOp> grid =
      verifyCollectiveAxes(op, gridName, axes, symbolTable);
  if (failed(grid)) {
    return failure();
  }
  return verifySegmentsPerRank(op, *grid, axes, offsets);
}

LogicalResult
AllToAllOffsetsOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyAllToAll(*this, getGridAttr(), getGridAxes(),
                        tensorType(getOffsets()), symbolTable);
}
int64_t AllToAllOffsetsOp::getFlops() { return 0; }
int64_t AllToAllOffsetsOp::getBytesAccessed() {
  return detail::countOperandAndResultBytes(*this);
}

LogicalResult AllToAllOp::verify() {
  mfshapes::Inferred rule = mfshapes::inferAllToAll(
      infoOf(getRows()), infoOf(getSendOffsets()), infoOf(getRecvOffsets()),
      tensorType(getResult()).getShape()[0]);
  if (!rule) {
    return emitOpError() << rule.error;
  }
  if (tensorType(getResult()) !=
      tensorType(getRows()).clone(rule.results.front().shape)) {
    return emitOpError() << "expects a result of the rows' dtype and "
                            "trailing dimensions, got "
                         << getResult().getType();
  }
  return success();
}
LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyAllToAll(*this, getGridAttr(), getGridAxes(),
                        tensorType(getSendOffsets()), symbolTable);
}
int64_t AllToAllOp::getFlops() { return 0; }
int64_t AllToAllOp::getBytesAccessed() {
  return detail::countOperandAndResultBytes(*this);
}

LogicalResult MoeWeightsGradOp::inferReturnTypes(MLIRContext *context,
                                                 std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  return inferredTypes(
      context, loc, getOperationName(),
      mfshapes::inferMoeWeightsGrad(infoOf(adaptor.getGradient()),
                                    infoOf(adaptor.getRows()),
                                    infoOf(adaptor.getPositions())),
      types);
}

int64_t MoeWeightsGradOp::getFlops() { return 2 * numElements(getRows()); }
