//===- ModuleSettings.h - the config as module attributes -------*- C++ -*-===//
//
// What the runtime needs from the config beyond the program, and what the
// config asks of the compiler's phases, recorded on the module as verified
// mf attributes: the IR alone then says everything model.bin holds, so a
// dumped phase compiles on (`mfc compile x.mlir`) to the same executable.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_FRONTEND_MODULESETTINGS_H
#define MFC_COMPILER_FRONTEND_MODULESETTINGS_H

#include "compiler/Frontend/ModelSpec.h"
#include "compiler/Frontend/RecomputePlan.h"
#include "dialects/MF/IR/MFOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mfc {

/// The MLIR element type of a config's dtype.
mlir::Type elementTypeOf(mlir::Builder &builder, DType type);

/// Sets mf.model_name, mf.run_mode, mf.context_mode, #mf.model,
/// #mf.generation, #mf.tokenizer and mf.load_checkpoint (when the config
/// gives them), and a training module's #mf.optimizer and #mf.training.
void recordRuntimeSettings(mlir::ModuleOp module, const ModelSpec &spec);

/// Sets what the config asks of the phases: #mf.quantize_weights and
/// mf.quantize_kv_cache (quantization_config; not for the float model
/// that calibration runs), #mf.recompute (recompute_config, training) and
/// mf.sequence_parallel.
void recordCompileDecisions(mlir::ModuleOp module, const ModelSpec &spec,
                            bool calibrationModel);

/// Records `plan` as mf-recompute's decision (#mf.recompute, each list
/// left out when empty; no attribute for an empty plan).
void setRecomputeDecision(mlir::ModuleOp module, const RecomputePlan &plan);

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_MODULESETTINGS_H
