//===- ModelSpecReader.cpp - YAML config -> validated ModelSpec -----------===//
//
// 1. Each section is read by a MapReader that knows the section's keys: the
//    ones we model (typed, range-checked) and the ones we accept but ignore.
// 2. Keys nobody knows get a warning with a did-you-mean (an error when they
//    come from --set, where a typo is certainly a mistake).
// 3. Cross-field rules (heads divisible by KV heads, parallel degrees, ...)
//    run last and point at the key that has to change.
//
//===----------------------------------------------------------------------===//

#include "compiler/Frontend/ModelSpecReader.h"

#include "compiler/Analysis/PipelineSchedule.h"
#include "compiler/Frontend/HuggingFaceConfig.h"
#include "compiler/Frontend/RecomputePlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <limits>

using namespace mfc;
using llvm::SMLoc;
using llvm::StringRef;

const char *mfc::toString(RunMode mode) {
  switch (mode) {
  case RunMode::Train:
    return "train";
  case RunMode::Finetune:
    return "finetune";
  case RunMode::Predict:
    return "predict";
  case RunMode::Eval:
    return "eval";
  }
  return "?";
}

const char *mfc::toString(DType type) {
  switch (type) {
  case DType::F32:
    return "float32";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  }
  return "?";
}

int64_t ModelConfig::ffnHiddenSize() const {
  if (family == ModelFamily::GPT2) {
    return expandRatio * hiddenSize;
  }
  if (intermediateSize) {
    return *intermediateSize;
  }
  // MindFormers' LLaMA FeedForward (llama_layer.py): 4*hidden scaled by
  // ffn_dim_multiplier + 0.01 (its margin against float truncation), then
  // 2/3 of that, rounded up to multiple_of. The order and the 0.01 matter:
  // LLaMA-2/3 70B get 28672 (without the 0.01, 28416).
  int64_t hidden = 4 * hiddenSize;
  if (ffnDimMultiplier) {
    hidden = static_cast<int64_t>((*ffnDimMultiplier + 0.01) * hidden);
  }
  hidden = 2 * hidden / 3;
  return multipleOf * ((hidden + multipleOf - 1) / multipleOf);
}

int64_t MoeConfig::capacity(int64_t tokens) const {
  if (capacityFactor <= 0) {
    return 0;
  }
  // MindFormers' calculate_expert_capacity_v2 (moe.py), evaluated in its
  // order: ceil(k * N * factor / E), at most N, rounded up to a multiple
  // of the model-parallel degree (times comp_comm_parallel_degree).
  double exact = static_cast<double>(expertsPerToken * tokens) *
                 capacityFactor / static_cast<double>(numExperts);
  // At most N, clamped before the conversion (a huge factor overflows it).
  auto capacity = static_cast<int64_t>(
      std::ceil(std::min(exact, static_cast<double>(tokens))));
  if (capacity % capacityMultiple != 0) {
    capacity += capacityMultiple - capacity % capacityMultiple;
  }
  return capacity;
}

int64_t ModelSpec::entryBatchSize() const {
  if (runMode != RunMode::Predict && runner.batchSize) {
    return *runner.batchSize;
  }
  return model.batchSize;
}

KeyPosition ModelSpec::positionOf(const std::string &path) const {
  StringRef remaining = path;
  while (!remaining.empty()) {
    auto it = keyPositions.find(remaining.str());
    if (it != keyPositions.end()) {
      return it->second;
    }
    auto [parent, child] = remaining.rsplit('.');
    remaining = child.empty() ? StringRef() : parent;
  }
  return {sourceFile, 1, 1};
}

namespace {

// The largest value each size key takes: far above every real model (hidden
// 16384, 126 layers, a 256K vocabulary, 1M-token contexts), far below what
// overflows the int64 sizes and FLOP counts every later stage computes.
constexpr int64_t kMaxWidth = int64_t(1) << 17;      // hidden_size, heads
constexpr int64_t kMaxFfnWidth = int64_t(1) << 20;   // intermediate_size
constexpr int64_t kMaxFfnRatio = 64;                 // expand_ratio, ffn_dim_multiplier
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxExperts = int64_t(1) << 12;    // num_experts
constexpr int64_t kMaxSequence = int64_t(1) << 20;   // seq_length, max_decode_length
constexpr int64_t kMaxVocabulary = int64_t(1) << 24;
constexpr int64_t kMaxBatch = int64_t(1) << 16;
constexpr int64_t kMaxParallel = int64_t(1) << 14;   // each parallel degree
constexpr int64_t kMaxSteps = int64_t(1) << 40;
// Then the model as a whole: its largest tensor and one step's FLOPs.
constexpr int64_t kMaxTensorElements = int64_t(1) << 36;
constexpr int64_t kMaxStepFlops = int64_t(1) << 60;

/// The bounds a regex may have: real op-path patterns are a few dozen
/// characters with no counted repetition.
constexpr size_t kMaxRegexLength = 1024;
constexpr uint64_t kMaxRegexExpansion = 4096;

/// The product of a regex's repetition counts ({n}, {m,n}: n; {m,}: m),
/// saturating: an upper bound of how often regcomp copies an atom.
uint64_t repetitionExpansion(StringRef pattern) {
  uint64_t product = 1;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      ++i;
      continue;
    }
    size_t close = pattern[i] == '{' ? pattern.find('}', i) : StringRef::npos;
    if (close == StringRef::npos) {
      continue;
    }
    auto [low, high] = pattern.slice(i + 1, close).split(',');
    uint64_t count = 0;
    if ((high.empty() ? low : high).trim().getAsInteger(10, count)) {
      count = 255; // not a count regcomp accepts: the most it would copy
    }
    product = std::min<uint64_t>(product * std::max<uint64_t>(count, 1),
                                 uint64_t(1) << 40);
    i = close;
  }
  return product;
}

/// a * b * ..., or nothing on overflow.
std::optional<int64_t> checkedProduct(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) {
      return std::nullopt;
    }
  }
  return product;
}

//===----------------------------------------------------------------------===//
// Scalar parsing
//===----------------------------------------------------------------------===//

std::optional<int64_t> parseInteger(const ConfigNode &node) {
  if (!node.isScalar() || node.quoted) {
    return std::nullopt;
  }
  int64_t value;
  if (StringRef(node.scalar).getAsInteger(10, value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<double> parseFloat(const ConfigNode &node) {
  if (!node.isScalar() || node.quoted || node.scalar.empty()) {
    return std::nullopt;
  }
  const char *begin = node.scalar.c_str();
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (errno != 0 || end != begin + node.scalar.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

/// YAML 1.1 booleans, as PyYAML (and so MindFormers) reads them.
std::optional<bool> parseBool(const ConfigNode &node) {
  if (!node.isScalar() || node.quoted) {
    return std::nullopt;
  }
  std::string lower = StringRef(node.scalar).lower();
  if (lower == "true" || lower == "yes" || lower == "on") {
    return true;
  }
  if (lower == "false" || lower == "no" || lower == "off") {
    return false;
  }
  return std::nullopt;
}

std::optional<DType> parseDType(StringRef text) {
  if (text == "float32" || text == "fp32") {
    return DType::F32;
  }
  if (text == "float16" || text == "fp16") {
    return DType::F16;
  }
  if (text == "bfloat16" || text == "bf16") {
    return DType::BF16;
  }
  return std::nullopt;
}

/// A number as a person writes it: 0, 1e-05, 0.999.
std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

std::string joinQuoted(llvm::ArrayRef<StringRef> words) {
  std::string text;
  for (auto [index, word] : llvm::enumerate(words)) {
    text += (index ? ", " : "") + word.str();
  }
  return text;
}

//===----------------------------------------------------------------------===//
// MapReader
//===----------------------------------------------------------------------===//

/// State shared by all section readers.
struct ReadContext {
  ConfigDiagnostics &diagnostics;
  ModelSpec &spec;
};

/// Reads the keys of one YAML map and remembers which it has seen.
class MapReader {
public:
  /// `node` may be null (the section is absent): every read keeps its
  /// default. `path` is the dotted key path of the map ("model.model_config").
  MapReader(ReadContext &context, const ConfigNode *node, std::string path,
            SMLoc sectionLoc)
      : context_(context), node_(node), path_(std::move(path)),
        sectionLoc_(sectionLoc) {
    if (node_ && !node_->isMap() && !node_->isNull()) {
      error(node_->loc, path_ + ": expected a map of keys, got " +
                            node_->describe());
      node_ = nullptr;
    }
    if (node_ && node_->isNull()) {
      node_ = nullptr;
    }
  }

  bool present() const { return node_ != nullptr; }
  const std::string &path() const { return path_; }
  SMLoc loc() const { return node_ ? node_->loc : sectionLoc_; }

  /// Keys that are valid here but change nothing we compile.
  MapReader &ignore(std::initializer_list<StringRef> keys) {
    for (StringRef key : keys) {
      known_.insert(key);
    }
    return *this;
  }

  /// The value of `key` (null if absent or `null`); marks the key known.
  const ConfigNode *get(StringRef key) {
    known_.insert(key);
    const ConfigNode::Entry *entry = findEntry(key);
    if (!entry) {
      return nullptr;
    }
    // A value from --set is located there; otherwise the key locates it.
    SMLoc where = context_.diagnostics.isOverride(entry->value->loc)
                      ? entry->value->loc
                      : entry->keyLoc;
    ConfigDiagnostics::Position position = context_.diagnostics.position(where);
    KeyPosition keyPosition{position.file, position.line, position.column};
    context_.spec.keyPositions[childPath(key)] = keyPosition;
    context_.spec.keyPositions[canonicalPath(key)] = keyPosition;
    return entry->value->isNull() ? nullptr : entry->value.get();
  }

  /// Reads `other`, another spelling of `key`, wherever `key` is asked for
  /// (and names it in messages). Both given is an error: which one wins
  /// would be a guess. Returns true if `other` is read.
  bool alias(StringRef key, StringRef other) {
    known_.insert(other);
    if (!node_ || !node_->find(other)) {
      return false;
    }
    if (findEntry(key)) {
      error(node_->find(other)->keyLoc,
            childPath(other) + ": another name for " + childPath(key) +
                ", which is given too; keep one of them");
      return false;
    }
    aliases_[key] = other.str();
    return true;
  }

  SMLoc keyLoc(StringRef key) const {
    const ConfigNode::Entry *entry = findEntry(key);
    return entry ? entry->keyLoc : loc();
  }

  SMLoc valueLoc(StringRef key) const {
    const ConfigNode::Entry *entry = findEntry(key);
    return entry ? entry->value->loc : loc();
  }

  /// The dotted path of `key` as the config spells it.
  std::string childPath(StringRef key) const {
    auto alias = aliases_.find(key);
    return canonicalPath(alias == aliases_.end() ? key
                                                 : StringRef(alias->second));
  }

  void error(SMLoc loc, const llvm::Twine &message) {
    context_.diagnostics.error(loc, message);
  }

  /// Reports `key` as missing when it is.
  bool require(StringRef key, StringRef example) {
    if (get(key)) {
      return true;
    }
    if (findEntry(key)) {
      error(valueLoc(key), childPath(key) + ": must not be null; set it, e.g. '" +
                               key + ": " + example + "'");
    } else {
      std::string where = path_.empty() ? "the config" : path_;
      error(sectionLoc_.isValid() ? sectionLoc_ : loc(),
            where + ": missing required key '" + key + "'; add e.g. '" + key +
                ": " + example + "'");
    }
    return false;
  }

  void readInt(StringRef key, int64_t &out,
               int64_t min = std::numeric_limits<int64_t>::min(),
               int64_t max = std::numeric_limits<int64_t>::max()) {
    if (std::optional<int64_t> value = readIntValue(key, min, max)) {
      out = *value;
    }
  }

  void readInt(StringRef key, std::optional<int64_t> &out, int64_t min,
               int64_t max = std::numeric_limits<int64_t>::max()) {
    if (std::optional<int64_t> value = readIntValue(key, min, max)) {
      out = *value;
    }
  }

  void readPositive(StringRef key, int64_t &out,
                    int64_t max = std::numeric_limits<int64_t>::max()) {
    readInt(key, out, 1, max);
  }

  void readFloat(StringRef key, double &out,
                 double min = -std::numeric_limits<double>::infinity(),
                 double max = std::numeric_limits<double>::infinity(),
                 bool exclusiveMin = false) {
    if (std::optional<double> value =
            readFloatValue(key, min, max, exclusiveMin)) {
      out = *value;
    }
  }

  void readFloat(StringRef key, std::optional<double> &out, double min,
                 bool exclusiveMin,
                 double max = std::numeric_limits<double>::infinity()) {
    if (std::optional<double> value =
            readFloatValue(key, min, max, exclusiveMin)) {
      out = *value;
    }
  }

  void readBool(StringRef key, bool &out) {
    const ConfigNode *value = get(key);
    if (!value) {
      return;
    }
    if (std::optional<bool> parsed = parseBool(*value)) {
      out = *parsed;
      return;
    }
    error(value->loc, childPath(key) + ": expected True or False, got " +
                          value->describe());
  }

  void readString(StringRef key, std::string &out) {
    const ConfigNode *value = get(key);
    if (!value) {
      return;
    }
    if (!value->isScalar()) {
      error(value->loc, childPath(key) + ": expected a string, got " +
                            value->describe());
      return;
    }
    out = value->scalar;
  }

  /// Reads a string that must be one of `choices`.
  bool readChoice(StringRef key, std::string &out,
                  llvm::ArrayRef<StringRef> choices) {
    const ConfigNode *value = get(key);
    if (!value) {
      return false;
    }
    if (value->isScalar() && llvm::is_contained(choices, value->scalar)) {
      out = value->scalar;
      return true;
    }
    std::string message = childPath(key) + ": expected one of " +
                          joinQuoted(choices) + ", got " + value->describe();
    std::string suggestion =
        value->isScalar() ? closestMatch(value->scalar, choices) : "";
    if (!suggestion.empty()) {
      message += "; did you mean '" + suggestion + "'?";
    }
    error(value->loc, message);
    return false;
  }

  void readDType(StringRef key, DType &out) {
    static const StringRef names[] = {"float32", "float16", "bfloat16"};
    std::string text;
    if (readChoice(key, text, names)) {
      out = *parseDType(text);
    }
  }

  /// Warns about (or, from --set, rejects) keys this section does not know.
  void finish() {
    if (!node_) {
      return;
    }
    llvm::SmallVector<StringRef> candidates(known_.keys());
    for (const ConfigNode::Entry &entry : node_->entries) {
      if (known_.contains(entry.key)) {
        continue;
      }
      std::string message = "unknown key '" + entry.key + "' in " +
                            (path_.empty() ? "the config" : path_);
      std::string suggestion = closestMatch(entry.key, candidates);
      llvm::SmallVector<llvm::SMFixIt, 1> fixIts;
      if (!suggestion.empty()) {
        message += "; did you mean '" + suggestion + "'?";
        fixIts.emplace_back(
            llvm::SMRange(entry.keyLoc, SMLoc::getFromPointer(
                                            entry.keyLoc.getPointer() +
                                            entry.key.size())),
            suggestion);
      }
      if (context_.diagnostics.isOverride(entry.keyLoc)) {
        context_.diagnostics.error(entry.keyLoc, message, fixIts);
      } else {
        context_.diagnostics.warning(entry.keyLoc, message + " (ignored)",
                                     fixIts);
      }
    }
  }

private:
  std::string canonicalPath(StringRef key) const {
    return path_.empty() ? key.str() : path_ + "." + key.str();
  }

  const ConfigNode::Entry *findEntry(StringRef key) const {
    if (!node_) {
      return nullptr;
    }
    auto alias = aliases_.find(key);
    return node_->find(alias == aliases_.end() ? key
                                               : StringRef(alias->second));
  }

  std::optional<int64_t> readIntValue(StringRef key, int64_t min, int64_t max) {
    const ConfigNode *value = get(key);
    if (!value) {
      return std::nullopt;
    }
    std::optional<int64_t> parsed = parseInteger(*value);
    if (parsed && *parsed > max) {
      error(value->loc, childPath(key) + ": " + std::to_string(*parsed) +
                            " is above the largest value allowed here, " +
                            std::to_string(max));
      return std::nullopt;
    }
    if (!parsed || *parsed < min) {
      std::string expected = min == 1   ? "a positive integer"
                             : min == 0 ? "a non-negative integer"
                                        : "an integer";
      std::string message =
          childPath(key) + ": expected " + expected + ", got " + value->describe();
      int64_t unquoted;
      if (value->quoted &&
          !StringRef(value->scalar).getAsInteger(10, unquoted)) {
        message += "; remove the quotes";
      }
      error(value->loc, message);
      return std::nullopt;
    }
    return parsed;
  }

  std::optional<double> readFloatValue(StringRef key, double min, double max,
                                       bool exclusiveMin) {
    const ConfigNode *value = get(key);
    if (!value) {
      return std::nullopt;
    }
    std::optional<double> parsed = parseFloat(*value);
    bool below = parsed && (exclusiveMin ? *parsed <= min : *parsed < min);
    if (!parsed || below || *parsed > max) {
      std::string expected = "a number";
      if (std::isfinite(min)) {
        expected += (exclusiveMin ? " > " : " >= ") + formatNumber(min);
      }
      if (std::isfinite(max)) {
        expected += " <= " + formatNumber(max);
      }
      error(value->loc, childPath(key) + ": expected " + expected + ", got " +
                            value->describe());
      return std::nullopt;
    }
    return parsed;
  }

  ReadContext &context_;
  const ConfigNode *node_;
  std::string path_;
  SMLoc sectionLoc_;
  llvm::StringSet<> known_;
  llvm::StringMap<std::string> aliases_; ///< key -> the spelling present
};

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

/// Top-level keys that only MindSpore's Python trainer uses.
constexpr StringRef kTrainerOnlyKeys[] = {
    "output_dir", "src_strategy_path_or_dir",
    "auto_trans_ckpt", "only_save_strategy", "resume_training",
    "do_eval", "eval_step_interval", "eval_epoch_interval", "train_dataset",
    "train_dataset_task", "eval_dataset", "eval_dataset_task", "callbacks",
    "eval_callbacks", "metric", "parallel",
    "auto_tune", "filepath_prefix", "autotune_per_step", "profile",
    "profile_start_step", "profile_stop_step", "init_start_profile",
    "profile_communication", "profile_memory", "layer_scale", "layer_decay",
    "lr_scale", "lr_scale_factor", "remote_save_url", "use_legacy",
    "load_ckpt_format", "swap_config", "monitor_config", "ckpt_config"};

/// Keys of model_config that exist in MindFormers but change nothing that mfc
/// compiles (runtime paging, checkpoint names, dropout, ...).
constexpr StringRef kIgnoredModelKeys[] = {
    "is_dynamic", "auto_map", "use_past_shard", "emb_dropout_prob",
    "fine_grain_interleave", "use_prompt_flash_attention",
    "hidden_dropout_rate", "attention_dropout_rate", "max_position_embedding",
    "max_position_embeddings", "parallel_decoding", "use_rope_slice",
    "use_flash_attention_grad", "fused_rms_norm", "fused_kernel",
    "use_attn_mask_compression", "post_process", "rotary_emb_base",
    "batch_valid_length", "input_sliced_sig", "is_encoder_decoder",
    "attention_probs_dropout_prob",
    // Hugging Face config.json: bookkeeping, or (sliding_window,
    // max_window_layers) unused without use_sliding_window, or
    // (pretraining_tp) the same products summed in slices.
    "torch_dtype", "dtype", "transformers_version", "_name_or_path",
    "pretraining_tp", "max_window_layers", "sliding_window",
    "output_attentions", "output_hidden_states", "return_dict", "torchscript",
    "tokenizer_class",
    // MindFormers' transformer configs: fused kernels and the layout of its
    // own fused checkpoints (mf-run reads Hugging Face's layout).
    "use_contiguous_weight_layout_attention",
    "use_interleaved_weight_layout_mlp", "fused_norm", "apply_rope_fusion",
    "use_fused_rope", "use_fused_swiglu", "bias_swiglu_fusion", "input_layout",
    "sparse_mode", "router_dense_type"};

class SpecReader {
public:
  SpecReader(ConfigDiagnostics &diagnostics, const ConfigNode &root,
             StringRef sourceFile)
      : rootNode_(root), context_{diagnostics, spec_},
        root_(context_, &root, "", root.loc) {
    spec_.sourceFile = sourceFile.str();
    spec_.modelName = llvm::sys::path::stem(sourceFile).str();
  }

  std::optional<ModelSpec> read() {
    readTopLevel();
    readModel();
    readMoe();
    readProcessor();
    readParallel();
    readRecompute();
    readOptimizer();
    readLrSchedule();
    readRunner();
    validate();
    root_.finish();
    if (context_.diagnostics.errorCount() != 0) {
      return std::nullopt;
    }
    return std::move(spec_);
  }

private:
  ConfigDiagnostics &diagnostics() { return context_.diagnostics; }

  /// moe_config's max_router_load: the (token, choice) pairs TopkRouterV2's
  /// tables hold (MoEV2 routes at most this many per group).
  int64_t maxRouterLoad_ = 128 * 1024;
  bool routerTables_ = false; ///< the YAML's MoE layers route with MoEV2

  MapReader section(MapReader &parent, StringRef key) {
    return MapReader(context_, parent.get(key), parent.childPath(key),
                     parent.keyLoc(key));
  }

  void readTopLevel() {
    for (StringRef key : kTrainerOnlyKeys) {
      if (root_.get(key)) {
        // readParallel reads parallel.enable_parallel_optimizer.
        bool shardsOptimizer =
            key == "parallel" && nodeAtPath("parallel.enable_parallel_optimizer");
        spec_.ignoredSections.push_back(
            shardsOptimizer ? "parallel (but enable_parallel_optimizer)"
                            : key.str());
      } else if (root_.present()) {
        root_.ignore({key});
      }
    }
    std::string runMode;
    static const StringRef modes[] = {"train", "finetune", "predict", "eval"};
    if (root_.require("run_mode", "'predict'") &&
        root_.readChoice("run_mode", runMode, modes)) {
      spec_.runMode = llvm::StringSwitch<RunMode>(runMode)
                          .Case("train", RunMode::Train)
                          .Case("finetune", RunMode::Finetune)
                          .Case("predict", RunMode::Predict)
                          .Default(RunMode::Eval);
    }
    readLoadCheckpoint();
    root_.readInt("seed", spec_.seed);
    root_.readBool("use_parallel", spec_.useParallel);
    root_.readInt("micro_batch_interleave_num",
                  spec_.parallel.microBatchInterleaveNum, 1);

    MapReader trainer = section(root_, "trainer");
    trainer.readString("model_name", spec_.modelName);
    trainer.ignore({"type"});
    trainer.finish();

    MapReader context = section(root_, "context");
    int64_t mode = spec_.contextMode;
    context.readInt("mode", mode, 0, 1);
    spec_.contextMode = static_cast<int>(mode);
    context.ignore({"device_target", "max_call_depth", "max_device_memory",
                    "save_graphs", "save_graphs_path", "device_id",
                    "jit_config", "memory_optimize_level", "ascend_config",
                    "enable_graph_kernel", "graph_kernel_flags",
                    "runtime_num_threads", "affinity_cpu_list", "mempool_block_size",
                    "deterministic", "pynative_synchronize"});
    context.finish();

    MapReader wrapper = section(root_, "runner_wrapper");
    wrapper.readBool("use_clip_grad", spec_.runner.useClipGrad);
    wrapper.readFloat("max_grad_norm", spec_.runner.maxGradNorm, 0, INFINITY,
                      /*exclusiveMin=*/true);
    wrapper.ignore({"type", "scale_sense", "enable_check_overflow",
                    "local_norm", "calculate_per_token_loss"});
    wrapper.finish();
  }

  void readModel() {
    MapReader model = section(root_, "model");
    if (!model.present()) {
      root_.require("model", "{model_config: ..., arch: ...}");
      return;
    }
    MapReader arch = section(model, "arch");
    MapReader cfg = section(model, "model_config");
    ModelConfig &config = spec_.model;
    // MindFormers' newest configs name no arch: model_config (merged with
    // the config.json of pretrained_model_dir by loadModelSpec) names it.
    std::string pretrainedModelDir;
    root_.readString("pretrained_model_dir", pretrainedModelDir);
    if (arch.present()) {
      readArch(arch);
      cfg.ignore({"architectures", "model_type"});
    } else if (cfg.get("architectures") || cfg.get("model_type")) {
      readArchitectures(cfg);
    } else {
      model.require("arch", "{type: LlamaForCausalLM}");
    }
    arch.finish();
    if (!cfg.present()) {
      model.require("model_config", "{type: LlamaConfig, ...}");
      return;
    }
    bool gpt2 = config.family == ModelFamily::GPT2;
    StringRef expectedType = gpt2 ? "GPT2Config" : "LlamaConfig";
    static const StringRef configTypes[] = {"LlamaConfig", "GPT2Config"};
    if (cfg.readChoice("type", config.configType, configTypes) &&
        config.configType != expectedType) {
      cfg.error(cfg.valueLoc("type"),
                cfg.childPath("type") + ": " + config.archType + " needs " +
                    expectedType + ", got '" + config.configType + "'");
    }

    readOtherSpellings(cfg);
    for (StringRef key : {"seq_length", "hidden_size", "num_layers",
                          "num_heads", "vocab_size"}) {
      // MindFormers' transformer configs default seq_length to 4096.
      if (key != "seq_length" || !archFromConfig_) {
        cfg.require(key, "8");
      }
    }
    cfg.readPositive("batch_size", config.batchSize, kMaxBatch);
    cfg.readPositive("seq_length", config.seqLength, kMaxSequence);
    cfg.readPositive("hidden_size", config.hiddenSize, kMaxWidth);
    cfg.readPositive("num_layers", config.numLayers, kMaxLayers);
    cfg.readPositive("num_heads", config.numHeads, kMaxWidth);
    cfg.readPositive("vocab_size", config.vocabSize, kMaxVocabulary);
    cfg.readInt("n_kv_heads", config.numKvHeads, 1, kMaxWidth);
    cfg.readInt("head_dim", config.headDimension, 1, kMaxWidth);
    cfg.readBool("qk_layernorm", config.qkLayernorm);
    cfg.readBool("fp32_residual_connection", config.fp32ResidualConnection);
    cfg.readInt("intermediate_size", config.intermediateSize, 1, kMaxFfnWidth);
    cfg.readPositive("multiple_of", config.multipleOf, kMaxWidth);
    cfg.readFloat("ffn_dim_multiplier", config.ffnDimMultiplier, 0.0,
                  /*exclusiveMin=*/true, kMaxFfnRatio);
    cfg.readPositive("expand_ratio", config.expandRatio, kMaxFfnRatio);
    cfg.readFloat("rms_norm_eps", config.rmsNormEps, 0, INFINITY, true);
    cfg.readFloat("layernorm_epsilon", config.layerNormEps, 0, INFINITY, true);
    cfg.readFloat("theta", config.theta, 0, INFINITY, true);
    cfg.readBool("qkv_has_bias", config.qkvHasBias);
    readCheckpointNameOrPath(cfg);
    readTiedEmbeddings(cfg);
    readRefusedSettings(cfg);
    if (gpt2) {
      // GPT-2 always shares the token embedding with the LM head.
      config.tieWordEmbeddings = true;
      config.hiddenAct = "gelu";
      static const StringRef acts[] = {"gelu", "gelu_new", "fast_gelu"};
      cfg.readChoice("hidden_act", config.hiddenAct, acts);
    } else {
      static const StringRef acts[] = {"silu", "swiglu"};
      cfg.readChoice("hidden_act", config.hiddenAct, acts);
    }
    cfg.readDType("compute_dtype", config.computeDtype);
    cfg.readDType("param_init_type", config.paramInitType);
    cfg.readDType("layernorm_compute_type", config.layernormComputeType);
    cfg.readDType("softmax_compute_type", config.softmaxComputeType);
    cfg.readDType("rotary_dtype", config.rotaryDtype);
    readResidualAndEmbeddingTypes(cfg);
    cfg.readBool("use_past", config.usePast);
    cfg.readBool("use_flash_attention", config.useFlashAttention);
    cfg.readBool("use_ring_attention", config.useRingAttention);
    cfg.readPositive("max_decode_length", config.maxDecodeLength, kMaxSequence);
    cfg.readFloat("init_method_std", config.initMethodStd, 0, INFINITY, true);
    cfg.readFloat("initializer_range", config.initMethodStd, 0, INFINITY, true);

    cfg.readInt("bos_token_id", config.bosTokenId);
    cfg.readInt("pad_token_id", config.padTokenId);
    cfg.readInt("ignore_token_id", config.ignoreTokenId);
    readTokenIds(cfg, "eos_token_id", config.eosTokenIds);

    cfg.readBool("do_sample", config.doSample);
    cfg.readInt("top_k", config.topK, 0, kMaxVocabulary);
    cfg.readFloat("top_p", config.topP, 0, 1, /*exclusiveMin=*/true);
    cfg.readFloat("temperature", config.temperature, 0, INFINITY, true);
    cfg.readFloat("repetition_penalty", config.repetitionPenalty, 0, INFINITY,
                  true);

    readRopeExtension(cfg);
    bool qkvConcat = false;
    cfg.readBool("qkv_concat", qkvConcat);
    if (qkvConcat) {
      context_.diagnostics.note(
          cfg.keyLoc("qkv_concat"),
          cfg.childPath("qkv_concat") +
              ": MindFormers then stores wq/wk/wv as one w_qkv (and w1/w3 "
              "as w_gate_hidden) in its checkpoints; the model is the same, "
              "and mf-run splits them back when it reads such a .ckpt");
    }
    readOffset(cfg);
    readInterleave(cfg);
    readPetConfig(cfg);
    readQuantizationConfig(cfg);
    readPagedCache(cfg);
    for (StringRef key : kIgnoredModelKeys) {
      cfg.ignore({key});
    }
    cfg.finish();
    model.finish();
  }

  /// `block_size` / `num_blocks`: MindFormers' PagedAttention. They shape
  /// the KV cache of predict with use_past (elsewhere there is none): a
  /// pool of num_blocks blocks of block_size positions that the sequences
  /// share, each through its block table. Either one alone takes
  /// MindFormers' default for the other (16, 512).
  void readPagedCache(MapReader &cfg) {
    ModelConfig &config = spec_.model;
    if (!cfg.get("block_size") && !cfg.get("num_blocks")) {
      return;
    }
    int64_t blockSize = 16, numBlocks = 512;
    cfg.readPositive("block_size", blockSize, kMaxSequence);
    cfg.readPositive("num_blocks", numBlocks, int64_t(1) << 24);
    if (!config.usePast || spec_.runMode != RunMode::Predict) {
      return;
    }
    config.kvBlockSize = blockSize;
    config.kvNumBlocks = numBlocks;
    if (numBlocks * blockSize < config.seqLength) {
      cfg.error(cfg.get("num_blocks") ? cfg.valueLoc("num_blocks")
                                      : cfg.keyLoc("block_size"),
                cfg.childPath("num_blocks") + ": " + std::to_string(numBlocks) +
                    " blocks of " + std::to_string(blockSize) +
                    " positions hold fewer than one sequence of seq_length " +
                    std::to_string(config.seqLength) + "; set num_blocks >= " +
                    std::to_string(config.blockTableWidth()));
    }
  }

  /// `model.arch.type`. Another architecture is not a misspelling: no
  /// did-you-mean (it would suggest compiling a different model).
  void readArch(MapReader &arch) {
    ModelConfig &config = spec_.model;
    static const StringRef archs[] = {"LlamaForCausalLM", "GPT2LMHeadModel",
                                      "ParallelLlamaForCausalLM"};
    const ConfigNode *archType = arch.get("type");
    if (archType && archType->isScalar() &&
        !llvm::is_contained(archs, archType->scalar)) {
      diagnostics().error(archType->loc,
                          "model.arch.type: '" + archType->scalar +
                              "' is an architecture mfc does not compile yet "
                              "(it compiles LlamaForCausalLM, which covers "
                              "LLaMA, Qwen, Yi, DeepSeek-Coder and the like, "
                              "and GPT2LMHeadModel)");
    } else if (arch.require("type", "LlamaForCausalLM") &&
               arch.readChoice("type", config.archType, archs)) {
      if (config.archType == "ParallelLlamaForCausalLM") {
        // MindFormers' inference-side class of the same model (its
        // quantized predict configs name it).
        context_.diagnostics.note(
            archType->loc, "model.arch.type: ParallelLlamaForCausalLM is read "
                           "as LlamaForCausalLM (MindFormers' inference "
                           "class of the same model)");
        config.archType = "LlamaForCausalLM";
      }
      config.family = config.archType == "GPT2LMHeadModel" ? ModelFamily::GPT2
                                                           : ModelFamily::Llama;
    }
  }

  /// Hugging Face's `architectures` (the first one, as MindFormers takes it)
  /// and `model_type`, which MindFormers' newest configs name the model by.
  /// Their model families set what Hugging Face's classes always do.
  void readArchitectures(MapReader &cfg) {
    struct Architecture {
      StringRef name, modelType;
    };
    static const Architecture known[] = {{"LlamaForCausalLM", "llama"},
                                         {"Qwen2ForCausalLM", "qwen2"},
                                         {"Qwen3ForCausalLM", "qwen3"},
                                         {"Qwen2MoeForCausalLM", "qwen2_moe"},
                                         {"Qwen3MoeForCausalLM", "qwen3_moe"},
                                         {"MixtralForCausalLM", "mixtral"}};
    archFromConfig_ = true;
    ModelConfig &config = spec_.model;
    // MindFormers' transformer configs' defaults (MFModelConfig).
    config.computeDtype = DType::BF16;
    config.seqLength = 4096;
    const ConfigNode *names = cfg.get("architectures");
    const ConfigNode *name = names;
    if (names && names->isSequence() && !names->items.empty()) {
      name = names->items.front().get();
    }
    if (name && !name->isScalar()) {
      cfg.error(name->loc, cfg.childPath("architectures") +
                               ": expected an architecture name or a list of "
                               "them, got " +
                               name->describe());
      return;
    }
    std::string modelType;
    cfg.readString("model_type", modelType);
    const Architecture *found =
        llvm::find_if(known, [&](const Architecture &a) {
          return name ? a.name == name->scalar : a.modelType == modelType;
        });
    if (found == std::end(known)) {
      cfg.error(name ? name->loc : cfg.valueLoc("model_type"),
                (name ? cfg.childPath("architectures") + ": '" + name->scalar
                      : cfg.childPath("model_type") + ": '" + modelType) +
                    "' is an architecture mfc does not compile yet (from a "
                    "Hugging Face config it compiles LlamaForCausalLM, "
                    "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, "
                    "Qwen3MoeForCausalLM and MixtralForCausalLM)");
      return;
    }
    if (name && !modelType.empty() && modelType != found->modelType) {
      cfg.error(cfg.valueLoc("model_type"),
                cfg.childPath("model_type") + ": '" + modelType + "' is not " +
                    found->name + "'s model type ('" + found->modelType + "')");
      return;
    }
    config.family = ModelFamily::Llama;
    config.archType = found->name.str();
    // Hugging Face's Qwen2 always has q/k/v biases; its Qwen3 always
    // normalizes queries and keys per head. Explicit keys still win.
    config.qkvHasBias =
        found->modelType == "qwen2" || found->modelType == "qwen2_moe";
    config.qkLayernorm =
        found->modelType == "qwen3" || found->modelType == "qwen3_moe";
  }

  /// Hugging Face's mixture-of-experts keys (Qwen3-MoE's, Mixtral's): the
  /// routed layers, their experts, k, widths and routing, with
  /// transformers' defaults. What is not built yet is refused at its key.
  void readExperts(MapReader &cfg) {
    ModelConfig &config = spec_.model;
    MoeConfig &moe = config.moe;
    bool qwen2Moe = config.archType == "Qwen2MoeForCausalLM";
    bool qwenMoe = qwen2Moe || config.archType == "Qwen3MoeForCausalLM";
    bool mixtral = config.archType == "MixtralForCausalLM";
    // Experts named by other families' keys (MindFormers' transformer
    // configs, DeepSeek's; moe_config is readMoe's).
    std::vector<StringRef> refused = {"num_moe_experts", "n_routed_experts",
                                      "expert_num"};
    if (!qwenMoe) {
      refused.push_back("num_experts");
    }
    if (!mixtral) {
      refused.push_back("num_local_experts");
    }
    for (StringRef key : refused) {
      int64_t experts = 1;
      cfg.readInt(key, experts, 0);
      if (experts > 1) {
        cfg.error(cfg.valueLoc(key),
                  cfg.childPath(key) + ": " + llvm::Twine(experts) +
                      " experts: mixture-of-experts layers are built for "
                      "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM and "
                      "MixtralForCausalLM only; "
                      "compiling a dense model instead would be a different "
                      "model");
      }
    }
    if (!qwenMoe && !mixtral) {
      return;
    }
    StringRef countKey = mixtral ? "num_local_experts" : "num_experts";
    // transformers' defaults (MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig).
    moe.numExperts = mixtral ? 8 : qwen2Moe ? 60 : 128;
    // 0: dense layers, as transformers builds them; 1: a routed layer of
    // one expert.
    cfg.readInt(countKey, moe.numExperts, 0, kMaxExperts);
    moe.expertsPerToken = mixtral ? 2 : qwen2Moe ? 4 : 8;
    cfg.readInt("num_experts_per_tok", moe.expertsPerToken, 1,
                std::max<int64_t>(1, moe.numExperts));
    moe.mixtralNames = mixtral;
    if (mixtral) {
      // Mixtral's experts are intermediate_size wide; its router always
      // renormalizes the chosen probabilities.
      moe.normTopkProb = true;
      moe.expertWidth = config.ffnHiddenSize();
      if (const ConfigNode *window = cfg.get("sliding_window");
          window && !window->isNull()) {
        std::optional<int64_t> size = parseInteger(*window);
        if (!size || *size < config.seqLength) {
          cfg.error(window->loc,
                    cfg.childPath("sliding_window") + ": " +
                        window->describe() +
                        ": Mixtral attends within this window, and "
                        "sliding-window attention is not built yet; set it "
                        "to null or to at least seq_length (" +
                        llvm::Twine(config.seqLength) + ")");
        }
      }
    } else {
      moe.expertWidth = qwen2Moe ? 1408 : 768;
      cfg.readInt("moe_intermediate_size", moe.expertWidth, 1, kMaxFfnWidth);
      if (qwen2Moe) {
        moe.sharedExpertWidth = 5632;
        cfg.readInt("shared_expert_intermediate_size", moe.sharedExpertWidth, 1,
                    kMaxFfnWidth);
      }
      cfg.readBool("norm_topk_prob", moe.normTopkProb);
      cfg.readInt("decoder_sparse_step", moe.sparseStep, 1, kMaxLayers);
      readLayerList(cfg, "mlp_only_layers", moe.denseLayers);
    }
    // The auxiliary loss joins the loss when output_router_logits asks;
    // router_jitter_noise perturbs training's router. Neither changes what
    // predict computes.
    double auxLoss = 0.001, jitter = 0;
    bool routerLogits = false;
    cfg.readFloat("router_aux_loss_coef", auxLoss, 0, INFINITY);
    cfg.readBool("output_router_logits", routerLogits);
    cfg.readFloat("router_jitter_noise", jitter, 0, INFINITY);
    bool training =
        spec_.runMode == RunMode::Train || spec_.runMode == RunMode::Finetune;
    // transformers adds it to every loss it computes (eval's too).
    if (spec_.runMode != RunMode::Predict && routerLogits) {
      moe.auxLossCoef = auxLoss;
      routerLogitsLoc_ = cfg.valueLoc("output_router_logits");
    }
    if (training && jitter > 0) {
      cfg.error(cfg.valueLoc("router_jitter_noise"),
                cfg.childPath("router_jitter_noise") +
                    ": noise on the router's inputs in training is not built "
                    "yet; set it to 0");
    }
  }

  /// A list of layer indices (mlp_only_layers), each below num_layers.
  void readLayerList(MapReader &cfg, StringRef key, std::vector<int64_t> &out) {
    const ConfigNode *value = cfg.get(key);
    if (!value || value->isNull()) {
      return;
    }
    if (!value->isSequence()) {
      cfg.error(value->loc, cfg.childPath(key) +
                                ": expected a list of layer indices, got " +
                                value->describe());
      return;
    }
    for (const auto &item : value->items) {
      std::optional<int64_t> layer = parseInteger(*item);
      if (!layer || *layer < 0 || *layer >= spec_.model.numLayers) {
        cfg.error(item->loc, cfg.childPath(key) + ": " + item->describe() +
                                 " is not a layer index in [0, " +
                                 llvm::Twine(spec_.model.numLayers) + ")");
        return;
      }
      out.push_back(*layer);
    }
  }

  /// `tie_word_embeddings`, or MindFormers' negated
  /// `untie_embeddings_and_output_weights`; MindFormers' models follow the
  /// first when both are given.
  void readTiedEmbeddings(MapReader &cfg) {
    ModelConfig &config = spec_.model;
    std::optional<bool> untie;
    if (cfg.get("untie_embeddings_and_output_weights")) {
      bool value = false;
      cfg.readBool("untie_embeddings_and_output_weights", value);
      untie = value;
    }
    if (!cfg.get("tie_word_embeddings")) {
      if (untie) {
        config.tieWordEmbeddings = !*untie;
      }
      return;
    }
    cfg.readBool("tie_word_embeddings", config.tieWordEmbeddings);
    if (untie && *untie == config.tieWordEmbeddings) {
      context_.diagnostics.warning(
          cfg.keyLoc("untie_embeddings_and_output_weights"),
          cfg.childPath("untie_embeddings_and_output_weights") + ": " +
              (*untie ? "True" : "False") + " contradicts " +
              cfg.childPath("tie_word_embeddings") +
              ", which MindFormers' models follow; compiled with the "
              "embeddings " +
              (config.tieWordEmbeddings ? "tied" : "untied"));
    }
  }

  /// Settings of Hugging Face and MindFormers' transformer configs that
  /// change the model and that mfc does not build: errors unless they are
  /// off (or, for dropout, unless nothing trains).
  /// MindFormers' residual_dtype (the residual stream's, by default
  /// compute_dtype's) and embedding_init_type (the embedding table's, by
  /// default param_init_type's): a float32 residual stream is
  /// fp32_residual_connection; other differences are not built.
  void readResidualAndEmbeddingTypes(MapReader &cfg) {
    ModelConfig &config = spec_.model;
    DType residual = config.computeDtype;
    cfg.readDType("residual_dtype", residual);
    if (residual == DType::F32 && config.computeDtype != DType::F32) {
      config.fp32ResidualConnection = true;
    } else if (residual != config.computeDtype) {
      cfg.error(cfg.valueLoc("residual_dtype"),
                cfg.childPath("residual_dtype") + ": a residual stream in " +
                    toString(residual) + ", narrower than compute_dtype " +
                    toString(config.computeDtype) +
                    ", is not built yet; leave it out (it is compute_dtype's) "
                    "or set float32");
    }
    DType embedding = config.paramInitType;
    cfg.readDType("embedding_init_type", embedding);
    if (embedding != config.paramInitType) {
      cfg.error(cfg.valueLoc("embedding_init_type"),
                cfg.childPath("embedding_init_type") + ": an embedding table " +
                    "in " + toString(embedding) + " beside parameters in " +
                    toString(config.paramInitType) +
                    " is not built yet; compiling it in param_init_type would "
                    "round it differently; set it to " +
                    toString(config.paramInitType) + " or leave it out");
    }
  }

  void readRefusedSettings(MapReader &cfg) {
    auto refuseTrue = [&](StringRef key, StringRef what) {
      bool on = false;
      cfg.readBool(key, on);
      if (on) {
        cfg.error(cfg.valueLoc(key), cfg.childPath(key) + ": " + what +
                                         " are not built yet; compiling "
                                         "without them would be a different "
                                         "model");
      }
    };
    refuseTrue("add_bias_linear",
               "biases on the attention output and feed-forward projections");
    refuseTrue("mlp_bias", "biases on the feed-forward projections");
    refuseTrue("use_sliding_window", "sliding-window attention layers");
    readExperts(cfg);
    bool gated = true;
    cfg.readBool("gated_linear_unit", gated);
    if (!gated && spec_.model.family == ModelFamily::Llama) {
      cfg.error(cfg.valueLoc("gated_linear_unit"),
                cfg.childPath("gated_linear_unit") +
                    ": a LLaMA feed-forward is gated (SwiGLU); an ungated one "
                    "is not built yet");
    }
    std::string positions = "rope";
    static const StringRef positionKinds[] = {"rope"};
    cfg.readChoice("position_embedding_type", positions, positionKinds);
    bool gpt2 = spec_.model.family == ModelFamily::GPT2;
    std::string norm;
    static const StringRef llamaNorms[] = {"RMSNorm"},
                           gpt2Norms[] = {"LayerNorm"};
    cfg.readChoice("normalization", norm,
                   gpt2 ? llvm::ArrayRef<StringRef>(gpt2Norms) : llamaNorms);
    if (const ConfigNode *layers = cfg.get("layer_types")) {
      for (const auto &layer : layers->items) {
        if (!layer->isScalar() || layer->scalar != "full_attention") {
          cfg.error(layer->loc, cfg.childPath("layer_types") + ": " +
                                    layer->describe() +
                                    " layers are not built yet (mfc builds "
                                    "full_attention)");
          break;
        }
      }
    }
    bool trains =
        spec_.runMode == RunMode::Train || spec_.runMode == RunMode::Finetune;
    for (StringRef key : {"hidden_dropout", "attention_dropout"}) {
      double rate = 0.0;
      cfg.readFloat(key, rate, 0.0, 1.0);
      if (rate > 0 && trains) {
        cfg.error(cfg.valueLoc(key), cfg.childPath(key) + ": dropout is not "
                                                          "built yet; set it "
                                                          "to 0 to train "
                                                          "without it");
      }
    }
  }

  /// `offset`: an int (every stage), one int per pipeline stage, or one
  /// such list per interleave chunk.
  void readOffset(MapReader &cfg) {
    const ConfigNode *value = cfg.get("offset");
    if (!value) {
      return;
    }
    std::string path = cfg.childPath("offset");
    offsetLoc_ = value->loc;
    std::vector<std::vector<int64_t>> &offset = spec_.model.offset;
    if (std::optional<int64_t> each = parseInteger(*value)) {
      offset = {{*each}};
      spec_.model.offsetForEveryStage = true;
      return;
    }
    auto readRow = [&](const ConfigNode &row) {
      offset.emplace_back();
      for (const auto &item : row.items) {
        std::optional<int64_t> shift = parseInteger(*item);
        if (!shift) {
          cfg.error(item->loc, path + ": expected an integer per pipeline "
                                      "stage, got " + item->describe());
          return;
        }
        offset.back().push_back(*shift);
      }
    };
    if (value->isSequence() && !value->items.empty() &&
        value->items.front()->isSequence()) {
      for (const auto &row : value->items) {
        if (!row->isSequence()) {
          cfg.error(row->loc, path + ": expected one list of offsets per "
                                     "interleave chunk, got " +
                                  row->describe());
          return;
        }
        readRow(*row);
      }
      return;
    }
    if (value->isSequence()) {
      readRow(*value);
      return;
    }
    cfg.error(value->loc, path + ": expected an integer, one integer per "
                                 "pipeline stage, or one such list per "
                                 "interleave chunk, got " + value->describe());
  }

  /// `pp_interleave_num`, effective (as in MindFormers) only with
  /// parallel.pipeline_config.pipeline_interleave: True.
  void readInterleave(MapReader &cfg) {
    int64_t interleave = 1;
    cfg.readPositive("pp_interleave_num", interleave, kMaxLayers);
    if (interleave == 1) {
      return;
    }
    interleaveLoc_ = cfg.valueLoc("pp_interleave_num");
    const ConfigNode *flag =
        nodeAtPath("parallel.pipeline_config.pipeline_interleave");
    if (!flag || parseBool(*flag) != std::optional<bool>(true)) {
      context_.diagnostics.warning(
          interleaveLoc_,
          cfg.childPath("pp_interleave_num") + ": " + llvm::Twine(interleave) +
              " is used only with parallel.pipeline_config."
              "pipeline_interleave: True (as in MindFormers); without it each "
              "stage's layers are one chunk");
      return;
    }
    spec_.model.ppInterleaveNum = interleave;
  }

  void readTokenIds(MapReader &cfg, StringRef key, std::vector<int64_t> &out) {
    const ConfigNode *value = cfg.get(key);
    if (!value) {
      return;
    }
    std::vector<const ConfigNode *> nodes;
    if (value->isSequence()) {
      for (const auto &item : value->items) {
        nodes.push_back(item.get());
      }
    } else {
      nodes.push_back(value);
    }
    out.clear();
    for (const ConfigNode *node : nodes) {
      std::optional<int64_t> id = parseInteger(*node);
      if (!id || *id < 0) {
        cfg.error(node->loc, cfg.childPath(key) +
                                 ": expected a token id or a list of them, got " +
                                 node->describe());
        return;
      }
      out.push_back(*id);
    }
  }

  void readPetConfig(MapReader &cfg) {
    MapReader pet = section(cfg, "pet_config");
    if (!pet.present()) {
      return;
    }
    PetConfig &config = spec_.model.pet;
    static const StringRef types[] = {"lora"};
    pet.require("pet_type", "lora");
    pet.readChoice("pet_type", config.petType, types);
    pet.readPositive("lora_rank", config.loraRank, kMaxWidth);
    pet.readFloat("lora_alpha", config.loraAlpha, 0, INFINITY, true);
    pet.readFloat("lora_dropout", config.loraDropout, 0, 1, false);
    pet.readString("target_modules", config.targetModules);
    pet.ignore({"param_init_type", "compute_dtype", "freeze_include",
                "freeze_exclude", "exclude_layers", "lora_a_init",
                "lora_b_init"});
    checkRegex(pet, "target_modules", config.targetModules);
    pet.finish();
  }

  /// MindFormers' quantization_config (mindformers/utils/
  /// quantization_config.py, read by golden-stick): what mfc computes is RTN
  /// int8 weights (W8A16); every other value of a key that changes the
  /// math is refused at the key with what is supported.
  void readQuantizationConfig(MapReader &cfg) {
    MapReader quant = section(cfg, "quantization_config");
    if (!quant.present()) {
      return;
    }
    QuantizationConfig &config = spec_.model.quantization;
    // YAML's None is the string 'None' (MindFormers' configs write it so).
    auto isNone = [](const ConfigNode *value) {
      return !value || value->isNull() ||
             (value->isScalar() &&
              (value->scalar == "None" || value->scalar == "none" ||
               value->scalar == "null"));
    };
    auto refuse = [&](StringRef key, const llvm::Twine &why) {
      quant.error(quant.valueLoc(key), quant.childPath(key) + ": " + why);
    };
    // rtn is golden-stick's RTN (int8 weights); ptq without activation
    // quantization, smoothing or GPTQ quantizes the weights alike (its
    // min-max weight quantizer), int8 per row or int4 per group.
    // smooth_quant is golden-stick's SmoothQuant: int8 weights and int8
    // activations with calibrated per-tensor scales, always smoothed.
    static const StringRef methods[] = {"rtn", "ptq", "smooth_quant"};
    quant.require("quant_method", "rtn");
    quant.readChoice("quant_method", config.quantMethod, methods);
    const bool smoothQuant = config.quantMethod == "smooth_quant";
    static const StringRef weightTypes[] = {"int8", "int4"};
    config.weightDtype = "int8";
    if (quant.readChoice("weight_dtype", config.weightDtype, weightTypes) &&
        config.weightDtype == "int4" && config.quantMethod != "ptq") {
      refuse("weight_dtype", "MindFormers' " + config.quantMethod +
                                 " quantizes to int8 only; int4 weights are "
                                 "quant_method 'ptq' with "
                                 "weight_quant_granularity 'per_group'");
    }
    // int8 activations: golden-stick's W8A8, per token (dynamic scales) or
    // per tensor (static scales from calibration).
    if (const ConfigNode *value = quant.get("activation_dtype");
        !isNone(value)) {
      if (!(value->isScalar() && value->scalar == "int8")) {
        refuse("activation_dtype",
               "expected None or 'int8', got " + value->describe());
      } else if (config.quantMethod == "rtn") {
        refuse("activation_dtype",
               "int8 activations are quant_method 'ptq' or 'smooth_quant'; "
               "rtn quantizes weights only");
      } else {
        config.activationDtype = "int8";
      }
    } else if (smoothQuant) {
      refuse(quant.get("activation_dtype") ? "activation_dtype"
                                           : "quant_method",
             "smooth_quant quantizes the activations to int8 (golden-stick's "
             "SmoothQuant is W8A8); write activation_dtype: 'int8', or "
             "quant_method 'rtn' for int8 weights alone");
    }
    // An int8 KV cache (golden-stick's C8), with any quant_method: its
    // scales come from a calibration.
    if (const ConfigNode *value = quant.get("kvcache_dtype"); !isNone(value)) {
      if (!(value->isScalar() && value->scalar == "int8")) {
        refuse("kvcache_dtype",
               "expected None or 'int8', got " + value->describe());
      } else if (!spec_.model.usePast) {
        refuse("kvcache_dtype",
               "an int8 KV cache needs a KV cache: set use_past: True");
      } else {
        config.kvcacheDtype = "int8";
      }
    }
    // Smoothing: SmoothQuant's per-channel factors, which golden-stick's
    // SmoothQuant always applies and its PTQ with outliers_suppression
    // 'smooth' (the same algorithm).
    bool smoothing = smoothQuant;
    if (const ConfigNode *value = quant.get("outliers_suppression");
        !isNone(value)) {
      if (!(value->isScalar() && value->scalar == "smooth")) {
        refuse("outliers_suppression",
               "expected None or 'smooth', got " + value->describe());
      }
      smoothing = true;
    } else if (smoothQuant && value) {
      context_.diagnostics.warning(
          quant.valueLoc("outliers_suppression"),
          quant.childPath("outliers_suppression") +
              ": smooth_quant smooths whatever this says (golden-stick's "
              "SmoothQuant does); use quant_method 'ptq' for int8 "
              "activations without smoothing");
    }
    // ptq's keys past golden-stick's RTN (MindFormers' PtqConfig).
    static const StringRef recoveries[] = {"none", "gptq"};
    std::string recovery = "none";
    if (quant.readChoice("precision_recovery", recovery, recoveries) &&
        recovery != "none") {
      refuse("precision_recovery",
             "'gptq' is not supported yet; 'none' (round to nearest) is");
    }
    static const StringRef granularities[] = {"per_channel", "per_group"};
    std::string granularity = "per_channel";
    quant.readChoice("weight_quant_granularity", granularity, granularities);
    bool int8Activations = config.activationDtype == "int8";
    if (int8Activations && config.weightDtype == "int4") {
      refuse("weight_dtype",
             "int4 weights with int8 activations need precision_recovery "
             "'gptq' in MindFormers, which mfc does not build; W8A8 takes "
             "weight_dtype 'int8'");
    } else if (int8Activations && granularity != "per_channel") {
      refuse("weight_quant_granularity",
             "int8 weights with int8 activations take 'per_channel' scales "
             "(as golden-stick requires)");
    }
    int64_t groupSize = 0;
    quant.readInt("group_size", groupSize, 0);
    if (granularity == "per_group") {
      // MindFormers accepts 64 and 128; 32 is ggml's Q4_0 block.
      if (groupSize != 32 && groupSize != 64 && groupSize != 128) {
        refuse(quant.get("group_size") ? "group_size"
                                       : "weight_quant_granularity",
               "per_group scales need group_size 64 or 128 (MindFormers' "
               "choices; mfc also takes 32), got " +
                   llvm::Twine(groupSize));
      } else if (config.weightDtype != "int4") {
        refuse("weight_quant_granularity",
               "per_group scales are built for int4 weights; int8 takes "
               "'per_channel'");
      }
      config.groupSize = groupSize;
    } else if (config.weightDtype == "int4") {
      refuse(quant.get("weight_quant_granularity") ? "weight_quant_granularity"
                                                   : "weight_dtype",
             "int4 weights need weight_quant_granularity 'per_group' with "
             "group_size 64 or 128 (or 32)");
    } else if (groupSize != 0) {
      context_.diagnostics.warning(
          quant.valueLoc("group_size"),
          quant.childPath("group_size") +
              ": applies to weight_quant_granularity 'per_group' only; "
              "per_channel has one scale per row (as in MindFormers)");
    }
    // How the activations are quantized: per_token (dynamic: a scale per
    // token at run time) or per_tensor (golden-stick's default: a static
    // scale and zero point from calibration, mf-run --task calibrate).
    // Without int8 activations only the default means anything
    // (MindFormers refuses per_token then).
    static const StringRef actGranularities[] = {"per_tensor", "per_token"};
    std::string actGranularity = "per_tensor";
    if (quant.readChoice("act_quant_granularity", actGranularity,
                         actGranularities)) {
      if (!int8Activations && actGranularity != "per_tensor") {
        refuse("act_quant_granularity",
               "only 'per_tensor' is supported without int8 activations "
               "(activation_dtype None), got '" +
                   actGranularity + "'");
      } else if (smoothQuant && actGranularity != "per_tensor") {
        refuse("act_quant_granularity",
               "smooth_quant's activations are 'per_tensor' (static, "
               "calibrated); per-token int8 activations are quant_method "
               "'ptq'");
      }
    }
    if (int8Activations) {
      config.activationGranularity = actGranularity;
    }
    if (smoothing && !(int8Activations && actGranularity == "per_tensor")) {
      refuse("outliers_suppression",
             "smoothing is built for int8 activations with "
             "act_quant_granularity 'per_tensor' (SmoothQuant), not for " +
                 llvm::Twine(int8Activations ? "per-token activations"
                                             : "float activations"));
    }
    // Golden-stick's SmoothQuant takes its migration strength from
    // algorithm_args (alpha, 0.5 by default); nothing else has arguments.
    if (smoothing) {
      config.smoothAlpha = 0.5;
    }
    if (const ConfigNode *args = quant.get("algorithm_args");
        args && !isNone(args) && !(args->isMap() && args->entries.empty())) {
      if (!smoothing || !args->isMap()) {
        refuse("algorithm_args",
               "round to nearest takes no arguments; expected {} (or "
               "{alpha: A} with smoothing), got " +
                   args->describe());
      } else {
        MapReader algorithm = section(quant, "algorithm_args");
        // (SmoothQuant's migration strength.)
        algorithm.readFloat("alpha", config.smoothAlpha, 0.0, 1.0);
        algorithm.finish();
      }
    }
    // per_channel: static scales per KV head and channel from calibration
    // (golden-stick's default); per_token (dynamic, a scale per cached
    // token) is not built.
    if (const ConfigNode *value = quant.get("kvcache_quant_granularity");
        value && !(value->isScalar() && value->scalar == "per_channel")) {
      refuse("kvcache_quant_granularity",
             config.kvcacheDtype == "int8"
                 ? "only 'per_channel' (calibrated static scales) is "
                   "supported; per-token KV-cache scales are not built yet, "
                   "got " +
                       value->describe()
                 : "only 'per_channel' is supported without an int8 KV "
                   "cache (MindFormers refuses per_token then), got " +
                       value->describe());
    }
    if (const ConfigNode *policies = quant.get("layer_policies");
        policies && !isNone(policies) &&
        !(policies->isMap() && policies->entries.empty())) {
      refuse("layer_policies", "per-layer quantization strategies are not "
                               "supported yet; expected {} or None");
    }
    if (const ConfigNode *modules = quant.get("modules_to_not_convert");
        modules && !isNone(modules)) {
      if (!modules->isSequence()) {
        refuse("modules_to_not_convert",
               "expected a list of layer names, got " + modules->describe());
      }
      for (const auto &item : modules->items) {
        if (!item->isScalar() || item->scalar.empty()) {
          quant.error(item->loc, quant.childPath("modules_to_not_convert") +
                                     ": expected a layer name, got " +
                                     item->describe());
          continue;
        }
        config.modulesToNotConvert.push_back(item->scalar);
      }
    }
    if (spec_.runMode == RunMode::Train || spec_.runMode == RunMode::Finetune) {
      quant.error(quant.loc(), quant.path() +
                                   ": quantized weights are for inference "
                                   "(run_mode predict or eval), not training");
    }
    if (!spec_.model.pet.petType.empty()) {
      quant.error(quant.loc(), quant.path() + ": LoRA adapters on quantized "
                                              "weights are not supported; "
                                              "remove pet_config or this key");
    }
    quant.finish();
  }

  void checkRegex(MapReader &reader, StringRef key, StringRef pattern,
                  SMLoc loc = SMLoc()) {
    // LLVM's (BSD) regcomp copies a repeated atom once per count, so nested
    // counts multiply: (((a{0,100}){0,100}){0,100}){0,100} took 2.5 GB and
    // 20 s. Refuse such patterns before compiling them.
    uint64_t expansion = repetitionExpansion(pattern);
    if (pattern.size() > kMaxRegexLength || expansion > kMaxRegexExpansion) {
      reader.error(loc.isValid() ? loc : reader.valueLoc(key),
                   reader.childPath(key) + ": regex '" + pattern.take_front(80) +
                       (pattern.size() > 80 ? "...'" : "'") +
                       " is too complex (" + llvm::Twine(pattern.size()) +
                       " characters, repetition counts multiplying to " +
                       llvm::Twine(expansion) + "; at most " +
                       llvm::Twine(kMaxRegexLength) + " and " +
                       llvm::Twine(kMaxRegexExpansion) + "); simplify it");
      return;
    }
    std::string error;
    if (!llvm::Regex(pattern).isValid(error)) {
      reader.error(loc.isValid() ? loc : reader.valueLoc(key),
                   reader.childPath(key) + ": invalid regex '" + pattern +
                       "': " + error);
    }
  }

  /// Other spellings of model_config keys (Hugging Face's, and those of
  /// MindFormers' transformer configs) are read as mfc's key; in a config
  /// that names model.arch, with a note.
  void readOtherSpellings(MapReader &cfg) {
    for (const KeySpelling &spelling : modelKeySpellings()) {
      if (cfg.alias(spelling.canonical, spelling.other) && !archFromConfig_) {
        context_.diagnostics.note(cfg.keyLoc(spelling.canonical),
                                  cfg.childPath(spelling.canonical) +
                                      ": read as " + spelling.canonical +
                                      " (another name for it)");
      }
    }
  }

  /// `extend_method` (MindFormers' RoPE context extension) with its
  /// `scaling_factor`, read as MindFormers' FreqsMgr reads them: NTK
  /// multiplies theta by the factor; PI (positions / factor) and "linear"
  /// (scaling_factor.factor) divide every frequency; LLAMA3 (a map of
  /// factor, low_freq_factor, high_freq_factor and
  /// original_max_position_embeddings) divides the low frequencies, keeps
  /// the high ones and ramps between. validate() applies them once the
  /// head dim is known.
  void readRopeExtension(MapReader &cfg) {
    if (cfg.get("rope_scaling")) {
      readRopeScaling(cfg);
      return;
    }
    std::string method = "None";
    static const StringRef methods[] = {"None",   "PI",   "NTK",        "linear",
                                        "LLAMA3", "YARN", "DYNAMIC_NTK"};
    if (!cfg.readChoice("extend_method", method, methods) || method == "None") {
      cfg.ignore({"scaling_factor"});
      return;
    }
    if (method == "YARN" || method == "DYNAMIC_NTK") {
      cfg.error(cfg.valueLoc("extend_method"),
                cfg.childPath("extend_method") + ": RoPE extension '" + method +
                    "' is not supported yet (mfc implements PI, NTK, linear "
                    "and LLAMA3); compiling without it would be a different "
                    "model");
      cfg.ignore({"scaling_factor"});
      return;
    }
    ropeExtension_ = method;
    extendMethodLoc_ = cfg.valueLoc("extend_method");
    bool map = method == "linear" || method == "LLAMA3";
    if (!cfg.require("scaling_factor", map ? "{factor: 8.0}" : "4.0")) {
      return;
    }
    if (!map) {
      cfg.readFloat("scaling_factor", ropeFactor_, 0, /*exclusiveMin=*/true);
      return;
    }
    MapReader factors = section(cfg, "scaling_factor");
    readScalingFactors(factors, /*llama3=*/method == "LLAMA3");
  }

  /// Hugging Face's `rope_scaling`: {rope_type (or type), factor, ...},
  /// the same extensions as extend_method and scaling_factor.
  void readRopeScaling(MapReader &cfg) {
    MapReader scaling = section(cfg, "rope_scaling");
    if (cfg.get("extend_method")) {
      cfg.error(cfg.keyLoc("extend_method"),
                cfg.childPath("extend_method") + ": given with " +
                    cfg.childPath("rope_scaling") +
                    ", which says the same; keep one of them");
    }
    cfg.ignore({"extend_method", "scaling_factor"});
    std::string type;
    static const StringRef types[] = {"default", "linear", "llama3",
                                      "dynamic", "yarn",   "longrope"};
    scaling.alias("rope_type", "type");
    if (!scaling.require("rope_type", "llama3") ||
        !scaling.readChoice("rope_type", type, types)) {
      return;
    }
    scaling.ignore({"factor", "low_freq_factor", "high_freq_factor",
                    "original_max_position_embeddings", "attention_factor",
                    "beta_fast", "beta_slow", "short_factor", "long_factor",
                    "mscale", "mscale_all_dim"});
    if (type == "default") {
      scaling.finish();
      return;
    }
    if (type != "linear" && type != "llama3") {
      scaling.error(scaling.valueLoc("rope_type"),
                    scaling.childPath("rope_type") + ": RoPE scaling '" + type +
                        "' is not supported yet (mfc implements linear and "
                        "llama3); compiling without it would be a different "
                        "model");
      return;
    }
    ropeExtension_ = type == "linear" ? "linear" : "LLAMA3";
    extendMethodLoc_ = scaling.valueLoc("rope_type");
    readScalingFactors(scaling, /*llama3=*/type == "llama3");
  }

  /// `factor` (LLAMA3's at least 1, linear's positive) and, for LLAMA3,
  /// the ramp's factors and original context.
  void readScalingFactors(MapReader &factors, bool llama3) {
    factors.require("factor", "8.0");
    factors.readFloat("factor", ropeFactor_, llama3 ? 1.0 : 0.0,
                      /*exclusiveMin=*/!llama3);
    if (llama3) {
      readLlama3Factors(factors);
    }
    factors.finish();
  }

  void readLlama3Factors(MapReader &factors) {
    for (StringRef key : {"low_freq_factor", "high_freq_factor",
                          "original_max_position_embeddings"}) {
      factors.require(key, "1.0");
    }
    factors.readFloat("low_freq_factor", llama3LowFreqFactor_, 0, true);
    factors.readFloat("high_freq_factor", llama3HighFreqFactor_, 0, true);
    factors.readFloat("original_max_position_embeddings",
                      llama3OriginalContext_, 0, true);
    if (llama3LowFreqFactor_ && llama3HighFreqFactor_ &&
        *llama3LowFreqFactor_ == *llama3HighFreqFactor_) {
      factors.error(factors.valueLoc("high_freq_factor"),
                    factors.childPath("high_freq_factor") +
                        ": must differ from low_freq_factor (the ramp "
                        "between them divides by their difference)");
    }
  }

  /// The RoPE extension's effect for head dim `dim`: theta (NTK) or a scale
  /// per inverse frequency.
  void applyRopeExtension(int64_t dim) {
    ModelConfig &model = spec_.model;
    if (ropeExtension_ == "NTK") {
      model.theta *= *ropeFactor_;
      return;
    }
    model.ropeFrequencyScale.assign(static_cast<size_t>(dim / 2),
                                    1.0 / *ropeFactor_);
    if (ropeExtension_ != "LLAMA3") {
      return; // PI, linear: every frequency divided by the factor
    }
    double lowWavelength = *llama3OriginalContext_ / *llama3LowFreqFactor_;
    double highWavelength = *llama3OriginalContext_ / *llama3HighFreqFactor_;
    for (int64_t i = 0; i < dim / 2; ++i) {
      double frequency = 1.0 / std::pow(model.theta, 2.0 * i / dim);
      double wavelength = 2 * M_PI / frequency;
      double &scale = model.ropeFrequencyScale[i];
      if (wavelength < highWavelength) {
        scale = 1.0;
      } else if (wavelength <= lowWavelength) {
        double smooth = (*llama3OriginalContext_ / wavelength -
                         *llama3LowFreqFactor_) /
                        (*llama3HighFreqFactor_ - *llama3LowFreqFactor_);
        scale = (1 - smooth) / *ropeFactor_ + smooth;
      }
    }
  }

  /// MindFormers' moe_config (r1.5.0 MoEConfig) under LlamaForCausalLM, as
  /// its LLaMA decoder uses it: with use_past (predict) MoEInfer, dropless;
  /// otherwise MoEV2 with TopkRouterV2, a capacity per expert. Keys that
  /// change the math and are not built are refused at their location; keys
  /// its LLaMA never reads get a note.
  void readMoe() {
    MapReader moe = section(root_, "moe_config");
    if (!moe.present()) {
      return;
    }
    ModelConfig &model = spec_.model;
    MoeConfig &config = model.moe;
    int64_t experts = 1;
    moe.readInt("expert_num", experts, 1, kMaxExperts);
    if (experts <= 1) {
      return; // one expert: MindFormers builds the dense model
    }
    if (config.numExperts > 0 || model.family != ModelFamily::Llama) {
      moe.error(moe.valueLoc("expert_num"),
                "moe_config.expert_num: " + llvm::Twine(experts) +
                    " experts for a model that " +
                    (config.numExperts > 0
                         ? "its model folder's config.json already routes"
                         : "is not LlamaForCausalLM") +
                    "; MindFormers routes LlamaForCausalLM's feed-forward "
                    "layers with moe_config");
      return;
    }
    config.numExperts = experts;
    config.mixtralNames = true; // MindFormers' Mixtral is this model
    config.expertWidth = model.ffnHiddenSize();
    config.expertsPerToken = 1;
    moe.readInt("num_experts_chosen", config.expertsPerToken, 1, experts);
    bool normalize = true;
    moe.readBool("norm_topk_prob", normalize);
    config.normTopkProb = normalize && config.expertsPerToken > 1;
    config.normEpsilon = 1e-9;
    moe.readFloat("routed_scaling_factor", config.routedScalingFactor, 0,
                  INFINITY, /*exclusiveMin=*/true);
    std::string routerType = "float32";
    static const StringRef routerTypes[] = {"float32", "float16", "bfloat16"};
    moe.readChoice("router_dense_type", routerType, routerTypes);
    // MindFormers maps float16 to float32 (moe.py's dtype_map).
    config.routerType = routerType == "bfloat16" ? DType::BF16 : DType::F32;

    bool inference = spec_.runMode == RunMode::Predict;
    double capacityFactor = 1.1;
    moe.readFloat("capacity_factor", capacityFactor, -INFINITY, INFINITY);
    std::string policy = "TopkRouterV1";
    static const StringRef policies[] = {"TopkRouterV1", "TopkRouterV2"};
    moe.readChoice("routing_policy", policy, policies);
    moe.readBool("enable_sdrop", config.sequenceDropOrder);
    if (inference && model.usePast) {
      // MoEInfer: plain top-k; the scaling factor only without renormalizing.
      config.scaleNormalized = false;
    } else if (inference) {
      moe.error(moe.keyLoc("expert_num"),
                "moe_config with use_past: False in predict: MindFormers then "
                "routes the padded sequence through MoEV2's capacity, which "
                "mfc builds for training and eval only; set "
                "model.model_config.use_past: True (MoEInfer, dropless)");
    } else if (policy != "TopkRouterV2") {
      moe.error(moe.get("routing_policy") ? moe.valueLoc("routing_policy")
                                          : moe.keyLoc("expert_num"),
                "moe_config.routing_policy: MindFormers' LLaMA trains and "
                "evaluates a mixture of experts with TopkRouterV2 only (its "
                "MoEV2 refuses '" +
                    policy + "'); set routing_policy: \"TopkRouterV2\"");
    } else {
      routerTables_ = true;
      config.capacityFactor = capacityFactor; // <= 0: dropless
      bool overlap = false;
      int64_t degree = 2;
      moe.readBool("comp_comm_parallel", overlap);
      moe.readPositive("comp_comm_parallel_degree", degree, kMaxParallel);
      config.capacityMultiple = overlap ? degree : 1;
    }

    // Built otherwise, or not at all: refused when they are on.
    auto refuseTrue = [&](StringRef key, StringRef what) {
      bool on = false;
      moe.readBool(key, on);
      if (on) {
        moe.error(moe.valueLoc(key), "moe_config." + key + ": " + what +
                                         " is not built yet; compiling "
                                         "without it would route otherwise");
      }
    };
    refuseTrue("use_gating_sigmoid", "a sigmoid router");
    refuseTrue("balance_via_topk_bias", "the top-k bias of aux-free balancing");
    refuseTrue("use_gmm", "MoEV3 (grouped matmul with AllToAllV)");
    // LlamaFeedForwardWithMoE: one dense SwiGLU intermediate_size x
    // shared_expert_num wide beside the routed experts (MindFormers' Qwen2-MoE:
    // Hugging Face's Qwen2-MoE names), gated by a sigmoid if asked.
    double shared = 0;
    moe.readFloat("shared_expert_num", shared, 0, kMaxExperts);
    if (shared != std::floor(shared)) {
      moe.error(moe.valueLoc("shared_expert_num"),
                "moe_config.shared_expert_num: expected a whole number of "
                "shared experts, got " +
                    std::to_string(shared));
    } else if (shared > 0) {
      config.sharedExpertWidth =
          model.ffnHiddenSize() * static_cast<int64_t>(shared);
      config.mixtralNames = false;
      config.sharedExpertGated = false;
      moe.readBool("use_shared_expert_gating", config.sharedExpertGated);
    }
    std::string topkMethod = "greedy";
    static const StringRef topkMethods[] = {"greedy", "group_limited_greedy",
                                            "noaux_tc"};
    if (moe.readChoice("topk_method", topkMethod, topkMethods) &&
        topkMethod != "greedy") {
      moe.error(moe.valueLoc("topk_method"),
                "moe_config.topk_method: '" + topkMethod +
                    "' masks expert groups before the top-k, which is not "
                    "built yet; use \"greedy\"");
    }
    int64_t expertModelParallel = 1;
    moe.readInt("expert_model_parallel", expertModelParallel, 1, kMaxParallel);
    if (expertModelParallel > 1) {
      moe.error(moe.valueLoc("expert_model_parallel"),
                "moe_config.expert_model_parallel: splitting experts over "
                "ranks is not built yet; leave it out");
    }
    moe.readPositive("max_router_load", maxRouterLoad_, int64_t(1) << 40);
    // Read by MindFormers' LLaMA to no effect: its MoE layers' extra
    // losses are never added to the loss, and these belong to other models.
    for (StringRef key :
         {"aux_loss_factor", "aux_loss_types", "aux_loss_factors",
          "z_loss_factor", "moe_intermediate_size", "first_k_dense_replace"}) {
      if (moe.get(key)) {
        context_.diagnostics.note(
            moe.keyLoc(key),
            "moe_config." + key +
                ": MindFormers' LLaMA does not use it (its MoE layers' extra "
                "losses never join the loss; the experts are "
                "intermediate_size wide); ignored as MindFormers does");
        moe.ignore({key});
      }
    }
    // Same routing, another kernel or layout, or diagnostics.
    moe.ignore({"use_shared_expert_gating",
                "use_fused_ops_topkrouter",
                "group_wise_a2a",
                "use_allgather_dispatcher",
                "moe_shared_expert_overlap",
                "callback_moe_droprate",
                "save_token_distribution",
                "cur_layer",
                "enable_cold_hot_expert",
                "update_step",
                "hot_expert_num",
                "cold_token_percent",
                "moe_module_name",
                "expert_group_size",
                "npu_nums_per_device",
                "enable_deredundency",
                "enable_gmm_safe_tokens",
                "use_fused_ops_permute",
                "topk_group",
                "n_group",
                "topk_bias_update_rate"});
    moe.finish();
  }

  /// `load_checkpoint`: mf-run's weights when it is given no --weights
  /// (a safetensors file, a Hugging Face folder or index, a MindSpore
  /// .ckpt), relative to the YAML.
  void readLoadCheckpoint() {
    std::string file;
    root_.readString("load_checkpoint", file);
    if (file.empty()) {
      return;
    }
    spec_.loadCheckpoint = resolveBesideConfig(file);
    if (!llvm::sys::fs::exists(spec_.loadCheckpoint)) {
      context_.diagnostics.warning(
          root_.valueLoc("load_checkpoint"),
          "load_checkpoint: '" + spec_.loadCheckpoint +
              "' does not exist; mf-run will look for it there unless it is "
              "given --weights");
    }
  }

  /// model_config.checkpoint_name_or_path: MindFormers' weights when
  /// load_checkpoint is empty. A path is mf-run's default weights as
  /// load_checkpoint is; a name of MindFormers' model hub ('llama2_7b')
  /// cannot be downloaded here, which a note says.
  void readCheckpointNameOrPath(MapReader &cfg) {
    std::string value;
    cfg.readString("checkpoint_name_or_path", value);
    if (value.empty() || !spec_.loadCheckpoint.empty()) {
      return;
    }
    SMLoc loc = cfg.valueLoc("checkpoint_name_or_path");
    std::string path = resolveBesideConfig(value);
    StringRef name(value);
    bool looksLikePath = name.contains('/') || name.contains('\\') ||
                         name.ends_with(".ckpt") ||
                         name.ends_with(".safetensors");
    if (llvm::sys::fs::exists(path)) {
      spec_.loadCheckpoint = path;
    } else if (looksLikePath) {
      context_.diagnostics.warning(
          loc, cfg.childPath("checkpoint_name_or_path") + ": '" + path +
                   "' does not exist; mf-run will look for it there unless "
                   "it is given --weights");
      spec_.loadCheckpoint = path;
    } else {
      context_.diagnostics.note(
          loc, cfg.childPath("checkpoint_name_or_path") + ": '" + value +
                   "' names a model of MindFormers' hub, which mfc does not "
                   "download; give mf-run --weights (a safetensors file, a "
                   "Hugging Face folder or a .ckpt) or set load_checkpoint");
    }
  }

  /// `path` relative to the YAML's folder, absolute and without dots.
  std::string resolveBesideConfig(const std::string &path) const {
    return mfc::resolveBesideConfig(path, spec_.sourceFile);
  }

  /// Without processor.tokenizer, MindFormers' newest configs load the
  /// tokenizer of pretrained_model_dir, as Hugging Face's AutoTokenizer.
  void tokenizerFromPretrainedModelDir() {
    const ConfigNode *dir = root_.get("pretrained_model_dir");
    if (!dir || !dir->isScalar() || dir->scalar.empty()) {
      return;
    }
    std::string folder = resolveBesideConfig(dir->scalar);
    for (StringRef file : {"tokenizer.json", "tokenizer.model", "vocab.json"}) {
      llvm::SmallString<256> path(folder);
      llvm::sys::path::append(path, file);
      if (llvm::sys::fs::exists(path)) {
        spec_.tokenizerPath = folder;
        return;
      }
    }
  }

  /// `processor.tokenizer`: the file mf-run reads text with, relative to
  /// the YAML (tokenizer_file, or vocab_file when it is a tokenizer.json or
  /// a Hugging Face folder). Its other keys configure MindSpore's Python
  /// tokenizer classes and are not read.
  void readProcessor() {
    MapReader processor = section(root_, "processor");
    MapReader tokenizer = section(processor, "tokenizer");
    if (!tokenizer.present()) {
      tokenizerFromPretrainedModelDir();
      return;
    }
    for (auto [key, out] : {std::pair("chat_template", &spec_.chatTemplate),
                            std::pair("bos_token", &spec_.bosToken),
                            std::pair("eos_token", &spec_.eosToken),
                            std::pair("type", &spec_.tokenizerClass)}) {
      const ConfigNode *value = tokenizer.get(key);
      if (value && value->isScalar()) {
        *out = value->scalar;
      }
    }
    std::string key = tokenizer.get("tokenizer_file") ? "tokenizer_file"
                      : tokenizer.get("vocab_file")   ? "vocab_file"
                                                      : "";
    if (key.empty()) {
      tokenizerFromPretrainedModelDir();
      return;
    }
    std::string file;
    tokenizer.readString(key, file);
    SMLoc loc = tokenizer.valueLoc(key);
    std::string path = tokenizer.childPath(key);
    llvm::SmallString<256> resolved(StringRef(resolveBesideConfig(file)));
    StringRef name = llvm::sys::path::filename(resolved);
    bool folder = llvm::sys::fs::is_directory(resolved);
    if (!folder && !name.ends_with(".json")) {
      // vocab.json + merges.txt or a SentencePiece .model: a tokenizer.json
      // beside it describes the same tokenizer.
      llvm::SmallString<256> beside = llvm::sys::path::parent_path(resolved);
      llvm::sys::path::append(beside, "tokenizer.json");
      if (llvm::sys::fs::exists(beside)) {
        context_.diagnostics.note(loc, path + ": mf-run reads the "
                                            "tokenizer.json beside it");
        spec_.tokenizerPath = beside.str().str();
        return;
      }
    }
    if (!folder && !name.ends_with(".json") && !name.ends_with(".model")) {
      context_.diagnostics.warning(
          loc, path + ": '" + name +
                   "' is not a tokenizer mf-run reads (Hugging Face "
                   "tokenizer.json, vocab.json + merges.txt, SentencePiece "
                   ".model); set tokenizer_file, or give mf-run --tokenizer");
      return;
    }
    if (name == "vocab.json" && spec_.tokenizerClass != "GPT2Tokenizer" &&
        spec_.tokenizerClass != "Qwen2Tokenizer") {
      context_.diagnostics.warning(
          loc, path + ": a vocab.json tokenizer of type '" +
                   spec_.tokenizerClass +
                   "'; mf-run reads vocab.json + merges.txt as GPT2Tokenizer "
                   "and Qwen2Tokenizer do, unless a tokenizer_config.json "
                   "beside them names another class");
    }
    if (!llvm::sys::fs::exists(resolved)) {
      context_.diagnostics.warning(loc, path + ": '" + resolved +
                                            "' does not exist; mf-run will "
                                            "look for it there (or give "
                                            "mf-run --tokenizer)");
    }
    spec_.tokenizerPath = resolved.str().str();
  }

  void readParallel() {
    MapReader parallel = section(root_, "parallel_config");
    ParallelConfig &config = spec_.parallel;
    parallel.readPositive("data_parallel", config.dataParallel, kMaxParallel);
    parallel.readPositive("model_parallel", config.modelParallel, kMaxParallel);
    parallel.readPositive("pipeline_stage", config.pipelineStage, kMaxParallel);
    parallel.readPositive("context_parallel", config.contextParallel, kMaxParallel);
    parallel.readPositive("expert_parallel", config.expertParallel, kMaxParallel);
    parallel.readPositive("micro_batch_num", config.microBatchNum, kMaxBatch);
    parallel.readPositive("gradient_aggregation_group",
                          config.gradientAggregationGroup);
    parallel.readBool("use_seq_parallel", config.useSeqParallel);
    parallel.readBool("vocab_emb_dp", config.vocabEmbDp);
    bool optimizerShard = false;
    parallel.readBool("optimizer_shard", optimizerShard);
    const ConfigNode *enableShard =
        nodeAtPath("parallel.enable_parallel_optimizer");
    std::optional<bool> shardEnabled =
        enableShard ? parseBool(*enableShard) : std::nullopt;
    if (optimizerShard && !shardEnabled.value_or(false)) {
      context_.diagnostics.warning(
          locOfKey("parallel_config.optimizer_shard"),
          std::string("parallel_config.optimizer_shard: the optimizer state is "
                      "sharded by parallel.enable_parallel_optimizer: True (as "
                      "in MindFormers), which this config ") +
              (enableShard ? "sets to False" : "does not set"));
    }
    static const StringRef algorithms[] = {"colossalai_cp", "ulysses_cp",
                                           "hybrid_cp"};
    bool knownAlgorithm =
        !parallel.get("context_parallel_algo") ||
        parallel.readChoice("context_parallel_algo", config.contextParallelAlgo,
                            algorithms);
    int64_t ulyssesDegree = 1;
    parallel.readPositive("ulysses_degree_in_cp", ulyssesDegree, kMaxParallel);
    parallel.ignore({"mem_coeff"});
    parallel.finish();
    if (ulyssesDegree > 1 && config.contextParallelAlgo != "hybrid_cp") {
      // MindFormers warns the same (transformer_config.py).
      context_.diagnostics.warning(
          locOfKey("parallel_config.ulysses_degree_in_cp"),
          "parallel_config.ulysses_degree_in_cp: " +
              llvm::Twine(ulyssesDegree).str() +
              " takes effect only with context_parallel_algo: hybrid_cp "
              "(as in MindFormers); ignored");
    }
    int64_t devices = config.dataParallel * config.modelParallel *
                      config.pipelineStage * config.contextParallel;
    std::string unsharded = whyNotTensorParallel();
    // What is built: data parallelism in training (mf-train-step averages
    // gradients and the loss, each rank reads its part of the batch) and
    // tensor parallelism (mf-partition), on MPI ranks.
    if (config.dataParallel > 1 && whyNotDataParallel().empty()) {
      spec_.shardedDataParallel = config.dataParallel;
    }
    if (config.modelParallel > 1 && unsharded.empty()) {
      spec_.shardedModelParallel = config.modelParallel;
      // Quantized weights split as their float ones do, their scales
      // with them (mf-quantize-weights); a row-parallel rank quantizes its
      // block of each token (golden-stick's DynamicQuantCell, whose
      // smooth_scale splits with the columns).
    }
    if (config.pipelineStage > 1 && whyNotPipelineParallel().empty()) {
      spec_.shardedPipelineStages = config.pipelineStage;
    }
    validateExpertParallel();
    if (config.contextParallel > 1 && whyNotContextParallel().empty() &&
        knownAlgorithm) {
      spec_.shardedContextParallel = config.contextParallel;
      validateContextParallel();
    }
    int64_t ranks = spec_.dataAxisRanks() * spec_.shardedModelParallel *
                    spec_.shardedPipelineStages * spec_.shardedContextParallel;
    // MindSpore's parallel context, otherwise the trainer's: the one key
    // that changes the layout mfc builds.
    if (const ConfigNode *shard = nodeAtPath("parallel.enable_parallel_optimizer")) {
      std::optional<bool> enabled = parseBool(*shard);
      if (!enabled) {
        diagnostics().error(locOfKey("parallel.enable_parallel_optimizer"),
                            "parallel.enable_parallel_optimizer: expected True "
                            "or False, got " + shard->describe());
      } else if (*enabled && (spec_.shardedDataParallel > 1 ||
                              spec_.shardedContextParallel > 1)) {
        // Over data_parallel x context_parallel, as MindFormers' dp x cp.
        spec_.parallelOptimizer = true;
      } else if (*enabled) {
        context_.diagnostics.warning(
            locOfKey("parallel.enable_parallel_optimizer"),
            "parallel.enable_parallel_optimizer: the optimizer state is not "
            "sharded: " +
                std::string(config.dataParallel > 1
                                ? "the program does not run data_parallel ranks"
                                : "data_parallel (and context_parallel) is 1, "
                                  "there are no data-parallel ranks to shard "
                                  "it over"));
      }
    }
    // Settings of context parallelism, in a program without it.
    if (spec_.shardedContextParallel == 1 && spec_.model.useRingAttention) {
      context_.diagnostics.warning(
          locOfKey("model.model_config.use_ring_attention"),
          "model.model_config.use_ring_attention: ring attention passes the "
          "context-parallel ranks' keys and values; this program runs no "
          "context_parallel ranks, so it changes nothing");
    }
    // Settings of tensor parallelism, in a program without it.
    if (spec_.shardedModelParallel == 1) {
      if (config.useSeqParallel) {
        context_.diagnostics.warning(
            locOfKey("parallel_config.use_seq_parallel"),
            "parallel_config.use_seq_parallel: sequence parallelism splits "
            "the tensor-parallel ranks' activations; this program runs no "
            "model_parallel ranks, so it changes nothing");
      }
      if (!config.vocabEmbDp) {
        context_.diagnostics.warning(
            locOfKey("parallel_config.vocab_emb_dp"),
            "parallel_config.vocab_emb_dp: False splits the embedding over "
            "the model_parallel ranks; this program runs none, so it changes "
            "nothing");
      }
    }
    if (spec_.parallel.microBatchInterleaveNum > 1) {
      context_.diagnostics.warning(
          locOfKey("micro_batch_interleave_num"),
          "micro_batch_interleave_num: MindSpore splits each batch into " +
              llvm::Twine(spec_.parallel.microBatchInterleaveNum).str() +
              " interleaved parts to overlap model-parallel communication "
              "with compute; mfc runs the batch whole (the same values, no "
              "overlap)");
    }
    if (ranks > 1) {
      if (devices > ranks) {
        context_.diagnostics.warning(
            parallel.loc(),
            "parallel_config asks for " + llvm::Twine(devices).str() +
                " devices; the program is compiled for " +
                llvm::Twine(ranks).str() + " ranks (data_parallel " +
                llvm::Twine(spec_.shardedDataParallel).str() +
                " x model_parallel " +
                llvm::Twine(spec_.shardedModelParallel).str() +
                " x pipeline_stage " +
                llvm::Twine(spec_.shardedPipelineStages).str() +
                (spec_.shardedContextParallel > 1
                     ? " x context_parallel " +
                           llvm::Twine(spec_.shardedContextParallel).str()
                     : std::string()) +
                "): " + unbuiltDegrees(config));
      }
      if (spec_.shardedModelParallel > 1 && !config.vocabEmbDp) {
        // As MindFormers' LLaMA: a vocabulary the ranks do not divide stays
        // replicated.
        if (spec_.model.vocabSize % spec_.shardedModelParallel == 0) {
          spec_.vocabParallel = true;
        } else {
          context_.diagnostics.warning(
              locOfKey("parallel_config.vocab_emb_dp"),
              "vocab_emb_dp: False: vocab_size " +
                  llvm::Twine(spec_.model.vocabSize).str() +
                  " does not divide by model_parallel " +
                  llvm::Twine(spec_.shardedModelParallel).str() +
                  ", so the embedding, lm_head and loss stay replicated on "
                  "every rank (as MindFormers does; pad the vocabulary to a "
                  "multiple of model_parallel to split it)");
        }
      }
    } else if (devices > 1) {
      context_.diagnostics.warning(
          parallel.loc(),
          "parallel_config asks for " + llvm::Twine(devices).str() +
              " devices (data_parallel " + llvm::Twine(config.dataParallel).str() +
              ", model_parallel " + llvm::Twine(config.modelParallel).str() +
              ", pipeline_stage " + llvm::Twine(config.pipelineStage).str() +
              ", context_parallel " + llvm::Twine(config.contextParallel).str() +
              "); the program is compiled for one device (" +
              unbuiltDegrees(config) +
              "): it runs one data-parallel rank's batch, so a training step "
              "sees runner_config.batch_size sequences, not batch_size x "
              "data_parallel");
    }
  }

  /// Each degree above 1 that the compiled program does not run, and why.
  std::string unbuiltDegrees(const ParallelConfig &config) const {
    llvm::SmallVector<std::string> reasons;
    auto degree = [](StringRef key, int64_t value) {
      return (key + " " + llvm::Twine(value)).str();
    };
    if (config.dataParallel > 1 && spec_.shardedDataParallel == 1) {
      reasons.push_back(degree("data_parallel", config.dataParallel) +
                        " is built " + whyNotDataParallel());
    }
    if (config.modelParallel > 1 && spec_.shardedModelParallel == 1) {
      reasons.push_back(degree("model_parallel", config.modelParallel) +
                        " is built " + whyNotTensorParallel());
    }
    if (config.pipelineStage > 1 && spec_.shardedPipelineStages == 1) {
      reasons.push_back(degree("pipeline_stage", config.pipelineStage) +
                        " is built " + whyNotPipelineParallel());
    }
    if (config.contextParallel > 1 && spec_.shardedContextParallel == 1) {
      std::string why = whyNotContextParallel();
      reasons.push_back(
          degree("context_parallel", config.contextParallel) + " is built " +
          (why.empty() ? "with a known context_parallel_algo" : why));
    }
    return llvm::join(reasons, "; ");
  }

  /// Why context_parallel does not split the sequences (empty when it
  /// does).
  std::string whyNotContextParallel() const {
    if (!spec_.useParallel) {
      return "only with use_parallel: True, as in MindFormers";
    }
    if (spec_.runMode == RunMode::Predict) {
      return "for training and eval only so far (predict runs every "
             "position on each rank)";
    }
    return "";
  }

  /// context_parallel c in training and eval: each rank holds seq_length /
  /// c positions of every sequence. colossalai_cp (MindFormers' default):
  /// its queries attend to every rank's keys and values, gathered (as
  /// MindSpore's FlashAttention splits the query's sequence and not the
  /// keys'); ulysses_cp: attention trades the positions for a block of the
  /// heads. What is not built is an error at its key; the ring
  /// (use_ring_attention) is a layout warning: the same split and math,
  /// other messages.
  void validateContextParallel() {
    const ParallelConfig &config = spec_.parallel;
    const ModelConfig &model = spec_.model;
    int64_t cp = config.contextParallel;
    std::string key = "parallel_config.context_parallel";
    std::string at = key + ": " + std::to_string(cp);
    auto refuse = [&](const std::string &why) {
      diagnostics().error(locOfKey(key), at + ": " + why);
    };
    bool ulysses = config.contextParallelAlgo == "ulysses_cp";
    if (config.contextParallelAlgo == "hybrid_cp") {
      diagnostics().error(
          locOfKey("parallel_config.context_parallel_algo"),
          "parallel_config.context_parallel_algo: hybrid_cp (Ulysses groups "
          "of ulysses_degree_in_cp ranks inside a ring) is not built yet; "
          "colossalai_cp and ulysses_cp are");
    } else if (model.useRingAttention && ulysses) {
      // MindFormers warns the same (transformer_config.py).
      context_.diagnostics.warning(
          locOfKey("model.model_config.use_ring_attention"),
          "model.model_config.use_ring_attention: takes effect only with "
          "context_parallel_algo colossalai_cp (as in MindFormers); "
          "ulysses_cp exchanges heads, ignored");
    } else if (model.useRingAttention) {
      context_.diagnostics.warning(
          locOfKey("model.model_config.use_ring_attention"),
          "model.model_config.use_ring_attention: ring attention (K/V blocks "
          "passed from rank to rank) is not built yet; each rank gathers "
          "every rank's keys and values for its queries instead, as "
          "colossalai_cp does without it: the same math, one layer's K/V of "
          "the whole sequence on each rank at a time");
    }
    if (model.seqLength % cp != 0) {
      refuse("must divide seq_length (" + std::to_string(model.seqLength) +
             "): each rank holds seq_length / context_parallel positions");
    }
    // MindFormers' rule for Ulysses (llama_transformer.py): the heads
    // split over model_parallel x the Ulysses ranks.
    int64_t headSplit = config.modelParallel * cp;
    if (ulysses &&
        (model.numHeads % headSplit != 0 || model.kvHeads() % headSplit != 0)) {
      refuse("num_heads (" + std::to_string(model.numHeads) +
             ") and n_kv_heads (" + std::to_string(model.kvHeads()) +
             ") must be multiples of model_parallel x context_parallel = " +
             std::to_string(headSplit) +
             " for ulysses_cp (attention runs a block of the heads on each "
             "rank); colossalai_cp has no such rule");
    }
  }

  /// expert_parallel e: MindFormers r1.5.0's rules (moe.py): expert_num
  /// and data_parallel x context_parallel are multiples of e. mfc splits the
  /// experts over all the data-parallel ranks (e = data_parallel); fewer
  /// (experts replicated over data_parallel / e groups) is not built yet.
  void validateExpertParallel() {
    const ParallelConfig &parallel = spec_.parallel;
    int64_t ep = parallel.expertParallel;
    if (ep == 1) {
      return;
    }
    llvm::SMLoc at = locOfKey("parallel_config.expert_parallel");
    std::string key = "parallel_config.expert_parallel: " + std::to_string(ep);
    if (!spec_.useParallel) {
      diagnostics().warning(at, key + " changes nothing without use_parallel: "
                                      "True (as in MindFormers); every rank "
                                      "would hold every expert");
      return;
    }
    int64_t experts = spec_.model.moe.numExperts;
    if (experts == 0) {
      diagnostics().warning(at, key + " changes nothing: the model has no "
                                      "mixture-of-experts layers");
      return;
    }
    if (experts % ep != 0) {
      diagnostics().error(at, key + " does not divide the " +
                                  std::to_string(experts) +
                                  " experts (MindFormers requires expert_num "
                                  "to be a multiple of expert_parallel)");
      return;
    }
    if (parallel.dataParallel * parallel.contextParallel % ep != 0) {
      // MindFormers' newer (Megatron-core) MoE takes the expert ranks from
      // data_parallel x model_parallel instead (its master configs do).
      bool fromModelRanks =
          parallel.dataParallel * parallel.modelParallel % ep == 0;
      diagnostics().error(
          at,
          key + " does not divide data_parallel x context_parallel = " +
              std::to_string(parallel.dataParallel * parallel.contextParallel) +
              (fromModelRanks
                   ? ", as MindFormers r1.5.0 requires; its Megatron-style "
                     "MoE, which takes the experts' ranks from "
                     "data_parallel x model_parallel, is not built yet; set "
                     "expert_parallel to a divisor of data_parallel"
                   : " (MindFormers requires it to); set expert_parallel to "
                     "a divisor of data_parallel"));
      return;
    }
    // Predict runs one batch on every data-parallel rank: the experts are
    // split over them all the same (each rank's rows go to their experts'
    // ranks and come back, as in training).
    if (std::string why = whyNotDataParallel();
        !why.empty() && spec_.runMode != RunMode::Predict) {
      diagnostics().error(at, key +
                                  ": expert parallelism splits the "
                                  "experts over the data-parallel ranks, "
                                  "which are built " +
                                  why + "; set it to 1");
      return;
    }
    if (ep != parallel.dataParallel) {
      diagnostics().error(
          at, key + " below data_parallel " +
                  std::to_string(parallel.dataParallel) +
                  " (each expert held by data_parallel / expert_parallel "
                  "ranks) is not built yet; set expert_parallel to " +
                  std::to_string(parallel.dataParallel));
      return;
    }
    spec_.shardedExpertParallel = ep;
  }

  /// Why data_parallel does not make a multi-rank program (empty when it
  /// does): what mf-train-step and the runtime support so far.
  std::string whyNotDataParallel() const {
    if (!spec_.useParallel) {
      return "only with use_parallel: True, as in MindFormers";
    }
    if (spec_.runMode == RunMode::Predict) {
      return "for training and eval only (predict runs one rank's batch)";
    }
    return "";
  }

  /// What a program of pipeline stages builds so far: 1F1B or GPipe over
  /// whole stages, interleaved 1F1B over chunks, zero_bubble_v; the rest is
  /// refused at its key.
  void validatePipeline() {
    std::string pc = "parallel_config";
    if (spec_.model.moe.auxLossCoef > 0) {
      diagnostics().error(
          routerLogitsLoc_,
          "model.model_config.output_router_logits: the load-balancing loss "
          "sums every routed layer's routers, which pipeline stages hold "
          "apart; it is not built with pipeline_stage > 1 yet (set it to "
          "false, or pipeline_stage: 1)");
    }
    std::string schedulerKey = "parallel.pipeline_config.pipeline_scheduler";
    if (const ConfigNode *scheduler = nodeAtPath(schedulerKey)) {
      if (scheduler->isScalar() &&
          llvm::is_contained(kPipelineSchedulers, scheduler->scalar)) {
        spec_.parallel.pipelineScheduler = scheduler->scalar;
      } else {
        // MindSpore's others: seqpipe, seqvpp, seqsmartvpp.
        diagnostics().error(locOfKey(schedulerKey),
                            schedulerKey + ": " + scheduler->describe() +
                                " is not built yet; mfc schedules 1f1b "
                                "(MindSpore's default), gpipe and "
                                "zero_bubble_v");
      }
    }
    int64_t chunks = spec_.model.ppInterleaveNum;
    if (spec_.parallel.pipelineScheduler == "zero_bubble_v") {
      validateZeroBubbleV();
    } else if (chunks > 1 && spec_.parallel.pipelineScheduler != "1f1b") {
      diagnostics().error(
          locOfKey(schedulerKey),
          schedulerKey + ": " + spec_.parallel.pipelineScheduler +
              " with model.model_config.pp_interleave_num: " +
              llvm::Twine(chunks) +
              " is not built; interleaved stages run interleaved 1F1B "
              "(pipeline_scheduler: 1f1b)");
    }
    int64_t micro = spec_.parallel.microBatchNum;
    int64_t stages = spec_.shardedPipelineStages;
    if (chunks > 1 && spec_.parallel.pipelineScheduler == "1f1b" &&
        micro > stages && micro % stages != 0) {
      // Megatron-LM's interleaved schedule moves micro-batches through the
      // chunks in groups of one per stage.
      diagnostics().error(
          locOfKey(pc + ".micro_batch_num"),
          pc + ".micro_batch_num: " + llvm::Twine(micro) +
              " micro-batches do not make groups of pipeline_stage (" +
              llvm::Twine(stages) +
              "), which interleaved stages (pp_interleave_num: " +
              llvm::Twine(chunks) + ") pass through each chunk; use " +
              llvm::Twine(micro / stages * stages) + " or " +
              llvm::Twine((micro / stages + 1) * stages));
    }
    // (Under zero_bubble_v the first and the last part are both stage 0's.)
    if (spec_.model.tieWordEmbeddings && spec_.shardedPipelineStages > 2 &&
        spec_.parallel.pipelineScheduler != "zero_bubble_v") {
      diagnostics().error(
          locOfKey(pc + ".pipeline_stage"),
          pc + ".pipeline_stage: " + llvm::Twine(spec_.shardedPipelineStages) +
              " stages of a model with tied embeddings are not built yet "
              "(the first and last stage share the table: built for 2 "
              "stages); untie them, use pipeline_stage: 2, or "
              "zero_bubble_v, which puts both on stage 0");
    }
    if (spec_.runner.gradientAccumulationSteps > 1) {
      // MindFormers' trainer does the same (base_trainer.py).
      context_.diagnostics.warning(
          locOfKey("runner_config.gradient_accumulation_steps"),
          "runner_config.gradient_accumulation_steps: " +
              llvm::Twine(spec_.runner.gradientAccumulationSteps).str() +
              " does not take effect under pipeline parallelism (as in "
              "MindFormers): a step runs parallel_config.micro_batch_num = " +
              llvm::Twine(spec_.parallel.microBatchNum).str() +
              " micro-batches; reset to 1");
      spec_.runner.gradientAccumulationSteps = 1;
    }
  }

  /// zero_bubble_v as MindFormers (master, transformer_config.py) admits
  /// it: 2 chunks a stage, at least 2 micro-batches a stage, recompute
  /// counts given per chunk.
  void validateZeroBubbleV() {
    std::string key = "parallel.pipeline_config.pipeline_scheduler";
    int64_t stages = spec_.shardedPipelineStages;
    if (spec_.model.ppInterleaveNum != 2) {
      diagnostics().error(
          locOfKey(key),
          key +
              ": zero_bubble_v places 2 chunks a stage in a V; set "
              "model.model_config.pp_interleave_num: 2 with "
              "parallel.pipeline_config.pipeline_interleave: True (got " +
              llvm::Twine(spec_.model.ppInterleaveNum) + " chunks)");
    }
    if (spec_.parallel.microBatchNum < 2 * stages) {
      diagnostics().error(
          locOfKey("parallel_config.micro_batch_num"),
          "parallel_config.micro_batch_num: zero_bubble_v needs at least 2 "
          "micro-batches a stage (2 * " +
              llvm::Twine(stages) + " = " + llvm::Twine(2 * stages) +
              "), as in MindFormers; got " +
              llvm::Twine(spec_.parallel.microBatchNum));
    }
    const RecomputeSelection &recompute = spec_.recompute.recompute;
    if (recompute.kind == RecomputeSelection::Kind::LayersPerStage &&
        !recompute.layers.perChunk) {
      diagnostics().error(
          locOfKey("recompute_config.recompute"),
          "recompute_config.recompute: zero_bubble_v takes layer counts per "
          "chunk, as in MindFormers ([[stage0, stage1, ...], [stage0, "
          "stage1, ...]]), not one list");
    }
  }

  /// Why pipeline_stage does not make a program of stages (empty when it
  /// does).
  std::string whyNotPipelineParallel() const {
    if (!spec_.useParallel) {
      return "only with use_parallel: True, as in MindFormers";
    }
    if (spec_.runMode != RunMode::Train && spec_.runMode != RunMode::Finetune) {
      return "for training only so far (predict and eval run every layer on "
             "each rank)";
    }
    if (spec_.model.family != ModelFamily::Llama &&
        spec_.model.family != ModelFamily::GPT2) {
      return "for LLaMA-family and GPT-2 models only so far";
    }
    return "";
  }

  /// Why the config's model_parallel does not shard the program (empty when
  /// it does): what mf-partition and the runtime support so far.
  std::string whyNotTensorParallel() const {
    if (!spec_.useParallel) {
      return "only with use_parallel: True, as in MindFormers";
    }
    if (spec_.model.family != ModelFamily::Llama &&
        spec_.model.family != ModelFamily::GPT2) {
      return "for LLaMA-family and GPT-2 models only so far";
    }
    return "";
  }

  /// Whether `value` is layer counts: a list of ints/bools, or of such lists
  /// (and bools) per interleave chunk; anything else is op patterns.
  static bool isLayerCounts(const ConfigNode &value) {
    auto countOrBool = [](const ConfigNode &item) {
      return item.isScalar() && (parseInteger(item) || parseBool(item));
    };
    return value.isSequence() && !value.items.empty() &&
           llvm::all_of(value.items, [&](const auto &item) {
             return countOrBool(*item) ||
                    (item->isSequence() &&
                     llvm::all_of(item->items, [&](const auto &inner) {
                       return countOrBool(*inner);
                     }));
           });
  }

  /// [n0, n1, ...] per stage or [[...], ...] per chunk and stage: counts
  /// >= 0, True (all of the stage's layers) or False (none); a True/False
  /// row stands for every stage of its chunk.
  LayerCounts readLayerCounts(MapReader &reader, const std::string &path,
                              const ConfigNode &list) {
    LayerCounts counts;
    auto count = [&](const ConfigNode &item) -> int64_t {
      if (std::optional<bool> flag = parseBool(item)) {
        return *flag ? LayerCounts::kAllLayers : 0;
      }
      std::optional<int64_t> value = parseInteger(item);
      if (!value || *value < 0) {
        reader.error(item.loc, path + ": expected a layer count >= 0, "
                                      "True or False, got " +
                                   item.describe());
        return 0;
      }
      return *value;
    };
    counts.perChunk = llvm::any_of(
        list.items, [](const auto &item) { return item->isSequence(); });
    if (!counts.perChunk) {
      counts.rows.emplace_back();
      for (const auto &item : list.items) {
        counts.rows.back().push_back(count(*item));
      }
      return counts;
    }
    for (const auto &row : list.items) {
      counts.rows.emplace_back();
      if (!row->isSequence()) {
        // A whole chunk on or off; parseBool held (isLayerCounts), ints
        // between rows are an error as in MindFormers.
        if (!parseBool(*row)) {
          reader.error(row->loc, path + ": expected a list of layer counts "
                                        "per stage (one list per interleave "
                                        "chunk), or True/False, got " +
                                     row->describe());
          continue;
        }
        counts.rows.back().assign(
            static_cast<size_t>(spec_.parallel.pipelineStage), count(*row));
        continue;
      }
      for (const auto &item : row->items) {
        counts.rows.back().push_back(count(*item));
      }
    }
    return counts;
  }

  /// Reads one of: bool; layer counts; [regex, ...]; {regex: bool|counts}.
  RecomputeSelection readSelection(MapReader &reader, StringRef key) {
    RecomputeSelection selection;
    const ConfigNode *value = reader.get(key);
    if (!value) {
      return selection;
    }
    std::string path = reader.childPath(key);
    if (std::optional<bool> flag = parseBool(*value)) {
      selection.kind =
          *flag ? RecomputeSelection::Kind::All : RecomputeSelection::Kind::None;
    } else if (isLayerCounts(*value)) {
      selection.kind = RecomputeSelection::Kind::LayersPerStage;
      selection.layers = readLayerCounts(reader, path, *value);
    } else if (value->isSequence()) {
      selection.kind = RecomputeSelection::Kind::OpPatterns;
      for (const auto &item : value->items) {
        if (!item->isScalar()) {
          reader.error(item->loc, path + ": expected an op-name regex, got " +
                                      item->describe());
          continue;
        }
        checkRegex(reader, key, item->scalar, item->loc);
        selection.patterns.push_back({item->scalar, {}});
      }
    } else if (value->isMap()) {
      selection.kind = RecomputeSelection::Kind::OpPatterns;
      for (const ConfigNode::Entry &entry : value->entries) {
        checkRegex(reader, key, entry.key, entry.keyLoc);
        RecomputeSelection::Pattern pattern{entry.key, {}};
        if (std::optional<bool> flag = parseBool(*entry.value)) {
          if (!*flag) {
            continue;
          }
        } else if (isLayerCounts(*entry.value)) {
          pattern.layers =
              readLayerCounts(reader, path + "." + entry.key, *entry.value);
        } else {
          reader.error(entry.value->loc,
                       path + "." + entry.key +
                           ": expected True/False or a layer count per "
                           "pipeline stage, got " +
                           entry.value->describe());
        }
        selection.patterns.push_back(std::move(pattern));
      }
    } else {
      reader.error(value->loc,
                   path + ": expected True/False, a layer count per pipeline "
                          "stage ([4, 2]), a list of op-name regexes, or a "
                          "map regex -> counts; got " +
                       value->describe());
    }
    selectionLocs_[path] = value->loc;
    return selection;
  }

  void readRecompute() {
    MapReader recompute = section(root_, "recompute_config");
    RecomputeConfig &config = spec_.recompute;
    config.recompute = readSelection(recompute, "recompute");
    if (config.recompute.kind == RecomputeSelection::Kind::OpPatterns) {
      // MindFormers' _format_recompute_list: names recompute every layer
      // whole; a map is an error there too.
      const ConfigNode *value = recompute.get("recompute");
      if (value->isMap()) {
        recompute.error(value->loc,
                        "recompute_config.recompute: expected True/False or "
                        "layer counts per stage; op patterns go in "
                        "select_recompute");
      } else {
        diagnostics().warning(
            value->loc, "recompute_config.recompute: a list of names "
                        "recomputes every layer whole in MindFormers, and so "
                        "here; to recompute the ops they name, move them to "
                        "select_recompute");
      }
      config.recompute = RecomputeSelection{RecomputeSelection::Kind::All, {}, {}};
    }
    config.selectRecompute = readSelection(recompute, "select_recompute");
    config.selectCommRecompute =
        readSelection(recompute, "select_comm_recompute");
    config.selectRecomputeExclude =
        readSelection(recompute, "select_recompute_exclude");
    config.selectCommRecomputeExclude =
        readSelection(recompute, "select_comm_recompute_exclude");
    recompute.readBool("parallel_optimizer_comm_recompute",
                       config.parallelOptimizerCommRecompute);
    mpCommRecomputeGiven_ = recompute.get("mp_comm_recompute") != nullptr;
    recompute.readBool("mp_comm_recompute", config.mpCommRecompute);
    recompute.readBool("recompute_slice_activation",
                       config.recomputeSliceActivation);
    recompute.ignore({"recompute_layers"});
    recompute.finish();
  }

  void readOptimizer() {
    MapReader optimizer = section(root_, "optimizer");
    OptimizerConfig &config = spec_.optimizer;
    static const StringRef types[] = {"AdamW", "AdamWeightDecay",
                                      "FP32StateAdamWeightDecay",
                                      "FusedAdamWeightDecay"};
    if (optimizer.present()) {
      optimizer.require("type", "AdamW");
    }
    optimizer.readChoice("type", config.type, types);
    optimizer.readFloat("beta1", config.beta1, 0, 0.999999999);
    optimizer.readFloat("beta2", config.beta2, 0, 0.999999999);
    if (const ConfigNode *betas = optimizer.get("betas")) {
      std::vector<double> values;
      if (betas->isSequence()) {
        for (const auto &item : betas->items) {
          std::optional<double> beta = parseFloat(*item);
          if (beta && *beta >= 0 && *beta < 1) {
            values.push_back(*beta);
          }
        }
      }
      if (values.size() != 2 || values.size() != betas->items.size()) {
        optimizer.error(betas->loc, optimizer.childPath("betas") +
                                        ": expected two numbers in [0, 1), "
                                        "e.g. [0.9, 0.95]; got " +
                                        betas->describe());
      } else {
        config.beta1 = values[0];
        config.beta2 = values[1];
      }
    }
    optimizer.readFloat("eps", config.eps, 0, INFINITY, true);
    optimizer.readFloat("weight_decay", config.weightDecay, 0);
    optimizer.readFloat("learning_rate", config.learningRate, 0, true);
    optimizer.finish();
  }

  void readLrSchedule() {
    MapReader lr = section(root_, "lr_schedule");
    LrScheduleConfig &config = spec_.lrSchedule;
    static const StringRef types[] = {
        "CosineWithWarmUpLR", "CosineWithRestartsAndWarmUpLR",
        "LinearWithWarmUpLR", "PolynomialWithWarmUpLR", "ConstantWarmUpLR",
        "cosine", "linear", "polynomial", "constant", "constant_with_warmup"};
    if (lr.present()) {
      lr.require("type", "CosineWithWarmUpLR");
    }
    lr.readChoice("type", config.type, types);
    lr.readFloat("learning_rate", config.learningRate, 0, INFINITY, true);
    lr.readFloat("lr_end", config.lrEnd, 0);
    lr.readFloat("warmup_ratio", config.warmupRatio, 0, 1);
    lr.readInt("warmup_steps", config.warmupSteps, 0, kMaxSteps);
    lr.readFloat("warmup_lr_init", config.warmupLrInit, 0);
    lr.readInt("total_steps", config.totalSteps, -1, kMaxSteps);
    lr.readFloat("power", config.power, 0, INFINITY, true);
    lr.ignore({"decay_steps", "num_cycles", "lr_end1", "decay_ratio"});
    lr.finish();
  }

  void readRunner() {
    MapReader runner = section(root_, "runner_config");
    RunnerConfig &config = spec_.runner;
    runner.readPositive("epochs", config.epochs, kMaxSteps);
    runner.readInt("batch_size", config.batchSize, 1, kMaxBatch);
    runner.readPositive("gradient_accumulation_steps",
                        config.gradientAccumulationSteps, kMaxBatch);
    runner.ignore({"sink_mode", "sink_size", "initial_epoch", "initial_step"});
    runner.finish();
  }

  /// Errors for combinations that cannot be compiled, at the key to change.
  void validate() {
    if (diagnostics().errorCount() != 0) {
      return; // Values may be defaults standing in for bad input.
    }
    const ModelConfig &model = spec_.model;
    auto loc = [&](StringRef path) { return locOfKey(path); };
    std::string cfg = "model.model_config";
    if (!validateSizes()) {
      return;
    }
    if (model.headDimension && model.family == ModelFamily::GPT2 &&
        *model.headDimension * model.numHeads != model.hiddenSize) {
      diagnostics().error(loc(cfg + ".head_dim"),
                          cfg + ".head_dim: GPT-2's heads split hidden_size; "
                                "remove the key");
    } else if (!model.headDimension && model.hiddenSize % model.numHeads != 0) {
      diagnostics().error(
          loc(cfg + ".num_heads"),
          cfg + ".num_heads: hidden_size (" + llvm::Twine(model.hiddenSize) +
              ") must be divisible by num_heads (" +
              llvm::Twine(model.numHeads) + "); choose num_heads among " +
              divisors(model.hiddenSize) + ", or give head_dim");
    } else if (model.headDim() % 2 != 0 && model.family == ModelFamily::Llama) {
      std::string key = model.headDimension ? ".head_dim" : ".num_heads";
      diagnostics().error(
          loc(cfg + key),
          cfg + key + ": the head dim " +
              (model.headDimension ? "" : "hidden_size / num_heads = ") +
              llvm::Twine(model.headDim()) +
              " must be even for rotary embeddings");
    }
    int64_t routedPairs =
        model.moe.expertsPerToken * spec_.entryBatchSize() * model.seqLength;
    if (routerTables_ && routedPairs > maxRouterLoad_) {
      diagnostics().error(
          loc("moe_config.max_router_load"),
          "moe_config.max_router_load: a batch routes " +
              llvm::Twine(routedPairs) +
              " (token, choice) pairs, more than TopkRouterV2's tables hold (" +
              llvm::Twine(maxRouterLoad_) +
              "); MindFormers fails on it; raise max_router_load");
    }
    const ParallelConfig &parallel = spec_.parallel;
    if (model.moe.numExperts > 0 && spec_.shardedContextParallel > 1) {
      // Each context-parallel rank routes its own tokens, as MindFormers'
      // MoE groups them by data_parallel x context_parallel (its capacity
      // per group of a rank's tokens). The load-balancing loss counts every
      // rank's tokens, and experts split over the context axis need it in
      // their exchange: not built.
      if (spec_.shardedExpertParallel > 1) {
        diagnostics().error(
            loc("parallel_config.context_parallel"),
            "parallel_config.context_parallel: expert parallelism with "
            "context parallelism is not built yet (experts split over "
            "data_parallel only); set one of them to 1");
      }
      if (model.moe.auxLossCoef > 0) {
        diagnostics().error(
            routerLogitsLoc_,
            "model.model_config.output_router_logits: the load-balancing loss "
            "counts every context-parallel rank's tokens; it is not built "
            "with context_parallel > 1 yet (set it to false, or "
            "context_parallel: 1)");
      }
    }
    if (model.moe.numExperts > 0 && spec_.shardedModelParallel > 1) {
      // Megatron's layout inside each expert: w1 and w3 by output
      // features, w2 by input features (MindFormers' (ep, 1, mp)).
      for (auto [what, width] :
           {std::pair{"each expert's width", model.moe.expertWidth},
            std::pair{"the shared expert's width",
                      model.moe.sharedExpertWidth}}) {
        if (width % spec_.shardedModelParallel != 0) {
          diagnostics().error(
              loc("parallel_config.model_parallel"),
              "parallel_config.model_parallel: " +
                  llvm::Twine(spec_.shardedModelParallel) + " must divide " +
                  what + " (" + llvm::Twine(width) +
                  ") to split the experts' projections; choose among " +
                  divisors(width));
        }
      }
      if (parallel.useSeqParallel) {
        diagnostics().error(
            loc("parallel_config.use_seq_parallel"),
            "parallel_config.use_seq_parallel: sequence parallelism with a "
            "mixture of experts is not built yet (the routers read every "
            "token); set it to False");
      }
      if (spec_.shardedExpertParallel > 1) {
        // A layout, not the math: said loudly, compiled.
        diagnostics().warning(
            loc("parallel_config.expert_parallel"),
            "parallel_config.expert_parallel: MindFormers also splits each "
            "expert's width over the " +
                llvm::Twine(spec_.shardedModelParallel) +
                " model-parallel ranks ((ep, 1, mp)); mfc does not yet, so "
                "each rank holds 1/" +
                llvm::Twine(spec_.shardedExpertParallel) +
                " of the experts whole, not 1/" +
                llvm::Twine(spec_.shardedExpertParallel *
                            spec_.shardedModelParallel) +
                " (the same values, more memory per rank)");
      }
    }
    if (model.family == ModelFamily::GPT2 &&
        (model.qkLayernorm || model.fp32ResidualConnection)) {
      std::string key =
          model.qkLayernorm ? ".qk_layernorm" : ".fp32_residual_connection";
      diagnostics().error(loc(cfg + key),
                          cfg + key +
                              ": built for LLaMA-family models, not "
                              "GPT-2 yet; remove the key");
    }
    if (!ropeExtension_.empty() && ropeFactor_ &&
        (ropeExtension_ != "LLAMA3" ||
         (llama3LowFreqFactor_ && llama3HighFreqFactor_ &&
          llama3OriginalContext_))) {
      if (model.family == ModelFamily::GPT2) {
        diagnostics().error(extendMethodLoc_,
                            cfg + ".extend_method: GPT-2 has no rotary "
                                  "embedding to extend; remove the key");
      } else {
        applyRopeExtension(model.headDim());
      }
    }
    if (model.numHeads % model.kvHeads() != 0) {
      diagnostics().error(
          loc(cfg + ".n_kv_heads"),
          cfg + ".n_kv_heads: num_heads (" + llvm::Twine(model.numHeads) +
              ") must be divisible by n_kv_heads (" +
              llvm::Twine(model.kvHeads()) + "); choose n_kv_heads among " +
              divisors(model.numHeads));
    }
    if (model.family == ModelFamily::GPT2 && model.numKvHeads &&
        model.numKvHeads != model.numHeads) {
      diagnostics().error(loc(cfg + ".n_kv_heads"),
                          cfg + ".n_kv_heads: GPT-2 has no grouped-query "
                                "attention; remove n_kv_heads");
    }
    if (model.family == ModelFamily::GPT2 && model.qkvHasBias == false &&
        spec_.keyPositions.count(cfg + ".qkv_has_bias")) {
      diagnostics().error(loc(cfg + ".qkv_has_bias"),
                          cfg + ".qkv_has_bias: GPT-2 always has q/k/v "
                                "biases; remove the key");
    }
    int64_t maxId = model.vocabSize - 1;
    auto checkToken = [&](StringRef key, int64_t id) {
      if (id < 0 || id > maxId) {
        diagnostics().error(loc(cfg + "." + key.str()),
                            cfg + "." + key + ": token id " +
                                llvm::Twine(id) + " is outside the vocabulary [0, " +
                                llvm::Twine(model.vocabSize) + ")");
      }
    };
    if (spec_.keyPositions.count(cfg + ".bos_token_id")) {
      checkToken("bos_token_id", model.bosTokenId);
    }
    if (spec_.keyPositions.count(cfg + ".pad_token_id")) {
      checkToken("pad_token_id", model.padTokenId);
    }
    if (spec_.keyPositions.count(cfg + ".eos_token_id")) {
      for (int64_t id : model.eosTokenIds) {
        checkToken("eos_token_id", id);
      }
    }

    std::string pc = "parallel_config";
    if (model.numHeads % parallel.modelParallel != 0 ||
        model.kvHeads() % parallel.modelParallel != 0) {
      diagnostics().error(
          loc(pc + ".model_parallel"),
          pc + ".model_parallel: " + llvm::Twine(parallel.modelParallel) +
              " must divide num_heads (" + llvm::Twine(model.numHeads) +
              ") and n_kv_heads (" + llvm::Twine(model.kvHeads()) +
              ") to shard attention heads; choose among " +
              divisors(std::gcd(model.numHeads, model.kvHeads())));
    }
    if (model.ffnHiddenSize() % parallel.modelParallel != 0) {
      diagnostics().error(loc(pc + ".model_parallel"),
                          pc + ".model_parallel: " +
                              llvm::Twine(parallel.modelParallel) +
                              " must divide the FFN width (" +
                              llvm::Twine(model.ffnHiddenSize()) + ")");
    }
    if (parallel.pipelineStage > model.numLayers) {
      diagnostics().error(loc(pc + ".pipeline_stage"),
                          pc + ".pipeline_stage: " +
                              llvm::Twine(parallel.pipelineStage) +
                              " stages need at least as many layers, but "
                              "num_layers is " +
                              llvm::Twine(model.numLayers));
    }
    if (parallel.pipelineStage > 1 &&
        parallel.microBatchNum < parallel.pipelineStage &&
        spec_.runMode != RunMode::Predict) {
      diagnostics().error(loc(pc + ".micro_batch_num"),
                          pc + ".micro_batch_num: " +
                              llvm::Twine(parallel.microBatchNum) +
                              " micro-batches cannot fill " +
                              llvm::Twine(parallel.pipelineStage) +
                              " pipeline stages; use at least " +
                              llvm::Twine(parallel.pipelineStage));
    }
    if (spec_.shardedPipelineStages > 1) {
      validatePipeline();
    }
    // Fewer layers than stages is reported above; the mapping needs both.
    bool stagesKnown =
        parallel.pipelineStage <= model.numLayers && validateStages();
    validateSelection(spec_.recompute.recompute, "recompute_config.recompute",
                      stagesKnown);
    validateSelection(spec_.recompute.selectRecompute,
                      "recompute_config.select_recompute", stagesKnown);
    validateSelection(spec_.recompute.selectCommRecompute,
                      "recompute_config.select_comm_recompute", stagesKnown);
    validateSelection(spec_.recompute.selectRecomputeExclude,
                      "recompute_config.select_recompute_exclude", stagesKnown);
    validateSelection(spec_.recompute.selectCommRecomputeExclude,
                      "recompute_config.select_comm_recompute_exclude",
                      stagesKnown);
    warnAboutMindFormersQuirks();
  }

  /// The model's largest tensors and one step's FLOPs, in overflow-checked
  /// arithmetic, within what int64 sizes and costs hold everywhere after.
  bool validateSizes() {
    const ModelConfig &model = spec_.model;
    std::string cfg = "model.model_config";
    int64_t batch = spec_.entryBatchSize(), seq = model.seqLength;
    int64_t hidden = model.hiddenSize, vocab = model.vocabSize;
    int64_t ffn = model.ffnHiddenSize();
    if (model.pet.petType == "lora" && model.pet.loraRank > hidden) {
      diagnostics().error(locOfKey(cfg + ".pet_config.lora_rank"),
                          cfg + ".pet_config.lora_rank: " +
                              llvm::Twine(model.pet.loraRank) +
                              " is above hidden_size (" + llvm::Twine(hidden) +
                              "); a low-rank adapter has at most that rank");
      return false;
    }
    struct Tensor {
      const char *what, *keys, *key;
      std::optional<int64_t> elements;
    };
    const Tensor tensors[] = {
        {"the logits", "batch_size x seq_length x vocab_size", "seq_length",
         checkedProduct({batch, seq, vocab})},
        {"the FFN activations", "batch_size x seq_length x the FFN width",
         "seq_length", checkedProduct({batch, seq, ffn})},
        {"the embedding", "vocab_size x hidden_size", "vocab_size",
         checkedProduct({vocab, hidden})},
        {"an FFN weight", "hidden_size x the FFN width", "hidden_size",
         checkedProduct({hidden, ffn})},
        {"the query projection", "num_heads x head_dim x hidden_size",
         model.headDimension ? "head_dim" : "num_heads",
         checkedProduct({model.numHeads, model.headDim(), hidden})},
        {"the queries", "batch_size x seq_length x num_heads x head_dim",
         "seq_length",
         checkedProduct({batch, seq, model.numHeads, model.headDim()})},
    };
    for (const Tensor &tensor : tensors) {
      if (!tensor.elements || *tensor.elements > kMaxTensorElements) {
        diagnostics().error(
            locOfKey(cfg + "." + tensor.key),
            cfg + "." + tensor.key + ": " + tensor.what + " (" + tensor.keys +
                ") would hold " +
                (tensor.elements ? llvm::Twine(*tensor.elements)
                                 : llvm::Twine("more than 2^63")) +
                " elements; mfc compiles tensors of at most 2^36; lower one of "
                "these sizes");
        return false;
      }
    }
    // A train step runs the forward pass and twice its work backward: per
    // token 2 FLOPs per weight, plus attention over the sequence.
    std::optional<int64_t> perLayer =
        checkedProduct({2, hidden, 4 * hidden + 3 * ffn + 2 * seq});
    std::optional<int64_t> perToken =
        perLayer ? checkedProduct({*perLayer, model.numLayers}) : std::nullopt;
    std::optional<int64_t> head = checkedProduct({2, hidden, vocab});
    std::optional<int64_t> step =
        perToken && head ? checkedProduct({3, batch, seq, *perToken + *head})
                         : std::nullopt;
    if (!step || *step > kMaxStepFlops) {
      diagnostics().error(locOfKey(cfg + ".num_layers"),
                          cfg + ": one step of this model (num_layers x "
                                "hidden_size x the FFN width x batch_size x "
                                "seq_length) would take more than 2^60 FLOPs; "
                                "mfc's cost model counts in int64: lower "
                                "num_layers, the widths or seq_length");
      return false;
    }
    return true;
  }

  /// Layers per stage (and interleave chunk) as MindFormers assigns them:
  /// num_layers / (pipeline_stage * pp_interleave_num) each plus the
  /// chunk's offset; the offsets must add up to the remainder, and every
  /// chunk must keep a layer.
  bool validateStages() {
    const ModelConfig &model = spec_.model;
    int64_t stages = spec_.parallel.pipelineStage;
    int64_t chunks = model.ppInterleaveNum;
    int64_t remainder = model.numLayers % (stages * chunks);
    std::string cfg = "model.model_config";
    std::string divisor =
        chunks == 1 ? "pipeline_stage"
                    : "(pipeline_stage * pp_interleave_num)";
    std::string divisorValue =
        chunks == 1 ? std::to_string(stages)
                    : "(" + std::to_string(stages) + " * " +
                          std::to_string(chunks) + ")";
    if (chunks > 1 && stages * chunks > model.numLayers) {
      diagnostics().error(interleaveLoc_,
                          cfg + ".pp_interleave_num: " + llvm::Twine(stages) +
                              " stages of " + llvm::Twine(chunks) +
                              " chunks need at least " +
                              llvm::Twine(stages * chunks) +
                              " layers, but num_layers is " +
                              llvm::Twine(model.numLayers));
      return false;
    }
    if (!model.offsetForEveryStage) {
      if (model.offset.size() > 1 &&
          static_cast<int64_t>(model.offset.size()) != chunks) {
        diagnostics().error(offsetLoc_,
                            cfg + ".offset: " +
                                llvm::Twine(model.offset.size()) +
                                " rows, but pp_interleave_num is " +
                                llvm::Twine(chunks) +
                                "; give one row of offsets per chunk");
        return false;
      }
      for (const std::vector<int64_t> &row : model.offset) {
        if (static_cast<int64_t>(row.size()) != stages) {
          diagnostics().error(offsetLoc_, cfg + ".offset: " +
                                              llvm::Twine(row.size()) +
                                              " entries, but pipeline_stage "
                                              "is " + llvm::Twine(stages) +
                                              "; give one offset per stage");
          return false;
        }
      }
    }
    int64_t sum = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      for (int64_t stage = 0; stage < stages; ++stage) {
        sum += model.chunkOffset(chunk, stage);
      }
    }
    if (sum != remainder) {
      SMLoc loc = offsetLoc_.isValid() ? offsetLoc_
                                       : locOfKey("parallel_config.pipeline_stage");
      diagnostics().error(
          loc, (offsetLoc_.isValid()
                    ? cfg + ".offset: the offsets add up to " +
                          std::to_string(sum) +
                          (chunks > 1 && model.offset.size() == 1
                               ? " (one row, for each of the " +
                                     std::to_string(chunks) + " chunks)"
                               : "") +
                          ", but"
                    : std::string("parallel_config.pipeline_stage:")) +
                   " num_layers % " + divisor + " = " +
                   std::to_string(model.numLayers) + " % " + divisorValue +
                   " = " + std::to_string(remainder) +
                   " layers must go to some stages: give model_config.offset, "
                   "one integer per stage" +
                   (chunks > 1 ? " for each chunk" : "") + ", adding up to " +
                   std::to_string(remainder));
      return false;
    }
    int64_t each = model.numLayers / (stages * chunks);
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      for (int64_t stage = 0; stage < stages; ++stage) {
        if (each + model.chunkOffset(chunk, stage) < 1) {
          diagnostics().error(
              offsetLoc_,
              cfg + ".offset: " +
                  (chunks > 1 ? "chunk " + std::to_string(chunk) + " of " : "") +
                  "stage " + llvm::Twine(stage) +
                  " would have no layer; every stage needs at least one");
          return false;
        }
      }
    }
    return true;
  }

  /// Where MindFormers' LLaMA does more or less than its keys say, mfc does
  /// the same (or says why it need not) and warns once, at the key.
  void warnAboutMindFormersQuirks() {
    const RecomputeConfig &config = spec_.recompute;
    if (spec_.runMode != RunMode::Train && spec_.runMode != RunMode::Finetune) {
      return;
    }
    using Kind = RecomputeSelection::Kind;
    bool llama = spec_.model.family == ModelFamily::Llama;
    const RecomputeSelection &select = config.selectRecompute;
    bool selectSet = select.kind == Kind::All ||
                     select.kind == Kind::LayersPerStage ||
                     (select.kind == Kind::OpPatterns && !select.patterns.empty());
    if (llama && selectSet && !spec_.model.useFlashAttention) {
      diagnostics().warning(
          selectionLocs_["recompute_config.select_recompute"],
          "recompute_config.select_recompute: without use_flash_attention, "
          "MindFormers' LLaMA recomputes the attention scores and softmax of "
          "every layer whenever select_recompute is set, whatever its counts "
          "or patterns; mfc's attention never keeps them (its backward "
          "recomputes them, as flash attention does), so every layer's are "
          "recomputed here too");
    }
    if (llama && mpCommRecomputeGiven_ && spec_.parallel.modelParallel > 1) {
      diagnostics().warning(
          locOfKey("recompute_config.mp_comm_recompute"),
          "recompute_config.mp_comm_recompute: MindFormers' LLaMA ignores "
          "this key (its model-parallel communication is recomputed only as "
          "select_comm_recompute says), and so does mfc");
    }
    // Communication recompute: mfc's forward communicates only in the
    // all-gathers of sequence parallelism (before the attention and the
    // MLP), which select_comm_recompute recomputes; ZeRO-1 keeps whole
    // weights, so there is no parameter all-gather to recompute.
    bool gathers =
        spec_.shardedModelParallel > 1 && spec_.parallel.useSeqParallel;
    for (auto [key, set, applies] :
         {std::tuple("select_comm_recompute",
                     config.selectCommRecompute.kind != Kind::None, gathers),
          std::tuple("select_comm_recompute_exclude",
                     config.selectCommRecomputeExclude.kind != Kind::None,
                     gathers),
          std::tuple("parallel_optimizer_comm_recompute",
                     config.parallelOptimizerCommRecompute, false)}) {
      if (!set || applies) {
        continue;
      }
      std::string path = std::string("recompute_config.") + key;
      diagnostics().note(
          locOfKey(path),
          path + (std::string(key) == "parallel_optimizer_comm_recompute"
                      ? " recomputes the parallel optimizer's parameter "
                        "all-gathers; mfc's (ZeRO-1) keeps whole weights and "
                        "has none, so it recomputes nothing here"
                      : " recomputes the all-gathers of sequence parallelism "
                        "(model_parallel > 1 with use_seq_parallel); this "
                        "program has none, so it recomputes nothing here"));
    }
    for (auto [key, exclude] :
         {std::pair("select_recompute_exclude", &config.selectRecomputeExclude),
          std::pair("select_comm_recompute_exclude",
                    &config.selectCommRecomputeExclude)}) {
      std::string path = std::string("recompute_config.") + key;
      if (exclude->kind == Kind::All || exclude->kind == Kind::LayersPerStage) {
        diagnostics().warning(
            selectionLocs_[path],
            path + ": True or layer counts exclude nothing (MindFormers has "
                   "no default patterns to exclude); give the op patterns "
                   "to keep, e.g. ['feed_forward\\.mul']");
      }
    }
  }

  /// Layer counts must have one entry per stage (and one row per chunk),
  /// each within its stage's (chunk's) layers.
  void validateSelection(const RecomputeSelection &selection,
                         const std::string &path, bool stagesKnown) {
    int64_t stages = spec_.parallel.pipelineStage;
    int64_t chunks = spec_.model.ppInterleaveNum;
    std::vector<LayerChunk> layout =
        stagesKnown ? layerChunks(spec_) : std::vector<LayerChunk>();
    auto layersOf = [&](int64_t chunk, int64_t stage) {
      int64_t layers = 0;
      for (const LayerChunk &c : layout) {
        if (c.stage == stage && (chunk < 0 || c.chunk == chunk)) {
          layers += c.count;
        }
      }
      return layers;
    };
    auto check = [&](const LayerCounts &counts) {
      if (counts.perChunk &&
          static_cast<int64_t>(counts.rows.size()) != chunks) {
        diagnostics().error(selectionLocs_[path],
                            path + ": " + llvm::Twine(counts.rows.size()) +
                                " rows of layer counts, but "
                                "pp_interleave_num is " +
                                llvm::Twine(chunks) +
                                "; give one row per chunk");
        return;
      }
      for (auto [chunk, row] : llvm::enumerate(counts.rows)) {
        if (static_cast<int64_t>(row.size()) != stages) {
          diagnostics().error(selectionLocs_[path],
                              path + ": " + llvm::Twine(row.size()) +
                                  " layer counts given, but pipeline_stage "
                                  "is " + llvm::Twine(stages) +
                                  "; give one count per stage");
          return;
        }
        for (auto [stage, count] : llvm::enumerate(row)) {
          int64_t layers = layersOf(
              counts.perChunk ? static_cast<int64_t>(chunk) : -1, stage);
          if (stagesKnown && count != LayerCounts::kAllLayers &&
              count > layers) {
            diagnostics().error(
                selectionLocs_[path],
                path + ": " + llvm::Twine(count) + " layers in " +
                    (counts.perChunk ? "chunk " + std::to_string(chunk) +
                                           " of "
                                     : "") +
                    "stage " + llvm::Twine(stage) + ", which has " +
                    llvm::Twine(layers) +
                    "; lower the count or raise num_layers");
            return;
          }
        }
      }
    };
    if (selection.kind == RecomputeSelection::Kind::LayersPerStage) {
      check(selection.layers);
    }
    for (const RecomputeSelection::Pattern &pattern : selection.patterns) {
      if (!pattern.layers.empty()) {
        check(pattern.layers);
      }
    }
  }

  /// The value at dotted `path` (through maps only), or null.
  const ConfigNode *nodeAtPath(StringRef path) const {
    const ConfigNode *node = &rootNode_;
    llvm::SmallVector<StringRef> segments;
    path.split(segments, '.');
    for (StringRef segment : segments) {
      const ConfigNode::Entry *entry =
          node && node->isMap() ? node->find(segment) : nullptr;
      node = entry ? entry->value.get() : nullptr;
    }
    return node;
  }

  /// The location of the key at dotted `path`, or of its closest ancestor.
  SMLoc locOfKey(StringRef path) {
    const ConfigNode *node = &rootNode_;
    SMLoc loc;
    llvm::SmallVector<StringRef> segments;
    path.split(segments, '.');
    for (StringRef segment : segments) {
      if (!node || !node->isMap()) {
        return loc;
      }
      const ConfigNode::Entry *entry = node->find(segment);
      if (!entry) {
        return loc;
      }
      loc = entry->keyLoc;
      node = entry->value.get();
    }
    // A value that came from --set is where the user has to look.
    if (node && diagnostics().isOverride(node->loc)) {
      return node->loc;
    }
    return loc;
  }

  static std::string divisors(int64_t value) {
    std::string text;
    for (int64_t d = 1; d <= value; ++d) {
      if (value % d == 0) {
        text += (text.empty() ? "" : ", ") + std::to_string(d);
      }
    }
    return text;
  }

  const ConfigNode &rootNode_;
  ModelSpec spec_;
  ReadContext context_;
  MapReader root_;
  std::map<std::string, SMLoc> selectionLocs_;
  SMLoc offsetLoc_;
  /// extend_method and its scaling_factor, applied once the head dim is
  /// known (applyRopeExtension).
  std::string ropeExtension_;
  SMLoc extendMethodLoc_;
  /// The model is named by model_config (architectures, model_type), as in
  /// MindFormers' newest configs, not by model.arch.
  bool archFromConfig_ = false;
  std::optional<double> ropeFactor_, llama3LowFreqFactor_,
      llama3HighFreqFactor_, llama3OriginalContext_;
  SMLoc interleaveLoc_;
  /// Where output_router_logits asked for the load-balancing loss.
  SMLoc routerLogitsLoc_;
  bool mpCommRecomputeGiven_ = false;
};

} // namespace

std::optional<ModelSpec> mfc::readModelSpec(ConfigDiagnostics &diagnostics,
                                            const ConfigNode &root,
                                            StringRef sourceFile) {
  SpecReader reader(diagnostics, root, sourceFile);
  return reader.read();
}

/// The Hugging Face model folder that `path` names, as a folder or its
/// (existing) config.json, absolute and without a trailing separator; empty
/// for anything else (a MindFormers YAML, a file that does not exist).
static std::string huggingFaceFolderOf(StringRef path) {
  llvm::SmallString<256> folder(path);
  if (llvm::sys::path::filename(path) == "config.json" &&
      llvm::sys::fs::is_regular_file(path)) {
    llvm::sys::path::remove_filename(folder);
  } else if (!llvm::sys::fs::is_directory(path)) {
    return "";
  }
  llvm::sys::fs::make_absolute(folder);
  llvm::sys::path::remove_dots(folder, /*remove_dot_dot=*/true);
  while (folder.size() > 1 && llvm::sys::path::is_separator(folder.back())) {
    folder.pop_back();
  }
  return folder.str().str();
}

/// `mfc compile FOLDER` (or FOLDER/config.json) compiles the folder as
/// MindFormers' own configs name one: run_mode predict and
/// pretrained_model_dir, every size from the folder's config.json.
static std::unique_ptr<ConfigNode>
parseHuggingFaceFolder(ConfigDiagnostics &diagnostics, StringRef folder) {
  llvm::SmallString<256> config(folder);
  llvm::sys::path::append(config, "config.json");
  if (!llvm::sys::fs::exists(config)) {
    diagnostics.error(SMLoc(), "'" + folder +
                                   "' is a folder without a config.json; "
                                   "give a MindFormers YAML, or a Hugging "
                                   "Face model folder (one with config.json)");
    return nullptr;
  }
  std::string quoted;
  for (char c : folder) {
    quoted += c == '\'' ? std::string("''") : std::string(1, c);
  }
  diagnostics.note(SMLoc(), "compiling the Hugging Face model folder '" +
                                folder +
                                "' as the MindFormers config {run_mode: "
                                "predict, pretrained_model_dir: '" +
                                folder +
                                "'}; --set adds to it (e.g. --set "
                                "run_mode=finetune, --set "
                                "model.model_config.seq_length=2048)");
  return parseConfigText(diagnostics,
                         "run_mode: predict\npretrained_model_dir: '" + quoted +
                             "'\n",
                         (folder + " (a Hugging Face folder)").str());
}

std::optional<ModelSpec>
mfc::loadModelSpec(ConfigDiagnostics &diagnostics, StringRef path,
                   llvm::ArrayRef<std::string> overrides) {
  std::string folder = huggingFaceFolderOf(path);
  std::unique_ptr<ConfigNode> root =
      folder.empty() ? parseConfigFile(diagnostics, path)
                     : parseHuggingFaceFolder(diagnostics, folder);
  if (!root) {
    return std::nullopt;
  }
  bool overridesApplied = true;
  for (const std::string &assignment : overrides) {
    overridesApplied &= applyOverride(diagnostics, *root, assignment);
  }
  if (!overridesApplied || !mergePretrainedModelDir(diagnostics, *root, path)) {
    return std::nullopt;
  }
  // A folder names the model (its config.json would name it "config").
  return readModelSpec(diagnostics, *root, folder.empty() ? path : folder);
}
