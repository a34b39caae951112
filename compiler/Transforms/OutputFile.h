//===- OutputFile.h - files that passes write -------------------*- C++ -*-===//

#ifndef MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H
#define MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mfc {

/// Lets `write` fill `path`; on failure, an error at `loc` names the file.
inline llvm::LogicalResult
writeOutputFile(mlir::Location loc, llvm::StringRef path,
                llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(path, &error);
  if (!output) {
    return mlir::emitError(loc) << "cannot write '" << path << "': " << error;
  }
  write(output->os());
  output->keep();
  return llvm::success();
}

} // namespace mfc

#endif // MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H
