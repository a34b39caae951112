//===- mf-serve.cpp - an OpenAI-compatible server for a model.bin ---------===//
//
// mf-serve model.bin --weights DIR [--port N]: POST /v1/completions and
// /v1/chat/completions (streamed as server-sent events with "stream":
// true), GET /v1/models, /health and /metrics. Requests are batched
// continuously (BatchGenerator.h) by one engine thread; HTTP threads
// tokenize, wait for their request's tokens and write them out.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/Communicator.h"
#include "runtime/io/Calibration.h"
#include "runtime/session/ModelSession.h"
#include "runtime/text/Tokenizer.h"
#include "tools/mf-serve/Engine.h"
#include "tools/mf-serve/OpenAi.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <thread>

using namespace mfrt;
using namespace mfserve;
using nlohmann::json;

namespace {

struct Options {
  std::string executable;
  std::vector<std::string> weights;
  bool initWeights = false;
  std::string calibration;
  std::string tokenizer;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string portFile;
  std::string mode = "graph";
  int64_t threads = 0;
  int64_t maxBatchedTokens = 256;
  int64_t maxWaiting = 1024;
  int64_t httpThreads = 64;
  std::string servedName;
  uint64_t seed = 0;
};

void usage(std::ostream &os) {
  os << "USAGE: mf-serve model.bin [options]\n\n"
        "  --weights PATH             parameters (safetensors, a Hugging Face "
        "folder, .ckpt; repeatable;\n"
        "                             default: the YAML's load_checkpoint)\n"
        "  --init-weights             the deterministic init instead (tests, "
        "benchmarks)\n"
        "  --calibration R            activation ranges (mf-run --task "
        "calibrate) that quantize\n"
        "                             float weights at load (SmoothQuant, an "
        "int8 KV cache)\n"
        "  --tokenizer PATH           default: the YAML's processor.tokenizer\n"
        "  --host H --port N          where to listen (default 127.0.0.1:8000; "
        "port 0: any free port)\n"
        "  --port-file F              write the port once listening\n"
        "  --mode graph|pynative      execution mode (default graph)\n"
        "  --threads N                kernel threads (default: all cores)\n"
        "  --max-num-batched-tokens N prompt tokens a step prefills before its "
        "decode (default 256;\n"
        "                             0: no bound): long prompts go in chunks "
        "between decode steps\n"
        "  --max-waiting N            requests that may wait for a slot "
        "(default 1024; more: 503)\n"
        "  --http-threads N           connections served at once (default 64)\n"
        "  --served-model-name NAME   the model's name in the API (default: "
        "the YAML's model name)\n"
        "  --seed S                   a request without a seed gets S + its "
        "number (default 0)\n"
        "The model's batch_size is its number of slots (sequences decoded "
        "together).\n";
}

int failUsage(const std::string &message) {
  std::fprintf(stderr, "mf-serve: error: %s\n", message.c_str());
  return 2;
}

int fail(const Status &status) {
  std::fprintf(stderr, "mf-serve: error: %s\n", status.message().c_str());
  return 1;
}

bool parseInteger(const char *text, int64_t low, int64_t high, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < low ||
      value > high) {
    return false;
  }
  out = value;
  return true;
}

std::optional<Options> parseOptions(int argc, char **argv, int &exitCode) {
  enum {
    kWeights = 256,
    kInit,
    kTokenizer,
    kCalibration,
    kHost,
    kPort,
    kPortFile,
    kMode,
    kThreads,
    kBatched,
    kWaiting,
    kHttpThreads,
    kName,
    kSeed,
    kHelp
  };
  static const option longOptions[] = {
      {"weights", required_argument, nullptr, kWeights},
      {"init-weights", no_argument, nullptr, kInit},
      {"calibration", required_argument, nullptr, kCalibration},
      {"tokenizer", required_argument, nullptr, kTokenizer},
      {"host", required_argument, nullptr, kHost},
      {"port", required_argument, nullptr, kPort},
      {"port-file", required_argument, nullptr, kPortFile},
      {"mode", required_argument, nullptr, kMode},
      {"threads", required_argument, nullptr, kThreads},
      {"max-num-batched-tokens", required_argument, nullptr, kBatched},
      {"max-waiting", required_argument, nullptr, kWaiting},
      {"http-threads", required_argument, nullptr, kHttpThreads},
      {"served-model-name", required_argument, nullptr, kName},
      {"seed", required_argument, nullptr, kSeed},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0}};
  Options options;
  opterr = 0;
  int code;
  auto bad = [&](const std::string &message) {
    exitCode = failUsage(message);
    return std::nullopt;
  };
  while ((code = getopt_long(argc, argv, "", longOptions, nullptr)) != -1) {
    int64_t number = 0;
    std::string flag = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    switch (code) {
    case kWeights:
      options.weights.push_back(optarg);
      break;
    case kInit:
      options.initWeights = true;
      break;
    case kCalibration:
      options.calibration = optarg;
      break;
    case kTokenizer:
      options.tokenizer = optarg;
      break;
    case kHost:
      options.host = optarg;
      break;
    case kPort:
      if (!parseInteger(optarg, 0, 65535, number)) {
        return bad("--port takes 0 to 65535, got '" + std::string(optarg) +
                   "'");
      }
      options.port = static_cast<int>(number);
      break;
    case kPortFile:
      options.portFile = optarg;
      break;
    case kMode:
      options.mode = optarg;
      if (options.mode != "graph" && options.mode != "pynative") {
        return bad("--mode must be graph or pynative, got '" + options.mode +
                   "'");
      }
      break;
    case kThreads:
      if (!parseInteger(optarg, 0, 1024, options.threads)) {
        return bad("--threads takes 0 to 1024");
      }
      break;
    case kBatched:
      if (!parseInteger(optarg, 0, int64_t(1) << 30,
                        options.maxBatchedTokens)) {
        return bad("--max-num-batched-tokens takes 0 or a positive count");
      }
      break;
    case kWaiting:
      if (!parseInteger(optarg, 1, int64_t(1) << 20, options.maxWaiting)) {
        return bad("--max-waiting takes 1 to 1048576");
      }
      break;
    case kHttpThreads:
      if (!parseInteger(optarg, 1, 4096, options.httpThreads)) {
        return bad("--http-threads takes 1 to 4096");
      }
      break;
    case kName:
      options.servedName = optarg;
      break;
    case kSeed:
      if (!parseInteger(optarg, 0, INT64_MAX, number)) {
        return bad("--seed takes a non-negative integer");
      }
      options.seed = static_cast<uint64_t>(number);
      break;
    case kHelp:
      usage(std::cout);
      exitCode = 0;
      return std::nullopt;
    default:
      return bad("unknown option '" + flag + "' (--help lists them)");
    }
  }
  if (optind + 1 != argc) {
    return bad(optind == argc ? "give one model.bin"
                              : "give one model.bin, got '" +
                                    std::string(argv[optind + 1]) + "' too");
  }
  options.executable = argv[optind];
  return options;
}

std::string dumpJson(const json &value) {
  // Text from a model may be any bytes: invalid UTF-8 becomes U+FFFD.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// What the server shares between its HTTP threads.
struct Server {
  ModelSession &session;
  Engine &engine;
  Metrics &metrics;
  const Tokenizer *tokenizer; // null: ids are bytes
  std::string name;
  int64_t contextLength;
  std::vector<int32_t> stopIds;
  uint64_t seed; ///< --seed: a request without one gets seed + its number
  std::atomic<int64_t> nextId{1};
  std::atomic<int64_t> httpErrors{0};
};

void replyError(httplib::Response &response, int status,
                const std::string &message, const std::string &type,
                const std::string &param = "") {
  response.status = status;
  response.set_content(dumpJson(errorBody(message, type, param)),
                       "application/json");
}

/// A 4xx for a request the client must change (counted for /metrics).
void rejectRequest(Server &server, httplib::Response &response, int status,
                   const std::string &message, const std::string &param = "") {
  ++server.httpErrors;
  replyError(response, status, message, "invalid_request_error", param);
}

/// A request's text as its tokens arrive: decoded, cut at a stop string,
/// held back where a stop string might still begin.
class ReplyText {
public:
  ReplyText(std::shared_ptr<Job> job, const Tokenizer *tokenizer,
            std::vector<int32_t> prompt, std::vector<std::string> stops)
      : job_(std::move(job)), stops_(std::move(stops)) {
    if (tokenizer) {
      decoder_.emplace(*tokenizer, std::move(prompt));
    }
    for (const std::string &stop : stops_) {
      holdBack_ = std::max(holdBack_, stop.size() - 1);
    }
  }

  /// Waits up to `wait` for more; returns the text that became final (may
  /// be empty) and sets `done` when the request ended.
  std::string next(std::chrono::milliseconds wait, bool &done) {
    std::vector<int32_t> arrived;
    std::optional<FinishReason> finish;
    {
      std::unique_lock<std::mutex> lock(job_->mutex);
      job_->changed.wait_for(lock, wait, [&] {
        return job_->tokens.size() > consumed_ || job_->finish.has_value();
      });
      arrived.assign(job_->tokens.begin() + consumed_, job_->tokens.end());
      consumed_ = job_->tokens.size();
      finish = job_->finish;
      error_ = job_->error;
    }
    for (int32_t id : arrived) {
      if (stopped_) {
        break;
      }
      ++completionTokens_;
      if (decoder_) {
        StatusOr<std::string> piece = decoder_->push(id);
        text_ += piece ? *piece : "";
      } else { // bytes, as mf-run prints them (<id> above 255)
        text_ += decodeBytes({id});
      }
      findStop();
    }
    if (finish && !stopped_ && decoder_) {
      StatusOr<std::string> rest = decoder_->finish();
      text_ += rest ? *rest : "";
      findStop();
    }
    done = stopped_ || finish.has_value();
    if (finish && !stopped_) {
      reason_ = *finish == FinishReason::Length ? "length" : "stop";
    }
    // Final text: all of it at the end, else all but what may start a stop.
    size_t ready = text_.size();
    if (!done) {
      ready = ready > holdBack_ ? ready - holdBack_ : 0;
      while (ready > emitted_ && ready < text_.size() &&
             (static_cast<unsigned char>(text_[ready]) & 0xC0) == 0x80) {
        --ready; // not inside a UTF-8 character
      }
    }
    std::string delta =
        ready > emitted_ ? text_.substr(emitted_, ready - emitted_) : "";
    emitted_ = std::max(emitted_, ready);
    return delta;
  }

  /// The client left (or the request failed): the engine frees the slot.
  void abandon() { job_->abandoned = true; }

  /// The log-probabilities of the tokens the text holds (after the
  /// request ended).
  std::vector<TokenLogprobs> logprobs() const {
    std::lock_guard<std::mutex> lock(job_->mutex);
    size_t count =
        std::min(job_->logprobs.size(), static_cast<size_t>(completionTokens_));
    return {job_->logprobs.begin(), job_->logprobs.begin() + count};
  }
  /// The generated token ids the text holds.
  std::vector<int32_t> tokens() const {
    std::lock_guard<std::mutex> lock(job_->mutex);
    size_t count =
        std::min(job_->tokens.size(), static_cast<size_t>(completionTokens_));
    return {job_->tokens.begin(), job_->tokens.begin() + count};
  }

  const std::string &text() const { return text_; }
  const std::string &finishReason() const { return reason_; }
  const std::string &error() const { return error_; }
  int64_t completionTokens() const { return completionTokens_; }

private:
  void findStop() {
    for (const std::string &stop : stops_) {
      size_t from = searched_ > stop.size() ? searched_ - stop.size() : 0;
      size_t at = text_.find(stop, from);
      if (at != std::string::npos) {
        text_.resize(at);
        stopped_ = true;
        reason_ = "stop";
        job_->abandoned = true; // the engine frees its slot
      }
    }
    searched_ = text_.size();
  }

  std::shared_ptr<Job> job_;
  std::optional<TokenStreamDecoder> decoder_;
  std::vector<std::string> stops_;
  size_t holdBack_ = 0, consumed_ = 0, emitted_ = 0, searched_ = 0;
  std::string text_, reason_ = "stop", error_;
  bool stopped_ = false;
  int64_t completionTokens_ = 0;
};

/// A token's text (its bytes, as the tokenizer decodes it alone).
std::string tokenText(const Server &server, int32_t id) {
  if (server.tokenizer) {
    StatusOr<std::string> text = server.tokenizer->decodeBytes({id}, false);
    return text ? *text : std::string();
  }
  return decodeBytes({id});
}

/// OpenAI's logprobs object of a choice: completions' (tokens,
/// token_logprobs, top_logprobs, text_offset) or chat's (content: token,
/// logprob, bytes, top_logprobs).
json logprobsJson(const Server &server, bool chat,
                  const std::vector<int32_t> &tokens,
                  const std::vector<TokenLogprobs> &logprobs) {
  auto bytesOf = [](const std::string &text) {
    json bytes = json::array();
    for (unsigned char c : text) {
      bytes.push_back(static_cast<int>(c));
    }
    return bytes;
  };
  if (chat) {
    json content = json::array();
    for (size_t i = 0; i < logprobs.size(); ++i) {
      std::string text = tokenText(server, tokens[i]);
      json top = json::array();
      for (auto [id, logprob] : logprobs[i].top) {
        std::string alternative = tokenText(server, id);
        top.push_back({{"token", alternative},
                       {"logprob", logprob},
                       {"bytes", bytesOf(alternative)}});
      }
      content.push_back({{"token", text},
                         {"logprob", logprobs[i].logprob},
                         {"bytes", bytesOf(text)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json texts = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  int64_t offset = 0;
  for (size_t i = 0; i < logprobs.size(); ++i) {
    std::string text = tokenText(server, tokens[i]);
    texts.push_back(text);
    values.push_back(logprobs[i].logprob);
    json top = json::object();
    for (auto [id, logprob] : logprobs[i].top) {
      top[tokenText(server, id)] = logprob;
    }
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(text.size());
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

/// The request's prompt as ids, or a 400.
StatusOr<std::vector<int32_t>> promptIds(Server &server,
                                         const ApiRequest &request) {
  int64_t vocab = server.session.executable.model().vocab_size();
  if (request.chat) {
    MFRT_ASSIGN_OR_RETURN(
        std::string text,
        server.session.renderChat(request.messages, "/v1/chat/completions"));
    return server.tokenizer->encode(text, /*addSpecialTokens=*/false);
  }
  if (!request.promptText) {
    for (int32_t id : request.promptIds) {
      if (id >= vocab) {
        return Status::error(StatusCode::InvalidArgument,
                             "prompt: token id " + std::to_string(id) +
                                 " is outside the vocabulary of " +
                                 std::to_string(vocab));
      }
    }
    return request.promptIds;
  }
  if (server.tokenizer) {
    return server.tokenizer->encode(*request.promptText,
                                    /*addSpecialTokens=*/true);
  }
  if (vocab > 256) {
    return Status::error(
        StatusCode::InvalidArgument,
        "prompt: this server has no tokenizer for a vocabulary "
        "of " +
            std::to_string(vocab) +
            " (start it with --tokenizer), so send token ids");
  }
  return encodeBytes(*request.promptText, vocab);
}

json usageOf(int64_t prompt, int64_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

void handleGeneration(Server &server, const httplib::Request &http,
                      httplib::Response &response, bool chat) {
  json body = json::parse(http.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return rejectRequest(server, response, 400, "the body is not valid JSON");
  }
  int64_t number = server.nextId++;
  StatusOr<ApiRequest> parsed =
      parseRequest(body, chat, server.seed + static_cast<uint64_t>(number));
  if (!parsed) {
    std::string message = parsed.status().message();
    return rejectRequest(server, response, 400, message,
                         message.substr(0, message.find(':')));
  }
  ApiRequest request = parsed.take();
  if (!request.model.empty() && request.model != server.name) {
    return rejectRequest(server, response, 404,
                         "the model '" + request.model +
                             "' does not exist; this server serves '" +
                             server.name + "'",
                         "model");
  }
  if (chat && !server.tokenizer) {
    return rejectRequest(server, response, 400,
                         "chat needs the model's tokenizer and chat template: "
                         "start mf-serve with --tokenizer",
                         "messages");
  }
  StatusOr<std::vector<int32_t>> ids = promptIds(server, request);
  if (!ids || ids->empty()) {
    return rejectRequest(server, response, 400,
                         ids ? "the prompt is empty" : ids.status().message(),
                         chat ? "messages" : "prompt");
  }
  int64_t promptLength = static_cast<int64_t>(ids->size());
  if (promptLength > server.contextLength) {
    return rejectRequest(server, response, 400,
                         "the prompt has " + std::to_string(promptLength) +
                             " tokens but the model's context holds " +
                             std::to_string(server.contextLength),
                         chat ? "messages" : "prompt");
  }
  int64_t vocab = server.session.executable.model().vocab_size();
  for (auto [id, bias] : request.sampling.logitBias) {
    if (id >= vocab) {
      return rejectRequest(server, response, 400,
                           "logit_bias: token " + std::to_string(id) +
                               " is outside the vocabulary [0, " +
                               std::to_string(vocab) + ")",
                           "logit_bias");
    }
  }
  int64_t room = server.contextLength - promptLength;
  if (request.maxTokens && *request.maxTokens > room) {
    return rejectRequest(server, response, 400,
                         "max_tokens " + std::to_string(*request.maxTokens) +
                             " and the prompt's " +
                             std::to_string(promptLength) +
                             " tokens exceed the model's context of " +
                             std::to_string(server.contextLength),
                         "max_tokens");
  }
  GenerationRequest generation;
  generation.prompt = *ids;
  generation.maxNewTokens = request.maxTokens ? *request.maxTokens
                            : chat            ? room
                                              : std::min<int64_t>(16, room);
  generation.sampling = request.sampling;
  generation.stopIds = server.stopIds;
  // One sequence a choice, choice i seeded with seed + i (greedy ones are
  // alike); a full queue turns the whole request away.
  std::vector<std::shared_ptr<ReplyText>> replies;
  for (int64_t i = 0; i < request.n; ++i) {
    auto job = std::make_shared<Job>();
    job->topLogprobs = request.topLogprobs;
    generation.seed = request.seed + static_cast<uint64_t>(i);
    if (Status status = server.engine.submit(generation, job); !status) {
      for (const auto &earlier : replies) {
        earlier->abandon();
      }
      return replyError(response, 503, status.message(), "server_busy");
    }
    replies.push_back(
        std::make_shared<ReplyText>(job, server.tokenizer, *ids, request.stop));
  }
  std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(number);
  int64_t created = static_cast<int64_t>(std::time(nullptr));
  auto choice = [chat](const std::string &text, const json &finish, bool delta,
                       int64_t index = 0) {
    json result = {{"index", index}, {"finish_reason", finish}};
    if (!chat) {
      result["text"] = text;
      result["logprobs"] = nullptr;
    } else if (delta) {
      result["delta"] = text.empty() ? json::object() : json{{"content", text}};
    } else {
      result["message"] = {{"role", "assistant"}, {"content", text}};
    }
    return result;
  };
  std::string object = chat ? "chat.completion" : "text_completion";
  if (!request.stream) {
    json choices = json::array();
    int64_t completionTokens = 0;
    for (size_t i = 0; i < replies.size(); ++i) {
      const std::shared_ptr<ReplyText> &reply = replies[i];
      bool done = false;
      while (!done) {
        reply->next(std::chrono::milliseconds(1000), done);
      }
      if (!reply->error().empty()) {
        for (const auto &other : replies) {
          other->abandon();
        }
        return replyError(response, 500, reply->error(), "server_error");
      }
      choices.push_back(choice(reply->text(), reply->finishReason(), false,
                               static_cast<int64_t>(i)));
      if (request.topLogprobs >= 0) {
        choices.back()["logprobs"] =
            logprobsJson(server, chat, reply->tokens(), reply->logprobs());
      }
      completionTokens += reply->completionTokens();
    }
    json result = {{"id", id},
                   {"object", object},
                   {"created", created},
                   {"model", server.name},
                   {"choices", std::move(choices)},
                   {"usage", usageOf(promptLength, completionTokens)}};
    response.set_content(dumpJson(result), "application/json");
    return;
  }
  // Streamed: each chunk carries one choice's new text, by its index; the
  // stream ends when every choice has.
  std::string chunkObject = chat ? "chat.completion.chunk" : "text_completion";
  bool includeUsage = request.includeUsage;
  auto started = std::make_shared<bool>(false);
  auto finished = std::make_shared<std::vector<bool>>(replies.size(), false);
  std::string name = server.name;
  // Streamed logprobs: each chunk carries those of the tokens consumed
  // since the last one that carried any (the text may hold some back for a
  // stop string); the last chunk the rest.
  const Server *serving = &server;
  int64_t topLogprobs = request.topLogprobs;
  auto logprobsSent = std::make_shared<std::vector<size_t>>(replies.size(), 0);
  auto withLogprobs = [=](json choice, size_t index) {
    if (topLogprobs < 0) {
      return choice;
    }
    const std::shared_ptr<ReplyText> &reply = replies[index];
    std::vector<TokenLogprobs> logprobs = reply->logprobs();
    std::vector<int32_t> tokens = reply->tokens();
    size_t &sent = (*logprobsSent)[index];
    if (sent < logprobs.size()) {
      choice["logprobs"] = logprobsJson(
          *serving, chat,
          {tokens.begin() + static_cast<ptrdiff_t>(sent),
           tokens.begin() + static_cast<ptrdiff_t>(logprobs.size())},
          {logprobs.begin() + static_cast<ptrdiff_t>(sent), logprobs.end()});
      sent = logprobs.size();
    }
    return choice;
  };
  auto abandonAll = [replies] {
    for (const auto &reply : replies) {
      reply->abandon();
    }
  };
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [=](size_t, httplib::DataSink &sink) {
        auto send = [&](const json &event) {
          std::string line = "data: " + dumpJson(event) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        auto chunk = [&](json choices) {
          return json{{"id", id},
                      {"object", chunkObject},
                      {"created", created},
                      {"model", name},
                      {"choices", std::move(choices)}};
        };
        auto allFinished = [&] {
          return std::all_of(finished->begin(), finished->end(),
                             [](bool done) { return done; });
        };
        if (allFinished()) {
          sink.done();
          return true;
        }
        if (chat && !*started) {
          *started = true;
          for (size_t i = 0; i < replies.size(); ++i) {
            json first = {{"index", i},
                          {"delta", {{"role", "assistant"}, {"content", ""}}},
                          {"finish_reason", nullptr}};
            if (!send(chunk({first}))) {
              abandonAll();
              return false;
            }
          }
        }
        // The choices' waits share one 200 ms round.
        auto wait = std::chrono::milliseconds(
            std::max<int64_t>(1, 200 / static_cast<int64_t>(replies.size())));
        for (size_t i = 0; i < replies.size(); ++i) {
          if ((*finished)[i]) {
            continue;
          }
          const std::shared_ptr<ReplyText> &reply = replies[i];
          bool done = false;
          std::string delta = reply->next(wait, done);
          if (!delta.empty() &&
              !send(chunk({withLogprobs(
                  choice(delta, nullptr, true, static_cast<int64_t>(i)),
                  i)}))) {
            abandonAll(); // the client left: free its slots
            return false;
          }
          if (!done) {
            continue;
          }
          (*finished)[i] = true;
          if (!reply->error().empty()) {
            // One choice failed: the request did.
            abandonAll();
            std::fill(finished->begin(), finished->end(), true);
            send(json{
                {"error",
                 {{"message", reply->error()}, {"type", "server_error"}}}});
            break;
          }
          send(chunk({withLogprobs(
              choice("", reply->finishReason(), true, static_cast<int64_t>(i)),
              i)}));
        }
        if (!allFinished()) {
          return true;
        }
        if (includeUsage) {
          int64_t completionTokens = 0;
          for (const auto &reply : replies) {
            completionTokens += reply->completionTokens();
          }
          json usage = chunk(json::array());
          usage["usage"] = usageOf(promptLength, completionTokens);
          send(usage);
        }
        std::string last = "data: [DONE]\n\n";
        sink.write(last.data(), last.size());
        sink.done();
        return true;
      },
      [abandonAll](bool success) {
        if (!success) {
          abandonAll();
        }
      });
}

std::string metricsText(const Server &server) {
  const Metrics &m = server.metrics;
  std::string text;
  auto add = [&](const char *name, const char *type, const char *help,
                 double value) {
    char number[32];
    std::snprintf(number, sizeof(number), "%.17g", value);
    text += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name +
            " " + type + "\n" + name + " " + number + "\n";
  };
  add("mfserve_requests_total", "counter", "Requests admitted to the queue.",
      static_cast<double>(m.requests.load()));
  add("mfserve_requests_rejected_total", "counter",
      "Requests refused because the queue was full (503).",
      static_cast<double>(m.rejected.load()));
  add("mfserve_requests_finished_total", "counter",
      "Requests that ended by a stop or their length.",
      static_cast<double>(m.finished.load()));
  add("mfserve_requests_cancelled_total", "counter",
      "Requests ended early (client gone, stop string, error).",
      static_cast<double>(m.cancelled.load()));
  add("mfserve_bad_requests_total", "counter", "Requests answered 4xx.",
      static_cast<double>(server.httpErrors.load()));
  add("mfserve_prompt_tokens_total", "counter", "Prompt tokens prefilled.",
      static_cast<double>(m.promptTokens.load()));
  add("mfserve_generation_tokens_total", "counter", "Tokens generated.",
      static_cast<double>(m.generatedTokens.load()));
  add("mfserve_steps_total", "counter", "Engine steps (one entry run each).",
      static_cast<double>(m.steps.load()));
  add("mfserve_decode_steps_total", "counter",
      "Steps that ran the decode entry.",
      static_cast<double>(m.decodeSteps.load()));
  add("mfserve_queue_length", "gauge", "Requests waiting for a slot.",
      static_cast<double>(m.waiting.load()));
  add("mfserve_slots_in_use", "gauge",
      "Sequences running (each holds one KV-cache row).",
      static_cast<double>(m.running.load()));
  add("mfserve_slots", "gauge", "Slots (the model's batch_size).",
      static_cast<double>(server.engine.slots()));
  if (m.kvBlocks.load() > 0) {
    add("mfserve_kv_blocks", "gauge",
        "Blocks of the paged KV cache (model_config.num_blocks).",
        static_cast<double>(m.kvBlocks.load()));
    add("mfserve_kv_blocks_in_use", "gauge",
        "KV blocks held by running sequences.",
        static_cast<double>(m.kvBlocksUsed.load()));
    add("mfserve_prefix_cache_hit_tokens_total", "counter",
        "Tokens found in cached KV blocks (an earlier prompt's, or a "
        "preempted sequence's own), not computed.",
        static_cast<double>(m.prefixHitTokens.load()));
    add("mfserve_preemptions_total", "counter",
        "Sequences preempted for KV blocks (their tokens recomputed).",
        static_cast<double>(m.preemptions.load()));
  }
  add("mfserve_time_to_first_token_seconds_sum", "counter",
      "Seconds from submission to the first token, summed.",
      m.firstTokenSeconds.load());
  add("mfserve_time_to_first_token_seconds_count", "counter",
      "Requests that made a first token.",
      static_cast<double>(m.firstTokens.load()));
  add("mfserve_request_seconds_sum", "counter",
      "Seconds from submission to the end, summed.", m.requestSeconds.load());
  return text;
}

/// Debian's cpp-httplib is built with a listen backlog of 5: a burst of
/// clients overflows it and the kernel resets their connections. Listening
/// again on the bound socket (found by its port) raises the backlog.
void widenListenBacklog(int port) {
  for (int fd = 0; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t length = sizeof(listening);
    sockaddr_storage address{};
    socklen_t addressLength = sizeof(address);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 ||
        !listening ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&address),
                    &addressLength) != 0) {
      continue;
    }
    int bound =
        address.ss_family == AF_INET
            ? ntohs(reinterpret_cast<sockaddr_in *>(&address)->sin_port)
        : address.ss_family == AF_INET6
            ? ntohs(reinterpret_cast<sockaddr_in6 *>(&address)->sin6_port)
            : -1;
    if (bound == port) {
      ::listen(fd, SOMAXCONN);
    }
  }
}

/// The signals that stop the server.
sigset_t stopSignalSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int serve(const Options &options) {
  StatusOr<Executable> executable = Executable::load(options.executable);
  if (!executable) {
    return fail(executable.status());
  }
  ModelSession session(executable.take());
  const fb::ModelInfo &model = session.executable.model();
  // A sharded model runs on its ranks under mpirun: rank 0 serves HTTP,
  // every rank steps the batch (Engine.h).
  std::vector<int64_t> grid;
  if (session.executable.root().grid()) {
    grid.assign(session.executable.root().grid()->begin(),
                session.executable.root().grid()->end());
  }
  StatusOr<std::unique_ptr<Communicator>> started = Communicator::start(grid);
  if (!started) {
    return fail(started.status());
  }
  std::unique_ptr<Communicator> ranks = started.take();
  // A rank that stops before the engine runs stops them all: the others
  // may wait for it in a collective (loading the weights has some).
  auto failAll = [&](const Status &status) {
    int code = fail(status);
    if (ranks->size() > 1) {
      ranks->abort(code);
    }
    return code;
  };
  bool leader = ranks->rank() == 0;
  std::vector<std::string> weightFiles = options.weights;
  if (weightFiles.empty() && !options.initWeights && model.load_checkpoint()) {
    weightFiles.push_back(model.load_checkpoint()->str());
  }
  if (weightFiles.empty() && !options.initWeights) {
    return failUsage(
        "no weights: give --weights FILE|FOLDER, set load_checkpoint "
        "in the YAML, or --init-weights for the deterministic init");
  }
  if (options.mode == "graph") {
    if (Status status = session.loadKernels(options.threads); !status) {
      return failAll(status);
    }
  }
  std::optional<Calibration> calibration;
  if (!options.calibration.empty()) {
    StatusOr<Calibration> read = Calibration::read(options.calibration);
    if (!read) {
      return failAll(read.status());
    }
    calibration = read.take();
  }
  if (Status status = session.loadWeights(
          weightFiles, model.seed(), ranks.get(), /*inPlace=*/false,
          calibration ? &*calibration : nullptr);
      !status) {
    return failAll(status);
  }
  GraphWeightUse use;
  use.panels = use.replaceSources = true; // nothing else reads the weights
  if (Status status = session.startExecutor(options.mode, use, ranks.get());
      !status) {
    return failAll(status);
  }
  // Text is rank 0's: the other ranks see token ids.
  StatusOr<const Tokenizer *> tokenizer =
      leader ? session.loadTokenizer(options.tokenizer)
             : StatusOr<const Tokenizer *>(
                   static_cast<const Tokenizer *>(nullptr));
  if (!tokenizer) {
    return failAll(tokenizer.status());
  }
  int64_t slots = model.batch_size();
  StatusOr<std::unique_ptr<BatchGenerator>> generator = BatchGenerator::create(
      session.executable, *session.executor, options.maxBatchedTokens);
  if (!generator) {
    return failAll(generator.status());
  }
  Metrics metrics;
  Engine engine(**generator, options.maxWaiting, metrics, ranks.get());
  if (!leader) {
    Status status = engine.follow();
    if (!status) {
      std::fprintf(stderr, "mf-serve: error: rank %lld: %s\n",
                   static_cast<long long>(ranks->rank()),
                   status.message().c_str());
      ranks->abort(1);
    }
    return 0;
  }
  std::string name = !options.servedName.empty() ? options.servedName
                     : model.name()              ? model.name()->str()
                                                 : "model";
  Server server{session,          engine,      metrics,
                *tokenizer,       name,        model.seq_length(),
                session.eosIds(), options.seed};

  httplib::Server http;
  int64_t httpThreads = options.httpThreads;
  http.new_task_queue = [httpThreads] {
    return new httplib::ThreadPool(static_cast<size_t>(httpThreads));
  };
  http.set_payload_max_length(16u << 20);
  http.Get("/health",
           [](const httplib::Request &, httplib::Response &response) {
             response.set_content("{\"status\":\"ok\"}", "application/json");
           });
  http.Get("/v1/models",
           [&](const httplib::Request &, httplib::Response &response) {
             json models = {{"object", "list"},
                            {"data",
                             {{{"id", server.name},
                               {"object", "model"},
                               {"created", 0},
                               {"owned_by", "mfc"},
                               {"max_model_len", server.contextLength}}}}};
             response.set_content(dumpJson(models), "application/json");
           });
  http.Get(
      "/metrics", [&](const httplib::Request &, httplib::Response &response) {
        response.set_content(metricsText(server), "text/plain; version=0.0.4");
      });
  http.Post("/v1/completions",
            [&](const httplib::Request &request, httplib::Response &response) {
              handleGeneration(server, request, response, /*chat=*/false);
            });
  http.Post("/v1/chat/completions",
            [&](const httplib::Request &request, httplib::Response &response) {
              handleGeneration(server, request, response, /*chat=*/true);
            });
  http.set_error_handler(
      [](const httplib::Request &, httplib::Response &response) {
        if (response.body.empty()) {
          replyError(
              response, response.status,
              "no such endpoint (POST /v1/completions, /v1/chat/completions; "
              "GET /v1/models, /health, /metrics)",
              "invalid_request_error");
        }
      });

  int port = options.port;
  if (port == 0) {
    port = http.bind_to_any_port(options.host);
  } else if (!http.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port < 0) {
    return fail(Status::error(StatusCode::Unavailable,
                              "cannot listen on " + options.host + ":" +
                                  std::to_string(options.port)));
  }
  widenListenBacklog(port);
  // SIGINT/SIGTERM (blocked in every thread since main) stop the server
  // from a thread of their own.
  sigset_t stopSignals = stopSignalSet();
  std::thread signals([&] {
    int received = 0;
    sigwait(&stopSignals, &received);
    http.stop();
  });
  signals.detach();
  std::thread engineThread([&] { engine.run(); });
  std::fprintf(stderr,
               "mf-serve: serving '%s' on http://%s:%d (%lld slots, context "
               "%lld, %s mode%s)\n",
               name.c_str(), options.host.c_str(), port,
               static_cast<long long>(slots),
               static_cast<long long>(model.seq_length()), options.mode.c_str(),
               ranks->size() > 1
                   ? (", " + std::to_string(ranks->size()) + " ranks").c_str()
                   : "");
  if (!options.portFile.empty()) { // whole or absent: written, then renamed
    std::string temporary = options.portFile + ".tmp";
    FILE *file = std::fopen(temporary.c_str(), "w");
    if (!file || std::fprintf(file, "%d\n", port) < 0 ||
        std::fclose(file) != 0 ||
        std::rename(temporary.c_str(), options.portFile.c_str()) != 0) {
      std::fprintf(stderr, "mf-serve: warning: cannot write --port-file %s\n",
                   options.portFile.c_str());
    }
  }
  http.listen_after_bind();
  engine.stop();
  engineThread.join();
  std::fprintf(stderr, "mf-serve: stopped after %lld requests\n",
               static_cast<long long>(metrics.requests.load()));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // Before any thread starts (the kernel pool's included), so that none
  // but the one that waits for them takes the stop signals.
  sigset_t stopSignals = stopSignalSet();
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  signal(SIGPIPE, SIG_IGN); // a client that left is a failed write
  int exitCode = 0;
  std::optional<Options> options = parseOptions(argc, argv, exitCode);
  if (!options) {
    return exitCode;
  }
  return serve(*options);
}
