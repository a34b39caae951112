//===- mfc.cpp - the mfc compiler driver ----------------------------------===//
//
//   mfc compile model.yaml -o model.bin [--set key.path=value]...
//       [--compile-to=<phase>] [--dump-ir-dir=DIR] [--mlir-timing] ...
//
//===----------------------------------------------------------------------===//

#include "compiler/Frontend/ModelBuilder.h"
#include "compiler/Frontend/ModelSpecReader.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Serialize/ExecutableWriter.h"
#include "dialects/MF/IR/MFDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace cl = llvm::cl;
using namespace mfc;

namespace {

cl::OptionCategory category("mfc compile options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.yaml>"),
                               cl::Required, cl::cat(category));
cl::opt<std::string> outputFile("o",
                                cl::desc("Output: the executable, or the IR "
                                         "with --compile-to ('-': stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(category));
cl::opt<std::string>
    compileTo("compile-to",
              cl::desc("Stop after this phase and print its IR (phases: mf)"),
              cl::value_desc("phase"), cl::cat(category));
cl::list<std::string>
    overrides("set",
              cl::desc("Override a config key, e.g. "
                       "--set model.model_config.num_layers=2 (repeatable)"),
              cl::value_desc("key.path=value"), cl::cat(category));
cl::opt<std::string>
    dumpIrDir("dump-ir-dir",
              cl::desc("Write the IR after every phase to DIR/NN-<phase>.mlir"),
              cl::value_desc("DIR"), cl::cat(category));

void printError(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "mfc") << message << "\n";
}

std::string phaseList() {
  std::string list;
  for (const Phase &phase : compilerPhases()) {
    list += (list.empty() ? "" : ", ") + phase.name.str();
  }
  return list;
}

int writeExecutableFile(mlir::ModuleOp module, const ModelSpec &spec) {
  if (outputFile == "-") {
    printError("an executable is binary: give it a file with -o model.bin "
               "(or print IR with --compile-to=" + phaseList() + ")");
    return 2;
  }
  mlir::FailureOr<std::vector<uint8_t>> bytes = writeExecutable(module, spec);
  if (failed(bytes)) {
    printError("cannot serialize '" + inputFile + "'");
    return 1;
  }
  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &errorMessage);
  if (!output) {
    printError(errorMessage);
    return 1;
  }
  output->os().write(reinterpret_cast<const char *>(bytes->data()),
                     bytes->size());
  output->keep();
  return 0;
}

int compile(int argc, char **argv) {
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "mfc compile: MindFormers YAML -> mf graph -> executable\n");

  if (!compileTo.empty() && !findPhase(compileTo)) {
    printError("unknown phase '" + compileTo +
               "' for --compile-to; phases are: " + phaseList());
    return 2;
  }

  // One timing report (--mlir-timing) covers the frontend and every pass.
  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope rootTimer = timing.getRootScope();
  mlir::TimingScope frontendTimer = rootTimer.nest("Frontend (YAML -> mf)");

  ConfigDiagnostics configDiagnostics(llvm::errs());
  std::optional<ModelSpec> spec =
      loadModelSpec(configDiagnostics, inputFile, overrides);
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

  mlir::DialectRegistry registry;
  registry.insert<mlir::mf::MFDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnosticHandler(sourceMgr, &context);

  mlir::OwningOpRef<mlir::ModuleOp> module = buildModelModule(context, *spec);
  if (failed(mlir::verify(*module))) {
    printError("internal error: the frontend built invalid mf IR for '" +
               inputFile + "'; please report it with the config");
    return 3;
  }

  frontendTimer.stop();

  CompileOptions options{compileTo, dumpIrDir};
  if (!dumpIrDir.empty() &&
      failed(dumpModule(*module, dumpIrDir, 0, "frontend"))) {
    return 1;
  }
  mlir::PassManager pm(&context);
  if (failed(mlir::applyPassManagerCLOptions(pm))) {
    return 1;
  }
  pm.enableTiming(rootTimer);
  buildCompilePipeline(pm, options);
  if (failed(pm.run(*module))) {
    printError("compilation of '" + inputFile + "' failed");
    return 1;
  }

  if (compileTo.empty()) {
    return writeExecutableFile(*module, *spec);
  }

  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &errorMessage);
  if (!output) {
    printError(errorMessage);
    return 1;
  }
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

void printUsage() {
  llvm::outs() << "OVERVIEW: mfc - ahead-of-time compiler for MindFormers "
                  "model configs\n\n"
                  "USAGE: mfc compile <model.yaml> [options]\n\n"
                  "Run 'mfc compile --help' for the options.\n";
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
  printError("unknown command '" + llvm::Twine(argv[1]) +
             "'; expected 'compile' (see 'mfc --help')");
  return 2;
}
