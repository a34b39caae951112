//===- OpLevelProgram.h - an entry as PyNative Mode runs it -----*- C++ -*-===//
//
// The op-level program of an entry function, as model.bin holds it for
// PyNative Mode: its ops in order with every mf.fusion flattened into the
// ops of its body (fusions, yields and the return are not ops of it), and a
// number per value: the function's arguments first, then the ops' results
// in order. A fusion's body arguments are its inputs' values, its results
// the values its body yields. The writer serializes this program and the
// host programs (mfexec) name its ops and values by these numbers.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_DIALECTS_MF_IR_OPLEVELPROGRAM_H
#define MFC_DIALECTS_MF_IR_OPLEVELPROGRAM_H

#include "dialects/MF/IR/MFOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace mlir::mf {

class OpLevelProgram {
public:
  explicit OpLevelProgram(func::FuncOp entry);

  /// The ops, in execution order.
  ArrayRef<Operation *> ops() const { return ops_; }
  /// Per value number: the value (its defining op's result or an argument).
  ArrayRef<Value> values() const { return values_; }
  /// The number of `value`, a value of the entry (at any nesting).
  uint32_t idOf(Value value) const { return ids_.at(value); }
  /// The index of an op of the program.
  uint32_t indexOf(Operation *op) const { return index_.at(op); }
  /// The ops a fusion's body contributes: [first, first + count).
  std::pair<uint32_t, uint32_t> rangeOf(FusionOp fusion) const {
    return ranges_.at(fusion);
  }

private:
  void add(Block &block);

  std::vector<Operation *> ops_;
  std::vector<Value> values_;
  llvm::DenseMap<Value, uint32_t> ids_;
  llvm::DenseMap<Operation *, uint32_t> index_;
  llvm::DenseMap<Operation *, std::pair<uint32_t, uint32_t>> ranges_;
};

} // namespace mlir::mf

#endif // MFC_DIALECTS_MF_IR_OPLEVELPROGRAM_H
