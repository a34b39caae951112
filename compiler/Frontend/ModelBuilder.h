//===- ModelBuilder.h - ModelSpec -> mf IR ----------------------*- C++ -*-===//

#ifndef MFC_COMPILER_FRONTEND_MODELBUILDER_H
#define MFC_COMPILER_FRONTEND_MODELBUILDER_H

#include "compiler/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mfc {

/// Builds the `mf` module for `spec`: one `mf.parameter` per weight and the
/// entry functions of its run mode:
///  - predict: `prefill` (and `decode` with the KV cache when use_past);
///  - train / finetune / eval: `forward_loss`.
/// Every op is located at its model path fused with the YAML key behind it.
mlir::OwningOpRef<mlir::ModuleOp> buildModelModule(mlir::MLIRContext &context,
                                                   const ModelSpec &spec);

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_MODELBUILDER_H
