//===- KernelLibrary.cpp - the executable's native kernels ----------------===//

#include "runtime/hal/KernelLibrary.h"

#include "runtime/hal/CpuFeatures.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

using namespace mfrt;

namespace {

/// The runtime services (`mfrt_X` for a global `mfrt_X_ptr`) the ELF
/// shared object `image` names in its dynamic symbol table. Bounds are
/// checked: a malformed image yields what could be read.
std::vector<std::string> servicesNamedBy(const uint8_t *image, size_t size) {
  std::vector<std::string> names;
  auto fits = [&](uint64_t offset, uint64_t bytes) {
    return offset <= size && bytes <= size - offset;
  };
  Elf64_Ehdr header;
  if (!fits(0, sizeof header)) {
    return names;
  }
  std::memcpy(&header, image, sizeof header);
  for (uint16_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr symbols, strings;
    uint64_t at = header.e_shoff + uint64_t(i) * sizeof symbols;
    if (!fits(at, sizeof symbols)) {
      break;
    }
    std::memcpy(&symbols, image + at, sizeof symbols);
    uint64_t linkAt =
        header.e_shoff + uint64_t(symbols.sh_link) * sizeof strings;
    if (symbols.sh_type != SHT_DYNSYM || symbols.sh_link >= header.e_shnum ||
        !fits(linkAt, sizeof strings)) {
      continue;
    }
    std::memcpy(&strings, image + linkAt, sizeof strings);
    if (!fits(symbols.sh_offset, symbols.sh_size) ||
        !fits(strings.sh_offset, strings.sh_size)) {
      continue;
    }
    const char *table =
        reinterpret_cast<const char *>(image + strings.sh_offset);
    for (uint64_t s = 0; s + sizeof(Elf64_Sym) <= symbols.sh_size;
         s += sizeof(Elf64_Sym)) {
      Elf64_Sym symbol;
      std::memcpy(&symbol, image + symbols.sh_offset + s, sizeof symbol);
      if (symbol.st_name >= strings.sh_size) {
        continue;
      }
      std::string name(
          table + symbol.st_name,
          strnlen(table + symbol.st_name, strings.sh_size - symbol.st_name));
      if (name.size() > 9 && name.rfind("mfrt_", 0) == 0 &&
          name.compare(name.size() - 4, 4, "_ptr") == 0) {
        names.push_back(name.substr(0, name.size() - 4));
      }
    }
  }
  return names;
}

} // namespace

StatusOr<KernelLibrary>
KernelLibrary::load(const Executable &executable,
                    const std::vector<KernelService> &services) {
  KernelLibrary library;
  const fb::Executable &root = executable.root();
  if (!root.kernel_library() || root.kernel_library()->size() == 0) {
    return library;
  }
  // Kernels for another CPU would die of an illegal instruction: refuse
  // them before they are loaded (Executable::load checked the record).
  const fb::KernelTarget &target = *root.kernel_target();
  std::string triple = target.triple()->str();
  std::string compiledFor = "the kernels were compiled for " + triple +
                            ", CPU '" + target.cpu()->str() + "'";
  if (triple.substr(0, triple.find('-')) != hostArchitecture()) {
    return Status::error(
        StatusCode::FailedPrecondition,
        compiledFor + ", not this " + hostArchitecture() +
            " machine; recompile the model here, or run it with "
            "--mode pynative, which needs no kernels");
  }
  std::vector<std::string> features;
  if (target.features()) {
    for (const flatbuffers::String *feature : *target.features()) {
      features.push_back(feature->str());
    }
  }
  std::vector<std::string> missing = missingCpuFeatures(features);
  if (!missing.empty()) {
    std::string list;
    for (const std::string &feature : missing) {
      list += (list.empty() ? "" : ", ") + feature;
    }
    return Status::error(
        StatusCode::FailedPrecondition,
        compiledFor + " and use " + list +
            ", which this CPU lacks; recompile with --cpu=native "
            "on this machine or a CPU it matches (--cpu=x86-64-v2 "
            "or x86-64-v3 run on most x86-64 machines), or run "
            "with --mode pynative, which needs no kernels");
  }
  // A service this runtime does not provide would be called through a
  // null pointer: a model from another mfc.
  for (const std::string &name : servicesNamedBy(
           root.kernel_library()->data(), root.kernel_library()->size())) {
    bool known = false;
    for (const KernelService &service : services) {
      known |= name == service.name;
    }
    if (!known) {
      return Status::error(
          StatusCode::DataLoss,
          "the kernels call the runtime service '" + name +
              "', which this mf-run does not provide; recompile "
              "the model with the mfc of this mf-run");
    }
  }
  library.fd_ = memfd_create("mfc-kernels", MFD_CLOEXEC);
  if (library.fd_ < 0) {
    return Status::error(StatusCode::Unavailable,
                         std::string("memfd_create failed: ") +
                             std::strerror(errno));
  }
  const uint8_t *bytes = root.kernel_library()->data();
  size_t remaining = root.kernel_library()->size();
  while (remaining > 0) {
    ssize_t written = write(library.fd_, bytes, remaining);
    if (written <= 0) {
      return Status::error(StatusCode::Unavailable,
                           std::string("cannot stage the kernels: ") +
                               std::strerror(errno));
    }
    bytes += written;
    remaining -= written;
  }
  std::string path = "/proc/self/fd/" + std::to_string(library.fd_);
  library.handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library.handle_) {
    return Status::error(StatusCode::Unavailable,
                         std::string("cannot load the kernels: ") + dlerror());
  }
  // Services the kernels call (a library whose kernels need none has no
  // slots for them).
  for (const KernelService &service : services) {
    std::string slotName = std::string(service.name) + "_ptr";
    if (void *slot = dlsym(library.handle_, slotName.c_str())) {
      *static_cast<void **>(slot) = service.function;
    }
  }
  MFRT_RETURN_IF_ERROR(library.takeKernels(root));
  return library;
}

Status KernelLibrary::takeKernels(const fb::Executable &root) {
  auto query = reinterpret_cast<mfrt_kernel_library_query_fn>(
      dlsym(handle_, MFRT_KERNEL_LIBRARY_QUERY));
  const mfrt_kernel_library_v1 *table =
      query ? query(MFRT_KERNEL_ABI_VERSION) : nullptr;
  if (!table || table->abi_version != MFRT_KERNEL_ABI_VERSION) {
    return Status::error(
        StatusCode::FailedPrecondition,
        std::string("the kernel library does not speak kernel ABI version ") +
            std::to_string(MFRT_KERNEL_ABI_VERSION) +
            (query ? "" : " (it has no " MFRT_KERNEL_LIBRARY_QUERY ")") +
            "; recompile the model with the mfc of this mf-run");
  }
  size_t count = root.kernels() ? root.kernels()->size() : 0;
  if (table->kernel_count != count) {
    return Status::error(StatusCode::DataLoss,
                         "the kernel library has " +
                             std::to_string(table->kernel_count) +
                             " kernels, but the host programs name " +
                             std::to_string(count) + "; recompile the model");
  }
  for (uint32_t k = 0; k < count; ++k) {
    const std::string &name = root.kernels()->Get(k)->str();
    const fb::KernelSignature &signature = *root.kernel_signatures()->Get(k);
    uint32_t bindings =
        signature.inputs()->size() + signature.outputs()->size();
    if (!table->names[k] || name != table->names[k] || !table->kernels[k] ||
        table->binding_counts[k] != bindings ||
        table->tile_counts[k] != static_cast<int64_t>(signature.tiles())) {
      return Status::error(
          StatusCode::DataLoss,
          "kernel " + std::to_string(k) + " of the kernel library is not '" +
              name + "' with " + std::to_string(bindings) + " bindings and " +
              std::to_string(signature.tiles()) +
              " tiles, as the host programs declare it; recompile the model");
    }
    kernels_.push_back(table->kernels[k]);
  }
  return Status::ok();
}

KernelLibrary::KernelLibrary(KernelLibrary &&other) noexcept
    : handle_(other.handle_), fd_(other.fd_),
      kernels_(std::move(other.kernels_)) {
  other.handle_ = nullptr;
  other.fd_ = -1;
}

KernelLibrary &KernelLibrary::operator=(KernelLibrary &&other) noexcept {
  std::swap(handle_, other.handle_);
  std::swap(fd_, other.fd_);
  std::swap(kernels_, other.kernels_);
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
