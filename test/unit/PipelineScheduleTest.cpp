//===- PipelineScheduleTest.cpp - the 1F1B and GPipe schedules -----------===//

#include "compiler/Analysis/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <map>
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
  EXPECT_DOUBLE_EQ(bubbleFraction(2, 4), 0.2);
  EXPECT_DOUBLE_EQ(bubbleFraction(8, 256), 7.0 / 263.0);
  std::string text = describe(schedulePipeline("1f1b", 2, 40)[1], 9);
  EXPECT_EQ(text, "B0 B1 B2 B3 B4 B5 ... B37 B38 B39");
}

} // namespace
