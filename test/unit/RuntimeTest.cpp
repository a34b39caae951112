//===- RuntimeTest.cpp - runtime data structures --------------------------===//

#include "runtime/base/Hash.h"
#include "runtime/base/Tensor.h"
#include "runtime/format/HostProgram.h"
#include "runtime/hal/Allocator.h"
#include "runtime/hal/ThreadPool.h"
#include "runtime/io/Quantization.h"
#include "runtime/io/Safetensors.h"
#include "runtime/kernels/Kernels.h"
#include "runtime/session/Sampler.h"
#include "runtime/text/TokenIds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace mfrt;

namespace {

TEST(Tensor, HalfAndBfloat16RoundToNearestEven) {
  for (float value : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 0.1f}) {
    EXPECT_EQ(halfToFloat(floatToHalf(value)), halfToFloat(floatToHalf(
                                                   halfToFloat(floatToHalf(value)))));
    EXPECT_NEAR(halfToFloat(floatToHalf(value)), value, std::abs(value) * 1e-3);
  }
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // rounds up to infinity
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one.
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(NAN))));
}

TEST(Tensor, ElementCountsAreOverflowChecked) {
  EXPECT_EQ(*checkedElementCount({2, 3, 4}), 24);
  EXPECT_EQ(*checkedElementCount({}), 1);
  EXPECT_FALSE(checkedElementCount({-1, 4}));
  EXPECT_FALSE(checkedElementCount({1 << 30, 1 << 30, 1 << 30}));
}

TEST(Allocator, ReusesFreedBlocksAndTracksThePeak) {
  Allocator allocator;
  void *first;
  {
    Tensor a = *allocator.allocate(DType::F32, {256});
    Tensor b = *allocator.allocate(DType::F32, {256});
    first = a.data();
    EXPECT_EQ(allocator.liveBytes(), 2048u);
  }
  EXPECT_EQ(allocator.liveBytes(), 0u);
  EXPECT_EQ(allocator.peakBytes(), 2048u);
  Tensor c = *allocator.allocate(DType::F32, {256});
  EXPECT_TRUE(c.data() == first || allocator.reservedBytes() == 2048u);
  EXPECT_EQ(allocator.reservedBytes(), 2048u); // no new block
  EXPECT_EQ(c.as<float>()[0], 0.0f);           // zero-filled on reuse
  EXPECT_FALSE(allocator.allocate(DType::F32, {-3}));
}

TEST(Safetensors, RoundTripsAndRejectsLies) {
  Allocator allocator;
  Tensor a = *allocator.allocate(DType::F32, {2, 3});
  Tensor b = *allocator.allocate(DType::BF16, {4});
  for (int i = 0; i < 6; ++i) {
    a.storeFloat(i, i * 0.5f);
  }
  b.storeFloat(3, -1.0f);
  std::string path = ::testing::TempDir() + "/roundtrip.safetensors";
  ASSERT_TRUE(writeSafetensors(path, {{"a", &a}, {"b", &b}}).isOk());
  StatusOr<CheckpointFile> file = CheckpointFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  const CheckpointEntry &entry = file->tensors().at("a");
  EXPECT_EQ(entry.shape, (Shape{2, 3}));
  float value;
  std::memcpy(&value, entry.data + 5 * 4, 4);
  EXPECT_EQ(value, 2.5f);
  EXPECT_EQ(file->tensors().at("b").dtype, DType::BF16);

  std::ifstream stream(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(stream)),
                             std::istreambuf_iterator<char>());
  std::vector<uint8_t> truncated(bytes.begin(), bytes.end() - 3);
  EXPECT_FALSE(CheckpointFile::fromBytes(truncated, "t"));
  std::vector<uint8_t> hugeHeader = bytes;
  hugeHeader[7] = 0x7f;
  EXPECT_FALSE(CheckpointFile::fromBytes(hugeHeader, "t"));
  EXPECT_FALSE(CheckpointFile::fromBytes({1, 2, 3}, "t"));
}

TEST(Safetensors, ReadsConvertAndAFileTruncatedAfterOpeningIsAnError) {
  Allocator allocator;
  Tensor big = *allocator.allocate(DType::F32, {1 << 20}); // 4 MiB
  for (int64_t i = 0; i < big.numElements(); ++i) {
    big.as<float>()[i] = static_cast<float>(i % 7);
  }
  std::string path = ::testing::TempDir() + "/truncated.safetensors";
  ASSERT_TRUE(writeSafetensors(path, {{"big", &big}}).isOk());
  StatusOr<CheckpointFile> file = CheckpointFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  const CheckpointEntry &entry = file->tensors().at("big");
  // Read as it is, and converted to bf16.
  Tensor same = *allocator.allocate(DType::F32, {1 << 20});
  ASSERT_TRUE(file->read(entry, same).isOk());
  EXPECT_EQ(same.as<float>()[13], 6.0f);
  Tensor narrow = *allocator.allocate(DType::BF16, {1 << 20});
  ASSERT_TRUE(file->read(entry, narrow).isOk());
  EXPECT_EQ(narrow.loadFloat(13), 6.0f);
  // The file loses its tail while mapped: the missing pages would SIGBUS.
  ASSERT_EQ(truncate(path.c_str(), 4096), 0);
  Status status = file->read(entry, same);
  EXPECT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("became shorter while it was read"),
            std::string::npos)
      << status.message();
}

TEST(Safetensors, ViewsServeTheFileInPlaceAndAFileThatShrinksUnderThemIsNamed) {
  Allocator allocator;
  Tensor big = *allocator.allocate(DType::F32, {1 << 20}); // 4 MiB
  for (int64_t i = 0; i < big.numElements(); ++i) {
    big.as<float>()[i] = static_cast<float>(i % 7);
  }
  Tensor small = *allocator.allocate(DType::F32, {4, 2});
  std::string path = ::testing::TempDir() + "/view.safetensors";
  ASSERT_TRUE(writeSafetensors(path, {{"big", &big}, {"small", &small}}).isOk());
  StatusOr<CheckpointFile> file = CheckpointFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  const CheckpointEntry &entry = file->tensors().at("big");
  std::optional<Tensor> view = file->view(entry, DType::F32, {1 << 20});
  ASSERT_TRUE(view);
  EXPECT_EQ(view->data(), static_cast<const void *>(entry.data));
  EXPECT_EQ(view->as<float>()[13], 6.0f);
  // Writes stay in this process (a private mapping).
  view->as<float>()[13] = -1.0f;
  StatusOr<CheckpointFile> again = CheckpointFile::open(path);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->tensors().at("big").data[13 * 4 + 3] & 0x80, 0);
  // Another dtype, or a block that is not one run, is not served in place.
  EXPECT_FALSE(file->view(entry, DType::BF16, {1 << 20}));
  const CheckpointEntry &rows = file->tensors().at("small");
  TensorBlock secondRows{0, 2, 2, 1}, secondColumn{1, 1, 1, 1};
  std::optional<Tensor> block = file->view(rows, DType::F32, {2, 2}, &secondRows);
  ASSERT_TRUE(block);
  EXPECT_EQ(block->data(), static_cast<const void *>(rows.data + 4 * 4));
  EXPECT_FALSE(file->view(rows, DType::F32, {4, 1}, &secondColumn));
  // The file loses its tail while a view is in use: reading the view is a
  // SIGBUS, reported with the file's name. (threadsafe: the child runs the
  // test again from the start rather than forking a threaded process.)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (truncate(path.c_str(), 4096) != 0) {
          _exit(2);
        }
        volatile float sum = 0;
        for (int64_t i = 0; i < view->numElements(); i += 1024) {
          sum = sum + view->as<float>()[i];
        }
        _exit(0);
      },
      ::testing::ExitedWithCode(1), "became shorter while its tensors were in use");
}

TEST(Generation, BytesIdsAndSampling) {
  EXPECT_EQ(decodeBytes({'h', 'i', 1, 0xe4, 0xb8, 0xad, 0xff, 300}),
            "hi\\x01\xe4\xb8\xad\\xff<300>");
  EXPECT_EQ(*parseIds("1,2,3", 10), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(parseIds("1,,2", 10));
  EXPECT_FALSE(parseIds("10", 10));
  EXPECT_FALSE(encodeBytes("abc", 100));

  float logits[4] = {0.1f, 3.0f, 2.9f, -1.0f};
  Sampler greedy(SamplingOptions{}, 0);
  EXPECT_EQ(greedy.next(logits, 4, {}, 0), 1);
  SamplingOptions penalized;
  penalized.repetitionPenalty = 2.0;
  EXPECT_EQ(Sampler(penalized, 0).next(logits, 4, {1}, 0), 2);
  SamplingOptions topOne;
  topOne.doSample = true;
  topOne.topK = 1;
  Sampler sampler(topOne, 42);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(sampler.next(logits, 4, {}, 0), 1);
  }
}

// OpenAI's presence and frequency penalties count the generated tokens
// only (the prompt's are history before `firstGenerated`), and logit_bias
// adds to a logit before them.
TEST(Generation, PenaltiesAndLogitBias) {
  float logits[4] = {0.1f, 3.0f, 2.9f, 2.0f};
  // History: prompt [1, 1], generated [2, 2].
  const std::vector<int32_t> history = {1, 1, 2, 2};
  SamplingOptions presence;
  presence.presencePenalty = 0.15;
  float close[4] = {0.1f, 3.0f, 2.0f, 2.9f};
  // 1 appears only in the prompt: its 3.0 stays ahead of 3's 2.9.
  EXPECT_EQ(Sampler(presence, 0).next(close, 4, history, 2), 1);
  // Counted from the start, 1 would be penalized: 2.85 < 2.9.
  EXPECT_EQ(Sampler(presence, 0).next(close, 4, history, 0), 3);
  SamplingOptions frequency;
  frequency.frequencyPenalty = 0.6;
  // Over the whole history: 3.0 - 1.2 = 1.8, 2.9 - 1.2 = 1.7: 3 (2.0) wins.
  EXPECT_EQ(Sampler(frequency, 0).next(logits, 4, history, 0), 3);
  // Generated only: 1 keeps 3.0.
  EXPECT_EQ(Sampler(frequency, 0).next(logits, 4, history, 2), 1);
  SamplingOptions negative;
  negative.frequencyPenalty = -0.1; // encourages repeats: 2.9 + 0.2 > 3.0
  EXPECT_EQ(Sampler(negative, 0).next(logits, 4, history, 2), 2);
  SamplingOptions bias;
  bias.logitBias = {{0, 100.0}, {7, 5.0}}; // an id past the vocabulary: none
  EXPECT_EQ(Sampler(bias, 0).next(logits, 4, {}, 0), 0);
  bias.logitBias = {{1, -100.0}};
  EXPECT_EQ(Sampler(bias, 0).next(logits, 4, {}, 0), 2);
}

// The sampler orders only the candidates it can pick (the top k, or as
// many of the best as the top_p nucleus needs): it picks what sorting the
// whole vocabulary (stably, by descending score) would, draw for draw.
TEST(Generation, SamplingOrdersOnlyWhatItCanPick) {
  auto reference = [](const std::vector<float> &logits,
                      const SamplingOptions &options, std::mt19937_64 &random) {
    int64_t vocab = static_cast<int64_t>(logits.size());
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return double(logits[a]) > double(logits[b]);
    });
    int64_t keep = options.topK > 0 ? std::min(options.topK, vocab) : vocab;
    std::vector<double> probabilities(keep);
    double best = logits[order[0]] / options.temperature, sum = 0;
    for (int64_t i = 0; i < keep; ++i) {
      probabilities[i] = std::exp(logits[order[i]] / options.temperature - best);
      sum += probabilities[i];
    }
    double cumulative = 0;
    int64_t nucleus = keep;
    for (int64_t i = 0; i < keep; ++i) {
      probabilities[i] /= sum;
      cumulative += probabilities[i];
      if (cumulative >= options.topP) {
        nucleus = i + 1;
        break;
      }
    }
    std::discrete_distribution<int64_t> pick(probabilities.begin(),
                                             probabilities.begin() + nucleus);
    return order[pick(random)];
  };
  std::mt19937 fill(7);
  for (float spread : {0.3f, 3.0f}) {
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> logits(5000);
    for (float &logit : logits) {
      logit = std::round(normal(fill) * 8) / 8; // ties too
    }
    for (auto [topK, topP] : {std::pair<int64_t, double>{20, 0.8},
                              {50, 1.0}, {1, 1.0}, {0, 0.9}, {0, 0.5}}) {
      SamplingOptions options;
      options.doSample = true;
      options.topK = topK;
      options.topP = topP;
      options.temperature = 0.7;
      Sampler sampler(options, 11);
      std::mt19937_64 random(11);
      for (int step = 0; step < 50; ++step) {
        ASSERT_EQ(sampler.next(logits.data(), 5000, {}, 0),
                  reference(logits, options, random))
            << "top_k " << topK << ", top_p " << topP << ", spread " << spread
            << ", step " << step;
      }
    }
  }
  // Neither top_k nor top_p: every id, drawn in id order (the same
  // distribution): frequencies near the softmax's.
  float four[4] = {0.0f, 1.0f, 2.0f, 0.5f};
  SamplingOptions all;
  all.doSample = true;
  Sampler sampler(all, 3);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 20000; ++i) {
    ++counts[sampler.next(four, 4, {}, 0)];
  }
  double total = 0;
  for (float logit : four) {
    total += std::exp(logit);
  }
  for (int id = 0; id < 4; ++id) {
    EXPECT_NEAR(counts[id] / 20000.0, std::exp(four[id]) / total, 0.015) << id;
  }
}

/// A tensor of `shape` in fresh (uninitialized) storage.
Tensor newTensor(DType dtype, const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return Tensor(dtype, shape,
                std::shared_ptr<void>(::operator new(n *dtypeSize(dtype) + 1),
                                      [](void *p) { ::operator delete(p); }));
}

} // namespace

// The kernel library's checksum is standard FNV-1a 64 (published vectors).
TEST(Hash, Fnv1a64KnownValues) {
  EXPECT_EQ(mfrt::fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(mfrt::fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(mfrt::fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

// Back-to-back dispatches (workers spinning) and dispatches after a pause
// (workers asleep) each cover every tile exactly once.
TEST(ThreadPool, EveryTileOnceWhetherWorkersSpinOrSleep) {
  mfrt::ThreadPool pool(3);
  for (int job = 0; job < 2000; ++job) {
    int64_t count = 1 + job % 37;
    std::vector<std::atomic<int>> hits(count);
    pool.parallelFor(count, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        hits[i].fetch_add(1);
      }
    });
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(hits[i].load(), 1) << "job " << job << " tile " << i;
    }
    if (job % 500 == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

// Dispatches without waiting: each job's tiles read what every tile of the
// job before wrote (a chain of prefix steps), workers spinning, asleep
// (the caller takes their tiles) or woken mid-chain, single-tile jobs run
// inline between, and the results are final after finish().
TEST(ThreadPool, DispatchedJobsSeeEveryTileOfTheJobBefore) {
  for (unsigned threads : {2u, 3u}) {
    mfrt::ThreadPool pool(threads);
    struct Chain {
      std::vector<int64_t> values;
      std::vector<int64_t> next;
    } chain;
    constexpr int64_t kWidth = 12;
    chain.values.assign(kWidth, 1);
    chain.next.assign(kWidth, 0);
    // Tile t of a sum step: next[t] from all of values (every tile of the
    // copy step before); tile t of a copy step: values[t] = next[t].
    auto sumStep = [](const void *context, int64_t begin, int64_t end) {
      auto &c = *const_cast<Chain *>(static_cast<const Chain *>(context));
      for (int64_t t = begin; t < end; ++t) {
        // Tiles of unequal length: a late tile must still be waited for.
        for (volatile int64_t spin = 0; spin < (t % 4) * 300; ++spin) {
        }
        int64_t sum = 0;
        for (int64_t v : c.values) {
          sum += v;
        }
        c.next[t] = sum % 1000003 + t;
      }
    };
    auto copyStep = [](const void *context, int64_t begin, int64_t end) {
      auto &c = *const_cast<Chain *>(static_cast<const Chain *>(context));
      for (int64_t t = begin; t < end; ++t) {
        c.values[t] = c.next[t];
      }
    };
    std::vector<int64_t> expected(kWidth, 1), scratch(kWidth, 0);
    for (int step = 0; step < 3000; ++step) {
      int64_t tiles = step % 5 == 4 ? 1 : kWidth; // some run inline
      pool.dispatch(tiles, sumStep, &chain);
      pool.dispatch(kWidth, copyStep, &chain);
      int64_t sum = 0;
      for (int64_t v : expected) {
        sum += v;
      }
      for (int64_t t = 0; t < tiles; ++t) {
        scratch[t] = sum % 1000003 + t;
      }
      expected = scratch;
      if (step % 1000 == 999) {
        pool.finish();
        ASSERT_EQ(chain.values, expected) << threads << " threads, step " << step;
        std::this_thread::sleep_for(std::chrono::milliseconds(2)); // workers sleep
      }
    }
    pool.finish();
    EXPECT_EQ(chain.values, expected) << threads << " threads";
  }
}

// Big blocks come from the page allocator: aligned, zeroed, reusable; a
// reused block is zeroed again when asked.
TEST(Allocator, PageBlocksAreAlignedAndZeroed) {
  for (size_t bytes : {size_t(1), size_t(4096), size_t(3) << 20, (size_t(5) << 20) + 12}) {
    auto *block = static_cast<unsigned char *>(mfrt::allocatePages(bytes));
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % (bytes >= (size_t(2) << 20) ? (size_t(2) << 20) : 4096), 0u);
    for (size_t i = 0; i < bytes; i += 4093) {
      EXPECT_EQ(block[i], 0);
    }
    EXPECT_EQ(block[bytes - 1], 0);
    std::memset(block, 0xab, bytes);
    mfrt::freePages(block, bytes);
  }
  Allocator allocator;
  void *first;
  {
    Tensor big = *allocator.allocate(DType::F32, {1 << 20}); // 4 MiB
    first = big.data();
    std::memset(big.data(), 0xff, big.byteSize());
  }
  Tensor again = *allocator.allocate(DType::F32, {1 << 20});
  EXPECT_EQ(again.data(), first); // cached, not mapped anew
  EXPECT_EQ(again.as<float>()[12345], 0.0f);
}

TEST(Kernels, CastsBetweenFloatTypesInBulkAsElementByElement) {
  // The eager Cast converts floats in chunks (bulk F16C/bf16 conversions on
  // the pool): the same values as one element at a time, for a size that
  // is not a whole number of chunks, NaN and infinities included.
  flatbuffers::FlatBufferBuilder builder;
  std::vector<uint32_t> operands{0}, results{1};
  builder.Finish(
      fb::CreateOpDirect(builder, fb::OpKind::Cast, &operands, &results));
  const fb::Op *op = flatbuffers::GetRoot<fb::Op>(builder.GetBufferPointer());
  ThreadPool pool(2);
  ParallelFor parallel = [&](int64_t count, const auto &body) {
    pool.parallelFor(count, body);
  };
  auto tensor = [](DType dtype, int64_t n) { return newTensor(dtype, {n}); };
  const int64_t n = 40000;
  Tensor source = tensor(DType::F32, n);
  for (int64_t i = 0; i < n; ++i) {
    source.as<float>()[i] = std::ldexp(std::sin(0.37 * i), (i % 41) - 20);
  }
  source.as<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  source.as<float>()[8] = std::numeric_limits<float>::infinity();
  source.as<float>()[9] = 1e30f; // beyond f16: infinity
  for (auto [from, to] : {std::pair{DType::F32, DType::F16},
                          std::pair{DType::F32, DType::BF16},
                          std::pair{DType::F16, DType::F32},
                          std::pair{DType::BF16, DType::F32},
                          std::pair{DType::F16, DType::BF16},
                          std::pair{DType::BF16, DType::F16}}) {
    Tensor input = tensor(from, n);
    for (int64_t i = 0; i < n; ++i) {
      input.storeFloat(i, source.as<float>()[i]);
    }
    Tensor bulk = tensor(to, n), expected = tensor(to, n);
    for (int64_t i = 0; i < n; ++i) {
      expected.storeFloat(i, input.loadFloat(i));
    }
    Status status = runKernel(*op, {&input}, {&bulk}, parallel);
    ASSERT_TRUE(status) << status.message();
    EXPECT_EQ(std::memcmp(bulk.data(), expected.data(), bulk.byteSize()), 0)
        << int(from) << " -> " << int(to);
  }
}

TEST(Kernels, BroadcastsRowsOfOneValueAsElementByElement) {
  // A broadcast along the innermost dimension fills each row with one
  // value (PyNative's optimizer broadcasts its scalars to every weight);
  // the rest gathers. Both against the index arithmetic, for 4- and 2-byte
  // elements.
  flatbuffers::FlatBufferBuilder builder;
  std::vector<uint32_t> operands{0}, results{1};
  builder.Finish(
      fb::CreateOpDirect(builder, fb::OpKind::Broadcast, &operands, &results));
  const fb::Op *op = flatbuffers::GetRoot<fb::Op>(builder.GetBufferPointer());
  auto tensor = newTensor;
  struct Case {
    Shape from, to;
  };
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const Case &c :
         {Case{{}, {3, 5}}, Case{{3, 1}, {3, 5}}, Case{{1, 1, 1}, {2, 3, 4}},
          Case{{2, 1, 4}, {2, 3, 4}}, Case{{4}, {3, 4}},
          Case{{2, 3, 1}, {2, 3, 7}}}) {
      Tensor input = tensor(dtype, c.from), out = tensor(dtype, c.to);
      for (int64_t i = 0; i < input.numElements(); ++i) {
        input.storeFloat(i, static_cast<float>(i + 1));
      }
      ASSERT_TRUE(runKernel(*op, {&input}, {&out}));
      // Element [i0, .., in] of `to` reads `from` at the indices of its
      // non-1 dimensions (aligned to the right).
      size_t lead = c.to.size() - c.from.size();
      for (int64_t i = 0; i < out.numElements(); ++i) {
        int64_t rest = i, source = 0, stride = 1;
        std::vector<int64_t> index(c.to.size());
        for (int64_t d = static_cast<int64_t>(c.to.size()) - 1; d >= 0; --d) {
          index[d] = rest % c.to[d];
          rest /= c.to[d];
        }
        for (int64_t d = static_cast<int64_t>(c.from.size()) - 1; d >= 0; --d) {
          source += (c.from[d] == 1 ? 0 : index[lead + d]) * stride;
          stride *= c.from[d];
        }
        EXPECT_EQ(out.loadFloat(i), input.loadFloat(source))
            << formatShape(c.from) << " -> " << formatShape(c.to) << " at "
            << i;
      }
    }
  }
}

/// Builds an executable with f32[4] parameters p0 and p1, two bf16[4]/// Builds
/// an executable with f32[4] parameters p0 and p1, two bf16[4] derived slots,
/// kernel `signature` (if given) and one entry, and verifies the entry's host
/// program.
struct HostProgramProbe {
  flatbuffers::FlatBufferBuilder builder;
  std::vector<int64_t> four{4};

  flatbuffers::Offset<fb::TensorType> type(fb::DType dtype,
                                           const std::vector<int64_t> &shape) {
    return fb::CreateTensorTypeDirect(builder, dtype, &shape);
  }

  StatusOr<HostProgram>
  build(const std::vector<flatbuffers::Offset<fb::TensorType>> &values,
        const std::vector<uint32_t> &inputs,
        const std::vector<uint32_t> &outputs,
        const std::vector<flatbuffers::Offset<fb::Op>> &ops,
        const std::vector<flatbuffers::Offset<fb::Buffer>> &buffers,
        const std::vector<flatbuffers::Offset<fb::Command>> &commands,
        const std::vector<uint32_t> &hostOutputs,
        flatbuffers::Offset<fb::KernelSignature> signature = 0,
        bool initializer = false) {
    auto host = fb::CreateHostProgramDirect(builder, 64, &buffers, &commands,
                                            &hostOutputs);
    std::vector<flatbuffers::Offset<fb::Entry>> entries{fb::CreateEntryDirect(
        builder, "probe", &values, &inputs, nullptr, &outputs, nullptr, &ops,
        host)};
    std::vector<flatbuffers::Offset<fb::Parameter>> parameters{
        fb::CreateParameterDirect(builder, "p0", "p0", type(fb::DType::F32, four)),
        fb::CreateParameterDirect(builder, "p1", "p1", type(fb::DType::F32, four))};
    std::vector<flatbuffers::Offset<fb::TensorType>> derived{
        type(fb::DType::BF16, four), type(fb::DType::BF16, four)};
    std::vector<flatbuffers::Offset<flatbuffers::String>> kernels;
    std::vector<flatbuffers::Offset<fb::KernelSignature>> signatures;
    if (!signature.IsNull()) {
      kernels.push_back(builder.CreateString("mfk_0"));
      signatures.push_back(signature);
    }
    auto model = fb::CreateModelInfoDirect(builder, "probe");
    builder.Finish(fb::CreateExecutableDirect(
        builder, kMaxFormatVersion, "cpu", model, &parameters, &entries,
        nullptr, &kernels, &signatures, 0, 0, &derived));
    const fb::Executable &root =
        *flatbuffers::GetRoot<fb::Executable>(builder.GetBufferPointer());
    return HostProgram::build(root, *root.entries()->Get(0), initializer);
  }
};

TEST(HostProgram, OnlyTheInitializerDerivesValuesTheEntriesRead) {
  // p0 (value 0) -> Cast (1) -> Mul with input 2 (3), returned. The
  // initializer computes the cast into slot 0 and returns it; an entry
  // reads it there (the derived buffer holds value 1) and may not compute
  // it again; the initializer may write nothing but derived slots.
  auto f32 = [](HostProgramProbe &probe) {
    return probe.type(fb::DType::F32, probe.four);
  };
  auto bf16 = [](HostProgramProbe &probe) {
    return probe.type(fb::DType::BF16, probe.four);
  };
  std::vector<uint32_t> none{}, param{0}, cast{1}, mulIn{1, 2}, mul{3};
  for (int variant = 0; variant < 2; ++variant) { // the initializer
    bool intoOutput = variant == 1;
    HostProgramProbe probe;
    auto &builder = probe.builder;
    std::vector<flatbuffers::Offset<fb::TensorType>> values{f32(probe),
                                                            bf16(probe)};
    std::vector<flatbuffers::Offset<fb::Op>> ops{
        fb::CreateOpDirect(builder, fb::OpKind::Param, &none, &param, nullptr,
                           fb::OpAttributes::ParamAttrs,
                           fb::CreateParamAttrs(builder, 0).Union()),
        fb::CreateOpDirect(builder, fb::OpKind::Cast, &param, &cast)};
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers{
        fb::CreateBuffer(builder, fb::BufferKind::Parameter, 0, f32(probe)),
        intoOutput
            ? fb::CreateBuffer(builder, fb::BufferKind::Output, 0, bf16(probe))
            : fb::CreateBuffer(builder, fb::BufferKind::Derived, 0,
                               bf16(probe))};
    std::vector<fb::Binding> castBindings{{0, 0, fb::Access::Read},
                                          {1, 1, fb::Access::Write}};
    std::vector<flatbuffers::Offset<fb::Command>> commands{
        fb::CreateCommandDirect(builder, fb::CommandKind::Library, 0, 1, 1,
                                &castBindings)};
    StatusOr<HostProgram> program = probe.build(
        values, {}, {1}, ops, buffers, commands, {1}, 0, /*initializer=*/true);
    if (intoOutput) {
      ASSERT_FALSE(program);
      EXPECT_NE(program.status().message().find(
                    "derive a value from something else than the weights"),
                std::string::npos)
          << program.status().message();
      continue;
    }
    ASSERT_TRUE(program) << program.status().message();
    EXPECT_EQ(program->slots, (std::vector<uint32_t>{0}));
  }
  for (int variant = 0; variant < 3; ++variant) { // an entry
    bool computesIt = variant == 1, holdsNothing = variant == 2;
    HostProgramProbe probe;
    auto &builder = probe.builder;
    std::vector<flatbuffers::Offset<fb::TensorType>> values{
        f32(probe), bf16(probe), bf16(probe), bf16(probe)};
    std::vector<flatbuffers::Offset<fb::Op>> ops{
        fb::CreateOpDirect(builder, fb::OpKind::Param, &none, &param, nullptr,
                           fb::OpAttributes::ParamAttrs,
                           fb::CreateParamAttrs(builder, 0).Union()),
        fb::CreateOpDirect(builder, fb::OpKind::Cast, &param, &cast),
        fb::CreateOpDirect(builder, fb::OpKind::Mul, &mulIn, &mul)};
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers{
        fb::CreateBuffer(builder, fb::BufferKind::Input, 0, bf16(probe)),
        fb::CreateBuffer(builder, fb::BufferKind::Derived, 0, bf16(probe),
                         holdsNothing ? -1 : 1),
        fb::CreateBuffer(builder, fb::BufferKind::Output, 0, bf16(probe)),
        fb::CreateBuffer(builder, fb::BufferKind::Parameter, 0, f32(probe))};
    std::vector<fb::Binding> castBindings{{3, 0, fb::Access::Read},
                                          {1, 1, fb::Access::Write}},
        mulBindings{{1, 1, fb::Access::Read},
                    {0, 2, fb::Access::Read},
                    {2, 3, fb::Access::Write}};
    std::vector<flatbuffers::Offset<fb::Command>> commands;
    if (computesIt) {
      commands.push_back(fb::CreateCommandDirect(
          builder, fb::CommandKind::Library, 0, 1, 1, &castBindings));
    }
    commands.push_back(fb::CreateCommandDirect(
        builder, fb::CommandKind::Library, 0, 2, 1, &mulBindings));
    StatusOr<HostProgram> program =
        probe.build(values, {2}, {3}, ops, buffers, commands, {2});
    if (variant != 0) {
      ASSERT_FALSE(program);
      EXPECT_NE(program.status().message().find(
                    computesIt
                        ? "write value 1, which is already computed"
                        : "does not say which value derived buffer 1 holds"),
                std::string::npos)
          << program.status().message();
      continue;
    }
    ASSERT_TRUE(program) << program.status().message();
    EXPECT_EQ(program->slots, (std::vector<uint32_t>{0}));
    ASSERT_EQ(program->derivedValues.size(), 1u);
    EXPECT_EQ(program->derivedValues[0].buffer, 1u);
    EXPECT_EQ(program->derivedValues[0].value, 1u);
    EXPECT_EQ(program->derivedValues[0].op, 1u);
  }
}

TEST(HostProgram, AKernelUpdatesInPlaceOnlyACacheItTakesReadWrite) {
  // One kernel covering a KV-cache write (cache 0, update 1, position 2 ->
  // value 3, an entry output, in the cache's buffer). Tied (the cache bound
  // readwrite and again for the output) the program is sound; the cache
  // bound only for reading, or not taken at all, it is not.
  for (int variant = 0; variant < 3; ++variant) {
    HostProgramProbe probe;
    auto &builder = probe.builder;
    std::vector<int64_t> cache{1, 8, 2, 4}, update{1, 1, 2, 4}, scalar{};
    auto cacheType = [&] { return probe.type(fb::DType::F32, cache); };
    auto updateType = [&] { return probe.type(fb::DType::F32, update); };
    auto scalarType = [&] { return probe.type(fb::DType::I32, scalar); };
    std::vector<flatbuffers::Offset<fb::TensorType>> values{
        cacheType(), updateType(), scalarType(), cacheType()};
    std::vector<uint32_t> operands{0, 1, 2}, results{3};
    std::vector<flatbuffers::Offset<fb::Op>> ops{fb::CreateOpDirect(
        builder, fb::OpKind::KvCacheWrite, &operands, &results)};
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers{
        fb::CreateBuffer(builder, fb::BufferKind::Input, 0, cacheType()),
        fb::CreateBuffer(builder, fb::BufferKind::Input, 1, updateType()),
        fb::CreateBuffer(builder, fb::BufferKind::Input, 2, scalarType())};
    bool takesCache = variant != 2;
    std::vector<flatbuffers::Offset<fb::TensorType>> kernelInputs,
        kernelOutputs{cacheType()};
    std::vector<fb::Binding> bindings;
    if (takesCache) {
      kernelInputs.push_back(cacheType());
      bindings.push_back(
          {0, 0, variant == 0 ? fb::Access::ReadWrite : fb::Access::Read});
    }
    kernelInputs.push_back(updateType());
    kernelInputs.push_back(scalarType());
    bindings.push_back({1, 1, fb::Access::Read});
    bindings.push_back({2, 2, fb::Access::Read});
    bindings.push_back({0, 3, fb::Access::Write});
    auto signature = fb::CreateKernelSignatureDirect(builder, &kernelInputs,
                                                     &kernelOutputs, 1);
    std::vector<flatbuffers::Offset<fb::Command>> commands{fb::CreateCommandDirect(
        builder, fb::CommandKind::Dispatch, 0, 0, 1, &bindings)};
    StatusOr<HostProgram> program = probe.build(
        values, {0, 1, 2}, {3}, ops, buffers, commands, {0}, signature);
    if (variant == 0) {
      ASSERT_TRUE(program) << program.status().message();
      continue;
    }
    ASSERT_FALSE(program);
    EXPECT_NE(program.status().message().find(
                  variant == 1 ? "bind one buffer as 0 and 3 where it writes it"
                               : "overwrite an input it does not update in place"),
              std::string::npos)
        << program.status().message();
  }
}

/// Golden-stick's RTN: scale = 2 max|w| / 255 per row (1 for these rows,
/// so every quotient is exact); w / scale rounded half to even (2.5 -> 2,
/// 3.5 -> 4, 127.5 -> 128) and clamped to [-128, 127]; a row of zeros gets
/// scale 0; groups of columns have their own scales; a NaN is refused.
/// SmoothQuant as golden-stick computes it, on numbers worked by hand:
/// factors s = sqrt(max|x|) / sqrt(max|W|) per input channel (alpha 0.5),
/// the activations' range after smoothing [-4, 1.41421] as an asymmetric
/// int8 scale 5.41421 / 255 and zero point round(-128 + 4 / scale) = 60,
/// the smoothed weight quantized per row (half to even, clamped), and the
/// bias -zp * scale * row scale * sum(q).
TEST(Quantization, SmoothQuantAsGoldenStick) {
  const float weight[] = {1.0f, -2.0f, 0.5f, 4.0f};
  auto readRows = [&](int64_t first, Tensor &block) {
    std::memcpy(block.data(), weight + first * 2, block.byteSize());
    return Status::ok();
  };
  Allocator allocator;
  auto allocate = [&](DType dtype, const Shape &shape) {
    return allocator.allocate(dtype, shape);
  };
  CalibratedWeight out;
  ASSERT_TRUE(quantizeCalibrated(2, 2, DType::F32, {-1.0f, -4.0f}, {2.0f, 1.0f},
                                 0.5, readRows, allocate, out));
  const float scale = (1.41421356f + 4.0f) / 255.0f;
  EXPECT_NEAR(out.inputScales.as<float>()[0], scale * 1.41421356f, 1e-7);
  EXPECT_NEAR(out.inputScales.as<float>()[1], scale, 1e-7);
  EXPECT_EQ(out.zeroPoints.as<int8_t>()[0], 60);
  EXPECT_EQ(out.zeroPoints.as<int8_t>()[1], 60);
  // Rows [1.41421, -2] / (4 / 255) and [0.70711, 4] / (8 / 255) (the
  // scale rounded to f32 first: -2 / f32(4 / 255) = -127.49999..., 4 /
  // f32(8 / 255) = 127.50000..., clamped to 127).
  const int8_t expected[] = {90, -127, 23, 127};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out.values.as<int8_t>()[i], expected[i]) << i;
  }
  EXPECT_NEAR(out.scales.as<float>()[0], scale * 4.0f / 255.0f, 1e-9);
  EXPECT_NEAR(out.scales.as<float>()[1], scale * 8.0f / 255.0f, 1e-9);
  EXPECT_NEAR(out.bias.as<float>()[0], -60.0 * (90 - 127) * scale * 4 / 255,
              1e-5);
  EXPECT_NEAR(out.bias.as<float>()[1], -60.0 * (23 + 127) * scale * 8 / 255,
              1e-5);

  // Without smoothing (alpha < 0) the weight is RTN's; a channel never
  // seen (an empty range) is an error.
  ASSERT_TRUE(quantizeCalibrated(2, 2, DType::F32, {-1.0f, -4.0f}, {2.0f, 1.0f},
                                 -1.0, readRows, allocate, out));
  EXPECT_EQ(out.values.as<int8_t>()[0], 64); // 1 / (4 / 255) = 63.75
  const float inf = std::numeric_limits<float>::infinity();
  Status empty = quantizeCalibrated(2, 2, DType::F32, {inf, -1.0f},
                                    {-inf, 1.0f}, 0.5, readRows, allocate, out);
  EXPECT_FALSE(empty);
  EXPECT_NE(empty.message().find("input channel 0 is empty"), std::string::npos)
      << empty.message();

  // In f16, activations this small need input scales below its normal
  // range: an error naming the channel, not rows that saturate.
  uint16_t halves[4];
  fromFloats(DType::F16, weight, halves, 4);
  auto readHalves = [&](int64_t first, Tensor &block) {
    std::memcpy(block.data(), halves + first * 2, block.byteSize());
    return Status::ok();
  };
  Status tiny =
      quantizeCalibrated(2, 2, DType::F16, {-1e-7f, -1e-7f}, {1e-7f, 1e-7f},
                         0.5, readHalves, allocate, out);
  EXPECT_FALSE(tiny);
  EXPECT_NE(tiny.message().find("input channel 0 needs a scale of"),
            std::string::npos)
      << tiny.message();
}

TEST(Quantization, RoundToNearestAsGoldenStick) {
  Allocator allocator;
  auto tensor = [&](DType dtype, Shape shape) {
    return *allocator.allocate(dtype, std::move(shape));
  };
  Tensor weight = tensor(DType::F32, {3, 4});
  const float values[] = {127.5f, 2.5f, -0.5f, 3.5f, -127.5f, 0,
                          0,      1.5f, 0,     0,    0,       0};
  std::copy(std::begin(values), std::end(values), weight.as<float>());
  Tensor q = tensor(DType::I8, {3, 4}), scales = tensor(DType::F32, {3});
  ASSERT_TRUE(quantizeRtn(weight, 0, 8, q, scales));
  EXPECT_EQ(scales.as<float>()[0], 1.0f);
  EXPECT_EQ(scales.as<float>()[1], 1.0f);
  EXPECT_EQ(scales.as<float>()[2], 0.0f);
  const int8_t expected[] = {127, 2, 0, 4, -128, 0, 0, 2, 0, 0, 0, 0};
  EXPECT_TRUE(
      std::equal(std::begin(expected), std::end(expected), q.as<int8_t>()));

  // Groups' scales are [K / group, N]: group 1 of row 0 at [1, 0].
  Tensor grouped = tensor(DType::F32, {2, 3});
  ASSERT_TRUE(quantizeRtn(weight, 2, 8, q, grouped));
  EXPECT_EQ(grouped.as<float>()[3], 2.0f * 3.5f / 255.0f);
  EXPECT_EQ(grouped.as<float>()[1], 1.0f); // row 1, group 0: |-127.5|
  EXPECT_EQ(q.as<int8_t>()[3], 127); // 3.5 / (7 / 255) = 127.5, clamped

  // int4: scale = 2 max|w| / 15, values in [-8, 7], two a byte (column 2j
  // in the low nibble). Row 0 in groups of 2: scales 2 * 127.5 / 15 = 17
  // and 7 / 15; 127.5 / 17 = 7.5 -> 8 -> 7, 2.5 / 17 -> 0, -0.5 / (7 / 15)
  // = -1.07 -> -1, 3.5 / (7 / 15) = 7.5 -> 8 -> 7.
  Tensor q4 = tensor(DType::I8, {3, 2}), scales4 = tensor(DType::F32, {2, 3});
  ASSERT_TRUE(quantizeRtn(weight, 2, 4, q4, scales4));
  EXPECT_EQ(scales4.as<float>()[0], 17.0f);
  EXPECT_EQ(scales4.as<float>()[3], 7.0f / 15.0f);
  float unpacked[4];
  quantizedRowToFloats(q4.as<int8_t>(), 4, 4, unpacked);
  EXPECT_EQ(unpacked[0], 7.0f);
  EXPECT_EQ(unpacked[1], 0.0f);
  EXPECT_EQ(unpacked[2], -1.0f);
  EXPECT_EQ(unpacked[3], 7.0f);
  EXPECT_EQ(q4.as<int8_t>()[1], static_cast<int8_t>(0x7f));  // -1 & 0xf | 7 << 4
  quantizedRowToFloats(q4.as<int8_t>() + 2, 4, 4, unpacked); // row 1
  EXPECT_EQ(unpacked[0], -8.0f); // -127.5 / 17 = -7.5 -> -8
  EXPECT_FALSE(quantizeRtn(weight, 0, 4, q, scales)); // [3, 4] values

  // A scale past f16's range (2 * 1e6 / 15) is refused, not stored as inf.
  Tensor big = tensor(DType::F32, {1, 4}), q1 = tensor(DType::I8, {1, 2});
  Tensor halfScales = tensor(DType::F16, {2, 1});
  std::fill(big.as<float>(), big.as<float>() + 4, 1e6f);
  Status overflow = quantizeRtn(big, 2, 4, q1, halfScales);
  ASSERT_FALSE(overflow);
  EXPECT_NE(overflow.message().find("which f16 cannot hold"), std::string::npos)
      << overflow.message();

  weight.as<float>()[5] = std::nanf("");
  Status refused = quantizeRtn(weight, 0, 8, q, scales);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("row 1 has a non-finite value"),
            std::string::npos);
  Tensor wrongScales = tensor(DType::F32, {4});
  EXPECT_FALSE(quantizeRtn(weight, 0, 8, q, wrongScales));
}
