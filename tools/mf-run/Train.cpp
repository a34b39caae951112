//===- Train.cpp - mf-run's training loop ---------------------------------===//
//
// Each step: gradient_accumulation_steps micro-batches through
// forward_backward (gradients averaged), optional global-norm clipping, the
// learning rate of the step, one optimizer update of the weights in place.
// Data: consecutive windows of seq_length + 1 tokens, batch_size per micro
// batch, wrapping at the end of the data. A checkpoint holds the parameters,
// the optimizer state (optimizer.m.*, optimizer.v.*), the step and the data
// position, written atomically; resuming from it continues bit for bit.
//
//===----------------------------------------------------------------------===//

#include "tools/mf-run/Train.h"

#include "runtime/Generation.h"
#include "runtime/Optimizer.h"
#include "runtime/Safetensors.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

using namespace mfrt;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "mf-run: error: %s\n", message.c_str());
  return 1;
}

/// Where the batches come from.
class Batches {
public:
  Batches(const Executable &executable, Executor &executor)
      : model_(executable.model()), executor_(executor) {}

  Status open(const TrainOptions &options) {
    int64_t seq = model_.seq_length();
    if (options.inputIds) {
      StatusOr<std::vector<int32_t>> ids =
          parseIds(*options.inputIds, model_.vocab_size());
      if (!ids) {
        return ids.status();
      }
      if (ids->size() < 2 || static_cast<int64_t>(ids->size()) > seq + 1) {
        return Status::error("--input-ids for training needs 2 to seq_length + 1 = " +
                             std::to_string(seq + 1) + " ids, got " +
                             std::to_string(ids->size()));
      }
      sequence_ = ids.take();
      return Status::ok();
    }
    if (options.data.empty()) {
      return Status::error("train needs --data FILE (text, or an MFTOKENS "
                           "file) or --input-ids 1,2,3");
    }
    StatusOr<std::vector<int32_t>> data =
        readTokens(options.data, model_.vocab_size());
    if (!data) {
      return data.status();
    }
    data_ = data.take();
    if (static_cast<int64_t>(data_.size()) < tokensPerBatch() + 1) {
      return Status::error("'" + options.data + "' has " +
                           std::to_string(data_.size()) +
                           " tokens; one training batch needs batch_size x "
                           "seq_length + 1 = " +
                           std::to_string(tokensPerBatch() + 1));
    }
    return Status::ok();
  }

  int64_t tokensPerBatch() const {
    return model_.batch_size() * model_.seq_length();
  }
  /// Whole batches in the data (1 for --input-ids).
  int64_t batchesPerEpoch() const {
    return data_.empty() ? 1
                         : (static_cast<int64_t>(data_.size()) - 1) / tokensPerBatch();
  }

  /// ids and labels of the batch at `position`; advances it.
  StatusOr<std::vector<Tensor>> next(int64_t &position) {
    StatusOr<std::vector<Tensor>> inputs = executor_.allocateInputs("forward_backward");
    if (!inputs) {
      return inputs.status();
    }
    int32_t *ids = (*inputs)[0].as<int32_t>();
    int32_t *labels = (*inputs)[1].as<int32_t>();
    int64_t batch = model_.batch_size(), seq = model_.seq_length();
    if (!sequence_.empty()) {
      // The sequence in every row; labels shifted by one, padding ignored.
      int64_t length = static_cast<int64_t>(sequence_.size());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < seq; ++i) {
          ids[b * seq + i] =
              i < length ? sequence_[i] : static_cast<int32_t>(model_.pad_token_id());
          labels[b * seq + i] = i + 1 < length
                                    ? sequence_[i + 1]
                                    : static_cast<int32_t>(model_.ignore_token_id());
        }
      }
      return inputs;
    }
    if (position + tokensPerBatch() + 1 > static_cast<int64_t>(data_.size())) {
      position = 0; // the next epoch
    }
    for (int64_t i = 0; i < tokensPerBatch(); ++i) {
      ids[i] = data_[position + i];
      labels[i] = data_[position + i + 1];
    }
    position += tokensPerBatch();
    return inputs;
  }

private:
  const fb::ModelInfo &model_;
  Executor &executor_;
  std::vector<int32_t> sequence_, data_;
};

constexpr const char *kStatePrefix = "optimizer.";


/// The trained parameters (all of them, or LoRA's adapters alone: the
/// frozen base is not part of a checkpoint), their optimizer state, the
/// step and the data position.
Status saveCheckpoint(const std::string &path, const Executable &executable,
                      const Weights &weights, Optimizer &optimizer,
                      int64_t position) {
  const auto &parameters = *executable.root().parameters();
  const std::vector<size_t> &trained = optimizer.trained();
  std::vector<Tensor> state;
  state.reserve(2 * trained.size());
  std::vector<std::pair<std::string, const Tensor *>> named;
  for (size_t index : trained) {
    named.emplace_back(parameters.Get(index)->name()->str(), &weights[index]);
  }
  for (size_t i = 0; i < trained.size(); ++i) {
    for (const char *which : {"m", "v"}) {
      std::vector<float> &values = *which == 'm' ? optimizer.m(i) : optimizer.v(i);
      state.emplace_back(DType::F32, weights[trained[i]].shape(),
                         std::shared_ptr<void>(values.data(), [](void *) {}));
      named.emplace_back(std::string(kStatePrefix) + which + "." +
                             parameters.Get(trained[i])->name()->str(),
                         &state.back());
    }
  }
  return writeSafetensors(path, named,
                          {{"mfc.step", std::to_string(optimizer.steps())},
                           {"mfc.data_position", std::to_string(position)}});
}

Status loadState(const std::string &path, const Executable &executable,
                 Optimizer &optimizer, int64_t &position) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  if (!file) {
    return file.status();
  }
  const auto &metadata = file->metadata();
  auto step = metadata.find("mfc.step");
  auto data = metadata.find("mfc.data_position");
  if (step == metadata.end() || data == metadata.end()) {
    return Status::error("'" + path + "' is not an mf-run training checkpoint "
                         "(no mfc.step / mfc.data_position metadata); use it "
                         "with --weights instead");
  }
  optimizer.setSteps(std::strtoll(step->second.c_str(), nullptr, 10));
  position = std::strtoll(data->second.c_str(), nullptr, 10);
  const auto &parameters = *executable.root().parameters();
  const std::vector<size_t> &trained = optimizer.trained();
  for (size_t i = 0; i < trained.size(); ++i) {
    for (const char *which : {"m", "v"}) {
      std::string name = std::string(kStatePrefix) + which + "." +
                         parameters.Get(trained[i])->name()->str();
      auto it = file->tensors().find(name);
      std::vector<float> &values = *which == 'm' ? optimizer.m(i) : optimizer.v(i);
      if (it == file->tensors().end() || it->second.dtype != DType::F32 ||
          it->second.size != values.size() * sizeof(float)) {
        return Status::error("'" + path + "' has no f32 optimizer state '" +
                             name + "' of the parameter's size");
      }
      std::memcpy(values.data(), it->second.data, it->second.size);
    }
  }
  return Status::ok();
}

/// --save-every's checkpoints: out.safetensors -> out.step20.safetensors.
std::string periodicCheckpointPath(const std::string &path, int64_t step) {
  const std::string suffix = ".safetensors";
  std::string base = path;
  if (base.size() > suffix.size() &&
      base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
    base.resize(base.size() - suffix.size());
  }
  return base + ".step" + std::to_string(step) + suffix;
}

/// A bar redrawn in place on a terminal, else about 20 log lines a run.
class Progress {
public:
  Progress(int64_t first, int64_t total)
      : first_(first), total_(total), tty_(isatty(fileno(stderr))),
        interval_(std::max<int64_t>(1, (total - first) / 20)),
        start_(std::chrono::steady_clock::now()) {}

  void step(int64_t step, double loss, double lr, int64_t tokens) {
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start_).count();
    int64_t done = step + 1 - first_;
    double eta = elapsed / done * (total_ - step - 1);
    double rate = tokens * done / std::max(elapsed, 1e-9);
    if (tty_) {
      int width = 24, filled = static_cast<int>(width * (step + 1) / total_);
      std::fprintf(stderr, "\r[%s%s] step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  ETA %.0fs ",
                   std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(),
                   static_cast<long long>(step + 1), static_cast<long long>(total_),
                   loss, lr, rate, eta);
      if (step + 1 == total_) {
        std::fprintf(stderr, "\n");
      }
    } else if ((step + 1 - first_) % interval_ == 0 || step + 1 == total_ ||
               step == first_) {
      std::fprintf(stderr, "step %lld/%lld loss %.6f lr %.3e %.0f tok/s ETA %.0fs\n",
                   static_cast<long long>(step + 1), static_cast<long long>(total_),
                   loss, lr, rate, eta);
    }
  }

private:
  int64_t first_, total_;
  bool tty_;
  int64_t interval_; // log lines: about 20 per run when not a terminal
  std::chrono::steady_clock::time_point start_;
};

} // namespace

int mfrt::runTraining(const TrainOptions &options, const Executable &executable,
                      Weights &weights, Executor &executor, Allocator &allocator,
                      const RunOptions &runOptions) {
  if (!executable.entry("forward_backward")) {
    return fail("train needs a 'forward_backward' entry: compile the config "
                "with run_mode train or finetune (--set run_mode=train)");
  }
  TrainingSettings settings = TrainingSettings::from(executable.model());
  Batches batches(executable, executor);
  if (Status status = batches.open(options); !status) {
    return fail(status.message());
  }
  int64_t accumulation = settings.gradientAccumulationSteps;
  int64_t steps = options.steps > 0 ? options.steps
                  : options.inputIds ? 1
                                     : std::max<int64_t>(1, settings.epochs *
                                                                batches.batchesPerEpoch() /
                                                                accumulation);
  std::vector<size_t> trained;
  const auto &parameterTable = *executable.root().parameters();
  for (size_t i = 0; i < parameterTable.size(); ++i) {
    if (!parameterTable.Get(i)->frozen()) {
      trained.push_back(i);
    }
  }
  Optimizer optimizer(settings, weights, trained);
  int64_t position = 0;
  if (!options.resume.empty()) {
    if (Status status = loadState(options.resume, executable, optimizer, position);
        !status) {
      return fail(status.message());
    }
  }
  int64_t first = optimizer.steps();
  if (first >= steps) {
    return fail("the checkpoint is at step " + std::to_string(first) +
                "; ask for more --steps than that");
  }
  size_t parameters = trained.size();
  Progress progress(first, steps);
  auto runStart = std::chrono::steady_clock::now();
  double lastLoss = 0;
  for (int64_t step = first; step < steps; ++step) {
    std::vector<Tensor> gradients;
    double loss = 0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      StatusOr<std::vector<Tensor>> inputs = batches.next(position);
      if (!inputs) {
        return fail(inputs.status().message());
      }
      StatusOr<std::vector<Tensor>> outputs =
          executor.run("forward_backward", inputs.take(), runOptions);
      if (!outputs) {
        return fail(outputs.status().message());
      }
      loss += (*outputs)[0].loadFloat(0) / accumulation;
      if (step == first && micro == 0 && !options.dumpGrads.empty()) {
        std::vector<std::pair<std::string, const Tensor *>> named{
            {"__loss__", &(*outputs)[0]}};
        for (size_t i = 0; i < parameters; ++i) {
          named.emplace_back(parameterTable.Get(trained[i])->name()->str(),
                             &(*outputs)[1 + i]);
        }
        if (Status status = writeSafetensors(options.dumpGrads, named); !status) {
          return fail(status.message());
        }
      }
      if (accumulation == 1) {
        // One micro-batch: its gradients are the step's (the entry's
        // outputs are this step's own tensors).
        gradients.assign(outputs->begin() + 1, outputs->end());
        continue;
      }
      for (size_t i = 0; i < parameters; ++i) {
        const Tensor &gradient = (*outputs)[1 + i];
        if (micro == 0) {
          StatusOr<Tensor> sum = allocator.allocate(DType::F32, gradient.shape());
          if (!sum) {
            return fail(sum.status().message());
          }
          gradients.push_back(sum.take());
        }
        for (int64_t k = 0; k < gradient.numElements(); ++k) {
          gradients[i].as<float>()[k] += gradient.loadFloat(k) / accumulation;
        }
      }
    }
    if (settings.useClipGrad) {
      clipGradients(gradients, settings.maxGradNorm);
    }
    double lr = settings.learningRateAt(step, steps);
    if (Status status = optimizer.step(weights, gradients, lr); !status) {
      return fail(status.message());
    }
    lastLoss = loss;
    progress.step(step, loss, lr, batches.tokensPerBatch() * accumulation);
    bool last = step + 1 == steps;
    bool periodic = options.saveEvery > 0 && (step + 1) % options.saveEvery == 0;
    if (!options.saveWeights.empty() && (last || periodic)) {
      std::string path = last ? options.saveWeights
                              : periodicCheckpointPath(options.saveWeights, step + 1);
      if (Status status =
              saveCheckpoint(path, executable, weights, optimizer, position);
          !status) {
        return fail(status.message());
      }
    }
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - runStart).count();
  int64_t ran = steps - first;
  std::printf("train: %lld steps, last loss %.6f\n", static_cast<long long>(steps),
              lastLoss);
  std::fprintf(stderr,
               "mf-run: %lld steps in %.1f ms (%.2f ms/step, %.0f tokens/s); "
               "peak RSS %.1f MB\n",
               static_cast<long long>(ran), seconds * 1e3, seconds * 1e3 / ran,
               ran * batches.tokensPerBatch() * accumulation / seconds,
               peakResidentMegabytes());
  return 0;
}
