//===- CompileReport.h - what the compiler decided, readable ----*- C++ -*-===//

#ifndef MFC_COMPILER_REPORT_COMPILEREPORT_H
#define MFC_COMPILER_REPORT_COMPILEREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mfc {

/// Per entry: op count, FLOPs, bytes moved, every fusion group with the model
/// paths of its ops, and the memory plan (arena vs lower bound).
void writeCompileReportJson(mlir::ModuleOp module, llvm::raw_ostream &os);
void writeCompileReportText(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace mfc

#endif // MFC_COMPILER_REPORT_COMPILEREPORT_H
