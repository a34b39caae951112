//===- Tokenizer.h - text <-> token ids from tokenizer.json -----*- C++ -*-===//
//
// The tokenizers of the LLaMA family as Hugging Face's tokenizer.json files
// describe them: BPE over byte-level pieces (GPT-2, Qwen, LLaMA-3) or over
// metaspace pieces with byte fallback (LLaMA-2-style files), behind a
// normalizer, a pre-tokenizer (split regexes through PCRE2), added and
// special tokens, a post-processor and a decoder chain. Anything a file asks
// for that is not here is an error naming it, never a different tokenization.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_TEXT_TOKENIZER_H
#define MFC_RUNTIME_TEXT_TOKENIZER_H

#include "runtime/base/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mfrt {

class Tokenizer {
public:
  /// Reads `path`: a tokenizer.json, or a folder (a Hugging Face model
  /// folder) that holds one.
  /// A vocab.json (or a folder with vocab.json + merges.txt and no
  /// tokenizer.json) is read by fromVocabAndMerges with `tokenizerClass`.
  static StatusOr<std::unique_ptr<Tokenizer>>
  load(const std::string &path, const std::string &tokenizerClass = "");
  /// A "slow" tokenizer: `vocabPath` (vocab.json) with the merges.txt
  /// beside it, as GPT2Tokenizer or Qwen2Tokenizer read them: the class
  /// and added tokens from a tokenizer_config.json beside them, else
  /// `tokenizerClass`.
  static StatusOr<std::unique_ptr<Tokenizer>>
  fromVocabAndMerges(const std::string &vocabPath,
                     const std::string &tokenizerClass);
  /// A SentencePiece model (LLaMA-2's tokenizer.model), through Debian's
  /// libsentencepiece; encoding with special tokens prepends its BOS.
  static StatusOr<std::unique_ptr<Tokenizer>>
  fromSentencePiece(const std::string &modelPath);
  static StatusOr<std::unique_ptr<Tokenizer>>
  fromSentencePieceBytes(const std::vector<uint8_t> &bytes,
                         const std::string &name);
  /// Parses tokenizer.json bytes already in memory (the fuzzer's entry);
  /// `name` is for messages.
  static StatusOr<std::unique_ptr<Tokenizer>>
  fromJson(const std::vector<uint8_t> &bytes, const std::string &name);
  ~Tokenizer();

  /// The ids of `text` (valid UTF-8). With `addSpecialTokens`, the file's
  /// post-processor adds its tokens (LLaMA's BOS, ...).
  StatusOr<std::vector<int32_t>> encode(std::string_view text,
                                        bool addSpecialTokens) const;

  /// The bytes `ids` decode to. They may end inside a UTF-8 character (a
  /// byte-level token holds part of one); decodeText replaces what is not
  /// UTF-8 by U+FFFD, as Hugging Face's decode does.
  StatusOr<std::string> decodeBytes(const std::vector<int32_t> &ids,
                                    bool skipSpecialTokens) const;
  StatusOr<std::string> decodeText(const std::vector<int32_t> &ids,
                                   bool skipSpecialTokens) const;

  /// One past the largest id (model vocabulary and added tokens).
  int64_t vocabSize() const;
  /// The id of a token's text, e.g. "<|im_end|>".
  std::optional<int32_t> tokenId(std::string_view token) const;
  /// The tokenizer.json that was read.
  const std::string &path() const;

private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Turns generated ids into text as they arrive: each push returns the text
/// that became final (whole UTF-8 characters), decoding after the prompt so
/// that decoders that treat the first token apart (a stripped leading
/// space) see the whole sequence. Special tokens are skipped. Each push
/// decodes a window of the last ids, not the whole sequence (Hugging
/// Face's DecodeStream does the same), so a long generation costs linear
/// time.
class TokenStreamDecoder {
public:
  TokenStreamDecoder(const Tokenizer &tokenizer, std::vector<int32_t> prompt);
  StatusOr<std::string> push(int32_t id);
  /// What is left at the end (an incomplete character, as U+FFFD).
  StatusOr<std::string> finish();

private:
  /// Drops the window's oldest ids but the last few once it is long,
  /// keeping the bytes not yet returned.
  void shrink(const std::string &decoded);

  const Tokenizer &tokenizer_;
  std::vector<int32_t> ids_; // the window: the last ids
  size_t emitted_ = 0;       // bytes of the window's decoding already returned
};

/// Replaces each maximal ill-formed UTF-8 subsequence by U+FFFD (the
/// Unicode standard's practice, which Rust's from_utf8_lossy follows).
std::string toValidUtf8(std::string_view bytes);

} // namespace mfrt

#endif // MFC_RUNTIME_TEXT_TOKENIZER_H
