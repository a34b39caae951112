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

#endif // MF_TRANSFORMS_PASSES_TD
