//===- Optimizer.cpp - AdamW, learning-rate schedules, clipping -----------===//

#include "runtime/Optimizer.h"

#include <cmath>

using namespace mfrt;

TrainingSettings TrainingSettings::from(const fb::ModelInfo &model) {
  TrainingSettings settings;
  const fb::Training *training = model.training();
  if (!training) {
    return settings;
  }
  if (training->optimizer()) {
    settings.optimizer = training->optimizer()->str();
  }
  settings.beta1 = training->beta1();
  settings.beta2 = training->beta2();
  settings.eps = training->eps();
  settings.weightDecay = training->weight_decay();
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
  settings.useClipGrad = training->use_clip_grad();
  settings.maxGradNorm = training->max_grad_norm();
  settings.epochs = std::max<int64_t>(1, training->epochs());
  return settings;
}

double TrainingSettings::learningRateAt(int64_t step, int64_t runSteps) const {
  int64_t total = totalSteps > 0 ? totalSteps : runSteps;
  int64_t warmup = warmupSteps > 0
                       ? warmupSteps
                       : static_cast<int64_t>(warmupRatio * static_cast<double>(total));
  if (step < warmup) {
    return warmupLrInit +
           (learningRate - warmupLrInit) * static_cast<double>(step) / warmup;
  }
  double progress =
      std::min(1.0, static_cast<double>(step - warmup) /
                        static_cast<double>(std::max<int64_t>(1, total - warmup)));
  if (schedule == "cosine") {
    return lrEnd + 0.5 * (learningRate - lrEnd) * (1.0 + std::cos(M_PI * progress));
  }
  if (schedule == "linear") {
    return learningRate + (lrEnd - learningRate) * progress;
  }
  if (schedule == "polynomial") {
    return (learningRate - lrEnd) * std::pow(1.0 - progress, power) + lrEnd;
  }
  return learningRate;
}

double mfrt::clipGradients(std::vector<Tensor> &gradients, double maxNorm) {
  double sum = 0;
  for (const Tensor &gradient : gradients) {
    if (gradient.dtype() == DType::F32) {
      const float *g = gradient.as<float>();
      double partial = 0;
      for (int64_t i = 0; i < gradient.numElements(); ++i) {
        partial += static_cast<double>(g[i]) * g[i];
      }
      sum += partial;
      continue;
    }
    for (int64_t i = 0; i < gradient.numElements(); ++i) {
      double value = gradient.loadFloat(i);
      sum += value * value;
    }
  }
  double norm = std::sqrt(sum);
  double scale = maxNorm / (norm + 1e-6);
  if (scale < 1.0) {
    for (Tensor &gradient : gradients) {
      for (int64_t i = 0; i < gradient.numElements(); ++i) {
        gradient.storeFloat(i, static_cast<float>(gradient.loadFloat(i) * scale));
      }
    }
  }
  return norm;
}

Optimizer::Optimizer(TrainingSettings settings, const Weights &weights,
                     std::vector<size_t> trained)
    : settings_(std::move(settings)), trained_(std::move(trained)) {
  for (size_t i : trained_) {
    m_.emplace_back(weights[i].numElements(), 0.0f);
    v_.emplace_back(weights[i].numElements(), 0.0f);
  }
}

Status Optimizer::step(Weights &weights, const std::vector<Tensor> &gradients,
                       double learningRate) {
  if (gradients.size() != trained_.size()) {
    return Status::error("the optimizer got " + std::to_string(gradients.size()) +
                         " gradients for " + std::to_string(trained_.size()) +
                         " trained parameters");
  }
  ++steps_;
  const double b1 = settings_.beta1, b2 = settings_.beta2;
  const double eps = settings_.eps, decay = settings_.weightDecay;
  bool decoupled = settings_.optimizer == "AdamW";
  double correction1 = decoupled ? 1.0 - std::pow(b1, steps_) : 1.0;
  double correction2 = decoupled ? 1.0 - std::pow(b2, steps_) : 1.0;
  for (size_t p = 0; p < trained_.size(); ++p) {
    Tensor &parameter = weights.mutableTensor(trained_[p]);
    const Tensor &gradient = gradients[p];
    if (gradient.numElements() != parameter.numElements()) {
      return Status::error("gradient " + std::to_string(p) + " has " +
                           std::to_string(gradient.numElements()) +
                           " elements, its parameter " +
                           std::to_string(parameter.numElements()));
    }
    std::vector<float> &m = m_[p], &v = v_[p];
    if (parameter.dtype() == DType::F32 && gradient.dtype() == DType::F32) {
      // The common case, in a loop the compiler vectorizes.
      float *w = parameter.as<float>();
      const float *g = gradient.as<float>();
      const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
      const float lr = static_cast<float>(learningRate);
      const float c1 = static_cast<float>(1.0 / correction1);
      const float c2 = static_cast<float>(1.0 / correction2);
      const float e = static_cast<float>(eps), wd = static_cast<float>(decay);
      const float shrink = static_cast<float>(1.0 - learningRate * decay);
      for (int64_t i = 0; i < parameter.numElements(); ++i) {
        m[i] = fb1 * m[i] + (1.0f - fb1) * g[i];
        v[i] = fb2 * v[i] + (1.0f - fb2) * g[i] * g[i];
        float update = (m[i] * c1) / (std::sqrt(v[i] * c2) + e);
        w[i] = decoupled ? w[i] * shrink - lr * update
                         : w[i] - lr * (update + wd * w[i]);
      }
      continue;
    }
    for (int64_t i = 0; i < parameter.numElements(); ++i) {
      float g = gradient.loadFloat(i);
      float w = parameter.loadFloat(i);
      m[i] = static_cast<float>(b1 * m[i] + (1.0 - b1) * g);
      v[i] = static_cast<float>(b2 * v[i] + (1.0 - b2) * g * g);
      double update = (m[i] / correction1) / (std::sqrt(v[i] / correction2) + eps);
      double next = decoupled ? w * (1.0 - learningRate * decay) - learningRate * update
                              : w - learningRate * (update + decay * w);
      parameter.storeFloat(i, static_cast<float>(next));
    }
  }
  return Status::ok();
}
