//===- KernelLibrary.h - the executable's native kernels --------*- C++ -*-===//
//
// model.bin carries its Graph Mode kernels as an ELF shared object. It is
// loaded without touching the file system: the bytes go into an anonymous
// memfd, which dlopen opens through /proc/self/fd. The bytes' hash was
// checked when the executable was loaded.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELLIBRARY_H
#define MFC_RUNTIME_KERNELLIBRARY_H

#include "runtime/Executable.h"

#include <map>
#include <string>

namespace mfrt {

class KernelLibrary {
public:
  /// Loads the executable's kernels; an empty library when it has none.
  static StatusOr<KernelLibrary> load(const Executable &executable);

  KernelLibrary() = default;
  KernelLibrary(KernelLibrary &&other) noexcept;
  KernelLibrary &operator=(KernelLibrary &&other) noexcept;
  KernelLibrary(const KernelLibrary &) = delete;
  ~KernelLibrary();

  /// The entry point of kernel `name`, or null.
  void *symbol(const std::string &name) const;
  size_t size() const { return symbols_.size(); }

private:
  void *handle_ = nullptr;
  int fd_ = -1;
  std::map<std::string, void *> symbols_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELLIBRARY_H
