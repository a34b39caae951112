//===- FewRowsGemmTest.cpp - a few rows times a stored weight -------------===//

#include "runtime/kernels/FewRowsGemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace mfrt;

TEST(FewRowsGemm, EveryRowCountAgainstDoubles) {
  if (!runsFewRowsGemm()) {
    GTEST_SKIP() << "no AVX-512 here";
  }
  std::mt19937 random(3);
  std::normal_distribution<float> normal;
  // K not a multiple of 16 (a masked last step), an odd column count (a
  // last block of one weight row), and rows of A and C with padding.
  const int64_t k = 77, columns = 37, lda = 80, ldc = 40;
  std::vector<float> a(kFewRowsMax * lda), w(columns * k);
  for (float &value : a) {
    value = normal(random);
  }
  for (float &value : w) {
    value = normal(random);
  }
  for (int64_t rows = 1; rows <= kFewRowsMax; ++rows) {
    std::vector<float> c(rows * ldc, -7.0f);
    fewRowsTimesWeight(a.data(), lda, rows, w.data(), columns, k, c.data(),
                       ldc);
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t n = 0; n < ldc; ++n) {
        if (n >= columns) {
          EXPECT_EQ(c[m * ldc + n], -7.0f) << "written past the columns";
          continue;
        }
        double expected = 0;
        for (int64_t i = 0; i < k; ++i) {
          expected += double(a[m * lda + i]) * w[n * k + i];
        }
        EXPECT_NEAR(c[m * ldc + n], expected, 1e-4)
            << rows << " rows, C[" << m << ", " << n << "]";
      }
    }
  }
}
