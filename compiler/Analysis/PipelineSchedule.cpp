//===- PipelineSchedule.cpp - the order of a pipeline's passes ------------===//

#include "compiler/Analysis/PipelineSchedule.h"

#include <algorithm>

using namespace mfc;

std::vector<StageSchedule> mfc::schedulePipeline(const std::string &scheduler,
                                                 int64_t stages,
                                                 int64_t microBatches) {
  std::vector<StageSchedule> schedule(static_cast<size_t>(stages));
  for (int64_t stage = 0; stage < stages; ++stage) {
    StageSchedule &own = schedule[static_cast<size_t>(stage)];
    if (stage + 1 == stages) {
      for (int64_t micro = 0; micro < microBatches; ++micro) {
        own.slots.push_back({/*backward=*/true, micro});
      }
      continue; // its forward is part of each backward: nothing kept
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
  }
  return schedule;
}

double mfc::bubbleFraction(int64_t stages, int64_t microBatches) {
  return static_cast<double>(stages - 1) /
         static_cast<double>(microBatches + stages - 1);
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
  }
  return text;
}
