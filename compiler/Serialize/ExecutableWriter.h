//===- ExecutableWriter.h - mf module -> model.bin flatbuffer ---*- C++ -*-===//

#ifndef MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
#define MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H

#include "compiler/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <vector>

namespace mfc {

/// The executable format version this compiler writes.
constexpr uint32_t kExecutableFormatVersion = 1;

/// Serializes the parameters and entry points of an `mf` module (after the
/// mf phase) into the executable flatbuffer. Fails with a diagnostic on the
/// first op the format cannot express.
/// `kernelLibrary` (an ELF shared object) and `kernelNames` are the native
/// kernels; both may be empty.
mlir::FailureOr<std::vector<uint8_t>>
writeExecutable(mlir::ModuleOp module, const ModelSpec &spec,
                llvm::StringRef kernelLibrary = {},
                llvm::ArrayRef<std::string> kernelNames = {});

} // namespace mfc

#endif // MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
