//===- MlirInput.h - IR that mfc tools read ---------------------*- C++ -*-===//
//
// MLIR's parser recurses once per nested region, list or paren: a hostile or
// generated file nested a hundred thousand deep would overflow the stack.
// mf-opt and mfc refuse input nested deeper than kMaxMlirNesting with a
// diagnostic at the bracket that goes too deep, and parse on a thread whose
// stack holds that depth many times over.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_TRANSFORMS_MLIRINPUT_H
#define MFC_COMPILER_TRANSFORMS_MLIRINPUT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <memory>

namespace mfc {

inline constexpr unsigned kMaxMlirNesting = 2048;
inline constexpr uint64_t kMaxMlirInputBytes = 1ull << 30;
/// Measured: MLIR's parser takes ~3 KB of stack per level of nested ops.
inline constexpr unsigned kMlirParserStackBytes = 256u << 20;

/// The first bracket ('{', '(' or '[', outside strings and comments) nested
/// deeper than kMaxMlirNesting, or null.
const char *tooDeeplyNested(llvm::StringRef text);

/// Whether `text` reads as MLIR rather than YAML: its first line that is
/// not blank or a `//` comment starts an operation (`module`,
/// `"builtin.module"`, `func.func`, ...) or an attribute or type alias
/// (`#map = ...`, `!t = ...`; a YAML comment has a space after its `#`).
bool looksLikeMlir(llvm::StringRef text);

/// `input` parsed as a module (with a deep stack, after the nesting
/// check); null after reporting why through `sources`' and the context's
/// diagnostics.
mlir::OwningOpRef<mlir::ModuleOp>
parseMlirInput(std::unique_ptr<llvm::MemoryBuffer> input,
               mlir::MLIRContext &context, llvm::SourceMgr &sources);

} // namespace mfc

#endif // MFC_COMPILER_TRANSFORMS_MLIRINPUT_H
