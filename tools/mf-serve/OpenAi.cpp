//===- OpenAi.cpp - OpenAI-style request fields, checked ------------------===//

#include "tools/mf-serve/OpenAi.h"

#include <charconv>
#include <climits>
#include <limits>
#include <set>

using namespace mfserve;
using namespace mfrt;
using nlohmann::json;

namespace {

Status fieldError(const std::string &field, const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, field + ": " + message);
}

/// A number field within [low, high].
StatusOr<double> numberIn(const json &value, const std::string &field,
                          double low, double high) {
  if (!value.is_number() || !(value.get<double>() >= low) ||
      !(value.get<double>() <= high)) {
    return fieldError(field, "must be a number from " + json(low).dump() +
                                 " to " + json(high).dump());
  }
  return value.get<double>();
}

StatusOr<int64_t> integerIn(const json &value, const std::string &field,
                            int64_t low, int64_t high) {
  // An unsigned value above int64's range would read as negative.
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() &&
       value.get<uint64_t>() > static_cast<uint64_t>(high)) ||
      value.get<int64_t>() < low || value.get<int64_t>() > high) {
    return fieldError(field, "must be an integer from " + std::to_string(low) +
                                 " to " + std::to_string(high));
  }
  return value.get<int64_t>();
}

/// Fields whose only supported value is their default: a request may
/// repeat the default, anything else changes the output in a way mf-serve
/// does not do yet.
Status onlyDefault(const json &body, const std::string &field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    return Status::ok();
  }
  const json &value = *it;
  bool isDefault = field == "best_of" ? value == 1
                   : field == "echo"  ? value == false
                   : field == "suffix"
                       ? value.is_string() && value.get<std::string>().empty()
                       : false;
  if (isDefault) {
    return Status::ok();
  }
  return fieldError(field,
                    "only its default is supported (" +
                        std::string(field == "best_of"  ? "1"
                                    : field == "suffix" ? "null"
                                                        : "false") +
                        "); mf-serve does not implement other values yet");
}

} // namespace

json mfserve::errorBody(const std::string &message, const std::string &type,
                        const std::string &param) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", nullptr}}}};
}

StatusOr<ApiRequest> mfserve::parseRequest(const json &body, bool chat,
                                           uint64_t defaultSeed) {
  if (!body.is_object()) {
    return Status::error(StatusCode::InvalidArgument,
                         "the body must be a JSON object");
  }
  static const std::set<std::string> common = {"model",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "seed",
                                               "stop",
                                               "stream",
                                               "stream_options",
                                               "n",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias",
                                               "logprobs",
                                               "user",
                                               "repetition_penalty"};
  static const std::set<std::string> completionOnly = {"prompt", "echo",
                                                       "best_of", "suffix"};
  static const std::set<std::string> chatOnly = {
      "messages", "max_completion_tokens", "top_logprobs"};
  for (const auto &[key, value] : body.items()) {
    if (!common.count(key) && !(chat ? chatOnly : completionOnly).count(key)) {
      return fieldError(
          key, std::string("not a field of ") +
                   (chat ? "/v1/chat/completions" : "/v1/completions") +
                   " that mf-serve reads");
    }
  }
  for (const char *field : {"echo", "best_of", "suffix"}) {
    MFRT_RETURN_IF_ERROR(onlyDefault(body, field));
  }
  ApiRequest request;
  request.chat = chat;
  request.seed = defaultSeed;
  if (auto it = body.find("model"); it != body.end()) {
    if (!it->is_string()) {
      return fieldError("model", "must be a string");
    }
    request.model = it->get<std::string>();
  }
  if (chat) {
    auto it = body.find("messages");
    if (it == body.end() || !it->is_array() || it->empty()) {
      return fieldError("messages", "must be a non-empty list of messages");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json &message = (*it)[i];
      std::string where = "messages[" + std::to_string(i) + "]";
      if (!message.is_object() || !message.contains("role") ||
          !message["role"].is_string()) {
        return fieldError(where, "must be an object with a string role");
      }
      std::string role = message["role"].get<std::string>();
      if (role != "system" && role != "user" && role != "assistant" &&
          role != "developer") {
        return fieldError(where + ".role",
                          "'" + role +
                              "' is not a role mf-serve renders (system, "
                              "developer, user, assistant)");
      }
      for (const auto &[key, value] : message.items()) {
        if (key != "role" && key != "content" && key != "name") {
          return fieldError(where + "." + key, "is not supported");
        }
      }
      if (!message.contains("content") || !message["content"].is_string()) {
        return fieldError(where + ".content",
                          "must be a string (content parts are not "
                          "supported)");
      }
      request.messages.push_back({role == "developer" ? "system" : role,
                                  message["content"].get<std::string>()});
    }
  } else {
    auto it = body.find("prompt");
    if (it == body.end()) {
      return fieldError("prompt", "is required");
    }
    const json &prompt = *it;
    const json *single = &prompt;
    if (prompt.is_array() && prompt.size() == 1 &&
        (prompt[0].is_string() || prompt[0].is_array())) {
      single = &prompt[0]; // a batch of one
    }
    if (single->is_string()) {
      request.promptText = single->get<std::string>();
    } else if (single->is_array() && !single->empty() &&
               std::all_of(single->begin(), single->end(), [](const json &id) {
                 return id.is_number_integer();
               })) {
      for (const json &id : *single) {
        int64_t value = id.get<int64_t>();
        if (value < 0 || value > std::numeric_limits<int32_t>::max()) {
          return fieldError("prompt", "token id " + std::to_string(value) +
                                          " is out of range");
        }
        request.promptIds.push_back(static_cast<int32_t>(value));
      }
    } else {
      return fieldError("prompt",
                        "must be a string or a list of token ids (one prompt "
                        "per request: send several requests to batch)");
    }
  }
  for (const char *field : {"max_tokens", "max_completion_tokens"}) {
    if (auto it = body.find(field); it != body.end() && !it->is_null()) {
      MFRT_ASSIGN_OR_RETURN(request.maxTokens,
                            integerIn(*it, field, 0, int64_t(1) << 40));
    }
  }
  // OpenAI's default temperature is 1 (sampling); 0 is greedy.
  double temperature = 1.0;
  if (auto it = body.find("temperature"); it != body.end() && !it->is_null()) {
    MFRT_ASSIGN_OR_RETURN(temperature, numberIn(*it, "temperature", 0.0, 2.0));
  }
  request.sampling.doSample = temperature > 0;
  request.sampling.temperature = temperature > 0 ? temperature : 1.0;
  if (auto it = body.find("top_p"); it != body.end() && !it->is_null()) {
    MFRT_ASSIGN_OR_RETURN(request.sampling.topP,
                          numberIn(*it, "top_p", 1e-9, 1.0));
  }
  if (auto it = body.find("top_k"); it != body.end() && !it->is_null()) {
    MFRT_ASSIGN_OR_RETURN(int64_t topK,
                          integerIn(*it, "top_k", -1, int64_t(1) << 31));
    request.sampling.topK = topK < 0 ? 0 : topK; // -1: no bound (vLLM's)
  }
  if (auto it = body.find("repetition_penalty");
      it != body.end() && !it->is_null()) {
    MFRT_ASSIGN_OR_RETURN(request.sampling.repetitionPenalty,
                          numberIn(*it, "repetition_penalty", 1e-3, 100.0));
  }
  // Completions: logprobs N (0 to 5 alternatives); chat: logprobs true
  // with top_logprobs N (0 to 20).
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (chat) {
      if (!it->is_boolean()) {
        return fieldError("logprobs", "must be true or false");
      }
      request.topLogprobs = it->get<bool>() ? 0 : -1;
    } else {
      MFRT_ASSIGN_OR_RETURN(request.topLogprobs,
                            integerIn(*it, "logprobs", 0, 5));
    }
  }
  if (auto it = body.find("top_logprobs"); it != body.end() && !it->is_null()) {
    if (request.topLogprobs < 0) {
      return fieldError("top_logprobs", "needs logprobs: true");
    }
    MFRT_ASSIGN_OR_RETURN(request.topLogprobs,
                          integerIn(*it, "top_logprobs", 0, 20));
  }
  if (auto it = body.find("n"); it != body.end() && !it->is_null()) {
    MFRT_ASSIGN_OR_RETURN(request.n, integerIn(*it, "n", 1, 16));
  }
  for (const char *field : {"presence_penalty", "frequency_penalty"}) {
    if (auto it = body.find(field); it != body.end() && !it->is_null()) {
      MFRT_ASSIGN_OR_RETURN(double penalty, numberIn(*it, field, -2.0, 2.0));
      (std::string(field) == "presence_penalty"
           ? request.sampling.presencePenalty
           : request.sampling.frequencyPenalty) = penalty;
    }
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    // {"token id": bias}: ids as decimal strings, biases in [-100, 100]
    // (the ids are checked against the vocabulary when the request joins).
    if (!it->is_object() || it->size() > 300) {
      return fieldError("logit_bias", "must be an object of at most 300 "
                                      "\"token id\": bias pairs");
    }
    for (const auto &[key, value] : it->items()) {
      int64_t id = -1;
      auto [end, error] =
          std::from_chars(key.data(), key.data() + key.size(), id);
      // One spelling an id ("01" would be "1" again, biased twice).
      if (key.empty() || error != std::errc() ||
          end != key.data() + key.size() || id < 0 || id > INT32_MAX ||
          (key.size() > 1 && key[0] == '0')) {
        return fieldError("logit_bias",
                          "'" + key.substr(0, 32) + "' is not a token id");
      }
      MFRT_ASSIGN_OR_RETURN(
          double bias, numberIn(value, "logit_bias." + key, -100.0, 100.0));
      // (key is at most 10 digits here: the field name stays short.)
      request.sampling.logitBias.emplace_back(static_cast<int32_t>(id), bias);
    }
  }
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) {
      return fieldError("seed", "must be an integer");
    }
    request.seed = it->is_number_unsigned()
                       ? it->get<uint64_t>()
                       : static_cast<uint64_t>(it->get<int64_t>());
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    std::vector<json> stops =
        it->is_array() ? it->get<std::vector<json>>() : std::vector<json>{*it};
    if (stops.size() > 4) {
      return fieldError("stop", "at most 4 stop strings");
    }
    for (const json &stop : stops) {
      if (!stop.is_string() || stop.get<std::string>().empty()) {
        return fieldError("stop",
                          "must be a non-empty string or a list of them");
      }
      request.stop.push_back(stop.get<std::string>());
    }
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return fieldError("stream", "must be true or false");
    }
    request.stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options");
      it != body.end() && !it->is_null()) {
    if (!it->is_object() ||
        (it->size() != 0 &&
         (it->size() != 1 || !it->contains("include_usage") ||
          !(*it)["include_usage"].is_boolean()))) {
      return fieldError("stream_options",
                        "must be {\"include_usage\": true|false}");
    }
    request.includeUsage = it->value("include_usage", false);
  }
  if (auto it = body.find("user");
      it != body.end() && !it->is_null() && !it->is_string()) {
    return fieldError("user", "must be a string");
  }
  return request;
}
