//===- Passes.h - mf dialect passes -----------------------------*- C++ -*-===//

#ifndef MFC_DIALECTS_MF_TRANSFORMS_PASSES_H
#define MFC_DIALECTS_MF_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::mf {

/// mf-train-step's mark on the ops of the optimizer it builds, for
/// mf-schedule-updates: the trained parameter's symbol on the ops of its
/// update, a unit on those several updates share. mf-schedule-updates
/// removes it.
inline constexpr llvm::StringLiteral kUpdateAttrName = "mf.update";

#define GEN_PASS_DECL
#include "dialects/MF/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/MF/Transforms/Passes.h.inc"

} // namespace mlir::mf

#endif // MFC_DIALECTS_MF_TRANSFORMS_PASSES_H
