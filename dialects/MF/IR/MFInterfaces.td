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

def MF_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::mf";
  let description = [{
    The op's rule for reverse-mode differentiation (`mf-autodiff`): given
    the gradient of the loss with respect to the op's result, build the
    gradients with respect to its operands at the builder's insertion point,
    as `mf` ops, so that fusion and memory planning apply to the backward
    graph like to the forward one.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Appends one gradient per operand to `operandGradients`, or a
                 null value for an operand that has none (integer ids,
                 labels, positions). Fails, with a diagnostic, for a form
                 of the op the rule does not cover.}],
      /*retTy=*/"::llvm::LogicalResult", /*methodName=*/"buildGradients",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::mlir::Value":$resultGradient,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>,
  ];
}

def MF_ShardingOpInterface : OpInterface<"ShardingOpInterface"> {
  let cppNamespace = "::mlir::mf";
  let description = [{
    The op's rule for tensor, sequence and vocabulary parallelism
    (`mf-partition`): given how each operand is held on a rank (whole, a
    block along one dimension, a partial sum; `Partitioning::splitOf`), say
    how the result is held, turning the op into its per-rank form and
    adding the collectives the layout needs (Megatron's f and g). Ops
    without the interface keep a layout only when they are elementwise.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Assigns the result's split through `partitioning`, or fails
                 with `partitioning.noRule(op)` for operand splits the rule
                 does not cover. Called for every op of the interface, also
                 when no operand is split.}],
      /*retTy=*/"::llvm::LogicalResult", /*methodName=*/"partition",
      /*args=*/(ins "::mlir::mf::Partitioning &":$partitioning)>,
  ];
}

#endif // MF_INTERFACES_TD
