//===- MFOps.h - mf dialect operations --------------------------*- C++ -*-===//

#ifndef MFC_DIALECTS_MF_IR_MFOPS_H
#define MFC_DIALECTS_MF_IR_MFOPS_H

#include "dialects/MF/IR/MFDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "shapes/GridAxes.h"

namespace mlir::mf::detail {
/// Default FLOP count: one per result element.
int64_t countResultElements(Operation *op);
/// Default byte count: every operand read once, every result written once.
int64_t countOperandAndResultBytes(Operation *op);
} // namespace mlir::mf::detail

namespace mlir::mf {
/// The model path an op's location names (`model.layers.3.attention.wq`),
/// or "" when it has none. An op that stands for several of MindFormers'
/// ops has a `fused<"model-paths">` location of their names; its path is
/// the first.
std::string getModelPath(Location loc);

/// "model.layers.3.feed_forward.mul" -> {"model.layers.3",
/// "feed_forward.mul"} (GPT-2: "transformer.h.3"); {"", ""} for a path
/// outside the layers.
std::pair<StringRef, StringRef> splitLayerPath(StringRef path);

/// Every model path the location names (one, several, or none).
std::vector<std::string> getModelPaths(Location loc);

/// The location of an op named by each of `paths` (the first is its path).
Location getModelPathsLoc(MLIRContext *context, ArrayRef<Location> paths);

/// What mf-partition offers the ops' sharding rules (Sharding.h).
class Partitioning;

/// The storage of the module's parameters, which mf.assign writes.
struct ParameterResource
    : public SideEffects::Resource::Base<ParameterResource> {
  StringRef getName() final { return "mf.parameters"; }
};
} // namespace mlir::mf

#include "dialects/MF/IR/MFEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/MF/IR/MFAttrs.h.inc"

namespace mlir::mf {
/// The module's `mf.run_mode`, or nullopt when it has none.
std::optional<RunMode> getRunMode(Operation *module);
/// True for a module compiled to train (run mode train or finetune).
bool isTrainingModule(Operation *module);
/// The module's settings for the runtime, which the writer copies into
/// model.bin: #mf.model, #mf.generation, #mf.tokenizer, the checkpoint the
/// config names (an absolute path) and a training module's #mf.training.
inline constexpr llvm::StringLiteral kModelAttrName = "mf.model";
inline constexpr llvm::StringLiteral kGenerationAttrName = "mf.generation";
inline constexpr llvm::StringLiteral kTokenizerAttrName = "mf.tokenizer";
inline constexpr llvm::StringLiteral kLoadCheckpointAttrName =
    "mf.load_checkpoint";
inline constexpr llvm::StringLiteral kTrainingAttrName = "mf.training";
/// The config's decisions for the phases (mfc builds each phase from
/// them): #mf.quantize_weights, mf.quantize_kv_cache (unit: kvcache_dtype
/// int8), #mf.recompute and mf.sequence_parallel (unit: use_seq_parallel
/// on a tensor-parallel module).
inline constexpr llvm::StringLiteral kQuantizeWeightsAttrName =
    "mf.quantize_weights";
inline constexpr llvm::StringLiteral kQuantizeKvCacheAttrName =
    "mf.quantize_kv_cache";
inline constexpr llvm::StringLiteral kRecomputeAttrName = "mf.recompute";
inline constexpr llvm::StringLiteral kSequenceParallelAttrName =
    "mf.sequence_parallel";
/// What an entry function computes (#mf.entry_role): the writer stores it,
/// and the loader checks the entry's signature and name against it.
inline constexpr llvm::StringLiteral kEntryRoleAttrName = "mf.entry_role";
/// Sets `entry`'s role.
void setEntryRole(Operation *entry, EntryRole role);
/// The last compiler phase the module went through (mfc compile resumes
/// after it).
inline constexpr llvm::StringLiteral kPhaseAttrName = "mf.phase";
/// A pipelined training module's entries: the pipeline stage (an index)
/// whose ranks run the function; the module's `mf.micro_batches` is how
/// many micro-batches a training step runs through the stages.
inline constexpr llvm::StringLiteral kStageAttrName = "mf.stage";
inline constexpr llvm::StringLiteral kMicroBatchesAttrName = "mf.micro_batches";
/// An interleaved pipeline (pp_interleave_num): the module's
/// `mf.pipeline_chunks` is how many chunks of layers each stage holds, and
/// each stage entry's `mf.chunk` which of them it runs (chunk c of stage s
/// is the model's part mfshapes::pipelinePartOf(s, c, ...): c * stages + s,
/// or under zero_bubble_v chunk 1 back up the stages). Absent: 1 chunk,
/// chunk 0.
inline constexpr llvm::StringLiteral kChunkAttrName = "mf.chunk";
inline constexpr llvm::StringLiteral kPipelineChunksAttrName =
    "mf.pipeline_chunks";
/// A pipelined module's chunks per stage (kPipelineChunksAttrName, or 1).
inline int64_t pipelineChunksOf(Operation *module) {
  auto chunks = module->getAttrOfType<IntegerAttr>(kPipelineChunksAttrName);
  return chunks ? chunks.getInt() : 1;
}
/// A pipelined module's schedule, by MindSpore's name (pipeline_scheduler:
/// "1f1b", "gpipe" or "zero_bubble_v"); absent: 1f1b.
inline constexpr llvm::StringLiteral kPipelineSchedulerAttrName =
    "mf.pipeline_scheduler";
/// A context-parallel module's runs of each sequence's positions per rank:
/// 1 (its block), or 2 (Megatron's causal load balance: blocks r and
/// 2c - 1 - r of 2c).
inline constexpr llvm::StringLiteral kContextBlocksAttrName =
    "mf.context_blocks";
/// A pipelined module's scheduler (kPipelineSchedulerAttrName, or 1f1b).
inline std::string pipelineSchedulerOf(Operation *module) {
  auto name = module->getAttrOfType<StringAttr>(kPipelineSchedulerAttrName);
  return name ? name.str() : "1f1b";
}
/// The grid axis of a pipelined module's stages (data x model x pipeline).
inline constexpr int16_t kPipelineGridAxis = mfshapes::kPipelineAxis;
/// The grid axis of context parallelism (data x model x pipeline x
/// context): its ranks each hold a block of every sequence.
inline constexpr int16_t kContextGridAxis = mfshapes::kContextAxis;

/// Where a companion of a quantized [N, K] weight (its scales, a calibrated
/// one's input scales, zero points and bias) holds the weight's N and K
/// (-1: not at all).
struct CompanionDims {
  int64_t n = -1, k = -1;
};
} // namespace mlir::mf
#include "dialects/MF/IR/MFInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/MF/IR/MFOps.h.inc"

namespace mlir::mf {
/// The split a companion of rank `rank` has when `weight` is split: the
/// weight's split along N or K, on the companion's dimension that holds it
/// (null: whole on every rank). A column-parallel weight's per-row scales
/// and bias split with its rows; a row-parallel one's input scales, zero
/// points and group scales with its columns.
shard::GridAxesArrayAttr companionSplitAxes(ParameterOp weight, int64_t rank,
                                            CompanionDims dims);
} // namespace mlir::mf

#endif // MFC_DIALECTS_MF_IR_MFOPS_H
