//===- KernelLibrary.cpp - the executable's native kernels ----------------===//

#include "runtime/KernelLibrary.h"

#include "runtime/KernelServices.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

using namespace mfrt;

StatusOr<KernelLibrary> KernelLibrary::load(const Executable &executable) {
  KernelLibrary library;
  const fb::Executable &root = executable.root();
  if (!root.kernel_library() || root.kernel_library()->size() == 0) {
    return library;
  }
  library.fd_ = memfd_create("mfc-kernels", MFD_CLOEXEC);
  if (library.fd_ < 0) {
    return Status::error(std::string("memfd_create failed: ") +
                         std::strerror(errno));
  }
  const uint8_t *bytes = root.kernel_library()->data();
  size_t remaining = root.kernel_library()->size();
  while (remaining > 0) {
    ssize_t written = write(library.fd_, bytes, remaining);
    if (written <= 0) {
      return Status::error(std::string("cannot stage the kernels: ") +
                           std::strerror(errno));
    }
    bytes += written;
    remaining -= written;
  }
  std::string path = "/proc/self/fd/" + std::to_string(library.fd_);
  library.handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library.handle_) {
    return Status::error(std::string("cannot load the kernels: ") + dlerror());
  }
  // Services the kernels call (a library whose kernels need none has no
  // slots for them).
  for (const KernelService &service : kernelServices()) {
    std::string slotName = std::string(service.name) + "_ptr";
    if (void *slot = dlsym(library.handle_, slotName.c_str())) {
      *static_cast<void **>(slot) = service.function;
    }
  }
  if (root.kernels()) {
    for (const flatbuffers::String *name : *root.kernels()) {
      void *entry = dlsym(library.handle_, name->c_str());
      if (!entry) {
        return Status::error("the kernel library has no symbol '" +
                             name->str() + "'");
      }
      library.symbols_[name->str()] = entry;
    }
  }
  return library;
}

KernelLibrary::KernelLibrary(KernelLibrary &&other) noexcept
    : handle_(other.handle_), fd_(other.fd_),
      symbols_(std::move(other.symbols_)) {
  other.handle_ = nullptr;
  other.fd_ = -1;
}

KernelLibrary &KernelLibrary::operator=(KernelLibrary &&other) noexcept {
  std::swap(handle_, other.handle_);
  std::swap(fd_, other.fd_);
  std::swap(symbols_, other.symbols_);
  return *this;
}

KernelLibrary::~KernelLibrary() {
  if (handle_) {
    dlclose(handle_);
  }
  if (fd_ >= 0) {
    close(fd_);
  }
}

void *KernelLibrary::symbol(const std::string &name) const {
  auto it = symbols_.find(name);
  return it == symbols_.end() ? nullptr : it->second;
}
