//===- Passes.td - mf dialect passes -----------------------*- tablegen -*-===//

#ifndef MF_TRANSFORMS_PASSES_TD
#define MF_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MFPrintCostPass : Pass<"mf-print-cost", "::mlir::ModuleOp"> {
  let summary = "Prints FLOPs and bytes per entry point and op kind";
  let description = [{
    Sums the `CostOpInterface` of every op in every function and prints a
    table per function (ops, FLOPs and bytes by op kind) to stdout, plus the
    parameter count and bytes of the module. With `per-op`, also prints every
    op with its model path. The IR is unchanged.

    ```
    $ mf-opt model.mlir --mf-print-cost -o /dev/null
    entry @prefill: 61 ops, 1.31 GFLOP, 18.4 MB moved
      op kind        count        FLOP       bytes
      mf.matmul         14  1288568832    12582912
      ...
    ```
  }];
  let options = [
    Option<"perOp", "per-op", "bool", /*default=*/"false",
           "Also list every op with its model path">
  ];
}

def MFFuseElementwisePass : Pass<"mf-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Groups chains of elementwise ops into mf.fusion regions";
  let description = [{
    Elementwise ops (and the broadcasts feeding them) join the group of a
    producer when no value of the group is needed, in between, by an op
    outside it. A group becomes an `mf.fusion {kind = "elementwise"}` when the
    cost model says it moves fewer bytes fused than op by op (its
    intermediates never reach memory). Nothing is duplicated.

    Before:
    ```mlir
    %0 = mf.add %a, %b : tensor<8xf32>
    %1 = mf.exp %0 : tensor<8xf32>
    ```
    After:
    ```mlir
    %1 = mf.fusion (%a, %b) {kind = "elementwise"} : (...) -> tensor<8xf32> {
    ^bb0(%x: tensor<8xf32>, %y: tensor<8xf32>):
      %0 = mf.add %x, %y : tensor<8xf32>
      %1 = mf.exp %0 : tensor<8xf32>
      mf.yield %1 : tensor<8xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::mf::MFDialect"];
}

#endif // MF_TRANSFORMS_PASSES_TD
