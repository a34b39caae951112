//===- PlanMemory.cpp - one static arena per host program -----------------===//
//
// 1. Number the ops of each mfexec.entry. A transient buffer lives from
//    the first command that binds it (or a view of it) to one past the
//    last; one the entry returns through a view, to the end.
// 2. Plan with the portfolio planner; each transient becomes an arena
//    slice at its offset, and the entry records the arena's size and the
//    lower bound. Optionally write the problem (CSV) and a picture (SVG),
//    buffers named by the model path of the command that writes them.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/MemoryPlanner.h"
#include "compiler/Transforms/OutputFile.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/IR/OpLevelProgram.h"
#include "dialects/MFExec/IR/MFExecOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"

#include <optional>

namespace mfc {
#define GEN_PASS_DEF_MFEXECPLANMEMORYPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;
using namespace mfc;

namespace {

/// The transient buffers of one host program.
struct EntryBuffers {
  std::vector<PlannedBuffer> buffers;
  std::vector<mfexec::TransientOp> transients;
  /// Per buffer: whether the command that writes it recomputes a value for
  /// the backward (mf-recompute's clones).
  std::vector<bool> recomputed;
};

/// The op-level ops `command` computes.
std::pair<int64_t, int64_t> opRangeOf(Operation *command) {
  if (auto dispatch = dyn_cast<mfexec::DispatchOp>(command)) {
    return {dispatch.getFirstOp(), dispatch.getOpCount()};
  }
  if (auto library = dyn_cast<mfexec::LibraryOp>(command)) {
    return {library.getOpIndex(), 1};
  }
  if (auto copy = dyn_cast<mfexec::CopyOp>(command)) {
    return {copy.getOpIndex(), 1};
  }
  return {0, 0};
}

EntryBuffers collectBuffers(mfexec::EntryOp entry,
                            const std::optional<mf::OpLevelProgram> &program) {
  EntryBuffers result;
  llvm::DenseMap<Value, size_t> bufferOf; // transients and views of them
  Block &body = entry.getBody().front();
  int64_t end = static_cast<int64_t>(body.getOperations().size()) + 1;
  int64_t index = 0;
  for (Operation &op : body) {
    ++index;
    if (auto transient = dyn_cast<mfexec::TransientOp>(op)) {
      bufferOf[transient] = result.buffers.size();
      result.buffers.push_back({"", -1, -1,
                                mfexec::bufferBytes(transient.getType()), -1});
      result.transients.push_back(transient);
      result.recomputed.push_back(false);
      continue;
    }
    if (auto view = dyn_cast<mfexec::ViewOp>(op)) {
      auto it = bufferOf.find(view.getSource());
      if (it != bufferOf.end()) {
        bufferOf[view] = it->second;
      }
      continue;
    }
    for (Value operand : op.getOperands()) {
      auto it = bufferOf.find(operand);
      if (it == bufferOf.end()) {
        continue;
      }
      size_t id = it->second;
      PlannedBuffer &buffer = result.buffers[id];
      if (buffer.lower < 0) { // its writer: the buffer is named after it
        buffer.lower = index;
        std::string path = mf::getModelPath(op.getLoc());
        buffer.id = std::to_string(id) + ":" + (path.empty() ? "value" : path);
        auto [first, count] = opRangeOf(&op);
        for (int64_t i = first; program && i < first + count &&
                                i < static_cast<int64_t>(program->ops().size());
             ++i) {
          result.recomputed[id] =
              result.recomputed[id] || program->ops()[i]->hasAttr("mf.recomputed");
        }
      }
      buffer.upper = std::max(buffer.upper,
                              isa<mfexec::ReturnOp>(op) ? end : index + 1);
    }
  }
  for (auto [id, buffer] : llvm::enumerate(result.buffers)) {
    if (buffer.lower < 0) { // never bound: alive at its own op only
      buffer.id = std::to_string(id) + ":unused";
      buffer.lower = 0;
      buffer.upper = 1;
    }
  }
  return result;
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
    size_t recomputed = llvm::count(entry.recomputed, true);
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
      bool again = entry.recomputed[i];
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

struct MFExecPlanMemoryPass
    : mfc::impl::MFExecPlanMemoryPassBase<MFExecPlanMemoryPass> {
  using MFExecPlanMemoryPassBase::MFExecPlanMemoryPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (workLimit <= 0 && timeLimit < 0) {
      emitError(module.getLoc())
          << "mfexec-plan-memory: work-limit="
          << static_cast<int64_t>(workLimit)
          << " without a time-limit leaves the improvement search without "
             "a limit; give a positive work-limit or a time-limit of 0 or "
             "more seconds";
      return signalPassFailure();
    }
    Builder builder(&getContext());
    std::vector<std::pair<std::string, EntryBuffers>> planned;
    std::string csv = "id,lower,upper,size\n";
    for (auto entry : module.getOps<mfexec::EntryOp>()) {
      std::optional<mf::OpLevelProgram> program;
      if (auto function = module.lookupSymbol<func::FuncOp>(entry.getFunction())) {
        program.emplace(function);
      }
      EntryBuffers buffers = collectBuffers(entry, program);
      MemoryPlanOptions options;
      options.alignment = alignment;
      options.timeLimitSeconds = timeLimit;
      // Candidates replay every buffer: the work is about candidates x n.
      options.maxCandidates =
          workLimit > 0
              ? std::max<int64_t>(
                    1, workLimit / std::max<size_t>(1, buffers.buffers.size()))
              : 0;
      for (const PlannedBuffer &buffer : buffers.buffers) {
        csv += entry.getFunction().str() + "/" + buffer.id + "," +
               std::to_string(buffer.lower) + "," +
               std::to_string(buffer.upper) + "," +
               std::to_string(buffer.size) + "\n";
      }
      MemoryPlanResult result = planMemory(buffers.buffers, options);
      entry.setArenaBytesAttr(builder.getI64IntegerAttr(result.arenaBytes));
      entry.setArenaLowerBoundAttr(builder.getI64IntegerAttr(result.lowerBound));
      for (auto [buffer, transient] :
           llvm::zip(buffers.buffers, buffers.transients)) {
        OpBuilder at(transient);
        auto slice = mfexec::ArenaOp::create(at, transient.getLoc(),
                                             transient.getType(), buffer.offset);
        transient.replaceAllUsesWith(slice.getBuffer());
        transient.erase();
      }
      buffers.transients.clear();
      planned.emplace_back(entry.getFunction().str(), std::move(buffers));
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
  }

  LogicalResult writeFile(StringRef path,
                          llvm::function_ref<void(llvm::raw_ostream &)> write) {
    return writeOutputFile(getOperation(), path, write);
  }
};

} // namespace
