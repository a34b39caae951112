//===- MFAttrs.td - mf enums and attributes ----------------*- tablegen -*-===//

#ifndef MF_ATTRS_TD
#define MF_ATTRS_TD

include "dialects/MF/IR/MFBase.td"
include "mlir/IR/EnumAttr.td"

// Enums are written out by name in op formats: `init = normal`.

def MF_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU is computed", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::mlir::mf";
}

def MF_ParameterInit : I32EnumAttr<"ParameterInit",
    "how a parameter is initialized when no checkpoint provides it", [
      I32EnumAttrCase<"zeros", 0>,
      I32EnumAttrCase<"ones", 1>,
      I32EnumAttrCase<"normal", 2>
    ]> {
  let cppNamespace = "::mlir::mf";
}

def MF_FusionKind : I32EnumAttr<"FusionKind",
    "the fusion rule that formed an mf.fusion region, which decides its kernel", [
      I32EnumAttrCase<"elementwise", 0>,
      I32EnumAttrCase<"matmul", 1>,
      I32EnumAttrCase<"matmul_epilogue", 2>,
      I32EnumAttrCase<"norm", 3>,
      I32EnumAttrCase<"attention", 4>,
      I32EnumAttrCase<"attention_grad", 5>
    ]> {
  let cppNamespace = "::mlir::mf";
}

#endif // MF_ATTRS_TD
