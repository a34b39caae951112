//===- FileIO.h - reading and writing user files without surprises -*- C++
//-*-===//
//
// Every file the tools read comes from a user: it may be a directory, a
// device that never ends (/dev/zero) or larger than memory. Every file they
// write may land on a full disk, replace a link or a device, or race another
// writer. These two helpers are the only way the runtime and mf-run touch
// files, so each of those cases has one answer:
//  - reading: only regular files, at most a stated size, every read checked;
//  - writing: into a uniquely named temporary beside the target, every write
//    and the close checked, then renamed over the target, so the target is
//    either the old file or the whole new one; a failure removes the
//    temporary and says why (strerror: "No space left on device"). A symlink
//    is written through (the file it names is replaced, the link stays); a
//    character device (/dev/null, /dev/stdout) is written in place, never
//    replaced; a directory, FIFO, socket or block device is refused. mfc's
//    output files follow the same rules (compiler/Transforms/OutputFile.h).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_BASE_FILEIO_H
#define MFC_RUNTIME_BASE_FILEIO_H

#include "runtime/base/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mfrt {

/// Upper bounds on what the tools read: far above any real file of the kind,
/// far below what would exhaust this machine's memory by accident.
constexpr uint64_t kMaxExecutableBytes = 4ull << 30; // model.bin
constexpr uint64_t kMaxDataFileBytes = 8ull << 30;   // --data, eval text

/// A fingerprint of the file at `path` that two copies share and two
/// different files of one size almost never do: its size and its first and
/// last MiB (what a checkpoint's header and data are). Ranks compare their
/// inputs with it without reading gigabytes. 0 for a path that is not a
/// readable regular file (opening it is the loader's error to report).
uint64_t fileFingerprint(const std::string &path);

/// The bytes of the regular file at `path`. `what` names it in messages
/// ("executable", "data file"); files over `maxBytes` are refused.
StatusOr<std::vector<uint8_t>> readRegularFile(const std::string &path,
                                               const std::string &what,
                                               uint64_t maxBytes);

/// Checks, before any long work, that `path` can be written by
/// writeFileAtomically: its directory exists and is writable, and the path
/// is a regular file, a new one or a character device (or a link to one).
Status checkWritableTarget(const std::string &path, const std::string &what);

/// Sink for writeFileAtomically's callback: append bytes; errors are kept
/// and reported once at the end.
class FileWriter {
public:
  explicit FileWriter(int fd) : fd_(fd) {}
  void write(const void *data, size_t size);
  void write(const std::string &text) { write(text.data(), text.size()); }
  bool failed() const { return error_ != 0; }
  int error() const { return error_; }

private:
  int fd_;
  int error_ = 0;
};

/// Writes `path` atomically (see the file comment): `produce` appends the
/// contents; if it returns an error, nothing changes on disk.
Status writeFileAtomically(const std::string &path, const std::string &what,
                           const std::function<Status(FileWriter &)> &produce);

} // namespace mfrt

#endif // MFC_RUNTIME_BASE_FILEIO_H
