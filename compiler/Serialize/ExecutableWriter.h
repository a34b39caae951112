//===- ExecutableWriter.h - mf module -> model.bin flatbuffer ---*- C++ -*-===//

#ifndef MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
#define MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <vector>

namespace mfc {

/// The executable format version this compiler writes.
constexpr uint32_t kExecutableFormatVersion = 23;

/// Serializes a module into the executable flatbuffer: its parameters, the
/// op-level program of each entry function (mf::OpLevelProgram) and, when
/// the module went through code generation and memory planning, each
/// entry's host program (mfexec.entry) and the kernels of its
/// mfexec.executable, whose code `kernelLibrary` is (an ELF shared object).
/// What the runtime needs beyond the program comes from the module's
/// settings (#mf.model, #mf.generation, ...: compiler/Frontend/
/// ModuleSettings.h): the module alone is the executable. Fails with a
/// diagnostic on the first op the format cannot express.
mlir::FailureOr<std::vector<uint8_t>>
writeExecutable(mlir::ModuleOp module, llvm::StringRef kernelLibrary = {});

} // namespace mfc

#endif // MFC_COMPILER_SERIALIZE_EXECUTABLEWRITER_H
