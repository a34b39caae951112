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
  KvBlockPool pool(2, 4);
  const int32_t first[] = {1, 2, 3, 4}, second[] = {5, 6, 7, 8};
  uint64_t afterFirst = KvBlockPool::chainHash(0, first, 4);
  int32_t a = *pool.allocate(), b = *pool.allocate();
  pool.publish(a, 0, first);
  pool.publish(b, afterFirst, second);
  // Found while held: one more holder.
  EXPECT_EQ(pool.share(0, first), a);
  // The same tokens after another prefix are other contents.
  EXPECT_EQ(pool.share(0, second), std::nullopt);
  pool.release(a);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.freeBlocks(), 2);
  // Free but findable: sharing takes it off the free list.
  EXPECT_EQ(pool.share(afterFirst, second), b);
  EXPECT_EQ(pool.freeBlocks(), 1);
  // Taken for other contents: forgotten.
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(pool.share(0, first), std::nullopt);
}

TEST(KvBlockPool, ContentsPublishedTwiceKeepTheFirstBlock) {
  KvBlockPool pool(2, 2);
  const int32_t tokens[] = {9, 9};
  int32_t a = *pool.allocate(), b = *pool.allocate();
  pool.publish(a, 0, tokens);
  pool.publish(b, 0, tokens);
  pool.release(a);
  EXPECT_EQ(pool.share(0, tokens), a);
}
