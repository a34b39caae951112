//===- Int8DotGemmTest.cpp - int8 rows times int8 weights -----------------===//

#include "runtime/kernels/Int8DotGemm.h"
#include "runtime/kernels/PanelGemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace mfrt;

namespace {

/// Rows quantized per token as mf.dynamic_quantize defines it: scale =
/// max|x| / 127 (rounded to the scales' type), values x / scale rounded
/// half to even and clamped; a row of zeros has scale 0, a row with a NaN
/// or an infinity scale NaN, and both values 0.
TEST(Int8Dot, QuantizesRowsPerToken) {
  int8_t q[6];
  const float row[] = {127.0f, 0.5f, 1.5f, -2.5f, -127.0f, 63.49f};
  EXPECT_EQ(quantizeRowPerToken(row, 6, q, DType::F32), 1.0f);
  const int8_t expected[] = {127, 0, 2, -2, -127, 63};
  EXPECT_TRUE(std::equal(q, q + 6, expected));

  // The scale as bf16 holds it (254 / 127 = 2 exactly; 3 / 127 rounds).
  const float three[] = {3.0f, -1.0f};
  float scale = quantizeRowPerToken(three, 2, q, DType::BF16);
  EXPECT_EQ(scale, 0.0236816406f); // 3 / 127 in bf16
  EXPECT_EQ(q[0], 127);            // 3 / 0.02368... = 126.68 -> 127
  EXPECT_EQ(q[1], -42);

  const float zeros[] = {0.0f, -0.0f, 0.0f};
  EXPECT_EQ(quantizeRowPerToken(zeros, 3, q, DType::F32), 0.0f);
  EXPECT_TRUE(q[0] == 0 && q[1] == 0 && q[2] == 0);
  const float nan[] = {1.0f, std::nanf(""), 2.0f};
  EXPECT_TRUE(std::isnan(quantizeRowPerToken(nan, 3, q, DType::F32)));
  EXPECT_TRUE(q[0] == 0 && q[1] == 0 && q[2] == 0);
  const float infinite[] = {1.0f, INFINITY};
  EXPECT_TRUE(std::isnan(quantizeRowPerToken(infinite, 2, q, DType::F32)));

  // Long rows (the vector code's 16 lanes and a masked rest) equal the
  // definition element by element.
  std::mt19937 generator(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(67);
  for (float &v : x) {
    v = normal(generator);
  }
  std::vector<int8_t> values(x.size());
  float s = quantizeRowPerToken(x.data(), x.size(), values.data(), DType::F32);
  float amax = 0;
  for (float v : x) {
    amax = std::max(amax, std::fabs(v));
  }
  EXPECT_EQ(s, amax / 127.0f);
  for (size_t j = 0; j < x.size(); ++j) {
    EXPECT_EQ(values[j], static_cast<int8_t>(std::nearbyint(x[j] / s))) << j;
  }
  // A NaN or an infinity among the vector code's lanes (not only in the
  // rest) makes the scale NaN and every value 0.
  for (float bad : {std::nanf(""), INFINITY}) {
    std::vector<float> y(x);
    y[3] = bad;
    std::fill(values.begin(), values.end(), int8_t{1});
    EXPECT_TRUE(std::isnan(
        quantizeRowPerToken(y.data(), y.size(), values.data(), DType::F32)));
    EXPECT_TRUE(std::all_of(values.begin(), values.end(),
                            [](int8_t v) { return v == 0; }));
  }
}

/// Tiles of int8 rows times an int8 weight through its dot panels are the
/// exact int32 dot products of the quantized values, scaled by both scales
/// (float(dot) * s_a * s_w, in f32: equal bit for bit), wherever a tile
/// starts and ends, with a last panel 6 wide and row counts that are not a
/// multiple of the row block; through each microkernel this CPU runs, and
/// through the weight as stored (mfrt_gemm_i8i8). Rows in f32 and bf16.
TEST(Int8Dot, TilesAreTheExactIntegerProducts) {
  const int64_t M = 19, N = 70, K = 132;
  std::mt19937 generator(7);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<int8_t> weight(N * K), panels(N * K), unpacked(N * K);
  for (int8_t &w : weight) {
    w = static_cast<int8_t>(byte(generator));
  }
  weight[5] = -128; // the extremes, which the +128 offset must survive
  weight[6] = 127;
  packDotPanels(weight.data(), N, K, panels.data(), 0, 1);
  packDotPanels(weight.data(), N, K, panels.data(), 1, panelCount(N));
  unpackDotPanels(panels.data(), N, K, unpacked.data());
  EXPECT_EQ(unpacked, weight);
  std::vector<float> weightScales(N);
  for (float &s : weightScales) {
    s = std::fabs(normal(generator)) * 0.01f;
  }

  for (DType rowType : {DType::F32, DType::BF16}) {
    std::vector<float> rows(M * K);
    for (float &x : rows) {
      x = normal(generator);
    }
    rows[3] = 0.0f; // a row of zeros: scale 0
    for (int64_t c = 0; c < K; ++c) {
      rows[2 * K + c] = 0.0f;
    }
    std::vector<char> storedRows(rows.size() * dtypeSize(rowType));
    fromFloats(rowType, rows.data(), storedRows.data(), rows.size());
    std::vector<char> storedScales(N * dtypeSize(rowType));
    fromFloats(rowType, weightScales.data(), storedScales.data(), N);
    std::vector<float> scalesAsStored(N);
    toFloats(rowType, storedScales.data(), scalesAsStored.data(), N);
    // The reference: each row quantized, then the int32 dot products.
    std::vector<int8_t> q(M * K);
    std::vector<float> rowScales(M), widened(K);
    for (int64_t i = 0; i < M; ++i) {
      toFloats(rowType, storedRows.data() + i * K * dtypeSize(rowType),
               widened.data(), K);
      rowScales[i] =
          quantizeRowPerToken(widened.data(), K, q.data() + i * K, rowType);
    }
    auto expected = [&](int64_t i, int64_t j) {
      int32_t dot = 0;
      for (int64_t c = 0; c < K; ++c) {
        dot += int32_t{q[i * K + c]} * weight[j * K + c];
      }
      return static_cast<float>(dot) * rowScales[i] * scalesAsStored[j];
    };
    // Through each microkernel this CPU runs, into dot panels and into
    // the weight as stored (mfrt_gemm_i8i8).
    using Service = std::function<void(const mfrt_gemm_args_v1 &)>;
    std::vector<std::pair<std::string, Service>> services;
    const std::pair<const char *, DotIsa> isas[] = {
        {"avx512-vnni", DotIsa::Avx512Vnni},
        {"avx2", DotIsa::Avx2},
        {"portable", DotIsa::Portable}};
    for (auto [isaName, isa] : isas) {
      if (!runsDotIsa(isa)) {
        continue;
      }
      const bool f32 = rowType == DType::F32;
      services.emplace_back(isaName, [isa, f32](const mfrt_gemm_args_v1 &a) {
        f32 ? gemmInt8DotWith<DType::F32>(isa, a)
            : gemmInt8DotWith<DType::BF16>(isa, a);
      });
      services.emplace_back(std::string("as stored, ") + isaName,
                            [isa, f32](const mfrt_gemm_args_v1 &a) {
                              f32 ? gemmInt8RowsWith<DType::F32>(isa, a)
                                  : gemmInt8RowsWith<DType::BF16>(isa, a);
                            });
    }
    struct Tile {
      int64_t m0, n0, m, n;
    };
    for (auto [name, service] : services) {
      bool stored = name.rfind("as stored", 0) == 0;
      for (Tile t : {Tile{0, 0, M, N}, Tile{3, 5, 9, 60}, Tile{18, 69, 1, 1},
                     Tile{1, 32, 17, 38}, Tile{0, 64, 1, 6}}) {
        const int64_t ldc = t.n + 3;
        std::vector<float> c(t.m * ldc, 123.0f);
        service({storedRows.data(), stored ? weight.data() : panels.data(),
                 c.data(), ldc, t.m0, t.n0, t.m, t.n, K, N, /*trans_b=*/1,
                 /*trans_a=*/0, M, storedScales.data(), 0,
                 /*a_scales=*/nullptr, /*a_zero_points=*/nullptr});
        for (int64_t i = 0; i < t.m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            float want = j < t.n ? expected(t.m0 + i, t.n0 + j) : 123.0f;
            ASSERT_EQ(c[i * ldc + j], want)
                << name << " " << dtypeName(rowType) << " tile (" << t.m0
                << ", " << t.n0 << ") element (" << i << ", " << j << ")";
          }
        }
      }
    }

    // Rows quantized with static scales and zero points per channel
    // (mf.quantize: SmoothQuant), the weight's scales then f32: the same
    // integers as quantizeRowStatic, scaled by the weight's alone.
    std::vector<float> channelScales(K), zeroPoints(K);
    std::vector<int8_t> zeroBytes(K);
    for (int64_t c = 0; c < K; ++c) {
      channelScales[c] = 0.01f + std::fabs(normal(generator)) * 0.02f;
      zeroBytes[c] = -7;
    }
    std::vector<char> storedChannelScales(K * dtypeSize(rowType));
    fromFloats(rowType, channelScales.data(), storedChannelScales.data(), K);
    toFloats(rowType, storedChannelScales.data(), channelScales.data(), K);
    std::fill(zeroPoints.begin(), zeroPoints.end(), -7.0f);
    for (int64_t i = 0; i < M; ++i) {
      toFloats(rowType, storedRows.data() + i * K * dtypeSize(rowType),
               widened.data(), K);
      quantizeRowStatic(widened.data(), K, channelScales.data(),
                        zeroPoints.data(), q.data() + i * K);
    }
    auto expectedStatic = [&](int64_t i, int64_t j) {
      int32_t dot = 0;
      for (int64_t c = 0; c < K; ++c) {
        dot += int32_t{q[i * K + c]} * weight[j * K + c];
      }
      return static_cast<float>(dot) * weightScales[j];
    };
    for (auto [name, service] : services) {
      bool stored = name.rfind("as stored", 0) == 0;
      const int64_t ldc = N;
      std::vector<float> c(M * ldc, 123.0f);
      mfrt_gemm_args_v1 args{storedRows.data(),
                             stored ? weight.data() : panels.data(),
                             c.data(),
                             ldc,
                             0,
                             0,
                             M,
                             N,
                             K,
                             N,
                             /*trans_b=*/1,
                             /*trans_a=*/0,
                             M,
                             weightScales.data(),
                             0,
                             storedChannelScales.data(),
                             zeroBytes.data()};
      service(args);
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          ASSERT_EQ(c[i * ldc + j], expectedStatic(i, j))
              << name << " static " << dtypeName(rowType) << " element (" << i
              << ", " << j << ")";
        }
      }
    }
  }
}

/// Static quantization (mf.quantize): x / scale + zero point, rounded half
/// to even, clamped; a NaN becomes the zero point.
TEST(Int8Dot, QuantizesRowsStatically) {
  const float row[] = {1.0f, 0.25f, -300.0f, 300.0f, 0.75f, std::nanf("")};
  const float scales[] = {0.5f, 0.5f, 1.0f, 1.0f, 0.5f, 1.0f};
  const float zeros[] = {-3.0f, -3.0f, 0.0f, 0.0f, 0.0f, 5.0f};
  int8_t q[6];
  quantizeRowStatic(row, 6, scales, zeros, q);
  const int8_t expected[] = {-1, -2, -128, 127, 2, 5};
  for (int j = 0; j < 6; ++j) {
    EXPECT_EQ(q[j], expected[j]) << j;
  }

  // Long rows (the vector code's 16 lanes and a masked rest) equal the
  // definition element by element.
  std::mt19937 generator(4);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(83), s(83), z(83);
  for (size_t j = 0; j < x.size(); ++j) {
    x[j] = normal(generator);
    s[j] = 0.005f + std::fabs(normal(generator)) * 0.01f;
    z[j] = static_cast<float>(static_cast<int>(j % 40) - 20);
  }
  x[70] = std::nanf("");
  x[5] = INFINITY;
  x[12] = -INFINITY;
  std::vector<int8_t> values(x.size());
  quantizeRowStatic(x.data(), x.size(), s.data(), z.data(), values.data());
  for (size_t j = 0; j < x.size(); ++j) {
    float want = std::isnan(x[j])
                     ? z[j]
                     : std::clamp(std::nearbyint(x[j] / s[j] + z[j]), -128.0f,
                                  127.0f);
    EXPECT_EQ(values[j], static_cast<int8_t>(want)) << j;
  }
}

/// The dot layout packs in place (a parameter's own storage) as into a
/// copy, and packWeight/unpackWeight pick it by layout.
TEST(Int8Dot, PacksInPlaceAndUnpacks) {
  const int64_t N = 45, K = 64;
  std::vector<int8_t> weight(N * K), copy(N * K);
  for (int64_t i = 0; i < N * K; ++i) {
    weight[i] = static_cast<int8_t>(i * 7 - 100);
  }
  packWeight(PanelLayout::Int8Dot, DType::I8, weight.data(), N, K, copy.data(),
             0, panelCount(N));
  std::vector<int8_t> inPlace = weight;
  packWeightInPlace(PanelLayout::Int8Dot, DType::I8, inPlace.data(), N, K, 0,
                    panelCount(N));
  EXPECT_EQ(inPlace, copy);
  EXPECT_NE(inPlace, weight);
  std::vector<int8_t> back(N * K);
  unpackWeight(PanelLayout::Int8Dot, DType::I8, inPlace.data(), N, K,
               back.data());
  EXPECT_EQ(back, weight);
}

} // namespace
