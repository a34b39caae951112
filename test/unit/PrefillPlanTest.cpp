//===- PrefillPlanTest.cpp - prompts as chunks of the compiled prefills ---===//

#include "runtime/session/PrefillPlan.h"

#include <gtest/gtest.h>

using namespace mfrt;

namespace {

// llama-100m's: prefill_32, _64, _128 and prefill (seq_length 256).
const std::vector<PrefillEntry> kEntries = {{256, "prefill"},
                                            {32, "prefill_32"},
                                            {64, "prefill_64"},
                                            {128, "prefill_128"}};
constexpr int64_t kSeq = 256;

int64_t widthSum(const std::vector<PrefillChunk> &plan) {
  int64_t sum = 0;
  for (const PrefillChunk &chunk : plan) {
    sum += chunk.entry->width;
  }
  return sum;
}

} // namespace

TEST(PrefillPlan, ChunksInsteadOfPaddingMost) {
  // 192 = 64 + 128 (two calls, no padding), not 256 padded.
  std::vector<PrefillChunk> plan = planPrefill(kEntries, 0, 192, kSeq);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(widthSum(plan), 192);
  EXPECT_EQ(plan[0].past, 0);
  EXPECT_EQ(plan[1].past, plan[0].tokens);
  EXPECT_EQ(plan[0].tokens + plan[1].tokens, 192);
}

TEST(PrefillPlan, OneCallWhenChunkingSavesLessThanACall) {
  // 20 tokens: prefill_32 padded. 250: the whole prefill (256 + one call
  // against 128 + 64 + 32 + 32 and four).
  std::vector<PrefillChunk> plan = planPrefill(kEntries, 0, 20, kSeq);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].entry->width, 32);
  EXPECT_EQ(plan[0].tokens, 20);
  plan = planPrefill(kEntries, 0, 250, kSeq);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].entry->name, "prefill");
}

TEST(PrefillPlan, OnlyTheLastChunkIsPaddedAndNoneRunsPastTheCache) {
  for (int64_t past = 0; past < kSeq; past += 7) {
    for (int64_t tokens = 1; past + tokens <= kSeq; tokens += 5) {
      std::vector<PrefillChunk> plan =
          planPrefill(kEntries, past, tokens, kSeq);
      int64_t fed = 0;
      for (size_t i = 0; i < plan.size(); ++i) {
        EXPECT_EQ(plan[i].past, past + fed);
        EXPECT_LE(plan[i].past + plan[i].entry->width, kSeq);
        if (i + 1 < plan.size()) {
          EXPECT_EQ(plan[i].tokens, plan[i].entry->width);
        }
        fed += plan[i].tokens;
      }
      if (!plan.empty()) {
        EXPECT_EQ(fed, tokens);
      }
    }
  }
  EXPECT_TRUE(planPrefill(kEntries, 0, 0, kSeq).empty());
  EXPECT_TRUE(planPrefill(kEntries, 0, kSeq + 1, kSeq).empty());
}

TEST(PrefillPlan, ABudgetSplitNeverLeavesAPromptStuck) {
  // Two prompts of 200 and 250 tokens in one step of 256 (mf-serve's
  // default): the first takes the whole prefill (200 of the budget), the
  // second gets 56. Feeding it a padded 56 would leave 194 at position 56
  // that no entry fits; a whole prefill_32 leaves a rest that has a plan.
  std::optional<PrefillChunk> first =
      firstPrefillChunk(kEntries, 0, 250, 56, kSeq);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->entry->width, 32);
  EXPECT_EQ(first->tokens, 32);
  // Any budgets, step after step: every prompt ends fed.
  for (int64_t budget : {1, 20, 33, 56, 100, 200}) {
    for (int64_t prompt : {1, 50, 130, 200, 250, 256}) {
      int64_t fed = 0;
      for (int steps = 0; fed < prompt; ++steps) {
        ASSERT_LT(steps, 300) << "budget " << budget << ", prompt " << prompt;
        std::optional<PrefillChunk> chunk =
            firstPrefillChunk(kEntries, fed, prompt - fed, budget, kSeq);
        ASSERT_TRUE(chunk) << "stuck at " << fed << " of " << prompt
                           << " (budget " << budget << ")";
        EXPECT_LE(chunk->past + chunk->entry->width, kSeq);
        fed += chunk->tokens;
      }
      EXPECT_EQ(fed, prompt);
    }
  }
}
