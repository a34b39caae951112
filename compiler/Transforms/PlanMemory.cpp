//===- PlanMemory.cpp - one static arena per entry ------------------------===//
//
// 1. Number the ops of an entry; give each transient op result a buffer
//    (reshapes and KV-cache writes, eager or in an attention kernel, share
//    their operand's; parameters, constants and assignments have none, nor
//    values the weights alone determine: derivedFromWeights). A value a kernel computes only
//    to assign it to a parameter is computed in place, in the parameter
//    (the assignment gets `mf.in_place`), when that is safe: see
//    assignsInPlace.
// 2. A buffer lives from its first definition to one past its last use;
//    buffers the entry returns through a view live to the end, and those it
//    returns directly are not planned (the runtime writes them into the
//    caller's tensors).
// 3. Plan with the portfolio planner and record offsets and totals as
//    attributes; optionally write the problem (CSV) and a picture (SVG).
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/MemoryPlanner.h"
#include "compiler/Transforms/OutputFile.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"

namespace mfc {
#define GEN_PASS_DEF_MFPLANMEMORYPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

#define DEBUG_TYPE "mf-plan-memory"

using namespace mlir;
using namespace mfc;

namespace {

int64_t tensorBytes(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() *
         std::max<int64_t>(1, tensor.getElementTypeBitWidth() / 8);
}

/// Whether `assign`'s value can be written by its kernel straight into the
/// parameter: the value is a result of a kernel region used only by the
/// assignment; the region reads the parameter's old value, if at all, only
/// elementwise at the same shape (so each element is read before it is
/// overwritten); and nothing after the region reads the old value.
bool assignsInPlace(mf::AssignOp assign) {
  Value value = assign.getValue();
  auto region = value.getDefiningOp<mf::FusionOp>();
  if (!region || !region->hasAttr("mf.kernel") || !value.hasOneUse() ||
      (region.getKind() != "elementwise" && region.getKind() != "matmul_epilogue")) {
    return false;
  }
  Block &body = region.getBody().front();
  // Reads of the old value: mf.param results and views of them.
  SmallVector<Value> oldValues;
  region->getParentOfType<func::FuncOp>().walk([&](mf::ParamOp read) {
    if (read.getName() == assign.getName()) {
      oldValues.push_back(read.getResult());
    }
  });
  for (size_t i = 0; i < oldValues.size(); ++i) {
    for (Operation *user : oldValues[i].getUsers()) {
      if (isa<mf::ReshapeOp>(user)) {
        oldValues.push_back(user->getResult(0));
      }
    }
  }
  for (Value old : oldValues) {
    for (OpOperand &use : old.getUses()) {
      Operation *user = use.getOwner();
      if (user == region.getOperation()) {
        BlockArgument argument = body.getArgument(use.getOperandNumber());
        bool elementwise = argument.getType() == value.getType() &&
                           llvm::all_of(argument.getUsers(), [](Operation *op) {
                             return mf::isElementwiseOp(op);
                           });
        if (!elementwise) {
          return false;
        }
      } else if (!isa<mf::ReshapeOp>(user) && !user->isBeforeInBlock(region)) {
        return false;
      }
    }
  }
  return true;
}

/// The buffers of one entry and the op result that defines each.
struct EntryBuffers {
  std::vector<PlannedBuffer> buffers;
  std::vector<OpResult> definitions;
  /// Values the weights and constants alone determine: outside the arena.
  std::vector<OpResult> derived;
};

/// The values of `entry` that its weights and constants alone determine —
/// parameters cast to the compute type, position tables: in an
/// entry that assigns no parameter, the results of an op or kernel region
/// that reads only parameters, constants, views of them and such values,
/// when none of its results (nor a view of one) is returned or updated as a
/// KV cache. The runtime's HostProgram applies the same rule to the
/// serialized program.
llvm::DenseSet<Value> derivedFromWeights(func::FuncOp entry) {
  Block &body = entry.getBody().front();
  llvm::DenseSet<Value> derived;
  if (!body.getOps<mf::AssignOp>().empty()) {
    return derived;
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  llvm::DenseSet<Value> excluded(ret.getOperands().begin(),
                                 ret.getOperands().end());
  entry.walk([&](mf::KvCacheWriteOp write) {
    Value cache = write.getCache();
    if (auto argument = dyn_cast<BlockArgument>(cache)) {
      if (auto fusion = dyn_cast<mf::FusionOp>(argument.getOwner()->getParentOp())) {
        cache = fusion.getInputs()[argument.getArgNumber()];
      }
    }
    excluded.insert(cache);
    excluded.insert(write.getResult());
  });
  // Nor what is returned or updated through a view.
  for (Operation &op : llvm::reverse(body)) {
    if (isa<mf::ReshapeOp>(op) && excluded.contains(op.getResult(0))) {
      excluded.insert(op.getOperand(0));
    }
  }
  llvm::DenseSet<Value> fixed;
  for (Operation &op : body) {
    if (isa<mf::ParamOp, mf::ConstantOp>(op)) {
      fixed.insert(op.getResult(0));
      continue;
    }
    if (isa<mf::ReshapeOp>(op)) {
      if (fixed.contains(op.getOperand(0))) {
        fixed.insert(op.getResult(0));
      }
      continue;
    }
    bool writesCache = isa<mf::FusionOp>(op) &&
                       op.walk([](mf::KvCacheWriteOp) {
                           return WalkResult::interrupt();
                         }).wasInterrupted();
    if (isa<mf::KvCacheWriteOp, func::ReturnOp>(op) || writesCache ||
        !llvm::all_of(op.getOperands(),
                      [&](Value value) { return fixed.contains(value); }) ||
        llvm::any_of(op.getResults(),
                     [&](Value value) { return excluded.contains(value); })) {
      continue;
    }
    for (Value value : op.getResults()) {
      fixed.insert(value);
      derived.insert(value);
    }
  }
  return derived;
}

/// The input of a fusion whose result `value` is: a KV cache the region
/// writes in place (its kernel updates the input's storage).
Value cacheUpdatedInPlace(OpResult value) {
  auto fusion = dyn_cast<mf::FusionOp>(value.getOwner());
  if (!fusion) {
    return {};
  }
  auto yield = cast<mf::YieldOp>(fusion.getBody().front().getTerminator());
  auto write = yield.getValues()[value.getResultNumber()]
                   .getDefiningOp<mf::KvCacheWriteOp>();
  auto cache = write ? dyn_cast<BlockArgument>(write.getCache()) : nullptr;
  return cache ? fusion.getInputs()[cache.getArgNumber()] : Value();
}

EntryBuffers collectBuffers(func::FuncOp entry) {
  EntryBuffers result;
  llvm::DenseSet<Value> derived = derivedFromWeights(entry);
  llvm::DenseMap<Value, int> bufferOf;
  Block &body = entry.getBody().front();
  int64_t end = static_cast<int64_t>(body.getOperations().size()) + 1;
  int64_t index = 0;
  for (Operation &op : body) {
    ++index;
    for (Value operand : op.getOperands()) {
      auto it = bufferOf.find(operand);
      if (it != bufferOf.end()) {
        PlannedBuffer &buffer = result.buffers[it->second];
        buffer.upper = std::max(buffer.upper,
                                isa<func::ReturnOp>(op) ? end : index + 1);
      }
    }
    if (isa<mf::ParamOp, mf::ConstantOp, mf::AssignOp, func::ReturnOp>(op)) {
      continue;
    }
    // Views and in-place updates share their operand's buffer (if it has
    // one: entry arguments live outside the arena).
    if (isa<mf::ReshapeOp, mf::KvCacheWriteOp>(op)) {
      auto it = bufferOf.find(op.getOperand(0));
      if (it != bufferOf.end()) {
        bufferOf[op.getResult(0)] = it->second;
      }
      continue;
    }
    for (OpResult value : op.getResults()) {
      if (!isa<RankedTensorType>(value.getType())) {
        continue;
      }
      if (derived.contains(value)) {
        result.derived.push_back(value);
        continue;
      }
      if (Value cache = cacheUpdatedInPlace(value)) {
        auto it = bufferOf.find(cache);
        if (it != bufferOf.end()) {
          bufferOf[value] = it->second;
        }
        continue;
      }
      bufferOf[value] = static_cast<int>(result.buffers.size());
      std::string path = mf::getModelPath(op.getLoc());
      result.buffers.push_back({std::to_string(result.buffers.size()) + ":" +
                                    (path.empty() ? "value" : path),
                                index, index + 1, tensorBytes(value.getType()),
                                -1});
      result.definitions.push_back(value);
    }
  }
  // What the entry returns is written straight into buffers the runtime
  // hands to the caller, and values assigned in place into their
  // parameters: not in the arena.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  llvm::DenseSet<Value> inPlace;
  for (auto assign : body.getOps<mf::AssignOp>()) {
    if (assignsInPlace(assign)) {
      assign->setAttr("mf.in_place", UnitAttr::get(assign.getContext()));
      inPlace.insert(assign.getValue());
    } else {
      assign->removeAttr("mf.in_place");
    }
  }
  EntryBuffers planned;
  planned.derived = std::move(result.derived);
  for (auto [buffer, value] : llvm::zip(result.buffers, result.definitions)) {
    if (!llvm::is_contained(ret.getOperands(), Value(value)) &&
        !inPlace.contains(value)) {
      planned.buffers.push_back(buffer);
      planned.definitions.push_back(value);
    }
  }
  return planned;
}

/// Whether `value` is recomputed for the backward (mf-recompute's clones,
/// alone or inside the kernel region that computes it).
bool isRecomputed(OpResult value) {
  Operation *op = value.getOwner();
  if (op->hasAttr("mf.recomputed")) {
    return true;
  }
  bool inside = false;
  op->walk([&](Operation *nested) {
    inside = inside || nested->hasAttr("mf.recomputed");
  });
  return inside;
}

/// Draws each entry's plan as rectangles, time across and offset down;
/// recomputed buffers have a red dashed outline.
void writeSvg(llvm::raw_ostream &os,
              const std::vector<std::pair<std::string, EntryBuffers>> &entries) {
  const int width = 1200, rowHeight = 300, margin = 30;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width + 2 * margin
     << "' height='" << entries.size() * (rowHeight + margin) + margin
     << "' font-family='sans-serif' font-size='12'>\n";
  int top = margin;
  for (const auto &[name, entry] : entries) {
    int64_t steps = 1, arena = 1;
    for (const PlannedBuffer &buffer : entry.buffers) {
      steps = std::max(steps, buffer.upper);
      arena = std::max(arena, buffer.offset + buffer.size);
    }
    size_t recomputed = llvm::count_if(entry.definitions, isRecomputed);
    os << "<text x='" << margin << "' y='" << top - 8 << "'>" << name
       << ": arena " << arena << " bytes, " << entry.buffers.size()
       << " buffers";
    if (recomputed) {
      os << ", " << recomputed
         << " recomputed for the backward (red dashed outline)";
    }
    os << "</text>\n";
    os << "<rect x='" << margin << "' y='" << top << "' width='" << width
       << "' height='" << rowHeight << "' fill='none' stroke='#888'/>\n";
    for (size_t i = 0; i < entry.buffers.size(); ++i) {
      const PlannedBuffer &buffer = entry.buffers[i];
      double x = margin + double(width) * buffer.lower / steps;
      double w = std::max(1.0, double(width) * (buffer.upper - buffer.lower) / steps);
      double y = top + double(rowHeight) * buffer.offset / arena;
      double h = std::max(0.5, double(rowHeight) * buffer.size / arena);
      bool again = isRecomputed(entry.definitions[i]);
      os << llvm::format("<rect x='%.1f' y='%.2f' width='%.1f' height='%.2f' "
                         "fill='hsl(%d,60%%,60%%)' %s><title>",
                         x, y, w, h, static_cast<int>(i * 47 % 360),
                         again ? "stroke='#d00' stroke-width='1.5' "
                                 "stroke-dasharray='4,2' class='recomputed'"
                               : "stroke='#333' stroke-width='0.3'")
         << buffer.id << " [" << buffer.lower << ", " << buffer.upper << ") "
         << buffer.size << " bytes at " << buffer.offset
         << (again ? ", recomputed for the backward" : "")
         << "</title></rect>\n";
      if (w > 90 && h > 14) { // label rectangles that have room for it
        os << llvm::format("<text x='%.1f' y='%.1f' font-size='10'>", x + 3,
                           y + 12)
           << buffer.id.substr(buffer.id.find(':') + 1) << "</text>\n";
      }
    }
    top += rowHeight + margin;
  }
  os << "</svg>\n";
}

struct MFPlanMemoryPass : mfc::impl::MFPlanMemoryPassBase<MFPlanMemoryPass> {
  using MFPlanMemoryPassBase::MFPlanMemoryPassBase;

  void runOnOperation() override {
    Builder builder(&getContext());
    std::vector<std::pair<std::string, EntryBuffers>> planned;
    std::string csv = "id,lower,upper,size\n";
    for (auto entry : getOperation().getOps<func::FuncOp>()) {
      if (entry.isExternal()) {
        continue;
      }
      EntryBuffers buffers = collectBuffers(entry);
      MemoryPlanOptions options;
      options.alignment = alignment;
      options.timeLimitSeconds = timeLimit;
      for (const PlannedBuffer &buffer : buffers.buffers) {
        csv += entry.getSymName().str() + "/" + buffer.id + "," +
               std::to_string(buffer.lower) + "," +
               std::to_string(buffer.upper) + "," +
               std::to_string(buffer.size) + "\n";
      }
      MemoryPlanResult result = planMemory(buffers.buffers, options);
      llvm::DenseMap<Operation *, SmallVector<int64_t>> offsets;
      auto record = [&](OpResult value, int64_t offset) {
        SmallVector<int64_t> &list = offsets[value.getOwner()];
        list.resize(value.getOwner()->getNumResults(), -1);
        list[value.getResultNumber()] = offset;
      };
      for (auto [buffer, value] :
           llvm::zip(buffers.buffers, buffers.definitions)) {
        record(value, buffer.offset);
      }
      for (OpResult value : buffers.derived) {
        record(value, kDerivedFromWeightsOffset);
      }
      for (auto &[op, list] : offsets) {
        op->setAttr("mf.arena_offsets", builder.getDenseI64ArrayAttr(list));
      }
      entry->setAttr("mf.arena_bytes",
                     builder.getI64IntegerAttr(result.arenaBytes));
      entry->setAttr("mf.arena_lower_bound",
                     builder.getI64IntegerAttr(result.lowerBound));
      int64_t derivedBytes = 0;
      for (OpResult value : buffers.derived) {
        derivedBytes += tensorBytes(value.getType());
      }
      if (derivedBytes > 0) {
        entry->setAttr("mf.derived_bytes", builder.getI64IntegerAttr(derivedBytes));
      } else {
        entry->removeAttr("mf.derived_bytes");
      }
      planned.emplace_back(entry.getSymName().str(), std::move(buffers));
    }
    if (!csvFile.empty() && failed(writeFile(csvFile, [&](llvm::raw_ostream &os) {
          os << csv;
        }))) {
      return signalPassFailure();
    }
    if (!svgFile.empty() && failed(writeFile(svgFile, [&](llvm::raw_ostream &os) {
          writeSvg(os, planned);
        }))) {
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }

  LogicalResult writeFile(StringRef path,
                          llvm::function_ref<void(llvm::raw_ostream &)> write) {
    return writeOutputFile(getOperation(), path, write);
  }
};

} // namespace
