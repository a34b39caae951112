//===- KvBlockPoolTest.cpp - the blocks of a paged KV cache ---------------===//

#include "runtime/session/KvBlockPool.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mfrt;

TEST(KvBlockPool, BlocksAreTakenUntilNoneIsFreeAndReturnOldestFirst) {
  KvBlockPool pool(3, 4);
  std::vector<int32_t> taken;
  while (std::optional<int32_t> block = pool.allocate()) {
    taken.push_back(*block);
  }
  EXPECT_EQ(taken, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.freeBlocks(), 0);
  pool.release(2);
  pool.release(0);
  EXPECT_EQ(pool.usedBlocks(), 1);
  EXPECT_EQ(pool.allocate(), 2); // released first, taken first
  EXPECT_EQ(pool.allocate(), 0);
}

TEST(KvBlockPool, APublishedPrefixIsSharedUntilItsBlockIsTakenAgain) {
  KvBlockPool pool(3, 4);
  using Contents = KvBlockPool::Contents;
  const int32_t first[] = {1, 2, 3, 4}, second[] = {5, 6, 7, 8};
  int32_t a = *pool.allocate(), b = *pool.allocate();
  Contents afterFirst = pool.publish(a, {}, first);
  EXPECT_EQ(afterFirst.block, a);
  pool.publish(b, afterFirst, second);
  // Found while held: one more holder.
  ASSERT_TRUE(pool.share({}, first));
  EXPECT_EQ(pool.share({}, first)->block, a);
  // The same tokens after another prefix are other contents.
  EXPECT_FALSE(pool.share({}, second));
  for (int i = 0; i < 3; ++i) {
    pool.release(a);
  }
  pool.release(b);
  EXPECT_EQ(pool.freeBlocks(), 3);
  // Free but findable: sharing takes it off the free list.
  EXPECT_EQ(pool.share(afterFirst, second)->block, b);
  EXPECT_EQ(pool.freeBlocks(), 2);
  pool.release(b);
  // The first prefix's block taken for other contents: neither it nor the
  // block found through it is found again.
  std::vector<int32_t> taken;
  while (std::optional<int32_t> block = pool.allocate()) {
    taken.push_back(*block);
    if (*block == a) {
      break;
    }
  }
  EXPECT_FALSE(pool.share({}, first));
  EXPECT_FALSE(pool.share(afterFirst, second));
  // New contents in a: what follows them is not what followed the old.
  pool.publish(a, {}, second);
  EXPECT_FALSE(pool.share(pool.share({}, second).value(), second));
}

TEST(KvBlockPool, ContentsPublishedTwiceKeepTheFirstBlock) {
  KvBlockPool pool(2, 2);
  const int32_t tokens[] = {9, 9};
  int32_t a = *pool.allocate(), b = *pool.allocate();
  pool.publish(a, {}, tokens);
  // b holds the same: the one that did first holds them from now on.
  EXPECT_EQ(pool.publish(b, {}, tokens).block, a);
  pool.release(a);
  EXPECT_EQ(pool.share({}, tokens)->block, a);
}
