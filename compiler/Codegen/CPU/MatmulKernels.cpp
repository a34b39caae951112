//===- MatmulKernels.cpp - matmul regions -> tiled kernels ----------------===//
//
// A matmul region is one or more matmuls with the same output shape
// [..., N] (their leading dims flatten to `rows`) and an elementwise
// epilogue. Its kernel walks output tiles of at most 256 x 256 (smaller
// when that would leave too few tiles to share among threads):
//
//   for tile t in [tileBegin, tileEnd):
//     (m0, n0) = the tile's corner; (m, n) = its size, smaller at the edges
//     for each matmul i: mfrt_gemm_f32(lhs_i, rhs_i, scratch_i, ldc, m0, n0,
//                                      m, n, K_i, N, transB_i, transA_i, M)
//     linalg.generic over the m x n tile: the epilogue, reading scratch_i,
//       the tile of each full-shaped input and the matching part of each
//       broadcast one (a row of N, or a scalar), writing the outputs' tile
//
// so every product is finished while it is in cache and never reaches
// memory in its unfused form. A lone matmul (no epilogue: a projection, the
// lm_head) has no scratch: the gemm writes its tile of the result with
// ldc = N. Tiles are independent: the runtime runs them on its threads.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Codegen/CPU/ScalarEmitter.h"
#include "dialects/MF/Transforms/FusionUtils.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mfc;

namespace {

/// The largest tile: rows (all dims but the last, flattened) by columns.
/// OpenBLAS reaches ~95% of its large-GEMM rate on 256 x 256 tiles here
/// (128 x 256: ~80%).
constexpr int64_t kTileRows = 256;
constexpr int64_t kTileCols = 256;
/// Enough tiles to keep a few threads busy and balanced; smaller tiles are
/// used until a kernel has this many, unless a tile would get too thin or
/// too small to be worth a dispatch (the pool's spinning workers take a
/// tile within a fraction of a microsecond; ~8K multiply-adds take ~1 us).
/// Columns are halved first: OpenBLAS on one thread, K = 2048, runs
/// 256 x 128 tiles at 165 GFLOP/s, 256 x 64 at 154, 128 x 128 at 144
/// (K = 768: 167, 160, 155). Six tiles share evenly among two or three
/// threads; llama-100m prefill on one thread 281-296 -> 263-279 ms against
/// eight tiles, rows halved first (3 alternating runs).
/// Measured on llama-tiny decode, splitting kernels of ~88K multiply-adds
/// lost (in 11 tiles 21.3-23.5K tokens/s, in 3 tiles 23.7-24.2K, against
/// 24.3-25.3K as one tile); on llama-100m's 196K ones it won.
constexpr int64_t kMinTiles = 6;
constexpr int64_t kMinTileSide = 64;
/// A one-row output (decode's matrix-vector products) is split by columns
/// alone, each tile a panel of weight rows: 16 is one AVX-512 vector.
constexpr int64_t kMinVectorTileCols = 16;
constexpr int64_t kMinTileWork = int64_t(1) << 13;  // multiply-adds
/// A kernel with less work than this runs as one tile, on one thread.
constexpr int64_t kMinParallelWork = int64_t(1) << 17;
/// But a one-row product (decode) with at least this many, in two: its
/// weights stream from L3 at ~75 GB/s here, 2^15 f32 multiply-adds in
/// ~1.7 us, and a dispatch's exchange between the cores costs ~0.3-0.8
/// us. llama-tiny decode with its FFN products (88K and 44K) in two
/// tiles: 46.6-48.4K tokens/s against 40-44K; its lm_head (32K) too:
/// median 47.0K -> 49.3K (8 alternating runs); its 16K attention
/// projections too: 25-37K.
constexpr int64_t kMinTwoTileVectorWork = int64_t(1) << 15;
constexpr int64_t kMaxScratchElements = int64_t(1) << 16;

/// The tile shape for a rows x cols output whose matmuls multiply-add
/// `depth` times per output element (the sum of their K); tiles narrower
/// than the output are a multiple of `columnAlign` wide. `rowsFirst`
/// halves rows before columns: each tile quantizes its rows (int8 rows),
/// so fewer tiles across do it fewer times.
std::pair<int64_t, int64_t> chooseTile(int64_t rows, int64_t cols,
                                       int64_t depth, int64_t columnAlign,
                                       bool rowsFirst) {
  if (rows * cols * depth < kMinParallelWork &&
      rows * cols <= kMaxScratchElements) {
    int64_t half = llvm::alignTo(llvm::divideCeil(cols, 2),
                                 std::max(kMinVectorTileCols, columnAlign));
    if (rows == 1 && cols * depth >= kMinTwoTileVectorWork && half < cols) {
      return {rows, half};
    }
    return {rows, cols};
  }
  int64_t tileRows = std::min(kTileRows, rows);
  int64_t tileCols = std::min(kTileCols, cols);
  auto tiles = [&] {
    return llvm::divideCeil(rows, tileRows) * llvm::divideCeil(cols, tileCols);
  };
  int64_t minCols =
      std::max(rows == 1 ? kMinVectorTileCols : kMinTileSide, columnAlign);
  while (tiles() < kMinTiles) {
    bool halveRows = rowsFirst && tileRows > kMinTileSide / 2;
    bool halveCols = !halveRows && tileCols > minCols;
    halveRows = halveRows || (!halveCols && tileRows > kMinTileSide);
    int64_t nextRows = halveRows ? llvm::divideCeil(tileRows, 2) : tileRows;
    int64_t nextCols =
        halveCols ? llvm::alignTo(llvm::divideCeil(tileCols, 2), columnAlign)
                  : tileCols;
    if ((!halveRows && !halveCols) || nextRows * nextCols * depth < kMinTileWork) {
      break;
    }
    tileRows = nextRows;
    tileCols = nextCols;
  }
  return {tileRows, tileCols};
}

struct MatmulInfo {
  mf::MatmulOp op;
  unsigned lhs, rhs; // region argument numbers
  int64_t k;
  bool transposedLhs; // a 2-D lhs stored [K, rows] (weight gradients)
  /// A quantized weight (rhs: its i8 values): the region argument of its
  /// scales, per row (int8: they multiply the product's columns) or per
  /// group of K (int4: the gemm service and the row code apply them).
  std::optional<unsigned> scales;
  int64_t bits = 8, group = 0;
  /// The rows (lhs) are quantized per token (an mf.dynamic_quantize of them
  /// in the region) and multiplied by an int8 weight as int8 dot products,
  /// which the gemm service computes from the float rows.
  bool int8Rows = false;
  /// With static scales (an mf.quantize of them, cast to f32): the region
  /// arguments of the rows, their per-channel scales and zero points; the
  /// weight's scales are then f32.
  std::optional<unsigned> rowScales, rowZeroPoints;
};

/// Whether `use` is the rows a matmul multiplies, not transposed.
bool isProductRows(OpOperand &use) {
  auto matmul = dyn_cast<mf::MatmulOp>(use.getOwner());
  return matmul && use.getOperandNumber() == 0 && !matmul.getTransposeLhs();
}

/// f32, f16 or bf16: what the gemm services and the epilogue handle.
bool isKernelFloat(Type element) {
  return element.isF32() || element.isF16() || element.isBF16();
}

bool allKernelFloats(TypeRange types) {
  return llvm::all_of(types, [](Type type) {
    return isKernelFloat(cast<RankedTensorType>(type).getElementType());
  });
}

/// The region's inputs are kernel floats, or the i8 values of a quantized
/// weight that an mf.dequantize in the region reads.
bool allKernelInputs(mf::FusionOp fusion) {
  Block &body = fusion.getBody().front();
  return llvm::all_of(body.getArguments(), [](BlockArgument argument) {
    Type element = cast<RankedTensorType>(argument.getType()).getElementType();
    return isKernelFloat(element) ||
           (element.isInteger(8) &&
            llvm::all_of(argument.getUsers(), [](Operation *user) {
              return isa<mf::DequantizeOp, mf::QuantizeOp>(user);
            }));
  });
}

/// The gemm service for operands of `element` type: f32 as they are, f16
/// and bf16 widened to f32 by the runtime (the product is f32 either way).
StringRef gemmServiceFor(Type element) {
  return element.isF16() ? kGemmServiceF16
         : element.isBF16() ? kGemmServiceBF16
                            : kGemmService;
}

} // namespace

std::optional<TileInput> mfc::classifyTileInput(ArrayRef<int64_t> from,
                                   ArrayRef<int64_t> to) {
  if (from == to) {
    return TileInput::Full;
  }
  ArrayRef<int64_t> lead = from.drop_back(from.empty() ? 0 : 1);
  bool leadOnes = llvm::all_of(lead, [](int64_t d) { return d == 1; });
  if (!leadOnes) {
    return std::nullopt;
  }
  if (from.empty() || from.back() == 1) {
    return TileInput::Scalar;
  }
  if (from.back() == to.back()) {
    return TileInput::Row;
  }
  return std::nullopt;
}

FailureOr<func::FuncOp>
mfc::buildMatmulKernel(mf::FusionOp fusion, OpBuilder &builder,
                       const WeightLayouts &panelParameters, std::string &why) {
  MLIRContext *context = builder.getContext();
  Block &body = fusion.getBody().front();
  if (fusion.getNumResults() == 0) {
    why = "no results";
    return failure();
  }
  auto resultType = cast<RankedTensorType>(fusion.getResult(0).getType());
  ArrayRef<int64_t> shape = resultType.getShape();
  if (shape.size() < 2) {
    why = "a result of rank below 2";
    return failure();
  }
  for (Type type : fusion.getResultTypes()) {
    if (cast<RankedTensorType>(type).getShape() != shape) {
      why = "results of different shapes";
      return failure();
    }
  }
  if (!allKernelInputs(fusion) || !allKernelFloats(fusion.getResultTypes())) {
    why = "only f32, f16 and bf16 matmul regions have kernels";
    return failure();
  }
  int64_t cols = shape.back();
  int64_t rows = resultType.getNumElements() / cols;

  // The matmuls, and how every argument the epilogue reads is shaped.
  SmallVector<MatmulInfo> matmuls;
  llvm::DenseMap<Value, unsigned> matmulOf;            // result -> index
  // In insertion order, so that a kernel prints the same in every run.
  TileReads argumentOf;
  for (Operation &op : body.without_terminator()) {
    if (auto quantize = dyn_cast<mf::QuantizeOp>(op)) {
      // Float rows the services quantize with static scales: cast to f32,
      // multiplied only.
      bool rowsOfProducts =
          isa<BlockArgument>(quantize.getInput()) &&
          isa<BlockArgument>(quantize.getScale()) && quantize.getZeroPoint() &&
          isa<BlockArgument>(quantize.getZeroPoint()) &&
          llvm::all_of(quantize->getUsers(), [&](Operation *user) {
            auto rows = dyn_cast<mf::CastOp>(user);
            return rows && rows.getType().getElementType().isF32() &&
                   llvm::all_of(rows->getUses(), isProductRows);
          });
      if (!rowsOfProducts) {
        why = "rows quantized with static scales that are not only multiplied";
        return failure();
      }
      continue;
    }
    if (mf::quantizedRowsOf(op.getResult(0))) {
      continue; // checked with the mf.quantize
    }
    if (auto quantize = dyn_cast<mf::DynamicQuantizeOp>(op)) {
      // Float rows the services quantize: their values and scales read by
      // the mf.dequantize of the rows of products only.
      bool rowsOfProducts =
          isa<BlockArgument>(quantize.getInput()) &&
          llvm::all_of(quantize->getUsers(), [&](Operation *user) {
            auto rows = dyn_cast<mf::DequantizeOp>(user);
            return rows && rows.getInput() == quantize.getValues() &&
                   rows.getScale() == quantize.getScales() &&
                   llvm::all_of(rows->getUses(), isProductRows);
          });
      if (!rowsOfProducts) {
        why = "rows quantized per token that are not only multiplied";
        return failure();
      }
      continue;
    }
    if (auto dequantize = dyn_cast<mf::DequantizeOp>(op)) {
      // Read by the matmuls below, as the i8 values and their scales: the
      // scales of row n of an [N, K] weight multiply output column n, so
      // the matmuls must multiply by it transposed.
      // int8 weights have kernels with scales per row, int4 ones with
      // scales per group in the products' type.
      // Or int8 rows with their scales, which the matmuls multiply.
      bool int4 = dequantize.getBits() == 4;
      if (dequantize.getInput().getDefiningOp<mf::DynamicQuantizeOp>()) {
        continue; // checked with the mf.dynamic_quantize
      }
      if (!isa<BlockArgument>(dequantize.getInput()) ||
          !isa<BlockArgument>(dequantize.getScale()) ||
          (int4 ? dequantize.getGroupSize() == 0
                : dequantize.getGroupSize() != 0) ||
          !llvm::all_of(dequantize->getUses(), mf::isTransposedRhs)) {
        why = "a quantized weight with int8 scales per group, int4 ones per "
              "row, or read otherwise than multiplied by transposed";
        return failure();
      }
      continue;
    }
    if (auto matmul = dyn_cast<mf::MatmulOp>(op)) {
      auto lhs = dyn_cast<BlockArgument>(matmul.getLhs());
      auto rhs = dyn_cast<BlockArgument>(matmul.getRhs());
      std::optional<unsigned> scales, rowScales, rowZeroPoints;
      int64_t bits = 8, group = 0;
      bool int8Rows = false;
      if (auto dequantize = matmul.getRhs().getDefiningOp<mf::DequantizeOp>()) {
        rhs = cast<BlockArgument>(dequantize.getInput());
        scales = cast<BlockArgument>(dequantize.getScale()).getArgNumber();
        bits = dequantize.getBits();
        group = dequantize.getGroupSize();
      }
      if (auto rows = matmul.getLhs().getDefiningOp<mf::DequantizeOp>()) {
        auto quantize = rows.getInput().getDefiningOp<mf::DynamicQuantizeOp>();
        if (!quantize || !scales || bits != 8 || group != 0) {
          why = "int8 rows times a weight that is not int8 with a scale per "
                "row";
          return failure();
        }
        lhs = cast<BlockArgument>(quantize.getInput());
        int8Rows = true;
      }
      if (mf::QuantizeOp quantize = mf::quantizedRowsOf(matmul.getLhs())) {
        if (!scales || bits != 8 || group != 0 ||
            !cast<RankedTensorType>(fusion.getInputs()[*scales].getType())
                 .getElementType()
                 .isF32()) {
          why = "rows quantized with static scales times a weight that is not "
                "int8 with an f32 scale per row";
          return failure();
        }
        lhs = cast<BlockArgument>(quantize.getInput());
        rowScales = cast<BlockArgument>(quantize.getScale()).getArgNumber();
        rowZeroPoints =
            cast<BlockArgument>(quantize.getZeroPoint()).getArgNumber();
        int8Rows = true;
      }
      auto rhsType = cast<RankedTensorType>(matmul.getRhs().getType());
      auto lhsType = cast<RankedTensorType>(matmul.getLhs().getType());
      bool transposedLhs = matmul.getTransposeLhs();
      if (!lhs || !rhs || rhsType.getRank() != 2 ||
          (transposedLhs && lhsType.getRank() != 2) ||
          matmul.getType().getShape() != shape) {
        why = "a matmul that is not [.., M, K] (or a transposed 2-D [K, M]) x "
              "2-D -> the output shape";
        return failure();
      }
      int64_t k = rhsType.getShape()[matmul.getTransposeRhs() ? 1 : 0];
      int64_t lhsK = lhsType.getShape()[transposedLhs ? 0 : lhsType.getRank() - 1];
      if (lhsK != k || lhsType.getNumElements() != rows * k) {
        why = "a batched matmul";
        return failure();
      }
      if (lhsType.getElementType() != rhsType.getElementType()) {
        why = "a matmul of two element types";
        return failure();
      }
      matmulOf[matmul.getResult()] = matmuls.size();
      matmuls.push_back({matmul, lhs.getArgNumber(), rhs.getArgNumber(), k,
                         transposedLhs, scales, bits, group, int8Rows,
                         rowScales, rowZeroPoints});
      continue;
    }
    if (auto broadcast = dyn_cast<mf::BroadcastOp>(op)) {
      auto argument = dyn_cast<BlockArgument>(broadcast.getInput());
      std::optional<TileInput> kind =
          classifyTileInput(broadcast.getInput().getType().getShape(), shape);
      if (!argument || broadcast.getType().getShape() != shape || !kind) {
        why = "a broadcast the tiles cannot follow";
        return failure();
      }
      argumentOf[broadcast.getResult()] = {argument.getArgNumber(), *kind};
      continue;
    }
    bool splat = isa<mf::ConstantOp>(op) &&
                 isa<SplatElementsAttr>(cast<mf::ConstantOp>(op).getValue());
    if (!(mf::isElementwiseOp(&op) || splat) ||
        cast<RankedTensorType>(op.getResult(0).getType()).getShape() != shape) {
      why = "no epilogue rule for " + op.getName().getStringRef().str();
      return failure();
    }
    for (Value operand : op.getOperands()) {
      if (auto argument = dyn_cast<BlockArgument>(operand)) {
        if (cast<RankedTensorType>(operand.getType()).getShape() != shape) {
          why = "an input of another shape used directly";
          return failure();
        }
        argumentOf[operand] = {argument.getArgNumber(), TileInput::Full};
      }
    }
  }
  if (matmuls.empty()) {
    why = "no matmul";
    return failure();
  }

  // Products by a `panels` parameter (mf-choose-weight-layout), which
  // multiply by it transposed, read it as panels the runtime packs once
  // (runtime/kernels/PanelGemm.h): the gemm service packs nothing per call, a
  // one-row product streams them, and Graph Mode need not keep the
  // parameter as stored. Any other product reads it as stored.
  // int8 rows read an int8 weight's dot panels instead.
  auto readsPanels = [&](MatmulInfo matmul) {
    auto parameter = fusion.getInputs()[matmul.rhs].getDefiningOp<mf::ParamOp>();
    const llvm::StringSet<> &packed =
        matmul.int8Rows ? panelParameters.dotPanels : panelParameters.panels;
    return parameter && packed.contains(parameter.getName()) &&
           matmul.op.getTransposeRhs() && !matmul.transposedLhs;
  };
  bool anyPanels = llvm::any_of(matmuls, readsPanels);
  // One row times the weights (decode) is the kernel's own vector code;
  // anything else (and int8 rows) calls the gemm services.
  bool matvec = rows == 1 && llvm::none_of(matmuls, [](MatmulInfo matmul) {
                  return matmul.transposedLhs || matmul.int8Rows;
                });
  // A quantized weight's products: f32 activations as stored or packed;
  // f16 and bf16 ones through the packed layout's services only.
  for (MatmulInfo matmul : matmuls) {
    // An int4 weight as stored (a tied table its lookups read): the row
    // code for one row (whole groups of 32), f32 rows through the service.
    if (matmul.bits == 4 && !readsPanels(matmul) &&
        (matmul.k % 32 != 0 || matmul.group % 32 != 0 ||
         (!matvec && !cast<RankedTensorType>(matmul.op.getLhs().getType())
                           .getElementType()
                           .isF32()))) {
      why = "an int4 weight that is not packed (--pack-weights=false, a "
            "target without the microkernels, or a table lookups read) with "
            "f16/bf16 rows or groups not of 32";
      return failure();
    }
    if (matmul.bits == 4 &&
        cast<RankedTensorType>(fusion.getInputs()[*matmul.scales].getType())
                .getElementType() !=
            cast<RankedTensorType>(matmul.op.getLhs().getType())
                .getElementType()) {
      why = "an int4 weight whose scales are not in its product's type";
      return failure();
    }
    if (matmul.scales && !matmul.int8Rows && !readsPanels(matmul) && rows > 1 &&
        !cast<RankedTensorType>(matmul.op.getLhs().getType())
             .getElementType()
             .isF32()) {
      why = "f16/bf16 rows times a quantized weight that is not packed "
            "(--pack-weights=false or a target without the microkernels)";
      return failure();
    }
  }

  Type i64 = builder.getI64Type(), f32 = builder.getF32Type();
  Location loc = fusion.getLoc();
  int64_t depth = 0;
  for (const MatmulInfo &matmul : matmuls) {
    depth += matmul.k;
  }
  // A one-row product reads panels whole: its tiles start at a panel.
  auto [tileRows, tileCols] =
      chooseTile(rows, cols, depth, rows == 1 && anyPanels ? kPanelWidth : 1,
                 llvm::any_of(matmuls, [](const MatmulInfo &matmul) {
                   return matmul.int8Rows;
                 }));
  int64_t tilesAcross = llvm::divideCeil(cols, tileCols);
  int64_t tiles = llvm::divideCeil(rows, tileRows) * tilesAcross;

  auto serviceOf = [&](MatmulInfo matmul) -> StringRef {
    // (Rows quantized by the service: the type they are stored in.)
    Type element =
        cast<RankedTensorType>(fusion.getInputs()[matmul.lhs].getType())
            .getElementType();
    if (matmul.int8Rows) {
      if (!readsPanels(matmul)) {
        return element.isF16()    ? kGemmInt8RowsServiceF16
               : element.isBF16() ? kGemmInt8RowsServiceBF16
                                  : kGemmInt8RowsService;
      }
      return element.isF16()    ? kGemmDotServiceF16
             : element.isBF16() ? kGemmDotServiceBF16
                                : kGemmDotService;
    }
    if (matmul.bits == 4) {
      if (!readsPanels(matmul)) {
        return kGemmServiceI4;
      }
      return element.isF16()    ? kGemmPanelsServiceI4F16
             : element.isBF16() ? kGemmPanelsServiceI4BF16
                                : kGemmPanelsServiceI4;
    }
    if (matmul.scales) {
      if (!readsPanels(matmul)) {
        return kGemmServiceI8;
      }
      return element.isF16()    ? kGemmPanelsServiceI8F16
             : element.isBF16() ? kGemmPanelsServiceI8BF16
                                : kGemmPanelsServiceI8;
    }
    if (!readsPanels(matmul)) {
      return gemmServiceFor(element);
    }
    return element.isF16()    ? kGemmPanelsServiceF16
           : element.isBF16() ? kGemmPanelsServiceBF16
                              : kGemmPanelsService;
  };

  // The gemm services, each declared once per kernel module.
  auto module = cast<ModuleOp>(builder.getBlock()->getParentOp());
  for (const MatmulInfo &matmul : matvec ? ArrayRef<MatmulInfo>() : matmuls) {
    declareService(builder, module, serviceOf(matmul), /*returnsStatus=*/false);
  }

  // The kernel: the tile range, memrefs of the region's inputs, then its
  // results.
  func::FuncOp kernel = createKernelFunction(fusion, builder, tiles);
  Block *entry = &kernel.getBody().front();
  SmallVector<int32_t> panelInputs, dotPanelInputs;
  for (MatmulInfo matmul : matmuls) {
    if (readsPanels(matmul)) { // a flat buffer of the weight's size
      auto weight =
          cast<RankedTensorType>(fusion.getInputs()[matmul.rhs].getType());
      entry->getArgument(2 + matmul.rhs)
          .setType(MemRefType::get({weight.getNumElements()},
                                   weight.getElementType()));
      (matmul.int8Rows ? dotPanelInputs : panelInputs).push_back(matmul.rhs);
    }
  }
  if (!panelInputs.empty() || !dotPanelInputs.empty()) {
    kernel.setFunctionType(builder.getFunctionType(entry->getArgumentTypes(),
                                                   kernel.getResultTypes()));
  }
  // (Increasing, as the mfexec.kernel verifier wants.)
  for (auto [name, inputs] : {std::pair{kPanelInputsAttr, &panelInputs},
                              {kDotPanelInputsAttr, &dotPanelInputs}}) {
    llvm::sort(*inputs);
    inputs->erase(std::unique(inputs->begin(), inputs->end()), inputs->end());
    if (!inputs->empty()) {
      fusion->setAttr(name, builder.getDenseI32ArrayAttr(*inputs));
    }
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, value);
  };
  auto toI64 = [&](Value value) -> Value {
    return arith::IndexCastOp::create(builder, loc, i64, value);
  };
  auto pointerOf = [&](Value memref) -> Value {
    return toI64(memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref));
  };
  auto argument = [&](unsigned regionArgument) {
    return entry->getArgument(2 + regionArgument);
  };
  // A lone matmul (no epilogue) has the gemm write its result in place;
  // otherwise each matmul's tile goes to scratch for the epilogue.
  auto yield = cast<mf::YieldOp>(body.getTerminator());
  bool direct = matmuls.size() == 1 && yield.getValues().size() == 1 &&
                yield.getValues()[0] == matmuls[0].op.getResult() &&
                resultType.getElementType().isF32();
  SmallVector<Value> scratch;
  for (size_t i = 0; i < (direct ? 0 : matmuls.size()); ++i) {
    scratch.push_back(memref::AllocaOp::create(
        builder, loc, MemRefType::get({tileRows, tileCols}, f32), ValueRange{},
        builder.getI64IntegerAttr(64)));
  }
  // The gemm calls' argument struct (17 fields), one for all of them.
  Value gemmArguments =
      matvec ? Value() : serviceArguments(builder, kernel, 17);
  builder.setInsertionPoint(entry->getTerminator());
  scf::ForOp loop = buildTileLoop(builder, loc, entry, tiles);
  Value tile = loop.getInductionVar();
  Value m0 = arith::MulIOp::create(
      builder, loc, arith::DivUIOp::create(builder, loc, tile, index(tilesAcross)),
      index(tileRows));
  Value n0 = arith::MulIOp::create(
      builder, loc, arith::RemUIOp::create(builder, loc, tile, index(tilesAcross)),
      index(tileCols));
  Value m = arith::MinUIOp::create(
      builder, loc, index(tileRows),
      arith::SubIOp::create(builder, loc, index(rows), m0));
  Value n = arith::MinUIOp::create(
      builder, loc, index(tileCols),
      arith::SubIOp::create(builder, loc, index(cols), n0));
  // A quantized weight's product times its scales, in place: the tile's
  // `m` rows of `n` columns, `stride` apart from `base` in the flat
  // `product` (result or scratch), column j scaled by scales[n0 + j].
  auto scaleColumns = [&](MatmulInfo matmul, Value product, Value base,
                          int64_t stride, Value tileRows) {
    Value scales =
        flattenMemRef(builder, loc, argument(*matmul.scales), {cols});
    Value zero = index(0), one = index(1), rowStride = index(stride);
    scf::ForOp::create(
        builder, loc, zero, tileRows, one, ValueRange{},
        [&](OpBuilder &rowBuilder, Location, Value i, ValueRange) {
          Value row = arith::AddIOp::create(
              rowBuilder, loc, base,
              arith::MulIOp::create(rowBuilder, loc, i, rowStride));
          scf::ForOp::create(
              rowBuilder, loc, zero, n, one, ValueRange{},
              [&](OpBuilder &inner, Location, Value j, ValueRange) {
                Value at = arith::AddIOp::create(inner, loc, row, j);
                Value scale = memref::LoadOp::create(
                    inner, loc, scales,
                    ValueRange{arith::AddIOp::create(inner, loc, n0, j)});
                if (!scale.getType().isF32()) { // f16/bf16 scales
                  scale = arith::ExtFOp::create(inner, loc, inner.getF32Type(),
                                                scale);
                }
                Value value =
                    memref::LoadOp::create(inner, loc, product, ValueRange{at});
                memref::StoreOp::create(
                    inner, loc, arith::MulFOp::create(inner, loc, value, scale),
                    product, ValueRange{at});
                scf::YieldOp::create(inner, loc);
              });
          scf::YieldOp::create(rowBuilder, loc);
        });
  };
  for (auto [i, matmul] : llvm::enumerate(matmuls)) {
    if (matvec) {
      Value x = flattenMemRef(builder, loc, argument(matmul.lhs), {matmul.k});
      Value out = direct ? flattenMemRef(builder, loc,
                                         argument(fusion.getInputs().size()), {cols})
                         : flattenMemRef(builder, loc, scratch[i], {tileCols});
      Value offset = direct ? n0 : index(0);
      if (matmul.bits == 4) { // its scales applied per group
        Value scales = flattenMemRef(builder, loc, argument(*matmul.scales),
                                     {matmul.k / matmul.group * cols});
        if (readsPanels(matmul)) {
          emitVectorMatvecByInt4Panels(builder, loc, x, argument(matmul.rhs),
                                       scales, out, offset, n0, n, matmul.k,
                                       cols, matmul.group);
        } else {
          emitVectorMatvecInt4(builder, loc, x, argument(matmul.rhs), scales,
                               out, offset, n0, n, matmul.k, cols,
                               matmul.group);
        }
        continue;
      }
      if (readsPanels(matmul)) {
        emitVectorMatvecByPanels(builder, loc, x, argument(matmul.rhs), out,
                                 offset, n0, n, matmul.k, cols);
      } else {
        (matmul.op.getTransposeRhs() ? emitVectorMatvec
                                     : emitVectorMatvecByColumns)(
            builder, loc, x, argument(matmul.rhs), out, offset, n0, n,
            matmul.k);
      }
      if (matmul.scales) {
        scaleColumns(matmul, out, offset, 0, index(1));
      }
      continue;
    }
    Value target = pointerOf(direct ? argument(fusion.getInputs().size()) : scratch[i]);
    if (direct) { // the tile's corner in the [rows, cols] result
      Value offset = arith::AddIOp::create(
          builder, loc, arith::MulIOp::create(builder, loc, m0, index(cols)), n0);
      target = arith::AddIOp::create(
          builder, loc, target,
          toI64(arith::MulIOp::create(builder, loc, offset, index(4))));
    }
    // mfrt_gemm_args_v1 (runtime/hal/KernelAbi.h), field by field.
    SmallVector<Value> fields{
        pointerOf(argument(matmul.lhs)),
        pointerOf(argument(matmul.rhs)),
        target,
        toI64(index(direct ? cols : tileCols)),
        toI64(m0),
        toI64(n0),
        toI64(m),
        toI64(n),
        toI64(index(matmul.k)),
        toI64(index(cols)),
        toI64(index(matmul.op.getTransposeRhs() ? 1 : 0)),
        toI64(index(matmul.transposedLhs ? 1 : 0)),
        toI64(index(rows)),
        matmul.bits == 4 || matmul.int8Rows
            ? pointerOf(argument(*matmul.scales))
            : toI64(index(0)),
        toI64(index(matmul.group)),
        matmul.rowScales ? pointerOf(argument(*matmul.rowScales))
                         : toI64(index(0)),
        matmul.rowZeroPoints ? pointerOf(argument(*matmul.rowZeroPoints))
                             : toI64(index(0))};
    callService(builder, loc, serviceOf(matmul), gemmArguments, fields,
                /*returnsStatus=*/false);
    if (matmul.scales && matmul.bits == 8 && !matmul.int8Rows) {
      Value product =
          direct
              ? flattenMemRef(builder, loc, argument(fusion.getInputs().size()),
                              {rows * cols})
              : flattenMemRef(builder, loc, scratch[i], {tileRows * tileCols});
      Value base =
          direct ? arith::AddIOp::create(
                       builder, loc,
                       arith::MulIOp::create(builder, loc, m0, index(cols)), n0)
                 : index(0);
      scaleColumns(matmul, product, base, direct ? cols : tileCols, m);
    }
  }
  if (direct) {
    return kernel;
  }

  // The tile views the epilogue reads and writes.
  OpFoldResult zero = builder.getIndexAttr(0), one = builder.getIndexAttr(1);
  auto flatten = [&](Value memref, ArrayRef<int64_t> to) {
    return flattenMemRef(builder, loc, memref, to);
  };

  auto fullTile = [&](Value memref) -> Value {
    return memref::SubViewOp::create(builder, loc, flatten(memref, {rows, cols}),
                                     ArrayRef<OpFoldResult>{m0, n0},
                                     ArrayRef<OpFoldResult>{m, n},
                                     ArrayRef<OpFoldResult>{one, one});
  };
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, context);

  SmallVector<Value> genericInputs, genericOutputs;
  SmallVector<AffineMap> maps;
  llvm::MapVector<Value, unsigned> inputOf; // region value -> generic input
  for (auto [i, matmul] : llvm::enumerate(matmuls)) {
    inputOf[matmul.op.getResult()] = genericInputs.size();
    genericInputs.push_back(memref::SubViewOp::create(
        builder, loc, scratch[i], ArrayRef<OpFoldResult>{zero, zero},
        ArrayRef<OpFoldResult>{m, n}, ArrayRef<OpFoldResult>{one, one}));
    maps.push_back(identity);
  }
  addTileReads(
      builder, loc, argumentOf, argument, cols, fullTile,
      [&](Value row) -> Value {
        return memref::SubViewOp::create(builder, loc, row,
                                         ArrayRef<OpFoldResult>{n0},
                                         ArrayRef<OpFoldResult>{n},
                                         ArrayRef<OpFoldResult>{one});
      },
      genericInputs, maps, inputOf);
  unsigned resultBase = fusion.getInputs().size();
  for (unsigned i = 0; i < fusion.getNumResults(); ++i) {
    genericOutputs.push_back(fullTile(argument(resultBase + i)));
    maps.push_back(identity);
  }

  ScalarEmitter emitter(builder);
  SmallVector<utils::IteratorType> iterators(2, utils::IteratorType::parallel);
  // Loaded inputs in the compute domain; a matmul's f32 product rounded to
  // its result type first, as PyNative stores it.
  auto load = [&](Value key, Value scalar, Location at) {
    Type element = elementTypeOf(key);
    return emitter.widen(
        matmulOf.count(key) ? emitter.narrow(scalar, element, at) : scalar,
        element, at);
  };
  if (failed(buildBodyGeneric(builder, loc, body, genericInputs, genericOutputs,
                              maps, iterators, inputOf, load, why))) {
    kernel.erase();
    return mlir::failure();
  }
  return kernel;
}
