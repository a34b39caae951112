//===- PipelineSchedule.cpp - the order of a pipeline's passes ------------===//

#include "compiler/Analysis/PipelineSchedule.h"

#include <algorithm>

using namespace mfc;

namespace {

/// Stage `stage`'s 1F1B or GPipe slots without interleaving.
StageSchedule wholeStage(const std::string &scheduler, int64_t stages,
                         int64_t stage, int64_t microBatches) {
  StageSchedule own;
  if (stage + 1 == stages) {
    for (int64_t micro = 0; micro < microBatches; ++micro) {
      own.slots.push_back({/*backward=*/true, micro});
    }
    return own; // its forward is part of each backward: nothing kept
  }
  // GPipe's warm-up is every forward (the frontend and the dialect's
  // verifier admit only the schedulers of kPipelineSchedulers).
  int64_t warmup = scheduler == "gpipe"
                       ? microBatches
                       : std::min(stages - stage - 1, microBatches);
  int64_t forward = 0, backward = 0;
  for (; forward < warmup; ++forward) {
    own.slots.push_back({false, forward});
  }
  while (forward < microBatches) {
    own.slots.push_back({false, forward++});
    own.inFlight = std::max(own.inFlight, forward - backward);
    own.slots.push_back({true, backward++});
  }
  own.inFlight = std::max(own.inFlight, forward - backward);
  while (backward < microBatches) {
    own.slots.push_back({true, backward++});
  }
  return own;
}

/// Stage `stage`'s interleaved 1F1B slots (see the header).
StageSchedule interleavedStage(int64_t stages, int64_t stage,
                               int64_t microBatches, int64_t chunks) {
  StageSchedule own;
  own.chunks = chunks;
  int64_t passes = microBatches * chunks, group = stages * chunks;
  // The k-th pass of each direction: micro-batches in groups of p, each
  // group through every chunk (backwards from the last chunk).
  auto slot = [&](int64_t k, bool backward) {
    int64_t chunk = (k % group) / stages;
    return PipelineSlot{backward, (k / group) * stages + k % stages,
                        backward ? chunks - 1 - chunk : chunk};
  };
  int64_t warmup =
      std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, passes);
  std::vector<PipelineSlot> order;
  for (int64_t k = 0; k < warmup; ++k) {
    order.push_back(slot(k, false));
  }
  for (int64_t k = 0; k + warmup < passes; ++k) {
    order.push_back(slot(k + warmup, false));
    order.push_back(slot(k, true));
  }
  for (int64_t k = std::max<int64_t>(passes - warmup, 0); k < passes; ++k) {
    order.push_back(slot(k, true));
  }
  // The model's last part computes its forward in its backward.
  bool lastStage = stage + 1 == stages;
  int64_t kept = 0;
  for (const PipelineSlot &pass : order) {
    bool lastPart = lastStage && pass.chunk == chunks - 1;
    if (lastPart && !pass.backward) {
      continue;
    }
    own.slots.push_back(pass);
    if (!lastPart) {
      kept += pass.backward ? -1 : 1;
      own.inFlight = std::max(own.inFlight, kept);
    }
  }
  return own;
}

} // namespace

std::vector<StageSchedule> mfc::schedulePipeline(const std::string &scheduler,
                                                 int64_t stages,
                                                 int64_t microBatches,
                                                 int64_t chunks) {
  std::vector<StageSchedule> schedule;
  for (int64_t stage = 0; stage < stages; ++stage) {
    schedule.push_back(
        chunks > 1 ? interleavedStage(stages, stage, microBatches, chunks)
                   : wholeStage(scheduler, stages, stage, microBatches));
  }
  return schedule;
}

double mfc::bubbleFraction(int64_t stages, int64_t microBatches,
                           int64_t chunks) {
  return static_cast<double>(stages - 1) /
         static_cast<double>(chunks * microBatches + stages - 1);
}

std::string mfc::describe(const StageSchedule &stage, size_t limit) {
  std::string text;
  size_t count = stage.slots.size();
  for (size_t i = 0; i < count; ++i) {
    // The first and last slots of a long schedule: its warm-up, its
    // steady state and its cool-down.
    if (count > limit && i == limit * 2 / 3) {
      text += " ...";
      i = count - limit / 3;
    }
    const PipelineSlot &slot = stage.slots[i];
    if (!text.empty()) {
      text += ' ';
    }
    text += (slot.backward ? 'B' : 'F') + std::to_string(slot.microBatch);
    if (stage.chunks > 1) {
      text += '.' + std::to_string(slot.chunk);
    }
  }
  return text;
}
