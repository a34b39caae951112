//===- TrainingSettings.h - what the host decides per training step -*- C++
//-*-===//
//
// The optimizer update itself is compiled (train_step); the host chooses
// what depends on the run: the learning rate of each step (the schedule
// needs the run's length when the YAML does not fix total_steps), how many
// micro-batches make a step, and how many steps an epoch count means.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_FORMAT_TRAININGSETTINGS_H
#define MFC_RUNTIME_FORMAT_TRAININGSETTINGS_H

#include "runtime/format/Executable.h"

#include <string>

namespace mfrt {

/// The YAML's schedule and runner settings (model.bin's Training table,
/// defaults when it has none).
struct TrainingSettings {
  double learningRate = 1e-5;
  std::string schedule = "constant";
  double lrEnd = 0.0;
  int64_t warmupSteps = 0;
  double warmupRatio = 0.0;
  double warmupLrInit = 0.0;
  int64_t totalSteps = -1;
  double power = 1.0;
  int64_t gradientAccumulationSteps = 1;
  int64_t epochs = 1;

  static TrainingSettings from(const fb::ModelInfo &model);

  /// The learning rate of update `step` (0-based) of a run of `totalSteps`:
  /// linear warmup from warmup_lr_init over the warmup steps, then the
  /// schedule's decay to lr_end over the remaining steps.
  double learningRateAt(int64_t step, int64_t totalSteps) const;
};

} // namespace mfrt

#endif // MFC_RUNTIME_FORMAT_TRAININGSETTINGS_H
