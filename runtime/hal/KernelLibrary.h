//===- KernelLibrary.h - the executable's native kernels --------*- C++ -*-===//
//
// model.bin carries its Graph Mode kernels as an ELF shared object. It is
// loaded without touching the file system: the bytes go into an anonymous
// memfd, which dlopen opens through /proc/self/fd. The bytes' hash was
// checked when the executable was loaded. The library's own table
// (runtime/hal/KernelAbi.h) must speak this runtime's ABI version and list the
// kernels model.bin names, with the same binding and tile counts.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_HAL_KERNELLIBRARY_H
#define MFC_RUNTIME_HAL_KERNELLIBRARY_H

#include "runtime/format/Executable.h"
#include "runtime/hal/KernelAbi.h"

#include <vector>

namespace mfrt {

/// A function the runtime offers the kernels: the library's global
/// `<name>_ptr` is set to it at load. The services are passed in (the
/// kernel layer's kernelServices()), so the loader knows no kernel.
struct KernelService {
  const char *name;
  void *function;
};

class KernelLibrary {
public:
  /// Loads the executable's kernels, giving them `services`; an empty
  /// library when it has none.
  static StatusOr<KernelLibrary>
  load(const Executable &executable,
       const std::vector<KernelService> &services);

  KernelLibrary() = default;
  KernelLibrary(KernelLibrary &&other) noexcept;
  KernelLibrary &operator=(KernelLibrary &&other) noexcept;
  KernelLibrary(const KernelLibrary &) = delete;
  ~KernelLibrary();

  /// The entry point of model.bin's kernel `index` (load checked that
  /// there is one for each).
  mfrt_kernel_v1 kernel(uint32_t index) const { return kernels_[index]; }
  size_t size() const { return kernels_.size(); }

private:
  /// The kernels model.bin names, from the library's table.
  Status takeKernels(const fb::Executable &root);

  void *handle_ = nullptr;
  int fd_ = -1;
  std::vector<mfrt_kernel_v1> kernels_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_HAL_KERNELLIBRARY_H
