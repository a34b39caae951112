//===- TokenizerConfig.cpp - a Hugging Face tokenizer_config.json ---------===//

#include "runtime/text/TokenizerConfig.h"

#include "runtime/base/FileIO.h"

#include <sys/stat.h>

#include <cstdlib>

using namespace mfrt;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxConfigBytes = 64ull
                                     << 20; // real files: a few KB to 10 MB

/// A token is a string or {"content": ...}.
std::string tokenText(const json &config, const char *key) {
  auto found = config.find(key);
  if (found == config.end()) {
    return "";
  }
  if (found->is_string()) {
    return found->get<std::string>();
  }
  if (found->is_object()) {
    auto content = found->find("content");
    if (content != found->end() && content->is_string()) {
      return content->get<std::string>();
    }
  }
  return "";
}

/// A string, or a list of named templates: the "default" one.
std::string templateText(const json &config) {
  auto found = config.find("chat_template");
  if (found == config.end()) {
    return "";
  }
  if (found->is_string()) {
    return found->get<std::string>();
  }
  if (found->is_array()) {
    for (const json &named : *found) {
      if (named.is_object() && named.value("name", "") == "default" &&
          named.contains("template") && named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  return "";
}

} // namespace

StatusOr<TokenizerConfig> TokenizerConfig::read(const std::string &path) {
  StatusOr<std::vector<uint8_t>> bytes =
      readRegularFile(path, "tokenizer config", kMaxConfigBytes);
  if (!bytes) {
    return bytes.status();
  }
  json config = json::parse(bytes->begin(), bytes->end(), nullptr, false);
  if (!config.is_object()) {
    return Status::error(StatusCode::DataLoss, path + ": not a JSON object");
  }
  TokenizerConfig result;
  result.path = path;
  if (auto found = config.find("tokenizer_class");
      found != config.end() && found->is_string()) {
    result.tokenizerClass = found->get<std::string>();
  }
  if (auto decoder = config.find("added_tokens_decoder");
      decoder != config.end() && decoder->is_object()) {
    for (auto item = decoder->begin(); item != decoder->end(); ++item) {
      json token = item.value();
      char *rest = nullptr;
      long long id = std::strtoll(item.key().c_str(), &rest, 10);
      if (!token.is_object() || item.key().empty() || *rest != '\0') {
        return Status::error(StatusCode::DataLoss,
                             path + ": added_tokens_decoder['" + item.key() +
                                 "'] is not an id and a token");
      }
      token["id"] = id;
      result.addedTokens.push_back(std::move(token));
    }
  }
  result.chatTemplate = templateText(config);
  result.bosToken = tokenText(config, "bos_token");
  result.eosToken = tokenText(config, "eos_token");
  return result;
}

StatusOr<std::optional<TokenizerConfig>>
TokenizerConfig::beside(const std::string &tokenizerPath) {
  std::string path =
      tokenizerPath.substr(0, tokenizerPath.find_last_of('/') + 1) +
      "tokenizer_config.json";
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return std::optional<TokenizerConfig>();
  }
  StatusOr<TokenizerConfig> config = read(path);
  if (!config) {
    return config.status();
  }
  return std::optional<TokenizerConfig>(config.take());
}
