//===- ByteSizeTest.cpp - --memory-budget sizes ---------------------------===//

#include "compiler/Pipelines/RecomputeBudget.h"

#include <gtest/gtest.h>

using namespace mfc;

TEST(ParseByteSize, DecimalAndBinaryUnits) {
  EXPECT_EQ(parseByteSize("40MB"), 40000000);
  EXPECT_EQ(parseByteSize("40M"), 40000000);
  EXPECT_EQ(parseByteSize("12GiB"), 12LL << 30);
  EXPECT_EQ(parseByteSize("1.5 KiB"), 1536);
  EXPECT_EQ(parseByteSize("512k"), 512000);
  EXPECT_EQ(parseByteSize("1e9"), 1000000000);
  EXPECT_EQ(parseByteSize("4096B"), 4096);
  EXPECT_EQ(parseByteSize("2.5e3MB"), 2500000000);
}

TEST(ParseByteSize, RefusesWhatIsNotASize) {
  for (const char *text : {"", "MB", "-5MB", "12 apples", "1e400", "nan",
                           "inf", "10XB", "5 M B", "99999999999TiB"}) {
    EXPECT_FALSE(parseByteSize(text)) << text;
  }
}
