//===- MFDialect.cpp - the mf graph dialect -------------------------------===//

#include "dialects/MF/IR/MFDialect.h"

#include "dialects/MF/IR/MFOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::mf;

#include "dialects/MF/IR/MFDialect.cpp.inc"

void MFDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/MF/IR/MFOps.cpp.inc"
      >();
}

Operation *MFDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type) {
    return nullptr;
  }
  return ConstantOp::create(builder, loc, elements);
}
