//===- Train.cpp - mf-run's training loop ---------------------------------===//
//
// Each step is compiled: gradient_accumulation_steps - 1 micro-batches
// through accumulate_gradients, then one through train_step, which clips,
// updates the weights and the optimizer state (both parameters, in place)
// with the learning rate the host computes from the schedule.
// Data: consecutive windows of seq_length + 1 tokens, batch_size per micro
// batch, wrapping at the end of the data. A checkpoint holds the trained
// parameters, the optimizer state (optimizer.m.*, optimizer.v.*), the step
// and the data position, written atomically; resuming from it continues
// bit for bit.
//
//===----------------------------------------------------------------------===//

#include "tools/mf-run/Train.h"

#include "tools/mf-run/Fail.h"
#include "tools/mf-run/PipelineStep.h"

#include "runtime/format/TrainingSettings.h"
#include "runtime/io/Safetensors.h"
#include "runtime/text/TokenIds.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>

using namespace mfrt;

namespace {

/// Where the batches come from.
class Batches {
public:
  /// Ids and labels are allocated as inputs 0 of `idsEntry` and 1 of
  /// `labelsEntry`.
  Batches(const Executable &executable, Executor &executor,
          std::string idsEntry = "train_step",
          std::string labelsEntry = "train_step")
      : model_(executable.model()), executor_(executor),
        idsEntry_(std::move(idsEntry)), labelsEntry_(std::move(labelsEntry)) {}

  Status open(const TrainOptions &options) {
    if (options.ranks) {
      rank_ = options.ranks->indexAlong({kDataAxis});
      ranks_ = options.ranks->extentAlong({kDataAxis});
      if (options.ranks->grid().size() > kContextAxis) {
        chunks_ = options.ranks->extentAlong({kContextAxis});
        runs_ = contextRunsOf(model_, options.ranks->indexAlong({kContextAxis}),
                              chunks_);
      }
    }
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
      if (chunks_ > 1 && static_cast<int64_t>(ids->size()) != seq + 1) {
        // Padding would leave the ranks' blocks different counts of labels,
        // and each rank's loss is the mean over its own.
        return Status::error(
            "--input-ids under context parallelism needs seq_length + 1 = " +
            std::to_string(seq + 1) + " ids (each of the " +
            std::to_string(chunks_) +
            " ranks' blocks of the sequence must count as many labels), got " +
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
        readTokens(options.data, model_.vocab_size(), options.encodeText);
    if (!data) {
      return data.status();
    }
    data_ = data.take();
    if (static_cast<int64_t>(data_.size()) < globalTokensPerBatch() + 1) {
      return Status::error(
          "'" + options.data + "' has " + std::to_string(data_.size()) +
          " tokens; one training batch needs batch_size x " +
          (ranks_ > 1 ? "data_parallel x " : "") + "seq_length + 1 = " +
          std::to_string(globalTokensPerBatch() + 1));
    }
    return Status::ok();
  }

  /// Tokens of one rank's batch, and of all data-parallel ranks' batches.
  int64_t tokensPerBatch() const {
    return model_.batch_size() * model_.seq_length();
  }
  int64_t globalTokensPerBatch() const { return tokensPerBatch() * ranks_; }
  /// Whole global batches in the data (1 for --input-ids).
  int64_t batchesPerEpoch() const {
    return data_.empty() ? 1
                         : (static_cast<int64_t>(data_.size()) - 1) /
                               globalTokensPerBatch();
  }

  /// Whether a data position (a checkpoint's) lies within the data.
  bool holds(int64_t position) const {
    return data_.empty() || position <= static_cast<int64_t>(data_.size());
  }

  /// ids and labels of the batch at `position`; advances it.
  StatusOr<std::vector<Tensor>> next(int64_t &position) {
    std::vector<Tensor> inputs;
    for (size_t index : {0, 1}) {
      StatusOr<Tensor> input =
          executor_.allocateInput(index == 0 ? idsEntry_ : labelsEntry_, index);
      if (!input) {
        return input.status();
      }
      inputs.push_back(input.take());
    }
    int32_t *ids = inputs[0].as<int32_t>();
    int32_t *labels = inputs[1].as<int32_t>();
    int64_t batch = model_.batch_size(), seq = model_.seq_length();
    // With context parallelism this rank's runs of each row's positions.
    int64_t block = runs_.positions();
    auto positionOf = [&](int64_t i) { return runs_.positionOf(i); };
    if (!sequence_.empty()) {
      // The sequence in every row; labels shifted by one, padding ignored.
      int64_t length = static_cast<int64_t>(sequence_.size());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < block; ++i) {
          int64_t at = b * block + i, p = positionOf(i);
          ids[at] = p < length ? sequence_[p]
                               : static_cast<int32_t>(model_.pad_token_id());
          labels[at] = p + 1 < length
                           ? sequence_[p + 1]
                           : static_cast<int32_t>(model_.ignore_token_id());
        }
      }
      return inputs;
    }
    if (position + globalTokensPerBatch() + 1 > static_cast<int64_t>(data_.size())) {
      position = 0; // the next epoch
    }
    int64_t first = position + rank_ * tokensPerBatch(); // this rank's rows
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < block; ++i) {
        int64_t from = first + b * seq + positionOf(i);
        ids[b * block + i] = data_[from];
        labels[b * block + i] = data_[from + 1];
      }
    }
    position += globalTokensPerBatch();
    return inputs;
  }

private:
  const fb::ModelInfo &model_;
  Executor &executor_;
  std::string idsEntry_, labelsEntry_;
  std::vector<int32_t> sequence_, data_;
  int64_t rank_ = 0, ranks_ = 1;
  /// The context-parallel ranks, and this rank's runs of each sequence's
  /// positions.
  int64_t chunks_ = 1;
  ContextRuns runs_ = contextRunsOf(model_, 0, 1);
};

/// What a checkpoint holds: the trained parameters (all of them, or LoRA's
/// adapters alone: the frozen base is not part of it) and the optimizer
/// state, with the step and the data position.
/// Every rank calls it (split parameters are gathered); the primary rank
/// writes the checkpoint a single-rank run would.
Status saveCheckpoint(const std::string &path, const Executable &executable,
                      const Weights &weights, int64_t step, int64_t position,
                      const TrainOptions &options) {
  MFRT_RETURN_IF_ERROR(
      weights.save(executable, path, options.ranks, /*withFrozen=*/false,
                   {{"mfc.step", std::to_string(step)},
                    {"mfc.data_position", std::to_string(position)}}));
  return savePeftBeside(path, executable, weights, options.ranks);
}

/// The step and data position of a checkpoint, which must hold every
/// piece of optimizer state (the weights came from it already).
Status loadProgress(const std::string &path, const Executable &executable,
                    int64_t &step, int64_t &position) {
  StatusOr<CheckpointFile> file = CheckpointFile::open(path);
  if (!file) {
    return file.status();
  }
  const auto &metadata = file->metadata();
  auto stepEntry = metadata.find("mfc.step");
  auto dataEntry = metadata.find("mfc.data_position");
  if (stepEntry == metadata.end() || dataEntry == metadata.end()) {
    return Status::error("'" + path + "' is not an mf-run training checkpoint "
                         "(no mfc.step / mfc.data_position metadata); use it "
                         "with --weights instead");
  }
  // Metadata is text: whole numbers only, in range, or the run would
  // restart its schedule or read before its data.
  auto whole = [&](const std::string &key, const std::string &text,
                   int64_t least, int64_t &out) -> Status {
    const char *end = text.data() + text.size();
    auto [stop, error] = std::from_chars(text.data(), end, out);
    if (text.empty() || error != std::errc() || stop != end || out < least) {
      return Status::error("'" + path + "': metadata " + key + " is '" + text +
                           "', expected a whole number of at least " +
                           std::to_string(least) +
                           "; the checkpoint is corrupt");
    }
    return Status::ok();
  };
  MFRT_RETURN_IF_ERROR(whole("mfc.step", stepEntry->second, 1, step));
  MFRT_RETURN_IF_ERROR(
      whole("mfc.data_position", dataEntry->second, 0, position));
  for (const fb::Parameter *parameter : *executable.root().parameters()) {
    if (!parameter->state()) {
      continue;
    }
    // A stacked parameter's state is one tensor per part (per expert).
    std::vector<std::string> names;
    if (parameter->parts() && parameter->parts()->size()) {
      for (const flatbuffers::String *part : *parameter->parts()) {
        names.push_back(part->str());
      }
    } else {
      names.push_back(parameter->name()->str());
    }
    for (const std::string &name : names) {
      if (file->tensors().find(name) == file->tensors().end()) {
        return Status::error("'" + path + "' has no optimizer state '" + name +
                             "'");
      }
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
  Progress(int64_t first, int64_t total, bool shown)
      : first_(first), total_(total), shown_(shown), tty_(isatty(fileno(stderr))),
        interval_(std::max<int64_t>(1, (total - first) / 20)),
        start_(std::chrono::steady_clock::now()) {}

  void step(int64_t step, double loss, double lr, int64_t tokens) {
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start_).count();
    int64_t done = step + 1 - first_;
    double eta = elapsed / done * (total_ - step - 1);
    double rate = tokens * done / std::max(elapsed, 1e-9);
    if (!shown_) {
      return;
    }
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
  bool shown_, tty_;
  int64_t interval_; // log lines: about 20 per run when not a terminal
  std::chrono::steady_clock::time_point start_;
};

/// --dump-grads: the loss and gradients of the first micro-batch, from
/// forward_backward (before the step changes the weights).
Status dumpGradients(const std::string &path, const Executable &executable,
                     Executor &executor, const std::vector<Tensor> &inputs,
                     const RunOptions &runOptions) {
  StatusOr<std::vector<Tensor>> outputs =
      executor.run("forward_backward", inputs, runOptions);
  if (!outputs) {
    return outputs.status();
  }
  const auto &parameters = *executable.root().parameters();
  std::vector<std::pair<std::string, const Tensor *>> named{
      {"__loss__", &(*outputs)[0]}};
  size_t output = 1;
  for (const fb::Parameter *parameter : parameters) {
    if (!parameter->frozen() && !parameter->state()) {
      named.emplace_back(parameter->name()->str(), &(*outputs)[output++]);
    }
  }
  return writeSafetensors(path, named);
}

} // namespace

Status mfrt::savePeftBeside(const std::string &path,
                            const Executable &executable,
                            const Weights &weights, Communicator *ranks) {
  const fb::Training *training = executable.model().training();
  if (!training || training->lora_scale() == 0.0) {
    return Status::ok();
  }
  bool primary = !ranks || ranks->rank() == 0;
  if (executable.model().family() == fb::ModelFamily::GPT2) {
    if (primary) {
      std::fprintf(stderr, "mf-run: note: GPT-2's LoRA adapters (on thirds of "
                           "the fused c_attn) have no PEFT form; they are in "
                           "'%s' only\n",
                   path.c_str());
    }
    return Status::ok();
  }
  std::string stem = path;
  const std::string suffix = ".safetensors";
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
    stem.resize(stem.size() - suffix.size());
  }
  std::string folder = stem + ".peft";
  MFRT_RETURN_IF_ERROR(weights.savePeftAdapters(executable, folder, ranks));
  if (primary) {
    std::fprintf(stderr,
                 "mf-run: note: the LoRA adapters also in PEFT's layout: "
                 "%s/ (adapter_config.json, adapter_model.safetensors)\n",
                 folder.c_str());
  }
  return Status::ok();
}

Status mfrt::checkTrainable(const Executable &executable) {
  int64_t accumulation =
      TrainingSettings::from(executable.model()).gradientAccumulationSteps;
  if (executable.pipeline()) {
    return Status::ok(); // its stages' entries were checked at load
  }
  if (!executable.entry("train_step") ||
      (accumulation > 1 && !executable.entry("accumulate_gradients"))) {
    return Status::error(StatusCode::FailedPrecondition,
                         "train needs a 'train_step' entry: compile the config "
                         "with run_mode train or finetune (--set "
                         "run_mode=train)");
  }
  return Status::ok();
}

int mfrt::runTraining(const TrainOptions &options, const Executable &executable,
                      const Weights &weights, Executor &executor,
                      const RunOptions &runOptions) {
  TrainingSettings settings = TrainingSettings::from(executable.model());
  int64_t accumulation = settings.gradientAccumulationSteps;
  if (Status status = checkTrainable(executable); !status) {
    return fail(status);
  }
  // A pipelined program: this rank's stage follows the compiled schedule
  // over micro_batch_num micro-batches a step.
  std::optional<PipelineStep> pipeline;
  if (executable.pipeline()) {
    if (!options.ranks) {
      return fail(StatusCode::FailedPrecondition,
                  "a pipelined model.bin runs under mpirun");
    }
    pipeline.emplace(executable, executor, *options.ranks, runOptions);
    accumulation = pipeline->microBatches();
  }
  Batches batches = pipeline
                        ? Batches(executable, executor, pipeline->idsEntry(),
                                  pipeline->labelsEntry())
                        : Batches(executable, executor);
  if (Status status = batches.open(options); !status) {
    return fail(status);
  }
  int64_t steps = options.steps > 0 ? options.steps
                  : options.inputIds ? 1
                                     : std::max<int64_t>(1, settings.epochs *
                                                                batches.batchesPerEpoch() /
                                                                accumulation);
  int64_t first = 0, position = 0;
  if (!options.resume.empty()) {
    if (Status status = loadProgress(options.resume, executable, first, position);
        !status) {
      return fail(status);
    }
    if (!batches.holds(position)) {
      return fail(StatusCode::InvalidArgument,
                  "'" + options.resume + "' continues at token " +
                      std::to_string(position) + ", past the end of '" +
                      options.data +
                      "'; resume with the data it was trained on");
    }
  }
  if (first >= steps) {
    return failUsage("the checkpoint is at step " + std::to_string(first) +
                     "; ask for more --steps than that");
  }
  auto scalar = [&](size_t index, double value) -> StatusOr<Tensor> {
    StatusOr<Tensor> tensor = executor.allocateInput("train_step", index);
    if (tensor) {
      tensor->as<float>()[0] = static_cast<float>(value);
    }
    return tensor;
  };
  bool primaryRank = !options.ranks || options.ranks->rank() == 0;
  Progress progress(first, steps, primaryRank);
  auto runStart = std::chrono::steady_clock::now();
  // The first step also touches every page of the arena and the optimizer
  // state for the first time: the steps after it are the steady rate.
  auto firstStepEnd = runStart;
  double lastLoss = 0;
  for (int64_t step = first; step < steps; ++step) {
    double loss = 0;
    double lr = settings.learningRateAt(step, steps);
    if (pipeline) {
      std::vector<MicroBatch> micro;
      for (int64_t i = 0; i < accumulation; ++i) {
        StatusOr<std::vector<Tensor>> inputs = batches.next(position);
        if (!inputs) {
          return fail(inputs.status());
        }
        micro.push_back({(*inputs)[0], (*inputs)[1]});
      }
      StatusOr<double> stepLoss =
          pipeline->run(micro, lr, static_cast<int64_t>(step + 1));
      if (!stepLoss) {
        return fail(stepLoss.status());
      }
      loss = *stepLoss;
    }
    for (int64_t micro = 0; !pipeline && micro < accumulation; ++micro) {
      StatusOr<std::vector<Tensor>> inputs = batches.next(position);
      if (!inputs) {
        return fail(inputs.status());
      }
      if (step == first && micro == 0 && !options.dumpGrads.empty()) {
        if (Status status = dumpGradients(options.dumpGrads, executable, executor,
                                          *inputs, runOptions);
            !status) {
          return fail(status);
        }
      }
      bool last = micro + 1 == accumulation;
      if (last) {
        for (auto [index, value] : {std::pair<size_t, double>{2, lr},
                                    {3, static_cast<double>(step + 1)}}) {
          StatusOr<Tensor> tensor = scalar(index, value);
          if (!tensor) {
            return fail(tensor.status());
          }
          inputs->push_back(tensor.take());
        }
      }
      StatusOr<std::vector<Tensor>> outputs =
          executor.run(last ? "train_step" : "accumulate_gradients",
                       inputs.take(), runOptions);
      if (!outputs) {
        return fail(outputs.status());
      }
      loss += (*outputs)[0].loadFloat(0) / accumulation;
    }
    lastLoss = loss;
    if (step == first) {
      firstStepEnd = std::chrono::steady_clock::now();
    }
    progress.step(step, loss, lr, batches.globalTokensPerBatch() * accumulation);
    bool last = step + 1 == steps;
    bool periodic = options.saveEvery > 0 && (step + 1) % options.saveEvery == 0;
    if (!options.saveWeights.empty() && (last || periodic)) {
      std::string path = last ? options.saveWeights
                              : periodicCheckpointPath(options.saveWeights, step + 1);
      if (Status status =
              saveCheckpoint(path, executable, weights, step + 1, position,
                             options);
          !status) {
        return fail(status);
      }
    }
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - runStart).count();
  int64_t ran = steps - first;
  std::printf("train: %lld steps, last loss %.6f\n", static_cast<long long>(steps),
              lastLoss);
  std::string steady;
  if (ran > 1) {
    double after = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - firstStepEnd).count();
    char text[64];
    std::snprintf(text, sizeof text, ", %.2f ms/step after the first",
                  after * 1e3 / (ran - 1));
    steady = text;
  }
  if (pipeline && ran > 0) {
    // Every stage's own line (stderr is not silenced on other ranks): how
    // much of a step it computed and how much it waited.
    double run = pipeline->runSeconds(), busy = pipeline->busySeconds();
    std::fprintf(stderr,
                 "mf-run: pipeline stage %lld (rank %lld): %.2f ms/step in "
                 "its entries, %.2f ms/step waiting (%.1f%% of its steps)\n",
                 static_cast<long long>(pipeline->stage()),
                 static_cast<long long>(options.ranks->rank()),
                 busy * 1e3 / ran, (run - busy) * 1e3 / ran,
                 100 * (run - busy) / std::max(run, 1e-12));
  }
  if (!primaryRank) {
    return 0;
  }
  std::fprintf(stderr,
               "mf-run: %lld steps in %.1f ms (%.2f ms/step, %.0f tokens/s%s); "
               "peak RSS %.1f MB\n",
               static_cast<long long>(ran), seconds * 1e3, seconds * 1e3 / ran,
               ran * batches.globalTokensPerBatch() * accumulation / seconds,
               steady.c_str(), peakResidentMegabytes());
  return 0;
}
