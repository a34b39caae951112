//===- PanelGemmTest.cpp - products with packed weight panels -------------===//

#include "runtime/PanelGemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace mfrt;

namespace {

/// Tiles of A [M x K] times B^T (B [N x K]) through B's panels equal the
/// product summed in double, wherever a tile starts and ends: mid-panel
/// columns, row counts that are not a multiple of the row block, and a K
/// longer than one pass over a panel (K = 1100 > 1024).
TEST(PanelGemm, TilesEqualTheProductAtAnyCornerAndDepth) {
  const int64_t M = 37, N = 70, K = 1100;
  std::mt19937 generator(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(M * K), b(N * K);
  for (float &x : a) x = uniform(generator);
  for (float &x : b) x = uniform(generator);
  std::vector<float> panels(N * K, -7.0f);
  ASSERT_EQ(panelCount(N), 3);
  packPanels(b.data(), N, K, panels.data(), 0, 1);
  packPanels(b.data(), N, K, panels.data(), 1, 3);
  // The last panel holds the 6 rows left, 6 wide.
  EXPECT_EQ(panels[2 * kPanelWidth * K + 5 * 6 + 4], b[(2 * kPanelWidth + 4) * K + 5]);

  struct Tile { int64_t m0, n0, m, n; };
  for (Tile t : {Tile{0, 0, M, N}, Tile{3, 5, 30, 60}, Tile{36, 69, 1, 1},
                 Tile{8, 32, 9, 32}, Tile{1, 40, 7, 3}}) {
    const int64_t ldc = t.n + 3; // a scratch tile wider than the columns
    std::vector<float> c(t.m * ldc, 123.0f);
    mfrtGemmPanelsF32(reinterpret_cast<int64_t>(a.data()),
                      reinterpret_cast<int64_t>(panels.data()),
                      reinterpret_cast<int64_t>(c.data()), ldc, t.m0, t.n0,
                      t.m, t.n, K, N, 1, 0, M);
    for (int64_t i = 0; i < t.m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        if (j >= t.n) { // not the tile's: untouched
          EXPECT_EQ(c[i * ldc + j], 123.0f);
          continue;
        }
        double sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          sum += double(a[(t.m0 + i) * K + k]) * b[(t.n0 + j) * K + k];
        }
        EXPECT_NEAR(c[i * ldc + j], sum, 1e-3)
            << "tile at " << t.m0 << "," << t.n0 << " element " << i << "," << j;
      }
    }
  }
}

/// A weight packs in its own storage (a narrow last panel too), to the
/// same panels, and unpacks to itself.
TEST(PanelGemm, PacksInPlaceAndUnpacks) {
  for (int64_t N : {96, 77}) {
    const int64_t K = 40;
    std::vector<float> weight(N * K);
    for (int64_t i = 0; i < N * K; ++i) weight[i] = static_cast<float>(i % 1000) - 500.0f;
    std::vector<float> panels(N * K);
    packPanels(weight.data(), N, K, panels.data(), 0, panelCount(N));
    std::vector<float> inPlace = weight;
    packPanelsInPlace(inPlace.data(), N, K, 0, 2);
    packPanelsInPlace(inPlace.data(), N, K, 2, 3);
    EXPECT_EQ(inPlace, panels) << N << " rows";
    std::vector<float> unpacked(N * K);
    unpackPanels(inPlace.data(), N, K, unpacked.data());
    EXPECT_EQ(unpacked, weight) << N << " rows";
  }
}

} // namespace
