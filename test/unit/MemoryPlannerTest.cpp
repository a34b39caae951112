//===- MemoryPlannerTest.cpp - static memory planning ---------------------===//

#include "compiler/Analysis/MemoryPlanner.h"
#include "compiler/Analysis/SkylineSearch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

using namespace mfc;

namespace {

/// Cuts the rectangle [t0, t1) x [o0, o1) of time x offset into `pieces`
/// buffers that tile it exactly, so the optimal arena equals the lower bound.
void tile(std::mt19937_64 &random, int64_t t0, int64_t t1, int64_t o0,
          int64_t o1, int pieces, std::vector<PlannedBuffer> &out) {
  bool canCutTime = t1 - t0 > 1, canCutSpace = o1 - o0 > 1;
  if (pieces <= 1 || (!canCutTime && !canCutSpace)) {
    out.push_back({std::to_string(out.size()), t0, t1, o1 - o0, -1});
    return;
  }
  int left = 1 + static_cast<int>(random() % (pieces - 1));
  if (canCutTime && (!canCutSpace || random() % 2)) {
    int64_t cut = t0 + 1 + static_cast<int64_t>(random() % (t1 - t0 - 1));
    tile(random, t0, cut, o0, o1, left, out);
    tile(random, cut, t1, o0, o1, pieces - left, out);
  } else {
    int64_t cut = o0 + 1 + static_cast<int64_t>(random() % (o1 - o0 - 1));
    tile(random, t0, t1, o0, cut, left, out);
    tile(random, t0, t1, cut, o1, pieces - left, out);
  }
}

TEST(MemoryPlanner, LowerBoundIsThePeakOfLiveBytes) {
  std::vector<PlannedBuffer> buffers = {
      {"a", 0, 2, 10, -1}, {"b", 1, 3, 5, -1}, {"c", 2, 4, 7, -1}};
  EXPECT_EQ(livenessLowerBound(buffers), 15); // a and b at step 1
}

TEST(MemoryPlanner, ReusesMemoryOfDeadBuffers) {
  std::vector<PlannedBuffer> buffers = {
      {"a", 0, 2, 100, -1}, {"b", 2, 4, 100, -1}, {"c", 1, 3, 50, -1}};
  MemoryPlanResult result = planMemory(buffers);
  EXPECT_TRUE(isValidPlan(buffers));
  EXPECT_EQ(result.arenaBytes, 150);
  EXPECT_EQ(result.lowerBound, 150);
}

TEST(MemoryPlanner, AlignsOffsets) {
  std::vector<PlannedBuffer> buffers = {{"a", 0, 2, 3, -1}, {"b", 0, 2, 3, -1}};
  MemoryPlanOptions options;
  options.alignment = 64;
  options.timeLimitSeconds = 0.05; // the bound ignores alignment: unreachable
  MemoryPlanResult result = planMemory(buffers, options);
  EXPECT_TRUE(isValidPlan(buffers));
  EXPECT_EQ(result.arenaBytes, 67);
  EXPECT_EQ(std::max(buffers[0].offset, buffers[1].offset), 64);
}

TEST(MemoryPlanner, StaysNearTheBoundOnExactTilings) {
  std::mt19937_64 random(7);
  for (int instance = 0; instance < 3; ++instance) {
    std::vector<PlannedBuffer> buffers;
    tile(random, 0, 200, 0, 4096, 150, buffers);
    // A candidate budget, not a time limit: the same plans on a slow
    // (sanitizer) build as on a fast one.
    MemoryPlanOptions options;
    options.timeLimitSeconds = 60.0;
    options.maxCandidates = 3000;
    MemoryPlanResult result = planMemory(buffers, options);
    EXPECT_TRUE(isValidPlan(buffers));
    EXPECT_EQ(result.lowerBound, 4096);
    // A regression bound, not the goal: issue 4 asks for <= 1.10 on hard
    // instances, which bench/memory_planner.py measures.
    EXPECT_LE(result.ratio(), 1.20) << "instance " << instance;
    std::printf("exact tiling %d: arena / bound %.4f\n", instance, result.ratio());
  }
}

/// Sets the buffers' offsets from the search's and returns the arena.
int64_t applyOffsets(std::vector<PlannedBuffer> &buffers,
                     const std::vector<int64_t> &offsets) {
  int64_t arena = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    buffers[i].offset = offsets[i];
    arena = std::max(arena, offsets[i] + buffers[i].size);
  }
  return arena;
}

SkylineSearchBudget nodeBudget(int64_t nodes) {
  SkylineSearchBudget budget;
  budget.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  budget.maxNodes = nodes;
  return budget;
}

TEST(SkylineSearch, FindsTheBoundOfExactTilings) {
  std::mt19937_64 random(11);
  for (int instance = 0; instance < 5; ++instance) {
    std::vector<PlannedBuffer> buffers;
    tile(random, 0, 400, 0, 1 << 20, 100, buffers);
    int64_t bound = livenessLowerBound(buffers);
    SkylineSearch search(buffers, /*alignment=*/1);
    std::vector<int64_t> offsets;
    ASSERT_TRUE(search.run(bound, nodeBudget(200000), random, offsets))
        << "instance " << instance << ", " << search.nodes() << " placements";
    EXPECT_EQ(applyOffsets(buffers, offsets), bound);
    EXPECT_TRUE(isValidPlan(buffers));
  }
}

TEST(SkylineSearch, RoomToSpareAndAlignment) {
  // a and b are alive together, c after them. The search stacks sizes
  // rounded up to the alignment (128 + 64 for a and b), a little above
  // what the last buffer of a stack needs.
  std::vector<PlannedBuffer> buffers = {
      {"a", 0, 2, 100, -1}, {"b", 1, 3, 50, -1}, {"c", 3, 4, 10, -1}};
  SkylineSearch search(buffers, /*alignment=*/64);
  std::mt19937_64 random(1);
  std::vector<int64_t> offsets;
  EXPECT_FALSE(search.run(191, nodeBudget(1000), random, offsets));
  ASSERT_TRUE(search.run(192, nodeBudget(1000), random, offsets));
  EXPECT_LE(applyOffsets(buffers, offsets), 192);
  EXPECT_TRUE(isValidPlan(buffers));
  for (const PlannedBuffer &buffer : buffers) {
    EXPECT_EQ(buffer.offset % 64, 0) << buffer.id;
  }
}

TEST(SkylineSearch, LeavesRoomWhereNothingRests) {
  // Nothing can rest on the bottom at step 1 once a (steps 0-2) sits
  // above b (step 0): the search leaves a hole under a at step 1.
  std::vector<PlannedBuffer> buffers = {
      {"a", 0, 3, 10, -1}, {"b", 0, 1, 30, -1}, {"c", 2, 3, 30, -1}};
  SkylineSearch search(buffers, /*alignment=*/1);
  std::mt19937_64 random(1);
  std::vector<int64_t> offsets;
  ASSERT_TRUE(search.run(40, nodeBudget(1000), random, offsets));
  EXPECT_EQ(applyOffsets(buffers, offsets), 40);
  EXPECT_TRUE(isValidPlan(buffers));
  EXPECT_FALSE(search.run(39, nodeBudget(1000), random, offsets));
}

TEST(MemoryPlanner, CsvRoundTripsAndRejectsBadRows) {
  std::vector<PlannedBuffer> buffers;
  EXPECT_EQ(readMemoryPlanCsv("id,lower,upper,size\nx,0,3,16\ny,1,2,8\n", buffers),
            "");
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[1].size, 8);
  planMemory(buffers);
  EXPECT_EQ(writeMemoryPlanCsv(buffers, false),
            "id,lower,upper,size\nx,0,3,16\ny,1,2,8\n");
  std::vector<PlannedBuffer> bad;
  EXPECT_NE(readMemoryPlanCsv("id,lower,upper,size\nx,0,3\n", bad), "");
  EXPECT_NE(readMemoryPlanCsv("x,3,1,4\n", bad), "");
  EXPECT_NE(readMemoryPlanCsv("x,0,1,4k\n", bad), "");
}

} // namespace
