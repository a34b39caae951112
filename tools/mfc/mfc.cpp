//===- mfc.cpp - the mfc compiler driver ----------------------------------===//
//
//   mfc compile model.yaml -o model.bin [--set key.path=value]...
//       [--compile-to=<phase>] [--dump-ir-dir=DIR] [--mlir-timing] ...
//   mfc compile ir/NN-<phase>.mlir -o model.bin   (resumes after the phase)
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/MemoryPlanner.h"
#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Frontend/ModelBuilder.h"
#include "compiler/Frontend/ModelSpecReader.h"
#include "compiler/Frontend/ModuleSettings.h"
#include "compiler/Frontend/RecomputePlan.h"
#include "compiler/Pipelines/ParallelSearch.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Pipelines/RecomputeBudget.h"
#include "compiler/Report/CompileReport.h"
#include "compiler/Serialize/ExecutableWriter.h"
#include "compiler/Transforms/InputFile.h"
#include "compiler/Transforms/MlirInput.h"
#include "compiler/Transforms/OutputFile.h"
#include "dialects/MF/IR/MFDialect.h"
#include "dialects/MFExec/IR/MFExecOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace cl = llvm::cl;
using namespace mfc;

namespace {

/// A memory-plan problem: a CSV row per buffer (id,lower,upper,size).
constexpr uint64_t kMaxPlanCsvBytes = 1u << 30;

void printError(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "mfc") << message << "\n";
}

/// Writes an output file; 1 after printing why it could not.
int writeFile(const std::string &path,
              llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error = writeOutputFile(path, write);
  if (!error.empty()) {
    printError(error);
    return 1;
  }
  return 0;
}

/// One line per planned host program: arena, lower bound, ratio.
void reportMemoryPlan(mlir::ModuleOp module) {
  for (auto entry : module.getOps<mlir::mfexec::EntryOp>()) {
    if (!entry.getArenaBytes() || !entry.getArenaLowerBound()) {
      continue;
    }
    double arena = *entry.getArenaBytes(), bound = *entry.getArenaLowerBound();
    int64_t derived = 0;
    entry.walk([&](mlir::mfexec::DerivedOp value) {
      derived += mlir::mfexec::bufferBytes(value.getType());
    });
    if (entry.getInitializer()) {
      llvm::WithColor::note(llvm::errs(), "mfc")
          << llvm::formatv("@{0} derives {1:F3} MB from the weights (run "
                           "when they change, before the entries that read "
                           "it)\n",
                           entry.getFunction(), derived / 1e6);
      continue;
    }
    llvm::WithColor::note(llvm::errs(), "mfc")
        << llvm::format("memory plan of @%s: arena %.3f MB, liveness lower "
                        "bound %.3f MB, ratio %.3f",
                        entry.getFunction().str().c_str(), arena / 1e6,
                        bound / 1e6, bound ? arena / bound : 1.0)
        << (derived >= 1000 // not for a few bytes of positions
                ? llvm::formatv("; {0:F3} MB derived from the weights "
                                "(computed when they change, outside "
                                "the arena)",
                                derived / 1e6)
                      .str()
                : std::string())
        << "\n";
  }
}

std::string phaseList() {
  std::string list;
  for (const Phase &phase : compilerPhases()) {
    list += (list.empty() ? "" : ", ") + phase.name.str();
  }
  return list;
}

/// --help shows the command's options and MLIR's (--mlir-timing, ...), not
/// the hundreds of LLVM backend options linked in with libLLVM.
void showOnlyOwnOptions(cl::OptionCategory &category) {
  cl::HideUnrelatedOptions(category);
  for (auto &[name, option] : cl::getRegisteredOptions()) {
    if (name.starts_with("mlir-")) {
      option->setHiddenFlag(cl::NotHidden);
    }
  }
}

int writeExecutableFile(mlir::ModuleOp module, const std::string &inputFile,
                        const std::string &outputFile) {
  if (outputFile == "-") {
    printError("an executable is binary: give it a file with -o model.bin "
               "(or print IR with --compile-to=" + phaseList() + ")");
    return 2;
  }
  mlir::FailureOr<std::string> kernels = buildKernelLibrary(module);
  if (failed(kernels)) {
    printError("cannot build the kernels of '" + inputFile + "'");
    return 1;
  }
  mlir::FailureOr<std::vector<uint8_t>> bytes =
      writeExecutable(module, *kernels);
  if (failed(bytes)) {
    printError("cannot serialize '" + inputFile + "'");
    return 1;
  }
  return writeFile(outputFile, [&](llvm::raw_ostream &os) {
    os.write(reinterpret_cast<const char *>(bytes->data()), bytes->size());
  });
}

/// --prefill-lengths: 'none', or increasing lengths below `seqLength`.
/// Prints what is wrong and returns nothing on bad input.
std::optional<std::vector<int64_t>> parsePrefillLengths(llvm::StringRef text,
                                                        int64_t seqLength) {
  std::vector<int64_t> lengths;
  if (text == "none") {
    return lengths;
  }
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',');
  for (llvm::StringRef item : items) {
    int64_t length = 0;
    if (item.trim().getAsInteger(10, length) || length < 1 ||
        length >= seqLength ||
        (!lengths.empty() && length <= lengths.back())) {
      printError("--prefill-lengths=" + text.str() + ": '" + item.str() +
                 "' is not a length in 1.." + std::to_string(seqLength - 1) +
                 " above the one before it (seq_length " +
                 std::to_string(seqLength) +
                 " always has its prefill); write e.g. 64,256 or none");
      return std::nullopt;
    }
    lengths.push_back(length);
  }
  return lengths;
}

/// With `module` compiled through autodiff: chooses the recompute plan for
/// a budget (into the module's mf.recompute), and plans the step's peak with
/// the plan and without recompute for the report. nullopt after printing why it
/// failed.
std::optional<RecomputeSummary> planRecomputeSearch(
    mlir::ModuleOp module, const ModelSpec &spec, const CompileOptions &options,
    const RecomputePlan &configured, std::optional<int64_t> budgetBytes,
    BudgetSearch search, const std::string &inputFile) {
  RecomputeEvaluator evaluator(module, spec, options);
  RecomputeSummary summary;
  if (budgetBytes) {
    std::string error;
    std::optional<BudgetChoice> choice =
        chooseRecompute(evaluator, *budgetBytes, search, error);
    if (!choice) {
      printError(error);
      return std::nullopt;
    }
    setRecomputeDecision(module, planRecompute(spec, choice->layers));
    summary.budget = *budgetBytes;
    summary.peakWith = choice->step.peakBytes;
    for (LayerRecompute layer : choice->layers) {
      summary.layerChoices.push_back(toString(layer));
    }
    llvm::WithColor::note(llvm::errs(), "mfc")
        << llvm::formatv("--memory-budget {0:F3} MB: planned step peak "
                         "{1:F3} MB, recomputing {2:F2}% of its FLOPs ({3} "
                         "plans compiled)\n",
                         *budgetBytes / 1e6, choice->step.peakBytes / 1e6,
                         100.0 * choice->step.recomputedFlops /
                             std::max<int64_t>(1, choice->step.flops),
                         evaluator.plansCompiled());
  } else if (std::optional<TrainStepCost> with = evaluator.evaluate(configured)) {
    summary.peakWith = with->peakBytes;
  }
  std::optional<TrainStepCost> without = evaluator.evaluate(
      std::vector<LayerRecompute>(spec.model.numLayers, LayerRecompute::None));
  if (!without || summary.peakWith < 0) {
    printError("compilation of '" + inputFile +
               "' failed while planning recompute");
    return std::nullopt;
  }
  summary.peakWithout = without->peakBytes;
  summary.plansCompiled = evaluator.plansCompiled();
  return summary;
}

/// What `mfc compile` reads: a YAML config, or IR of any phase.
enum class InputKind { Yaml, Mlir };

uint64_t fileSize(llvm::StringRef path) {
  uint64_t size = 0;
  return llvm::sys::fs::file_size(path, size) ? 0 : size;
}

/// The kind of `path` by its extension (.mlir; .yaml, .yml), else a
/// regular file's by its first line; stdin ('-') is IR, anything else (a
/// Hugging Face folder, a path that is no file) goes to the frontend, which
/// says what it is. Nullopt after printing why it cannot be read.
std::optional<InputKind> inputKindOf(llvm::StringRef path) {
  if (path == "-" || path.ends_with(".mlir")) {
    return InputKind::Mlir;
  }
  if (path.ends_with(".yaml") || path.ends_with(".yml") ||
      !llvm::sys::fs::is_regular_file(path)) {
    return InputKind::Yaml;
  }
  // The first 64 KB tell (a first line longer than that: YAML's error).
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> start =
      llvm::MemoryBuffer::getFileSlice(
          path, std::min<uint64_t>(64 << 10, fileSize(path)), 0);
  if (!start) {
    printError("cannot read input '" + path +
               "': " + start.getError().message());
    return std::nullopt;
  }
  return looksLikeMlir((*start)->getBuffer()) ? InputKind::Mlir
                                              : InputKind::Yaml;
}

/// The module in `path` ('-': stdin), verified; null after the parser's or
/// verifier's diagnostics.
mlir::OwningOpRef<mlir::ModuleOp> readModule(llvm::StringRef path,
                                             mlir::MLIRContext &context,
                                             llvm::SourceMgr &sources) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      path == "-" ? mlir::openInputFile(path, &error)
                  : readInputFile(path, "input", kMaxMlirInputBytes, error);
  if (!buffer) {
    printError(error);
    return nullptr;
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      parseMlirInput(std::move(buffer), context, sources);
  if (!module || failed(mlir::verify(*module))) {
    return nullptr;
  }
  return module;
}

/// The phase IR input comes from ("frontend" or a phase): the module's
/// mf.phase, else `compileFrom` (which must agree with mf.phase when both
/// are there), else frontend. Nullopt after printing why it is not one, or
/// why `compileTo` comes earlier.
std::optional<std::string> resumePoint(mlir::ModuleOp module,
                                       llvm::StringRef compileFrom,
                                       llvm::StringRef compileTo,
                                       llvm::StringRef inputFile) {
  auto recorded =
      module->getAttrOfType<mlir::StringAttr>(mlir::mf::kPhaseAttrName);
  std::string from = !compileFrom.empty() ? compileFrom.str()
                     : recorded           ? recorded.str()
                                          : "frontend";
  if (from != "frontend" && !findPhase(from)) {
    printError("'" + from + "' is not a phase (" +
               (compileFrom.empty() ? "mf.phase of '" + inputFile + "'"
                                    : llvm::Twine("--compile-from")) +
               "); phases are: frontend, " + phaseList());
    return std::nullopt;
  }
  if (!compileFrom.empty() && recorded && recorded.getValue() != compileFrom) {
    // Running a phase twice (or skipping one) makes another program.
    printError("--compile-from=" + compileFrom + ", but '" + inputFile +
               "' went through phase " + recorded.getValue() +
               " (its mf.phase); leave --compile-from out, or give " +
               recorded.getValue());
    return std::nullopt;
  }
  if (!compileTo.empty() && compileTo != from) {
    CompileOptions upTo;
    upTo.compileTo = from;
    if (from != "frontend" && runsPhase(upTo, compileTo)) {
      printError("--compile-to=" + compileTo + ": '" + inputFile +
                 "' is already past it (it comes from phase " + from + ")");
      return std::nullopt;
    }
  }
  return from;
}

int compile(int argc, char **argv) {
  cl::OptionCategory category("mfc compile options");
  // Options are locals: each command registers only its own.

  cl::opt<std::string> inputFile(
      cl::Positional, cl::desc("<model.yaml | phase.mlir | - (IR on stdin)>"),
      cl::Required, cl::cat(category));
  cl::opt<std::string> outputFile("o",
                                  cl::desc("Output: the executable, or the IR "
                                           "with --compile-to ('-': stdout)"),
                                  cl::value_desc("file"), cl::init("-"),
                                  cl::cat(category));
  std::string compileToHelp =
      "Stop after this phase and print its IR (phases: " + phaseList() + ")";
  cl::opt<std::string> compileTo("compile-to", cl::desc(compileToHelp),
                                 cl::value_desc("phase"), cl::cat(category));
  cl::opt<std::string> compileFrom(
      "compile-from",
      cl::desc("IR input without mf.phase (which every phase records): the "
               "phase it comes from (frontend or a phase); compiling resumes "
               "with the next (default: frontend)"),
      cl::value_desc("phase"), cl::cat(category));
  cl::list<std::string>
      overrides("set",
                cl::desc("Override a config key, e.g. "
                         "--set model.model_config.num_layers=2 (repeatable)"),
                cl::value_desc("key.path=value"), cl::cat(category));
  cl::opt<std::string> reportFile(
      "report",
      cl::desc("Write what the compiler decided (fusion groups with model "
               "paths, FLOPs, bytes, memory plan): JSON if FILE ends in .json, "
               "else text ('-': stdout)"),
      cl::value_desc("FILE"), cl::cat(category));
  cl::opt<std::string> memoryPlanCsv(
      "memory-plan-csv",
      cl::desc("Write the memory planning problem as MiniMalloc CSV"),
      cl::value_desc("file"), cl::cat(category));
  cl::opt<std::string> memoryPlanSvg(
      "memory-plan-svg", cl::desc("Draw the memory plan (time x offset)"),
      cl::value_desc("file"), cl::cat(category));
  cl::opt<std::string> cpu(
      "cpu", cl::desc("Target CPU for kernels: native, x86-64-v3, ..."),
      cl::init("native"), cl::cat(category));
  cl::opt<std::string> kernelsObject(
      "kernels-object", cl::desc("Write the generated kernels as an ELF object"),
      cl::value_desc("file"), cl::cat(category));
  cl::opt<std::string> packWeights(
      "pack-weights",
      cl::desc("Inference: multiply by a weight through panels packed once "
               "(mf-run's own microkernel) instead of OpenBLAS on the weight "
               "as stored: auto (when the target CPU has AVX-512, or AVX2 "
               "with FMA and F16C, which the microkernels need), true or "
               "false (default: auto)"),
      cl::value_desc("auto|true|false"), cl::init("auto"), cl::cat(category));
  cl::opt<std::string> prefillLengths(
      "prefill-lengths",
      cl::desc("Predict with a KV cache: prompt lengths below seq_length that "
               "get their own prefill entry, e.g. 64,256 ('none': only "
               "seq_length; default: 32, 64, ... below seq_length)"),
      cl::value_desc("N,N,...|none"), cl::cat(category));
  cl::opt<std::string> memoryBudget(
      "memory-budget",
      cl::desc("Training: recompute what the step needs to fit SIZE (e.g. "
               "40MB, 12GiB) with the fewest recomputed FLOPs; replaces "
               "recompute_config's choices"),
      cl::value_desc("SIZE"), cl::cat(category));
  cl::opt<BudgetSearch> memoryBudgetSearch(
      "memory-budget-search",
      cl::desc("How --memory-budget searches per-layer choices (none, "
               "selective, full)"),
      cl::values(clEnumValN(BudgetSearch::Prefix, "prefix",
                            "the first layers whole, the next selective "
                            "(default)"),
                 clEnumValN(BudgetSearch::Exhaustive, "exhaustive",
                            "every assignment: 3^num_layers plans, the true "
                            "optimum (at most 8 layers)")),
      cl::init(BudgetSearch::Prefix), cl::cat(category));
  cl::opt<bool> calibrationModel(
      "calibration-model",
      cl::desc("Compile a quantization_config with calibrated activations "
               "(smooth_quant) as its float model, which mf-run --task "
               "calibrate runs to measure the activation ranges"),
      cl::init(false), cl::cat(category));
  cl::opt<std::string>
      dumpIrDir("dump-ir-dir",
                cl::desc("Write the IR after every phase to DIR/NN-<phase>.mlir"),
                cl::value_desc("DIR"), cl::cat(category));

  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  showOnlyOwnOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "mfc compile: MindFormers YAML (or the IR of any phase) -> mf graph "
      "-> executable\n");

  if (!compileTo.empty() && !findPhase(compileTo)) {
    printError("unknown phase '" + compileTo +
               "' for --compile-to; phases are: " + phaseList());
    return 2;
  }

  // One timing report (--mlir-timing) covers the frontend and every pass.
  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope rootTimer = timing.getRootScope();

  mlir::DialectRegistry registry;
  // The LLVM dialect too: IR after codegen holds the kernels in a nested
  // LLVM-dialect module.
  registry.insert<mlir::mf::MFDialect, mlir::mfexec::MFExecDialect,
                  mlir::func::FuncDialect, mlir::LLVM::LLVMDialect,
                  mlir::shard::ShardDialect>();
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnosticHandler(sourceMgr, &context);

  std::optional<InputKind> kind = inputKindOf(inputFile);
  if (!kind) {
    return 1;
  }
  // The spec of a YAML input; IR carries its config's decisions itself.
  std::optional<ModelSpec> spec;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  llvm::StringRef firstPhase; // "": the first
  bool phasesLeft = true;     // false: IR already at the asked-for phase
  if (*kind == InputKind::Mlir) {
    for (auto [used, flag] :
         {std::pair{overrides.getNumOccurrences() > 0, "--set"},
          {prefillLengths.getNumOccurrences() > 0, "--prefill-lengths"},
          {calibrationModel.getNumOccurrences() > 0, "--calibration-model"},
          {memoryBudget.getNumOccurrences() > 0, "--memory-budget"}}) {
      if (used) {
        printError(llvm::Twine(flag) + " is read with the YAML config, but '" +
                   inputFile +
                   "' is IR, whose config decisions are its module "
                   "attributes (mf.quantize_weights, mf.recompute, ...); "
                   "give it to the compile that built the IR");
        return 2;
      }
    }
    mlir::TimingScope parseTimer = rootTimer.nest("Parse (MLIR)");
    module = readModule(inputFile, context, sourceMgr);
    if (!module) {
      printError("'" + inputFile + "': nothing compiled");
      return 1;
    }
    std::optional<std::string> resumeAfter =
        resumePoint(*module, compileFrom, compileTo, inputFile);
    if (!resumeAfter) {
      return 2;
    }
    firstPhase = *resumeAfter == "frontend"
                     ? llvm::StringRef(compilerPhases().front().name)
                     : phaseAfter(*resumeAfter);
    phasesLeft = !firstPhase.empty() && compileTo != *resumeAfter;
  } else {
    if (compileFrom.getNumOccurrences()) {
      printError("--compile-from is for IR input; '" + inputFile +
                 "' is a YAML config, compiled from the frontend");
      return 2;
    }
    mlir::TimingScope frontendTimer = rootTimer.nest("Frontend (YAML -> mf)");
    ConfigDiagnostics configDiagnostics(llvm::errs());
    spec = loadModelSpec(configDiagnostics, inputFile, overrides);
    if (!spec) {
      printError(llvm::Twine(configDiagnostics.errorCount()) + " error" +
                 (configDiagnostics.errorCount() == 1 ? "" : "s") + " in '" +
                 inputFile + "'; nothing compiled");
      return 1;
    }
    if (!spec->ignoredSections.empty()) {
      std::string list;
      for (const std::string &key : spec->ignoredSections) {
        list += (list.empty() ? "" : ", ") + key;
      }
      llvm::WithColor::note(llvm::errs(), "mfc")
          << "ignored (used only by MindSpore's trainer): " << list << "\n";
    }
    FrontendOptions frontendOptions;
    if (prefillLengths.getNumOccurrences()) {
      std::optional<std::vector<int64_t>> lengths =
          parsePrefillLengths(prefillLengths, spec->model.seqLength);
      if (!lengths) {
        return 2;
      }
      if (spec->runMode != RunMode::Predict || !spec->model.usePast) {
        llvm::WithColor::note(llvm::errs(), "mfc")
            << "--prefill-lengths is for predict with use_past: True; "
               "ignored\n";
      }
      frontendOptions.prefillLengths = std::move(lengths);
    }
    const QuantizationConfig &quantization = spec->model.quantization;
    if (calibrationModel &&
        quantization.activationGranularity != "per_tensor" &&
        quantization.kvcacheDtype != "int8") {
      printError("--calibration-model: this config has nothing calibrated "
                 "(quantization_config with activation_dtype 'int8' and "
                 "act_quant_granularity 'per_tensor', as smooth_quant has, or "
                 "kvcache_dtype 'int8'); its weights are quantized at load "
                 "without calibration");
      return 1;
    }
    frontendOptions.calibrationModel = calibrationModel;
    module = buildModelModule(context, *spec, frontendOptions);
    if (!module) {
      printError("'" + inputFile + "': nothing compiled");
      return 1;
    }
    if (failed(mlir::verify(*module))) {
      printError("internal error: the frontend built invalid mf IR for '" +
                 inputFile + "'; please report it with the config");
      return 3;
    }
  }

  CompileOptions options;
  options.compileTo = compileTo;
  options.dumpIrDir = dumpIrDir;
  options.memoryPlanCsv = memoryPlanCsv;
  options.memoryPlanSvg = memoryPlanSvg;
  options.cpu = cpu;
  options.kernelsObject = kernelsObject;
  options.packWeights = packWeights;
  bool training = mlir::mf::isTrainingModule(*module);
  std::optional<int64_t> budgetBytes;
  if (memoryBudget.getNumOccurrences()) {
    budgetBytes = parseByteSize(memoryBudget);
    if (!budgetBytes || *budgetBytes <= 0) {
      printError("--memory-budget: '" + memoryBudget +
                 "' is not a size; write e.g. 40MB, 512MiB or 12GiB");
      return 2;
    }
    if (!training) {
      printError("--memory-budget chooses what a training step recomputes, "
                 "but run_mode is " + llvm::Twine(toString(spec->runMode)) +
                 "; use it with run_mode train or finetune");
      return 2;
    }
    if (memoryBudgetSearch == BudgetSearch::Exhaustive &&
        spec->model.numLayers > 8) {
      printError("--memory-budget-search=exhaustive compiles 3^num_layers "
                 "plans; at most 8 layers (num_layers is " +
                 llvm::Twine(spec->model.numLayers) + ")");
      return 2;
    }
  }
  RecomputePlan recompute;
  if (spec && training) {
    recompute = planRecompute(*spec);
  }
  bool recomputes = !recompute.fullLayers.empty() || !recompute.selectedOps.empty();
  if (budgetBytes && recomputes) {
    llvm::WithColor::warning(llvm::errs(), "mfc")
        << "--memory-budget replaces what recompute_config's recompute and "
           "select_recompute choose (its exclusions still hold)\n";
  }
  if (spec && !dumpIrDir.empty() &&
      failed(dumpModule(*module, dumpIrDir, 0, "frontend"))) {
    return 1;
  }
  auto runPhases = [&](llvm::StringRef fromPhase,
                       const CompileOptions &phaseOptions) {
    mlir::PassManager pm(&context);
    if (failed(mlir::applyPassManagerCLOptions(pm))) {
      return false;
    }
    pm.enableTiming(rootTimer);
    buildCompilePipeline(pm, *module, phaseOptions, fromPhase);
    if (failed(pm.run(*module))) {
      printError("compilation of '" + inputFile + "' failed");
      return false;
    }
    return true;
  };
  // The budget search, and the report's peak without recompute, compile
  // copies of the module after autodiff with other recompute plans.
  std::optional<RecomputeSummary> summary;
  // A pipelined step is its stages' entries: the search (of train_step)
  // is not built for them; the report gives each stage's plan instead.
  bool pipelined = spec && spec->shardedPipelineStages > 1;
  if (pipelined && budgetBytes) {
    printError("--memory-budget: the recompute search is not built for "
               "pipelined programs yet (parallel_config.pipeline_stage " +
               std::to_string(spec->shardedPipelineStages) +
               "); give recompute_config instead");
    return 1;
  }
  // The search plans with the config's recompute choices per layer: YAML
  // input only (IR records the resulting patterns, not the choices).
  bool searches = spec && training && !pipelined &&
                  runsPhase(options, "recompute") &&
                  (budgetBytes || (recomputes && !reportFile.empty()));
  CompileOptions throughRecompute;
  throughRecompute.compileTo = "recompute";
  bool recomputesHere = phasesLeft && runsPhase(options, "recompute") &&
                        runsPhase(throughRecompute, firstPhase);
  if (!spec && training && recomputesHere && !reportFile.empty() &&
      (*module)->hasAttr(mlir::mf::kRecomputeAttrName)) {
    llvm::WithColor::note(llvm::errs(), "mfc")
        << "--report: the step's peak without recompute is compared only "
           "when compiling from the YAML (the IR records what to recompute, "
           "not the config's per-layer choices)\n";
  }
  if (!searches) {
    if (phasesLeft && !runPhases(firstPhase, options)) {
      return 1;
    }
  } else {
    CompileOptions throughAutodiff = options;
    throughAutodiff.compileTo = "autodiff";
    if (!runPhases("", throughAutodiff)) {
      return 1;
    }
    mlir::TimingScope searchTimer =
        rootTimer.nest("Recompute plans (--memory-budget, --report)");
    summary = planRecomputeSearch(*module, *spec, options, recompute,
                                  budgetBytes, memoryBudgetSearch, inputFile);
    if (!summary) {
      return 1;
    }
    searchTimer.stop();
    if (!runPhases("recompute", options)) {
      return 1;
    }
    // The whole module's plan is the truth; the search planned train_step
    // alone, which must come out the same.
    if (std::optional<TrainStepCost> compiled = trainStepCost(*module)) {
      if (compiled->peakBytes != summary->peakWith) {
        llvm::WithColor::warning(llvm::errs(), "mfc")
            << llvm::formatv("the recompute search planned a step peak of "
                             "{0} bytes, the compiled module has {1}; please "
                             "report it with the config\n",
                             summary->peakWith, compiled->peakBytes);
      }
      summary->peakWith = compiled->peakBytes;
    }
  }

  reportMemoryPlan(*module);
  if (!reportFile.empty()) {
    bool json = llvm::StringRef(reportFile).ends_with(".json");
    const RecomputeSummary *recomputeSummary = summary ? &*summary : nullptr;
    if (writeFile(reportFile, [&](llvm::raw_ostream &os) {
          json ? writeCompileReportJson(*module, os, recomputeSummary)
               : writeCompileReportText(*module, os, recomputeSummary);
        })) {
      return 1;
    }
  }
  if (compileTo.empty()) {
    return writeExecutableFile(*module, inputFile, outputFile);
  }

  return writeFile(outputFile, [&](llvm::raw_ostream &os) {
    module->print(os);
    os << "\n";
  });
}

/// `mfc plan-memory in.csv [-o plan.csv] [--time-limit S]`: plans a
/// MiniMalloc-format problem and reports arena, lower bound, ratio and time.
int planMemoryCommand(int argc, char **argv) {
  cl::OptionCategory category("mfc plan-memory options");
  cl::opt<std::string> csvFile(cl::Positional, cl::desc("<problem.csv>"),
                               cl::Required, cl::cat(category));
  cl::opt<std::string> planFile("o", cl::desc("Write the plan (CSV with offsets)"),
                                cl::value_desc("file"), cl::cat(category));
  cl::opt<double> timeLimit("time-limit",
                            cl::desc("Seconds for the improvement search"),
                            cl::init(1.0), cl::cat(category));
  cl::opt<int64_t> alignment("alignment", cl::desc("Offset alignment in bytes"),
                             cl::init(1), cl::cat(category));
  showOnlyOwnOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "mfc plan-memory: static memory planning of a "
                              "MiniMalloc CSV problem (id,lower,upper,size)\n");
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      readInputFile(csvFile, "memory plan problem", kMaxPlanCsvBytes, error);
  if (!buffer) {
    printError(error);
    return 1;
  }
  std::vector<PlannedBuffer> buffers;
  error = readMemoryPlanCsv(buffer->getBuffer().str(), buffers);
  if (!error.empty()) {
    printError(csvFile + ":" + error);
    return 1;
  }
  if (!(timeLimit >= 0)) {
    printError(llvm::formatv("--time-limit: {0} is not a number of seconds; "
                             "give 0 (no improvement search) or more",
                             static_cast<double>(timeLimit)));
    return 2;
  }
  MemoryPlanOptions options;
  options.timeLimitSeconds = timeLimit;
  options.alignment = alignment;
  MemoryPlanResult result = planMemory(buffers, options);
  if (!isValidPlan(buffers)) {
    printError("internal error: the plan overlaps live buffers");
    return 3;
  }
  llvm::outs() << llvm::format(
      "buffers %zu  arena %lld  lower bound %lld  ratio %.4f  time %.3f s  "
      "(%s, %lld candidates)\n",
      buffers.size(), static_cast<long long>(result.arenaBytes),
      static_cast<long long>(result.lowerBound), result.ratio(), result.seconds,
      result.strategy.c_str(), static_cast<long long>(result.candidatesTried));
  if (planFile.empty()) {
    return 0;
  }
  return writeFile(planFile, [&](llvm::raw_ostream &os) {
    os << writeMemoryPlanCsv(buffers, /*withOffsets=*/true);
  });
}

/// The candidate as a JSON object (sizes in bytes, times in seconds).
llvm::json::Object candidateJson(const ParallelCandidate &candidate) {
  auto prediction = [](const ParallelCandidate::Prediction &step) {
    llvm::json::Array stages;
    for (int64_t bytes : step.stagePeakBytes) {
      stages.push_back(bytes);
    }
    return llvm::json::Object{{"step_seconds", step.stepSeconds},
                              {"waiting_fraction", step.idleFraction},
                              {"peak_bytes", step.peakBytes()},
                              {"stage_peak_bytes", std::move(stages)}};
  };
  llvm::json::Array settings;
  for (const std::string &setting : candidate.settings) {
    settings.push_back(setting);
  }
  llvm::json::Object object{{"data_parallel", candidate.dataParallel},
                            {"model_parallel", candidate.modelParallel},
                            {"pipeline_stage", candidate.pipelineStages},
                            {"context_parallel", candidate.contextParallel},
                            {"pipeline_scheduler", candidate.scheduler},
                            {"pp_interleave_num", candidate.chunks},
                            {"batch_size", candidate.batchSize},
                            {"micro_batches", candidate.microBatches},
                            {"recompute", candidate.recomputeText()},
                            {"fits", candidate.fits},
                            {"predicted", prediction(candidate.predicted)},
                            {"settings", std::move(settings)}};
  if (candidate.compiled) {
    object["compiled"] = prediction(*candidate.compiled);
  }
  return object;
}

/// The --set arguments that make the config `candidate`.
std::string candidateSettings(const ParallelCandidate &candidate) {
  std::string text;
  for (const std::string &setting : candidate.settings) {
    text += " --set " + setting;
  }
  if (!candidate.fullLayers.empty()) {
    std::string keys = candidate.recomputeText();
    // "recompute: X, select_recompute: Y" -> two --set arguments.
    llvm::StringRef rest(keys);
    while (!rest.empty()) {
      auto [item, tail] = rest.split(", ");
      auto [key, value] = item.split(": ");
      text += " --set 'recompute_config." + key.str() + "=" + value.str() + "'";
      rest = tail;
    }
  }
  return text;
}

void writeParallelPlanText(const ParallelSearchOptions &options,
                           const ParallelSearchResult &result, size_t top,
                           llvm::raw_ostream &os) {
  const CostModel &machine = options.machine;
  os << llvm::formatv("plan-parallel: '{0}' on {1} ranks of {2:F3} GB; a "
                      "step of {3} sequences of {4} tokens\n",
                      options.configFile, options.ranks,
                      options.memoryPerRank / 1e9, result.globalBatch,
                      result.seqLength);
  os << llvm::formatv(
      "machine (assumed: --rank-tflops, --intra-node-gbps, --inter-node-gbps, "
      "--ranks-per-node, --latency-us): {0:F1} TFLOP/s a rank, {1:F1} GB/s "
      "within a node of {2} ranks, {3:F1} GB/s between nodes, {4:F1} us a "
      "collective\n",
      machine.rankFlops / 1e12, machine.intraNodeBandwidth / 1e9,
      machine.ranksPerNode, machine.interNodeBandwidth / 1e9,
      machine.latency * 1e6);
  int refused = 0;
  for (const auto &[why, count] : result.refused) {
    refused += count;
  }
  size_t fitting = 0;
  for (const ParallelCandidate &candidate : result.candidates) {
    fitting += candidate.fits ? 1 : 0;
  }
  os << llvm::formatv("searched {0} layouts in {1:F1} s: {2} compiled as "
                      "probes ({3} probe compilations), {4} fit, {5} "
                      "refused\n\n",
                      result.candidates.size() + refused, result.seconds,
                      result.candidates.size(), result.probesCompiled, fitting,
                      refused);
  // Sizes in the budget's unit, times in one unit for the whole table.
  double byteUnit = options.memoryPerRank >= 1e9 ? 1e9 : 1e6;
  llvm::StringRef byteName = byteUnit == 1e9 ? "GB" : "MB";
  double slowest = 0;
  for (const ParallelCandidate &candidate : result.candidates) {
    slowest = std::max(slowest, candidate.predicted.stepSeconds);
  }
  double timeUnit = slowest >= 1 ? 1 : 1e-3;
  llvm::StringRef timeName = timeUnit == 1 ? "s" : "ms";
  auto row = [&](llvm::StringRef label, const ParallelCandidate &candidate) {
    const ParallelCandidate::Prediction &step =
        candidate.compiled ? *candidate.compiled : candidate.predicted;
    std::string micro =
        llvm::formatv("{0} x {1}", candidate.batchSize, candidate.microBatches);
    std::string predictedPeak =
        candidate.compiled
            ? llvm::formatv("{0:F2}",
                            candidate.predicted.peakBytes() / byteUnit)
                  .str()
            : "-";
    os << llvm::formatv("{0,4}  {1,-18} {2,-14} {3,-10} {4,9:F3} {5,7:F1}% "
                        "{6,9:F2} {7,9}  {8}{9}\n",
                        label, candidate.layoutText(), candidate.scheduleText(),
                        micro, step.stepSeconds / timeUnit,
                        100 * step.idleFraction, step.peakBytes() / byteUnit,
                        predictedPeak, candidate.recomputeText(),
                        candidate.fits ? "" : " (does not fit)");
  };
  os << llvm::formatv("{0,4}  {1,-18} {2,-14} {3,-10} {4,9} {5,8} {6,9} {7,9}  "
                      "{8}\n",
                      "#", "layout", "schedule", "micro",
                      "step (" + timeName + ")", "waiting", "peak " + byteName,
                      "predicted", "recompute");
  for (size_t i = 0; i < result.candidates.size() && i < top; ++i) {
    row(std::to_string(i + 1), result.candidates[i]);
  }
  os << "(micro: sequences a rank's micro-batch holds x micro-batches a "
        "step; peak: the most a rank of any stage plans, compiled at full "
        "size where 'predicted' shows the probes' prediction; waiting: the "
        "stages' idle share of the step)\n";
  if (result.asConfigured) {
    os << "\nas written:\n";
    row("", *result.asConfigured);
    if (!result.candidates.empty() && result.candidates[0].fits &&
        result.asConfigured->predicted.stepSeconds > 0) {
      const ParallelCandidate &best = result.candidates[0];
      double bestSeconds =
          (best.compiled ? *best.compiled : best.predicted).stepSeconds;
      os << llvm::formatv("#1 predicts {0:F2}x the steps a second of the "
                          "config as written\n",
                          result.asConfigured->predicted.stepSeconds /
                              bestSeconds);
    }
  }
  if (!result.candidates.empty() && result.candidates[0].fits) {
    os << "\n#1: mfc compile " << options.configFile;
    // The user's overrides but those the candidate sets again.
    for (const std::string &setting : options.overrides) {
      llvm::StringRef key = llvm::StringRef(setting).split('=').first;
      if (llvm::none_of(result.candidates[0].settings,
                        [&](llvm::StringRef own) {
                          return own.split('=').first == key;
                        })) {
        os << " --set " << setting;
      }
    }
    os << candidateSettings(result.candidates[0]) << " -o model.bin\n";
  } else {
    os << llvm::formatv("\nno layout fits {0:F3} GB a rank; the smallest "
                        "peaks are listed first\n",
                        options.memoryPerRank / 1e9);
  }
  if (!result.refused.empty()) {
    os << "\nrefused, by reason:\n";
    for (const auto &[why, count] : result.refused) {
      os << llvm::formatv("{0,6}  {1}\n", count, why);
    }
  }
}

void writeParallelPlanJson(const ParallelSearchOptions &options,
                           const ParallelSearchResult &result,
                           llvm::raw_ostream &os) {
  llvm::json::Array candidates, refused;
  for (const ParallelCandidate &candidate : result.candidates) {
    candidates.push_back(candidateJson(candidate));
  }
  for (const auto &[why, count] : result.refused) {
    refused.push_back(llvm::json::Object{{"reason", why}, {"layouts", count}});
  }
  const CostModel &machine = options.machine;
  llvm::json::Object object{
      {"config", options.configFile},
      {"ranks", options.ranks},
      {"memory_per_rank_bytes", options.memoryPerRank},
      {"global_batch", result.globalBatch},
      {"seq_length", result.seqLength},
      {"machine",
       llvm::json::Object{
           {"rank_flops", machine.rankFlops},
           {"intra_node_bytes_per_second", machine.intraNodeBandwidth},
           {"inter_node_bytes_per_second", machine.interNodeBandwidth},
           {"ranks_per_node", machine.ranksPerNode},
           {"latency_seconds", machine.latency}}},
      {"probes_compiled", result.probesCompiled},
      {"seconds", result.seconds},
      {"candidates", std::move(candidates)},
      {"refused", std::move(refused)}};
  if (result.asConfigured) {
    object["as_written"] = candidateJson(*result.asConfigured);
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(object))) << "\n";
}

/// `mfc plan-parallel CONFIG --ranks N --memory-per-rank SIZE`.
int planParallelCommand(int argc, char **argv) {
  cl::OptionCategory category("mfc plan-parallel options");
  cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.yaml>"),
                                 cl::Required, cl::cat(category));
  cl::list<std::string> overrides(
      "set", cl::desc("Override a config key before the search (repeatable)"),
      cl::value_desc("key.path=value"), cl::cat(category));
  cl::opt<int64_t> ranks("ranks", cl::desc("The ranks to train on"),
                         cl::Required, cl::cat(category));
  cl::opt<std::string> memory(
      "memory-per-rank", cl::desc("What each rank may plan, e.g. 64GiB, 32GB"),
      cl::value_desc("SIZE"), cl::Required, cl::cat(category));
  cl::opt<double> rankTflops(
      "rank-tflops", cl::desc("Achieved TFLOP/s of one rank (default 150)"),
      cl::init(150), cl::cat(category));
  cl::opt<double> intraGbps(
      "intra-node-gbps",
      cl::desc("GB/s a rank sends to a rank in its node (default 50)"),
      cl::init(50), cl::cat(category));
  cl::opt<double> interGbps(
      "inter-node-gbps",
      cl::desc("GB/s a rank sends to another node (default 25)"), cl::init(25),
      cl::cat(category));
  cl::opt<int64_t> ranksPerNode("ranks-per-node",
                                cl::desc("Ranks in one node (default 8)"),
                                cl::init(8), cl::cat(category));
  cl::opt<double> latencyUs(
      "latency-us",
      cl::desc("Microseconds a collective or message starts in "
               "(default 10)"),
      cl::init(10), cl::cat(category));
  cl::list<int64_t> microBatchSizes(
      "micro-batch-sizes",
      cl::desc("Per-rank micro-batch sizes to try, e.g. 1,2,4 (default: the "
               "config's batch_size)"),
      cl::CommaSeparated, cl::cat(category));
  cl::opt<unsigned> top("top", cl::desc("Candidates to print (default 8)"),
                        cl::init(8), cl::cat(category));
  cl::opt<unsigned> confirm(
      "confirm",
      cl::desc("The best candidates compiled at full size (default 3)"),
      cl::init(3), cl::cat(category));
  cl::opt<std::string> reportFile(
      "report",
      cl::desc("Write the whole search: JSON if FILE ends in .json, else "
               "text ('-': stdout, the default)"),
      cl::value_desc("FILE"), cl::init("-"), cl::cat(category));
  cl::opt<bool> verbose("v", cl::desc("Print each candidate as it is probed"),
                        cl::cat(category));
  showOnlyOwnOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "mfc plan-parallel: the fastest data/model/pipeline/context parallel "
      "layout, schedule, micro-batch size and recompute that fit the "
      "ranks' memory, from the compiler's own memory plans\n");

  ParallelSearchOptions options;
  options.configFile = inputFile;
  options.overrides.assign(overrides.begin(), overrides.end());
  std::optional<int64_t> bytes = parseByteSize(memory);
  if (!bytes || *bytes <= 0) {
    printError("--memory-per-rank: '" + memory +
               "' is not a size; write e.g. 64GiB or 32GB");
    return 2;
  }
  if (ranks < 1 || ranks > 65536) {
    printError("--ranks: " + llvm::Twine(ranks.getValue()) +
               " is not a rank count in 1..65536");
    return 2;
  }
  if (!(rankTflops > 0) || !(intraGbps > 0) || !(interGbps > 0) ||
      ranksPerNode < 1 || !(latencyUs >= 0)) {
    printError("--rank-tflops, --intra-node-gbps and --inter-node-gbps must "
               "be above 0, --ranks-per-node at least 1, --latency-us at "
               "least 0");
    return 2;
  }
  options.ranks = ranks;
  options.memoryPerRank = *bytes;
  options.machine.rankFlops = rankTflops * 1e12;
  options.machine.intraNodeBandwidth = intraGbps * 1e9;
  options.machine.interNodeBandwidth = interGbps * 1e9;
  options.machine.ranksPerNode = ranksPerNode;
  options.machine.latency = latencyUs * 1e-6;
  if (!microBatchSizes.empty()) {
    options.microBatchSizes.assign(microBatchSizes.begin(),
                                   microBatchSizes.end());
    for (int64_t size : options.microBatchSizes) {
      if (size < 1) {
        printError("--micro-batch-sizes: " + llvm::Twine(size) +
                   " is not a size of at least 1");
        return 2;
      }
    }
  }
  options.confirm = static_cast<int>(confirm);
  if (verbose) {
    options.log = &llvm::errs();
  }
  std::string error;
  std::optional<ParallelSearchResult> result =
      searchParallelPlans(options, error);
  if (!result) {
    printError(error);
    return 1;
  }
  bool json = llvm::StringRef(reportFile).ends_with(".json");
  return writeFile(reportFile, [&](llvm::raw_ostream &os) {
    json ? writeParallelPlanJson(options, *result, os)
         : writeParallelPlanText(options, *result, top, os);
  });
}

void printUsage() {
  llvm::outs() << "OVERVIEW: mfc - ahead-of-time compiler for MindFormers "
                  "model configs\n\n"
                  "USAGE: mfc compile <model.yaml | phase.mlir | -> [options]\n"
                  "       mfc plan-memory <problem.csv> [options]\n"
                  "       mfc plan-parallel <model.yaml> --ranks N "
                  "--memory-per-rank SIZE [options]\n\n"
                  "Run 'mfc <command> --help' for the options.\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "-h")) {
    printUsage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "compile")) {
    // Parse the rest as the options of `compile`; argv[0] names the command.
    std::string name = std::string(argv[0]) + " compile";
    argv[1] = name.data();
    return compile(argc - 1, argv + 1);
  }
  if (!std::strcmp(argv[1], "plan-memory")) {
    std::string name = std::string(argv[0]) + " plan-memory";
    argv[1] = name.data();
    return planMemoryCommand(argc - 1, argv + 1);
  }
  if (!std::strcmp(argv[1], "plan-parallel")) {
    std::string name = std::string(argv[0]) + " plan-parallel";
    argv[1] = name.data();
    return planParallelCommand(argc - 1, argv + 1);
  }
  printError("unknown command '" + llvm::Twine(argv[1]) +
             "'; expected 'compile', 'plan-memory' or 'plan-parallel' (see "
             "'mfc --help')");
  return 2;
}
