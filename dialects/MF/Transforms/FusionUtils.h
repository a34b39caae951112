//===- FusionUtils.h - building mf.fusion regions ---------------*- C++ -*-===//

#ifndef MFC_DIALECTS_MF_TRANSFORMS_FUSIONUTILS_H
#define MFC_DIALECTS_MF_TRANSFORMS_FUSIONUTILS_H

#include "dialects/MF/IR/MFOps.h"

#include "llvm/ADT/ArrayRef.h"

namespace mlir::mf {

/// The mf.quantize whose values `value` is, cast to floats (rows quantized
/// with static scales, which a matmul multiplies as they are); null
/// otherwise.
QuantizeOp quantizedRowsOf(Value value);

/// An mf op that computes each result element from the same element of its
/// operands (one result).
bool isElementwiseOp(Operation *op);

/// Whether `use` is the right operand of an mf.matmul that multiplies by it
/// transposed: how a Linear's [N, K] weight is read.
bool isTransposedRhs(OpOperand &use);

/// Whether `op` reads a broadcast, which a region holding it would compute
/// in place (as it does splat constants) instead of reading it expanded.
bool readsBroadcast(Operation *op);

/// Bytes moved by `ops` and the broadcasts they read run one by one, and by
/// one region holding them (its inputs and the results used outside).
struct FusionCost {
  int64_t separateBytes = 0;
  int64_t fusedBytes = 0;
  bool pays() const { return fusedBytes < separateBytes; }
};
FusionCost fusionCost(llvm::ArrayRef<Operation *> ops);

/// Moves `ops` (in program order, one block) into an mf.fusion of `kind`
/// placed at the last of them. The caller guarantees that no value of the
/// ops is used outside them before the last one.
FusionOp outlineIntoFusion(llvm::ArrayRef<Operation *> ops, FusionKind kind);

/// Moves a fusion's body back into its block, before it, and erases it.
/// Returns the body's ops, in order.
SmallVector<Operation *> inlineFusion(FusionOp fusion);

} // namespace mlir::mf

#endif // MFC_DIALECTS_MF_TRANSFORMS_FUSIONUTILS_H
