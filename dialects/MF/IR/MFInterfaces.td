//===- MFInterfaces.td - mf op interfaces ------------------*- tablegen -*-===//

#ifndef MF_INTERFACES_TD
#define MF_INTERFACES_TD

include "mlir/IR/OpBase.td"

def MF_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::mf";
  let description = [{
    The work an op does, for the fusion, recompute and memory cost models:
    floating point operations and bytes moved to and from memory when the op
    runs on its own (unfused).
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/"Floating point operations (a multiply-add counts two).",
      /*retTy=*/"int64_t", /*methodName=*/"getFlops", /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::mlir::mf::detail::countResultElements($_op);
      }]>,
    InterfaceMethod<
      /*desc=*/"Bytes read from operands plus bytes written to results.",
      /*retTy=*/"int64_t", /*methodName=*/"getBytesAccessed", /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::mlir::mf::detail::countOperandAndResultBytes($_op);
      }]>,
  ];
}

#endif // MF_INTERFACES_TD
