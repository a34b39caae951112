//===- TokenizerConfig.h - a Hugging Face tokenizer_config.json -*- C++ -*-===//
//
// What mfc uses of the tokenizer_config.json beside a tokenizer: the class
// (for vocab.json + merges.txt folders), the added tokens, the chat
// template and the special tokens it refers to. Read in this one place for
// the tokenizer loader, mf-run --chat and mf-tokenize --render-template.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_TEXT_TOKENIZERCONFIG_H
#define MFC_RUNTIME_TEXT_TOKENIZERCONFIG_H

#include "runtime/base/Status.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace mfrt {

struct TokenizerConfig {
  /// Reads `path`: an error when it cannot be read, is not a JSON object or
  /// has an added_tokens_decoder entry that is not an id and a token.
  static StatusOr<TokenizerConfig> read(const std::string &path);
  /// The tokenizer_config.json in the folder of `tokenizerPath` (a file),
  /// or nullopt when there is none.
  static StatusOr<std::optional<TokenizerConfig>>
  beside(const std::string &tokenizerPath);

  std::string path;
  std::string tokenizerClass; ///< "" when it names none
  /// added_tokens_decoder as tokenizer.json's added_tokens: an array of
  /// token objects, each with its "id".
  nlohmann::json addedTokens = nlohmann::json::array();
  /// chat_template: the string, or the "default" one of a named list; "".
  std::string chatTemplate;
  /// bos_token and eos_token (a string or {"content": ...}); "".
  std::string bosToken, eosToken;
};

} // namespace mfrt

#endif // MFC_RUNTIME_TEXT_TOKENIZERCONFIG_H
