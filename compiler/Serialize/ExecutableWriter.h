//===- ExecutableWriter.h - mf module -> model.bin flatbuffer ---*- C++ -*-===//

#ifndef MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
#define MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H

#include "compiler/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <vector>

namespace mfc {

/// The executable format version this compiler writes.
constexpr uint32_t kExecutableFormatVersion = 8;

/// The native kernels an executable carries: their shared object, symbol
/// names, and what they were compiled for (triple, LLVM CPU, its features).
struct ExecutableKernels {
  llvm::StringRef library;
  llvm::ArrayRef<std::string> names;
  llvm::StringRef triple;
  llvm::StringRef cpu;
  llvm::ArrayRef<std::string> features;
};

/// Serializes the parameters and entry points of an `mf` module into the
/// executable flatbuffer: the op-level program of each entry, and, when the
/// module went through codegen and memory planning, its kernel dispatches
/// (`mf.kernel`, `mf.tiles` on regions) and arena plan (`mf.arena_offsets`,
/// `mf.arena_bytes`), with `kernels`. Fails with a diagnostic on the first
/// op the format cannot express.
mlir::FailureOr<std::vector<uint8_t>>
writeExecutable(mlir::ModuleOp module, const ModelSpec &spec,
                const ExecutableKernels &kernels = {});

} // namespace mfc

#endif // MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
