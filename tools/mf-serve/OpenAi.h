//===- OpenAi.h - OpenAI-style request fields, checked ----------*- C++ -*-===//
//
// The body of POST /v1/completions and /v1/chat/completions, read into a
// generation request. Every field that changes the output is honoured or
// refused with the field's name; a field the API does not have is refused
// too (a typo must not silently change nothing).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_TOOLS_MF_SERVE_OPENAI_H
#define MFC_TOOLS_MF_SERVE_OPENAI_H

#include "runtime/base/Status.h"
#include "runtime/session/BatchGenerator.h"
#include "runtime/text/ChatTemplate.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mfserve {

/// A request as read from its body, before tokenization.
struct ApiRequest {
  bool chat = false;
  std::string model;
  /// Completions: the prompt as text, or as token ids.
  std::optional<std::string> promptText;
  std::vector<int32_t> promptIds;
  /// Chat: the messages.
  std::vector<mfrt::ChatMessage> messages;
  std::optional<int64_t>
      maxTokens; ///< absent: completions 16, chat the context
  mfrt::SamplingOptions sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool stream = false;
  bool includeUsage = false; ///< stream_options.include_usage
  /// Choices: sequences generated for the prompt, choice i seeded with
  /// seed + i (not streamed yet).
  int64_t n = 1;
  /// Log-probabilities asked for (completions' `logprobs`, chat's
  /// `logprobs` + `top_logprobs`): -1 none, else the alternatives a token
  /// lists.
  int64_t topLogprobs = -1;
};

/// Reads `body`; an InvalidArgument error names the field and what it
/// accepts. `defaultSeed` seeds a request that gives none.
mfrt::StatusOr<ApiRequest> parseRequest(const nlohmann::json &body, bool chat,
                                        uint64_t defaultSeed);

/// {"error": {"message", "type", "param", "code"}} as OpenAI answers.
nlohmann::json errorBody(const std::string &message, const std::string &type,
                         const std::string &param = "");

} // namespace mfserve

#endif // MFC_TOOLS_MF_SERVE_OPENAI_H
