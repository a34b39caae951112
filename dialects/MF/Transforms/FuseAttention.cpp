//===- FuseAttention.cpp - attention with its RoPE and KV-cache writes ----===//
//
// 1. For each mf.attention (f32, f16 or bf16), collect what only it
//    consumes: the RoPE of its query, the KV-cache writes of its key and
//    value (at the attention's past_length, through its block table when
//    the cache is paged), and the RoPE of the new keys
//    (into the write, or straight into the attention without a cache). Both
//    RoPEs must turn by the same positions and theta, or neither joins. An
//    int8 cache's writes bring the mf.quantize of their rows (by the
//    attention's scales); without it they do not join.
// 2. Outline them with the attention as one "attention" region when the
//    cost model says it moves fewer bytes (a lone attention does not: it is
//    left to the runtime's kernel). The region computes the rotated query
//    and keys per tile and writes the caches in place, so neither rotated
//    tensor reaches memory.
// 3. The gradients of one attention (attention_grad ops with the same
//    operands, one per `wrt`) become one "attention_grad" region, unless
//    one is read before the last: its kernel recomputes the softmax once.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFFUSEATTENTIONPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

#define DEBUG_TYPE "mf-fuse-attention"

using namespace mlir;
using namespace mlir::mf;

namespace {

/// Whether the runtime's attention services take `op`'s buffers: f32, f16
/// or bf16, all of the query's type (integer operands such as a
/// past_length or an int8 cache aside).
bool takenByAttentionService(Operation *op, Value query) {
  Type element = getElementTypeOrSelf(query);
  return (element.isF32() || element.isF16() || element.isBF16()) &&
         llvm::all_of(op->getOperands(), [&](Value operand) {
           Type type = getElementTypeOrSelf(operand);
           return !isa<FloatType>(type) || type == element;
         });
}

/// The forward RoPE producing `value`, if nothing else reads its result.
RopeOp soleRope(Value value) {
  auto rope = value.getDefiningOp<RopeOp>();
  // The attention service computes plain frequencies: a scaled RoPE stays
  // an op of its own.
  return rope && rope->hasOneUse() && !rope.getInverse() &&
                 !rope.getFrequencyScale()
             ? rope
             : RopeOp();
}

/// The write of new rows into a cache at `position` (through `table`, a
/// paged cache's block table, or none) producing `value`.
KvCacheWriteOp cacheWriteAt(Value value, Value position, Value table) {
  auto write = value.getDefiningOp<KvCacheWriteOp>();
  return write && position && write.getPosition() == position &&
                 write.getBlockTable() == table
             ? write
             : KvCacheWriteOp();
}

/// The symmetric mf.quantize by `scales` of the rows `write` writes, if
/// nothing else reads it.
QuantizeOp soleQuantize(KvCacheWriteOp write, Value scales) {
  auto quantize = write.getUpdate().getDefiningOp<QuantizeOp>();
  return quantize && quantize->hasOneUse() && !quantize.getZeroPoint() &&
                 quantize.getScale() == scales
             ? quantize
             : QuantizeOp();
}

/// The ops to fuse with `attention`, in program order (it last); with
/// `withCache`, its KV-cache writes too (and an int8 cache's quantizes).
SmallVector<Operation *> attentionGroup(AttentionOp attention, bool withCache) {
  Value past = attention.getPastLength();
  KvCacheWriteOp writeKey, writeValue;
  QuantizeOp quantizeKey, quantizeValue;
  if (withCache) {
    Value table = attention.getBlockTable();
    writeKey = cacheWriteAt(attention.getKey(), past, table);
    writeValue = cacheWriteAt(attention.getValue(), past, table);
    if (!writeKey || !writeValue || writeKey == writeValue) {
      return {};
    }
    if (attention.getKeyScale()) {
      quantizeKey = soleQuantize(writeKey, attention.getKeyScale());
      quantizeValue = soleQuantize(writeValue, attention.getValueScale());
      if (!quantizeKey || !quantizeValue) {
        return {};
      }
    }
  }
  Value newKeys = quantizeKey ? quantizeKey.getInput()
                  : writeKey  ? writeKey.getUpdate()
                              : attention.getKey();
  RopeOp ropeQuery = soleRope(attention.getQuery());
  RopeOp ropeKey = soleRope(newKeys);
  if (ropeQuery && ropeKey &&
      (ropeQuery.getPositions() != ropeKey.getPositions() ||
       ropeQuery.getTheta() != ropeKey.getTheta())) {
    ropeQuery = ropeKey = {};
  }
  SmallVector<Operation *> group;
  for (Operation *op :
       {ropeQuery.getOperation(), ropeKey.getOperation(),
        quantizeKey.getOperation(), quantizeValue.getOperation(),
        writeKey.getOperation(), writeValue.getOperation()}) {
    if (op && op->getBlock() == attention->getBlock()) {
      group.push_back(op);
    }
  }
  group.push_back(attention);
  llvm::sort(group,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  // The region sits where the attention is: what it takes from the others
  // must not be read in between (the new caches are read after it).
  for (Operation *op : group) {
    for (Operation *user : op->getUsers()) {
      if (!llvm::is_contained(group, user) &&
          user->getBlock() == attention->getBlock() &&
          user->isBeforeInBlock(attention)) {
        return {};
      }
    }
  }
  return group;
}

/// The gradients of one attention, with respect to its query, keys and
/// values: the ops read the same operands and differ in `wrt` alone.
bool sameAttention(AttentionGradOp a, AttentionGradOp b) {
  return a->getOperands() == b->getOperands() &&
         a.getCausal() == b.getCausal() && a.getScale() == b.getScale();
}

/// Groups the gradients of each attention (computed together, the softmax
/// once) where nothing reads an earlier one before the last.
void fuseAttentionGradients(func::FuncOp function) {
  SmallVector<SmallVector<Operation *>> groups;
  for (auto grad : function.getBody().front().getOps<AttentionGradOp>()) {
    if (!takenByAttentionService(grad, grad.getQuery())) {
      continue;
    }
    auto group = llvm::find_if(groups, [&](const auto &ops) {
      return sameAttention(cast<AttentionGradOp>(ops.front()), grad);
    });
    if (group == groups.end()) {
      groups.push_back({grad});
    } else {
      group->push_back(grad);
    }
  }
  for (SmallVector<Operation *> &group : groups) {
    Operation *last = group.back();
    bool readBetween = llvm::any_of(group, [&](Operation *op) {
      return llvm::any_of(op->getUsers(), [&](Operation *user) {
        return user->getBlock() == last->getBlock() &&
               user->isBeforeInBlock(last);
      });
    });
    if (group.size() > 1 && !readBetween && fusionCost(group).pays()) {
      outlineIntoFusion(group, FusionKind::attention_grad);
    }
  }
}

struct MFFuseAttentionPass
    : mf::impl::MFFuseAttentionPassBase<MFFuseAttentionPass> {
  void runOnOperation() override {
    fuseAttentionGradients(getOperation());
    SmallVector<AttentionOp> attentions(
        getOperation().getBody().front().getOps<AttentionOp>());
    for (AttentionOp attention : attentions) {
      if (!takenByAttentionService(attention, attention.getQuery())) {
        continue;
      }
      SmallVector<Operation *> group = attentionGroup(attention, true);
      // A paged cache is read through its table by the region that writes
      // it, an int8 one by the region that quantizes it; such an attention
      // alone is the runtime kernel's.
      if (group.empty() && !attention.getBlockTable() &&
          !attention.getKeyScale()) {
        group = attentionGroup(attention, false);
      }
      if (group.size() > 1 && fusionCost(group).pays()) {
        outlineIntoFusion(group, FusionKind::attention);
      }
    }
  }
};

} // namespace
