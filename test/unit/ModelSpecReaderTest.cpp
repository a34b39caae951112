//===- ModelSpecReaderTest.cpp - config -> ModelSpec ----------------------===//

#include "compiler/Frontend/ModelSpecReader.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mfc;

namespace {

constexpr const char *kTinyLlama = R"(
run_mode: predict
parallel_config:
  model_parallel: 1
model:
  arch:
    type: LlamaForCausalLM
  model_config:
    type: LlamaConfig
    seq_length: 32
    hidden_size: 64
    num_layers: 2
    num_heads: 4
    n_kv_heads: 2
    vocab_size: 256
)";

struct Read {
  std::string messages;
  llvm::raw_string_ostream stream{messages};
  ConfigDiagnostics diagnostics{stream};
  std::optional<ModelSpec> spec;

  Read(llvm::StringRef text, std::vector<std::string> overrides = {}) {
    std::unique_ptr<ConfigNode> root =
        parseConfigText(diagnostics, text, "test.yaml");
    if (!root) {
      return;
    }
    for (const std::string &assignment : overrides) {
      if (!applyOverride(diagnostics, *root, assignment)) {
        return;
      }
    }
    spec = readModelSpec(diagnostics, *root, "test.yaml");
  }
};

TEST(ModelSpecReader, ReadsATinyLlama) {
  Read read(kTinyLlama);
  ASSERT_TRUE(read.spec) << read.messages;
  EXPECT_EQ(read.spec->runMode, RunMode::Predict);
  EXPECT_EQ(read.spec->model.family, ModelFamily::Llama);
  EXPECT_EQ(read.spec->model.kvHeads(), 2);
  EXPECT_EQ(read.spec->model.headDim(), 16);
  EXPECT_TRUE(read.messages.empty()) << read.messages;
}

TEST(ModelSpecReader, FfnWidthFollowsMindFormers) {
  ModelConfig llama7b;
  llama7b.hiddenSize = 4096;
  llama7b.multipleOf = 256;
  EXPECT_EQ(llama7b.ffnHiddenSize(), 11008);
  // pretrain_llama2_70b's multiple_of 256 with ffn_dim_multiplier 1.3, as
  // MindFormers' LlamaFeedForward computes it:
  // 256 * ceil(int(2 * int(1.31 * 32768) / 3) / 256) = 28672, the width of
  // Meta's 70B checkpoint (Meta's own formula needs multiple_of 4096 for it).
  ModelConfig llama70b;
  llama70b.hiddenSize = 8192;
  llama70b.multipleOf = 256;
  llama70b.ffnDimMultiplier = 1.3;
  EXPECT_EQ(llama70b.ffnHiddenSize(), 28672);
  llama70b.multipleOf = 4096;
  EXPECT_EQ(llama70b.ffnHiddenSize(), 28672);
  // LLaMA-3 8B: hidden 4096, multiplier 1.3, multiple_of 256 -> 14336.
  ModelConfig llama3_8b;
  llama3_8b.hiddenSize = 4096;
  llama3_8b.multipleOf = 256;
  llama3_8b.ffnDimMultiplier = 1.3;
  EXPECT_EQ(llama3_8b.ffnHiddenSize(), 14336);
  ModelConfig qwen;
  qwen.intermediateSize = 4864;
  EXPECT_EQ(qwen.ffnHiddenSize(), 4864);
  ModelConfig gpt2;
  gpt2.family = ModelFamily::GPT2;
  gpt2.hiddenSize = 768;
  EXPECT_EQ(gpt2.ffnHiddenSize(), 3072);
}

TEST(ModelSpecReader, ReportsEveryErrorNotJustTheFirst) {
  Read read(kTinyLlama, {"model.model_config.num_layers=-1",
                         "model.model_config.vocab_size='256'",
                         "model.model_config.use_past=maybe"});
  EXPECT_FALSE(read.spec);
  EXPECT_EQ(read.diagnostics.errorCount(), 3u) << read.messages;
  EXPECT_NE(read.messages.find("expected a positive integer, got '-1'"),
            std::string::npos);
  EXPECT_NE(read.messages.find("remove the quotes"), std::string::npos);
  EXPECT_NE(read.messages.find("expected True or False"), std::string::npos);
}

TEST(ModelSpecReader, RecomputeForms) {
  Read perStage(kTinyLlama, {"recompute_config.recompute=[2]"});
  ASSERT_TRUE(perStage.spec) << perStage.messages;
  EXPECT_EQ(perStage.spec->recompute.recompute.kind,
            RecomputeSelection::Kind::LayersPerStage);

  Read regexes(kTinyLlama,
               {"recompute_config.select_recompute=['feed_forward\\.mul']"});
  ASSERT_TRUE(regexes.spec) << regexes.messages;
  EXPECT_EQ(regexes.spec->recompute.selectRecompute.kind,
            RecomputeSelection::Kind::OpPatterns);
  EXPECT_EQ(regexes.spec->recompute.selectRecompute.patterns[0].regex,
            "feed_forward\\.mul");

  Read dict(kTinyLlama, {"recompute_config.select_recompute={'w1': [1], "
                         "'w3': True, 'w2': False}"});
  ASSERT_TRUE(dict.spec) << dict.messages;
  EXPECT_EQ(dict.spec->recompute.selectRecompute.patterns.size(), 2u);

  Read wrongStages(kTinyLlama, {"recompute_config.recompute=[1, 1]"});
  EXPECT_FALSE(wrongStages.spec);
  EXPECT_NE(wrongStages.messages.find("pipeline_stage is 1"),
            std::string::npos);

  Read badRegex(kTinyLlama, {"recompute_config.select_recompute=['(']"});
  EXPECT_FALSE(badRegex.spec);
  EXPECT_NE(badRegex.messages.find("invalid regex"), std::string::npos);
}

TEST(ModelSpecReader, ParallelDegreesMustDivideTheModel) {
  Read read(kTinyLlama, {"parallel_config.model_parallel=4"});
  EXPECT_FALSE(read.spec);
  EXPECT_NE(read.messages.find("must divide num_heads (4) and n_kv_heads (2)"),
            std::string::npos)
      << read.messages;
}

TEST(ModelSpecReader, UnknownKeyFromSetIsAnError) {
  Read fromFile(std::string(kTinyLlama) + "    num_layer: 3\n");
  ASSERT_TRUE(fromFile.spec);
  EXPECT_NE(fromFile.messages.find("warning: unknown key 'num_layer'"),
            std::string::npos);
  Read fromSet(kTinyLlama, {"model.model_config.num_layer=3"});
  EXPECT_FALSE(fromSet.spec);
  EXPECT_NE(fromSet.messages.find("did you mean 'num_layers'?"),
            std::string::npos);
}

} // namespace
