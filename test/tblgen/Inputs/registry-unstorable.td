// An attribute type the executable has no encoding for: a build error.
include "dialects/MF/IR/MFOps.td"

def MF_LabelOp : MF_Op<"label"> {
  let arguments = (ins MF_FloatTensor:$input, StrAttr:$text);
  let results = (outs MF_FloatTensor:$result);
}
