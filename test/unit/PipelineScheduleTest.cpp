//===- PipelineScheduleTest.cpp - the 1F1B and GPipe schedules -----------===//

#include "compiler/Analysis/PipelineSchedule.h"

#include "shapes/GridAxes.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
#include <utility>

using namespace mfc;

namespace {

TEST(PipelineSchedule, OneForwardOneBackward) {
  std::vector<StageSchedule> schedule = schedulePipeline("1f1b", 4, 6);
  ASSERT_EQ(schedule.size(), 4u);
  // Stage s warms up with p - s - 1 forwards, alternates, then drains.
  EXPECT_EQ(describe(schedule[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(describe(schedule[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  // The last stage's forward is part of its backward.
  EXPECT_EQ(describe(schedule[3]), "B0 B1 B2 B3 B4 B5");
  EXPECT_EQ(schedule[0].inFlight, 4);
  EXPECT_EQ(schedule[1].inFlight, 3);
  EXPECT_EQ(schedule[2].inFlight, 2);
  EXPECT_EQ(schedule[3].inFlight, 0);
}

TEST(PipelineSchedule, FewerMicroBatchesThanWarmup) {
  // Two micro-batches on 4 stages: every forward first, at most 2 kept.
  std::vector<StageSchedule> schedule = schedulePipeline("1f1b", 4, 2);
  EXPECT_EQ(describe(schedule[0]), "F0 F1 B0 B1");
  EXPECT_EQ(schedule[0].inFlight, 2);
}

TEST(PipelineSchedule, EveryMicroBatchOnceEachWayInOrder) {
  for (int64_t stages = 2; stages <= 6; ++stages) {
    for (int64_t micro = 1; micro <= 9; ++micro) {
      std::vector<StageSchedule> schedule =
          schedulePipeline("1f1b", stages, micro);
      for (int64_t s = 0; s < stages; ++s) {
        std::map<std::pair<bool, int64_t>, int> seen;
        int64_t kept = 0, most = 0;
        for (const PipelineSlot &slot : schedule[s].slots) {
          ++seen[{slot.backward, slot.microBatch}];
          if (!slot.backward) {
            most = std::max(most, ++kept);
          } else if (s + 1 < stages) {
            // Its forward ran already.
            EXPECT_EQ((seen[{false, slot.microBatch}]), 1);
            --kept;
          }
        }
        for (int64_t m = 0; m < micro; ++m) {
          EXPECT_EQ((seen[{true, m}]), 1);
          EXPECT_EQ((seen[{false, m}]), s + 1 < stages ? 1 : 0);
        }
        EXPECT_EQ(schedule[s].inFlight, most);
        EXPECT_LE(most, std::min(stages - s, micro));
      }
    }
  }
}

TEST(PipelineSchedule, GPipe) {
  // Every forward, then every backward: each stage but the last keeps all
  // its micro-batches.
  std::vector<StageSchedule> schedule = schedulePipeline("gpipe", 3, 4);
  EXPECT_EQ(describe(schedule[0]), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(describe(schedule[1]), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(describe(schedule[2]), "B0 B1 B2 B3");
  EXPECT_EQ(schedule[0].inFlight, 4);
  EXPECT_EQ(schedule[1].inFlight, 4);
  EXPECT_EQ(schedule[2].inFlight, 0);
}

TEST(PipelineSchedule, BubbleAndLongText) {
  EXPECT_DOUBLE_EQ(bubbleFraction("1f1b", 2, 4), 0.2);
  EXPECT_DOUBLE_EQ(bubbleFraction("1f1b", 8, 256), 7.0 / 263.0);
  std::string text = describe(schedulePipeline("1f1b", 2, 40)[1], 9);
  EXPECT_EQ(text, "B0 B1 B2 B3 B4 B5 ... B37 B38 B39");
}

/// Runs every stage's slots in turn as the ranks would (a forward waits for
/// the part before it, a backward for the part after it, or on the model's
/// last part for its input; a W for its B), and returns whether all of
/// them finish.
bool runsToTheEnd(const std::vector<StageSchedule> &schedule,
                  bool vShape = false) {
  int64_t stages = static_cast<int64_t>(schedule.size());
  int64_t parts = stages * schedule[0].chunks;
  std::set<std::tuple<bool, int64_t, int64_t>> done; // (B, part, micro)
  std::vector<size_t> next(schedule.size(), 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int64_t s = 0; s < stages; ++s) {
      const std::vector<PipelineSlot> &slots = schedule[s].slots;
      for (; next[s] < slots.size(); ++next[s]) {
        const PipelineSlot &slot = slots[next[s]];
        int64_t part = mfshapes::pipelinePartOf(s, slot.chunk, stages, vShape);
        bool ready =
            slot.weight ? done.count({true, part, slot.microBatch}) > 0
            : slot.backward && part + 1 < parts
                ? done.count({true, part + 1, slot.microBatch}) > 0
                : part == 0 || done.count({false, part - 1, slot.microBatch});
        if (!ready) {
          break;
        }
        if (!slot.weight) {
          done.insert({slot.backward, part, slot.microBatch});
        }
        if (slot.backward && part + 1 == parts) {
          done.insert({false, part, slot.microBatch});
        }
        progressed = true;
      }
    }
  }
  for (int64_t s = 0; s < stages; ++s) {
    if (next[s] < schedule[s].slots.size()) {
      return false;
    }
  }
  return true;
}

TEST(PipelineSchedule, Interleaved) {
  // Megatron-LM's order for p = 2, v = 2, m = 4: micro-batches in groups
  // of 2, each group through chunk 0 then chunk 1; backwards from chunk 1.
  std::vector<StageSchedule> schedule = schedulePipeline("1f1b", 2, 4, 2);
  EXPECT_EQ(describe(schedule[0]),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 "
            "B2.1 B3.1 B2.0 B3.0");
  // The last stage's chunk 1 is the model's last part: no forward slots.
  EXPECT_EQ(describe(schedule[1]),
            "F0.0 F1.0 B0.1 B1.1 F2.0 B0.0 F3.0 B1.0 B2.1 B3.1 B2.0 B3.0");
  // Chunk passes kept: 5 on stage 0 (each holds half the stage's layers,
  // so 2.5 stages' worth against 1F1B's 2), 3 on stage 1.
  EXPECT_EQ(schedule[0].inFlight, 5);
  EXPECT_EQ(schedule[1].inFlight, 3);
  EXPECT_DOUBLE_EQ(bubbleFraction("1f1b", 2, 4, 2), 1.0 / 9.0);
}

TEST(PipelineSchedule, InterleavedPassesOnceEachWayAndFinishes) {
  for (int64_t stages = 2; stages <= 5; ++stages) {
    for (int64_t chunks = 2; chunks <= 4; ++chunks) {
      for (int64_t micro = stages; micro <= 4 * stages; micro += stages) {
        std::vector<StageSchedule> schedule =
            schedulePipeline("1f1b", stages, micro, chunks);
        EXPECT_TRUE(runsToTheEnd(schedule))
            << stages << " stages, " << chunks << " chunks, " << micro;
        for (int64_t s = 0; s < stages; ++s) {
          std::map<std::tuple<bool, int64_t, int64_t>, int> seen;
          int64_t kept = 0, most = 0;
          for (const PipelineSlot &slot : schedule[s].slots) {
            bool lastPart = s + 1 == stages && slot.chunk + 1 == chunks;
            ++seen[{slot.backward, slot.chunk, slot.microBatch}];
            if (lastPart) {
              continue;
            }
            if (slot.backward) {
              EXPECT_EQ((seen[{false, slot.chunk, slot.microBatch}]), 1);
            }
            kept += slot.backward ? -1 : 1;
            most = std::max(most, kept);
          }
          for (int64_t c = 0; c < chunks; ++c) {
            for (int64_t m = 0; m < micro; ++m) {
              bool lastPart = s + 1 == stages && c + 1 == chunks;
              EXPECT_EQ((seen[{true, c, m}]), 1);
              EXPECT_EQ((seen[{false, c, m}]), lastPart ? 0 : 1);
            }
          }
          EXPECT_EQ(schedule[s].inFlight, most);
        }
      }
    }
  }
  for (int64_t stages = 2; stages <= 5; ++stages) {
    for (int64_t micro = 1; micro <= 9; ++micro) {
      EXPECT_TRUE(runsToTheEnd(schedulePipeline("1f1b", stages, micro)));
      EXPECT_TRUE(runsToTheEnd(schedulePipeline("gpipe", stages, micro)));
    }
  }
}

TEST(PipelineSchedule, ZeroBubbleV) {
  // Stage 0 holds the first part (chunk 0) and the last (chunk 1); the
  // last part's B computes its forward too, the first part's B its
  // weights' gradients too. Ws wait for a stage's idle time.
  std::vector<StageSchedule> schedule =
      schedulePipeline("zero_bubble_v", 2, 4, 2);
  EXPECT_EQ(describe(schedule[0]), "F0.0 F1.0 F2.0 B0.1 W0.1 B1.1 B0.0 B1.0 "
                                   "F3.0 B2.1 W1.1 W2.1 B2.0 B3.1 W3.1 B3.0");
  EXPECT_EQ(describe(schedule[1]),
            "F0.0 F0.1 F1.0 F1.1 B0.1 B0.0 W0.1 B1.1 B1.0 F2.0 W0.0 F2.1 "
            "W1.1 F3.0 B2.1 B2.0 W1.0 F3.1 W2.1 W2.0 B3.1 B3.0 W3.1 W3.0");
  EXPECT_EQ(schedule[0].inFlight, 4);
  EXPECT_EQ(schedule[1].inFlight, 4);
  // Simulated with F = B = W: 4% idle against 1F1B's 20%.
  EXPECT_NEAR(bubbleFraction("zero_bubble_v", 2, 4, 2), 0.04, 1e-9);
  EXPECT_LT(bubbleFraction("zero_bubble_v", 8, 32, 2),
            bubbleFraction("1f1b", 8, 32, 2));
}

TEST(PipelineSchedule, ZeroBubbleVPassesOnceEachWayAndFinishes) {
  for (int64_t stages = 2; stages <= 6; ++stages) {
    for (int64_t micro = 2 * stages; micro <= 4 * stages + 1; ++micro) {
      std::vector<StageSchedule> schedule =
          schedulePipeline("zero_bubble_v", stages, micro, 2);
      EXPECT_TRUE(runsToTheEnd(schedule, /*vShape=*/true))
          << stages << " stages, " << micro << " micro-batches";
      for (int64_t s = 0; s < stages; ++s) {
        // Per (kind, chunk, micro-batch): F, B and W once, in that order;
        // the first part has no W (its B is all of it), the last no F.
        std::map<std::tuple<char, int64_t, int64_t>, int> seen;
        for (const PipelineSlot &slot : schedule[s].slots) {
          char kind = slot.weight ? 'W' : slot.backward ? 'B' : 'F';
          int64_t part = mfshapes::pipelinePartOf(s, slot.chunk, stages, true);
          if (kind == 'B' && part + 1 < 2 * stages) {
            EXPECT_EQ((seen[{'F', slot.chunk, slot.microBatch}]), 1);
          }
          if (kind == 'W') {
            EXPECT_EQ((seen[{'B', slot.chunk, slot.microBatch}]), 1);
          }
          ++seen[{kind, slot.chunk, slot.microBatch}];
        }
        for (int64_t c = 0; c < 2; ++c) {
          int64_t part = mfshapes::pipelinePartOf(s, c, stages, true);
          for (int64_t m = 0; m < micro; ++m) {
            EXPECT_EQ((seen[{'F', c, m}]), part + 1 < 2 * stages ? 1 : 0);
            EXPECT_EQ((seen[{'B', c, m}]), 1);
            EXPECT_EQ((seen[{'W', c, m}]), part > 0 ? 1 : 0);
          }
        }
        // 1F1B's memory: 2p chunk passes (p whole stages).
        EXPECT_LE(schedule[s].inFlight, 2 * stages);
      }
    }
  }
}

TEST(PipelineSchedule, Timeline) {
  // 1F1B, 2 stages, 4 micro-batches: a forward 1 unit, a backward 2, the
  // last stage's 3 (its forward too); the bubble is (p-1)/(m+p-1).
  std::vector<StageSchedule> schedule = schedulePipeline("1f1b", 2, 4);
  Timeline timeline = simulateTimeline("1f1b", schedule);
  EXPECT_EQ(timeline.length, 15);
  EXPECT_DOUBLE_EQ(timeline.idle(), 0.2);
  EXPECT_EQ(drawTimeline(timeline, schedule, 0, 3),
            "F0 F1 .  .  B0 -- F2 B1 -- F3 B2 -- .  B3 --");
  EXPECT_EQ(drawTimeline(timeline, schedule, 1, 3),
            ".  B0 -- -- B1 -- -- B2 -- -- B3 -- -- .  .");
  // ZB-V: F, B and W 1 unit each (the first part's B and the last part's
  // 2); stage 1 waits only while the first forward reaches it.
  std::vector<StageSchedule> v = schedulePipeline("zero_bubble_v", 2, 4, 2);
  Timeline zeroBubble = simulateTimeline("zero_bubble_v", v);
  EXPECT_EQ(zeroBubble.length, 25);
  EXPECT_EQ(drawTimeline(zeroBubble, v, 1, 5).substr(0, 10), ".    F0.0 ");
}

} // namespace
