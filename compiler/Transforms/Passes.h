//===- Passes.h - compiler-wide passes --------------------------*- C++ -*-===//

#ifndef MFC_COMPILER_TRANSFORMS_PASSES_H
#define MFC_COMPILER_TRANSFORMS_PASSES_H

#include "dialects/MFExec/IR/MFExecDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace mfc {

#define GEN_PASS_DECL
#include "compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Passes.h.inc"

} // namespace mfc

#endif // MFC_COMPILER_TRANSFORMS_PASSES_H
