//===- MFExecOps.h - mfexec operations and attributes -----------*- C++ -*-===//

#ifndef MFC_DIALECTS_MFEXEC_IR_MFEXECOPS_H
#define MFC_DIALECTS_MFEXEC_IR_MFEXECOPS_H

#include "dialects/MFExec/IR/MFExecDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/MFExec/IR/MFExecEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/MFExec/IR/MFExecAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/MFExec/IR/MFExecOps.h.inc"

namespace mlir::mfexec {
/// The bytes of a buffer of `type` (a static-shape memref).
int64_t bufferBytes(MemRefType type);
/// The buffer type a ranked tensor of `type` is stored as (null for any
/// other type).
MemRefType bufferTypeOf(Type type);
} // namespace mlir::mfexec

#endif // MFC_DIALECTS_MFEXEC_IR_MFEXECOPS_H
