//===- PipelineSchedule.cpp - the order of a pipeline's passes ------------===//

#include "compiler/Analysis/PipelineSchedule.h"

#include "shapes/GridAxes.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <optional>

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

/// A pass's length in a simulated step: a forward or a W 1 unit, a
/// backward 2 (1 when its W runs apart), and 1 more on the model's last
/// part (its forward).
int64_t passUnits(const PipelineSlot &slot, bool lastPart, bool split) {
  if (!slot.backward || slot.weight) {
    return 1;
  }
  return (split ? 1 : 2) + (lastPart ? 1 : 0);
}

/// ZB-V's order (see the header).
std::vector<StageSchedule> zeroBubbleV(int64_t stages, int64_t microBatches) {
  int64_t parts = 2 * stages, last = parts - 1;
  auto place = [&](int64_t part) {
    return mfshapes::pipelinePlaceOf(part, stages, /*vShape=*/true);
  };
  // Per part and micro-batch, when its F and its B end (LLONG_MAX: not
  // yet); per part, the next micro-batch each way.
  std::vector<std::vector<int64_t>> forwardEnd(
      static_cast<size_t>(parts),
      std::vector<int64_t>(static_cast<size_t>(microBatches), LLONG_MAX)),
      backwardEnd = forwardEnd;
  std::vector<int64_t> nextForward(static_cast<size_t>(parts), 0),
      nextBackward = nextForward;
  struct StageState {
    int64_t freeAt = 0, kept = 0;
    std::deque<PipelineSlot> weights; // Ws whose B has run, oldest first
  };
  std::vector<StageState> state(static_cast<size_t>(stages));
  std::vector<StageSchedule> result(static_cast<size_t>(stages));
  for (StageSchedule &own : result) {
    own.chunks = 2;
  }
  // Each stage keeps at most 1F1B's count of chunk passes (2p halves of
  // p whole stages) unless no stage could otherwise go on.
  int64_t cap = 2 * stages;
  bool relaxed = false;
  // F, B and W of every part, 3 a micro-batch (the first part's B is 2:
  // its W too; the last part's too: its F).
  int64_t remaining = 6 * stages * microBatches;
  for (int64_t now = 0; remaining > 0; ++now) {
    bool ran = false, busy = false;
    for (int64_t stage = 0; stage < stages; ++stage) {
      StageState &own = state[static_cast<size_t>(stage)];
      if (own.freeAt > now) {
        busy = true;
        continue;
      }
      // Its parts, the later first (a backward runs from the last part).
      int64_t partsHere[2] = {parts - 1 - stage, stage};
      std::optional<std::pair<int64_t, bool>> chosen; // (part, backward)
      int64_t chosenMicro = LLONG_MAX;
      for (int64_t part : partsHere) {
        int64_t micro = nextBackward[static_cast<size_t>(part)];
        // The last part's B keeps its F's values until its W.
        if (micro >= microBatches || micro >= chosenMicro ||
            (part == last && own.kept >= cap && !relaxed)) {
          continue;
        }
        size_t at = static_cast<size_t>(micro);
        bool ready =
            part == last
                ? forwardEnd[static_cast<size_t>(part - 1)][at] <= now
                : forwardEnd[static_cast<size_t>(part)][at] <= now &&
                      backwardEnd[static_cast<size_t>(part + 1)][at] <= now;
        if (ready) {
          chosen = {part, true};
          chosenMicro = micro;
        }
      }
      if (!chosen && (own.kept < cap || relaxed)) {
        for (int64_t part : partsHere) {
          int64_t micro = nextForward[static_cast<size_t>(part)];
          if (part == last || micro >= microBatches || micro >= chosenMicro) {
            continue;
          }
          if (part == 0 || forwardEnd[static_cast<size_t>(part - 1)]
                                     [static_cast<size_t>(micro)] <= now) {
            chosen = {part, false};
            chosenMicro = micro;
          }
        }
      }
      PipelineSlot slot;
      int64_t cost = 1;
      if (chosen) {
        auto [part, backward] = *chosen;
        slot = PipelineSlot{backward, chosenMicro, place(part).chunk};
        size_t at = static_cast<size_t>(chosenMicro);
        if (backward) {
          ++nextBackward[static_cast<size_t>(part)];
          // The first part's B is its W too, the last part's its F too.
          cost = passUnits(slot, part == last, /*split=*/part != 0);
          backwardEnd[static_cast<size_t>(part)][at] = now + cost;
          if (part != 0) {
            own.weights.push_back({true, chosenMicro, slot.chunk, true});
          }
          own.kept += part == last ? 1 : part == 0 ? -1 : 0;
        } else {
          ++nextForward[static_cast<size_t>(part)];
          forwardEnd[static_cast<size_t>(part)][at] = now + cost;
          ++own.kept;
        }
      } else if (!own.weights.empty()) {
        slot = own.weights.front();
        own.weights.pop_front();
        --own.kept;
      } else {
        continue; // idle
      }
      StageSchedule &schedule = result[static_cast<size_t>(stage)];
      schedule.slots.push_back(slot);
      schedule.inFlight = std::max(schedule.inFlight, own.kept);
      own.freeAt = now + cost;
      remaining -= cost;
      ran = true;
    }
    // Every stage free and none could start: let them keep more (a ready F
    // always exists then: the parts' dependencies have no cycle).
    if (!ran && !busy && relaxed) {
      break;
    }
    relaxed = !ran && !busy;
  }
  return result;
}

} // namespace

std::vector<StageSchedule> mfc::schedulePipeline(const std::string &scheduler,
                                                 int64_t stages,
                                                 int64_t microBatches,
                                                 int64_t chunks) {
  if (scheduler == "zero_bubble_v") {
    return zeroBubbleV(stages, microBatches);
  }
  std::vector<StageSchedule> schedule;
  for (int64_t stage = 0; stage < stages; ++stage) {
    schedule.push_back(
        chunks > 1 ? interleavedStage(stages, stage, microBatches, chunks)
                   : wholeStage(scheduler, stages, stage, microBatches));
  }
  return schedule;
}

double mfc::bubbleFraction(const std::string &scheduler, int64_t stages,
                           int64_t microBatches, int64_t chunks) {
  if (scheduler == "zero_bubble_v") {
    // As the ranks would run it: its order is found under the same costs.
    return simulateTimeline(scheduler, zeroBubbleV(stages, microBatches))
        .idle();
  }
  return static_cast<double>(stages - 1) /
         static_cast<double>(chunks * microBatches + stages - 1);
}

namespace {

std::string slotName(const PipelineSlot &slot, int64_t chunks) {
  std::string name = (slot.weight     ? "W"
                      : slot.backward ? "B"
                                      : "F") +
                     std::to_string(slot.microBatch);
  return chunks > 1 ? name + "." + std::to_string(slot.chunk) : name;
}

} // namespace

double Timeline::idle() const {
  int64_t busy = 0;
  for (const std::vector<int64_t> &stage : lengths) {
    for (int64_t units : stage) {
      busy += units;
    }
  }
  int64_t total = length * static_cast<int64_t>(lengths.size());
  return total == 0
             ? 0.0
             : 1.0 - static_cast<double>(busy) / static_cast<double>(total);
}

namespace {

/// The simulation behind simulateTimeline and simulateStepTimes: each
/// stage runs its slots in order, a slot starting when its stage is free
/// and what it waits for has ended and arrived.
template <typename Time, typename PassLength, typename MessageLength>
void simulateSlots(const std::string &scheduler,
                   const std::vector<StageSchedule> &schedule,
                   PassLength passLength, MessageLength messageLength,
                   std::vector<std::vector<Time>> &starts,
                   std::vector<std::vector<Time>> &lengths, Time &end) {
  int64_t stages = static_cast<int64_t>(schedule.size());
  int64_t chunks = schedule.empty() ? 1 : schedule[0].chunks;
  int64_t parts = stages * chunks;
  bool vShape = mfshapes::isVShapedScheduler(scheduler);
  int64_t micro = 0;
  for (const StageSchedule &own : schedule) {
    for (const PipelineSlot &slot : own.slots) {
      micro = std::max(micro, slot.microBatch + 1);
    }
  }
  // Per (part, micro-batch): when its forward and its backward end (empty:
  // not yet run).
  std::vector<std::vector<std::optional<Time>>> forwardEnd(
      static_cast<size_t>(parts),
      std::vector<std::optional<Time>>(static_cast<size_t>(micro))),
      backwardEnd = forwardEnd;
  starts.assign(schedule.size(), {});
  lengths.assign(schedule.size(), {});
  end = Time();
  std::vector<Time> freeAt(schedule.size(), Time());
  std::vector<size_t> next(schedule.size(), 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int64_t stage = 0; stage < stages; ++stage) {
      size_t s = static_cast<size_t>(stage);
      const std::vector<PipelineSlot> &slots = schedule[s].slots;
      for (; next[s] < slots.size(); ++next[s]) {
        const PipelineSlot &slot = slots[next[s]];
        int64_t part =
            mfshapes::pipelinePartOf(stage, slot.chunk, stages, vShape);
        size_t at = static_cast<size_t>(slot.microBatch);
        bool last = part + 1 == parts;
        // zero_bubble_v runs every backward but the first part's apart
        // from its weight gradients.
        bool split = vShape && part > 0;
        // What the slot waits for: the part it follows, and its own B for
        // a W.
        std::optional<Time> ready = Time();
        int64_t from = part;
        if (slot.weight) {
          ready = backwardEnd[static_cast<size_t>(part)][at];
        } else if (slot.backward && !last) {
          from = part + 1;
          ready = backwardEnd[static_cast<size_t>(from)][at];
        } else if (part > 0) {
          from = part - 1;
          ready = forwardEnd[static_cast<size_t>(from)][at];
        }
        if (!ready) {
          break; // what it waits for has not run yet
        }
        Time arrives = *ready;
        if (from != part) {
          arrives += messageLength(from, part);
        }
        Time start = std::max(freeAt[s], arrives);
        Time length = passLength(stage, slot, part, last, split);
        freeAt[s] = start + length;
        if (!slot.weight) {
          (slot.backward ? backwardEnd
                         : forwardEnd)[static_cast<size_t>(part)][at] =
              freeAt[s];
        }
        starts[s].push_back(start);
        lengths[s].push_back(length);
        end = std::max(end, freeAt[s]);
        progressed = true;
      }
    }
  }
}

} // namespace

Timeline mfc::simulateTimeline(const std::string &scheduler,
                               const std::vector<StageSchedule> &schedule) {
  Timeline timeline;
  simulateSlots<int64_t>(
      scheduler, schedule,
      [](int64_t, const PipelineSlot &slot, int64_t, bool last, bool split) {
        return passUnits(slot, last, split);
      },
      [](int64_t, int64_t) { return int64_t(0); }, timeline.starts,
      timeline.lengths, timeline.length);
  return timeline;
}

TimedStep mfc::simulateStepTimes(
    const std::string &scheduler, const std::vector<StageSchedule> &schedule,
    llvm::function_ref<double(int64_t stage, const PipelineSlot &slot,
                              bool lastPart, bool split)>
        passLength,
    llvm::function_ref<double(int64_t fromPart, int64_t toPart)>
        messageLength) {
  std::vector<std::vector<double>> starts, lengths;
  TimedStep step;
  simulateSlots<double>(
      scheduler, schedule,
      [&](int64_t stage, const PipelineSlot &slot, int64_t, bool last,
          bool split) { return passLength(stage, slot, last, split); },
      messageLength, starts, lengths, step.length);
  for (const std::vector<double> &stage : lengths) {
    double busy = 0;
    for (double length : stage) {
      busy += length;
    }
    step.busy.push_back(busy);
  }
  return step;
}

int64_t mfc::peakKeptBytes(const StageSchedule &stage,
                           const std::vector<int64_t> &keptBytes,
                           const std::vector<int64_t> &weightKeptBytes,
                           const std::vector<bool> &lastPart) {
  int64_t kept = 0, most = 0;
  for (const PipelineSlot &slot : stage.slots) {
    size_t chunk = static_cast<size_t>(slot.chunk);
    int64_t input = keptBytes[chunk], forWeights = weightKeptBytes[chunk];
    bool split = forWeights > 0;
    // A forward keeps its input and saved values; a split B trades them
    // for what its W takes (the last part's B has no forward before it).
    int64_t forwardKept = lastPart[chunk] ? 0 : input;
    if (slot.weight) {
      kept -= forWeights;
    } else if (slot.backward) {
      kept += split ? forWeights - forwardKept : -forwardKept;
    } else {
      kept += input;
    }
    most = std::max(most, kept);
  }
  return most;
}

std::string mfc::drawTimeline(const Timeline &timeline,
                              const std::vector<StageSchedule> &schedule,
                              size_t stage, size_t width) {
  std::vector<std::string> cells(static_cast<size_t>(timeline.length),
                                 "." + std::string(width - 1, ' '));
  const std::vector<PipelineSlot> &slots = schedule[stage].slots;
  for (size_t i = 0; i < timeline.starts[stage].size(); ++i) {
    size_t start = static_cast<size_t>(timeline.starts[stage][i]);
    std::string name = slotName(slots[i], schedule[stage].chunks);
    name.resize(width, ' ');
    cells[start] = name;
    for (int64_t unit = 1; unit < timeline.lengths[stage][i]; ++unit) {
      cells[start + static_cast<size_t>(unit)] =
          std::string(width - 1, '-') + " ";
    }
  }
  std::string row;
  for (const std::string &cell : cells) {
    row += cell;
  }
  while (!row.empty() && row.back() == ' ') {
    row.pop_back();
  }
  return row;
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
    if (!text.empty()) {
      text += ' ';
    }
    text += slotName(stage.slots[i], stage.chunks);
  }
  return text;
}
