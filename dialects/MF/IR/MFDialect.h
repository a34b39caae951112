//===- MFDialect.h - the mf graph dialect -----------------------*- C++ -*-===//

#ifndef MFC_DIALECTS_MF_IR_MFDIALECT_H
#define MFC_DIALECTS_MF_IR_MFDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/MF/IR/MFDialect.h.inc"

#endif // MFC_DIALECTS_MF_IR_MFDIALECT_H
