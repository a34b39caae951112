//===- KernelLowering.cpp - kernels -> LLVM -> shared object --------------===//
//
// 1. Lower the kernels (linalg/scf/memref/math on memrefs) to the LLVM
//    dialect with the bare-pointer calling convention.
// 2. Give each runtime service the kernels call a body: a trampoline through
//    the global `<service>_ptr` that the runtime fills after loading.
// 3. Put each kernel behind its ABI entry point (runtime/hal/KernelAbi.h),
//    which checks the dispatch state and calls the body with its bindings,
//    and export the library's table through mfrt_kernel_library_query.
// 4. LLVM O3 to an object for the target CPU; ld.lld to a shared object.
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

/// What the ABI entry point of a kernel checks and the library's table
/// lists: its name, tiles and the bytes of each binding.
struct KernelEntry {
  std::string name;
  int64_t tiles;
  SmallVector<uint64_t> bindingBytes;
};

/// The kernel functions of `kernels` (those with a tile count), before
/// lowering erases their buffer types.
std::vector<KernelEntry> collectKernelEntries(ModuleOp kernels) {
  std::vector<KernelEntry> entries;
  for (auto function : kernels.getOps<func::FuncOp>()) {
    auto tiles = function->getAttrOfType<IntegerAttr>(kTilesAttr);
    if (!tiles) {
      continue;
    }
    KernelEntry entry{function.getName().str(), tiles.getInt(), {}};
    for (Type type : function.getArgumentTypes().drop_front(2)) {
      auto memref = cast<MemRefType>(type);
      entry.bindingBytes.push_back(
          uint64_t(memref.getNumElements()) *
          llvm::divideCeil(memref.getElementTypeBitWidth(), 8));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

/// A constant internal global `name` of `type` whose value `build` makes.
void createConstantGlobal(OpBuilder &builder, Location loc, Type type,
                          StringRef name,
                          function_ref<Value(OpBuilder &)> build) {
  auto global =
      LLVM::GlobalOp::create(builder, loc, type, /*isConstant=*/true,
                             LLVM::Linkage::Internal, name, Attribute());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(
      builder.createBlock(&global.getInitializerRegion()));
  LLVM::ReturnOp::create(builder, loc, build(builder));
}

/// Renames each kernel's lowered body `<name>_tiles` (internal) and defines
/// `int32_t <name>(const mfrt_dispatch_state_v1 *state)`: binding_count and
/// every binding's length checked (MFRT_KERNEL_BAD_DISPATCH otherwise),
/// then the body on the state's tile range and bindings.
void defineKernelEntryPoints(ModuleOp kernels, ArrayRef<KernelEntry> entries) {
  MLIRContext *context = kernels.getContext();
  OpBuilder builder(context);
  auto ptr = LLVM::LLVMPointerType::get(context);
  Type i32 = builder.getI32Type(), i64 = builder.getI64Type();
  auto stateType =
      LLVM::LLVMStructType::getLiteral(context, {i64, i64, i32, i32, ptr, ptr});
  for (const KernelEntry &entry : entries) {
    auto body = kernels.lookupSymbol<LLVM::LLVMFuncOp>(entry.name);
    Location loc = body.getLoc();
    // Nothing calls a kernel in its module: renaming needs no use updated.
    SymbolTable::setSymbolName(body, entry.name + "_tiles");
    body.setLinkage(LLVM::Linkage::Internal);

    builder.setInsertionPointAfter(body);
    auto function = LLVM::LLVMFuncOp::create(
        builder, loc, entry.name, LLVM::LLVMFunctionType::get(i32, {ptr}));
    Block *check = function.addEntryBlock(builder);
    Value state = check->getArgument(0);
    builder.setInsertionPointToStart(check);
    auto field = [&](int32_t index, Type type) -> Value {
      Value address = LLVM::GEPOp::create(builder, loc, ptr, stateType, state,
                                          ArrayRef<LLVM::GEPArg>{0, index});
      return LLVM::LoadOp::create(builder, loc, type, address);
    };
    auto constant = [&](Type type, int64_t value) -> Value {
      return LLVM::ConstantOp::create(builder, loc, type, value);
    };
    auto element = [&](Value array, Type type, int32_t index) -> Value {
      Value address = LLVM::GEPOp::create(builder, loc, ptr, type, array,
                                          ArrayRef<LLVM::GEPArg>{index});
      return LLVM::LoadOp::create(builder, loc, type, address);
    };
    Value tileBegin = field(0, i64), tileEnd = field(1, i64);
    Value pointers = field(4, ptr), lengths = field(5, ptr);
    Value valid = LLVM::ICmpOp::create(
        builder, loc, LLVM::ICmpPredicate::eq, field(2, i32),
        constant(i32, static_cast<int64_t>(entry.bindingBytes.size())));
    Block *call = builder.createBlock(&function.getBody());
    Block *refuse = builder.createBlock(&function.getBody());
    // Lengths are read only once the count is known to be right.
    Block *lengthsCheck = builder.createBlock(&function.getBody());
    builder.setInsertionPointToEnd(check);
    LLVM::CondBrOp::create(builder, loc, valid, lengthsCheck, refuse);
    builder.setInsertionPointToStart(lengthsCheck);
    Value longEnough = constant(builder.getI1Type(), 1);
    for (auto [index, bytes] : llvm::enumerate(entry.bindingBytes)) {
      Value fits = LLVM::ICmpOp::create(
          builder, loc, LLVM::ICmpPredicate::uge,
          element(lengths, i64, static_cast<int32_t>(index)),
          constant(i64, static_cast<int64_t>(bytes)));
      longEnough = LLVM::AndOp::create(builder, loc, longEnough, fits);
    }
    LLVM::CondBrOp::create(builder, loc, longEnough, call, refuse);

    builder.setInsertionPointToStart(refuse);
    LLVM::ReturnOp::create(builder, loc,
                           constant(i32, MFRT_KERNEL_BAD_DISPATCH));

    builder.setInsertionPointToStart(call);
    SmallVector<Value> operands{tileBegin, tileEnd};
    for (size_t index = 0; index < entry.bindingBytes.size(); ++index) {
      operands.push_back(element(pointers, ptr, static_cast<int32_t>(index)));
    }
    auto result = LLVM::CallOp::create(builder, loc, body, operands);
    LLVM::ReturnOp::create(builder, loc, result.getResult());
  }
}

/// The library's table (runtime/hal/KernelAbi.h's mfrt_kernel_library_v1) and
/// `mfrt_kernel_library_query`, which returns it for
/// MFRT_KERNEL_ABI_VERSION and null for any other version.
void defineLibraryQuery(ModuleOp kernels, ArrayRef<KernelEntry> entries) {
  MLIRContext *context = kernels.getContext();
  Location loc = kernels.getLoc();
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(kernels.getBody());
  auto ptr = LLVM::LLVMPointerType::get(context);
  Type i32 = builder.getI32Type(), i64 = builder.getI64Type();
  int64_t count = static_cast<int64_t>(entries.size());
  auto pointers = LLVM::LLVMArrayType::get(ptr, count);

  SmallVector<uint32_t> bindingCounts;
  SmallVector<int64_t> tileCounts;
  for (auto [index, entry] : llvm::enumerate(entries)) {
    std::string name = entry.name + '\0';
    LLVM::GlobalOp::create(
        builder, loc,
        LLVM::LLVMArrayType::get(builder.getI8Type(), name.size()),
        /*isConstant=*/true, LLVM::Linkage::Internal,
        "mfrt_kernel_name_" + std::to_string(index),
        builder.getStringAttr(name));
    bindingCounts.push_back(static_cast<uint32_t>(entry.bindingBytes.size()));
    tileCounts.push_back(entry.tiles);
  }
  // An array of the addresses of `symbol(i)`, i in [0, count).
  auto addressArray = [&](StringRef name,
                          function_ref<std::string(size_t)> symbol) {
    createConstantGlobal(builder, loc, pointers, name, [&](OpBuilder &b) {
      Value array = LLVM::UndefOp::create(b, loc, pointers);
      for (size_t i = 0; i < entries.size(); ++i) {
        Value address = LLVM::AddressOfOp::create(b, loc, ptr, symbol(i));
        array = LLVM::InsertValueOp::create(b, loc, array, address,
                                            ArrayRef<int64_t>{int64_t(i)});
      }
      return array;
    });
  };
  addressArray("mfrt_kernel_names", [](size_t i) {
    return "mfrt_kernel_name_" + std::to_string(i);
  });
  addressArray("mfrt_kernel_entries",
               [&](size_t i) { return entries[i].name; });
  LLVM::GlobalOp::create(builder, loc, LLVM::LLVMArrayType::get(i32, count),
                         /*isConstant=*/true, LLVM::Linkage::Internal,
                         "mfrt_kernel_binding_counts",
                         builder.getI32TensorAttr(SmallVector<int32_t>(
                             bindingCounts.begin(), bindingCounts.end())));
  LLVM::GlobalOp::create(
      builder, loc, LLVM::LLVMArrayType::get(i64, count), /*isConstant=*/true,
      LLVM::Linkage::Internal, "mfrt_kernel_tile_counts",
      DenseIntElementsAttr::get(RankedTensorType::get({count}, i64),
                                ArrayRef<int64_t>(tileCounts)));

  auto tableType =
      LLVM::LLVMStructType::getLiteral(context, {i32, i32, ptr, ptr, ptr, ptr});
  createConstantGlobal(
      builder, loc, tableType, "mfrt_kernel_library", [&](OpBuilder &b) {
        Value table = LLVM::UndefOp::create(b, loc, tableType);
        SmallVector<Value> fields{
            LLVM::ConstantOp::create(b, loc, i32, MFRT_KERNEL_ABI_VERSION),
            LLVM::ConstantOp::create(b, loc, i32, count),
            LLVM::AddressOfOp::create(b, loc, ptr, "mfrt_kernel_names"),
            LLVM::AddressOfOp::create(b, loc, ptr, "mfrt_kernel_entries"),
            LLVM::AddressOfOp::create(b, loc, ptr,
                                      "mfrt_kernel_binding_counts"),
            LLVM::AddressOfOp::create(b, loc, ptr, "mfrt_kernel_tile_counts")};
        for (auto [index, value] : llvm::enumerate(fields)) {
          table = LLVM::InsertValueOp::create(
              b, loc, table, value, ArrayRef<int64_t>{int64_t(index)});
        }
        return table;
      });

  auto query =
      LLVM::LLVMFuncOp::create(builder, loc, MFRT_KERNEL_LIBRARY_QUERY,
                               LLVM::LLVMFunctionType::get(ptr, {i32}));
  Block *body = query.addEntryBlock(builder);
  builder.setInsertionPointToStart(body);
  Value spoken = LLVM::ICmpOp::create(
      builder, loc, LLVM::ICmpPredicate::eq, body->getArgument(0),
      LLVM::ConstantOp::create(builder, loc, i32, MFRT_KERNEL_ABI_VERSION));
  Value answer = LLVM::SelectOp::create(
      builder, loc, spoken,
      LLVM::AddressOfOp::create(builder, loc, ptr, "mfrt_kernel_library"),
      LLVM::ZeroOp::create(builder, loc, ptr));
  LLVM::ReturnOp::create(builder, loc, answer);
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
  std::vector<KernelEntry> entries = collectKernelEntries(kernels);
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
  funcOptions.useBarePtrCallConv =
      true; // i32 mfk_N(i64, i64, T *in..., T *out...)
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(kernels))) {
    return failure();
  }
  loadBf16AsIntegers(kernels);
  defineServiceTrampolines(kernels);
  defineKernelEntryPoints(kernels, entries);
  defineLibraryQuery(kernels, entries);
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
  // (Also when the kernels come from IR that mfc resumes after codegen.)
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
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
