//===- PipelineStep.cpp - one rank's part of a pipelined step -------------===//

#include "tools/mf-run/PipelineStep.h"

#include "runtime/io/Weights.h"

#include <chrono>

using namespace mfrt;

namespace {

/// The output of `entry` called `name`, or null.
const Tensor *outputNamed(const fb::Entry &entry,
                          const std::vector<Tensor> &outputs,
                          const std::string &name) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (entry.output_names()->Get(i)->str() == name) {
      return &outputs[i];
    }
  }
  return nullptr;
}

} // namespace

PipelineStep::PipelineStep(const Executable &executable, Executor &executor,
                           Communicator &ranks, const RunOptions &runOptions)
    : executable_(executable), executor_(executor), ranks_(ranks),
      runOptions_(runOptions),
      schedule_(*executable.pipeline()->stages()->Get(
          static_cast<uint32_t>(stageOfRank(executable, &ranks)))),
      stages_(executable.pipelineStages()),
      stage_(stageOfRank(executable, &ranks)),
      chunks_(executable.pipelineChunks()),
      microBatches_(executable.pipeline()->micro_batches()),
      stageAxis_(kPipelineAxis) {}

StatusOr<Tensor> PipelineStep::receive(const std::string &entryName,
                                       size_t index, int64_t part, int64_t from,
                                       int64_t micro, bool backward) {
  int64_t fromStage = executable_.pipelinePlaceOf(from).stage;
  if (fromStage == stage_) {
    auto found = handedOver_.find({part, micro, backward});
    if (found == handedOver_.end()) {
      return Status::error(StatusCode::Internal,
                           "the pipeline schedule runs a part before the "
                           "part on its stage that feeds it");
    }
    Tensor tensor = std::move(found->second);
    handedOver_.erase(found);
    return tensor;
  }
  MFRT_ASSIGN_OR_RETURN(Tensor tensor,
                        executor_.allocateInput(entryName, index));
  MFRT_RETURN_IF_ERROR(ranks_.receive(tensor, stageAxis_, fromStage,
                                      tag(micro, part, backward)));
  return tensor;
}

Status PipelineStep::send(const Tensor &tensor, int64_t part, int64_t micro,
                          bool backward) {
  int64_t toStage = executable_.pipelinePlaceOf(part).stage;
  if (toStage == stage_) {
    handedOver_[{part, micro, backward}] = tensor;
    return Status::ok();
  }
  return ranks_.send(tensor, stageAxis_, toStage, tag(micro, part, backward));
}

int PipelineStep::tag(int64_t micro, int64_t part, bool backward) const {
  // Tags below 2^15, which MPI guarantees (the loader bounds the chunks).
  int64_t wrap = 16384 / chunks_;
  return static_cast<int>(((micro % wrap) * chunks_ + part / stages_) * 2 +
                          (backward ? 1 : 0));
}

StatusOr<double> PipelineStep::run(const std::vector<MicroBatch> &batches,
                                   double lr, int64_t step) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point began = Clock::now();
  auto timed =
      [&](const std::string &name,
          std::vector<Tensor> inputs) -> StatusOr<std::vector<Tensor>> {
    Clock::time_point start = Clock::now();
    StatusOr<std::vector<Tensor>> outputs =
        executor_.run(name, std::move(inputs), runOptions_);
    busySeconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return outputs;
  };
  int64_t parts = stages_ * chunks_;
  // Per (chunk, micro-batch) between its forward and backward: the
  // part's input and what the forward saved for the backward; between a
  // split backward and its W: what the W takes (the backward's inputs it
  // reads and what the backward saved for it).
  std::map<std::pair<int64_t, int64_t>, std::vector<Tensor>> kept, keptForW;
  double loss = 0;
  size_t slots = schedule_.backward()->size();
  for (size_t slot = 0; slot < slots; ++slot) {
    int64_t micro = schedule_.micro_batch()->Get(slot);
    int64_t chunk = schedule_.chunk() ? schedule_.chunk()->Get(slot) : 0;
    int64_t part = executable_.pipelinePartOf(stage_, chunk);
    bool first = part == 0, last = part + 1 == parts;
    std::string prefix = executable_.pipelinePrefixOf(part);
    const MicroBatch &batch = batches[static_cast<size_t>(micro)];
    if (schedule_.weight() && schedule_.weight()->Get(slot)) {
      auto found = keptForW.find({chunk, micro});
      if (found == keptForW.end()) {
        return Status::error(StatusCode::Internal,
                             "the pipeline schedule runs a weight-gradient "
                             "pass before its backward");
      }
      MFRT_RETURN_IF_ERROR(
          timed(prefix + "weight_gradients", std::move(found->second))
              .status());
      keptForW.erase(found);
      continue;
    }
    if (!schedule_.backward()->Get(slot)) {
      std::string name = prefix + "forward";
      Tensor input = batch.ids;
      if (!first) {
        MFRT_ASSIGN_OR_RETURN(input,
                              receive(name, 0, part, part - 1, micro, false));
      }
      MFRT_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, timed(name, {input}));
      MFRT_RETURN_IF_ERROR(send(outputs[0], part + 1, micro, false));
      outputs[0] = input; // kept: the input, then the saved values
      kept[{chunk, micro}] = std::move(outputs);
      // What the next stage has received goes now: at most what it has
      // not yet stays.
      MFRT_RETURN_IF_ERROR(ranks_.progressSends());
      continue;
    }
    std::string name = executable_.pipelineBackwardOf(part);
    bool split = name == prefix + "input_gradients";
    std::vector<Tensor> inputs;
    if (last) {
      Tensor input = batch.ids;
      if (!first) {
        MFRT_ASSIGN_OR_RETURN(input,
                              receive(name, 0, part, part - 1, micro, false));
      }
      inputs = {input, batch.labels};
    } else {
      auto found = kept.find({chunk, micro});
      if (found == kept.end()) {
        return Status::error(StatusCode::Internal,
                             "the pipeline schedule runs a backward before its "
                             "forward");
      }
      MFRT_ASSIGN_OR_RETURN(Tensor gradient,
                            receive(name, 1, part, part + 1, micro, true));
      inputs = {found->second[0], gradient};
      inputs.insert(inputs.end(), found->second.begin() + 1,
                    found->second.end());
      kept.erase(found);
    }
    const fb::Entry &ran = *executable_.entry(name);
    // The backward's inputs, by name, for its W.
    std::map<std::string, Tensor> byName;
    for (size_t i = 0; split && i < inputs.size(); ++i) {
      byName[ran.input_names()->Get(static_cast<uint32_t>(i))->str()] =
          inputs[i];
    }
    MFRT_ASSIGN_OR_RETURN(std::vector<Tensor> outputs,
                          timed(name, std::move(inputs)));
    if (const Tensor *value = outputNamed(ran, outputs, "loss")) {
      loss += value->loadFloat(0) / static_cast<double>(microBatches_);
    }
    if (!first) {
      const Tensor *gradient = outputNamed(ran, outputs, "input_gradient");
      MFRT_RETURN_IF_ERROR(send(*gradient, part - 1, micro, true));
    }
    if (split) {
      // What the W takes, by name: the backward's inputs it reads and the
      // backward's `wsaved` outputs (the loader checked they are these).
      for (size_t i = 0; i < outputs.size(); ++i) {
        byName[ran.output_names()->Get(static_cast<uint32_t>(i))->str()] =
            outputs[i];
      }
      const fb::Entry &weights =
          *executable_.entry(prefix + "weight_gradients");
      std::vector<Tensor> forWeights;
      for (const auto *input : *weights.input_names()) {
        forWeights.push_back(byName.at(input->str()));
      }
      keptForW[{chunk, micro}] = std::move(forWeights);
    }
    MFRT_RETURN_IF_ERROR(ranks_.progressSends());
  }
  // The update, once every gradient this stage sends is on its way.
  std::string update = mfshapes::stageEntryPrefix(stage_, 0, 1) + "train_step";
  std::vector<Tensor> scalars;
  for (double value : {lr, static_cast<double>(step)}) {
    MFRT_ASSIGN_OR_RETURN(Tensor scalar,
                          executor_.allocateInput(update, scalars.size()));
    scalar.as<float>()[0] = static_cast<float>(value);
    scalars.push_back(scalar);
  }
  MFRT_RETURN_IF_ERROR(timed(update, std::move(scalars)).status());
  MFRT_RETURN_IF_ERROR(ranks_.waitSends());
  // The loss of the stage holding the model's last part, on every stage
  // (the others add nothing).
  MFRT_RETURN_IF_ERROR(
      ranks_.allReduceInPlace(&loss, 1, /*max=*/false, {stageAxis_}));
  runSeconds_ += std::chrono::duration<double>(Clock::now() - began).count();
  return loss;
}
