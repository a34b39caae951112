//===- OutputFile.h - files that mfc writes ---------------------*- C++ -*-===//
//
// Every file mfc writes goes through writeOutputFile: into a uniquely named
// temporary beside the target, checked, then renamed over it, so a full disk
// or a failed write leaves the previous file as it was (and no temporary).
// A symlink is written through (the file it names is replaced); a character
// device (/dev/null, /dev/stdout) is written in place; a directory, FIFO,
// socket or block device is refused. mf-run follows the same rules
// (runtime/base/FileIO.h).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H
#define MFC_COMPILER_TRANSFORMS_OUTPUTFILE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mfc {

/// Lets `write` fill `path` ('-': stdout). Returns "" on success, else why
/// not (naming the file); on failure nothing at `path` changed.
inline std::string
writeOutputFile(llvm::StringRef path,
                llvm::function_ref<void(llvm::raw_ostream &)> write) {
  namespace fs = llvm::sys::fs;
  auto failure = [&](const std::string &reason) {
    return "cannot write '" + path.str() + "': " + reason;
  };
  // Errors are checked here; a stream must not report them fatally later.
  auto finish = [&](llvm::raw_fd_ostream &os) -> std::string {
    os.close();
    if (os.has_error()) {
      std::string reason = os.error().message();
      os.clear_error();
      return reason;
    }
    return "";
  };
  if (path == "-") {
    write(llvm::outs());
    llvm::outs().flush();
    return llvm::outs().has_error() ? failure("cannot write standard output")
                                    : "";
  }
  llvm::SmallString<256> target(path);
  if (fs::is_symlink_file(path)) {
    if (std::error_code error = fs::real_path(path, target)) {
      return failure("it is a symbolic link to a missing file (" +
                     error.message() + ")");
    }
  }
  fs::file_status status;
  if (!fs::status(target, status)) {
    if (status.type() == fs::file_type::character_file) {
      std::error_code error;
      llvm::raw_fd_ostream os(target, error, fs::OF_None);
      if (error) {
        return failure(error.message());
      }
      write(os);
      std::string reason = finish(os);
      return reason.empty() ? "" : failure(reason);
    }
    if (status.type() != fs::file_type::regular_file) {
      return failure(status.type() == fs::file_type::directory_file
                         ? "it is a directory; give the path of a file"
                         : "it is not a regular file");
    }
  }
  llvm::SmallString<256> directory(target);
  llvm::sys::path::remove_filename(directory);
  if (directory.empty()) {
    directory = ".";
  }
  llvm::SmallString<256> model(directory);
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(target) +
                                     ".%%%%%%.tmp");
  int fd;
  llvm::SmallString<256> temporary;
  if (std::error_code error = fs::createUniqueFile(model, fd, temporary)) {
    return failure(error.message());
  }
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  write(os);
  std::string reason = finish(os);
  if (reason.empty()) {
    if (std::error_code error = fs::rename(temporary, target)) {
      reason = error.message();
    }
  }
  if (!reason.empty()) {
    fs::remove(temporary);
    return failure(reason + " (nothing was changed)");
  }
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
