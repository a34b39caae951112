//===- ElementwiseKernels.cpp - fusion regions -> native kernels ----------===//
//
// 1. Check a region: elementwise ops only; every value has the output's
//    shape except inputs that reach it through mf.broadcast.
// 2. Build one linalg.generic on memrefs: inputs through identity or
//    broadcast maps, the body as scalar arith/math in f32 (i32 for integer
//    ops), rounding after every op whose result is f16/bf16 so the kernel
//    stores exactly what PyNative would.
// 3. Deduplicate by the kernel's printed body; lower; emit an object file.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/ElementwiseKernels.h"

#include "dialects/MF/IR/MFOps.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

#include <map>

using namespace mlir;
using namespace mfc;

namespace {

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

class KernelBuilder {
public:
  KernelBuilder(mf::FusionOp fusion, OpBuilder &builder)
      : fusion_(fusion), builder_(builder), context_(builder.getContext()) {}

  /// Builds the kernel function, or returns why the region is unsupported.
  FailureOr<func::FuncOp> build(StringRef name, std::string &why);

private:
  bool isFloat(Type type) { return isa<FloatType>(type); }
  Type elementOf(Value value) {
    return cast<RankedTensorType>(value.getType()).getElementType();
  }
  /// A scalar of `elementType` in the compute domain (f32 or i32).
  Value widen(Value scalar, Type elementType, Location loc);
  /// Rounds a compute-domain scalar to what `elementType` can hold.
  Value round(Value scalar, Type elementType, Location loc);
  /// Back to storage type for a result.
  Value narrow(Value scalar, Type elementType, Location loc);
  FailureOr<Value> compute(Operation *op, ArrayRef<Value> operands,
                           Location loc, std::string &why);

  mf::FusionOp fusion_;
  OpBuilder &builder_;
  MLIRContext *context_;
};

Value KernelBuilder::widen(Value scalar, Type elementType, Location loc) {
  if (isFloat(elementType) && !elementType.isF32()) {
    return arith::ExtFOp::create(builder_, loc, builder_.getF32Type(), scalar);
  }
  return scalar;
}

Value KernelBuilder::round(Value scalar, Type elementType, Location loc) {
  if (isFloat(elementType) && !elementType.isF32()) {
    Value narrowed = arith::TruncFOp::create(builder_, loc, elementType, scalar);
    return arith::ExtFOp::create(builder_, loc, builder_.getF32Type(), narrowed);
  }
  return scalar;
}

Value KernelBuilder::narrow(Value scalar, Type elementType, Location loc) {
  if (isFloat(elementType) && !elementType.isF32()) {
    return arith::TruncFOp::create(builder_, loc, elementType, scalar);
  }
  return scalar;
}

FailureOr<Value> KernelBuilder::compute(Operation *op, ArrayRef<Value> in,
                                        Location loc, std::string &why) {
  OpBuilder &b = builder_;
  Type f32 = b.getF32Type();
  auto constant = [&](double value) -> Value {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  };
  auto silu = [&](Value x) -> Value {
    Value negExp = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(
        b, loc, x, arith::AddFOp::create(b, loc, constant(1.0), negExp));
  };
  bool integer = !isFloat(in.empty() ? f32 : in[0].getType());
  Value result =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case([&](mf::AddOp) -> Value {
            return integer ? Value(arith::AddIOp::create(b, loc, in[0], in[1]))
                           : Value(arith::AddFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::SubOp) -> Value {
            return integer ? Value(arith::SubIOp::create(b, loc, in[0], in[1]))
                           : Value(arith::SubFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::MulOp) -> Value {
            return integer ? Value(arith::MulIOp::create(b, loc, in[0], in[1]))
                           : Value(arith::MulFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::DivOp) -> Value {
            return integer ? Value()
                           : Value(arith::DivFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::MaxOp) -> Value {
            return integer
                       ? Value(arith::MaxSIOp::create(b, loc, in[0], in[1]))
                       : Value(arith::MaximumFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::NegOp) -> Value {
            return arith::NegFOp::create(b, loc, in[0]);
          })
          .Case([&](mf::ExpOp) -> Value { return math::ExpOp::create(b, loc, in[0]); })
          .Case([&](mf::LogOp) -> Value { return math::LogOp::create(b, loc, in[0]); })
          .Case([&](mf::TanhOp) -> Value {
            return math::TanhOp::create(b, loc, in[0]);
          })
          .Case([&](mf::RsqrtOp) -> Value {
            return arith::DivFOp::create(b, loc, constant(1.0),
                                         math::SqrtOp::create(b, loc, in[0]));
          })
          .Case([&](mf::SiluOp) -> Value { return silu(in[0]); })
          .Case([&](mf::SwiGluOp) -> Value {
            return arith::MulFOp::create(b, loc, silu(in[0]), in[1]);
          })
          .Case([&](mf::GeluOp gelu) -> Value {
            Value x = in[0];
            Value half = arith::MulFOp::create(b, loc, constant(0.5), x);
            Value inner;
            if (gelu.getApproximate() == mf::GeluApproximation::tanh) {
              Value cube = arith::MulFOp::create(
                  b, loc, x, arith::MulFOp::create(b, loc, x, x));
              Value sum = arith::AddFOp::create(
                  b, loc, x,
                  arith::MulFOp::create(b, loc, constant(0.044715), cube));
              inner = math::TanhOp::create(
                  b, loc,
                  arith::MulFOp::create(b, loc, constant(0.7978845608028654),
                                        sum));
            } else {
              inner = math::ErfOp::create(
                  b, loc,
                  arith::MulFOp::create(b, loc, x,
                                        constant(0.7071067811865476)));
            }
            return arith::MulFOp::create(
                b, loc, half, arith::AddFOp::create(b, loc, constant(1.0), inner));
          })
          .Case([&](mf::CastOp cast) -> Value {
            Type from = elementOf(cast.getInput());
            Type to = elementOf(cast.getResult());
            if (isFloat(from) && isFloat(to)) {
              return in[0]; // rounded to `to` below
            }
            if (!isFloat(from) && isFloat(to)) {
              return arith::SIToFPOp::create(b, loc, f32, in[0]);
            }
            if (isFloat(from) && !isFloat(to)) {
              return arith::FPToSIOp::create(b, loc, to, in[0]);
            }
            return in[0];
          })
          .Default([](Operation *) { return Value(); });
  if (!result) {
    why = "no kernel rule for " + op->getName().getStringRef().str();
    return failure();
  }
  return round(result, elementOf(op->getResult(0)), loc);
}

FailureOr<func::FuncOp> KernelBuilder::build(StringRef name, std::string &why) {
  Block &body = fusion_.getBody().front();
  if (fusion_.getNumResults() == 0) {
    why = "no results";
    return failure();
  }
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(fusion_.getResult(0).getType()).getShape();
  for (Type type : fusion_.getResultTypes()) {
    if (cast<RankedTensorType>(type).getShape() != shape) {
      why = "results of different shapes";
      return failure();
    }
  }
  unsigned rank = shape.size();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, context_);

  // Inputs of the generic: direct uses of an argument read it with the
  // identity map, broadcasts of it with their broadcast map.
  SmallVector<GenericInput> inputs;
  llvm::DenseMap<Value, unsigned> inputOf; // region value -> generic input
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
                            context_));
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

  // The kernel: memref arguments for the region's inputs, then its results.
  SmallVector<Type> argumentTypes;
  for (Value input : fusion_.getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    argumentTypes.push_back(MemRefType::get(type.getShape(), type.getElementType()));
  }
  for (Type type : fusion_.getResultTypes()) {
    auto tensor = cast<RankedTensorType>(type);
    argumentTypes.push_back(
        MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }
  Location loc = fusion_.getLoc();
  auto kernel = func::FuncOp::create(builder_, loc, name,
                                     builder_.getFunctionType(argumentTypes, {}));
  Block *entry = kernel.addEntryBlock();
  OpBuilder::InsertionGuard guard(builder_);
  builder_.setInsertionPointToStart(entry);

  SmallVector<Value> genericInputs, genericOutputs;
  SmallVector<AffineMap> maps;
  for (const GenericInput &input : inputs) {
    genericInputs.push_back(entry->getArgument(input.argument));
    maps.push_back(input.map);
  }
  unsigned resultBase = fusion_.getInputs().size();
  for (unsigned i = 0; i < fusion_.getNumResults(); ++i) {
    genericOutputs.push_back(entry->getArgument(resultBase + i));
    maps.push_back(identity);
  }
  SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
  std::string failure;
  auto yield = cast<mf::YieldOp>(body.getTerminator());
  linalg::GenericOp::create(
      builder_, loc, genericInputs, genericOutputs, maps, iterators,
      [&](OpBuilder &, Location bodyLoc, ValueRange scalars) {
        llvm::DenseMap<Value, Value> scalarOf;
        for (auto [key, index] : inputOf) {
          scalarOf[key] = widen(scalars[index], elementOf(key), bodyLoc);
        }
        for (Operation &op : body.without_terminator()) {
          if (isa<mf::BroadcastOp>(op) || !failure.empty()) {
            continue;
          }
          SmallVector<Value> operands;
          for (Value operand : op.getOperands()) {
            operands.push_back(scalarOf.lookup(operand));
          }
          FailureOr<Value> value = compute(&op, operands, bodyLoc, failure);
          if (succeeded(value)) {
            scalarOf[op.getResult(0)] = *value;
          }
        }
        SmallVector<Value> results;
        for (Value yielded : yield.getValues()) {
          Value scalar = scalarOf.lookup(yielded);
          results.push_back(scalar ? narrow(scalar, elementOf(yielded), bodyLoc)
                                   : scalars[0]);
        }
        linalg::YieldOp::create(builder_, bodyLoc, results);
      });
  func::ReturnOp::create(builder_, loc);
  if (!failure.empty()) {
    why = failure;
    kernel.erase();
    return mlir::failure();
  }
  return kernel;
}

} // namespace

KernelModule mfc::buildElementwiseKernels(ModuleOp graph) {
  MLIRContext *context = graph.getContext();
  context->loadDialect<arith::ArithDialect, func::FuncDialect,
                       linalg::LinalgDialect, math::MathDialect,
                       memref::MemRefDialect>();
  KernelModule result;
  result.module = ModuleOp::create(graph.getLoc());
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(result.module->getBody());
  std::map<std::string, std::string> kernelByBody;
  graph.walk([&](mf::FusionOp fusion) {
    if (fusion.getKind() != "elementwise") {
      result.unsupported.emplace_back(fusion, "kind " + fusion.getKind().str());
      return;
    }
    std::string why;
    FailureOr<func::FuncOp> kernel =
        KernelBuilder(fusion, builder).build("mfk", why);
    if (failed(kernel)) {
      result.unsupported.emplace_back(fusion, why);
      return;
    }
    // Identical regions (every layer's) share one kernel.
    std::string text;
    llvm::raw_string_ostream os(text);
    kernel->print(os, OpPrintingFlags().skipRegions(false));
    auto [it, inserted] = kernelByBody.try_emplace(
        text, "mfk_" + std::to_string(kernelByBody.size()));
    if (inserted) {
      kernel->setSymName(it->second);
    } else {
      kernel->erase();
    }
    result.kernelOf[fusion] = it->second;
  });
  return result;
}

LogicalResult mfc::lowerKernelsToLLVM(ModuleOp kernels) {
  PassManager pm(kernels.getContext());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true; // void mfk_N(T *in..., T *out...)
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(kernels);
}

FailureOr<std::string> mfc::emitKernelObject(ModuleOp kernels, StringRef cpu) {
  MLIRContext *context = kernels.getContext();
  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, llvmContext, "mfc-kernels");
  if (!module) {
    return emitError(kernels.getLoc()) << "cannot translate the kernels to LLVM IR";
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    return emitError(kernels.getLoc()) << "no LLVM target for " << triple.str() << ": "
                               << error;
  }
  std::string cpuName =
      cpu == "native" ? llvm::sys::getHostCPUName().str() : cpu.str();
  std::string features;
  if (cpu == "native") {
    llvm::SubtargetFeatures featureSet;
    for (auto &[feature, enabled] : llvm::sys::getHostCPUFeatures()) {
      featureSet.AddFeature(feature, enabled);
    }
    features = featureSet.getString();
  }
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!subtarget || !subtarget->isCPUStringValid(cpuName)) {
    return emitError(kernels.getLoc())
           << "unknown CPU '" << cpuName << "' for " << triple.str()
           << "; use native or an LLVM CPU name such as x86-64-v3 or "
              "skylake-avx512";
  }
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpuName, features, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine) {
    return emitError(kernels.getLoc()) << "cannot target CPU '" << cpuName << "'";
  }
  module->setDataLayout(machine->createDataLayout());
  module->setTargetTriple(triple);
  if (llvm::Error error = makeOptimizingTransformer(3, 0, machine.get())(
          module.get())) {
    return emitError(kernels.getLoc()) << "optimizing the kernels failed: "
                               << llvm::toString(std::move(error));
  }
  llvm::SmallVector<char> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    return emitError(kernels.getLoc()) << "cannot emit object code for " << cpuName;
  }
  passes.run(*module);
  return std::string(object.begin(), object.end());
}

FailureOr<std::string> mfc::linkSharedObject(StringRef object, Location loc) {
  llvm::SmallString<128> objectPath, libraryPath;
  int objectFd;
  if (llvm::sys::fs::createTemporaryFile("mfc-kernels", "o", objectFd,
                                         objectPath) ||
      llvm::sys::fs::createTemporaryFile("mfc-kernels", "so", libraryPath)) {
    return emitError(loc) << "cannot create temporary files for linking";
  }
  llvm::FileRemover removeObject(objectPath), removeLibrary(libraryPath);
  {
    llvm::raw_fd_ostream os(objectFd, /*shouldClose=*/true);
    os << object;
  }
  llvm::ErrorOr<std::string> linker =
      llvm::sys::findProgramByName("ld.lld", {MFC_LLVM_TOOLS_DIR});
  if (!linker) {
    return emitError(loc) << "ld.lld not found in " << MFC_LLVM_TOOLS_DIR
                          << "; install lld-22 (scripts/install-deps.sh)";
  }
  std::string message;
  llvm::StringRef arguments[] = {*linker, "-shared", "--no-undefined-version",
                                 "-o", libraryPath, objectPath};
  if (llvm::sys::ExecuteAndWait(*linker, arguments, std::nullopt, {}, 0, 0,
                                &message) != 0) {
    return emitError(loc) << "linking the kernels failed: " << message;
  }
  auto library = llvm::MemoryBuffer::getFile(libraryPath);
  if (!library) {
    return emitError(loc) << "cannot read the linked kernels: "
                          << library.getError().message();
  }
  return (*library)->getBuffer().str();
}

FailureOr<KernelLibrary> mfc::buildKernelLibrary(ModuleOp graph, StringRef cpu) {
  KernelModule kernels = buildElementwiseKernels(graph);
  KernelLibrary library;
  library.kernelOf = kernels.kernelOf;
  for (auto function : kernels.module->getOps<func::FuncOp>()) {
    library.names.push_back(function.getSymName().str());
  }
  if (library.names.empty()) {
    return library;
  }
  if (failed(lowerKernelsToLLVM(*kernels.module))) {
    return emitError(graph.getLoc()) << "lowering the kernels to LLVM failed";
  }
  FailureOr<std::string> object = emitKernelObject(*kernels.module, cpu);
  if (failed(object)) {
    return failure();
  }
  FailureOr<std::string> shared = linkSharedObject(*object, graph.getLoc());
  if (failed(shared)) {
    return failure();
  }
  library.sharedObject = std::move(*shared);
  return library;
}
