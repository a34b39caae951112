//===- MFExecDialect.cpp - the mfexec executable dialect ------------------===//

#include "dialects/MFExec/IR/MFExecDialect.h"

#include "dialects/MFExec/IR/MFExecOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::mfexec;

#include "dialects/MFExec/IR/MFExecDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/MFExec/IR/MFExecAttrs.cpp.inc"

void MFExecDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/MFExec/IR/MFExecAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/MFExec/IR/MFExecOps.cpp.inc"
      >();
}
