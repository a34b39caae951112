//===- Train.h - mf-run's training loop -------------------------*- C++ -*-===//

#ifndef MFC_TOOLS_MF_RUN_TRAIN_H
#define MFC_TOOLS_MF_RUN_TRAIN_H

#include "runtime/Executor.h"

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
};

/// Trains `weights` in place with the forward_backward entry and the
/// optimizer the YAML configured; prints progress. `runOptions` (trace,
/// tensor dumps, NaN checks) apply to every forward_backward run. Returns
/// the exit code.
int runTraining(const TrainOptions &options, const Executable &executable,
                Weights &weights, Executor &executor, Allocator &allocator,
                const RunOptions &runOptions = {});

} // namespace mfrt

#endif // MFC_TOOLS_MF_RUN_TRAIN_H
