//===- MFExecDialect.h - the mfexec executable dialect ----------*- C++ -*-===//

#ifndef MFC_DIALECTS_MFEXEC_IR_MFEXECDIALECT_H
#define MFC_DIALECTS_MFEXEC_IR_MFEXECDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "dialects/MFExec/IR/MFExecDialect.h.inc"

#endif // MFC_DIALECTS_MFEXEC_IR_MFEXECDIALECT_H
