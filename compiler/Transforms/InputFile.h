//===- InputFile.h - files that mfc reads -----------------------*- C++ -*-===//
//
// Every file mfc reads comes from a user: only a regular file of a bounded
// size is read, so /dev/zero or a directory given by mistake is an error,
// not a read until memory runs out. mf-run follows the same rule
// (runtime/base/FileIO.h).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_TRANSFORMS_INPUTFILE_H
#define MFC_COMPILER_TRANSFORMS_INPUTFILE_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <string>

namespace mfc {

/// The text of the regular file at `path` (`what` names it: "config"), at
/// most `maxBytes`; null after setting `error` to why not.
inline std::unique_ptr<llvm::MemoryBuffer>
readInputFile(llvm::StringRef path, llvm::StringRef what, uint64_t maxBytes,
              std::string &error) {
  namespace fs = llvm::sys::fs;
  std::string name = (what + " '" + path + "'").str();
  fs::file_status status;
  if (std::error_code code = fs::status(path, status)) {
    error = "cannot read " + name + ": " + code.message();
    return nullptr;
  }
  if (status.type() != fs::file_type::regular_file) {
    error = "cannot read " + name + ": it is " +
            (status.type() == fs::file_type::directory_file
                 ? "a directory"
                 : "not a regular file") +
            "; give the path of a file";
    return nullptr;
  }
  if (status.getSize() > maxBytes) {
    error = (name + " is " + llvm::Twine(status.getSize()) +
             " bytes; files of this kind are at most " + llvm::Twine(maxBytes) +
             " bytes")
                .str();
    return nullptr;
  }
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    error = "cannot read " + name + ": " + file.getError().message();
    return nullptr;
  }
  return std::move(*file);
}

} // namespace mfc

#endif // MFC_COMPILER_TRANSFORMS_INPUTFILE_H
