//===- StageCosts.h - a compiled training step's costs, by layer -*- C++
//-*-===//
//
// What `mfc plan-parallel` reads from a compiled (memory-planned) training
// module: per pipeline stage (one stage without pipelining) and per
// interleave chunk, the time of its passes from their FLOPs and
// collectives, the bytes a micro-batch in flight keeps, the stage's
// parameters, gradients and optimizer state, and its arenas. Every
// quantity is split into what lies outside the layers and what each layer
// adds by what it recomputes, so that a module compiled with a few layers
// (each of a known recompute choice) predicts the full model's.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_PIPELINES_STAGECOSTS_H
#define MFC_COMPILER_PIPELINES_STAGECOSTS_H

#include "compiler/Analysis/PipelineSchedule.h"
#include "compiler/Frontend/RecomputePlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace mfc {

/// Per recompute choice (indexed by LayerRecompute: none, selective, full).
using PerChoice = std::array<double, 3>;
using ChoiceCounts = std::array<int64_t, 3>;

/// A quantity as what lies outside the layers plus each layer's share by
/// its recompute choice.
struct LayerLinear {
  double fixed = 0;
  PerChoice perLayer{};
  double at(const ChoiceCounts &layers) const {
    double value = fixed;
    for (size_t choice = 0; choice < layers.size(); ++choice) {
      value += perLayer[choice] * static_cast<double>(layers[choice]);
    }
    return value;
  }
};

/// The machine the time is predicted for.
struct CostModel {
  double rankFlops = 1.5e14;          ///< achieved FLOP/s of one rank
  double intraNodeBandwidth = 5e10;   ///< bytes/s a rank sends within a node
  double interNodeBandwidth = 2.5e10; ///< ... to another node
  int64_t ranksPerNode = 8;
  double latency = 1e-5; ///< seconds a collective or message starts in
  /// The candidate's grid (data, model, pipeline, context parallel): ranks
  /// are numbered row-major over it, as mf-run's communicator does.
  std::array<int64_t, 4> grid{1, 1, 1, 1};

  /// Seconds for a collective of `kind` over `axes` with `bytes` of payload.
  double collectiveSeconds(llvm::StringRef kind, llvm::ArrayRef<int16_t> axes,
                           int64_t bytes) const;
  /// Seconds for a message of `bytes` between neighbouring stages.
  double messageSeconds(int64_t bytes) const;
};

/// One interleave chunk of a stage (a part of the model).
struct ChunkCosts {
  /// Seconds of its forward, its backward (B with zero_bubble_v) and its
  /// weight gradients (W; 0 unless split), per micro-batch.
  LayerLinear forward, backward, weights;
  /// Bytes a micro-batch keeps from its forward to its backward (its input
  /// and saved values), and what its W takes from its B on.
  LayerLinear kept, weightKept;
  /// The arenas of its forward and backward entries (each entry a rank
  /// runs has its own).
  LayerLinear arena;
  /// The bytes of its input (the message from the part before).
  int64_t inputBytes = 0;
  /// The model's last part (its forward runs in its backward).
  bool lastPart = false;
  /// Its layers of each choice.
  ChoiceCounts layers{};
};

/// One stage (the whole step without pipelining). A rank of it plans
/// its state, what its micro-batches in flight keep, and the arena of
/// every entry it runs.
struct StageCosts {
  std::vector<ChunkCosts> chunks;
  /// Its parameters, gradients and optimizer state; its update's arena;
  /// the seconds of its update (with the gradients' data-parallel
  /// reduction).
  LayerLinear staticBytes, arena, update;
};

/// The costs of a memory-planned training module, each op and parameter
/// attributed to the recompute choice `choiceOf` gives its layer (by the
/// layer's index), a choice's total divided by the layers of that choice
/// the chunk (for the stage's own quantities, the stage) runs. Per stage of a
/// pipelined module, else one stage whose one chunk's backward is an
/// accumulate_gradients run and whose update is what train_step adds to it.
/// nullopt for a module that is not a memory-planned training step.
std::optional<std::vector<StageCosts>>
measureStageCosts(mlir::ModuleOp module, const CostModel &model,
                  llvm::function_ref<LayerRecompute(int64_t layer)> choiceOf);

} // namespace mfc

#endif // MFC_COMPILER_PIPELINES_STAGECOSTS_H
