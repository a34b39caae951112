//===- PanelGemmTest.cpp - products with packed weight panels -------------===//

#include "runtime/kernels/PanelGemm.h"
#include "runtime/exec/PyNative.h"
#include "runtime/format/ContentChecksum.h"
#include "runtime/format/Executable.h"
#include "runtime/hal/Allocator.h"
#include "runtime/io/Safetensors.h"
#include "runtime/io/Weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace mfrt;

namespace {

/// Tiles of A [M x K] times B^T (B [N x K]) through B's panels equal the
/// product summed in double, wherever a tile starts and ends: mid-panel
/// columns, a last panel 6 wide, row counts that are not a multiple of
/// the row block, and a K longer than one pass over a panel (K = 1100 >
/// 1024); A and B in f32, f16 and bf16 (the reference on the same
/// rounded values), and f32 A times a quantized weight's i8 values B;
/// through each microkernel this CPU runs.
TEST(PanelGemm, TilesEqualTheProductAtAnyCornerAndDepth) {
  const int64_t M = 37, N = 70, K = 1100;
  using Service = void (*)(PanelIsa, const mfrt_gemm_args_v1 &);
  for (PanelIsa isa : {PanelIsa::Avx512Bf16, PanelIsa::Avx512, PanelIsa::Avx2,
                       PanelIsa::Portable}) {
    if (!runsPanelIsa(isa)) {
      continue;
    }
    for (auto [dtype, service] :
         {std::pair<DType, Service>{DType::F32, gemmPanelsWith<DType::F32>},
          {DType::F16, gemmPanelsWith<DType::F16>},
          {DType::BF16, gemmPanelsWith<DType::BF16>},
          {DType::I8, gemmPanelsWith<DType::I8>}}) {
      std::mt19937 generator(7);
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      // An i8 weight's values span [-128, 127]; its activations are f32.
      const float range = dtype == DType::I8 ? 128.0f : 1.0f;
      const DType aType = dtype == DType::I8 ? DType::F32 : dtype;
      std::vector<float> a(M * K), b(N * K);
      for (float &x : a)
        x = uniform(generator);
      for (float &x : b)
        x = range * uniform(generator);
      // Both operands stored in their type; a and b become the values
      // stored.
      size_t size = dtypeSize(dtype);
      std::vector<char> storedA(M * K * dtypeSize(aType)),
          storedB(N * K * size);
      fromFloats(aType, a.data(), storedA.data(), M * K);
      fromFloats(dtype, b.data(), storedB.data(), N * K);
      toFloats(aType, storedA.data(), a.data(), M * K);
      toFloats(dtype, storedB.data(), b.data(), N * K);
      std::vector<char> panels(N * K * size);
      ASSERT_EQ(panelCount(N), 3);
      packPanels(dtype, storedB.data(), N, K, panels.data(), 0, 1);
      packPanels(dtype, storedB.data(), N, K, panels.data(), 1, 3);

      struct Tile {
        int64_t m0, n0, m, n;
      };
      for (Tile t : {Tile{0, 0, M, N}, Tile{3, 5, 30, 60}, Tile{36, 69, 1, 1},
                     Tile{8, 32, 9, 32}, Tile{1, 40, 7, 3}}) {
        const int64_t ldc = t.n + 3; // a scratch tile wider than the columns
        std::vector<float> c(t.m * ldc, 123.0f);
        service(isa, {storedA.data(), panels.data(), c.data(), ldc, t.m0, t.n0,
                      t.m, t.n, K, N, /*trans_b=*/1, /*trans_a=*/0, M, nullptr,
                      0, nullptr, nullptr});
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
            EXPECT_NEAR(c[i * ldc + j], sum, 1e-3 * range)
                << dtypeName(dtype) << " tile at " << t.m0 << "," << t.n0
                << " element " << i << "," << j << ", microkernel "
                << static_cast<int>(isa);
          }
        }
      }
    }
  }
}

/// f16 and bf16 rows times a quantized weight's i8 panels (the tile's rows
/// widened once) equal the product in double of the same rounded values.
TEST(PanelGemm, HalfRowsTimesInt8Panels) {
  const int64_t M = 19, N = 45, K = 70;
  for (PanelIsa isa : {PanelIsa::Avx512Bf16, PanelIsa::Avx512, PanelIsa::Avx2,
                       PanelIsa::Portable}) {
    if (!runsPanelIsa(isa)) {
      continue;
    }
    for (DType rowType : {DType::F16, DType::BF16}) {
      std::mt19937 generator(11);
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      std::vector<float> a(M * K), b(N * K);
      for (float &x : a)
        x = uniform(generator);
      for (float &x : b)
        x = 128.0f * uniform(generator);
      std::vector<char> storedA(M * K * 2), storedB(N * K), panels(N * K);
      fromFloats(rowType, a.data(), storedA.data(), M * K);
      fromFloats(DType::I8, b.data(), storedB.data(), N * K);
      toFloats(rowType, storedA.data(), a.data(), M * K);
      toFloats(DType::I8, storedB.data(), b.data(), N * K);
      packPanels(DType::I8, storedB.data(), N, K, panels.data(), 0,
                 panelCount(N));
      std::vector<float> c(M * N);
      mfrt_gemm_args_v1 args{storedA.data(),
                             panels.data(),
                             c.data(),
                             N,
                             0,
                             0,
                             M,
                             N,
                             K,
                             N,
                             /*trans_b=*/1,
                             /*trans_a=*/0,
                             M,
                             nullptr,
                             0,
                             nullptr,
                             nullptr};
      (rowType == DType::F16 ? gemmInt8PanelsWith<DType::F16>
                             : gemmInt8PanelsWith<DType::BF16>)(isa, args);
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double sum = 0;
          for (int64_t k = 0; k < K; ++k) {
            sum += double(a[i * K + k]) * b[j * K + k];
          }
          EXPECT_NEAR(c[i * N + j], sum, 1e-2)
              << dtypeName(rowType) << " element " << i << "," << j
              << ", microkernel " << static_cast<int>(isa);
        }
      }
    }
  }
}

/// f32, f16 and bf16 rows times an int4 weight's panels (two values a
/// byte, scales per group of K in the rows' type) equal the product in
/// double of the same values: tiles starting mid-panel, a narrow last
/// panel, groups of 32 and 64, and K past one depth block (1088 > 1024).
TEST(PanelGemm, RowsTimesInt4Panels) {
  const int64_t M = 13, N = 70;
  for (PanelIsa isa : {PanelIsa::Avx512Bf16, PanelIsa::Avx512, PanelIsa::Avx2,
                       PanelIsa::Portable}) {
    if (!runsPanelIsa(isa)) {
      continue;
    }
    for (auto [K, group] : {std::pair<int64_t, int64_t>{1088, 32}, {128, 64}}) {
      for (DType rowType : {DType::F32, DType::F16, DType::BF16}) {
        std::mt19937 generator(7);
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        std::uniform_int_distribution<int> nibble(-8, 7);
        std::vector<float> a(M * K), scales(K / group * N);
        for (float &x : a)
          x = uniform(generator);
        for (float &x : scales)
          x = 0.1f * uniform(generator);
        std::vector<int> q(N * K);
        for (int &x : q)
          x = nibble(generator);
        const int64_t size = dtypeSize(rowType);
        std::vector<char> storedA(M * K * size),
            storedScales(scales.size() * size);
        fromFloats(rowType, a.data(), storedA.data(), M * K);
        toFloats(rowType, storedA.data(), a.data(), M * K);
        fromFloats(rowType, scales.data(), storedScales.data(), scales.size());
        toFloats(rowType, storedScales.data(), scales.data(), scales.size());
        std::vector<int8_t> bytes(N * K / 2), panels(N * K / 2);
        for (int64_t i = 0; i < N * K / 2; ++i) {
          bytes[i] = static_cast<int8_t>(
              (q[2 * i] & 0x0f) | (static_cast<unsigned>(q[2 * i + 1]) << 4));
        }
        packPanels(DType::I8, bytes.data(), N, K / 2, panels.data(), 0,
                   panelCount(N));
        for (auto [n0, n] : {std::pair<int64_t, int64_t>{0, N}, {20, 41}}) {
          std::vector<float> c(M * n);
          mfrt_gemm_args_v1 args{storedA.data(),
                                 panels.data(),
                                 c.data(),
                                 n,
                                 0,
                                 n0,
                                 M,
                                 n,
                                 K,
                                 N,
                                 /*trans_b=*/1,
                                 /*trans_a=*/0,
                                 M,
                                 storedScales.data(),
                                 group,
                                 nullptr,
                                 nullptr};
          (rowType == DType::F32 ? gemmInt4PanelsWith<DType::F32>
           : rowType == DType::F16
               ? gemmInt4PanelsWith<DType::F16>
               : gemmInt4PanelsWith<DType::BF16>)(isa, args);
          for (int64_t i = 0; i < M; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double sum = 0;
              for (int64_t k = 0; k < K; ++k) {
                sum += double(a[i * K + k]) * q[(n0 + j) * K + k] *
                       scales[(k / group) * N + n0 + j];
              }
              ASSERT_NEAR(c[i * n + j], sum, 1e-3)
                  << dtypeName(rowType) << " K " << K << " element " << i << ","
                  << n0 + j << ", microkernel " << static_cast<int>(isa);
            }
          }
        }
      }
    }
  }
}

/// bf16 rows times bf16 panels by pairs of K (AVX512-BF16's vdpbf16ps)
/// equal the product in double of the same values, at an odd depth (the
/// last step pairs with zeros), with a narrow last panel, tiles starting
/// mid-panel and accumulating across depth blocks (K = 2061: blocks of
/// 1024, 1024 and an odd 13).
TEST(PanelGemm, Bf16PairsAtAnOddDepth) {
  if (!runsPanelIsa(PanelIsa::Avx512Bf16)) {
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
  for (int64_t K : {37, 2061}) {
    const int64_t M = 11, N = 45;
    std::mt19937 generator(3);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> a(M * K), b(N * K);
    for (float &x : a)
      x = uniform(generator);
    for (float &x : b)
      x = uniform(generator);
    std::vector<uint16_t> storedA(M * K), storedB(N * K), panels(N * K);
    fromFloats(DType::BF16, a.data(), storedA.data(), M * K);
    fromFloats(DType::BF16, b.data(), storedB.data(), N * K);
    toFloats(DType::BF16, storedA.data(), a.data(), M * K);
    toFloats(DType::BF16, storedB.data(), b.data(), N * K);
    packPanels(DType::BF16, storedB.data(), N, K, panels.data(), 0,
               panelCount(N));
    for (auto [n0, n] : {std::pair<int64_t, int64_t>{0, N}, {7, 30}}) {
      std::vector<float> c(M * n);
      mfrt_gemm_args_v1 args{storedA.data(),
                             panels.data(),
                             c.data(),
                             n,
                             0,
                             n0,
                             M,
                             n,
                             K,
                             N,
                             /*trans_b=*/1,
                             /*trans_a=*/0,
                             M,
                             nullptr,
                             0,
                             nullptr,
                             nullptr};
      gemmPanelsWith<DType::BF16>(PanelIsa::Avx512Bf16, args);
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t k = 0; k < K; ++k) {
            sum += double(a[i * K + k]) * b[(n0 + j) * K + k];
          }
          ASSERT_NEAR(c[i * n + j], sum, 1e-4 * std::sqrt(double(K)))
              << "K " << K << " element " << i << "," << n0 + j;
        }
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
    packPanels(DType::F32, weight.data(), N, K, panels.data(), 0, panelCount(N));
    std::vector<float> inPlace = weight;
    packPanelsInPlace(DType::F32, inPlace.data(), N, K, 0, 2);
    packPanelsInPlace(DType::F32, inPlace.data(), N, K, 2, 3);
    EXPECT_EQ(inPlace, panels) << N << " rows";
    std::vector<float> unpacked(N * K);
    unpackPanels(DType::F32, inPlace.data(), N, K, unpacked.data());
    EXPECT_EQ(unpacked, weight) << N << " rows";
  }
}

} // namespace

namespace {

/// An executable whose one entry multiplies its input [2, 8] by parameter
/// 0 [64, 8] (transposed) in one kernel dispatch, the kernel reading
/// `panels` as panels (positions in its inputs: 0 the input, 1 the
/// parameter).
mfrt::StatusOr<mfrt::Executable> withPanelInputs(std::vector<uint32_t> panels) {
  namespace fb = mfbin;
  flatbuffers::FlatBufferBuilder builder;
  std::vector<int64_t> weightShape{64, 8}, inputShape{2, 8}, outputShape{2, 64};
  std::vector<flatbuffers::Offset<fb::TensorType>> values{
      fb::CreateTensorTypeDirect(builder, fb::DType::F32, &weightShape),
      fb::CreateTensorTypeDirect(builder, fb::DType::F32, &inputShape),
      fb::CreateTensorTypeDirect(builder, fb::DType::F32, &outputShape)};
  std::vector<uint32_t> none{}, param{0}, matmulIn{1, 0}, product{2};
  std::vector<flatbuffers::Offset<fb::Op>> ops{
      fb::CreateOpDirect(builder, fb::OpKind::Param, &none, &param, nullptr,
                         fb::OpAttributes::ParamAttrs,
                         fb::CreateParamAttrs(builder, 0).Union()),
      fb::CreateOpDirect(builder, fb::OpKind::Matmul, &matmulIn, &product,
                         nullptr, fb::OpAttributes::MatmulAttrs,
                         fb::CreateMatmulAttrs(builder, false, true).Union())};
  // Buffers: the input, the parameter, the output; one dispatch.
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers{
      fb::CreateBuffer(builder, fb::BufferKind::Input, 0,
                       fb::CreateTensorTypeDirect(builder, fb::DType::F32, &inputShape)),
      fb::CreateBuffer(builder, fb::BufferKind::Parameter, 0,
                       fb::CreateTensorTypeDirect(builder, fb::DType::F32, &weightShape)),
      fb::CreateBuffer(builder, fb::BufferKind::Output, 0,
                       fb::CreateTensorTypeDirect(builder, fb::DType::F32, &outputShape))};
  std::vector<fb::Binding> bindings{{0, 1, fb::Access::Read},
                                    {1, 0, fb::Access::Read},
                                    {2, 2, fb::Access::Write}};
  std::vector<flatbuffers::Offset<fb::Command>> commands{fb::CreateCommandDirect(
      builder, fb::CommandKind::Dispatch, 0, 1, 1, &bindings)};
  std::vector<uint32_t> hostOutputs{2};
  auto host = fb::CreateHostProgramDirect(builder, 0, &buffers, &commands,
                                          &hostOutputs);
  std::vector<uint32_t> inputs{1}, outputs{2};
  std::vector<flatbuffers::Offset<flatbuffers::String>> inputNames{
      builder.CreateString("x")},
      outputNames{builder.CreateString("y")};
  std::vector<flatbuffers::Offset<fb::Entry>> entries{fb::CreateEntryDirect(
      builder, "probe", &values, &inputs, &inputNames, &outputs, &outputNames,
      &ops, host)};
  std::vector<flatbuffers::Offset<fb::Parameter>> parameters{
      fb::CreateParameterDirect(builder, "w", "w",
                                fb::CreateTensorTypeDirect(builder, fb::DType::F32,
                                                           &weightShape),
                                fb::ParameterInit::Normal, 1.0)};
  std::vector<flatbuffers::Offset<flatbuffers::String>> kernels{
      builder.CreateString("mfk_0")};
  auto model = fb::CreateModelInfoDirect(builder, "probe", fb::ModelFamily::Llama,
                                         "predict", 0, 0, 1, 2, 64);
  std::vector<flatbuffers::Offset<fb::TensorType>> kernelInputs{
      fb::CreateTensorTypeDirect(builder, fb::DType::F32, &inputShape),
      fb::CreateTensorTypeDirect(builder, fb::DType::F32, &weightShape)},
      kernelOutputs{fb::CreateTensorTypeDirect(builder, fb::DType::F32, &outputShape)};
  std::vector<flatbuffers::Offset<fb::KernelSignature>> signatures{
      fb::CreateKernelSignatureDirect(builder, &kernelInputs, &kernelOutputs, 1,
                                      &panels)};
  builder.Finish(
      fb::CreateExecutableDirect(builder, mfrt::kMaxFormatVersion, "cpu", model,
                                 &parameters, &entries, nullptr, &kernels,
                                 &signatures, /*content_crc32=*/1, 0, nullptr,
                                 nullptr, 0, mfrt::kOpRegistryFingerprint),
      fb::ExecutableIdentifier());
  std::vector<uint8_t> bytes(builder.GetBufferPointer(),
                             builder.GetBufferPointer() + builder.GetSize());
  EXPECT_TRUE(mfrt::sealContentChecksum(bytes.data(), bytes.size()));
  return mfrt::Executable::fromBytes(std::move(bytes), "probe.bin");
}

/// The loader accepts a parameter as panels and refuses anything else there.
TEST(PanelGemm, OnlyParametersArePanelInputs) {
  mfrt::StatusOr<mfrt::Executable> good = withPanelInputs({1});
  ASSERT_TRUE(good) << good.status().message();
  for (auto [panels, why] :
       {std::pair<std::vector<uint32_t>, std::string>{
            {0}, "read a panel input that is no parameter"},
        {{5}, "names panel inputs out of order, twice or past its 2 inputs"},
        {{1, 1}, "names panel inputs out of order, twice or past its 2 inputs"}}) {
    mfrt::StatusOr<mfrt::Executable> bad = withPanelInputs(panels);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.status().message().find(why), std::string::npos)
        << bad.status().message();
  }
}

/// Weights kept as panels in place are saved as stored, and PyNative refuses
/// to run on them.
TEST(PanelGemm, WeightsStoredAsPanelsSaveAsStoredAndPyNativeRefusesThem) {
  mfrt::StatusOr<mfrt::Executable> executable = withPanelInputs({1});
  ASSERT_TRUE(executable) << executable.status().message();
  mfrt::Allocator allocator;
  mfrt::StatusOr<mfrt::Weights> weights =
      mfrt::Weights::initialize(*executable, allocator, 3);
  ASSERT_TRUE(weights) << weights.status().message();
  std::vector<float> stored((*weights)[0].as<float>(),
                            (*weights)[0].as<float>() + 64 * 8);
  mfrt::Tensor &weight = weights->mutableTensor(0);
  packPanelsInPlace(DType::F32, weight.data(), 64, 8, 0, panelCount(64));
  weights->noteStoredAsPanels(0, mfrt::PanelLayout::Columns);
  ASSERT_NE(std::vector<float>(weight.as<float>(), weight.as<float>() + 64 * 8),
            stored);

  std::string path = ::testing::TempDir() + "/panels.safetensors";
  ASSERT_TRUE(weights->save(*executable, path));
  mfrt::StatusOr<mfrt::CheckpointFile> file = mfrt::CheckpointFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  mfrt::StatusOr<mfrt::Tensor> read = allocator.allocate(DType::F32, {64, 8});
  ASSERT_TRUE(file->read(file->tensors().at("w"), *read));
  EXPECT_EQ(std::vector<float>(read->as<float>(), read->as<float>() + 64 * 8),
            stored);

  mfrt::PyNativeExecutor pynative(*executable, *weights, allocator);
  mfrt::StatusOr<mfrt::Tensor> x = allocator.allocate(DType::F32, {2, 8});
  mfrt::StatusOr<std::vector<mfrt::Tensor>> out = pynative.run("probe", {*x});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find(
                "parameter 'w' is stored as Graph Mode's panels"),
            std::string::npos)
      << out.status().message();
}

} // namespace
