//===- ExecutableWriter.h - mf module -> model.bin flatbuffer ---*- C++ -*-===//

#ifndef MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
#define MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H

#include "compiler/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <vector>

namespace mfc {

/// The executable format version this compiler writes.
constexpr uint32_t kExecutableFormatVersion = 1;

/// Serializes the parameters and entry points of an `mf` module (after the
/// mf phase) into the executable flatbuffer. Fails with a diagnostic on the
/// first op the format cannot express.
/// The native kernels: an ELF shared object, its kernel names, and the
/// kernel each fusion region of the module runs. All may be empty.
struct KernelTable {
  llvm::StringRef library;
  llvm::ArrayRef<std::string> names;
  const llvm::DenseMap<mlir::Operation *, std::string> *kernelOf = nullptr;
};

mlir::FailureOr<std::vector<uint8_t>>
writeExecutable(mlir::ModuleOp module, const ModelSpec &spec,
                const KernelTable &kernels = {});

} // namespace mfc

#endif // MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
