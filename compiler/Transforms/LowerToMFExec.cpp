//===- LowerToMFExec.cpp - mf entries -> mfexec host programs -------------===//
//
// After code generation each entry is kernel regions and eager ops. This
// pass writes, beside each entry function, its host program
// (`mfexec.entry`), deciding where every value is stored:
//
// - parameters, constants and the entry's inputs are their own storage; a
//   reshape is a view of its operand's buffer;
// - a KV-cache write, eager or in a kernel, updates its cache in place (the
//   cache is bound readwrite and the result tied to it);
// - a value a kernel computes only to assign it to a parameter is computed
//   in the parameter when that is safe (assignsInPlace), else copied in;
// - in an entry that assigns no parameter, what the weights and constants
//   alone determine (casts of weights, position tables) is `derived`: the
//   entry reads it from a slot outside the arena that the module's
//   initializer entry (@derive_from_weights, built here: an `mf` function
//   of those ops and its host program) computes when the weights change.
//   Entries that compute the same value share its slot (derivationOf);
// - what the entry returns is written straight into buffers the caller
//   receives; every other value is transient, for memory planning to place.
//
// Commands name the op-level values (mf::OpLevelProgram) of their bindings.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/IR/OpLevelProgram.h"
#include "dialects/MF/Transforms/FusionUtils.h"
#include "dialects/MFExec/IR/MFExecOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace mfc {
#define GEN_PASS_DEF_MFLOWERTOMFEXECPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;
using namespace mfc;

namespace {

/// Whether `assign`'s value can be written by its kernel straight into the
/// parameter: the value is a result of a kernel region used only by the
/// assignment; the region reads the parameter's old value, if at all, only
/// elementwise at the same shape (so each element is read before it is
/// overwritten); and nothing after the region reads the old value.
bool assignsInPlace(mf::AssignOp assign) {
  Value value = assign.getValue();
  auto region = value.getDefiningOp<mf::FusionOp>();
  if (!region || !region.getKernel() || !value.hasOneUse() ||
      (region.getKind() != mf::FusionKind::elementwise &&
       region.getKind() != mf::FusionKind::matmul_epilogue)) {
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

/// The values of `entry` that its weights and constants alone determine:
/// in an entry that assigns no parameter, the results of an op or kernel
/// region that reads only parameters, constants, views of them and such
/// values, when none of its results (nor a view of one) is returned or
/// updated as a KV cache; never a dequantized weight.
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
    // A dequantized weight is never kept: that no float copy of it exists
    // is the point of quantizing (the matmul kernels read it quantized).
    if (isa<mf::DequantizeOp>(op)) {
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

/// The input of `fusion` that its result `index` is the new value of: a KV
/// cache the region writes in place.
std::optional<unsigned> cacheUpdatedInPlace(mf::FusionOp fusion,
                                            unsigned index) {
  auto yield = cast<mf::YieldOp>(fusion.getBody().front().getTerminator());
  auto write = yield.getValues()[index].getDefiningOp<mf::KvCacheWriteOp>();
  auto cache = write ? dyn_cast<BlockArgument>(write.getCache()) : nullptr;
  if (!cache) {
    return std::nullopt;
  }
  return cache.getArgNumber();
}

/// The derived-value slots of a module: one per distinct derivation.
using DerivedSlots = llvm::StringMap<int64_t>;

/// The name of the initializer entry's function.
constexpr llvm::StringLiteral kInitializerName = "derive_from_weights";

/// How `value`, which the weights and constants alone determine, follows
/// from them: equal strings for equal values, whatever entry computes them.
/// A parameter by name, a constant by its value, a view by its source, an
/// op by its name, attributes and operands, a kernel's result by the
/// kernel (structurally equivalent regions share one) and its inputs.
std::string derivationOf(Value value,
                         llvm::DenseMap<Value, std::string> &known) {
  auto it = known.find(value);
  if (it != known.end()) {
    return it->second;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  Operation *op = value.getDefiningOp();
  auto operands = [&](ValueRange values) {
    os << "(";
    for (Value operand : values) {
      os << "[" << derivationOf(operand, known) << "]";
    }
    os << ")";
  };
  if (auto param = dyn_cast<mf::ParamOp>(op)) {
    os << "param @" << param.getName();
  } else if (auto fusion = dyn_cast<mf::FusionOp>(op)) {
    os << "kernel " << fusion.getKernelAttr();
    operands(fusion.getInputs());
    os << "#" << cast<OpResult>(value).getResultNumber();
  } else {
    // The op's own attributes (not its location), printed: a constant's
    // value, an epsilon, a permutation.
    os << op->getName() << " " << op->getAttrDictionary();
    operands(op->getOperands());
    os << "#" << cast<OpResult>(value).getResultNumber();
  }
  os << " : " << value.getType();
  return known[value] = text;
}

/// Builds the initializer's function: each value the entries derive from
/// the weights, computed once (equal derivations are one value), in the
/// order the entries compute them, and returned; its result i is slot i.
class InitializerBuilder {
public:
  InitializerBuilder(ModuleOp module, func::FuncOp after)
      : module_(module), builder_(module.getContext()), after_(after) {}

  /// Adds `derived`, what `function` derives from the weights.
  void add(func::FuncOp function, const llvm::DenseSet<Value> &derived) {
    llvm::DenseMap<Value, std::string> known;
    for (Operation &op : function.getBody().front()) {
      for (Value result : op.getResults()) {
        if (derived.contains(result)) {
          std::string derivation = derivationOf(result, known);
          Value value = materialize(result, known);
          if (slots_.try_emplace(derivation, results_.size()).second) {
            results_.push_back(value);
          }
        }
      }
    }
  }

  /// The function, returning the derived values; null if there are none.
  func::FuncOp finish() {
    if (!function_) {
      return nullptr;
    }
    OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPointToEnd(&function_.getBody().front());
    func::ReturnOp::create(builder_, function_.getLoc(), results_);
    function_.setFunctionType(FunctionType::get(
        module_.getContext(), {}, TypeRange(ValueRange(results_))));
    return function_;
  }

  const DerivedSlots &slots() const { return slots_; }

private:
  /// `value` (of an entry) in the initializer: its defining op cloned,
  /// once per derivation, after what it reads.
  Value materialize(Value value, llvm::DenseMap<Value, std::string> &known) {
    std::string derivation = derivationOf(value, known);
    auto it = values_.find(derivation);
    if (it != values_.end()) {
      return it->second;
    }
    Operation *op = value.getDefiningOp();
    IRMapping mapping;
    for (Value operand : op->getOperands()) {
      mapping.map(operand, materialize(operand, known));
    }
    OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPointToEnd(&body().front());
    Operation *clone = builder_.clone(*op, mapping);
    for (auto [result, cloned] :
         llvm::zip(op->getResults(), clone->getResults())) {
      values_[derivationOf(result, known)] = cloned;
    }
    return values_[derivation];
  }

  Region &body() {
    if (!function_) {
      OpBuilder::InsertionGuard guard(builder_);
      builder_.setInsertionPointAfter(after_);
      function_ =
          func::FuncOp::create(builder_, module_.getLoc(), kInitializerName,
                               builder_.getFunctionType({}, {}));
      function_.addEntryBlock();
    }
    return function_.getBody();
  }

  ModuleOp module_;
  OpBuilder builder_;
  func::FuncOp after_;
  func::FuncOp function_;
  llvm::StringMap<Value> values_; // derivation -> the initializer's value
  DerivedSlots slots_;            // derivation -> result (slot) number
  SmallVector<Value> results_;
};

/// Builds the host program of one entry function.
class HostProgramBuilder {
public:
  /// `derived`: the function's values the weights alone determine (the
  /// initializer's: what it returns); `slots`: the slot of each derivation
  /// the initializer computes.
  HostProgramBuilder(func::FuncOp function, mfexec::ExecutableOp executable,
                     llvm::DenseSet<Value> derived, const DerivedSlots &slots,
                     bool initializer)
      : function_(function), executable_(executable), program_(function),
        builder_(function.getContext()), slots_(slots),
        initializer_(initializer), derived_(std::move(derived)) {}

  LogicalResult build() {
    Block &body = function_.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (auto assign : body.getOps<mf::AssignOp>()) {
      if (assignsInPlace(assign)) {
        inPlace_[assign.getValue()] = assign.getName();
      }
    }
    returned_.insert(ret.getOperands().begin(), ret.getOperands().end());

    builder_.setInsertionPointAfter(function_);
    auto entry = mfexec::EntryOp::create(
        builder_, function_.getLoc(), FlatSymbolRefAttr::get(function_),
        initializer_ ? builder_.getUnitAttr() : nullptr,
        /*arena_bytes=*/nullptr, /*arena_lower_bound=*/nullptr);
    Block *block = builder_.createBlock(&entry.getBody());
    for (BlockArgument argument : function_.getArguments()) {
      bufferOf_[argument] =
          block->addArgument(mfexec::bufferTypeOf(argument.getType()), argument.getLoc());
    }
    for (Operation &op : body) {
      if (failed(lower(op))) {
        return failure();
      }
    }
    // Storage nothing binds (a weight only the initializer reads) is not
    // the entry's.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*block))) {
      if (isa<mfexec::ParamOp, mfexec::ConstantOp, mfexec::ViewOp>(op) &&
          op.use_empty()) {
        op.erase();
      }
    }
    return success();
  }

private:
  LogicalResult lower(Operation &op) {
    Location loc = op.getLoc();
    if (auto param = dyn_cast<mf::ParamOp>(op)) {
      bufferOf_[param] = parameter(param.getName(), param.getType(), loc);
      return success();
    }
    if (auto constant = dyn_cast<mf::ConstantOp>(op)) {
      bufferOf_[constant] = mfexec::ConstantOp::create(
          builder_, loc, mfexec::bufferTypeOf(constant.getType()),
          program_.indexOf(constant));
      return success();
    }
    if (auto reshape = dyn_cast<mf::ReshapeOp>(op)) {
      bufferOf_[reshape] = mfexec::ViewOp::create(
          builder_, loc, mfexec::bufferTypeOf(reshape.getType()),
          bufferOf_.at(reshape.getOperand()));
      return success();
    }
    if (auto assign = dyn_cast<mf::AssignOp>(op)) {
      Value target = parameter(assign.getName(), assign.getType(), loc);
      if (!inPlace_.count(assign.getValue())) {
        command<mfexec::CopyOp>(loc, program_.indexOf(assign),
                                {assign.getValue()}, {assign.getResult()},
                                {bufferOf_.at(assign.getValue())}, {target});
      }
      bufferOf_[assign] = target;
      return success();
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      SmallVector<Value> outputs;
      for (Value value : ret.getOperands()) {
        outputs.push_back(bufferOf_.at(value));
      }
      mfexec::ReturnOp::create(builder_, loc, outputs);
      return success();
    }
    if (!initializer_ && op.getNumResults() > 0 &&
        derived_.contains(op.getResult(0))) {
      // The initializer computes it (all of an op's results are derived,
      // or none); the entry reads it from its slot.
      for (Value result : op.getResults()) {
        FailureOr<int64_t> slot = slotOf(result);
        if (failed(slot)) {
          return failure();
        }
        bufferOf_[result] = mfexec::DerivedOp::create(
            builder_, loc, mfexec::bufferTypeOf(result.getType()), *slot,
            builder_.getI64IntegerAttr(program_.idOf(result)));
      }
      return success();
    }
    if (auto fusion = dyn_cast<mf::FusionOp>(op)) {
      return lowerKernelRegion(fusion);
    }
    return lowerLibraryOp(op);
  }

  /// The slot of a value the initializer computes.
  FailureOr<int64_t> slotOf(Value value) {
    auto slot = slots_.find(derivationOf(value, derivations_));
    if (slot == slots_.end()) {
      Operation *op = value.getDefiningOp();
      return op->emitOpError() << "derives a value from the weights that the "
                                  "initializer does not compute",
             failure();
    }
    return slot->second;
  }

  /// An op the runtime's library runs: it reads its operands' buffers and
  /// writes its results' (a KV-cache write: its cache, in place).
  LogicalResult lowerLibraryOp(Operation &op) {
    if (op.getNumResults() == 0 ||
        !llvm::all_of(op.getResultTypes(), llvm::IsaPred<RankedTensorType>)) {
      return op.emitOpError() << "has no library kernel with tensor results";
    }
    SmallVector<Value> bindings;
    for (Value operand : op.getOperands()) {
      bindings.push_back(bufferOf_.at(operand));
    }
    SmallVector<mfexec::Access> readAccess(bindings.size(),
                                           mfexec::Access::read);
    for (Value result : op.getResults()) {
      Value storage;
      if (auto write = dyn_cast<mf::KvCacheWriteOp>(op)) {
        storage = bufferOf_.at(write.getCache());
        readAccess[0] = mfexec::Access::readwrite;
      } else {
        storage = storageFor(result, op.getLoc());
      }
      bufferOf_[result] = storage;
      bindings.push_back(storage);
    }
    SmallVector<int64_t> values = idsOf(op.getOperands());
    llvm::append_range(values, idsOf(op.getResults()));
    mfexec::LibraryOp::create(
        builder_, op.getLoc(), op.getName().getStringRef(),
        program_.indexOf(&op), values,
        accessesOf(readAccess, op.getNumResults()), bindings);
    return success();
  }

  /// A region with a kernel: one dispatch on its inputs' buffers and its
  /// results' (a KV cache it writes: the cache's, tied).
  LogicalResult lowerKernelRegion(mf::FusionOp fusion) {
    auto kernel = fusion.getKernelAttr()
                      ? SymbolTable::lookupNearestSymbolFrom<mfexec::KernelOp>(
                            fusion, fusion.getKernelAttr())
                      : nullptr;
    if (!kernel) {
      return fusion.emitOpError()
             << "has no kernel in the executable: run mf-codegen-cpu first";
    }
    SmallVector<Value> bindings;
    for (Value input : fusion.getInputs()) {
      bindings.push_back(bufferOf_.at(input));
    }
    SmallVector<mfexec::Access> inputAccess(bindings.size(),
                                            mfexec::Access::read);
    for (auto [index, result] : llvm::enumerate(fusion.getResults())) {
      Value storage;
      if (std::optional<unsigned> cache = cacheUpdatedInPlace(fusion, index)) {
        storage = bindings[*cache];
        inputAccess[*cache] = mfexec::Access::readwrite;
      } else {
        storage = storageFor(result, fusion.getLoc());
        // Computed in place into a parameter the region also reads (an
        // optimizer update): that input is updated, tied to the result.
        for (size_t input = 0; input < fusion.getNumOperands(); ++input) {
          if (bindings[input] == storage) {
            inputAccess[input] = mfexec::Access::readwrite;
            break;
          }
        }
      }
      bufferOf_[result] = storage;
      bindings.push_back(storage);
    }
    SmallVector<int64_t> values = idsOf(fusion.getInputs());
    llvm::append_range(values, idsOf(fusion.getResults()));
    auto [first, count] = program_.rangeOf(fusion);
    mfexec::DispatchOp::create(
        builder_, fusion.getLoc(),
        SymbolRefAttr::get(executable_.getSymNameAttr(),
                           {FlatSymbolRefAttr::get(kernel.getSymNameAttr())}),
        first, count, values,
        accessesOf(inputAccess, fusion.getNumResults()), bindings);
    return success();
  }

  template <typename CommandOp>
  void command(Location loc, int64_t opIndex, ValueRange reads,
               ValueRange writes, ValueRange readBuffers,
               ValueRange writeBuffers) {
    SmallVector<int64_t> values = idsOf(reads);
    llvm::append_range(values, idsOf(writes));
    SmallVector<Value> bindings(readBuffers);
    llvm::append_range(bindings, writeBuffers);
    SmallVector<mfexec::Access> readAccess(reads.size(), mfexec::Access::read);
    CommandOp::create(builder_, loc, opIndex, values,
                      accessesOf(readAccess, writes.size()), bindings);
  }

  /// Where a value a command computes is kept (see the file comment).
  Value storageFor(Value value, Location loc) {
    MemRefType type = mfexec::bufferTypeOf(value.getType());
    if (derived_.contains(value)) { // the initializer's (see lower())
      return mfexec::DerivedOp::create(
          builder_, loc, type, slots_.lookup(derivationOf(value, derivations_)),
          /*holds=*/nullptr);
    }
    auto inPlace = inPlace_.find(value);
    if (inPlace != inPlace_.end()) {
      return parameter(inPlace->second, value.getType(), loc);
    }
    if (returned_.contains(value)) {
      return mfexec::OutputBufferOp::create(builder_, loc, type);
    }
    return mfexec::TransientOp::create(builder_, loc, type);
  }

  /// The storage of parameter `name` (one op per parameter and entry).
  Value parameter(StringRef name, Type type, Location loc) {
    Value &buffer = parameters_[name];
    if (!buffer) {
      buffer = mfexec::ParamOp::create(builder_, loc, mfexec::bufferTypeOf(type),
                                       FlatSymbolRefAttr::get(
                                           builder_.getContext(), name));
    }
    return buffer;
  }

  SmallVector<int64_t> idsOf(ValueRange values) {
    SmallVector<int64_t> ids;
    for (Value value : values) {
      ids.push_back(program_.idOf(value));
    }
    return ids;
  }

  ArrayAttr accessesOf(ArrayRef<mfexec::Access> inputs, size_t outputs) {
    MLIRContext *context = builder_.getContext();
    SmallVector<Attribute> accesses;
    for (mfexec::Access access : inputs) {
      accesses.push_back(mfexec::AccessAttr::get(context, access));
    }
    accesses.append(outputs,
                    mfexec::AccessAttr::get(context, mfexec::Access::write));
    return ArrayAttr::get(context, accesses);
  }

  func::FuncOp function_;
  mfexec::ExecutableOp executable_;
  mf::OpLevelProgram program_;
  OpBuilder builder_;
  const DerivedSlots &slots_;
  bool initializer_;
  llvm::DenseMap<Value, std::string> derivations_;
  llvm::DenseMap<Value, Value> bufferOf_;
  llvm::StringMap<Value> parameters_;
  llvm::DenseSet<Value> derived_;
  llvm::DenseMap<Value, StringRef> inPlace_;
  llvm::DenseSet<Value> returned_;
};

struct MFLowerToMFExecPass
    : mfc::impl::MFLowerToMFExecPassBase<MFLowerToMFExecPass> {
  using MFLowerToMFExecPassBase::MFLowerToMFExecPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.getOps<mfexec::EntryOp>().empty()) {
      module.emitError() << "the module has host programs already";
      return signalPassFailure();
    }
    mfexec::ExecutableOp executable = findExecutable(module);
    SmallVector<func::FuncOp> entries;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (!function.isExternal()) {
        entries.push_back(function);
      }
    }
    if (SymbolTable::lookupSymbolIn(module, kInitializerName)) {
      module.emitError() << "the module has a symbol @" << kInitializerName
                         << " already, the name of its initializer entry";
      return signalPassFailure();
    }
    InitializerBuilder initializer(module, entries.empty() ? func::FuncOp()
                                                           : entries.back());
    SmallVector<llvm::DenseSet<Value>> derived;
    for (func::FuncOp function : entries) {
      derived.push_back(derivedFromWeights(function));
      initializer.add(function, derived.back());
    }
    if (func::FuncOp init = initializer.finish()) {
      Operation *ret = init.getBody().front().getTerminator();
      if (failed(HostProgramBuilder(
                     init, executable,
                     llvm::DenseSet<Value>(ret->getOperands().begin(),
                                           ret->getOperands().end()),
                     initializer.slots(), /*initializer=*/true)
                     .build())) {
        return signalPassFailure();
      }
    }
    for (auto [function, values] : llvm::zip(entries, derived)) {
      if (failed(HostProgramBuilder(function, executable, std::move(values),
                                    initializer.slots(), /*initializer=*/false)
                     .build())) {
        return signalPassFailure();
      }
    }
  }
};

} // namespace
