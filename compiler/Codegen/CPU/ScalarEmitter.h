//===- ScalarEmitter.h - mf elementwise ops as scalar arith/math -*- C++ -*-===//
//
// Every kernel body computes an mf elementwise op one element at a time:
// floats in f32 (f16/bf16 values are widened on load and rounded after each
// op, so a kernel stores exactly what PyNative would), integers in i32.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_CODEGEN_CPU_SCALAREMITTER_H
#define MFC_COMPILER_CODEGEN_CPU_SCALAREMITTER_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace mfc {

class ScalarEmitter {
public:
  explicit ScalarEmitter(mlir::OpBuilder &builder) : builder_(builder) {}

  /// A loaded scalar of storage type `elementType` in the compute domain.
  mlir::Value widen(mlir::Value scalar, mlir::Type elementType,
                    mlir::Location loc);
  /// A compute-domain scalar back in storage type `elementType`.
  mlir::Value narrow(mlir::Value scalar, mlir::Type elementType,
                     mlir::Location loc);
  /// `op` applied to compute-domain `operands`, rounded to what its result
  /// type holds; failure (with `why`) for an op without a scalar rule.
  mlir::FailureOr<mlir::Value> compute(mlir::Operation *op,
                                       mlir::ArrayRef<mlir::Value> operands,
                                       mlir::Location loc, std::string &why);

  /// Computes every op of a region `body` whose result has no scalar in
  /// `scalarOf` yet (those that do are the loaded inputs: arguments,
  /// broadcasts, matmul tiles) and returns the yielded values in their
  /// storage types; failure with `why` at the first op without a rule.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  emitBody(mlir::Block &body, llvm::DenseMap<mlir::Value, mlir::Value> &scalarOf,
           mlir::Location loc, std::string &why);

private:
  mlir::Value round(mlir::Value scalar, mlir::Type elementType,
                    mlir::Location loc);

  mlir::OpBuilder &builder_;
};

/// The element type of a tensor value.
mlir::Type elementTypeOf(mlir::Value value);

} // namespace mfc

#endif // MFC_COMPILER_CODEGEN_CPU_SCALAREMITTER_H
