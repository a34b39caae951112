//===- ElementwiseKernels.cpp - elementwise regions -> kernels ------------===//
//
// 1. Check a region: elementwise ops only; every value has the output's
//    shape except inputs that reach it through mf.broadcast.
// 2. Build one linalg.generic on memrefs: inputs through identity or
//    broadcast maps, the body from the ScalarEmitter.
// 3. Tiles of whole rows of the first dimension larger than 1 (at least
//    64K elements each, at most 64 tiles): a tile runs the generic on
//    subviews of the buffers that follow that dimension (the others are
//    read whole). Rank-0 regions are one tile.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Codegen/CPU/ScalarEmitter.h"

#include "llvm/ADT/MapVector.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mfc;

namespace {

constexpr int64_t kMinTileElements = int64_t(1) << 16;
constexpr int64_t kMaxTiles = 64;

/// An input of the linalg.generic: a kernel argument read through a map.
struct GenericInput {
  unsigned argument;
  AffineMap map;
};

/// The numpy-style broadcast map from the output's dims to `from`'s dims.
AffineMap broadcastMap(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                       MLIRContext *context) {
  SmallVector<AffineExpr> exprs;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    exprs.push_back(from[i] == 1 && to[lead + i] != 1
                        ? getAffineConstantExpr(0, context)
                        : getAffineDimExpr(lead + i, context));
  }
  return AffineMap::get(to.size(), 0, exprs, context);
}

} // namespace

FailureOr<func::FuncOp> mfc::buildElementwiseKernel(mf::FusionOp fusion,
                                                    OpBuilder &builder,
                                                    std::string &why) {
  MLIRContext *context = builder.getContext();
  Block &body = fusion.getBody().front();
  if (fusion.getNumResults() == 0) {
    why = "no results";
    return failure();
  }
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(fusion.getResult(0).getType()).getShape();
  for (Type type : fusion.getResultTypes()) {
    if (cast<RankedTensorType>(type).getShape() != shape) {
      why = "results of different shapes";
      return failure();
    }
  }
  unsigned rank = shape.size();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, context);

  // Inputs of the generic: direct uses of an argument read it with the
  // identity map, broadcasts of it with their broadcast map.
  SmallVector<GenericInput> inputs;
  llvm::MapVector<Value, unsigned> inputOf; // region value -> generic input
  auto addInput = [&](Value key, unsigned argument, AffineMap map) {
    for (auto [index, existing] : llvm::enumerate(inputs)) {
      if (existing.argument == argument && existing.map == map) {
        inputOf[key] = index;
        return;
      }
    }
    inputOf[key] = inputs.size();
    inputs.push_back({argument, map});
  };
  for (Operation &op : body.without_terminator()) {
    if (auto broadcast = dyn_cast<mf::BroadcastOp>(op)) {
      auto argument = dyn_cast<BlockArgument>(broadcast.getInput());
      if (!argument || broadcast.getType().getShape() != shape) {
        why = "a broadcast of a computed value";
        return failure();
      }
      addInput(broadcast.getResult(), argument.getArgNumber(),
               broadcastMap(broadcast.getInput().getType().getShape(), shape,
                            context));
      continue;
    }
    if (cast<RankedTensorType>(op.getResult(0).getType()).getShape() != shape) {
      why = "values of different shapes";
      return failure();
    }
    for (Value operand : op.getOperands()) {
      if (auto argument = dyn_cast<BlockArgument>(operand)) {
        if (cast<RankedTensorType>(operand.getType()).getShape() != shape) {
          why = "an input of another shape used directly";
          return failure();
        }
        addInput(operand, argument.getArgNumber(), identity);
      }
    }
  }

  Location loc = fusion.getLoc();
  // Rows of the tiled dimension per tile.
  unsigned tiled = 0;
  while (tiled + 1 < rank && shape[tiled] == 1) {
    ++tiled;
  }
  int64_t rows = rank == 0 ? 1 : shape[tiled];
  int64_t rowElements = rows == 0 ? 1 : ShapedType::getNumElements(shape) / rows;
  int64_t rowsPerTile =
      std::max<int64_t>(1, llvm::divideCeil(kMinTileElements, std::max<int64_t>(1, rowElements)));
  if (llvm::divideCeil(rows, rowsPerTile) > kMaxTiles) {
    rowsPerTile = llvm::divideCeil(rows, kMaxTiles);
  }
  int64_t tiles = std::max<int64_t>(1, llvm::divideCeil(rows, rowsPerTile));
  // The kernel: the tile range, memrefs of the region's inputs, then its
  // results.
  func::FuncOp kernel = createKernelFunction(fusion, builder, tiles);
  Block *entry = &kernel.getBody().front();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, value);
  };
  scf::ForOp loop = buildTileLoop(builder, loc, entry, tiles);

  // A tile's view of a buffer that follows the tiled dimension.
  Value firstRow, tileRows;
  if (rank > 0) {
    firstRow = arith::MulIOp::create(builder, loc, loop.getInductionVar(),
                                     index(rowsPerTile));
    tileRows = arith::MinSIOp::create(
        builder, loc, index(rowsPerTile),
        arith::SubIOp::create(builder, loc, index(rows), firstRow));
  }
  AffineExpr tiledDim = getAffineDimExpr(tiled, context);
  auto tileOf = [&](Value buffer, AffineMap map) -> Value {
    auto found = llvm::find(map.getResults(), tiledDim);
    if (rank == 0 || found == map.getResults().end()) {
      return buffer;
    }
    size_t position = found - map.getResults().begin();
    ArrayRef<int64_t> bufferShape = cast<MemRefType>(buffer.getType()).getShape();
    SmallVector<OpFoldResult> offsets(bufferShape.size(), builder.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes, strides(bufferShape.size(), builder.getIndexAttr(1));
    for (int64_t size : bufferShape) {
      sizes.push_back(builder.getIndexAttr(size));
    }
    offsets[position] = firstRow;
    sizes[position] = tileRows;
    return memref::SubViewOp::create(builder, loc, buffer, offsets, sizes, strides);
  };

  SmallVector<Value> genericInputs, genericOutputs;
  SmallVector<AffineMap> maps;
  for (const GenericInput &input : inputs) {
    genericInputs.push_back(tileOf(entry->getArgument(2 + input.argument), input.map));
    maps.push_back(input.map);
  }
  unsigned resultBase = 2 + fusion.getInputs().size();
  for (unsigned i = 0; i < fusion.getNumResults(); ++i) {
    genericOutputs.push_back(tileOf(entry->getArgument(resultBase + i), identity));
    maps.push_back(identity);
  }
  SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
  ScalarEmitter emitter(builder);
  auto load = [&](Value key, Value scalar, Location at) {
    return emitter.widen(scalar, elementTypeOf(key), at);
  };
  if (failed(buildBodyGeneric(builder, loc, body, genericInputs, genericOutputs,
                              maps, iterators, inputOf, load, why))) {
    kernel.erase();
    return failure();
  }
  return kernel;
}
