//===- ConfigTreeTest.cpp - YAML tree, overrides, suggestions -------------===//

#include "compiler/Frontend/ConfigTree.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mfc;

namespace {

struct Parsed {
  std::string messages;
  llvm::raw_string_ostream stream{messages};
  ConfigDiagnostics diagnostics{stream};
  std::unique_ptr<ConfigNode> root;

  explicit Parsed(llvm::StringRef text) {
    root = parseConfigText(diagnostics, text, "test.yaml");
  }
};

TEST(ConfigTree, KeepsMapOrderQuotingAndPositions) {
  Parsed parsed("b: 1\na: '2'\nc:\n  - x\n  - y\n");
  ASSERT_TRUE(parsed.root);
  ASSERT_TRUE(parsed.root->isMap());
  ASSERT_EQ(parsed.root->entries.size(), 3u);
  EXPECT_EQ(parsed.root->entries[0].key, "b");
  EXPECT_FALSE(parsed.root->entries[0].value->quoted);
  EXPECT_TRUE(parsed.root->find("a")->value->quoted);
  EXPECT_EQ(parsed.root->find("c")->value->items.size(), 2u);
  ConfigDiagnostics::Position position =
      parsed.diagnostics.position(parsed.root->find("c")->keyLoc);
  EXPECT_EQ(position.line, 3u);
  EXPECT_EQ(position.column, 1u);
}

TEST(ConfigTree, MalformedYamlIsAnErrorWithALine) {
  Parsed parsed("a: [1, 2\nb: 3\n");
  EXPECT_FALSE(parsed.root);
  EXPECT_EQ(parsed.diagnostics.errorCount(), 1u);
  EXPECT_NE(parsed.messages.find("test.yaml:"), std::string::npos);
  EXPECT_NE(parsed.messages.find("malformed YAML"), std::string::npos);
}

TEST(ConfigTree, DuplicateKeysAreRejected) {
  Parsed parsed("a: 1\na: 2\n");
  EXPECT_FALSE(parsed.root);
  EXPECT_NE(parsed.messages.find("duplicate key 'a'"), std::string::npos);
}

TEST(ConfigTree, OverrideReplacesAddsAndIndexes) {
  Parsed parsed("model:\n  cfg:\n    n: 1\nlist: [1, 2]\n");
  ASSERT_TRUE(parsed.root);
  EXPECT_TRUE(applyOverride(parsed.diagnostics, *parsed.root, "model.cfg.n=4"));
  EXPECT_EQ(parsed.root->find("model")->value->find("cfg")->value->find("n")
                ->value->scalar,
            "4");
  EXPECT_TRUE(
      applyOverride(parsed.diagnostics, *parsed.root, "model.cfg.m=[1, 2]"));
  EXPECT_TRUE(parsed.root->find("model")->value->find("cfg")->value->find("m")
                  ->value->isSequence());
  EXPECT_TRUE(applyOverride(parsed.diagnostics, *parsed.root, "list.1=7"));
  EXPECT_EQ(parsed.root->find("list")->value->items[1]->scalar, "7");
  EXPECT_TRUE(parsed.diagnostics.isOverride(
      parsed.root->find("list")->value->items[1]->loc));
  EXPECT_EQ(parsed.diagnostics.errorCount(), 0u);
}

TEST(ConfigTree, OverrideCreatesMissingSections) {
  Parsed parsed("model:\n  model_config:\n    n: 1\n");
  ASSERT_TRUE(parsed.root);
  EXPECT_TRUE(applyOverride(parsed.diagnostics, *parsed.root,
                            "recompute_config.recompute=True"));
  const ConfigNode::Entry *section = parsed.root->find("recompute_config");
  ASSERT_TRUE(section);
  EXPECT_TRUE(parsed.diagnostics.isOverride(section->keyLoc));
  EXPECT_EQ(section->value->find("recompute")->value->scalar, "True");
}

TEST(ConfigTree, MalformedOverridesAreErrors) {
  Parsed parsed("model:\n  n: 1\nlist: [1]\n");
  ASSERT_TRUE(parsed.root);
  EXPECT_FALSE(applyOverride(parsed.diagnostics, *parsed.root, "no-equals"));
  EXPECT_FALSE(applyOverride(parsed.diagnostics, *parsed.root, "model.=2"));
  EXPECT_FALSE(applyOverride(parsed.diagnostics, *parsed.root, "model.n.x=2"));
  EXPECT_FALSE(applyOverride(parsed.diagnostics, *parsed.root, "list.3=2"));
  EXPECT_FALSE(applyOverride(parsed.diagnostics, *parsed.root, "model.n=[1"));
  EXPECT_EQ(parsed.diagnostics.errorCount(), 5u) << parsed.messages;
}

TEST(ConfigTree, ClosestMatchOnlySuggestsPlausibleTypos) {
  llvm::StringRef keys[] = {"num_layers", "num_heads", "hidden_size"};
  EXPECT_EQ(closestMatch("num_layer", keys), "num_layers");
  EXPECT_EQ(closestMatch("hiden_size", keys), "hidden_size");
  EXPECT_EQ(closestMatch("vocabulary", keys), "");
}

} // namespace
