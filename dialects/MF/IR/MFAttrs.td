//===- MFAttrs.td - mf enums and attributes ----------------*- tablegen -*-===//

#ifndef MF_ATTRS_TD
#define MF_ATTRS_TD

include "dialects/MF/IR/MFBase.td"
include "mlir/IR/EnumAttr.td"

def MF_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU is computed", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}
def MF_GeluApproximationAttr
    : EnumAttr<MF_Dialect, MF_GeluApproximation, "gelu_approximation">;

def MF_ParameterInit : I32EnumAttr<"ParameterInit",
    "how a parameter is initialized when no checkpoint provides it", [
      I32EnumAttrCase<"zeros", 0>,
      I32EnumAttrCase<"ones", 1>,
      I32EnumAttrCase<"normal", 2>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}
def MF_ParameterInitAttr
    : EnumAttr<MF_Dialect, MF_ParameterInit, "parameter_init">;

#endif // MF_ATTRS_TD
