//===- OutputFile.h - files that mfc writes ---------------------*- C++ -*-===//

#ifndef MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H
#define MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/ToolOutputFile.h"

#include <string>

namespace mfc {

/// Lets `write` fill `path` ('-': stdout); the file is kept only if it could
/// be opened. Returns "" on success, else why not (naming the file).
inline std::string
writeOutputFile(llvm::StringRef path,
                llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(path, &error);
  if (!output) {
    return "cannot write '" + path.str() + "': " + error;
  }
  write(output->os());
  output->keep();
  return "";
}

/// The same, as a pass reports it: an error at `anchor` naming the file.
inline llvm::LogicalResult
writeOutputFile(mlir::Operation *anchor, llvm::StringRef path,
                llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error = writeOutputFile(path, write);
  if (!error.empty()) {
    return anchor->emitError() << error;
  }
  return llvm::success();
}

} // namespace mfc

#endif // MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H
