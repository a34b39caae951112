//===- Train.h - mf-run's training loop -------------------------*- C++ -*-===//

#ifndef MFC_TOOLS_MF_RUN_TRAIN_H
#define MFC_TOOLS_MF_RUN_TRAIN_H

#include "runtime/Executor.h"
#include "runtime/Generation.h"

#include <optional>
#include <string>

namespace mfrt {

struct TrainOptions {
  std::optional<std::string> inputIds; ///< one sequence as the whole batch
  std::string data;                    ///< text or MFTOKENS
  int64_t steps = -1;       ///< -1: one step for --input-ids, else the epochs
  std::string saveWeights;  ///< checkpoint at the end (and every saveEvery)
  int64_t saveEvery = 0;
  std::string resume;       ///< checkpoint to continue from
  std::string dumpGrads;    ///< the first step's gradients and loss
  TextEncoder encodeText;   ///< a text --data file's tokenizer
  /// Data parallelism: this rank's index among `dataRanks` ranks, each of
  /// which trains on its batch_size consecutive sequences of every global
  /// batch (batch_size x dataRanks sequences), as MindFormers splits it.
  int64_t dataRank = 0, dataRanks = 1;
  /// Rank 0 of a multi-rank run (or the only rank): writes checkpoints
  /// and prints progress; the others only compute.
  bool primaryRank = true;
  /// The ranks of a sharded program (checkpoints gather split weights).
  Communicator *ranks = nullptr;
};

/// Trains `weights` in place (the executor's) with the compiled
/// train_step; prints progress. `runOptions` (trace, tensor dumps, NaN
/// checks) apply to every run of a training entry. Returns the exit code.
int runTraining(const TrainOptions &options, const Executable &executable,
                const Weights &weights, Executor &executor,
                const RunOptions &runOptions = {});

} // namespace mfrt

#endif // MFC_TOOLS_MF_RUN_TRAIN_H
