//===- KernelLowering.cpp - kernels -> LLVM -> shared object --------------===//
//
// 1. Lower the kernels (linalg/scf/memref/math on memrefs) to the LLVM
//    dialect with the bare-pointer calling convention.
// 2. Give each runtime service the kernels call a body: a trampoline through
//    the global `<service>_ptr` that the runtime fills after loading.
// 3. LLVM O3 to an object for the target CPU; ld.lld to a shared object.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
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

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"

using namespace mlir;
using namespace mfc;

namespace {

/// Turns each external `mfrt_*` declaration into a trampoline that calls
/// through the pointer global `<name>_ptr`.
void defineServiceTrampolines(ModuleOp kernels) {
  OpBuilder builder(kernels.getContext());
  auto pointerType = LLVM::LLVMPointerType::get(kernels.getContext());
  for (auto function : llvm::make_early_inc_range(
           kernels.getOps<LLVM::LLVMFuncOp>())) {
    if (!function.isExternal() || !function.getName().starts_with("mfrt_")) {
      continue;
    }
    Location loc = function.getLoc();
    builder.setInsertionPoint(function);
    auto global = LLVM::GlobalOp::create(
        builder, loc, pointerType, /*isConstant=*/false,
        LLVM::Linkage::External, (function.getName() + "_ptr").str(),
        Attribute());
    Block *init = builder.createBlock(&global.getInitializerRegion());
    builder.setInsertionPointToStart(init);
    LLVM::ReturnOp::create(builder, loc,
                           LLVM::ZeroOp::create(builder, loc, pointerType).getResult());

    function.setLinkage(LLVM::Linkage::Internal);
    Block *body = function.addEntryBlock(builder);
    builder.setInsertionPointToStart(body);
    Value address = LLVM::AddressOfOp::create(builder, loc, global);
    Value target = LLVM::LoadOp::create(builder, loc, pointerType, address);
    SmallVector<Value> operands{target};
    llvm::append_range(operands, body->getArguments());
    auto call = LLVM::CallOp::create(builder, loc, function.getFunctionType(),
                                     operands);
    LLVM::ReturnOp::create(builder, loc, call.getResults());
  }
}

} // namespace

mfexec::ExecutableOp mfc::findExecutable(ModuleOp graph) {
  auto executables = graph.getOps<mfexec::ExecutableOp>();
  return executables.empty() ? mfexec::ExecutableOp() : *executables.begin();
}

namespace {

/// exp, tanh, erf and log as polynomials in arith ops (MLIR's
/// approximations, a few ulp off libm): unlike libm calls they let LLVM
/// vectorize the loops around them (SwiGLU's and GELU's epilogues).
LogicalResult approximateMath(ModuleOp kernels) {
  RewritePatternSet patterns(kernels.getContext());
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    return name == "math.exp" || name == "math.tanh" || name == "math.erf" ||
           name == "math.log";
  });
  return applyPatternsGreedily(kernels, std::move(patterns));
}

/// f32 <-> bf16 conversions as integer ops (round to nearest even, as the
/// hardware does) for targets without AVX512-BF16.
LogicalResult expandBf16Conversions(ModuleOp kernels) {
  RewritePatternSet patterns(kernels.getContext());
  arith::populateExpandBFloat16Patterns(patterns);
  return applyPatternsGreedily(kernels, std::move(patterns));
}

/// Masked loads of bf16 vectors (the matvec's last, partial pair) as loads
/// of i16: a target without AVX-512 splits them into scalar loads, and
/// would convert each bf16 through f32 on the way (__truncsfbf2 again).
void loadBf16AsIntegers(ModuleOp kernels) {
  kernels.walk([](LLVM::MaskedLoadOp load) {
    auto type = dyn_cast<VectorType>(load.getType());
    if (!type || !type.getElementType().isBF16()) {
      return;
    }
    OpBuilder b(load);
    Location loc = load.getLoc();
    auto words = VectorType::get(type.getShape(), b.getI16Type());
    Value padding = load.getPassThru()
                        ? LLVM::BitcastOp::create(b, loc, words, load.getPassThru())
                        : Value();
    auto loaded = LLVM::MaskedLoadOp::create(b, loc, words, load.getData(),
                                             load.getMask(), padding,
                                             load.getAlignmentAttr(),
                                             load.getNontemporalAttr());
    load.replaceAllUsesWith(
        LLVM::BitcastOp::create(b, loc, type, loaded.getResult()).getResult());
    load.erase();
  });
}

} // namespace

LogicalResult mfc::lowerKernelsToLLVM(ModuleOp kernels,
                                      mfexec::TargetAttr target) {
  if (failed(approximateMath(kernels))) {
    return failure();
  }
  // Loops first: linalg bodies convert to bf16 only once they are loops.
  PassManager loops(kernels.getContext());
  loops.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  if (failed(loops.run(kernels))) {
    return failure();
  }
  // Without AVX512-BF16 LLVM calls __truncsfbf2 for f32 -> bf16, which
  // Debian 12's libgcc does not have: such targets round in integer ops.
  if (!llvm::is_contained(target.getFeatures(),
                          StringAttr::get(kernels.getContext(), "avx512bf16")) &&
      failed(expandBf16Conversions(kernels))) {
    return failure();
  }
  PassManager pm(kernels.getContext());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertVectorToLLVMPass()); // the matvec's vector ops
  // LLVM intrinsics first (the approximations' floor and fma become
  // instructions, not libm calls); libm takes what has none.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true; // void mfk_N(T *in..., T *out...)
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(kernels))) {
    return failure();
  }
  loadBf16AsIntegers(kernels);
  defineServiceTrampolines(kernels);
  return success();
}

FailureOr<mfexec::TargetAttr> mfc::resolveKernelTarget(StringRef cpu,
                                                      Location loc) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    return emitError(loc) << "no LLVM target for " << triple.str() << ": "
                          << error;
  }
  std::string cpuName =
      cpu == "native" ? llvm::sys::getHostCPUName().str() : cpu.str();
  std::string hostFeatures;
  if (cpu == "native") {
    llvm::SubtargetFeatures featureSet;
    for (auto &[feature, enabled] : llvm::sys::getHostCPUFeatures()) {
      featureSet.AddFeature(feature, enabled);
    }
    hostFeatures = featureSet.getString();
  }
  std::unique_ptr<llvm::MCSubtargetInfo> probe(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!probe || !probe->isCPUStringValid(cpuName)) {
    return emitError(loc)
           << "unknown CPU '" << cpuName << "' for " << triple.str()
           << "; use native or an LLVM CPU name such as x86-64-v3 or "
              "skylake-avx512";
  }
  // Every feature the CPU (and, natively, the host) enables: what the
  // kernels may use, so what the machine that runs them must have.
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, cpuName, hostFeatures));
  MLIRContext *context = loc.getContext();
  SmallVector<Attribute> features;
  for (const llvm::SubtargetFeatureKV &feature :
       subtarget->getAllProcessorFeatures()) {
    if (subtarget->getFeatureBits().test(feature.Value)) {
      features.push_back(StringAttr::get(context, feature.Key));
    }
  }
  return mfexec::TargetAttr::get(context, triple.str(), cpuName,
                                 ArrayAttr::get(context, features));
}

FailureOr<std::string> mfc::emitKernelObject(ModuleOp kernels,
                                             mfexec::TargetAttr resolved) {
  MLIRContext *context = kernels.getContext();
  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, llvmContext, "mfc-kernels");
  if (!module) {
    return emitError(kernels.getLoc()) << "cannot translate the kernels to LLVM IR";
  }
  llvm::Triple triple(resolved.getTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    return emitError(kernels.getLoc()) << "no LLVM target for " << triple.str()
                                       << ": " << error;
  }
  std::string cpuName = resolved.getCpu().str();
  // Every processor feature set explicitly, on or off, as the target
  // records it: what the CPU name alone implies may be more (a virtual
  // machine that hides AVX-512 from a CPU that has it).
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, cpuName, ""));
  llvm::SubtargetFeatures featureSet;
  for (const llvm::SubtargetFeatureKV &feature :
       subtarget->getAllProcessorFeatures()) {
    featureSet.AddFeature(
        feature.Key, llvm::is_contained(resolved.getFeatures(),
                                        StringAttr::get(context, feature.Key)));
  }
  std::string features = featureSet.getString();
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
    os.close();
    if (os.has_error()) { // a full temporary directory: say so, not abort
      std::string reason = os.error().message();
      os.clear_error();
      return emitError(loc) << "cannot write the kernels' object file '"
                            << objectPath << "' for linking: " << reason;
    }
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


FailureOr<std::string> mfc::buildKernelLibrary(ModuleOp graph) {
  mfexec::ExecutableOp executable = findExecutable(graph);
  if (!executable || executable.getBody().front().getOps<mfexec::KernelOp>().empty()) {
    return std::string();
  }
  FailureOr<std::string> object =
      emitKernelObject(executable.getCode(), executable.getTarget());
  if (failed(object)) {
    return failure();
  }
  return linkSharedObject(*object, graph.getLoc());
}
