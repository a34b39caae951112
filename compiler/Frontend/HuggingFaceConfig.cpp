//===- HuggingFaceConfig.cpp - config.json under a MindFormers YAML -------===//

#include "compiler/Frontend/HuggingFaceConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

using namespace mfc;
using llvm::SMLoc;
using llvm::StringRef;

llvm::ArrayRef<KeySpelling> mfc::modelKeySpellings() {
  // Hugging Face's names, and those of MindFormers' transformer configs
  // (its COMMON_CONFIG_MAPPING), for keys its LLaMA configs spell otherwise.
  static const KeySpelling spellings[] = {
      {"num_kv_heads", "n_kv_heads"},
      {"num_key_value_heads", "n_kv_heads"},
      {"num_query_groups", "n_kv_heads"},
      {"num_hidden_layers", "num_layers"},
      {"num_attention_heads", "num_heads"},
      {"rope_theta", "theta"},
      {"kv_channels", "head_dim"},
      {"ffn_hidden_size", "intermediate_size"},
      {"params_dtype", "param_init_type"},
      {"layernorm_compute_dtype", "layernorm_compute_type"},
      {"softmax_compute_dtype", "softmax_compute_type"},
      {"add_qkv_bias", "qkv_has_bias"},
      {"attention_bias", "qkv_has_bias"},
      {"use_qk_norm", "qk_layernorm"},
      {"use_cache", "use_past"}};
  return spellings;
}

StringRef mfc::canonicalModelKey(StringRef key) {
  for (const KeySpelling &spelling : modelKeySpellings()) {
    if (spelling.other == key) {
      return spelling.canonical;
    }
  }
  return key;
}

std::string mfc::resolveBesideConfig(StringRef path, StringRef yamlPath) {
  llvm::SmallString<256> resolved(path);
  if (!llvm::sys::path::is_absolute(resolved)) {
    resolved = llvm::sys::path::parent_path(yamlPath);
    llvm::sys::path::append(resolved, path);
  }
  llvm::sys::fs::make_absolute(resolved);
  llvm::sys::path::remove_dots(resolved, /*remove_dot_dot=*/true);
  return resolved.str().str();
}

namespace {

/// generation_config.json's keys that model_config also has.
constexpr StringRef kGenerationKeys[] = {
    "do_sample",          "top_k",        "top_p",        "temperature",
    "repetition_penalty", "bos_token_id", "eos_token_id", "pad_token_id"};

/// The map under `key`, created (at `loc`) when absent or null; null when
/// the value is something else (the reader reports that).
ConfigNode *mapAt(ConfigNode &parent, StringRef key, SMLoc loc) {
  ConfigNode::Entry *entry = parent.find(key);
  if (!entry) {
    parent.entries.push_back({key.str(), loc, std::make_unique<ConfigNode>()});
    entry = &parent.entries.back();
  }
  ConfigNode &value = *entry->value;
  if (value.isNull()) {
    value.kind = ConfigNode::Kind::Map;
    value.loc = loc;
  }
  return value.isMap() ? &value : nullptr;
}

bool sameValue(const ConfigNode &a, const ConfigNode &b) {
  if (a.kind != b.kind) {
    return false;
  }
  if (a.isScalar()) {
    char *endA = nullptr, *endB = nullptr;
    double x = std::strtod(a.scalar.c_str(), &endA);
    double y = std::strtod(b.scalar.c_str(), &endB);
    bool numbers = !a.scalar.empty() && !b.scalar.empty() && *endA == '\0' &&
                   *endB == '\0';
    if (numbers) {
      return x == y;
    }
    StringRef left(a.scalar), right(b.scalar);
    return left.equals_insensitive(right);
  }
  if (a.isSequence()) {
    return a.items.size() == b.items.size() &&
           llvm::all_of(llvm::zip(a.items, b.items), [](const auto &pair) {
             return sameValue(*std::get<0>(pair), *std::get<1>(pair));
           });
  }
  return true; // maps (rope_scaling): not compared
}

std::string shown(const ConfigNode &node) {
  if (node.isScalar()) {
    return node.scalar;
  }
  if (node.isSequence()) {
    std::string text = "[";
    for (const auto &item : node.items) {
      text += (text.size() > 1 ? ", " : "") + shown(*item);
    }
    return text + "]";
  }
  return node.describe();
}

class PretrainedMerge {
public:
  PretrainedMerge(ConfigDiagnostics &diagnostics, ConfigNode &modelConfig,
                  bool copy)
      : diagnostics_(diagnostics), modelConfig_(modelConfig), copy_(copy) {
    for (const ConfigNode::Entry &entry : modelConfig.entries) {
      yamlKeys_.insert(canonicalModelKey(entry.key));
    }
  }

  /// Takes `file`'s entries (all of them, or only `onlyKeys`).
  void merge(ConfigNode &file, StringRef fileName,
             llvm::ArrayRef<StringRef> onlyKeys = {}) {
    for (ConfigNode::Entry &entry : file.entries) {
      if (!onlyKeys.empty() && !llvm::is_contained(onlyKeys, entry.key)) {
        continue;
      }
      StringRef canonical = canonicalModelKey(entry.key);
      if (yamlKeys_.contains(canonical)) {
        compare(entry, canonical, fileName);
        continue;
      }
      if (!copy_ || !taken_.insert(canonical).second) {
        continue; // generation_config.json's value came first
      }
      modelConfig_.entries.push_back(std::move(entry));
    }
  }

  /// Sets `canonical` to `value` when neither the YAML nor a file gave it:
  /// a default of transformers' that differs from MindFormers'.
  void defaultTo(StringRef canonical, StringRef value, SMLoc loc) {
    if (!copy_ || yamlKeys_.contains(canonical) || taken_.contains(canonical)) {
      return;
    }
    auto node = std::make_unique<ConfigNode>();
    node->kind = ConfigNode::Kind::Scalar;
    node->scalar = value.str();
    node->loc = loc;
    modelConfig_.entries.push_back({canonical.str(), loc, std::move(node)});
  }

private:
  void compare(const ConfigNode::Entry &fromFile, StringRef canonical,
               StringRef fileName) {
    auto yaml = llvm::find_if(
        modelConfig_.entries, [&](const ConfigNode::Entry &entry) {
          return canonicalModelKey(entry.key) == canonical;
        });
    if (sameValue(*yaml->value, *fromFile.value)) {
      return;
    }
    // Keys that shape the weights.
    static const StringRef shapeKeys[] = {
        "hidden_size",
        "num_layers",
        "num_heads",
        "n_kv_heads",
        "vocab_size",
        "intermediate_size",
        "head_dim",
        "qkv_has_bias",
        "tie_word_embeddings",
        "qk_layernorm",
        "untie_embeddings_and_output_weights"};
    bool shapesWeights = llvm::is_contained(shapeKeys, canonical);
    diagnostics_.warning(
        yaml->keyLoc,
        "model.model_config." + yaml->key + ": " + shown(*yaml->value) +
            " here, " + shown(*fromFile.value) + " in the model folder's " +
            fileName +
            "; the YAML's value is compiled (MindFormers merges "
            "them so)" +
            (shapesWeights ? ", and the folder's weights will not fit" : ""));
    diagnostics_.note(fromFile.keyLoc, fileName + "'s value");
  }

  ConfigDiagnostics &diagnostics_;
  ConfigNode &modelConfig_;
  bool copy_;
  llvm::StringSet<> yamlKeys_;
  llvm::StringSet<> taken_;
};

} // namespace

bool mfc::mergePretrainedModelDir(ConfigDiagnostics &diagnostics,
                                  ConfigNode &root, StringRef yamlPath) {
  ConfigNode::Entry *dirEntry =
      root.isMap() ? root.find("pretrained_model_dir") : nullptr;
  if (!dirEntry || !dirEntry->value->isScalar() ||
      dirEntry->value->scalar.empty()) {
    return true; // the reader reports a value of the wrong kind
  }
  const ConfigNode::Entry *model = root.find("model");
  const ConfigNode::Entry *arch =
      model && model->value->isMap() ? model->value->find("arch") : nullptr;
  bool hasArch = arch && !arch->value->isNull();
  SMLoc dirLoc = dirEntry->value->loc;
  std::string dir = resolveBesideConfig(dirEntry->value->scalar, yamlPath);
  llvm::SmallString<256> configPath(dir);
  llvm::sys::path::append(configPath, "config.json");
  if (!llvm::sys::fs::exists(configPath)) {
    if (hasArch) {
      diagnostics.note(dirLoc, "pretrained_model_dir: '" + dir +
                                   "' has no config.json; the model is "
                                   "model.arch and model_config as the YAML "
                                   "gives them");
      return true;
    }
    std::string problem = !llvm::sys::fs::exists(dir) ? "does not exist"
                          : !llvm::sys::fs::is_directory(dir)
                              ? "is not a folder"
                              : "has no config.json";
    diagnostics.error(
        dirLoc, "pretrained_model_dir: '" + dir + "' " + problem +
                    "; this config takes its architecture and sizes from the "
                    "Hugging Face model folder's config.json (a relative path "
                    "is relative to the YAML); give the folder, e.g. --set "
                    "pretrained_model_dir=/models/Qwen3-0.6B");
    return false;
  }
  std::unique_ptr<ConfigNode> config =
      parseConfigFile(diagnostics, configPath, "a JSON object of settings");
  if (!config) {
    return false;
  }
  ConfigNode *modelNode = mapAt(root, "model", dirEntry->keyLoc);
  ConfigNode *modelConfig =
      modelNode ? mapAt(*modelNode, "model_config", dirEntry->keyLoc) : nullptr;
  if (!modelConfig) {
    return true; // the reader reports model or model_config not being maps
  }
  PretrainedMerge merge(diagnostics, *modelConfig, /*copy=*/!hasArch);
  // Generation settings: generation_config.json's win over config.json's.
  llvm::SmallString<256> generationPath(dir);
  llvm::sys::path::append(generationPath, "generation_config.json");
  if (llvm::sys::fs::exists(generationPath)) {
    std::unique_ptr<ConfigNode> generation = parseConfigFile(
        diagnostics, generationPath, "a JSON object of settings");
    if (!generation) {
      return false;
    }
    merge.merge(*generation, "generation_config.json", kGenerationKeys);
  }
  merge.merge(*config, "config.json");
  // transformers' PretrainedConfig defaults use_cache to true, MindFormers'
  // use_past to false: a config.json that does not say is a model that
  // decodes with a KV cache.
  merge.defaultTo("use_past", "true", dirLoc);
  return true;
}
