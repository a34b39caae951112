//===- AttentionKernels.cpp - attention regions -> tiled kernels ----------===//
//
// An attention region (FuseAttention.cpp) is an mf.attention with, when it
// alone reads them, the RoPE of its query, the KV-cache writes of its key
// and value (with an int8 cache, the mf.quantize of their rows), and the
// RoPE of the new keys. Its kernel's tiles are ranges of (batch, KV head)
// units:
//
//   for tile t in [tileBegin, tileEnd):
//     status = mfrt_attention(units of t, query, new keys, new values,
//                             caches in and out, positions, past_length,
//                             output, shape, flags, scale, theta,
//                             block table, block size, pool blocks,
//                             key scales, value scales)
//   return the first status that is not MFRT_KERNEL_OK
//
// The service (runtime/kernels/FlashAttention.h) writes a unit's new cache rows
// (rotated keys, values) in place, then attends for the query heads that
// read that KV head, rotating each block of query rows as it loads it, by
// blocks of queries and keys with an online softmax. Units are independent
// (a unit alone writes its KV head's rows), so the runtime runs tiles on
// its threads.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <array>

using namespace mlir;
using namespace mfc;

namespace {

/// Below this many query-key multiply-adds a region is one tile: the
/// eager kernel's threshold for running serially.
constexpr int64_t kMinParallelAttentionWork = int64_t(1) << 16;

/// The pieces of a region, as region arguments (-1: absent).
struct AttentionParts {
  mf::AttentionOp attention;
  mf::RopeOp ropeQuery, ropeKey;
  mf::KvCacheWriteOp writeKey, writeValue;
  mf::QuantizeOp quantizeKey, quantizeValue; // an int8 cache's
  int query = -1, newKeys = -1, newValues = -1, cacheKey = -1, cacheValue = -1,
      positions = -1, past = -1, blockTable = -1, keyScales = -1,
      valueScales = -1;
  int64_t pastValue = 0; // when past_length is a constant
};

int argumentNumber(Value value) {
  auto argument = dyn_cast<BlockArgument>(value);
  return argument ? static_cast<int>(argument.getArgNumber()) : -1;
}

/// Takes `value` apart as `rope(argument)` or `argument`.
int sourceOf(Value value, mf::RopeOp &rope) {
  if ((rope = value.getDefiningOp<mf::RopeOp>())) {
    return rope.getInverse() ? -1 : argumentNumber(rope.getInput());
  }
  return argumentNumber(value);
}

FailureOr<AttentionParts> analyze(mf::FusionOp fusion, std::string &why) {
  AttentionParts parts;
  Block &body = fusion.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (auto attention = dyn_cast<mf::AttentionOp>(op)) {
      parts.attention = attention;
    }
  }
  mf::AttentionOp attention = parts.attention;
  if (!attention) {
    why = "no attention";
    return failure();
  }
  parts.writeKey = attention.getKey().getDefiningOp<mf::KvCacheWriteOp>();
  parts.writeValue = attention.getValue().getDefiningOp<mf::KvCacheWriteOp>();
  if (bool(parts.writeKey) != bool(parts.writeValue)) {
    why = "a cache for the keys or the values alone";
    return failure();
  }
  parts.query = sourceOf(attention.getQuery(), parts.ropeQuery);
  if (attention.getKeyScale()) {
    // An int8 cache: the region quantizes the new rows by the scales it
    // reads them with.
    parts.quantizeKey =
        parts.writeKey
            ? parts.writeKey.getUpdate().getDefiningOp<mf::QuantizeOp>()
            : mf::QuantizeOp();
    parts.quantizeValue =
        parts.writeValue
            ? parts.writeValue.getUpdate().getDefiningOp<mf::QuantizeOp>()
            : mf::QuantizeOp();
    parts.keyScales = argumentNumber(attention.getKeyScale());
    parts.valueScales = argumentNumber(attention.getValueScale());
    if (!parts.quantizeKey || !parts.quantizeValue ||
        parts.quantizeKey.getZeroPoint() ||
        parts.quantizeValue.getZeroPoint() ||
        parts.quantizeKey.getScale() != attention.getKeyScale() ||
        parts.quantizeValue.getScale() != attention.getValueScale() ||
        parts.keyScales < 0 || parts.valueScales < 0) {
      why = "an int8 cache whose rows the region does not quantize "
            "(symmetric, by the scales the attention reads)";
      return failure();
    }
  }
  if (parts.writeKey) {
    parts.cacheKey = argumentNumber(parts.writeKey.getCache());
    parts.cacheValue = argumentNumber(parts.writeValue.getCache());
    parts.newKeys = sourceOf(parts.quantizeKey ? parts.quantizeKey.getInput()
                                               : parts.writeKey.getUpdate(),
                             parts.ropeKey);
    parts.newValues =
        argumentNumber(parts.quantizeValue ? parts.quantizeValue.getInput()
                                           : parts.writeValue.getUpdate());
    // The updated caches are the region's results (the kernel writes them
    // in place); a cache nothing reads after the region is not written.
    if (!llvm::is_contained(body.getTerminator()->getOperands(),
                            parts.writeKey.getResult()) ||
        !llvm::is_contained(body.getTerminator()->getOperands(),
                            parts.writeValue.getResult())) {
      why = "a cache write whose result the region does not return";
      return failure();
    }
    if (parts.cacheKey < 0 || parts.cacheValue < 0 ||
        parts.writeKey.getPosition() != attention.getPastLength() ||
        parts.writeValue.getPosition() != attention.getPastLength() ||
        parts.writeKey.getBlockTable() != attention.getBlockTable() ||
        parts.writeValue.getBlockTable() != attention.getBlockTable()) {
      why = "cache writes that are not at the attention's past_length "
            "through its block table";
      return failure();
    }
    if (Value table = attention.getBlockTable();
        table && (parts.blockTable = argumentNumber(table)) < 0) {
      why = "a block table computed in the region";
      return failure();
    }
  } else if (attention.getBlockTable()) {
    why = "a paged attention without its cache writes";
    return failure();
  } else {
    parts.newKeys = sourceOf(attention.getKey(), parts.ropeKey);
    parts.newValues = argumentNumber(attention.getValue());
  }
  if (parts.query < 0 || parts.newKeys < 0 || parts.newValues < 0) {
    why = "an operand computed in the region by something else";
    return failure();
  }
  if (parts.ropeQuery && parts.ropeKey &&
      (parts.ropeQuery.getPositions() != parts.ropeKey.getPositions() ||
       parts.ropeQuery.getTheta() != parts.ropeKey.getTheta())) {
    why = "RoPEs by different positions or theta";
    return failure();
  }
  mf::RopeOp rope = parts.ropeQuery ? parts.ropeQuery : parts.ropeKey;
  if (rope && (parts.positions = argumentNumber(rope.getPositions())) < 0) {
    why = "positions computed in the region";
    return failure();
  }
  if (Value past = attention.getPastLength()) {
    parts.past = argumentNumber(past);
    auto constant = past.getDefiningOp<mf::ConstantOp>();
    auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue())
                          : SplatElementsAttr();
    if (parts.past < 0 && !splat) {
      why = "a past_length computed in the region";
      return failure();
    }
    if (splat) {
      parts.pastValue = splat.getSplatValue<APInt>().getSExtValue();
    }
  }
  // Every op must be one of these, and every result one the kernel writes.
  for (Operation &op : body.without_terminator()) {
    if (!llvm::is_contained<Operation *>(
            {parts.attention, parts.ropeQuery, parts.ropeKey, parts.writeKey,
             parts.writeValue, parts.quantizeKey, parts.quantizeValue},
            &op) &&
        !(isa<mf::ConstantOp>(op) &&
          op.getResult(0) == attention.getPastLength())) {
      why = "no attention rule for " + op.getName().getStringRef().str();
      return failure();
    }
  }
  for (Value yielded : body.getTerminator()->getOperands()) {
    if (yielded != attention.getResult() &&
        !(parts.writeKey && yielded == parts.writeKey.getResult()) &&
        !(parts.writeValue && yielded == parts.writeValue.getResult())) {
      why = "a result that is not the output or a cache";
      return failure();
    }
  }
  Type storage = attention.getQuery().getType().getElementType();
  for (Type type : llvm::concat<const Type>(fusion.getInputs().getTypes(),
                                            fusion.getResultTypes())) {
    Type element = cast<RankedTensorType>(type).getElementType();
    if (isa<FloatType>(element) &&
        (element != storage ||
         !(element.isF32() || element.isF16() || element.isBF16()))) {
      why = "attention buffers of more than one float type, or not f32, "
            "f16 or bf16";
      return failure();
    }
  }
  return parts;
}

Value i64Constant(OpBuilder &builder, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(builder, loc, builder.getI64Type(),
                                      value);
}

/// The address (an i64) of the buffer of region argument `number` (inputs
/// first, then results), or 0 for -1 (a buffer the region does not have).
Value pointerOfArgument(OpBuilder &builder, Location loc, Block *entry,
                        int number) {
  if (number < 0) {
    return i64Constant(builder, loc, 0);
  }
  return arith::IndexCastOp::create(
      builder, loc, builder.getI64Type(),
      memref::ExtractAlignedPointerAsIndexOp::create(
          builder, loc, entry->getArgument(2 + number)));
}

/// A kernel whose tiles are ranges of (batch, KV head) units — all of them
/// in one tile below kMinParallelAttentionWork — each tile one call of
/// `service` with its argument struct of `fields` fields. `builder` is left
/// in the tile loop.
struct UnitKernel {
  func::FuncOp kernel;
  Block *entry;
  Value unitBegin, unitEnd; // i64
  Value status;             // memref<i32>: the first failure, else OK
  Value arguments;          // the service's argument struct
  OpBuilder &builder;
  Location loc;

  /// An i64 constant, an f64 one, and the address of kernel argument
  /// `number` as i64 (0 for an argument the region does not have, number <
  /// 0).
  Value constant(int64_t value) { return i64Constant(builder, loc, value); }
  Value real(double value) {
    return arith::ConstantFloatOp::create(builder, loc, builder.getF64Type(),
                                          APFloat(value));
  }
  Value pointer(int number) {
    return pointerOfArgument(builder, loc, entry, number);
  }
  /// The services' shape arguments: batch, seq, heads, kvHeads, dim and
  /// key rows, from query [batch, seq, heads, dim] and key [batch, keys,
  /// kvHeads, dim].
  SmallVector<Value> shape(ArrayRef<int64_t> query, ArrayRef<int64_t> key) {
    return {constant(query[0]), constant(query[1]), constant(query[2]),
            constant(key[2]),   constant(query[3]), constant(key[1])};
  }
  /// Calls `service` for this tile: the kernel returns the first status
  /// that is not OK.
  void call(StringRef service, ValueRange fields) {
    Value result = callService(builder, loc, service, arguments, fields,
                               /*returnsStatus=*/true);
    Value before = memref::LoadOp::create(builder, loc, status);
    Value ok = arith::CmpIOp::create(
        builder, loc, arith::CmpIPredicate::eq, before,
        arith::ConstantIntOp::create(builder, loc, builder.getI32Type(),
                                     MFRT_KERNEL_OK));
    memref::StoreOp::create(
        builder, loc, arith::SelectOp::create(builder, loc, ok, result, before),
        status);
  }
};
UnitKernel buildUnitKernel(mf::FusionOp fusion, OpBuilder &builder,
                           ArrayRef<int64_t> query, ArrayRef<int64_t> key,
                           StringRef service, unsigned fields) {
  int64_t units = query[0] * key[2];
  int64_t work = query[0] * query[1] * query[2] * key[1] * query[3];
  int64_t tiles = work < kMinParallelAttentionWork ? 1 : units;
  int64_t unitsPerTile = llvm::divideCeil(units, tiles);
  Location loc = fusion.getLoc();
  declareService(builder, cast<ModuleOp>(builder.getBlock()->getParentOp()),
                 service, /*returnsStatus=*/true);
  func::FuncOp kernel = createKernelFunction(fusion, builder, tiles);
  Value arguments = serviceArguments(builder, kernel, fields);
  Block *entry = &kernel.getBody().front();
  Operation *terminator = entry->getTerminator();
  builder.setInsertionPoint(terminator);
  Value status = memref::AllocaOp::create(
      builder, loc, MemRefType::get({}, builder.getI32Type()));
  memref::StoreOp::create(builder, loc, terminator->getOperand(0), status);
  terminator->setOperand(0, memref::LoadOp::create(builder, loc, status));
  builder.setInsertionPoint(terminator->getOperand(0).getDefiningOp());
  scf::ForOp loop = buildTileLoop(builder, loc, entry, tiles);
  Value unitBegin = arith::MulIOp::create(
      builder, loc,
      arith::IndexCastOp::create(builder, loc, builder.getI64Type(),
                                 loop.getInductionVar()),
      i64Constant(builder, loc, unitsPerTile));
  Value unitEnd = arith::AddIOp::create(
      builder, loc, unitBegin, i64Constant(builder, loc, unitsPerTile));
  return {kernel, entry, unitBegin, unitEnd, status, arguments, builder, loc};
}

} // namespace

FailureOr<func::FuncOp> mfc::buildAttentionKernel(mf::FusionOp fusion,
                                                  OpBuilder &builder,
                                                  std::string &why) {
  FailureOr<AttentionParts> analyzed = analyze(fusion, why);
  if (failed(analyzed)) {
    return failure();
  }
  AttentionParts parts = *analyzed;
  ArrayRef<int64_t> query = parts.attention.getQuery().getType().getShape();
  ArrayRef<int64_t> pool = parts.attention.getKey().getType().getShape();
  // A paged pool's keys, as each row sees them: [batch, table width x
  // block_size, kv_heads, head_dim].
  SmallVector<int64_t> key(pool);
  if (Value table = parts.attention.getBlockTable()) {
    key = {query[0],
           cast<RankedTensorType>(table.getType()).getDimSize(1) * pool[1],
           pool[2], pool[3]};
  }
  auto newKeysType =
      cast<RankedTensorType>(fusion.getInputs()[parts.newKeys].getType());
  OpBuilder::InsertionGuard guard(builder);
  UnitKernel unit =
      buildUnitKernel(fusion, builder, query, key, kAttentionService, 28);
  // The region result that yields `value`, as a kernel argument number.
  auto yield = cast<mf::YieldOp>(fusion.getBody().front().getTerminator());
  auto resultPointer = [&](Value value) -> Value {
    for (auto [index, yielded] : llvm::enumerate(yield.getValues())) {
      if (yielded == value) {
        return unit.pointer(static_cast<int>(fusion.getInputs().size() + index));
      }
    }
    return unit.constant(0);
  };
  bool cached = bool(parts.writeKey);
  int64_t flags = (parts.attention.getCausal() ? 1 : 0) |
                  (parts.ropeQuery ? 2 : 0) | (parts.ropeKey ? 4 : 0) |
                  (parts.attention.getPastLength() ? 8 : 0);
  // One past length per batch row, read through the pointer.
  if (parts.past >= 0 &&
      cast<RankedTensorType>(parts.attention.getPastLength().getType())
              .getRank() == 1) {
    flags |= 64;
  }
  bool paged = parts.blockTable >= 0;
  flags |= paged ? 128 : 0;
  flags |= parts.keyScales >= 0 ? 256 : 0;
  Type storage = parts.attention.getQuery().getType().getElementType();
  flags |= storage.isF16() ? 16 : storage.isBF16() ? 32 : 0;
  mf::RopeOp rope = parts.ropeQuery ? parts.ropeQuery : parts.ropeKey;
  SmallVector<Value> operands{
      unit.unitBegin,
      unit.unitEnd,
      unit.pointer(parts.query),
      unit.pointer(parts.newKeys),
      unit.pointer(parts.newValues),
      unit.pointer(parts.cacheKey),
      unit.pointer(parts.cacheValue),
      cached ? resultPointer(parts.writeKey.getResult()) : unit.constant(0),
      cached ? resultPointer(parts.writeValue.getResult()) : unit.constant(0),
      unit.pointer(parts.positions),
      unit.pointer(parts.past),
      unit.constant(parts.pastValue),
      resultPointer(parts.attention.getResult())};
  llvm::append_range(operands, unit.shape(query, key));
  llvm::append_range(
      operands,
      SmallVector<Value>{
          unit.constant(newKeysType.getDimSize(1)), unit.constant(flags),
          unit.real(parts.attention.getScale().convertToDouble()),
          unit.real(rope ? rope.getTheta().convertToDouble() : 0.0),
          unit.pointer(parts.blockTable), unit.constant(paged ? pool[1] : 0),
          unit.constant(paged ? pool[0] : 0), unit.pointer(parts.keyScales),
          unit.pointer(parts.valueScales)});
  unit.call(kAttentionService, operands);
  return unit.kernel;
}

FailureOr<func::FuncOp> mfc::buildAttentionGradKernel(mf::FusionOp fusion,
                                                      OpBuilder &builder,
                                                      std::string &why) {
  // The gradients of one attention: their results by `wrt`.
  Block &body = fusion.getBody().front();
  mf::AttentionGradOp first;
  std::array<int, 3> resultOf = {-1, -1, -1};
  auto yield = cast<mf::YieldOp>(body.getTerminator());
  for (Operation &op : body.without_terminator()) {
    auto grad = dyn_cast<mf::AttentionGradOp>(op);
    if (!grad) {
      why = "no gradient rule for " + op.getName().getStringRef().str();
      return failure();
    }
    first = first ? first : grad;
    auto yielded = llvm::find(yield.getValues(), grad.getResult());
    if (grad->getOperands() != first->getOperands() ||
        grad.getCausal() != first.getCausal() ||
        grad.getScale() != first.getScale() ||
        yielded == yield.getValues().end() || resultOf[grad.getWrt()] != -1) {
      why = "gradients of different attentions";
      return failure();
    }
    resultOf[grad.getWrt()] = static_cast<int>(
        fusion.getInputs().size() + (yielded - yield.getValues().begin()));
  }
  Type storage = first ? first.getQuery().getType().getElementType() : Type();
  if (!first || !(storage.isF32() || storage.isF16() || storage.isBF16()) ||
      llvm::any_of(first->getOperands(), [&](Value value) {
        return !isa<BlockArgument>(value) ||
               (value != first.getPastLength() &&
                cast<RankedTensorType>(value.getType()).getElementType() !=
                    storage);
      })) {
    why = "gradients of region inputs of one type, f32, f16 or bf16 (and "
          "an i32 past length)";
    return failure();
  }
  ArrayRef<int64_t> query = first.getQuery().getType().getShape();
  ArrayRef<int64_t> key = first.getKey().getType().getShape();
  OpBuilder::InsertionGuard guard(builder);
  UnitKernel unit =
      buildUnitKernel(fusion, builder, query, key, kAttentionGradService, 18);
  auto operand = [&](Value value) {
    return unit.pointer(static_cast<int>(cast<BlockArgument>(value).getArgNumber()));
  };
  SmallVector<Value> operands{
      unit.unitBegin,
      unit.unitEnd,
      operand(first.getQuery()),
      operand(first.getKey()),
      operand(first.getValue()),
      operand(first.getGrad()),
      unit.pointer(resultOf[0]),
      unit.pointer(resultOf[1]),
      unit.pointer(resultOf[2])};
  llvm::append_range(operands, unit.shape(query, key));
  int64_t flags = (first.getCausal() ? 1 : 0) |
                  (storage.isF16() ? 16 : storage.isBF16() ? 32 : 0);
  operands.push_back(unit.constant(flags));
  operands.push_back(unit.real(first.getScale().convertToDouble()));
  operands.push_back(first.getPastLength() ? operand(first.getPastLength())
                                           : unit.pointer(-1));
  unit.call(kAttentionGradService, operands);
  return unit.kernel;
}
