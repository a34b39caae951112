//===- mf-opt.cpp - run mf passes by hand ---------------------------------===//
//
// mlir-opt with mfc's dialects, passes and phase pipelines registered.
//
// MLIR's parser recurses once per nested region, list or paren: a hostile or
// generated file nested a hundred thousand deep would overflow the stack.
// mf-opt refuses input nested deeper than kMaxNesting with a diagnostic at
// the bracket that goes too deep, and parses on a thread whose stack holds
// that depth many times over.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/InputFile.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFDialect.h"
#include "dialects/MFExec/IR/MFExecDialect.h"
#include "dialects/MF/Transforms/Passes.h"

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

namespace {

constexpr unsigned kMaxNesting = 2048;
constexpr uint64_t kMaxInputBytes = 1ull << 30;
/// Measured: MLIR's parser takes ~3 KB of stack per level of nested ops.
constexpr unsigned kParserStackBytes = 256u << 20;

/// The first bracket ('{', '(' or '[', outside strings and comments) nested
/// deeper than kMaxNesting, or null.
const char *tooDeep(llvm::StringRef text) {
  unsigned depth = 0;
  for (const char *at = text.begin(); at < text.end(); ++at) {
    switch (*at) {
    case '"': // a string: to its closing quote, past escapes
      for (++at; at < text.end() && *at != '"'; ++at) {
        at += *at == '\\';
      }
      break;
    case '/':
      if (at + 1 < text.end() && at[1] == '/') {
        while (at < text.end() && *at != '\n') {
          ++at;
        }
      }
      break;
    case '{':
    case '(':
    case '[':
      if (++depth > kMaxNesting) {
        return at;
      }
      break;
    case '}':
    case ')':
    case ']':
      depth -= depth > 0;
      break;
    default:
      break;
    }
  }
  return nullptr;
}

} // namespace

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
                       : mfc::readInputFile(inputFile, "input", kMaxInputBytes, error);
  if (!input) {
    llvm::WithColor::error(llvm::errs(), "mf-opt") << error << "\n";
    return 1;
  }
  if (const char *at = tooDeep(input->getBuffer())) {
    llvm::SourceMgr sources;
    sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    sources.PrintMessage(llvm::SMLoc::getFromPointer(at), llvm::SourceMgr::DK_Error,
                         "nested more than " + llvm::Twine(kMaxNesting) +
                             " levels deep; mf-opt reads at most that");
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::WithColor::error(llvm::errs(), "mf-opt") << error << "\n";
    return 1;
  }
  mlir::LogicalResult result = mlir::failure();
  llvm::thread parser(std::optional<unsigned>(kParserStackBytes), [&] {
    result = mlir::MlirOptMain(output->os(), std::move(input), registry, config);
  });
  parser.join();
  if (mlir::failed(result)) {
    return 1;
  }
  output->keep();
  return 0;
}
