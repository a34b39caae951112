//===- TrainingSettings.cpp - learning-rate schedules ---------------------===//

#include "runtime/format/TrainingSettings.h"

#include <cmath>

using namespace mfrt;

TrainingSettings TrainingSettings::from(const fb::ModelInfo &model) {
  TrainingSettings settings;
  const fb::Training *training = model.training();
  if (!training) {
    return settings;
  }
  settings.learningRate = training->learning_rate();
  if (training->lr_schedule()) {
    settings.schedule = training->lr_schedule()->str();
  }
  settings.lrEnd = training->lr_end();
  settings.warmupSteps = training->warmup_steps();
  settings.warmupRatio = training->warmup_ratio();
  settings.warmupLrInit = training->warmup_lr_init();
  settings.totalSteps = training->total_steps();
  settings.power = training->power();
  settings.gradientAccumulationSteps =
      std::max<int64_t>(1, training->gradient_accumulation_steps());
  settings.epochs = std::max<int64_t>(1, training->epochs());
  return settings;
}

double TrainingSettings::learningRateAt(int64_t step, int64_t runSteps) const {
  int64_t total = totalSteps > 0 ? totalSteps : runSteps;
  int64_t warmup =
      warmupSteps > 0
          ? warmupSteps
          : static_cast<int64_t>(warmupRatio * static_cast<double>(total));
  if (step < warmup) {
    return warmupLrInit +
           (learningRate - warmupLrInit) * static_cast<double>(step) / warmup;
  }
  double progress = std::min(
      1.0, static_cast<double>(step - warmup) /
               static_cast<double>(std::max<int64_t>(1, total - warmup)));
  if (schedule == "cosine") {
    return lrEnd +
           0.5 * (learningRate - lrEnd) * (1.0 + std::cos(M_PI * progress));
  }
  if (schedule == "linear") {
    return learningRate + (lrEnd - learningRate) * progress;
  }
  if (schedule == "polynomial") {
    return (learningRate - lrEnd) * std::pow(1.0 - progress, power) + lrEnd;
  }
  return learningRate;
}
