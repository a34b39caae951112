//===- NormKernels.cpp - norm regions -> tiled row kernels ----------------===//
//
// A norm region (FuseNorm.cpp) is one RMSNorm, LayerNorm or last-dimension
// softmax over the output's rows [rows, cols], the elementwise ops that
// compute its input x, and elementwise consumers of its result. Its kernel
// walks tiles of whole rows (16K elements, at least one row):
//
//   for tile t in [tileBegin, tileEnd): rows [r0, r0 + m)
//     linalg.generic (m x cols): x = producers(inputs) into scratch (f32;
//       skipped when x is a region input)
//     linalg.generic (m x cols, reduction over cols): row statistics in
//       f64 — RMSNorm sum(x^2); LayerNorm sum(x), then sum((x - mean)^2);
//       softmax max(x), then sum(exp(x - max))
//     linalg.generic (m): per row the scale 1 / sqrt(var + eps) and centre,
//       in f64 rounded to f32, as the runtime's norm computes them
//     linalg.generic (m x cols): y = (x - centre) * scale * w (+ b), or
//       exp(x - max) / sum; the consumers; the outputs' rows
//
// so a block of rows stays in cache from the producers to the consumers
// and only the region's inputs and results reach memory.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Codegen/CPU/ScalarEmitter.h"
#include "dialects/MF/Transforms/FusionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/MapVector.h"

#include <limits>

using namespace mlir;
using namespace mfc;

namespace {

/// Elements of one tile (and of its f32 scratch, on the stack): a few rows
/// of a wide model, in L2.
constexpr int64_t kTileElements = int64_t(1) << 14;

/// Partial results per row of a reduction: one AVX-512 vector of f64.
constexpr int64_t kLanes = 8;

enum class NormKind { Rms, Layer, Softmax };

bool isSplat(Operation *op) {
  auto constant = dyn_cast<mf::ConstantOp>(op);
  return constant && isa<SplatElementsAttr>(constant.getValue());
}

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

} // namespace

FailureOr<func::FuncOp> mfc::buildNormKernel(mf::FusionOp fusion,
                                             OpBuilder &builder,
                                             std::string &why) {
  MLIRContext *context = builder.getContext();
  Block &body = fusion.getBody().front();
  auto yield = cast<mf::YieldOp>(body.getTerminator());
  Operation *norm = nullptr;
  for (Operation &op : body.without_terminator()) {
    if (isa<mf::RmsNormOp, mf::LayerNormOp, mf::SoftmaxOp>(op)) {
      if (norm) {
        why = "two reductions in one region";
        return failure();
      }
      norm = &op;
    }
  }
  if (!norm || fusion.getNumResults() == 0) {
    why = "no norm";
    return failure();
  }
  NormKind kind = isa<mf::RmsNormOp>(norm)     ? NormKind::Rms
                  : isa<mf::LayerNormOp>(norm) ? NormKind::Layer
                                               : NormKind::Softmax;
  ArrayRef<int64_t> shape = shapeOf(norm->getResult(0));
  if (shape.empty() || shape.back() == 0) {
    why = "a norm of rank 0 or empty rows";
    return failure();
  }
  if (auto softmax = dyn_cast<mf::SoftmaxOp>(norm);
      softmax && softmax.getDimension() + 1 != shape.size()) {
    why = "a softmax over another dimension than the last";
    return failure();
  }
  for (Type type : fusion.getResultTypes()) {
    if (cast<RankedTensorType>(type).getShape() != shape) {
      why = "results of different shapes";
      return failure();
    }
  }
  int64_t cols = shape.back();
  int64_t rows = ShapedType::getNumElements(shape) / cols;
  Value x = norm->getOperand(0);
  double epsilon = 0.0;
  if (auto rms = dyn_cast<mf::RmsNormOp>(norm)) {
    epsilon = rms.getEpsilon().convertToDouble();
  } else if (auto layer = dyn_cast<mf::LayerNormOp>(norm)) {
    epsilon = layer.getEpsilon().convertToDouble();
  }

  // Producers (before the norm) and consumers (after it); what each reads.
  // Splat constants are scalars either side may use.
  SmallVector<Operation *> producers, consumers, splats;
  TileReads producerReads, consumerReads;
  bool afterNorm = false;
  for (Operation &op : body.without_terminator()) {
    if (&op == norm) {
      afterNorm = true;
      continue;
    }
    auto &reads = afterNorm ? consumerReads : producerReads;
    if (auto broadcast = dyn_cast<mf::BroadcastOp>(op)) {
      auto argument = dyn_cast<BlockArgument>(broadcast.getInput());
      std::optional<TileInput> read =
          classifyTileInput(shapeOf(broadcast.getInput()), shape);
      if (!argument || shapeOf(broadcast.getResult()) != shape || !read) {
        why = "a broadcast the row tiles cannot follow";
        return failure();
      }
      reads[broadcast.getResult()] = {argument.getArgNumber(), *read};
      continue;
    }
    if (isSplat(&op)) {
      splats.push_back(&op);
      continue;
    }
    if (!mf::isElementwiseOp(&op) || shapeOf(op.getResult(0)) != shape) {
      why = "no norm-region rule for " + op.getName().getStringRef().str();
      return failure();
    }
    for (Value operand : op.getOperands()) {
      if (auto argument = dyn_cast<BlockArgument>(operand)) {
        if (shapeOf(operand) != shape) {
          why = "an input of another shape used directly";
          return failure();
        }
        reads[operand] = {argument.getArgNumber(), TileInput::Full};
      }
    }
    (afterNorm ? consumers : producers).push_back(&op);
  }
  // The consumers see the producers' work through x and the norm alone.
  for (Operation *op : consumers) {
    for (Value operand : op->getOperands()) {
      Operation *source = operand.getDefiningOp();
      if (source && operand != x && llvm::is_contained(producers, source)) {
        why = "a producer's value read after the norm";
        return failure();
      }
    }
  }
  for (Value result : yield.getValues()) {
    Operation *source = result.getDefiningOp();
    if (!source || (source != norm && !llvm::is_contained(consumers, source))) {
      why = "a result computed before the norm";
      return failure();
    }
  }
  // The weights (and LayerNorm's bias): one row of cols, region inputs.
  SmallVector<unsigned> weights;
  for (Value operand : norm->getOperands().drop_front()) {
    auto argument = dyn_cast<BlockArgument>(operand);
    if (!argument || shapeOf(operand) != ArrayRef<int64_t>{cols}) {
      why = "a norm weight that is not a region input of [cols]";
      return failure();
    }
    weights.push_back(argument.getArgNumber());
  }
  bool xIsInput = isa<BlockArgument>(x);
  if (!xIsInput && !llvm::is_contained(producers, x.getDefiningOp())) {
    why = "a norm input the region does not compute";
    return failure();
  }

  // The kernel.
  int64_t rowsPerTile = std::max<int64_t>(1, kTileElements / cols);
  int64_t tiles = std::max<int64_t>(1, llvm::divideCeil(rows, rowsPerTile));
  Location loc = fusion.getLoc();
  func::FuncOp kernel = createKernelFunction(fusion, builder, tiles);
  Block *entry = &kernel.getBody().front();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  Type f32 = builder.getF32Type(), f64 = builder.getF64Type();
  auto stack = [&](ArrayRef<int64_t> bufferShape, Type element) -> Value {
    return memref::AllocaOp::create(
        builder, loc, MemRefType::get(bufferShape, element), ValueRange{},
        builder.getI64IntegerAttr(64));
  };
  Value scratch = xIsInput ? Value() : stack({rowsPerTile, cols}, f32);
  Value firstStat = stack({rowsPerTile}, f64);
  Value partialStat = stack({rowsPerTile, kLanes}, f64);
  Value secondStat = stack({rowsPerTile}, f64);
  Value rowScale = stack({rowsPerTile}, f32);
  Value rowCentre = stack({rowsPerTile}, f32);
  builder.setInsertionPoint(entry->getTerminator());
  scf::ForOp loop = buildTileLoop(builder, loc, entry, tiles);

  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, value);
  };
  OpFoldResult zero = builder.getIndexAttr(0), one = builder.getIndexAttr(1);
  OpFoldResult colsAttr = builder.getIndexAttr(cols);
  Value firstRow = arith::MulIOp::create(builder, loc, loop.getInductionVar(),
                                         index(rowsPerTile));
  Value m = arith::MinSIOp::create(
      builder, loc, index(rowsPerTile),
      arith::SubIOp::create(builder, loc, index(rows), firstRow));
  auto argument = [&](unsigned regionArgument) {
    return entry->getArgument(2 + regionArgument);
  };
  auto flatten = [&](Value memref, ArrayRef<int64_t> to) {
    return flattenMemRef(builder, loc, memref, to);
  };

  auto rowsOf = [&](Value memref) -> Value { // the tile's rows
    return memref::SubViewOp::create(
        builder, loc, flatten(memref, {rows, cols}),
        ArrayRef<OpFoldResult>{firstRow, zero},
        ArrayRef<OpFoldResult>{m, colsAttr}, ArrayRef<OpFoldResult>{one, one});
  };
  auto firstRows = [&](Value buffer, ArrayRef<OpFoldResult> sizes) -> Value {
    SmallVector<OpFoldResult> offsets(sizes.size(), zero),
        strides(sizes.size(), one);
    return memref::SubViewOp::create(builder, loc, buffer, offsets, sizes,
                                     strides);
  };
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, context);
  AffineMap rowMap =
      AffineMap::get(2, 0, getAffineDimExpr(1, context), context);
  AffineMap perRow =
      AffineMap::get(2, 0, getAffineDimExpr(0, context), context);
  // A generic's inputs for what `reads` loads, one view per (argument, how).
  auto addReads = [&](const TileReads &reads, SmallVector<Value> &views,
                      SmallVector<AffineMap> &maps,
                      llvm::MapVector<Value, unsigned> &inputOf) {
    addTileReads(
        builder, loc, reads, argument, cols, rowsOf,
        [](Value row) { return row; }, views, maps, inputOf);
  };
  ScalarEmitter emitter(builder);
  std::string failure;
  // Computes `ops` in order on loaded scalars (broadcasts are loaded).
  auto emitOps = [&](ArrayRef<Operation *> ops,
                     llvm::DenseMap<Value, Value> &scalarOf, Location at) {
    for (Operation *op : ops) {
      if (scalarOf.count(op->getResult(0))) {
        continue;
      }
      SmallVector<Value> operands;
      for (Value operand : op->getOperands()) {
        operands.push_back(scalarOf.lookup(operand));
      }
      FailureOr<Value> value = emitter.compute(op, operands, at, failure);
      if (::mlir::failed(value)) {
        return false;
      }
      scalarOf[op->getResult(0)] = *value;
    }
    return true;
  };
  auto parallel2 =
      SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel);
  auto reduction2 = SmallVector<utils::IteratorType>{
      utils::IteratorType::parallel, utils::IteratorType::reduction};

  // 1. x for the tile's rows.
  Value xView;
  if (xIsInput) {
    xView = rowsOf(argument(cast<BlockArgument>(x).getArgNumber()));
  } else {
    xView = firstRows(scratch, {m, builder.getIndexAttr(cols)});
    SmallVector<Value> views;
    SmallVector<AffineMap> maps;
    llvm::MapVector<Value, unsigned> inputOf;
    addReads(producerReads, views, maps, inputOf);
    maps.push_back(identity);
    linalg::GenericOp::create(
        builder, loc, views, ValueRange{xView}, maps, parallel2,
        [&](OpBuilder &, Location at, ValueRange scalars) {
          llvm::DenseMap<Value, Value> scalarOf;
          for (auto [key, position] : inputOf) {
            scalarOf[key] =
                emitter.widen(scalars[position], elementTypeOf(key), at);
          }
          Value result = scalars.back();
          if (emitOps(splats, scalarOf, at) &&
              emitOps(producers, scalarOf, at)) {
            result = scalarOf.lookup(x);
          }
          linalg::YieldOp::create(builder, at, result);
        });
  }
  // x as the compute domain sees it: scratch holds f32 already.
  auto loadX = [&](Value scalar, Location at) {
    return xIsInput ? emitter.widen(scalar, elementTypeOf(x), at) : scalar;
  };
  auto toF64 = [&](Value value, Location at) -> Value {
    return arith::ExtFOp::create(builder, at, f64, value);
  };
  auto f64Constant = [&](double value) -> Value {
    return arith::ConstantOp::create(builder, loc,
                                     builder.getF64FloatAttr(value));
  };

  // 2. Row statistics. A row reduces in kLanes interleaved partial results
  // (a [m, cols / kLanes, kLanes] view, lanes innermost, so the loop
  // vectorizes), then the lanes into one; rows of other widths in order.
  Value first = firstRows(firstStat, {m});
  Value second = firstRows(secondStat, {m});
  bool softmax = kind == NormKind::Softmax;
  bool laned = cols % kLanes == 0;
  Value partial =
      laned ? firstRows(partialStat, {m, builder.getIndexAttr(kLanes)})
            : Value();
  // x as [m, cols / kLanes, kLanes].
  Value xLanes;
  if (laned) {
    Value base =
        xIsInput ? argument(cast<BlockArgument>(x).getArgNumber()) : scratch;
    OpFoldResult offset =
        xIsInput ? OpFoldResult(arith::MulIOp::create(builder, loc, firstRow,
                                                      index(cols))
                                    .getResult())
                 : zero;
    xLanes = memref::ReinterpretCastOp::create(
        builder, loc,
        MemRefType::get({ShapedType::kDynamic, cols / kLanes, kLanes},
                        cast<MemRefType>(base.getType()).getElementType(),
                        StridedLayoutAttr::get(context, ShapedType::kDynamic,
                                               {cols, kLanes, 1})),
        base, offset,
        ArrayRef<OpFoldResult>{m, builder.getIndexAttr(cols / kLanes),
                               builder.getIndexAttr(kLanes)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(cols),
                               builder.getIndexAttr(kLanes), one});
  }
  // stat[r] = init (+)= step(acc, x, rowValue) over row r, `merge` joining
  // partial results; `rowValue` is the row's entry of `perRowInput`.
  auto reduceRows = [&](Value stat, double init, Value perRowInput,
                        function_ref<Value(Value, Value, Value, Location)> step,
                        function_ref<Value(Value, Value, Location)> merge) {
    SmallVector<Value> inputs{laned ? xLanes : xView};
    if (perRowInput) {
      inputs.push_back(perRowInput);
    }
    auto body = [&](OpBuilder &, Location at, ValueRange scalars) {
      Value rowValue = perRowInput ? scalars[1] : Value();
      linalg::YieldOp::create(
          builder, at,
          step(scalars.back(), loadX(scalars[0], at), rowValue, at));
    };
    if (!laned) {
      linalg::FillOp::create(builder, loc, ValueRange{f64Constant(init)},
                             ValueRange{stat});
      SmallVector<AffineMap> maps{identity};
      if (perRowInput) {
        maps.push_back(perRow);
      }
      maps.push_back(perRow);
      linalg::GenericOp::create(builder, loc, inputs, ValueRange{stat}, maps,
                                reduction2, body);
      return;
    }
    linalg::FillOp::create(builder, loc, ValueRange{f64Constant(init)},
                           ValueRange{partial});
    AffineMap identity3 = AffineMap::getMultiDimIdentityMap(3, context);
    AffineMap row3 =
        AffineMap::get(3, 0, getAffineDimExpr(0, context), context);
    AffineMap lane3 = AffineMap::get(
        3, 0, {getAffineDimExpr(0, context), getAffineDimExpr(2, context)},
        context);
    SmallVector<AffineMap> maps{identity3};
    if (perRowInput) {
      maps.push_back(row3);
    }
    maps.push_back(lane3);
    linalg::GenericOp::create(
        builder, loc, inputs, ValueRange{partial}, maps,
        SmallVector<utils::IteratorType>{utils::IteratorType::parallel,
                                         utils::IteratorType::reduction,
                                         utils::IteratorType::parallel},
        body);
    linalg::FillOp::create(builder, loc, ValueRange{f64Constant(init)},
                           ValueRange{stat});
    linalg::GenericOp::create(
        builder, loc, ValueRange{partial}, ValueRange{stat},
        ArrayRef<AffineMap>{identity, perRow}, reduction2,
        [&](OpBuilder &, Location at, ValueRange scalars) {
          linalg::YieldOp::create(builder, at,
                                  merge(scalars[1], scalars[0], at));
        });
  };
  auto add = [&](Value a, Value b, Location at) -> Value {
    return arith::AddFOp::create(builder, at, a, b);
  };
  auto maximum = [&](Value a, Value b, Location at) -> Value {
    return arith::MaximumFOp::create(builder, at, a, b);
  };
  if (kind == NormKind::Rms) { // sum(x^2)
    reduceRows(
        first, 0.0, Value(),
        [&](Value acc, Value value, Value, Location at) {
          Value wide = toF64(value, at);
          return add(acc, arith::MulFOp::create(builder, at, wide, wide), at);
        },
        add);
  } else if (kind == NormKind::Layer) { // sum(x), sum((x - mean)^2)
    reduceRows(
        first, 0.0, Value(),
        [&](Value acc, Value value, Value, Location at) {
          return add(acc, toF64(value, at), at);
        },
        add);
    reduceRows(
        second, 0.0, first,
        [&](Value acc, Value value, Value sum, Location at) {
          Value mean = arith::DivFOp::create(builder, at, sum,
                                             f64Constant(double(cols)));
          Value deviation =
              arith::SubFOp::create(builder, at, toF64(value, at), mean);
          return add(acc,
                     arith::MulFOp::create(builder, at, deviation, deviation),
                     at);
        },
        add);
  } else { // max(x), sum(exp(x - max))
    reduceRows(
        first, -std::numeric_limits<double>::infinity(), Value(),
        [&](Value acc, Value value, Value, Location at) {
          return maximum(acc, toF64(value, at), at);
        },
        maximum);
    reduceRows(
        second, 0.0, first,
        [&](Value acc, Value value, Value best, Location at) {
          Value shifted = arith::SubFOp::create(
              builder, at, value,
              arith::TruncFOp::create(builder, at, f32, best));
          return add(acc, toF64(math::ExpOp::create(builder, at, shifted), at),
                     at);
        },
        add);
  }
  // Per row: scale and centre (norms), in f64 rounded to f32.
  Value scale = firstRows(rowScale, {m});
  Value centre = firstRows(rowCentre, {m});
  if (!softmax) {
    AffineMap rowIdentity = AffineMap::getMultiDimIdentityMap(1, context);
    linalg::GenericOp::create(
        builder, loc, ValueRange{first, second}, ValueRange{scale, centre},
        SmallVector<AffineMap>(4, rowIdentity),
        SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
        [&](OpBuilder &, Location at, ValueRange scalars) {
          Value count = f64Constant(double(cols));
          Value mean =
              kind == NormKind::Layer
                  ? arith::DivFOp::create(builder, at, scalars[0], count)
                        .getResult()
                  : f64Constant(0.0);
          Value variance = arith::DivFOp::create(
              builder, at, kind == NormKind::Layer ? scalars[1] : scalars[0],
              count);
          Value inverse = arith::DivFOp::create(
              builder, at, f64Constant(1.0),
              math::SqrtOp::create(
                  builder, at,
                  arith::AddFOp::create(builder, at, variance,
                                        f64Constant(epsilon))));
          linalg::YieldOp::create(
              builder, at,
              ValueRange{arith::TruncFOp::create(builder, at, f32, inverse),
                         arith::TruncFOp::create(builder, at, f32, mean)});
        });
  }

  // 3. Normalize, the consumers, the outputs.
  SmallVector<Value> views{xView, softmax ? first : scale,
                           softmax ? second : centre};
  SmallVector<AffineMap> maps{identity, perRow, perRow};
  for (unsigned weight : weights) {
    views.push_back(flatten(argument(weight), {cols}));
    maps.push_back(rowMap);
  }
  llvm::MapVector<Value, unsigned> inputOf;
  addReads(consumerReads, views, maps, inputOf);
  SmallVector<Value> outputs;
  for (unsigned i = 0; i < fusion.getNumResults(); ++i) {
    outputs.push_back(rowsOf(argument(fusion.getInputs().size() + i)));
    maps.push_back(identity);
  }
  linalg::GenericOp::create(
      builder, loc, views, outputs, maps, parallel2,
      [&](OpBuilder &, Location at, ValueRange scalars) {
        Value value = loadX(scalars[0], at);
        Value normalized;
        if (softmax) {
          Value best = arith::TruncFOp::create(builder, at, f32, scalars[1]);
          Value exp = math::ExpOp::create(
              builder, at, arith::SubFOp::create(builder, at, value, best));
          normalized = arith::TruncFOp::create(
              builder, at, f32,
              arith::DivFOp::create(builder, at, toF64(exp, at), scalars[2]));
        } else {
          normalized = arith::MulFOp::create(
              builder, at,
              arith::MulFOp::create(
                  builder, at,
                  arith::SubFOp::create(builder, at, value, scalars[2]),
                  scalars[1]),
              emitter.widen(scalars[3], elementTypeOf(norm->getOperand(1)),
                            at));
          if (kind == NormKind::Layer) {
            normalized = arith::AddFOp::create(
                builder, at, normalized,
                emitter.widen(scalars[4], elementTypeOf(norm->getOperand(2)),
                              at));
          }
        }
        // Stored as the norm's type holds it (f16 rounds).
        Type normType = elementTypeOf(norm->getResult(0));
        llvm::DenseMap<Value, Value> scalarOf;
        scalarOf[norm->getResult(0)] = emitter.widen(
            emitter.narrow(normalized, normType, at), normType, at);
        scalarOf[x] = value;
        for (auto [key, position] : inputOf) {
          scalarOf[key] =
              emitter.widen(scalars[position], elementTypeOf(key), at);
        }
        SmallVector<Value> results;
        if (emitOps(splats, scalarOf, at) && emitOps(consumers, scalarOf, at)) {
          for (Value yielded : yield.getValues()) {
            results.push_back(emitter.narrow(scalarOf.lookup(yielded),
                                             elementTypeOf(yielded), at));
          }
        } else {
          results.assign(outputs.size(), scalars[0]);
        }
        linalg::YieldOp::create(builder, at, results);
      });
  if (!failure.empty()) {
    why = failure;
    kernel.erase();
    return mlir::failure();
  }
  return kernel;
}
