//===- Train.h - mf-run's training loop -------------------------*- C++ -*-===//

#ifndef MFC_TOOLS_MF_RUN_TRAIN_H
#define MFC_TOOLS_MF_RUN_TRAIN_H

#include "runtime/exec/Executor.h"
#include "runtime/text/TokenIds.h"

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
  /// The program's ranks (null: one). Each data-parallel rank (grid axis
  /// 0) trains on its batch_size consecutive sequences of every global
  /// batch, as MindFormers splits it; checkpoints gather split weights;
  /// rank 0 prints progress and writes the checkpoint.
  Communicator *ranks = nullptr;
};

/// With LoRA adapters, also writes them in PEFT's layout beside the
/// weights file `path` (ckpt.safetensors -> ckpt.peft/), and says so; a
/// note where they have no PEFT form (GPT-2). Every rank calls it.
Status savePeftBeside(const std::string &path, const Executable &executable,
                      const Weights &weights, Communicator *ranks);

/// Whether `executable` has the entries training runs (a message that says
/// how to compile them, if not).
Status checkTrainable(const Executable &executable);

/// Trains `weights` in place (the executor's) with the compiled
/// train_step; prints progress. `runOptions` (trace, tensor dumps, NaN
/// checks) apply to every run of a training entry. Returns the exit code.
int runTraining(const TrainOptions &options, const Executable &executable,
                const Weights &weights, Executor &executor,
                const RunOptions &runOptions = {});

} // namespace mfrt

#endif // MFC_TOOLS_MF_RUN_TRAIN_H
