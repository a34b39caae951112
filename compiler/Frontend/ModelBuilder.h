//===- ModelBuilder.h - ModelSpec -> mf IR ----------------------*- C++ -*-===//

#ifndef MFC_COMPILER_FRONTEND_MODELBUILDER_H
#define MFC_COMPILER_FRONTEND_MODELBUILDER_H

#include "compiler/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mfc {

/// What the command line adds to the YAML.
struct FrontendOptions {
  /// Prompt lengths below seq_length that get a prefill entry of their own
  /// (`prefill_<L>`, with the KV cache): a prompt runs through the shortest
  /// that holds it instead of all seq_length positions. Unset: powers of
  /// two from 32 up (prefillLengthsFor).
  std::optional<std::vector<int64_t>> prefillLengths;
  /// A quantization_config with calibrated activations compiled as its
  /// float model (mfc --calibration-model): no quantization decisions.
  bool calibrationModel = false;
};

/// The prefill lengths `options` asks for, or by default, for a model of
/// `seqLength` positions.
std::vector<int64_t> prefillLengthsFor(const FrontendOptions &options,
                                       int64_t seqLength);

/// Builds the `mf` module for `spec`: one `mf.parameter` per weight and the
/// entry functions of its run mode:
///  - predict: `prefill` (and `decode` and the shorter `prefill_<L>` with
///    the KV cache when use_past), `logits`;
///  - train / finetune / eval: `forward_loss` (and the training entries).
/// Every op is located at its model path fused with the YAML key behind it.
/// Null after an error (reported through the context's diagnostics).
mlir::OwningOpRef<mlir::ModuleOp>
buildModelModule(mlir::MLIRContext &context, const ModelSpec &spec,
                 const FrontendOptions &options = {});

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_MODELBUILDER_H
