//===- TokenizerSteps.cpp - normalizer, pre-tokenizer, decoder chain ------===//
//
// Each step as Hugging Face tokenizers defines it: the normalizers (NFC
// and friends through utf8proc, Prepend, Replace, ...), the pre-tokenizers
// (Split regexes through PCRE2 in Unicode mode, ByteLevel, Metaspace,
// Digits) and the decoders (ByteLevel, ByteFallback, Metaspace, ...).
//
//===----------------------------------------------------------------------===//

#include "runtime/text/TokenizerSteps.h"

#include "runtime/text/Tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

namespace mfrt::tokenization {

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

/// The length of the well-formed UTF-8 character at text[i], or 0 where none
/// starts (Unicode 15, table 3-7).
size_t wellFormedLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  size_t left = text.size() - i;
  uint8_t lead = byte(i);
  if (lead < 0x80) {
    return 1;
  }
  auto continuation = [&](size_t k, uint8_t low = 0x80, uint8_t high = 0xBF) {
    return k < left && byte(i + k) >= low && byte(i + k) <= high;
  };
  if (lead >= 0xC2 && lead <= 0xDF) {
    return continuation(1) ? 2 : 0;
  }
  if (lead >= 0xE0 && lead <= 0xEF) {
    uint8_t low = lead == 0xE0 ? 0xA0 : 0x80;
    uint8_t high = lead == 0xED ? 0x9F : 0xBF;
    return continuation(1, low, high) && continuation(2) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    uint8_t low = lead == 0xF0 ? 0x90 : 0x80;
    uint8_t high = lead == 0xF4 ? 0x8F : 0xBF;
    return continuation(1, low, high) && continuation(2) && continuation(3) ? 4
                                                                            : 0;
  }
  return 0;
}

/// The bytes of an ill-formed sequence at text[i] that are a prefix of some
/// well-formed character (at least 1): one U+FFFD replaces them.
size_t maximalSubpart(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  uint8_t lead = byte(i);
  size_t need = lead >= 0xC2 && lead <= 0xDF   ? 2
                : lead >= 0xE0 && lead <= 0xEF ? 3
                : lead >= 0xF0 && lead <= 0xF4 ? 4
                                               : 1;
  size_t length = 1;
  while (length < need && i + length < text.size()) {
    uint8_t next = byte(i + length);
    uint8_t low = 0x80, high = 0xBF;
    if (length == 1) {
      low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
      high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
    }
    if (next < low || next > high) {
      break;
    }
    ++length;
  }
  return length;
}

/// Where the text stops being whole characters: an incomplete character at
/// the end is left out (it may be completed by the next token), and so is
/// a trailing U+FFFD (SentencePiece decodes an incomplete byte sequence to
/// it; the next token may complete the character).
size_t completeBytes(std::string_view text);
size_t completePrefix(std::string_view text) {
  size_t end = completeBytes(text);
  while (end >= 3 && text.substr(end - 3, 3) == "\xEF\xBF\xBD") {
    end -= 3;
  }
  return end;
}

size_t completeBytes(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t length = wellFormedLength(text, i);
    if (length == 0) {
      size_t part = maximalSubpart(text, i);
      if (i + part == text.size()) {
        return i; // a prefix of a character, cut at the end
      }
      length = part;
    }
    i += length;
  }
  return i;
}

std::optional<size_t> firstInvalidByte(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t length = wellFormedLength(text, i);
    if (length == 0) {
      return i;
    }
    i += length;
  }
  return std::nullopt;
}

void appendCodePoint(std::string &out, uint32_t c) {
  uint8_t buffer[4];
  utf8proc_ssize_t n =
      utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buffer);
  out.append(reinterpret_cast<const char *>(buffer), static_cast<size_t>(n));
}

/// GPT-2's byte-level alphabet: printable bytes stand for themselves, the
/// others for code points from U+0100 on, so every byte is a visible char.
struct ByteLevelAlphabet {
  std::array<std::string, 256> charOf;
  std::unordered_map<uint32_t, uint8_t> byteOf;

  ByteLevelAlphabet() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      uint32_t c = printable ? b : next++;
      appendCodePoint(charOf[b], c);
      byteOf[c] = static_cast<uint8_t>(b);
    }
  }
};

const ByteLevelAlphabet &byteLevel() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

std::string byteLevelEncode(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    out += byteLevel().charOf[static_cast<uint8_t>(c)];
  }
  return out;
}

/// A token's bytes under the byte-level alphabet, or nullopt when one of
/// its chars is not in it (an added token such as "<|im_end|>" with a space).
std::optional<std::string> byteLevelDecode(std::string_view token) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    utf8proc_int32_t c;
    utf8proc_ssize_t n =
        utf8proc_iterate(reinterpret_cast<const uint8_t *>(token.data() + i),
                         static_cast<utf8proc_ssize_t>(token.size() - i), &c);
    if (n <= 0) {
      return std::nullopt;
    }
    auto found = byteLevel().byteOf.find(static_cast<uint32_t>(c));
    if (found == byteLevel().byteOf.end()) {
      return std::nullopt;
    }
    out += static_cast<char>(found->second);
    i += static_cast<size_t>(n);
  }
  return out;
}

void replaceAll(std::string &text, std::string_view from, std::string_view to) {
  if (from.empty()) {
    return;
  }
  std::string out;
  size_t start = 0;
  for (size_t at; (at = text.find(from, start)) != std::string::npos;
       start = at + from.size()) {
    out.append(text, start, at - start);
    out.append(to);
  }
  out.append(text, start, std::string::npos);
  text = std::move(out);
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

//===----------------------------------------------------------------------===//
// Regex (PCRE2, UTF and Unicode properties)
//===----------------------------------------------------------------------===//

class Regex {
public:
  static StatusOr<std::shared_ptr<Regex>> compile(const std::string &pattern) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code *compiled = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
        PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
    if (!compiled) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(code, message, sizeof(message));
      return Status::error(StatusCode::DataLoss,
                           "regex '" + pattern + "' at offset " +
                               std::to_string(offset) + ": " +
                               reinterpret_cast<const char *>(message));
    }
    pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE); // optional speed-up
    return std::make_shared<Regex>(compiled);
  }
  explicit Regex(pcre2_code *code) : code_(code) {}
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex &) = delete;
  Regex &operator=(const Regex &) = delete;

  /// The [begin, end) byte ranges of every non-overlapping match; the text
  /// is valid UTF-8 (checked once per encode).
  StatusOr<std::vector<std::pair<size_t, size_t>>>
  findAll(std::string_view text) const {
    std::vector<std::pair<size_t, size_t>> matches;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(code_, nullptr),
        pcre2_match_data_free);
    size_t start = 0;
    uint32_t options = 0;
    while (start <= text.size()) {
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()),
                           text.size(), start, options | PCRE2_NO_UTF_CHECK,
                           data.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) {
        break;
      }
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof(message));
        return Status::error(StatusCode::InvalidArgument,
                             std::string("regex match failed: ") +
                                 reinterpret_cast<const char *>(message));
      }
      PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(data.get());
      size_t begin = ovector[0], end = ovector[1];
      if (end == begin) {
        // An empty match: step over one character.
        if (begin >= text.size()) {
          break;
        }
        size_t length = std::max<size_t>(1, wellFormedLength(text, begin));
        start = begin + length;
        continue;
      }
      matches.emplace_back(begin, end);
      start = end;
    }
    return matches;
  }

private:
  pcre2_code *code_;
};

StatusOr<std::vector<std::pair<size_t, size_t>>>
Pattern::findAll(std::string_view text) const {
  if (regex) {
    return regex->findAll(text);
  }
  std::vector<std::pair<size_t, size_t>> matches;
  if (literal.empty()) {
    return matches;
  }
  for (size_t at = text.find(literal); at != std::string_view::npos;
       at = text.find(literal, at + literal.size())) {
    matches.emplace_back(at, at + literal.size());
  }
  return matches;
}

//===----------------------------------------------------------------------===//
// JSON access without exceptions
//===----------------------------------------------------------------------===//

const json *member(const json &object, const char *key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto found = object.find(key);
  return found == object.end() || found->is_null() ? nullptr : &*found;
}

std::optional<std::string> stringMember(const json &object, const char *key) {
  const json *value = member(object, key);
  if (!value || !value->is_string()) {
    return std::nullopt;
  }
  return value->get<std::string>();
}

bool boolMember(const json &object, const char *key, bool fallback) {
  const json *value = member(object, key);
  return value && value->is_boolean() ? value->get<bool>() : fallback;
}

std::optional<int64_t> intMember(const json &object, const char *key) {
  const json *value = member(object, key);
  if (!value || !value->is_number_integer()) {
    return std::nullopt;
  }
  return value->get<int64_t>();
}

StatusOr<Pattern> readPattern(const json &step, const std::string &where) {
  const json *pattern = member(step, "pattern");
  Pattern out;
  if (pattern) {
    if (std::optional<std::string> literal = stringMember(*pattern, "String")) {
      out.literal = *literal;
      return out;
    }
    if (std::optional<std::string> regex = stringMember(*pattern, "Regex")) {
      StatusOr<std::shared_ptr<Regex>> compiled = Regex::compile(*regex);
      if (!compiled) {
        return compiled.status().withContext(where);
      }
      out.regex = compiled.take();
      return out;
    }
  }
  return Status::error(StatusCode::DataLoss,
                       where + ": expected a pattern {\"String\": ...} or "
                               "{\"Regex\": ...}");
}

/// The steps of a component that may be a "Sequence" of them.
StatusOr<SequenceSteps> flattenSequence(const json &component,
                                        const char *listKey,
                                        const std::string &where) {
  constexpr int kMaxSequenceDepth = 16;
  SequenceSteps steps;
  // Depth-first, without recursion: a hostile file nests 100,000 deep.
  struct Pending {
    const json *node;
    std::string where;
    int depth;
  };
  std::vector<Pending> stack{{&component, where, 0}};
  while (!stack.empty()) {
    Pending next = std::move(stack.back());
    stack.pop_back();
    if (stringMember(*next.node, "type") !=
        std::optional<std::string>("Sequence")) {
      steps.emplace_back(next.node, std::move(next.where));
      continue;
    }
    if (next.depth == kMaxSequenceDepth) {
      return Status::error(StatusCode::DataLoss,
                           next.where + ": Sequences nest deeper than " +
                               std::to_string(kMaxSequenceDepth) + " levels");
    }
    const json *list = member(*next.node, listKey);
    if (!list || !list->is_array()) {
      continue;
    }
    for (size_t i = list->size(); i-- > 0;) { // popped in order
      stack.push_back(
          {&(*list)[i],
           next.where + "." + listKey + "[" + std::to_string(i) + "]",
           next.depth + 1});
    }
  }
  return steps;
}

Status unsupported(const std::string &where, const std::string &type,
                   const char *supported) {
  return Status::error(StatusCode::Unimplemented,
                       where + ": type '" + type +
                           "' is not supported (mfc reads " + supported + ")");
}

//===----------------------------------------------------------------------===//
// Normalizer
//===----------------------------------------------------------------------===//

StatusOr<NormalizerStep> readNormalizerStep(const json &step,
                                            const std::string &where) {
  std::string type = stringMember(step, "type").value_or("");
  NormalizerStep out;
  const int stable = UTF8PROC_STABLE;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    out.unicodeOptions =
        stable |
        (type[2] == 'C' || type[3] == 'C' ? UTF8PROC_COMPOSE
                                          : UTF8PROC_DECOMPOSE) |
        (type[2] == 'K' ? UTF8PROC_COMPAT : 0);
    return out;
  }
  if (type == "Prepend") {
    out.kind = NormalizerStep::Kind::Prepend;
    out.text = stringMember(step, "prepend").value_or("");
    return out;
  }
  if (type == "Replace") {
    out.kind = NormalizerStep::Kind::Replace;
    StatusOr<Pattern> pattern = readPattern(step, where);
    if (!pattern) {
      return pattern.status();
    }
    out.pattern = pattern.take();
    out.text = stringMember(step, "content").value_or("");
    return out;
  }
  if (type == "Lowercase") {
    out.kind = NormalizerStep::Kind::Lowercase;
    return out;
  }
  if (type == "Strip") {
    out.kind = NormalizerStep::Kind::Strip;
    out.left = boolMember(step, "strip_left", false);
    out.right = boolMember(step, "strip_right", false);
    return out;
  }
  return unsupported(where, type,
                     "NFC, NFD, NFKC, NFKD, Prepend, Replace, Lowercase, "
                     "Strip and Sequence");
}

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

/// How long normalized text may grow: real normalizers at most a few
/// times (a space to U+2581's three bytes, NFKD's longest expansions); a
/// chain of Replace a -> aa would double it at every step.
size_t maxNormalizedBytes(size_t original) {
  return std::max<size_t>(64 * original, size_t(1) << 16);
}

Status normalizedTooLong(size_t original) {
  return Status::error(StatusCode::InvalidArgument,
                       "the normalizer grows " + std::to_string(original) +
                           " bytes of text beyond " +
                           std::to_string(maxNormalizedBytes(original)) +
                           " (64 times, or 64 KiB); the tokenizer's "
                           "normalizer is not a real one");
}

/// `text` with each match of `pattern` replaced by `content`; an error
/// before it grows beyond what normalizing `original` bytes may.
StatusOr<std::string> applyReplace(const Pattern &pattern,
                                   const std::string &content,
                                   const std::string &text, size_t original) {
  StatusOr<std::vector<std::pair<size_t, size_t>>> matches =
      pattern.findAll(text);
  if (!matches) {
    return matches.status();
  }
  size_t size = text.size();
  for (auto [begin, end] : *matches) {
    size += content.size() - std::min(content.size(), end - begin);
    if (size > maxNormalizedBytes(original)) {
      return normalizedTooLong(original);
    }
  }
  std::string out;
  size_t last = 0;
  for (auto [begin, end] : *matches) {
    out.append(text, last, begin - last);
    out += content;
    last = end;
  }
  out.append(text, last, std::string::npos);
  return out;
}

StatusOr<std::string> normalize(const std::vector<NormalizerStep> &steps,
                                std::string text) {
  size_t original = text.size();
  size_t limit = maxNormalizedBytes(original);
  for (const NormalizerStep &step : steps) {
    if (text.size() > limit) {
      return normalizedTooLong(original);
    }
    switch (step.kind) {
    case NormalizerStep::Kind::Unicode: {
      utf8proc_uint8_t *mapped = nullptr;
      utf8proc_ssize_t n =
          utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                       static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                       static_cast<utf8proc_option_t>(step.unicodeOptions));
      if (n < 0) {
        return Status::error(StatusCode::InvalidArgument,
                             std::string("Unicode normalization failed: ") +
                                 utf8proc_errmsg(n));
      }
      text.assign(reinterpret_cast<char *>(mapped), static_cast<size_t>(n));
      std::free(mapped);
      break;
    }
    case NormalizerStep::Kind::Prepend:
      if (!text.empty()) {
        text = step.text + text;
      }
      break;
    case NormalizerStep::Kind::Replace: {
      StatusOr<std::string> replaced =
          applyReplace(step.pattern, step.text, text, original);
      if (!replaced) {
        return replaced.status();
      }
      text = replaced.take();
      break;
    }
    case NormalizerStep::Kind::Lowercase: {
      std::string out;
      for (size_t i = 0; i < text.size();) {
        utf8proc_int32_t c;
        utf8proc_ssize_t n = utf8proc_iterate(
            reinterpret_cast<const uint8_t *>(text.data() + i),
            static_cast<utf8proc_ssize_t>(text.size() - i), &c);
        appendCodePoint(out, static_cast<uint32_t>(utf8proc_tolower(c)));
        i += static_cast<size_t>(std::max<utf8proc_ssize_t>(n, 1));
      }
      text = std::move(out);
      break;
    }
    case NormalizerStep::Kind::Strip: {
      size_t begin = 0, end = text.size();
      while (step.left && begin < end && isSpace(text[begin])) {
        ++begin;
      }
      while (step.right && end > begin && isSpace(text[end - 1])) {
        --end;
      }
      text = text.substr(begin, end - begin);
      break;
    }
    }
  }
  if (text.size() > maxNormalizedBytes(original)) {
    return normalizedTooLong(original);
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Pre-tokenizer
//===----------------------------------------------------------------------===//

/// GPT-2's pre-tokenization regex, which ByteLevel's use_regex applies.
constexpr const char *kGpt2Split =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";

StatusOr<PreTokenizerStep> readPreTokenizerStep(const json &step,
                                                const std::string &where) {
  std::string type = stringMember(step, "type").value_or("");
  PreTokenizerStep out;
  if (type == "Split") {
    StatusOr<Pattern> pattern = readPattern(step, where);
    if (!pattern) {
      return pattern.status();
    }
    out.pattern = pattern.take();
    std::string behavior = stringMember(step, "behavior").value_or("Isolated");
    if (behavior == "Isolated") {
      out.behavior = SplitBehavior::Isolated;
    } else if (behavior == "Removed") {
      out.behavior = SplitBehavior::Removed;
    } else if (behavior == "MergedWithPrevious") {
      out.behavior = SplitBehavior::MergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      out.behavior = SplitBehavior::MergedWithNext;
    } else {
      return Status::error(
          StatusCode::Unimplemented,
          where + ": Split behavior '" + behavior +
              "' is not supported (mfc reads Isolated, Removed, "
              "MergedWithPrevious and MergedWithNext)");
    }
    out.invert = boolMember(step, "invert", false);
    return out;
  }
  if (type == "ByteLevel") {
    out.kind = PreTokenizerStep::Kind::ByteLevel;
    out.addPrefixSpace = boolMember(step, "add_prefix_space", true);
    out.useRegex = boolMember(step, "use_regex", true);
    if (out.useRegex) {
      StatusOr<std::shared_ptr<Regex>> regex = Regex::compile(kGpt2Split);
      if (!regex) {
        return regex.status().withContext(where);
      }
      out.pattern.regex = regex.take();
    }
    return out;
  }
  if (type == "Metaspace") {
    out.kind = PreTokenizerStep::Kind::Metaspace;
    out.replacement = stringMember(step, "replacement").value_or("\u2581");
    std::string scheme =
        stringMember(step, "prepend_scheme")
            .value_or(boolMember(step, "add_prefix_space", true) ? "always"
                                                                 : "never");
    out.prepend = scheme == "first"   ? PreTokenizerStep::Prepend::First
                  : scheme == "never" ? PreTokenizerStep::Prepend::Never
                                      : PreTokenizerStep::Prepend::Always;
    out.split = boolMember(step, "split", true);
    return out;
  }
  if (type == "Digits") {
    out.kind = PreTokenizerStep::Kind::Digits;
    out.individualDigits = boolMember(step, "individual_digits", false);
    StatusOr<std::shared_ptr<Regex>> regex =
        Regex::compile(out.individualDigits ? "\\p{Nd}" : "\\p{Nd}+");
    if (!regex) {
      return regex.status().withContext(where);
    }
    out.pattern.regex = regex.take();
    return out;
  }
  return unsupported(where, type,
                     "Split, ByteLevel, Metaspace, Digits and Sequence");
}

/// Splits `piece` at `matches` the way `behavior` says.
void splitPiece(const std::string &piece,
                const std::vector<std::pair<size_t, size_t>> &matches,
                SplitBehavior behavior, bool invert,
                std::vector<std::string> &out) {
  // Pieces as (begin, end, isMatch) spans covering the text.
  struct Span {
    size_t begin, end;
    bool match;
  };
  std::vector<Span> spans;
  size_t last = 0;
  for (auto [begin, end] : matches) {
    if (begin > last) {
      spans.push_back({last, begin, invert});
    }
    spans.push_back({begin, end, !invert});
    last = end;
  }
  if (last < piece.size()) {
    spans.push_back({last, piece.size(), invert});
  }
  std::vector<Span> merged;
  for (size_t i = 0; i < spans.size(); ++i) {
    Span span = spans[i];
    switch (behavior) {
    case SplitBehavior::Isolated:
      merged.push_back(span);
      break;
    case SplitBehavior::Removed:
      if (!span.match) {
        merged.push_back(span);
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      if (span.match && !merged.empty() && !merged.back().match) {
        merged.back().end = span.end;
        merged.back().match = true;
      } else {
        merged.push_back(span);
      }
      break;
    case SplitBehavior::MergedWithNext:
      if (!merged.empty() && merged.back().match && !span.match) {
        merged.back().end = span.end;
        merged.back().match = false;
      } else {
        merged.push_back(span);
      }
      break;
    }
  }
  for (const Span &span : merged) {
    if (span.end > span.begin) {
      out.push_back(piece.substr(span.begin, span.end - span.begin));
    }
  }
}

/// Applies the pre-tokenizer to one normalized segment; `atTextStart` says
/// whether it begins the input (Metaspace's prepend_scheme "first").
Status preTokenize(const std::vector<PreTokenizerStep> &steps,
                   std::string segment, bool atTextStart,
                   std::vector<std::string> &out) {
  std::vector<std::string> pieces{std::move(segment)};
  for (const PreTokenizerStep &step : steps) {
    std::vector<std::string> next;
    for (size_t p = 0; p < pieces.size(); ++p) {
      std::string &piece = pieces[p];
      switch (step.kind) {
      case PreTokenizerStep::Kind::Split:
      case PreTokenizerStep::Kind::Digits: {
        StatusOr<std::vector<std::pair<size_t, size_t>>> matches =
            step.pattern.findAll(piece);
        if (!matches) {
          return matches.status();
        }
        splitPiece(piece, *matches, step.behavior, step.invert, next);
        break;
      }
      case PreTokenizerStep::Kind::ByteLevel: {
        if (step.addPrefixSpace && !startsWith(piece, " ")) {
          piece.insert(piece.begin(), ' ');
        }
        std::vector<std::string> parts;
        if (step.useRegex) {
          StatusOr<std::vector<std::pair<size_t, size_t>>> matches =
              step.pattern.findAll(piece);
          if (!matches) {
            return matches.status();
          }
          splitPiece(piece, *matches, SplitBehavior::Isolated, false, parts);
        } else {
          parts.push_back(piece);
        }
        for (const std::string &part : parts) {
          next.push_back(byteLevelEncode(part));
        }
        break;
      }
      case PreTokenizerStep::Kind::Metaspace: {
        replaceAll(piece, " ", step.replacement);
        bool prepend = step.prepend == PreTokenizerStep::Prepend::Always ||
                       (step.prepend == PreTokenizerStep::Prepend::First &&
                        p == 0 && atTextStart);
        if (prepend && !startsWith(piece, step.replacement)) {
          piece = step.replacement + piece;
        }
        if (!step.split) {
          next.push_back(piece);
          break;
        }
        Pattern at{step.replacement, nullptr};
        StatusOr<std::vector<std::pair<size_t, size_t>>> matches =
            at.findAll(piece);
        if (!matches) {
          return matches.status();
        }
        splitPiece(piece, *matches, SplitBehavior::MergedWithNext, false, next);
        break;
      }
      }
    }
    pieces = std::move(next);
  }
  for (std::string &piece : pieces) {
    if (!piece.empty()) {
      out.push_back(std::move(piece));
    }
  }
  return Status::ok();
}

StatusOr<DecoderStep> readDecoderStep(const json &step,
                                      const std::string &where) {
  std::string type = stringMember(step, "type").value_or("");
  DecoderStep out;
  if (type == "ByteLevel") {
    return out;
  }
  if (type == "Replace") {
    out.kind = DecoderStep::Kind::Replace;
    const json *pattern = member(step, "pattern");
    std::optional<std::string> literal =
        pattern ? stringMember(*pattern, "String") : std::nullopt;
    if (!literal) {
      return Status::error(StatusCode::DataLoss,
                           where + ": only {\"String\": ...} patterns are "
                                   "supported in a Replace decoder");
    }
    out.from = *literal;
    out.to = stringMember(step, "content").value_or("");
    return out;
  }
  if (type == "ByteFallback") {
    out.kind = DecoderStep::Kind::ByteFallback;
    return out;
  }
  if (type == "Fuse") {
    out.kind = DecoderStep::Kind::Fuse;
    return out;
  }
  if (type == "Strip") {
    out.kind = DecoderStep::Kind::Strip;
    out.from = stringMember(step, "content").value_or(" ");
    out.start = static_cast<size_t>(
        std::max<int64_t>(0, intMember(step, "start").value_or(0)));
    out.stop = static_cast<size_t>(
        std::max<int64_t>(0, intMember(step, "stop").value_or(0)));
    return out;
  }
  if (type == "Metaspace") {
    out.kind = DecoderStep::Kind::Metaspace;
    out.from = stringMember(step, "replacement").value_or("\u2581");
    std::string scheme =
        stringMember(step, "prepend_scheme")
            .value_or(boolMember(step, "add_prefix_space", true) ? "always"
                                                                 : "never");
    out.prependSpace = scheme != "never";
    return out;
  }
  return unsupported(where, type,
                     "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace "
                     "and Sequence");
}

/// "<0x0A>" -> 0x0A.
std::optional<uint8_t> byteToken(std::string_view token) {
  if (token.size() != 6 || !startsWith(token, "<0x") || token[5] != '>') {
    return std::nullopt;
  }
  auto hex = [](char c) -> int {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  int high = hex(token[3]), low = hex(token[4]);
  if (high < 0 || low < 0) {
    return std::nullopt;
  }
  return static_cast<uint8_t>(high * 16 + low);
}

/// Runs the decoder chain. `raw` keeps incomplete byte sequences as bytes
/// (for streaming); otherwise ByteFallback turns an invalid group into one
/// U+FFFD per byte, as Hugging Face does.
std::string runDecoder(const std::vector<DecoderStep> &steps,
                       std::vector<std::string> tokens, bool raw) {
  for (const DecoderStep &step : steps) {
    std::vector<std::string> next;
    switch (step.kind) {
    case DecoderStep::Kind::ByteLevel: {
      std::string bytes;
      for (const std::string &token : tokens) {
        std::optional<std::string> decoded = byteLevelDecode(token);
        bytes += decoded ? *decoded : token;
      }
      next.push_back(std::move(bytes));
      break;
    }
    case DecoderStep::Kind::Replace:
      for (std::string &token : tokens) {
        replaceAll(token, step.from, step.to);
        next.push_back(std::move(token));
      }
      break;
    case DecoderStep::Kind::ByteFallback: {
      std::string group;
      size_t groupTokens = 0;
      auto flush = [&] {
        if (groupTokens == 0) {
          return;
        }
        if (raw || !firstInvalidByte(group)) {
          next.push_back(group);
        } else {
          for (size_t i = 0; i < groupTokens; ++i) {
            next.push_back("\uFFFD");
          }
        }
        group.clear();
        groupTokens = 0;
      };
      for (std::string &token : tokens) {
        if (std::optional<uint8_t> byte = byteToken(token)) {
          group += static_cast<char>(*byte);
          ++groupTokens;
          continue;
        }
        flush();
        next.push_back(std::move(token));
      }
      flush();
      break;
    }
    case DecoderStep::Kind::Fuse: {
      std::string joined;
      for (const std::string &token : tokens) {
        joined += token;
      }
      next.push_back(std::move(joined));
      break;
    }
    case DecoderStep::Kind::Strip:
      for (std::string &token : tokens) {
        size_t begin = 0, end = token.size();
        for (size_t i = 0;
             i < step.start && startsWith(token.substr(begin), step.from);
             ++i) {
          begin += step.from.size();
        }
        for (size_t i = 0; i < step.stop && end >= begin + step.from.size() &&
                           token.compare(end - step.from.size(),
                                         step.from.size(), step.from) == 0;
             ++i) {
          end -= step.from.size();
        }
        next.push_back(token.substr(begin, end - begin));
      }
      break;
    case DecoderStep::Kind::Metaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string token = tokens[i];
        replaceAll(token, step.from, " ");
        if (i == 0 && step.prependSpace && startsWith(token, " ")) {
          token.erase(0, 1);
        }
        next.push_back(std::move(token));
      }
      break;
    }
    tokens = std::move(next);
  }
  std::string text;
  for (const std::string &token : tokens) {
    text += token;
  }
  return text;
}

} // namespace mfrt::tokenization

using namespace mfrt::tokenization;

std::string mfrt::toValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t length = wellFormedLength(bytes, i);
    if (length == 0) {
      out += "\uFFFD";
      i += maximalSubpart(bytes, i);
      continue;
    }
    out.append(bytes.substr(i, length));
    i += length;
  }
  return out;
}
