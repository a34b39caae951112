//===- Tokenizer.cpp - tokenizer.json: normalize, split, BPE, decode ------===//
//
// Follows Hugging Face tokenizers' pipeline step by step, so that ids equal
// theirs (test/e2e/tokenizer.test checks that against the library itself):
//   1. added tokens are cut out of the raw text (leftmost, longest): the
//      special ones, and others marked normalized: false;
//   2. each other segment is normalized (NFC through utf8proc, Prepend,
//      Replace, ...), the added tokens marked normalized (the default for
//      tokens that are not special) are cut out of it, and the rest is
//      split by the pre-tokenizer (Split regexes through PCRE2 in Unicode
//      mode, ByteLevel, Metaspace);
//   3. each piece goes through BPE (merges by rank, byte fallback, unknown
//      tokens fused);
//   4. the post-processor adds special tokens when asked.
// Decoding runs the file's decoder chain over the ids' token strings. The
// steps around the model live in TokenizerSteps.cpp; this file holds the
// BPE model, added tokens, post-processing, loading (tokenizer.json,
// vocab.json + merges.txt, SentencePiece) and streaming.
//
//===----------------------------------------------------------------------===//

#include "runtime/text/Tokenizer.h"

#include "runtime/base/FileIO.h"
#include "runtime/text/TokenizerConfig.h"
#include "runtime/text/TokenizerSteps.h"

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <queue>
#include <sys/stat.h>
#include <unordered_map>

using namespace mfrt;
using namespace mfrt::tokenization;

namespace {

constexpr uint64_t kMaxTokenizerBytes = 256ull << 20; // real files: 2-20 MB
/// Unused ids a vocabulary may have beyond as many as its tokens (the id
/// table is indexed by id).
constexpr int64_t kMaxTokenIdGaps = 1 << 16;

//===----------------------------------------------------------------------===//
// BPE
//===----------------------------------------------------------------------===//

struct Bpe {
  std::unordered_map<std::string, int32_t> vocab;
  /// (left id, right id) -> (rank, merged id).
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::optional<int32_t> unknown;
  bool fuseUnknown = false;
  bool byteFallback = false;
  bool ignoreMerges = false;
  std::array<int32_t, 256> byteTokens; // <0xXX>, or -1
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  static uint64_t pairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  void tokenize(const std::string &word, std::vector<int32_t> &out) const {
    if (auto cached = cache.find(word); cached != cache.end()) {
      out.insert(out.end(), cached->second.begin(), cached->second.end());
      return;
    }
    std::vector<int32_t> ids = merge(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (cache.size() < (1u << 18)) {
      cache.emplace(word, std::move(ids));
    }
  }

  std::vector<int32_t> merge(const std::string &word) const {
    if (ignoreMerges) {
      if (auto found = vocab.find(word); found != vocab.end()) {
        return {found->second};
      }
    }
    // 1. One symbol per character; unknown ones as bytes or <unk>.
    std::vector<int32_t> symbols;
    bool lastUnknown = false;
    for (size_t i = 0; i < word.size();) {
      size_t length = std::max<size_t>(1, wellFormedLength(word, i));
      std::string character = word.substr(i, length);
      i += length;
      if (auto found = vocab.find(character); found != vocab.end()) {
        symbols.push_back(found->second);
        lastUnknown = false;
        continue;
      }
      if (byteFallback &&
          std::all_of(character.begin(), character.end(), [&](char c) {
            return byteTokens[static_cast<uint8_t>(c)] >= 0;
          })) {
        for (char c : character) {
          symbols.push_back(byteTokens[static_cast<uint8_t>(c)]);
        }
        lastUnknown = false;
        continue;
      }
      if (unknown && !(fuseUnknown && lastUnknown)) {
        symbols.push_back(*unknown);
      }
      lastUnknown = unknown.has_value();
    }
    // 2. Merge the lowest-ranked adjacent pair first (leftmost among
    // equals), through a heap over a linked list of symbols.
    size_t n = symbols.size();
    std::vector<int32_t> next(n), previous(n);
    std::vector<bool> alive(n, true);
    for (size_t i = 0; i < n; ++i) {
      next[i] = static_cast<int32_t>(i + 1);
      previous[i] = static_cast<int32_t>(i) - 1;
    }
    using Candidate = std::tuple<int32_t, int32_t, int32_t>; // rank, pos, id
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto consider = [&](int32_t left) {
      int32_t right = next[left];
      if (left < 0 || right >= static_cast<int32_t>(n)) {
        return;
      }
      auto found = merges.find(pairKey(symbols[left], symbols[right]));
      if (found != merges.end()) {
        heap.emplace(found->second.first, left, found->second.second);
      }
    };
    for (size_t i = 0; i + 1 < n; ++i) {
      consider(static_cast<int32_t>(i));
    }
    while (!heap.empty()) {
      auto [rank, left, merged] = heap.top();
      heap.pop();
      int32_t right = next[left];
      if (!alive[left] || right >= static_cast<int32_t>(n)) {
        continue;
      }
      auto found = merges.find(pairKey(symbols[left], symbols[right]));
      if (found == merges.end() || found->second.second != merged) {
        continue; // stale: one side merged since
      }
      symbols[left] = merged;
      alive[right] = false;
      next[left] = next[right];
      if (next[right] < static_cast<int32_t>(n)) {
        previous[next[right]] = left;
      }
      if (previous[left] >= 0) {
        consider(previous[left]);
      }
      consider(left);
    }
    std::vector<int32_t> ids;
    for (size_t i = 0; i < n; ++i) {
      if (alive[i]) {
        ids.push_back(symbols[i]);
      }
    }
    return ids;
  }
};

StatusOr<Bpe> readBpe(const json &model, const std::string &where) {
  std::string type = stringMember(model, "type").value_or("BPE");
  if (type != "BPE") {
    return Status::error(StatusCode::Unimplemented,
                         where + ": model type '" + type +
                             "' is not supported (mfc reads BPE models)");
  }
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (std::optional<std::string> affix = stringMember(model, key);
        affix && !affix->empty()) {
      return Status::error(StatusCode::Unimplemented,
                           where + "." + key + ": '" + *affix +
                               "' is not supported (only empty affixes)");
    }
  }
  if (const json *dropout = member(model, "dropout");
      dropout && dropout->is_number() && dropout->get<double>() > 0) {
    return Status::error(StatusCode::DataLoss,
                         where + ".dropout: BPE dropout is for training "
                                 "tokenizers; set it to null");
  }
  Bpe bpe;
  const json *vocab = member(model, "vocab");
  if (!vocab || !vocab->is_object()) {
    return Status::error(StatusCode::DataLoss,
                         where + ".vocab: expected an object of token: id");
  }
  bpe.vocab.reserve(vocab->size());
  for (auto item = vocab->begin(); item != vocab->end(); ++item) {
    if (!item.value().is_number_integer() || item.value().get<int64_t>() < 0 ||
        item.value().get<int64_t>() >= (int64_t(1) << 30)) {
      return Status::error(StatusCode::DataLoss,
                           where + ".vocab['" + item.key() +
                               "']: expected a token id in [0, 2^30)");
    }
    bpe.vocab[item.key()] = static_cast<int32_t>(item.value().get<int64_t>());
  }
  const json *merges = member(model, "merges");
  if (merges && !merges->is_array()) {
    return Status::error(StatusCode::DataLoss,
                         where + ".merges: expected a list");
  }
  for (size_t rank = 0; merges && rank < merges->size(); ++rank) {
    const json &entry = (*merges)[rank];
    std::string left, right;
    if (entry.is_string()) {
      const std::string &text = entry.get_ref<const std::string &>();
      size_t space = text.find(' ');
      if (space == std::string::npos ||
          text.find(' ', space + 1) != std::string::npos) {
        return Status::error(StatusCode::DataLoss,
                             where + ".merges[" + std::to_string(rank) +
                                 "]: expected 'left right', got '" + text +
                                 "'");
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    } else {
      return Status::error(StatusCode::DataLoss,
                           where + ".merges[" + std::to_string(rank) +
                               "]: expected 'left right' or [left, right]");
    }
    auto l = bpe.vocab.find(left), r = bpe.vocab.find(right),
         m = bpe.vocab.find(left + right);
    if (l == bpe.vocab.end() || r == bpe.vocab.end() || m == bpe.vocab.end()) {
      return Status::error(StatusCode::DataLoss,
                           where + ".merges[" + std::to_string(rank) + "]: '" +
                               left + "' + '" + right +
                               "' names a token that is not in the vocabulary");
    }
    // The first (lowest) rank of a pair wins, as in Hugging Face's reader.
    bpe.merges.emplace(Bpe::pairKey(l->second, r->second),
                       std::make_pair(static_cast<int32_t>(rank), m->second));
  }
  if (std::optional<std::string> unknown = stringMember(model, "unk_token")) {
    auto found = bpe.vocab.find(*unknown);
    if (found == bpe.vocab.end()) {
      return Status::error(StatusCode::DataLoss,
                           where + ".unk_token: '" + *unknown +
                               "' is not in the vocabulary");
    }
    bpe.unknown = found->second;
  }
  bpe.fuseUnknown = boolMember(model, "fuse_unk", false);
  bpe.byteFallback = boolMember(model, "byte_fallback", false);
  bpe.ignoreMerges = boolMember(model, "ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto found = bpe.vocab.find(name);
    bpe.byteTokens[b] = found == bpe.vocab.end() ? -1 : found->second;
  }
  return bpe;
}

//===----------------------------------------------------------------------===//
// Added tokens, post-processor, decoder
//===----------------------------------------------------------------------===//

struct AddedToken {
  int32_t id;
  std::string content;
  bool special, singleWord, leftStrip, rightStrip;
  /// Matched in the normalized text (Hugging Face's default for tokens
  /// that are not special), as `matchText`: the content normalized.
  bool normalized = false;
  std::string matchText;
};

struct PostProcessor {
  /// The ids before and after the sequence (TemplateProcessing's single
  /// template, Roberta's and Bert's cls/sep).
  std::vector<int32_t> before, after;
};

bool isWordChar(std::string_view text, size_t at) {
  unsigned char c = static_cast<unsigned char>(text[at]);
  return std::isalnum(c) || c == '_' || c >= 0x80;
}

} // namespace

//===----------------------------------------------------------------------===//
// Tokenizer
//===----------------------------------------------------------------------===//

struct Tokenizer::Impl {
  std::string path;
  /// A SentencePiece model (.model) instead of the pipeline below; with
  /// `spmBos`, encoding with special tokens prepends it (LlamaTokenizer's
  /// add_bos_token).
  std::unique_ptr<sentencepiece::SentencePieceProcessor> spm;
  int32_t spmBos = -1;
  /// The model's control and unknown pieces (<s>, </s>, <unk>), longest
  /// first: Hugging Face's LlamaTokenizer reads them in the text as their
  /// ids (libsentencepiece would spell them out), and encodes the text
  /// between them piece by piece.
  std::vector<std::pair<std::string, int32_t>> spmSpecials;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> preTokenizer;
  Bpe model;
  std::vector<AddedToken> added; // longest first
  /// Those matched in the raw text, and in the normalized text (longest
  /// first): each pass scans only its own.
  std::vector<const AddedToken *> addedInRaw, addedInNormalized;
  std::unordered_map<int32_t, size_t> addedById;
  PostProcessor postProcessor;
  std::vector<DecoderStep> decoder;
  std::vector<std::string> tokenOf; // id -> token text ("" where none)
  std::vector<bool> hasToken;

  /// A segment of the raw text between tokens matched there: normalized,
  /// split again at the added tokens matched in normalized text, and each
  /// piece pre-tokenized and through the model.
  Status encodeSegment(std::string_view segment, bool atTextStart,
                       std::vector<int32_t> &ids) const {
    StatusOr<std::string> normalized =
        normalize(normalizer, std::string(segment));
    if (!normalized) {
      return normalized.status();
    }
    return splitAtAddedTokens(
        *normalized, /*inNormalized=*/true, ids,
        [&](std::string_view piece, bool atStart) -> Status {
          std::vector<std::string> words;
          MFRT_RETURN_IF_ERROR(preTokenize(preTokenizer, std::string(piece),
                                           atTextStart && atStart, words));
          for (const std::string &word : words) {
            model.tokenize(word, ids);
          }
          return Status::ok();
        });
  }

  /// Cuts `text` at the added tokens matched in it (those matched in the
  /// normalized text, or the others), leftmost, then longest; appends
  /// their ids and hands the text between them to `encodeRest` (with
  /// whether it starts `text`).
  template <typename EncodeRest>
  Status splitAtAddedTokens(std::string_view text, bool inNormalized,
                            std::vector<int32_t> &ids,
                            EncodeRest &&encodeRest) const {
    size_t segmentStart = 0;
    for (size_t at = 0; at < text.size();) {
      const AddedToken *token = matchAdded(text, at, inNormalized);
      if (!token) {
        ++at;
        continue;
      }
      size_t begin = at, end = at + token->matchText.size();
      if (token->leftStrip) {
        while (begin > segmentStart && isSpace(text[begin - 1])) {
          --begin;
        }
      }
      if (token->rightStrip) {
        while (end < text.size() && isSpace(text[end])) {
          ++end;
        }
      }
      if (begin > segmentStart) {
        MFRT_RETURN_IF_ERROR(
            encodeRest(text.substr(segmentStart, begin - segmentStart),
                       segmentStart == 0));
      }
      ids.push_back(token->id);
      segmentStart = at = end;
    }
    if (segmentStart < text.size()) {
      MFRT_RETURN_IF_ERROR(
          encodeRest(text.substr(segmentStart), segmentStart == 0));
    }
    return Status::ok();
  }

  /// The added token matched at text[at], longest first, among those
  /// matched in normalized text or the others.
  const AddedToken *matchAdded(std::string_view text, size_t at,
                               bool inNormalized) const {
    for (const AddedToken *token :
         inNormalized ? addedInNormalized : addedInRaw) {
      if (text.compare(at, token->matchText.size(), token->matchText) != 0) {
        continue;
      }
      size_t end = at + token->matchText.size();
      if (token->singleWord && ((at > 0 && isWordChar(text, at - 1)) ||
                                (end < text.size() && isWordChar(text, end)))) {
        continue;
      }
      return token;
    }
    return nullptr;
  }

  /// The text of `ids` through the decoder chain (or SentencePiece); `raw`
  /// keeps incomplete byte sequences for streaming.
  StatusOr<std::string> decode(const std::vector<int32_t> &ids,
                               bool skipSpecialTokens, bool raw) const;

  /// The token texts of `ids`. Ids past the tokenizer's (rows a model pads
  /// its vocabulary with) have no text and are left out, as in Hugging
  /// Face's decode.
  StatusOr<std::vector<std::string>> tokensOf(const std::vector<int32_t> &ids,
                                              bool skipSpecialTokens) const {
    std::vector<std::string> tokens;
    for (int32_t id : ids) {
      if (id < 0) {
        return Status::error(StatusCode::InvalidArgument,
                             "token id " + std::to_string(id) + " is negative");
      }
      if (static_cast<size_t>(id) >= tokenOf.size() || !hasToken[id]) {
        continue;
      }
      if (skipSpecialTokens) {
        auto found = addedById.find(id);
        if (found != addedById.end() && added[found->second].special) {
          continue;
        }
      }
      tokens.push_back(tokenOf[id]);
    }
    return tokens;
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>>
Tokenizer::load(const std::string &path, const std::string &tokenizerClass) {
  std::string file = path;
  struct stat info;
  bool folder = ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
  std::string base =
      folder ? path + "/" : path.substr(0, path.find_last_of('/') + 1);
  if (folder) {
    file = path + "/tokenizer.json";
    if (::stat(file.c_str(), &info) != 0) {
      // A "slow" tokenizer's files: vocab.json and merges.txt, or a
      // SentencePiece model.
      if (::stat((base + "vocab.json").c_str(), &info) == 0) {
        return fromVocabAndMerges(base + "vocab.json", tokenizerClass);
      }
      if (::stat((base + "tokenizer.model").c_str(), &info) == 0) {
        return fromSentencePiece(base + "tokenizer.model");
      }
      return Status::error(StatusCode::DataLoss,
                           "tokenizer folder " + path +
                               " has neither tokenizer.json, vocab.json + "
                               "merges.txt nor tokenizer.model");
    }
  } else if (path.size() >= 10 &&
             path.compare(path.size() - 10, 10, "vocab.json") == 0) {
    return fromVocabAndMerges(path, tokenizerClass);
  } else if (path.size() >= 6 &&
             path.compare(path.size() - 6, 6, ".model") == 0) {
    return fromSentencePiece(path);
  }
  StatusOr<std::vector<uint8_t>> bytes =
      readRegularFile(file, "tokenizer", kMaxTokenizerBytes);
  if (!bytes) {
    return bytes.status();
  }
  return fromJson(*bytes, file);
}

namespace {
/// Qwen2's pre-tokenization regex (Qwen2Tokenizer's PRETOKENIZE_REGEX): one
/// digit a piece, letters with one leading non-letter, newline runs.
constexpr const char *kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
} // namespace

StatusOr<std::unique_ptr<Tokenizer>>
Tokenizer::fromSentencePiece(const std::string &modelPath) {
  StatusOr<std::vector<uint8_t>> bytes =
      readRegularFile(modelPath, "SentencePiece model", kMaxTokenizerBytes);
  if (!bytes) {
    return bytes.status();
  }
  return fromSentencePieceBytes(*bytes, modelPath);
}

StatusOr<std::unique_ptr<Tokenizer>>
Tokenizer::fromSentencePieceBytes(const std::vector<uint8_t> &bytes,
                                  const std::string &name) {
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  impl->spm = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = impl->spm->LoadFromSerializedProto(std::string_view(
      reinterpret_cast<const char *>(bytes.data()), bytes.size()));
  if (!status.ok()) {
    return Status::error(StatusCode::DataLoss, "SentencePiece model " + name +
                                                   ": " + status.ToString());
  }
  impl->spmBos = impl->spm->bos_id();
  for (int id = 0; id < impl->spm->GetPieceSize(); ++id) {
    const std::string &piece = impl->spm->IdToPiece(id);
    if ((impl->spm->IsControl(id) || impl->spm->IsUnknown(id)) &&
        !piece.empty()) {
      impl->spmSpecials.emplace_back(piece, id);
    }
  }
  std::stable_sort(impl->spmSpecials.begin(), impl->spmSpecials.end(),
                   [](const auto &a, const auto &b) {
                     return a.first.size() > b.first.size();
                   });
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

StatusOr<std::unique_ptr<Tokenizer>>
Tokenizer::fromVocabAndMerges(const std::string &vocabPath,
                              const std::string &tokenizerClass) {
  std::string folder = vocabPath.substr(0, vocabPath.find_last_of('/') + 1);
  auto read = [](const std::string &path,
                 const char *what) -> StatusOr<std::vector<uint8_t>> {
    return readRegularFile(path, what, kMaxTokenizerBytes);
  };
  StatusOr<std::vector<uint8_t>> vocabBytes =
      read(vocabPath, "tokenizer vocabulary");
  if (!vocabBytes) {
    return vocabBytes.status();
  }
  StatusOr<std::vector<uint8_t>> mergesBytes =
      read(folder + "merges.txt", "tokenizer merges");
  if (!mergesBytes) {
    return mergesBytes.status().withContext(
        "a vocab.json needs the merges.txt beside it");
  }
  json vocab =
      json::parse(vocabBytes->begin(), vocabBytes->end(), nullptr, false);
  if (!vocab.is_object()) {
    return Status::error(StatusCode::DataLoss,
                         vocabPath + ": not a JSON object of token: id");
  }
  // merges.txt: one "left right" a line after an optional "#version" line.
  json merges = json::array();
  std::string text(mergesBytes->begin(), mergesBytes->end());
  size_t start = 0;
  for (size_t lineNumber = 1; start < text.size(); ++lineNumber) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    if (std::optional<size_t> bad = firstInvalidByte(line)) {
      return Status::error(StatusCode::DataLoss,
                           folder + "merges.txt:" + std::to_string(lineNumber) +
                               ": byte " + std::to_string(*bad + 1) +
                               " of the line is not UTF-8 (merges are "
                               "UTF-8 text)");
    }
    start = end == std::string::npos ? text.size() : end + 1;
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.empty() || line.rfind("#version", 0) == 0) {
      continue;
    }
    merges.push_back(line);
  }
  // The class and added tokens: tokenizer_config.json beside it, else the
  // caller's class (the YAML's processor.tokenizer.type).
  std::string tokenizerClassName = tokenizerClass;
  json added = json::array();
  StatusOr<std::optional<TokenizerConfig>> config =
      TokenizerConfig::beside(vocabPath);
  if (!config) {
    return config.status();
  }
  if (*config) {
    if (!(*config)->tokenizerClass.empty()) {
      tokenizerClassName = (*config)->tokenizerClass;
    }
    added = (*config)->addedTokens;
  }
  json root = json::object();
  root["added_tokens"] = added;
  json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  root["model"] = model;
  root["decoder"] = {{"type", "ByteLevel"}};
  if (tokenizerClassName == "Qwen2Tokenizer" ||
      tokenizerClassName == "Qwen2TokenizerFast") {
    root["normalizer"] = {{"type", "NFC"}};
    root["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", kQwen2Split}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       {{"type", "ByteLevel"},
                                        {"add_prefix_space", false},
                                        {"use_regex", false}}})}};
  } else if (tokenizerClassName == "GPT2Tokenizer" ||
             tokenizerClassName == "GPT2TokenizerFast") {
    root["pre_tokenizer"] = {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"use_regex", true}};
  } else {
    return Status::error(
        StatusCode::Unimplemented,
        vocabPath + ": a vocab.json + merges.txt tokenizer of class '" +
            (tokenizerClassName.empty() ? std::string("(none given)")
                                        : tokenizerClassName) +
            "'; mfc reads these files for GPT2Tokenizer and Qwen2Tokenizer "
            "(tokenizer_config.json's tokenizer_class or the YAML's "
            "processor.tokenizer.type)");
  }
  std::string dumped = root.dump();
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      fromJson(std::vector<uint8_t>(dumped.begin(), dumped.end()), vocabPath);
  return tokenizer;
}

StatusOr<std::unique_ptr<Tokenizer>>
Tokenizer::fromJson(const std::vector<uint8_t> &bytes,
                    const std::string &file) {
  json root = json::parse(bytes.begin(), bytes.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Status::error(StatusCode::DataLoss,
                         file + ": not a JSON object (expected a Hugging Face "
                                "tokenizer.json)");
  }
  auto impl = std::make_unique<Impl>();
  impl->path = file;
  auto fail = [&](const Status &status) {
    return status.withContext("tokenizer " + file);
  };

  if (const json *normalizer = member(root, "normalizer")) {
    StatusOr<SequenceSteps> steps =
        flattenSequence(*normalizer, "normalizers", "normalizer");
    if (!steps) {
      return fail(steps.status());
    }
    for (auto [step, where] : *steps) {
      StatusOr<NormalizerStep> read = readNormalizerStep(*step, where);
      if (!read) {
        return fail(read.status());
      }
      impl->normalizer.push_back(read.take());
    }
  }
  if (const json *preTokenizer = member(root, "pre_tokenizer")) {
    StatusOr<SequenceSteps> steps =
        flattenSequence(*preTokenizer, "pretokenizers", "pre_tokenizer");
    if (!steps) {
      return fail(steps.status());
    }
    for (auto [step, where] : *steps) {
      StatusOr<PreTokenizerStep> read = readPreTokenizerStep(*step, where);
      if (!read) {
        return fail(read.status());
      }
      impl->preTokenizer.push_back(read.take());
    }
  }
  const json *model = member(root, "model");
  if (!model) {
    return fail(Status::error(StatusCode::DataLoss, "no 'model'"));
  }
  StatusOr<Bpe> bpe = readBpe(*model, "model");
  if (!bpe) {
    return fail(bpe.status());
  }
  impl->model = bpe.take();

  if (const json *added = member(root, "added_tokens")) {
    if (!added->is_array()) {
      return fail(
          Status::error(StatusCode::DataLoss, "added_tokens: expected a list"));
    }
    for (size_t i = 0; i < added->size(); ++i) {
      const json &entry = (*added)[i];
      std::optional<int64_t> id = intMember(entry, "id");
      std::optional<std::string> content = stringMember(entry, "content");
      if (!id || *id < 0 || *id >= (int64_t(1) << 30) || !content ||
          content->empty()) {
        return fail(Status::error(StatusCode::DataLoss,
                                  "added_tokens[" + std::to_string(i) +
                                      "]: expected an id in [0, 2^30) and a "
                                      "non-empty content"));
      }
      bool special = boolMember(entry, "special", false);
      AddedToken token{static_cast<int32_t>(*id),
                       *content,
                       special,
                       boolMember(entry, "single_word", false),
                       boolMember(entry, "lstrip", false),
                       boolMember(entry, "rstrip", false),
                       boolMember(entry, "normalized", !special),
                       *content};
      if (token.normalized) {
        StatusOr<std::string> normalizedText =
            normalize(impl->normalizer, token.content);
        if (!normalizedText) {
          return fail(normalizedText.status().withContext(
              "added_tokens[" + std::to_string(i) + "]"));
        }
        token.matchText = normalizedText.take();
      }
      impl->added.push_back(std::move(token));
    }
    std::stable_sort(impl->added.begin(), impl->added.end(),
                     [](const AddedToken &a, const AddedToken &b) {
                       return a.matchText.size() > b.matchText.size();
                     });
    for (size_t i = 0; i < impl->added.size(); ++i) {
      impl->addedById[impl->added[i].id] = i;
      (impl->added[i].normalized ? impl->addedInNormalized : impl->addedInRaw)
          .push_back(&impl->added[i]);
    }
  }

  if (const json *post = member(root, "post_processor")) {
    StatusOr<SequenceSteps> steps =
        flattenSequence(*post, "processors", "post_processor");
    if (!steps) {
      return fail(steps.status());
    }
    for (auto [step, where] : *steps) {
      std::string type = stringMember(*step, "type").value_or("");
      if (type == "ByteLevel") {
        continue; // offsets only
      }
      if (type == "TemplateProcessing") {
        const json *single = member(*step, "single");
        const json *special = member(*step, "special_tokens");
        bool afterSequence = false;
        for (size_t i = 0; single && single->is_array() && i < single->size();
             ++i) {
          const json &item = (*single)[i];
          if (member(item, "Sequence")) {
            afterSequence = true;
            continue;
          }
          const json *token = member(item, "SpecialToken");
          std::optional<std::string> name =
              token ? stringMember(*token, "id") : std::nullopt;
          const json *entry =
              name && special ? member(*special, name->c_str()) : nullptr;
          const json *ids = entry ? member(*entry, "ids") : nullptr;
          if (!ids || !ids->is_array()) {
            return fail(Status::error(StatusCode::DataLoss,
                                      where + ".single[" + std::to_string(i) +
                                          "]: a special token without ids in "
                                          "special_tokens"));
          }
          for (const json &id : *ids) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
                id.get<int64_t>() >= (int64_t(1) << 30)) {
              return fail(Status::error(StatusCode::InvalidArgument,
                                        where + ": special token ids must be "
                                                "in [0, 2^30)"));
            }
            (afterSequence ? impl->postProcessor.after
                           : impl->postProcessor.before)
                .push_back(static_cast<int32_t>(id.get<int64_t>()));
          }
        }
        continue;
      }
      if (type == "RobertaProcessing" || type == "BertProcessing") {
        const json *cls = member(*step, "cls");
        const json *sep = member(*step, "sep");
        if (!cls || !sep || !cls->is_array() || !sep->is_array() ||
            cls->size() != 2 || sep->size() != 2 ||
            !(*cls)[1].is_number_integer() || !(*sep)[1].is_number_integer()) {
          return fail(Status::error(StatusCode::DataLoss,
                                    where + ": expected cls and sep as "
                                            "[token, id]"));
        }
        for (const json *special : {cls, sep}) {
          int64_t id = (*special)[1].get<int64_t>();
          if (id < 0 || id >= (int64_t(1) << 30)) {
            return fail(Status::error(StatusCode::DataLoss,
                                      where + ": special token id " +
                                          std::to_string(id) +
                                          " is not in [0, 2^30)"));
          }
        }
        impl->postProcessor.before.push_back((*cls)[1].get<int32_t>());
        impl->postProcessor.after.push_back((*sep)[1].get<int32_t>());
        continue;
      }
      return fail(unsupported(where, type,
                              "TemplateProcessing, ByteLevel, "
                              "RobertaProcessing, BertProcessing and "
                              "Sequence"));
    }
  }

  if (const json *decoder = member(root, "decoder")) {
    StatusOr<SequenceSteps> steps =
        flattenSequence(*decoder, "decoders", "decoder");
    if (!steps) {
      return fail(steps.status());
    }
    for (auto [step, where] : *steps) {
      StatusOr<DecoderStep> read = readDecoderStep(*step, where);
      if (!read) {
        return fail(read.status());
      }
      impl->decoder.push_back(read.take());
    }
  }

  // id -> token text, from the vocabulary and the added tokens.
  int64_t size = 0;
  for (const auto &[token, id] : impl->model.vocab) {
    size = std::max<int64_t>(size, id + 1);
  }
  for (const AddedToken &token : impl->added) {
    size = std::max<int64_t>(size, token.id + 1);
  }
  // The table is indexed by id: ids far beyond the count of tokens (real
  // vocabularies number theirs from 0, with at most a few gaps) would make
  // a hostile file allocate gigabytes.
  int64_t tokens =
      static_cast<int64_t>(impl->model.vocab.size() + impl->added.size());
  if (size > 2 * tokens + kMaxTokenIdGaps) {
    return fail(Status::error(
        StatusCode::DataLoss,
        "the largest token id, " + std::to_string(size - 1) +
            ", is far beyond the " + std::to_string(tokens) +
            " tokens of the vocabulary (ids are numbered from 0; at most " +
            std::to_string(tokens + kMaxTokenIdGaps) +
            " unused ids are accepted)"));
  }
  impl->tokenOf.resize(static_cast<size_t>(size));
  impl->hasToken.resize(static_cast<size_t>(size));
  for (const auto &[token, id] : impl->model.vocab) {
    impl->tokenOf[id] = token;
    impl->hasToken[id] = true;
  }
  for (const AddedToken &token : impl->added) {
    impl->tokenOf[token.id] = token.content;
    impl->hasToken[token.id] = true;
  }
  for (int32_t id : impl->postProcessor.before) {
    if (id >= size) {
      return fail(Status::error(StatusCode::InvalidArgument,
                                "post_processor: special token id " +
                                    std::to_string(id) +
                                    " is not in the vocabulary"));
    }
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

StatusOr<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                                 bool addSpecialTokens) const {
  if (std::optional<size_t> bad = firstInvalidByte(text)) {
    return Status::error(StatusCode::InvalidArgument,
                         "the text is not valid UTF-8 (byte " +
                             std::to_string(*bad) + ")");
  }
  std::vector<int32_t> ids;
  if (impl_->spm) {
    if (addSpecialTokens && impl_->spmBos >= 0) {
      ids.push_back(impl_->spmBos);
    }
    // The special pieces (leftmost, then longest) are ids; each run of text
    // between them is encoded on its own (with SentencePiece's dummy
    // prefix, as the legacy LlamaTokenizer does).
    auto encodeRun = [&](std::string_view run) -> Status {
      if (run.empty()) {
        return Status::ok();
      }
      std::vector<int> pieces;
      auto status = impl_->spm->Encode(run, &pieces);
      if (!status.ok()) {
        return Status::error(StatusCode::Internal,
                             "SentencePiece: " + status.ToString());
      }
      ids.insert(ids.end(), pieces.begin(), pieces.end());
      return Status::ok();
    };
    size_t runStart = 0;
    for (size_t at = 0; at < text.size();) {
      auto special = std::find_if(
          impl_->spmSpecials.begin(), impl_->spmSpecials.end(),
          [&](const auto &piece) {
            return text.compare(at, piece.first.size(), piece.first) == 0;
          });
      if (special == impl_->spmSpecials.end()) {
        ++at;
        continue;
      }
      MFRT_RETURN_IF_ERROR(encodeRun(text.substr(runStart, at - runStart)));
      ids.push_back(special->second);
      at += special->first.size();
      runStart = at;
    }
    MFRT_RETURN_IF_ERROR(encodeRun(text.substr(runStart)));
    return ids;
  }
  if (addSpecialTokens) {
    ids = impl_->postProcessor.before;
  }
  // 1. Cut out the added tokens matched in the raw text; normalize and
  // encode the rest (encodeSegment cuts out those matched there).
  MFRT_RETURN_IF_ERROR(impl_->splitAtAddedTokens(
      text, /*inNormalized=*/false, ids,
      [&](std::string_view segment, bool atStart) {
        return impl_->encodeSegment(segment, atStart, ids);
      }));
  if (addSpecialTokens) {
    ids.insert(ids.end(), impl_->postProcessor.after.begin(),
               impl_->postProcessor.after.end());
  }
  return ids;
}

namespace {
/// SentencePiece's text of `ids` (control pieces such as <s> decode to
/// nothing); ids outside its vocabulary are left out, as for tokenizer.json.
StatusOr<std::string>
decodeSentencePiece(const sentencepiece::SentencePieceProcessor &spm,
                    const std::vector<int32_t> &ids) {
  std::vector<int> known;
  for (int32_t id : ids) {
    if (id < 0) {
      return Status::error(StatusCode::InvalidArgument,
                           "token id " + std::to_string(id) + " is negative");
    }
    if (id < spm.GetPieceSize()) {
      known.push_back(id);
    }
  }
  std::string text;
  auto status = spm.Decode(known, &text);
  if (!status.ok()) {
    return Status::error(StatusCode::Internal,
                         "SentencePiece: " + status.ToString());
  }
  return text;
}
} // namespace

StatusOr<std::string> Tokenizer::Impl::decode(const std::vector<int32_t> &ids,
                                              bool skipSpecialTokens,
                                              bool raw) const {
  if (spm) {
    return decodeSentencePiece(*spm, ids);
  }
  StatusOr<std::vector<std::string>> tokens = tokensOf(ids, skipSpecialTokens);
  if (!tokens) {
    return tokens.status();
  }
  return runDecoder(decoder, tokens.take(), raw);
}

StatusOr<std::string> Tokenizer::decodeBytes(const std::vector<int32_t> &ids,
                                             bool skipSpecialTokens) const {
  return impl_->decode(ids, skipSpecialTokens, /*raw=*/true);
}

StatusOr<std::string> Tokenizer::decodeText(const std::vector<int32_t> &ids,
                                            bool skipSpecialTokens) const {
  StatusOr<std::string> text =
      impl_->decode(ids, skipSpecialTokens, /*raw=*/false);
  return text ? StatusOr<std::string>(toValidUtf8(*text)) : text;
}

int64_t Tokenizer::vocabSize() const {
  if (impl_->spm) {
    return impl_->spm->GetPieceSize();
  }
  return static_cast<int64_t>(impl_->tokenOf.size());
}

std::optional<int32_t> Tokenizer::tokenId(std::string_view token) const {
  if (impl_->spm) {
    int id = impl_->spm->PieceToId(token);
    return id == impl_->spm->unk_id() && token != impl_->spm->IdToPiece(id)
               ? std::nullopt
               : std::optional<int32_t>(id);
  }
  for (const AddedToken &added : impl_->added) {
    if (added.content == token) {
      return added.id;
    }
  }
  auto found = impl_->model.vocab.find(std::string(token));
  if (found == impl_->model.vocab.end()) {
    return std::nullopt;
  }
  return found->second;
}

const std::string &Tokenizer::path() const { return impl_->path; }

TokenStreamDecoder::TokenStreamDecoder(const Tokenizer &tokenizer,
                                       std::vector<int32_t> prompt)
    : tokenizer_(tokenizer), ids_(std::move(prompt)) {
  StatusOr<std::string> text = tokenizer_.decodeBytes(ids_, true);
  emitted_ = text ? completePrefix(*text) : 0;
}

StatusOr<std::string> TokenStreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  StatusOr<std::string> text = tokenizer_.decodeBytes(ids_, true);
  if (!text) {
    return text.status();
  }
  size_t complete = completePrefix(*text);
  if (complete <= emitted_) {
    return std::string();
  }
  std::string out = toValidUtf8(
      std::string_view(*text).substr(emitted_, complete - emitted_));
  emitted_ = complete;
  shrink(*text);
  return out;
}

void TokenStreamDecoder::shrink(const std::string &decoded) {
  // Enough ids for any decoder's context (a stripped leading space, byte
  // tokens of one character); shrunk in halves, so each id is decoded a
  // bounded number of times.
  constexpr size_t kKept = 8;
  if (ids_.size() <= 2 * kKept) {
    return;
  }
  std::vector<int32_t> kept(ids_.end() - kKept, ids_.end());
  StatusOr<std::string> text = tokenizer_.decodeBytes(kept, true);
  // The bytes not yet returned end both decodings (only the start of a
  // window decodes differently); else keep the whole window.
  std::string_view pending = std::string_view(decoded).substr(emitted_);
  if (!text || text->size() < pending.size() ||
      std::string_view(*text).substr(text->size() - pending.size()) !=
          pending) {
    return;
  }
  ids_ = std::move(kept);
  emitted_ = text->size() - pending.size();
}

StatusOr<std::string> TokenStreamDecoder::finish() {
  StatusOr<std::string> text = tokenizer_.decodeBytes(ids_, true);
  if (!text) {
    return text.status();
  }
  if (text->size() <= emitted_) {
    return std::string();
  }
  std::string out = toValidUtf8(std::string_view(*text).substr(emitted_));
  emitted_ = text->size();
  return out;
}
