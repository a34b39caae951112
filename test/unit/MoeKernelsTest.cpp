//===- MoeKernelsTest.cpp - routing kernels and their shape rules ---------===//
//
// mf.moe_route's capacity against MindFormers' TopkRouterV2 drop order
// (enable_sdrop: token order; otherwise every first choice first), worked
// by hand on r1.5.0's semantics; the kernels' refusals of values a hostile
// model.bin can hold; and the shape rules' bounds.
//
//===----------------------------------------------------------------------===//

#include "runtime/format/ContentChecksum.h"
#include "runtime/format/Executable.h"
#include "runtime/hal/Communicator.h"
#include "runtime/kernels/Kernels.h"
#include "shapes/ShapeRules.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

using namespace mfrt;

namespace {

Tensor indexTensor(const Shape &shape, const std::vector<int32_t> &values) {
  auto data = std::shared_ptr<void>(::operator new(values.size() * 4 + 4),
                                    [](void *p) { ::operator delete(p); });
  Tensor tensor(DType::I32, shape, data);
  std::copy(values.begin(), values.end(), tensor.as<int32_t>());
  return tensor;
}

Tensor floatTensor(const Shape &shape, float fill) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    count *= dim;
  }
  auto data = std::shared_ptr<void>(::operator new(count * 4 + 4),
                                    [](void *p) { ::operator delete(p); });
  Tensor tensor(DType::F32, shape, data);
  std::fill(tensor.as<float>(), tensor.as<float>() + count, fill);
  return tensor;
}

/// An op of `kind` with its attribute table built by `attrs`.
template <typename MakeAttrs>
std::vector<uint8_t> opBytes(fb::OpKind kind, size_t operands, size_t results,
                             fb::OpAttributes type, MakeAttrs makeAttrs) {
  flatbuffers::FlatBufferBuilder builder;
  std::vector<uint32_t> in(operands), out(results);
  for (size_t i = 0; i < operands; ++i) {
    in[i] = i;
  }
  for (size_t i = 0; i < results; ++i) {
    out[i] = operands + i;
  }
  flatbuffers::Offset<void> attrs = makeAttrs(builder);
  builder.Finish(
      fb::CreateOpDirect(builder, kind, &in, &out, nullptr, type, attrs));
  return {builder.GetBufferPointer(),
          builder.GetBufferPointer() + builder.GetSize()};
}

/// Runs mf.moe_route on `choices` ([tokens, 2]); the positions.
std::vector<int32_t> route(const std::vector<int32_t> &choices, int64_t experts,
                           int64_t capacity, bool choiceOrder,
                           std::vector<int32_t> *offsets = nullptr) {
  std::vector<uint8_t> bytes = opBytes(
      fb::OpKind::MoeRoute, 1, 2, fb::OpAttributes::MoeRouteAttrs,
      [&](flatbuffers::FlatBufferBuilder &b) {
        return fb::CreateMoeRouteAttrs(b, experts, capacity, choiceOrder)
            .Union();
      });
  const fb::Op &op = *flatbuffers::GetRoot<fb::Op>(bytes.data());
  int64_t tokens = static_cast<int64_t>(choices.size()) / 2;
  Tensor indices = indexTensor({tokens, 2}, choices);
  Tensor positions = indexTensor({tokens, 2}, std::vector<int32_t>(tokens * 2));
  Tensor starts = indexTensor({experts + 1}, std::vector<int32_t>(experts + 1));
  Status status = runKernel(op, {&indices}, {&positions, &starts});
  EXPECT_TRUE(status) << status.message();
  if (offsets) {
    offsets->assign(starts.as<int32_t>(), starts.as<int32_t>() + experts + 1);
  }
  return {positions.as<int32_t>(), positions.as<int32_t>() + tokens * 2};
}

/// Which pairs a route kept.
std::vector<bool> kept(const std::vector<int32_t> &positions) {
  std::vector<bool> result;
  for (int32_t place : positions) {
    result.push_back(place >= 0);
  }
  return result;
}

} // namespace

// E = 3, k = 2, capacity 2; choices t0 (0, 1), t1 (1, 0), t2 (0, 2),
// t3 (0, 1). Token order keeps t0's and t1's pairs, t2's second: expert 0
// is full after t0 and t1. Choice order takes every first choice first:
// expert 0 keeps t0's and t2's, expert 1 t1's first and t0's second.
TEST(MoeRoute, CapacityDropsInMindFormersOrder) {
  std::vector<int32_t> choices{0, 1, 1, 0, 0, 2, 0, 1};
  std::vector<bool> tokenOrder = kept(route(choices, 3, 2, false));
  EXPECT_EQ(tokenOrder, (std::vector<bool>{true, true, true, true, false, true,
                                           false, false}));
  std::vector<bool> choiceOrder = kept(route(choices, 3, 2, true));
  EXPECT_EQ(choiceOrder, (std::vector<bool>{true, true, true, false, true, true,
                                            false, false}));
}

TEST(MoeRoute, KeptPairsArePackedByExpert) {
  std::vector<int32_t> offsets;
  std::vector<int32_t> positions =
      route({0, 1, 1, 0, 0, 2, 0, 1}, 3, 2, false, &offsets);
  // Expert 0 keeps t0, t1 (rows 0, 1); expert 1 t0, t1 (2, 3); expert 2 t2.
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 2, 4, 5}));
  EXPECT_EQ(positions, (std::vector<int32_t>{0, 2, 3, 1, -1, 4, -1, -1}));
  // Dropless: every pair, stable within each expert.
  positions = route({0, 1, 1, 0, 0, 2, 0, 1}, 3, 0, false, &offsets);
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 4, 7, 8}));
  EXPECT_EQ(positions, (std::vector<int32_t>{0, 4, 5, 1, 2, 7, 3, 6}));
}

TEST(MoeRoute, RefusesAnExpertOutOfRange) {
  std::vector<uint8_t> bytes =
      opBytes(fb::OpKind::MoeRoute, 1, 2, fb::OpAttributes::MoeRouteAttrs,
              [&](flatbuffers::FlatBufferBuilder &b) {
                return fb::CreateMoeRouteAttrs(b, 3, 0, false).Union();
              });
  const fb::Op &op = *flatbuffers::GetRoot<fb::Op>(bytes.data());
  Tensor indices = indexTensor({2, 2}, {0, 1, 3, 0});
  Tensor positions = indexTensor({2, 2}, {0, 0, 0, 0});
  Tensor starts = indexTensor({4}, {0, 0, 0, 0});
  Status status = runKernel(op, {&indices}, {&positions, &starts});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("expert index 3 is not in [0, 3)"),
            std::string::npos)
      << status.message();
}

TEST(MoeKernels, RefuseHostilePositionsAndOffsets) {
  // A position beyond the rows.
  std::vector<uint8_t> dispatch =
      opBytes(fb::OpKind::MoeDispatch, 2, 1, fb::OpAttributes::NONE,
              [](flatbuffers::FlatBufferBuilder &) {
                return flatbuffers::Offset<void>();
              });
  Tensor tokens = floatTensor({2, 4}, 1.0f);
  Tensor positions = indexTensor({2, 2}, {0, 1, 2, 9});
  Tensor rows = floatTensor({4, 4}, 0.0f);
  Status status = runKernel(*flatbuffers::GetRoot<fb::Op>(dispatch.data()),
                            {&tokens, &positions}, {&rows});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("position 9 is not in [-1, 4)"),
            std::string::npos)
      << status.message();

  // Offsets that descend.
  std::vector<uint8_t> matmul = opBytes(
      fb::OpKind::GroupedMatmul, 4, 1, fb::OpAttributes::GroupedMatmulAttrs,
      [](flatbuffers::FlatBufferBuilder &b) {
        return fb::CreateGroupedMatmulAttrs(b, true).Union();
      });
  Tensor offsets = indexTensor({3}, {0, 3, 1});
  Tensor weight = floatTensor({2, 4}, 1.0f);
  Tensor out = floatTensor({4, 2}, 0.0f);
  status = runKernel(*flatbuffers::GetRoot<fb::Op>(matmul.data()),
                     {&rows, &offsets, &weight, &weight}, {&out});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("group offsets descend at expert 1"),
            std::string::npos)
      << status.message();
}

TEST(ShapeRules, RefuseWhatOverflows) {
  using namespace mfshapes;
  TensorInfo gradient{Element::F32, {4, 2}}, rows{Element::F32, {4, 3}};
  TensorInfo offsets{Element::I32, {3}};
  // expert + 1 would overflow: the rule must not wrap.
  Inferred expert = inferGroupedMatmulWeightGrad(
      gradient, rows, offsets, std::numeric_limits<int64_t>::max(), 0);
  EXPECT_FALSE(expert);
  EXPECT_TRUE(inferGroupedMatmulWeightGrad(gradient, rows, offsets, 1, 0));
  EXPECT_FALSE(inferGroupedMatmulWeightGrad(gradient, rows, offsets, 2, 0));
  // A weight that is neither a matrix nor a stack of them (a hostile
  // model.bin's): refused before its shape is read.
  TensorInfo rows16{Element::F32, {4, 16}}, two{Element::I32, {2}};
  EXPECT_FALSE(inferGroupedMatmul(rows16, two, {{Element::F32, {}}}, true));
  EXPECT_FALSE(inferGroupedMatmul(rows16, two, {{Element::F32, {16}}}, true));
  EXPECT_FALSE(
      inferGroupedMatmul(rows16, two, {{Element::F32, {1, 2, 3, 16}}}, true));
  // BLAS takes int sizes.
  TensorInfo wide{Element::F32, {2, int64_t(1) << 31}};
  EXPECT_FALSE(inferTopK(wide, 1));
  EXPECT_FALSE(inferMoeRoute({Element::I32, {int64_t(1) << 30, 4}}, 8, 0));
  // Routing weights of another dtype than the rows'.
  EXPECT_FALSE(inferMoeCombine({Element::BF16, {4, 8}}, {Element::I32, {2, 2}},
                               {Element::F32, {2, 2}}));
}

// The flatbuffers verifier accepts an attribute union's type without its
// table; the loader refuses it (every attributes_as_X() would be null).
TEST(MoeLoader, RefusesAnAttributeTypeWithoutItsTable) {
  flatbuffers::FlatBufferBuilder builder;
  std::vector<int64_t> inputShape{2, 4}, chosenShape{2, 2};
  std::vector<flatbuffers::Offset<fb::TensorType>> values{
      fb::CreateTensorTypeDirect(builder, fb::DType::F32, &inputShape),
      fb::CreateTensorTypeDirect(builder, fb::DType::F32, &chosenShape),
      fb::CreateTensorTypeDirect(builder, fb::DType::I32, &chosenShape)};
  std::vector<uint32_t> operands{0}, results{1, 2};
  std::vector<flatbuffers::Offset<fb::Op>> ops{fb::CreateOpDirect(
      builder, fb::OpKind::TopK, &operands, &results, "router",
      fb::OpAttributes::TopKAttrs, /*attributes=*/0)};
  std::vector<uint32_t> inputs{0}, outputs{1};
  std::vector<flatbuffers::Offset<flatbuffers::String>> inputNames{
      builder.CreateString("x")},
      outputNames{builder.CreateString("values")};
  std::vector<flatbuffers::Offset<fb::Entry>> entries{
      fb::CreateEntryDirect(builder, "route", &values, &inputs, &inputNames,
                            &outputs, &outputNames, &ops)};
  auto model = fb::CreateModelInfoDirect(
      builder, "probe", fb::ModelFamily::Llama, "predict", 0, 0, 1, 2, 64);
  builder.Finish(fb::CreateExecutableDirect(
                     builder, kMaxFormatVersion, "cpu", model, nullptr,
                     &entries, nullptr, nullptr, nullptr, /*content_crc32=*/1,
                     0, nullptr, nullptr, 0, kOpRegistryFingerprint),
                 fb::ExecutableIdentifier());
  std::vector<uint8_t> bytes(builder.GetBufferPointer(),
                             builder.GetBufferPointer() + builder.GetSize());
  ASSERT_TRUE(sealContentChecksum(bytes.data(), bytes.size()));
  StatusOr<Executable> executable =
      Executable::fromBytes(std::move(bytes), "probe.bin");
  ASSERT_FALSE(executable);
  EXPECT_NE(executable.status().message().find(
                "(TopK) names its attribute table but has none"),
            std::string::npos)
      << executable.status().message();
}

// Expert parallelism's form: one weight stacked [E, out, in] serves groups
// from each rank, group g being expert g mod E. It equals the per-expert
// form given the same weight per group, and the stacked gradient sums each
// expert's groups (the per-expert gradients of groups e and e + E).
TEST(MoeKernels, StackedExpertsTakeGroupsFromEachRank) {
  auto filled = [](const Shape &shape, float scale) {
    Tensor tensor = floatTensor(shape, 0.0f);
    for (int64_t i = 0; i < tensor.numElements(); ++i) {
      tensor.as<float>()[i] = scale * static_cast<float>((i * 7) % 11 - 5);
    }
    return tensor;
  };
  Tensor rows = filled({7, 3}, 0.25f), stack = filled({2, 4, 3}, 0.5f);
  Tensor w0 = stack.rows(0, 1).reshaped({4, 3});
  Tensor w1 = stack.rows(1, 1).reshaped({4, 3});
  // Groups of two ranks' rows: [0, 2) expert 0, [2, 3) expert 1 from rank
  // 0; [3, 3) expert 0 (none), [3, 6) expert 1 from rank 1; row 6 unused.
  Tensor offsets = indexTensor({5}, {0, 2, 3, 3, 6});
  auto matmulOp = [](size_t operands) {
    return opBytes(fb::OpKind::GroupedMatmul, operands, 1,
                   fb::OpAttributes::GroupedMatmulAttrs,
                   [](flatbuffers::FlatBufferBuilder &b) {
                     return fb::CreateGroupedMatmulAttrs(b, true).Union();
                   });
  };
  std::vector<uint8_t> stacked = matmulOp(3), perGroup = matmulOp(6);
  Tensor a = floatTensor({7, 4}, -1.0f), b = floatTensor({7, 4}, -1.0f);
  ASSERT_TRUE(runKernel(*flatbuffers::GetRoot<fb::Op>(stacked.data()),
                        {&rows, &offsets, &stack}, {&a}));
  ASSERT_TRUE(runKernel(*flatbuffers::GetRoot<fb::Op>(perGroup.data()),
                        {&rows, &offsets, &w0, &w1, &w0, &w1}, {&b}));
  for (int64_t i = 0; i < 28; ++i) {
    EXPECT_EQ(a.as<float>()[i], b.as<float>()[i]) << i;
  }
  EXPECT_EQ(a.as<float>()[6 * 4], 0.0f); // no group claims row 6

  auto gradOp = [](int64_t expert, int64_t stack) {
    return opBytes(fb::OpKind::GroupedMatmulWeightGrad, 3, 1,
                   fb::OpAttributes::GroupedMatmulWeightGradAttrs,
                   [&](flatbuffers::FlatBufferBuilder &b) {
                     return fb::CreateGroupedMatmulWeightGradAttrs(b, expert,
                                                                   stack)
                         .Union();
                   });
  };
  Tensor dy = filled({7, 4}, 0.125f);
  Tensor dStack = floatTensor({2, 4, 3}, -1.0f);
  std::vector<uint8_t> whole = gradOp(0, 2);
  ASSERT_TRUE(runKernel(*flatbuffers::GetRoot<fb::Op>(whole.data()),
                        {&dy, &rows, &offsets}, {&dStack}));
  for (int64_t e = 0; e < 2; ++e) {
    Tensor sum = floatTensor({4, 3}, 0.0f);
    for (int64_t group : {e, e + 2}) {
      Tensor one = floatTensor({4, 3}, -1.0f);
      std::vector<uint8_t> single = gradOp(group, 0);
      ASSERT_TRUE(runKernel(*flatbuffers::GetRoot<fb::Op>(single.data()),
                            {&dy, &rows, &offsets}, {&one}));
      for (int64_t i = 0; i < 12; ++i) {
        sum.as<float>()[i] += one.as<float>()[i];
      }
    }
    for (int64_t i = 0; i < 12; ++i) {
      EXPECT_FLOAT_EQ(dStack.as<float>()[e * 12 + i], sum.as<float>()[i])
          << "expert " << e << " element " << i;
    }
  }
}

// mf.all_to_all on a group of one rank (no MPI): offsets from a hostile
// model.bin that do not start at row 0, or whose receive side is not the
// sent segments, are errors, not reads past the rows.
TEST(AllToAll, RefusesOffsetsThatAreNotTheRowsSent) {
  StatusOr<std::unique_ptr<Communicator>> ranks = Communicator::start({1, 1});
  ASSERT_TRUE(ranks) << ranks.status().message();
  Tensor rows = floatTensor({4, 2}, 1.0f), result = floatTensor({8, 2}, -1.0f);
  Tensor from0 = indexTensor({2}, {0, 4});
  Tensor late = indexTensor({2}, {4, 8});
  Status status = (*ranks)->allToAll(rows, from0, late, result, {0});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("start at row 4, not 0"), std::string::npos)
      << status.message();
  Tensor fewer = indexTensor({2}, {0, 3});
  status = (*ranks)->allToAll(rows, from0, fewer, result, {0});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("not the sent segments'"), std::string::npos)
      << status.message();
  // The rows that arrive, then zeros.
  ASSERT_TRUE((*ranks)->allToAll(rows, from0, from0, result, {0}));
  EXPECT_EQ(result.as<float>()[7], 1.0f);
  EXPECT_EQ(result.as<float>()[8], 0.0f);
}
