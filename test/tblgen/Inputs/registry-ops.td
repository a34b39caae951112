// Ops for test/tblgen/op-registry.test: one attribute of each kind the
// executable stores, and an op it never stores.
include "dialects/MF/IR/MFOps.td"

def MF_SampleOp : MF_Op<"sample", [Pure, SameOperandsAndResultType]> {
  let arguments = (ins FlatSymbolRefAttr:$name, MF_FloatTensor:$input,
                       Optional<MF_FloatTensor>:$extra, I64Attr:$count,
                       F64Attr:$scale, UnitAttr:$flag,
                       MF_GeluApproximation:$approximate,
                       DenseI64ArrayAttr:$offsets,
                       OptionalAttr<DenseI16ArrayAttr>:$axes,
                       FlatSymbolRefAttr:$grid);
  let results = (outs MF_FloatTensor:$result);
}

def MF_HiddenOp : MF_Op<"hidden"> {
  let inExecutable = 0;
  let arguments = (ins MF_FloatTensor:$input);
  let results = (outs MF_FloatTensor:$result);
}
