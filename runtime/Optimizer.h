//===- Optimizer.h - AdamW, learning-rate schedules, clipping ---*- C++ -*-===//
//
// The training step's update, applied by the runtime to the gradients that
// the forward_backward entry returns. fp32 state (m, v) per parameter;
// parameters stored as f16/bf16 are updated in fp32 and rounded back.
//
//   AdamW (MindFormers' AdamW, torch.optim.AdamW): decoupled weight decay
//     p -= lr * wd * p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//     p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   AdamWeightDecay, FP32StateAdamWeightDecay (MindSpore): no bias
//     correction, the decay added to the update:
//     p -= lr * (m / (sqrt(v) + eps) + wd * p)
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_OPTIMIZER_H
#define MFC_RUNTIME_OPTIMIZER_H

#include "runtime/Executable.h"
#include "runtime/Weights.h"

#include <string>
#include <vector>

namespace mfrt {

/// The YAML's training settings (model.bin's Training table, defaults when
/// it has none).
struct TrainingSettings {
  std::string optimizer = "AdamW";
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
  double learningRate = 1e-5;
  std::string schedule = "constant";
  double lrEnd = 0.0;
  int64_t warmupSteps = 0;
  double warmupRatio = 0.0;
  double warmupLrInit = 0.0;
  int64_t totalSteps = -1;
  double power = 1.0;
  int64_t gradientAccumulationSteps = 1;
  bool useClipGrad = false;
  double maxGradNorm = 1.0;
  int64_t epochs = 1;

  static TrainingSettings from(const fb::ModelInfo &model);

  /// The learning rate of update `step` (0-based) of a run of `totalSteps`:
  /// linear warmup from warmup_lr_init over the warmup steps, then the
  /// schedule's decay to lr_end over the remaining steps.
  double learningRateAt(int64_t step, int64_t totalSteps) const;
};

/// Scales `gradients` so their global L2 norm is at most `maxNorm` (as
/// torch.nn.utils.clip_grad_norm_: by maxNorm / (norm + 1e-6)); returns the
/// norm before clipping.
double clipGradients(std::vector<Tensor> &gradients, double maxNorm);

class Optimizer {
public:
  /// Trains the parameters `trained` (indices into `weights`); the others
  /// (frozen) have no state.
  Optimizer(TrainingSettings settings, const Weights &weights,
            std::vector<size_t> trained);

  /// One update of every trained parameter from its gradient (in the order
  /// of `trained`).
  Status step(Weights &weights, const std::vector<Tensor> &gradients,
              double learningRate);

  int64_t steps() const { return steps_; }
  const std::vector<size_t> &trained() const { return trained_; }
  /// The state, for checkpoints: m and v of the i-th trained parameter.
  std::vector<float> &m(size_t i) { return m_[i]; }
  std::vector<float> &v(size_t i) { return v_[i]; }
  void setSteps(int64_t steps) { steps_ = steps; }

private:
  TrainingSettings settings_;
  std::vector<size_t> trained_;
  std::vector<std::vector<float>> m_, v_;
  int64_t steps_ = 0;
};

} // namespace mfrt

#endif // MFC_RUNTIME_OPTIMIZER_H
