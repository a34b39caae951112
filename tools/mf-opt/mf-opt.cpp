//===- mf-opt.cpp - run mf passes by hand ---------------------------------===//
//
// mlir-opt with mfc's dialects, passes and phase pipelines registered.
//
// Input nested too deeply is refused (compiler/Transforms/MlirInput.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/InputFile.h"
#include "compiler/Transforms/MlirInput.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFDialect.h"
#include "dialects/MF/Transforms/Passes.h"
#include "dialects/MFExec/IR/MFExecDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/thread.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  // The LLVM dialect too: after codegen the graph holds its kernels in a
  // nested LLVM-dialect module.
  registry.insert<mlir::mf::MFDialect, mlir::mfexec::MFExecDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect, mlir::shard::ShardDialect>();
  mlir::registerTransformsPasses();
  mlir::mf::registerMFPasses();
  mfc::registerMFCPasses();
  mfc::registerPhasePipelines();
  auto [inputFile, outputFile] =
      mlir::registerAndParseCLIOptions(argc, argv, "mfc pass driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();

  // A file (not /dev/zero, not a directory) of a bounded size, or stdin.
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      inputFile == "-" ? mlir::openInputFile(inputFile, &error)
                       : mfc::readInputFile(inputFile, "input",
                                            mfc::kMaxMlirInputBytes, error);
  if (!input) {
    llvm::WithColor::error(llvm::errs(), "mf-opt") << error << "\n";
    return 1;
  }
  if (const char *at = mfc::tooDeeplyNested(input->getBuffer())) {
    llvm::SourceMgr sources;
    sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    sources.PrintMessage(
        llvm::SMLoc::getFromPointer(at), llvm::SourceMgr::DK_Error,
        "nested more than " + llvm::Twine(mfc::kMaxMlirNesting) +
            " levels deep; mf-opt reads at most that");
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::WithColor::error(llvm::errs(), "mf-opt") << error << "\n";
    return 1;
  }
  mlir::LogicalResult result = mlir::failure();
  llvm::thread parser(std::optional<unsigned>(mfc::kMlirParserStackBytes), [&] {
    result = mlir::MlirOptMain(output->os(), std::move(input), registry, config);
  });
  parser.join();
  if (mlir::failed(result)) {
    return 1;
  }
  output->keep();
  return 0;
}
