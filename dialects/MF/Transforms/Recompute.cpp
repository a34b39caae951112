//===- Recompute.cpp - recomputed activations for the backward ------------===//
//
// 1. In an entry whose `loss` result is differentiated, the forward ops are
//    the loss's ancestors; the others are the backward.
// 2. The recompute set: forward ops of `full` layers whose results stay in
//    the layer (not the layer's output, the checkpoint), and forward ops that
//    `select` patterns match, and the all-gathers `select-comm` patterns
//    match (MindFormers' select_comm_recompute: the backward gathers again
//    from the kept shard, as Megatron's sequence parallelism does); and
//    always casts that widen a float (bf16 or f16 to f32: exact, so the
//    backward casts again rather than keeping twice the bytes); never
//    parameter or constant reads, nor what `exclude` patterns match.
// 3. Walking the backward in order, each operand defined in the set is
//    replaced by a clone, built (with the clones it needs in turn) just before
//    that first backward user; a clone's other operands are the kept values,
//    read through mf.recompute_barrier so that no later CSE or folding merges
//    clone and original. Clones carry `mf.recomputed`.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <tuple>

#define DEBUG_TYPE "mf-recompute"

namespace mlir::mf {
#define GEN_PASS_DEF_MFRECOMPUTEPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

/// A `select` / `exclude` pattern: an optional layer prefix, then regex
/// levels that full-match the names of an op's path within its layer, from
/// the first: all of them (`wholePath`: an op), or a prefix (a cell).
struct OpPattern {
  std::string layer;
  SmallVector<llvm::Regex> levels;

  bool matches(StringRef path, bool wholePath) const {
    auto [layerOfPath, inLayer] = splitLayerPath(path);
    if (layerOfPath.empty() || (!layer.empty() && layerOfPath != layer)) {
      return false;
    }
    SmallVector<StringRef> names;
    inLayer.split(names, '.');
    if (names.size() < levels.size() ||
        (wholePath && names.size() != levels.size())) {
      return false;
    }
    for (size_t i = 0; i < levels.size(); ++i) {
      SmallVector<StringRef> groups;
      if (!levels[i].match(names[i], &groups) ||
          groups[0].size() != names[i].size()) {
        return false;
      }
    }
    return true;
  }
};

/// "[layer:]level\.level" -> its prefix and anchored level regexes.
FailureOr<OpPattern> parsePattern(StringRef text, std::string &error) {
  OpPattern pattern;
  auto [head, tail] = text.split(':');
  StringRef body = text;
  if (!tail.empty()) {
    pattern.layer = head.str();
    body = tail;
  }
  SmallVector<StringRef> levels;
  // Levels are split at an escaped dot; `.` alone stays a regex wildcard.
  size_t start = 0;
  for (size_t at = body.find("\\."); at != StringRef::npos;
       at = body.find("\\.", start)) {
    levels.push_back(body.slice(start, at));
    start = at + 2;
  }
  levels.push_back(body.drop_front(start));
  for (StringRef level : levels) {
    llvm::Regex regex("^(" + level.str() + ")");
    if (!regex.isValid(error)) {
      return failure();
    }
    pattern.levels.push_back(std::move(regex));
  }
  return pattern;
}

/// The forward ops of `entry`: those its `loss` result depends on.
llvm::DenseSet<Operation *> forwardOps(func::FuncOp entry, Value loss) {
  llvm::DenseSet<Operation *> forward;
  SmallVector<Value> work{loss};
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !forward.insert(op).second) {
      continue;
    }
    for (Value operand : op->getOperands()) {
      work.push_back(operand);
    }
  }
  return forward;
}

/// A cast from a narrower float type to a wider one: exact, and as cheap
/// to repeat as to read.
bool widensFloat(Operation &op) {
  auto cast = dyn_cast<CastOp>(op);
  if (!cast) {
    return false;
  }
  auto from = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getInput()));
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getResult()));
  return from && to && from.getWidth() < to.getWidth();
}

struct MFRecomputePass : mf::impl::MFRecomputePassBase<MFRecomputePass> {
  using MFRecomputePassBase::MFRecomputePassBase;

  void runOnOperation() override {
    func::FuncOp entry = getOperation();
    SmallVector<OpPattern> selected, selectedComm, excluded;
    for (auto [option, name, patterns] :
         {std::tuple(&select, "select", &selected),
          std::tuple(&selectComm, "select-comm", &selectedComm),
          std::tuple(&exclude, "exclude", &excluded)}) {
      for (const std::string &text : *option) {
        std::string error;
        FailureOr<OpPattern> pattern = parsePattern(text, error);
        if (failed(pattern)) {
          emitError(entry.getLoc()) << "mf-recompute: invalid " << name
                                    << " pattern '" << text << "': " << error;
          return signalPassFailure();
        }
        patterns->push_back(std::move(*pattern));
      }
    }
    std::optional<Value> loss = lossOf(entry);
    if (!loss) {
      return;
    }
    llvm::DenseSet<Operation *> forward = forwardOps(entry, *loss);
    llvm::SetVector<Operation *> recomputed =
        recomputeSet(entry, forward, selected, selectedComm, excluded);
    if (recomputed.empty()) {
      return;
    }
    rewriteBackward(entry, forward, recomputed);
  }

  /// The returned value the entry differentiates: its `loss`, or a
  /// pipeline stage's `hidden` output.
  static std::optional<Value> lossOf(func::FuncOp entry) {
    auto ret = cast<func::ReturnOp>(entry.getBody().front().getTerminator());
    for (unsigned i = 0; i < entry.getNumResults(); ++i) {
      auto name = entry.getResultAttrOfType<StringAttr>(i, "mf.name");
      if (name &&
          (name.getValue() == "loss" ||
           (name.getValue() == "hidden" && entry->hasAttr(kStageAttrName)))) {
        return ret.getOperand(i);
      }
    }
    return std::nullopt;
  }

  /// The layer prefix among `full` that `path` lies in, or "".
  StringRef fullLayerOf(StringRef path) const {
    for (const std::string &layer : full) {
      if (path.starts_with(layer + ".")) {
        return layer;
      }
    }
    return "";
  }

  llvm::SetVector<Operation *>
  recomputeSet(func::FuncOp entry, const llvm::DenseSet<Operation *> &forward,
               ArrayRef<OpPattern> selected, ArrayRef<OpPattern> selectedComm,
               ArrayRef<OpPattern> excluded) const {
    llvm::SetVector<Operation *> chosen;
    for (Operation &op : entry.getBody().front()) {
      if (!forward.contains(&op) || isa<ParamOp, ConstantOp>(op) ||
          op.getNumResults() == 0) {
        continue;
      }
      std::vector<std::string> names = getModelPaths(op.getLoc());
      auto anyName = [&](ArrayRef<OpPattern> patterns, bool wholePath) {
        return llvm::any_of(patterns, [&](const OpPattern &pattern) {
          return llvm::any_of(names, [&](const std::string &name) {
            return pattern.matches(name, wholePath);
          });
        });
      };
      if (anyName(excluded, /*wholePath=*/true)) {
        continue;
      }
      if (widensFloat(op)) {
        chosen.insert(&op);
        continue;
      }
      std::string path = getModelPath(op.getLoc());
      StringRef layer = fullLayerOf(path);
      if (!layer.empty()) {
        // The layer's output is its checkpoint: kept, not recomputed.
        bool leaves = llvm::any_of(op.getUsers(), [&](Operation *user) {
          return forward.contains(user) &&
                 fullLayerOf(getModelPath(user->getLoc())) != layer;
        });
        if (!leaves) {
          chosen.insert(&op);
        }
        continue;
      }
      if (anyName(selected, /*wholePath=*/false) ||
          (isa<AllGatherOp>(op) &&
           anyName(selectedComm, /*wholePath=*/false))) {
        chosen.insert(&op);
      }
    }
    return chosen;
  }

  void rewriteBackward(func::FuncOp entry,
                       const llvm::DenseSet<Operation *> &forward,
                       const llvm::SetVector<Operation *> &recomputed) {
    IRMapping clones;
    llvm::DenseMap<Value, Value> barriers;
    OpBuilder builder(entry.getContext());
    // The clone of `value` (or the kept value through its barrier),
    // building what is missing at the builder's insertion point.
    std::function<Value(Value)> recompute = [&](Value value) -> Value {
      Operation *def = value.getDefiningOp();
      if (!def || !recomputed.contains(def)) {
        Value &barrier = barriers[value];
        if (!barrier) {
          barrier = RecomputeBarrierOp::create(builder, value.getLoc(), value);
        }
        return barrier;
      }
      if (!clones.contains(value)) {
        for (Value operand : def->getOperands()) {
          clones.map(operand, recompute(operand));
        }
        Operation *clone = builder.clone(*def, clones);
        clone->setAttr("mf.recomputed", builder.getUnitAttr());
      }
      return clones.lookup(value);
    };
    SmallVector<Operation *> backward;
    for (Operation &op : entry.getBody().front().without_terminator()) {
      if (!forward.contains(&op)) {
        backward.push_back(&op);
      }
    }
    // The return reads the originals: the differentiated value (a pipeline
    // stage's output, which its last layer's full recompute would otherwise
    // take for an inner value) is the forward's result, not a clone.
    for (Operation *op : backward) {
      for (OpOperand &use : op->getOpOperands()) {
        Operation *def = use.get().getDefiningOp();
        if (def && recomputed.contains(def)) {
          builder.setInsertionPoint(op);
          use.set(recompute(use.get()));
        }
      }
    }
  }
};

} // namespace
