//===- TokenizerSteps.h - the steps of a tokenizer.json pipeline -*- C++
//-*-===//
//
// The parts of Hugging Face's tokenizer pipeline around the model: UTF-8
// helpers, the split regexes (PCRE2), the normalizer, the pre-tokenizer and
// the decoder chain, each read from its tokenizer.json object. Private to
// runtime/text/Tokenizer.cpp, which adds the BPE model, the added tokens and
// the loading.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_TEXT_TOKENIZERSTEPS_H
#define MFC_RUNTIME_TEXT_TOKENIZERSTEPS_H

#include "runtime/base/Status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mfrt::tokenization {

using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// UTF-8 and JSON access
//===----------------------------------------------------------------------===//

/// The length of the well-formed UTF-8 character at text[i], or 0.
size_t wellFormedLength(std::string_view text, size_t i);
/// Where the text stops being whole characters (streaming holds the rest).
size_t completePrefix(std::string_view text);
std::optional<size_t> firstInvalidByte(std::string_view text);
bool isSpace(char c);

const json *member(const json &object, const char *key);
std::optional<std::string> stringMember(const json &object, const char *key);
bool boolMember(const json &object, const char *key, bool fallback);
std::optional<int64_t> intMember(const json &object, const char *key);
/// The steps of a component that may be a "Sequence" of them, each with
/// its path for messages. Sequences nest at most kMaxSequenceDepth deep
/// (real files: one level); deeper is an error.
using SequenceSteps = std::vector<std::pair<const json *, std::string>>;
StatusOr<SequenceSteps> flattenSequence(const json &component,
                                        const char *listKey,
                                        const std::string &where);
Status unsupported(const std::string &where, const std::string &type,
                   const char *supported);

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

class Regex; // PCRE2, compiled once

/// A Split or Replace pattern: {"Regex": ...} or {"String": ...}.
struct Pattern {
  std::string literal;
  std::shared_ptr<Regex> regex;

  /// The [begin, end) byte ranges of every non-overlapping match.
  StatusOr<std::vector<std::pair<size_t, size_t>>>
  findAll(std::string_view text) const;
};

struct NormalizerStep {
  enum class Kind { Unicode, Prepend, Replace, Lowercase, Strip };
  Kind kind = Kind::Unicode;
  int unicodeOptions = 0; // utf8proc_option_t for NFC/NFD/NFKC/NFKD
  std::string text;       // Prepend's prefix, Replace's content
  Pattern pattern;
  bool left = false, right = false;
};

enum class SplitBehavior {
  Isolated,
  Removed,
  MergedWithPrevious,
  MergedWithNext
};

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel, Metaspace, Digits };
  Kind kind = Kind::Split;
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool addPrefixSpace = false; // ByteLevel
  bool useRegex = false;       // ByteLevel: GPT-2's split first
  std::string replacement;     // Metaspace
  enum class Prepend { Always, First, Never } prepend = Prepend::Always;
  bool split = true;             // Metaspace: split at the replacement
  bool individualDigits = false; // Digits
};

struct DecoderStep {
  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace };
  Kind kind = Kind::ByteLevel;
  std::string from, to; // Replace; Metaspace's replacement in `from`
  size_t start = 0, stop = 0;
  bool prependSpace = true; // Metaspace: the first token's space was added
};

StatusOr<NormalizerStep> readNormalizerStep(const json &step,
                                            const std::string &where);
StatusOr<std::string> normalize(const std::vector<NormalizerStep> &steps,
                                std::string text);

StatusOr<PreTokenizerStep> readPreTokenizerStep(const json &step,
                                                const std::string &where);
/// Applies the pre-tokenizer to one normalized segment; `atTextStart` says
/// whether it begins the input (Metaspace's prepend_scheme "first").
Status preTokenize(const std::vector<PreTokenizerStep> &steps,
                   std::string segment, bool atTextStart,
                   std::vector<std::string> &out);

StatusOr<DecoderStep> readDecoderStep(const json &step,
                                      const std::string &where);
/// Runs the decoder chain over token strings. `raw` keeps incomplete byte
/// sequences as bytes (for streaming).
std::string runDecoder(const std::vector<DecoderStep> &steps,
                       std::vector<std::string> tokens, bool raw);

} // namespace mfrt::tokenization

#endif // MFC_RUNTIME_TEXT_TOKENIZERSTEPS_H
