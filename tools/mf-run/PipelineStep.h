//===- PipelineStep.h - one rank's part of a pipelined step -----*- C++ -*-===//
//
// A pipelined model.bin (Training.pipeline) gives each stage's ranks their
// own entries and the compiled order of their passes over the step's
// micro-batches. This follows it: a forward receives its input from the
// previous part of the model (or takes the micro-batch's ids), keeps it
// and what it saved, and sends its hidden states on; a backward receives
// their gradient from the next part (the model's last part: its input and
// the labels), runs from what was kept and sends the input's gradient
// back, adding its parameters' gradients to their sums. Then the stage's
// train_step updates its parameters from the sums (its global norm joins
// every stage's). With interleaving each stage holds several chunks,
// parts of the model (Executable::pipelinePlaceOf), so its passes name
// their chunk; under zero_bubble_v a backward's weight gradients run in a
// later W slot from what its B kept. Between parts on one stage (the turn
// of a V) tensors are handed over in memory. Sends do not wait
// (MPI_Isend), so no order of the stages' sends can deadlock; receives do.
//===----------------------------------------------------------------------===//

#ifndef MFC_TOOLS_MF_RUN_PIPELINESTEP_H
#define MFC_TOOLS_MF_RUN_PIPELINESTEP_H

#include "runtime/exec/Executor.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace mfrt {

/// One micro-batch's ids and labels ([batch, seq] i32 each).
struct MicroBatch {
  Tensor ids, labels;
};

class PipelineStep {
public:
  /// This rank's stage of `executable`'s pipeline (which must have one).
  PipelineStep(const Executable &executable, Executor &executor,
               Communicator &ranks, const RunOptions &runOptions);

  int64_t stage() const { return stage_; }
  int64_t microBatches() const { return microBatches_; }
  /// The entry whose inputs are the micro-batches' ids and labels.
  std::string idsEntry() const { return executable_.pipelineBackwardOf(0); }
  std::string labelsEntry() const {
    return executable_.pipelineBackwardOf(stages_ * chunks_ - 1);
  }

  /// Runs this rank's passes of one step over `batches` (one per
  /// micro-batch) with learning rate `lr` at step `step` (from 1). Returns
  /// the step's loss (the mean of the micro-batches'), on every rank.
  StatusOr<double> run(const std::vector<MicroBatch> &batches, double lr,
                       int64_t step);

  /// Seconds this rank spent in run(), and in its entries (the rest it
  /// waited for other stages: its share of the bubble, and messages).
  double runSeconds() const { return runSeconds_; }
  double busySeconds() const { return busySeconds_; }

private:
  /// Receives input `index` of `entryName` of part `part` from part
  /// `from`: its input (forward), or its output's gradient.
  StatusOr<Tensor> receive(const std::string &entryName, size_t index,
                           int64_t part, int64_t from, int64_t micro,
                           bool backward);
  /// Sends `tensor` to part `part`: its input or its output's gradient.
  Status send(const Tensor &tensor, int64_t part, int64_t micro, bool backward);
  /// The message tag of what part `part` takes for micro-batch `micro`:
  /// its input (forward) or its output's gradient (backward). The
  /// messages one rank sends another carry distinct chunks, each chunk's
  /// micro-batches in order (MPI keeps the order of messages with one tag,
  /// so the index may wrap).
  int tag(int64_t micro, int64_t part, bool backward) const;

  const Executable &executable_;
  Executor &executor_;
  Communicator &ranks_;
  const RunOptions &runOptions_;
  const fb::StageSchedule &schedule_;
  int64_t stages_, stage_, chunks_, microBatches_, stageAxis_;
  /// What a part of this stage handed to another one here, by (receiving
  /// part, micro-batch, backward).
  std::map<std::tuple<int64_t, int64_t, bool>, Tensor> handedOver_;
  double runSeconds_ = 0, busySeconds_ = 0;
};

} // namespace mfrt

#endif // MFC_TOOLS_MF_RUN_PIPELINESTEP_H
