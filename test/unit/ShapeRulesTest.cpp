//===- ShapeRulesTest.cpp - the dense ops' rules in shapes/ ---------------===//
//
// The rules both the verifiers and the loader call: what each infers, and
// the refusals that only the loader relies on (an element type that a
// trait fixes in MLIR but a hostile model.bin may change).
//
//===----------------------------------------------------------------------===//

#include "shapes/ShapeRules.h"

#include <gtest/gtest.h>

#include <cstdint>

using namespace mfshapes;

namespace {

TensorInfo f32(std::vector<int64_t> shape) {
  return {Element::F32, std::move(shape)};
}
TensorInfo i32(std::vector<int64_t> shape) {
  return {Element::I32, std::move(shape)};
}

TEST(ShapeRules, MatmulInfersBatchedAndTransposedResults) {
  Inferred rule = inferMatmul(f32({2, 8, 64}), f32({128, 64}),
                              /*transposeLhs=*/false, /*transposeRhs=*/true);
  ASSERT_TRUE(rule) << rule.error;
  EXPECT_EQ(rule.results[0], f32({2, 8, 128}));
  EXPECT_EQ(inferMatmul(f32({8, 64}), f32({32, 16}), false, false).error,
            "contracting dims differ: lhs has 64, rhs has 32 (check "
            "transpose_lhs / transpose_rhs)");
  EXPECT_FALSE(
      inferMatmul(f32({8, 64}), {Element::BF16, {64, 16}}, false, false));
}

TEST(ShapeRules, ReductionsAndEmbeddingsSayWhatTheyExpect) {
  Inferred sum = inferReduction(f32({2, 4}), 1);
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum.results[0], f32({2, 1}));
  EXPECT_EQ(sum.note, "the input with dim 1 reduced to 1");
  EXPECT_FALSE(inferReduction(f32({2, 4}), 2));
  Inferred rows = inferEmbedding(f32({256, 64}), i32({1, 8}));
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows.results[0], f32({1, 8, 64}));
}

// MLIR's traits give these ops one element type; the loader has only the
// rule to refuse a model.bin that mixes them (a kernel would copy the
// wrong number of bytes).
TEST(ShapeRules, ElementTypesOfCopiesMustAgree) {
  TensorInfo bf16{Element::BF16, {2, 4}};
  EXPECT_NE(checkConcat({f32({2, 4}), bf16}, f32({2, 8}), 1), "");
  EXPECT_EQ(checkConcat({f32({2, 4}), f32({2, 4})}, f32({2, 8}), 1), "");
  EXPECT_NE(checkSlice(bf16, f32({2, 2}), {0, 0}), "");
  EXPECT_EQ(checkSlice(f32({2, 4}), f32({2, 2}), {0, 2}), "");
  EXPECT_NE(checkSlice(f32({2, 4}), f32({2, 2}), {0, 3}), "");
  EXPECT_NE(checkPad(bf16, f32({2, 8}), {0, 0}), "");
  EXPECT_NE(checkReshape(bf16, f32({8})), "");
  EXPECT_NE(checkBroadcast(bf16, f32({3, 2, 4})), "");
  EXPECT_EQ(checkCast(bf16, f32({2, 4})), "");
}

TEST(ShapeRules, KvCacheWritesFitTheirCacheOrPool) {
  TensorInfo cache = f32({2, 16, 2, 8}), update = f32({2, 1, 2, 8});
  EXPECT_TRUE(inferKvCacheWrite(cache, update, i32({2}), nullptr));
  EXPECT_EQ(inferKvCacheWrite(cache, update, i32({3}), nullptr).error,
            "position has 3 positions, expected one per batch row (2)");
  EXPECT_FALSE(inferKvCacheWrite(cache, {Element::BF16, {2, 1, 2, 8}}, i32({}),
                                 nullptr));
  // A pool of 16 blocks of 8 positions, 2 rows mapped to 4 blocks each.
  TensorInfo pool = f32({16, 8, 2, 8}), table = i32({2, 4});
  EXPECT_TRUE(inferKvCacheWrite(pool, update, i32({2}), &table));
  TensorInfo longUpdate = f32({2, 40, 2, 8});
  EXPECT_EQ(inferKvCacheWrite(pool, longUpdate, i32({2}), &table).error,
            "block_table maps 4 blocks of 8 positions, fewer than the 40 "
            "new tokens");
}

// A hostile model.bin's extents and offsets may be near 2^60 or 2^63: the
// rules refuse them without overflowing (UBSan would say so).
TEST(ShapeRules, HugeExtentsAndOffsetsDoNotOverflow) {
  int64_t huge = int64_t(1) << 60;
  TensorInfo pool = f32({16, huge, 2, 8}), update = f32({1, 40, 2, 8});
  TensorInfo table = i32({1, huge});
  EXPECT_TRUE(inferKvCacheWrite(pool, update, i32({1}), &table));
  int64_t far = INT64_MAX - 1;
  EXPECT_EQ(checkSlice(f32({2, 4}), f32({2, 2}), {0, far}),
            "slice 2 from " + std::to_string(far) +
                " of dim 1 is outside the input's [0, 4)");
}

TEST(ShapeRules, AttentionReadsAnInt8CacheWithItsScales) {
  TensorInfo query = f32({1, 1, 4, 16}), cache{Element::I8, {1, 32, 2, 16}};
  TensorInfo past = i32({1}), scales = f32({2, 16});
  Inferred rule = inferAttention(query, cache, cache, &past, nullptr, &scales,
                                 &scales, /*causal=*/true);
  ASSERT_TRUE(rule) << rule.error;
  EXPECT_EQ(rule.results[0], query);
  EXPECT_EQ(inferAttention(query, cache, cache, &past, nullptr, &scales,
                           nullptr, true)
                .error,
            "kv_scales needs the key and the value scales");
  EXPECT_EQ(inferAttention(query, cache, cache, nullptr, nullptr, &scales,
                           &scales, true)
                .error,
            "an int8 key/value cache needs the past_length it is read to");
  TensorInfo wide = f32({2, 32});
  EXPECT_FALSE(
      inferAttention(query, cache, cache, &past, nullptr, &wide, &wide, true));
  // GQA: heads a multiple of the KV heads.
  TensorInfo three = f32({1, 1, 3, 16}), keys = f32({1, 8, 2, 16});
  EXPECT_FALSE(inferAttention(three, keys, keys, nullptr, nullptr, nullptr,
                              nullptr, false));
}

TEST(ShapeRules, GradientsHaveTheirOperandsTypes) {
  TensorInfo x = f32({1, 4, 16}), w = f32({16});
  EXPECT_EQ(checkNormGrad(x, w, x, w, /*wrt=*/1, /*weights=*/1), "");
  EXPECT_EQ(checkNormGrad(x, w, x, x, 1, 1),
            "the gradient of the weight must have its type 'tensor<16xf32>', "
            "got 'tensor<1x4x16xf32>'");
  EXPECT_NE(checkNormGrad(x, w, x, w, /*wrt=*/2, /*weights=*/1), "");
  EXPECT_EQ(checkEmbeddingGrad(i32({1, 4}), x, f32({256, 16})), "");
  EXPECT_NE(checkEmbeddingGrad(i32({1, 3}), x, f32({256, 16})), "");
}

} // namespace
