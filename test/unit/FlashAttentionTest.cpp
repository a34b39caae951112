//===- FlashAttentionTest.cpp - the fused attention against a naive one ---===//

#include "runtime/kernels/FlashAttention.h"
#include "runtime/hal/KernelAbi.h"
#include "runtime/kernels/KernelServices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

using namespace mfrt;

namespace {

struct Shape {
  int64_t batch, seq, heads, kvHeads, dim, keys, past;
  bool causal, cached, rope;
  bool perRowPast = false; // row b's past is past - b (a serving batch)
};

std::vector<float> randomValues(size_t count, std::mt19937 &random) {
  std::normal_distribution<float> normal;
  std::vector<float> values(count);
  for (float &value : values) {
    value = normal(random);
  }
  return values;
}

/// RoPE of one head's row, in double, by the Hugging Face formula.
std::vector<double> rotated(const float *x, int64_t dim, double position,
                            double theta) {
  std::vector<double> out(dim);
  for (int64_t i = 0; i < dim / 2; ++i) {
    double angle = position / std::pow(theta, 2.0 * i / dim);
    out[i] = x[i] * std::cos(angle) - x[i + dim / 2] * std::sin(angle);
    out[i + dim / 2] =
        x[i + dim / 2] * std::cos(angle) + x[i] * std::sin(angle);
  }
  return out;
}

/// Runs the fused attention on random inputs and compares every output
/// (and the cache rows it writes) with a direct double-precision one.
void expectMatchesNaive(const Shape &s) {
  std::mt19937 random(7);
  int64_t newRows = s.cached ? s.seq : s.keys;
  std::vector<float> query =
      randomValues(s.batch * s.seq * s.heads * s.dim, random);
  std::vector<float> newKeys =
      randomValues(s.batch * newRows * s.kvHeads * s.dim, random);
  std::vector<float> newValues = randomValues(newKeys.size(), random);
  std::vector<float> cacheKey, cacheValue;
  if (s.cached) {
    cacheKey = randomValues(s.batch * s.keys * s.kvHeads * s.dim, random);
    cacheValue = randomValues(cacheKey.size(), random);
  }
  std::vector<int32_t> pasts(s.batch);
  for (int64_t b = 0; b < s.batch; ++b) {
    pasts[b] = static_cast<int32_t>(s.perRowPast ? s.past - b : s.past);
  }
  std::vector<int32_t> positions(s.batch * s.seq);
  for (size_t i = 0; i < positions.size(); ++i) {
    positions[i] = static_cast<int32_t>(pasts[i / s.seq] + i % s.seq);
  }
  std::vector<float> out(query.size(), -1.0f);
  const double theta = 10000.0;
  FusedAttention args{query.data(),
                      newKeys.data(),
                      newValues.data(),
                      s.cached ? cacheKey.data() : nullptr,
                      s.cached ? cacheValue.data() : nullptr,
                      s.cached ? cacheKey.data() : nullptr,
                      s.cached ? cacheValue.data() : nullptr,
                      s.rope ? positions.data() : nullptr,
                      s.rope,
                      s.rope,
                      s.causal,
                      s.cached,
                      s.perRowPast ? pasts.data() : nullptr,
                      s.past,
                      out.data(),
                      s.batch,
                      s.seq,
                      s.heads,
                      s.kvHeads,
                      s.dim,
                      s.cached ? s.keys : newRows,
                      newRows,
                      0.25f,
                      static_cast<float>(theta),
                      DType::F32};
  // Two calls, as two threads would make them.
  int64_t units = s.batch * s.kvHeads;
  ASSERT_EQ(runFusedAttention(args, 0, units / 2), "");
  ASSERT_EQ(runFusedAttention(args, units / 2, units), "");

  int64_t group = s.heads / s.kvHeads;
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t past = pasts[b];
    const int64_t attended = s.cached ? past + s.seq : s.keys;
    for (int64_t g = 0; g < s.kvHeads; ++g) {
      // The keys and values attended over, rotated as the kernel should.
      std::vector<std::vector<double>> keys(attended), values(attended);
      for (int64_t j = 0; j < attended; ++j) {
        bool fresh = !s.cached || j >= past;
        int64_t row = s.cached ? j - past : j;
        const float *key =
            fresh ? &newKeys[((b * newRows + row) * s.kvHeads + g) * s.dim]
                  : &cacheKey[((b * s.keys + j) * s.kvHeads + g) * s.dim];
        const float *value =
            fresh ? &newValues[((b * newRows + row) * s.kvHeads + g) * s.dim]
                  : &cacheValue[((b * s.keys + j) * s.kvHeads + g) * s.dim];
        keys[j] = fresh && s.rope
                      ? rotated(key, s.dim, positions[b * s.seq + row], theta)
                      : std::vector<double>(key, key + s.dim);
        values[j].assign(value, value + s.dim);
        if (s.cached && fresh) { // written into the cache
          const float *written =
              &cacheKey[((b * s.keys + j) * s.kvHeads + g) * s.dim];
          for (int64_t d = 0; d < s.dim; ++d) {
            EXPECT_NEAR(written[d], keys[j][d], 1e-5) << "cache key " << j;
            EXPECT_EQ(
                cacheValue[((b * s.keys + j) * s.kvHeads + g) * s.dim + d],
                value[d]);
          }
        }
      }
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i = 0; i < s.seq; ++i) {
          const float *q = &query[((b * s.seq + i) * s.heads + h) * s.dim];
          std::vector<double> qr =
              s.rope ? rotated(q, s.dim, positions[b * s.seq + i], theta)
                     : std::vector<double>(q, q + s.dim);
          int64_t visible =
              s.causal ? std::min(attended, past + i + 1) : attended;
          std::vector<double> scores(visible);
          double best = -1e300, total = 0;
          for (int64_t j = 0; j < visible; ++j) {
            scores[j] = 0;
            for (int64_t d = 0; d < s.dim; ++d) {
              scores[j] += qr[d] * keys[j][d] * 0.25;
            }
            best = std::max(best, scores[j]);
          }
          for (double &score : scores) {
            total += (score = std::exp(score - best));
          }
          for (int64_t d = 0; d < s.dim; ++d) {
            double expected = 0;
            for (int64_t j = 0; j < visible; ++j) {
              expected += scores[j] / total * values[j][d];
            }
            EXPECT_NEAR(out[((b * s.seq + i) * s.heads + h) * s.dim + d],
                        expected, 1e-4)
                << "batch " << b << " head " << h << " row " << i << " dim "
                << d;
          }
        }
      }
    }
  }
}

} // namespace

TEST(FlashAttention, DecodeWritesTheCacheAndAttendsOverIt) {
  expectMatchesNaive({2, 1, 4, 2, 16, 200, 150, true, true, true});
  // One KV head for 40 query heads: more rows than a block of 32 attend
  // together.
  expectMatchesNaive({1, 1, 40, 1, 8, 60, 45, true, true, true});
  // One position without a cache sees itself alone (causal) or all keys.
  expectMatchesNaive({1, 1, 4, 2, 8, 1, 0, false, true, true});
  expectMatchesNaive({1, 1, 4, 2, 8, 1, 0, false, false, false});
}

TEST(FlashAttention, DecodeGroupsOfFewRowsAtEveryWidth) {
  // Groups of up to 8 rows take their own AVX-512 products: one row, 7
  // rows of 128 dims (Qwen2's groups), 6 vectors of dims, 160 dims (a
  // pass of 128 and one of 32), keys that are no multiple of 16 on either
  // side of a 128-key block; 24 dims (no multiple of 16) take OpenBLAS.
  expectMatchesNaive({1, 1, 2, 2, 32, 160, 4, true, true, true});
  expectMatchesNaive({1, 1, 14, 2, 128, 300, 140, true, true, true});
  expectMatchesNaive({2, 1, 6, 2, 96, 64, 33, true, true, true});
  expectMatchesNaive({1, 1, 4, 1, 160, 40, 16, true, true, true});
  expectMatchesNaive({1, 1, 8, 1, 16, 200, 127, true, true, true});
  expectMatchesNaive({1, 1, 4, 2, 24, 50, 20, true, true, true});
}

TEST(FlashAttention, EachBatchRowAtItsOwnPosition) {
  // A serving batch: decode and a prefill chunk with rows at 150, 149, 148.
  expectMatchesNaive({3, 1, 4, 2, 16, 200, 150, true, true, true, true});
  expectMatchesNaive({3, 40, 4, 2, 16, 200, 150, true, true, true, true});
}

TEST(FlashAttention, PrefillAcrossQueryAndKeyBlocks) {
  // 70 rows: three blocks of queries; 70 + 100 keys: two blocks of keys.
  expectMatchesNaive({1, 70, 6, 3, 8, 256, 100, true, true, true});
}

TEST(FlashAttention, WithoutCacheRopeOrCausality) {
  expectMatchesNaive({2, 40, 2, 1, 8, 300, 0, false, false, false});
  expectMatchesNaive({1, 33, 4, 4, 8, 33, 0, true, false, true});
}

namespace {

/// The service's arguments for one decode step (4 query heads, 2 KV heads
/// of 8 dims, a 16-row cache) of `batch` rows at `pasts` (one for all rows
/// unless `perRow`): buffers sized for the rows, the cache zero.
struct DecodeCall {
  DecodeCall(int64_t batch, std::vector<int32_t> rowPasts, bool perRow)
      : query(batch * 4 * 8), keys(batch * 2 * 8, 1.0f),
        cache(batch * 16 * 2 * 8, 0.0f), out(query.size(), 0.0f),
        pasts(std::move(rowPasts)) {
    args.unit_begin = 0;
    args.unit_end = batch * 2;
    args.query = query.data();
    args.new_keys = args.new_values = keys.data();
    args.cache_key_in = args.cache_value_in = cache.data();
    args.cache_key = args.cache_value = cache.data();
    args.past_pointer = pasts.data();
    args.out = out.data();
    args.batch = batch;
    args.seq = 1;
    args.heads = 4;
    args.kv_heads = 2;
    args.dim = 8;
    args.keys = 16;
    args.new_rows = 1;
    args.flags = 1 | 8 | (perRow ? 64 : 0); // causal, a past
    args.scale = 1.0;
  }
  std::vector<float> query, keys, cache, out;
  std::vector<int32_t> pasts;
  mfrt_attention_args_v1 args{};
};

} // namespace

TEST(FlashAttention, APastBeyondTheCacheIsAServiceFailureThatWritesNothing) {
  DecodeCall call(1, {16}, /*perRow=*/false); // a 16-row cache is full
  int32_t status = mfrtAttention(&call.args);
  // The status says it failed; why, this thread asks once.
  EXPECT_EQ(status, MFRT_KERNEL_SERVICE_FAILED);
  std::string why = takeServiceError();
  EXPECT_EQ(why.rfind("past_length 16 + 1 new tokens exceeds the 16 keys", 0),
            0u)
      << why;
  EXPECT_EQ(takeServiceError(), ""); // taken
  for (float value : call.cache) {
    ASSERT_EQ(value, 0.0f);
  }
}

TEST(FlashAttention, OneRowsPastBeyondTheCacheFailsTheWholeCall) {
  // Row 0 fits, row 1 does not: nothing is written, not even row 0's.
  DecodeCall call(2, {3, 16}, /*perRow=*/true);
  EXPECT_EQ(mfrtAttention(&call.args), MFRT_KERNEL_SERVICE_FAILED);
  std::string why = takeServiceError();
  EXPECT_EQ(why.rfind("past_length 16 (batch row 1) + 1 new tokens", 0), 0u)
      << why;
  for (float value : call.cache) {
    ASSERT_EQ(value, 0.0f);
  }
}

namespace {

/// The gradients by blocks against the direct double-precision formulas.
void expectGradientsMatchNaive(int64_t batch, int64_t seq, int64_t heads,
                               int64_t kvHeads, int64_t dim, int64_t keys,
                               bool causal) {
  std::mt19937 random(11);
  std::vector<float> q = randomValues(batch * seq * heads * dim, random);
  std::vector<float> dO = randomValues(q.size(), random);
  std::vector<float> k = randomValues(batch * keys * kvHeads * dim, random);
  std::vector<float> v = randomValues(k.size(), random);
  std::vector<float> dq(q.size(), -1.0f), dk(k.size(), -1.0f),
      dv(k.size(), -1.0f);
  const float scale = 0.3f;
  AttentionGradient args{q.data(),  k.data(),  v.data(),  dO.data(),
                         dq.data(), dk.data(), dv.data(), batch,
                         seq,       heads,     kvHeads,   dim,
                         keys,      causal,    scale,     DType::F32};
  int64_t units = batch * kvHeads;
  runAttentionGradient(args, 0, units / 2);
  runAttentionGradient(args, units / 2, units);

  std::vector<double> edq(q.size(), 0.0), edk(k.size(), 0.0),
      edv(k.size(), 0.0);
  int64_t group = heads / kvHeads;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / group;
      for (int64_t i = 0; i < seq; ++i) {
        const float *qi = &q[((b * seq + i) * heads + h) * dim];
        const float *gi = &dO[((b * seq + i) * heads + h) * dim];
        int64_t visible = causal ? std::min(keys, i + 1) : keys;
        std::vector<double> p(visible), dp(visible);
        double best = -1e300, total = 0, weighted = 0;
        for (int64_t j = 0; j < visible; ++j) {
          const float *kj = &k[((b * keys + j) * kvHeads + g) * dim];
          const float *vj = &v[((b * keys + j) * kvHeads + g) * dim];
          p[j] = dp[j] = 0;
          for (int64_t d = 0; d < dim; ++d) {
            p[j] += double(qi[d]) * kj[d] * scale;
            dp[j] += double(gi[d]) * vj[d];
          }
          best = std::max(best, p[j]);
        }
        for (double &x : p) {
          total += (x = std::exp(x - best));
        }
        for (int64_t j = 0; j < visible; ++j) {
          weighted += (p[j] /= total) * dp[j];
        }
        for (int64_t j = 0; j < visible; ++j) {
          double ds = p[j] * (dp[j] - weighted);
          int64_t kv = ((b * keys + j) * kvHeads + g) * dim;
          for (int64_t d = 0; d < dim; ++d) {
            edq[((b * seq + i) * heads + h) * dim + d] +=
                scale * ds * k[kv + d];
            edk[kv + d] += scale * ds * qi[d];
            edv[kv + d] += p[j] * gi[d];
          }
        }
      }
    }
  }
  for (auto [actual, expected, name] :
       {std::tuple{&dq, &edq, "dq"}, {&dk, &edk, "dk"}, {&dv, &edv, "dv"}}) {
    for (size_t i = 0; i < actual->size(); ++i) {
      ASSERT_NEAR((*actual)[i], (*expected)[i], 1e-4) << name << " at " << i;
    }
  }
}

} // namespace

TEST(FlashAttention, GradientsOfCausalAndFullAttention) {
  // 40 rows: two query blocks; GQA with two query heads per KV head.
  expectGradientsMatchNaive(2, 40, 4, 2, 8, 40, true);
  expectGradientsMatchNaive(1, 5, 2, 1, 8, 37, false);
}

TEST(FlashAttention, SixteenBitBuffersMatchF32WithinTheirRounding) {
  // Decode into an f16 cache and a bf16 one: the same math as f32 on the
  // same (representable) values, up to the 16-bit rounding of the rotated
  // rows and the output.
  for (DType dtype : {DType::F16, DType::BF16}) {
    const int64_t heads = 4, kvHeads = 2, dim = 16, keys = 40, past = 30;
    std::mt19937 random(5);
    auto values = [&](int64_t n) {
      std::vector<float> wide = randomValues(n, random);
      std::vector<uint16_t> narrow(n);
      if (dtype == DType::F16) {
        narrowToHalves(wide.data(), narrow.data(), n);
        widenHalves(narrow.data(), wide.data(), n);
      } else {
        narrowToBfloat16s(wide.data(), narrow.data(), n);
        widenBfloat16s(narrow.data(), wide.data(), n);
      }
      return std::pair{wide, narrow};
    };
    auto [q, q16] = values(heads * dim);
    auto [k, k16] = values(kvHeads * dim);
    auto [v, v16] = values(kvHeads * dim);
    auto [ck, ck16] = values(keys * kvHeads * dim);
    auto [cv, cv16] = values(keys * kvHeads * dim);
    int32_t position = past;
    std::vector<float> out(q.size());
    std::vector<uint16_t> out16(q.size());
    FusedAttention wide{q.data(),  k.data(),  v.data(),  ck.data(), cv.data(),
                        ck.data(), cv.data(), &position, true,      true,
                        true,      true,      nullptr,   past,      out.data(),
                        1,         1,         heads,     kvHeads,   dim,
                        keys,      1,         0.25f,     10000.0f,  DType::F32};
    FusedAttention narrow = wide;
    narrow.query = q16.data();
    narrow.newKeys = k16.data();
    narrow.newValues = v16.data();
    narrow.cacheKeyIn = narrow.cacheKey = ck16.data();
    narrow.cacheValueIn = narrow.cacheValue = cv16.data();
    narrow.out = out16.data();
    narrow.dtype = dtype;
    ASSERT_EQ(runFusedAttention(wide, 0, kvHeads), "");
    ASSERT_EQ(runFusedAttention(narrow, 0, kvHeads), "");
    std::vector<float> got(out.size()), cache(ck.size());
    (dtype == DType::F16 ? widenHalves : widenBfloat16s)(
        out16.data(), got.data(), got.size());
    (dtype == DType::F16 ? widenHalves : widenBfloat16s)(
        ck16.data(), cache.data(), cache.size());
    double tolerance = dtype == DType::F16 ? 4e-3 : 3e-2;
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_NEAR(got[i], out[i], tolerance) << "output " << i;
    }
    for (size_t i = 0; i < ck.size(); ++i) { // the new key row, rotated
      EXPECT_NEAR(cache[i], ck[i], tolerance) << "cache key " << i;
    }
  }
}

TEST(FlashAttention, SixteenBitGradientsMatchF32WithinTheirRounding) {
  const int64_t seq = 40, heads = 4, kvHeads = 2, dim = 8, keys = 40;
  for (DType dtype : {DType::F16, DType::BF16}) {
    std::mt19937 random(3);
    auto narrow = [&](std::vector<float> &wide) {
      std::vector<uint16_t> bits(wide.size());
      (dtype == DType::F16 ? narrowToHalves : narrowToBfloat16s)(
          wide.data(), bits.data(), wide.size());
      (dtype == DType::F16 ? widenHalves : widenBfloat16s)(
          bits.data(), wide.data(), wide.size());
      return bits;
    };
    std::vector<float> q = randomValues(seq * heads * dim, random);
    std::vector<float> dO = randomValues(q.size(), random);
    std::vector<float> k = randomValues(keys * kvHeads * dim, random);
    std::vector<float> v = randomValues(k.size(), random);
    std::vector<uint16_t> q16 = narrow(q), dO16 = narrow(dO), k16 = narrow(k),
                          v16 = narrow(v);
    std::vector<float> dq(q.size()), dk(k.size()), dv(k.size());
    std::vector<uint16_t> dq16(q.size()), dk16(k.size()), dv16(k.size());
    AttentionGradient wide{q.data(),  k.data(),  v.data(),  dO.data(),
                           dq.data(), dk.data(), dv.data(), 1,
                           seq,       heads,     kvHeads,   dim,
                           keys,      true,      0.3f,      DType::F32};
    AttentionGradient half{q16.data(),  k16.data(),  v16.data(),  dO16.data(),
                           dq16.data(), dk16.data(), dv16.data(), 1,
                           seq,         heads,       kvHeads,     dim,
                           keys,        true,        0.3f,        dtype};
    runAttentionGradient(wide, 0, kvHeads);
    runAttentionGradient(half, 0, 1);
    runAttentionGradient(half, 1, kvHeads);
    double tolerance = dtype == DType::F16 ? 1e-2 : 6e-2;
    for (auto [expected, bits] :
         {std::pair{&dq, &dq16}, {&dk, &dk16}, {&dv, &dv16}}) {
      std::vector<float> got(bits->size());
      (dtype == DType::F16 ? widenHalves : widenBfloat16s)(
          bits->data(), got.data(), got.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], (*expected)[i],
                    tolerance * (1 + std::fabs((*expected)[i])))
            << i;
      }
    }
  }
}

TEST(FlashAttention, RopeAnglesAreRecomputedWhenAnythingDiffers) {
  // ropeAngles remembers its last angles (decode turns one position in
  // every layer): another theta, head size, position or direction must not
  // get them.
  auto expectAngles = [](float theta, int64_t dim, float position,
                         float direction) {
    std::vector<float> frequencies = ropeInverseFrequencies(theta, dim);
    ASSERT_EQ(frequencies.size(), static_cast<size_t>(dim / 2));
    std::vector<float> cosines(dim / 2), sines(dim / 2);
    ropeAngles(frequencies, position, direction, cosines.data(), sines.data());
    for (int64_t i = 0; i < dim / 2; ++i) {
      float frequency = 1.0f / std::pow(theta, static_cast<float>(2 * i) / dim);
      EXPECT_FLOAT_EQ(frequencies[i], frequency);
      EXPECT_FLOAT_EQ(cosines[i], std::cos(position * frequency));
      EXPECT_FLOAT_EQ(sines[i], direction * std::sin(position * frequency));
    }
  };
  expectAngles(10000.0f, 16, 5.0f, 1.0f);
  expectAngles(10000.0f, 16, 5.0f, 1.0f); // remembered
  expectAngles(10000.0f, 16, 5.0f, -1.0f);
  expectAngles(500000.0f, 16, 5.0f, -1.0f);
  expectAngles(500000.0f, 8, 5.0f, -1.0f);
  expectAngles(500000.0f, 8, 6.0f, -1.0f);
}

namespace {

/// The same attention on a cache of rows and on a pool of blocks holding
/// the same positions, scattered (row b's block i is pool block
/// order[b * width + i]); `unmapped` rows map no block.
struct PagedCall {
  static constexpr int64_t kBlock = 4, kWidth = 8, kPool = 20;
  int64_t batch, seq, heads = 4, kvHeads = 2, dim = 16;
  std::vector<float> query, newKeys, newValues, rowsKey, rowsValue, poolKey,
      poolValue, rowsOut, pagedOut;
  std::vector<int32_t> pasts, positions, table;

  PagedCall(int64_t batch, int64_t seq, std::vector<int32_t> pastRows,
            const std::vector<bool> &unmapped)
      : batch(batch), seq(seq), pasts(std::move(pastRows)) {
    std::mt19937 random(11);
    query = randomValues(batch * seq * heads * dim, random);
    newKeys = randomValues(batch * seq * kvHeads * dim, random);
    newValues = randomValues(newKeys.size(), random);
    const int64_t keys = kWidth * kBlock, row = kvHeads * dim;
    rowsKey = randomValues(batch * keys * row, random);
    rowsValue = randomValues(rowsKey.size(), random);
    poolKey.assign(kPool * kBlock * row, 0.0f);
    poolValue.assign(poolKey.size(), 0.0f);
    std::vector<int32_t> order(kPool);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    table.assign(batch * kWidth, -1);
    int64_t next = 0;
    for (int64_t b = 0; b < batch; ++b) {
      // Blocks for the positions the row reads and writes.
      int64_t blocks = (pasts[b] + seq + kBlock - 1) / kBlock;
      for (int64_t i = 0; i < blocks && !unmapped[b]; ++i) {
        table[b * kWidth + i] = order[next++];
        for (int64_t p = 0; p < kBlock; ++p) {
          std::copy_n(&rowsKey[((b * keys) + i * kBlock + p) * row], row,
                      &poolKey[(table[b * kWidth + i] * kBlock + p) * row]);
          std::copy_n(&rowsValue[((b * keys) + i * kBlock + p) * row], row,
                      &poolValue[(table[b * kWidth + i] * kBlock + p) * row]);
        }
      }
    }
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < seq; ++i) {
        positions.push_back(pasts[b] + static_cast<int32_t>(i));
      }
    }
    rowsOut.assign(query.size(), -1.0f);
    pagedOut.assign(query.size(), -1.0f);
  }

  FusedAttention args(bool paged) {
    float *key = paged ? poolKey.data() : rowsKey.data();
    float *value = paged ? poolValue.data() : rowsValue.data();
    FusedAttention call{query.data(),
                        newKeys.data(),
                        newValues.data(),
                        key,
                        value,
                        key,
                        value,
                        positions.data(),
                        true,
                        true,
                        true,
                        true,
                        pasts.data(),
                        0,
                        paged ? pagedOut.data() : rowsOut.data(),
                        batch,
                        seq,
                        heads,
                        kvHeads,
                        dim,
                        kWidth * kBlock,
                        seq,
                        0.25f,
                        10000.0f,
                        DType::F32};
    if (paged) {
      call.table = {table.data(), kWidth, kBlock, kPool};
    }
    return call;
  }
};

} // namespace

TEST(FlashAttention, APagedCacheEqualsRowsOfCache) {
  // Decode of three rows at their own positions, and a prefill of two.
  for (auto [batch, seq, pasts] :
       {std::tuple{3, 1, std::vector<int32_t>{9, 0, 27}},
        std::tuple{2, 6, std::vector<int32_t>{3, 12}}}) {
    PagedCall call(batch, seq, pasts, std::vector<bool>(batch, false));
    ASSERT_EQ(runFusedAttention(call.args(false), 0, batch * call.kvHeads), "");
    ASSERT_EQ(runFusedAttention(call.args(true), 0, batch * call.kvHeads), "");
    for (size_t i = 0; i < call.rowsOut.size(); ++i) {
      ASSERT_NEAR(call.pagedOut[i], call.rowsOut[i], 1e-6) << "output " << i;
    }
    // The new rows went where the tables map them.
    const int64_t row = call.kvHeads * call.dim, keys = 32;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t p = 0; p < pasts[b] + seq; ++p) {
        int32_t block = call.table[b * PagedCall::kWidth + p / 4];
        for (int64_t e = 0; e < row; ++e) {
          ASSERT_EQ(call.poolKey[(block * 4 + p % 4) * row + e],
                    call.rowsKey[(b * keys + p) * row + e]);
          ASSERT_EQ(call.poolValue[(block * 4 + p % 4) * row + e],
                    call.rowsValue[(b * keys + p) * row + e]);
        }
      }
    }
  }
}

TEST(FlashAttention, ARowWithoutBlocksWritesNothingAndOutputsZeros) {
  PagedCall call(2, 1, {5, 5}, {false, true});
  std::vector<float> poolBefore = call.poolKey;
  ASSERT_EQ(runFusedAttention(call.args(false), 0, 2 * call.kvHeads), "");
  ASSERT_EQ(runFusedAttention(call.args(true), 0, 2 * call.kvHeads), "");
  const int64_t rowOut = call.heads * call.dim;
  for (int64_t i = 0; i < rowOut; ++i) {
    EXPECT_NEAR(call.pagedOut[i], call.rowsOut[i], 1e-6);
    EXPECT_EQ(call.pagedOut[rowOut + i], 0.0f);
  }
  // Row 0 wrote its one new position; nothing else changed.
  int64_t changed = 0;
  for (size_t i = 0; i < poolBefore.size(); ++i) {
    changed += call.poolKey[i] != poolBefore[i];
  }
  EXPECT_EQ(changed, call.kvHeads * call.dim);
}

TEST(FlashAttention, ABlockPastThePoolFailsTheCallAndWritesNothing) {
  PagedCall call(2, 1, {5, 5}, {false, false});
  call.table[PagedCall::kWidth + 1] = PagedCall::kPool; // row 1, block 1
  std::vector<float> poolBefore = call.poolKey;
  EXPECT_EQ(runFusedAttention(call.args(true), 0, 2 * call.kvHeads),
            "block table entry 20 (batch row 1) is past the pool of 20 KV "
            "blocks");
  EXPECT_EQ(call.poolKey, poolBefore);
}
