//===- MFExecOps.cpp - mfexec operations and their verifiers --------------===//

#include "dialects/MFExec/IR/MFExecOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::mfexec;

int64_t mlir::mfexec::bufferBytes(MemRefType type) {
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

//===----------------------------------------------------------------------===//
// Bindings: `(read %a : memref<...>, write %b : memref<...>)`
//===----------------------------------------------------------------------===//

static ParseResult
parseBindings(OpAsmParser &parser,
              SmallVectorImpl<OpAsmParser::UnresolvedOperand> &bindings,
              SmallVectorImpl<Type> &types, ArrayAttr &accesses) {
  SmallVector<Attribute> parsed;
  MLIRContext *context = parser.getContext();
  if (parser.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            StringRef keyword;
            SMLoc at = parser.getCurrentLocation();
            if (parser.parseKeyword(&keyword)) {
              return failure();
            }
            std::optional<Access> access = symbolizeAccess(keyword);
            if (!access) {
              return parser.emitError(at)
                     << "expected read, write or readwrite, not '" << keyword
                     << "'";
            }
            parsed.push_back(AccessAttr::get(context, *access));
            return failure(parser.parseOperand(bindings.emplace_back()) ||
                           parser.parseColonType(types.emplace_back()));
          })) {
    return failure();
  }
  accesses = ArrayAttr::get(context, parsed);
  return success();
}

static void printBindings(OpAsmPrinter &printer, Operation *,
                          OperandRange bindings, TypeRange types,
                          ArrayAttr accesses) {
  printer << "(";
  for (auto [index, binding] : llvm::enumerate(bindings)) {
    if (index) {
      printer << ", ";
    }
    printer << stringifyAccess(cast<AccessAttr>(accesses[index]).getValue())
            << " " << binding << " : " << types[index];
  }
  printer << ")";
}

/// The rules every command's bindings follow: one access and one op-level
/// value per binding; the first `inputs` bindings are read (or readwrite),
/// the rest written; and a buffer written and bound again is an input
/// updated in place (readwrite) and the output tied to it (write), nothing
/// else. Inputs may read one buffer several times.
static LogicalResult verifyBindings(Operation *op, ValueRange bindings,
                                    ArrayAttr accesses, ArrayRef<int64_t> values,
                                    size_t inputs) {
  if (accesses.size() != bindings.size() || values.size() != bindings.size()) {
    return op->emitOpError() << "has " << bindings.size() << " bindings but "
                             << accesses.size() << " accesses and "
                             << values.size() << " op-level values";
  }
  if (inputs > bindings.size()) {
    return op->emitOpError() << "binds " << bindings.size()
                             << " buffers, fewer than its " << inputs
                             << " inputs";
  }
  auto accessOf = [&](unsigned index) {
    return cast<AccessAttr>(accesses[index]).getValue();
  };
  llvm::MapVector<Value, SmallVector<unsigned, 2>> uses;
  for (auto [index, binding] : llvm::enumerate(bindings)) {
    Access access = accessOf(index);
    bool isInput = index < inputs;
    if (values[index] < 0) {
      return op->emitOpError() << "binding " << index
                               << " names no op-level value";
    }
    if (isInput ? access == Access::write : access != Access::write) {
      return op->emitOpError()
             << "binding " << index << " is "
             << (isInput ? "an input" : "an output") << " but has access "
             << stringifyAccess(access);
    }
    uses[binding].push_back(index);
  }
  for (auto &[binding, indices] : uses) {
    bool written = llvm::any_of(
        indices, [&](unsigned index) { return accessOf(index) != Access::read; });
    bool tied = indices.size() == 2 && accessOf(indices[0]) == Access::readwrite &&
                accessOf(indices[1]) == Access::write;
    if (indices.size() > 1 && written && !tied) {
      return op->emitOpError()
             << "binds one buffer as " << indices[0] << " and " << indices[1]
             << ": only an input updated in place (readwrite) and the output "
                "tied to it may share a buffer that is written";
    }
    if (indices.size() == 1 && accessOf(indices[0]) == Access::readwrite) {
      return op->emitOpError() << "binding " << indices[0]
                               << " is readwrite but no output is tied to it";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef triple, StringRef cpu,
                                 ArrayAttr features) {
  if (triple.empty() || cpu.empty()) {
    return emitError() << "a target needs a triple and a CPU name";
  }
  for (Attribute feature : features) {
    auto name = dyn_cast<StringAttr>(feature);
    if (!name || name.empty() ||
        !llvm::all_of(name.getValue(), [](char c) {
          return llvm::isAlnum(c) || c == '.' || c == '-' || c == '_';
        })) {
      return emitError() << "target feature " << feature
                         << " is not an LLVM feature name such as \"avx2\"";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

ModuleOp ExecutableOp::getCode() {
  auto modules = getBody().front().getOps<ModuleOp>();
  return modules.empty() ? ModuleOp() : *modules.begin();
}

LogicalResult ExecutableOp::verifyRegions() {
  Block &body = getBody().front();
  if (llvm::range_size(body.getOps<ModuleOp>()) != 1) {
    return emitOpError() << "needs exactly one nested module with the kernels' "
                            "code";
  }
  ModuleOp code = getCode();
  for (Operation &op : body) {
    auto kernel = dyn_cast<KernelOp>(op);
    if (!kernel) {
      if (!isa<ModuleOp>(op)) {
        return op.emitOpError() << "does not belong in an mfexec.executable";
      }
      continue;
    }
    auto function = dyn_cast_or_null<FunctionOpInterface>(
        ::mlir::SymbolTable::lookupSymbolIn(code, kernel.getSymNameAttr()));
    if (!function) {
      return kernel.emitOpError() << "has no function '" << kernel.getSymName()
                                  << "' in the executable's code";
    }
  }
  return success();
}

LogicalResult KernelOp::verify() {
  FunctionType type = getFunctionType();
  for (Type buffer : llvm::concat<const Type>(type.getInputs(), type.getResults())) {
    auto memref = dyn_cast<MemRefType>(buffer);
    if (!memref || !memref.hasStaticShape()) {
      return emitOpError() << "takes " << buffer
                           << ": kernels take static-shape memrefs";
    }
  }
  if (type.getNumResults() == 0) {
    return emitOpError() << "has no outputs";
  }
  // Panel inputs: increasing input positions of 2-D weights, a float or
  // i8 one as panels, an i8 one with K a multiple of 4 as dot panels.
  auto checkPanels = [&](std::optional<ArrayRef<int32_t>> positions,
                         bool dot) -> LogicalResult {
    int64_t previous = -1;
    for (int32_t position : positions.value_or(ArrayRef<int32_t>())) {
      if (position <= previous ||
          position >= static_cast<int64_t>(type.getNumInputs())) {
        return emitOpError() << (dot ? "dot " : "")
                             << "panel inputs must be increasing input "
                                "positions below "
                             << type.getNumInputs();
      }
      previous = position;
      auto weight = cast<MemRefType>(type.getInput(position));
      Type element = weight.getElementType();
      if (dot ? weight.getRank() != 2 || !element.isInteger(8) ||
                    weight.getDimSize(1) % 4 != 0
              : weight.getRank() != 2 ||
                    !(element.isF32() || element.isF16() || element.isBF16() ||
                      element.isInteger(8))) {
        return emitOpError()
               << "reads input " << position << " (" << weight << ") as "
               << (dot ? "dot panels: only a 2-D i8 weight whose K is a "
                         "multiple of 4 can be"
                       : "panels: only a 2-D float or i8 (quantized) weight "
                         "can be");
      }
      if (dot &&
          llvm::is_contained(getPanelInputs().value_or(ArrayRef<int32_t>()),
                             position)) {
        return emitOpError() << "reads input " << position
                             << " both as panels and as dot panels";
      }
    }
    return success();
  };
  if (failed(checkPanels(getPanelInputs(), /*dot=*/false))) {
    return failure();
  }
  return checkPanels(getDotPanelInputs(), /*dot=*/true);
}

//===----------------------------------------------------------------------===//
// Host programs
//===----------------------------------------------------------------------===//

MemRefType mlir::mfexec::bufferTypeOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? MemRefType::get(tensor.getShape(), tensor.getElementType())
                : MemRefType();
}

LogicalResult EntryOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto function =
      symbols.lookupNearestSymbolFrom<func::FuncOp>(*this, getFunctionAttr());
  if (!function) {
    return emitOpError() << "'" << getFunction()
                         << "' does not name an entry function";
  }
  Block &body = getBody().front();
  FunctionType type = function.getFunctionType();
  auto matches = [](TypeRange tensors, TypeRange buffers) {
    return tensors.size() == buffers.size() &&
           llvm::all_of(llvm::zip(tensors, buffers), [](auto pair) {
             return bufferTypeOf(std::get<0>(pair)) == std::get<1>(pair);
           });
  };
  if (!matches(type.getInputs(), body.getArgumentTypes())) {
    return emitOpError() << "takes other inputs than @" << getFunction();
  }
  if (!matches(type.getResults(),
               body.getTerminator()->getOperandTypes())) {
    return emitOpError() << "returns other outputs than @" << getFunction();
  }
  return success();
}

/// The storage op of `buffer` through its views (null: an entry input).
static Operation *storageOf(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewOp>()) {
    buffer = view.getSource();
  }
  return buffer.getDefiningOp();
}

/// Each binding of every command of `body`, with its access.
static void forEachBinding(Block &body,
                           function_ref<void(Operation *, Value, Access)> fn) {
  for (Operation &op : body) {
    ValueRange bindings;
    ArrayAttr accesses;
    if (auto dispatch = dyn_cast<DispatchOp>(op)) {
      bindings = dispatch.getBindings();
      accesses = dispatch.getAccesses();
    } else if (auto library = dyn_cast<LibraryOp>(op)) {
      bindings = library.getBindings();
      accesses = library.getAccesses();
    } else if (auto copy = dyn_cast<CopyOp>(op)) {
      bindings = copy.getBindings();
      accesses = copy.getAccesses();
    }
    if (!accesses || accesses.size() != bindings.size()) {
      continue; // not a command, or one its own verifier refuses
    }
    for (auto [binding, access] : llvm::zip(bindings, accesses)) {
      fn(&op, binding, cast<AccessAttr>(access).getValue());
    }
  }
}

LogicalResult EntryOp::verifyRegions() {
  Block &body = getBody().front();
  for (Type type : body.getArgumentTypes()) {
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref || !memref.hasStaticShape()) {
      return emitOpError() << "takes " << type
                           << ": entry inputs are static-shape memrefs";
    }
  }
  if (getInitializer() && body.getNumArguments() != 0) {
    return emitOpError() << "is the initializer: it takes no input";
  }
  if (getInitializer()) {
    for (auto entry : (*this)->getParentRegion()->getOps<EntryOp>()) {
      if (entry == *this) {
        break;
      }
      if (entry.getInitializer()) {
        return emitOpError() << "is a second initializer entry; a module "
                                "has one";
      }
    }
  }
  // The initializer derives values from the weights alone; the other
  // entries only read them.
  bool failed = false;
  forEachBinding(body, [&](Operation *command, Value binding, Access access) {
    if (failed) {
      return;
    }
    Operation *storage = storageOf(binding);
    bool derived = isa_and_nonnull<DerivedOp>(storage);
    if (getInitializer()) {
      bool fixed = derived || isa_and_nonnull<ParamOp, ConstantOp>(storage);
      if (access == Access::read ? !fixed : !derived) {
        failed = true;
        command->emitOpError()
            << (access == Access::read ? "reads" : "writes")
            << " a buffer that is not "
            << (access == Access::read
                    ? "a parameter, constant or derived value"
                    : "a derived value")
            << ": the initializer derives values from the weights alone";
      }
    } else if (derived && access != Access::read) {
      failed = true;
      command->emitOpError() << "writes a derived value: only the "
                                "initializer entry computes them";
    }
  });
  if (failed) {
    return failure();
  }
  if (getInitializer()) {
    return success();
  }
  // What this entry reads as derived, the module's initializer writes.
  EntryOp initializer;
  for (auto entry : (*this)->getParentRegion()->getOps<EntryOp>()) {
    if (entry.getInitializer()) {
      initializer = entry;
    }
  }
  llvm::DenseSet<int64_t> computed;
  if (initializer) {
    forEachBinding(initializer.getBody().front(),
                   [&](Operation *, Value binding, Access access) {
                     auto derived =
                         dyn_cast_or_null<DerivedOp>(storageOf(binding));
                     if (derived && access != Access::read) {
                       computed.insert(derived.getSlot());
                     }
                   });
  }
  for (auto derived : body.getOps<DerivedOp>()) {
    if (!computed.contains(derived.getSlot())) {
      return derived.emitOpError()
             << "reads slot " << derived.getSlot()
             << ", which no initializer entry of the module computes";
    }
  }
  return success();
}

LogicalResult DerivedOp::verify() {
  bool initializer = (*this)->getParentOfType<EntryOp>().getInitializer();
  if (initializer == getHolds().has_value()) {
    return emitOpError() << (initializer
                                 ? "names an op-level value in the "
                                   "initializer, whose commands name them"
                                 : "must name the op-level value it holds "
                                   "(holds(N)) outside the initializer");
  }
  return success();
}

LogicalResult ArenaOp::verify() {
  auto entry = (*this)->getParentOfType<EntryOp>();
  MemRefType type = getBuffer().getType();
  int64_t bytes = bufferBytes(type);
  int64_t element = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  if (!entry.getArenaBytes()) {
    return emitOpError() << "is a slice of an arena that has no size: the "
                            "entry's memory is not planned";
  }
  int64_t offset = getOffset();
  int64_t arena = *entry.getArenaBytes();
  if (offset % element != 0) {
    return emitOpError() << "offset " << offset << " is not a multiple of "
                         << element << ", the element size";
  }
  if (offset > arena || bytes > arena - offset) {
    return emitOpError() << "places " << bytes << " bytes at offset " << offset
                         << " of an arena of " << arena << " bytes";
  }
  return success();
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Operation *parameter =
      symbols.lookupNearestSymbolFrom(getOperation()->getParentOfType<EntryOp>(),
                                      getNameAttr());
  auto type = parameter ? parameter->getAttrOfType<TypeAttr>("type") : nullptr;
  if (!type) {
    return emitOpError() << "'" << getName() << "' does not name a parameter";
  }
  // A sharded program's parameter (split as upstream's shard.sharding
  // says: `grid`, `split_axes`) is bound as the rank's block.
  auto parameterType = cast<RankedTensorType>(type.getValue());
  auto grid = parameter->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto splitAxes = parameter->getAttrOfType<shard::GridAxesArrayAttr>("split_axes");
  if (grid && splitAxes) {
    auto gridOp = symbols.lookupNearestSymbolFrom<shard::GridOp>(parameter, grid);
    if (!gridOp) {
      return emitOpError() << "parameter '" << getName()
                           << "' is split over a grid that does not exist";
    }
    SmallVector<int64_t> shape(parameterType.getShape());
    for (auto [dim, axes] : llvm::enumerate(splitAxes.getAxes())) {
      for (int16_t axis : axes.asArrayRef()) {
        shape[dim] /= gridOp.getShape()[axis];
      }
    }
    parameterType = parameterType.clone(shape);
  }
  if (bufferTypeOf(parameterType) != getBuffer().getType()) {
    return emitOpError() << "type " << getBuffer().getType()
                         << " does not match " << parameterType
                         << " of parameter '" << getName() << "'"
                         << (grid ? " (its block on one rank)" : "");
  }
  return success();
}

LogicalResult ViewOp::verify() {
  MemRefType from = getSource().getType(), to = getBuffer().getType();
  if (from.getElementType() != to.getElementType() ||
      from.getNumElements() != to.getNumElements()) {
    return emitOpError() << "views " << from << " as " << to
                         << ": a view keeps the element type and count";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

LogicalResult DispatchOp::verify() {
  // The kernel tells inputs from outputs (verifySymbolUses).
  if (getAccesses().size() != getBindings().size() ||
      getValues().size() != getBindings().size()) {
    return emitOpError() << "has " << getBindings().size() << " bindings but "
                         << getAccesses().size() << " accesses and "
                         << getValues().size() << " op-level values";
  }
  return success();
}

LogicalResult DispatchOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto kernel = symbols.lookupNearestSymbolFrom<KernelOp>(*this, getKernelAttr());
  if (!kernel) {
    return emitOpError() << getKernel() << " does not name a kernel";
  }
  FunctionType type = kernel.getFunctionType();
  SmallVector<Type> expected(type.getInputs());
  llvm::append_range(expected, type.getResults());
  if (TypeRange(getBindings().getTypes()) != TypeRange(expected)) {
    return emitOpError() << "binds other buffers than kernel "
                         << kernel.getSymName() << " takes: " << type;
  }
  return verifyBindings(*this, getBindings(), getAccesses(), getValues(),
                        type.getNumInputs());
}

LogicalResult LibraryOp::verify() {
  // Its op's operands, then its results: the bindings from the first
  // written one on.
  auto written = llvm::find_if(getAccesses(), [](Attribute access) {
    return cast<AccessAttr>(access).getValue() == Access::write;
  });
  if (written == getAccesses().end()) {
    return emitOpError() << "binds no buffer for its results";
  }
  return verifyBindings(*this, getBindings(), getAccesses(), getValues(),
                        written - getAccesses().begin());
}

LogicalResult CopyOp::verify() {
  if (getBindings().size() != 2 ||
      getBindings()[0].getType() != getBindings()[1].getType()) {
    return emitOpError() << "copies one buffer into another of its type";
  }
  return verifyBindings(*this, getBindings(), getAccesses(), getValues(), 1);
}

#include "dialects/MFExec/IR/MFExecEnums.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/MFExec/IR/MFExecOps.cpp.inc"
