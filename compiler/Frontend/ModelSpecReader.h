//===- ModelSpecReader.h - YAML config -> validated ModelSpec ---*- C++ -*-===//

#ifndef MFC_COMPILER_FRONTEND_MODELSPECREADER_H
#define MFC_COMPILER_FRONTEND_MODELSPECREADER_H

#include "compiler/Frontend/ConfigTree.h"
#include "compiler/Frontend/ModelSpec.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>

namespace mfc {

/// Reads a MindFormers config into a ModelSpec. Reports every problem it
/// finds (not just the first) through `diagnostics`; returns nullopt if any
/// was an error. Unknown keys are warnings, or errors when they come from a
/// `--set` override.
std::optional<ModelSpec> readModelSpec(ConfigDiagnostics &diagnostics,
                                       const ConfigNode &root,
                                       llvm::StringRef sourceFile);

/// Parses the file, applies `overrides` (`key.path=value`) in order, and
/// reads the spec. Returns nullopt after reporting errors.
std::optional<ModelSpec>
loadModelSpec(ConfigDiagnostics &diagnostics, llvm::StringRef path,
              llvm::ArrayRef<std::string> overrides);

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_MODELSPECREADER_H
