//===- ModelSession.cpp - a compiled model loaded once --------------------===//

#include "runtime/session/ModelSession.h"
#include "runtime/kernels/KernelServices.h"

#include "runtime/exec/GraphExecutor.h"
#include "runtime/exec/PyNative.h"
#include "runtime/hal/BlasThread.h"
#include "runtime/text/TokenizerConfig.h"

using namespace mfrt;

Status ModelSession::loadKernels(int64_t threads) {
  MFRT_ASSIGN_OR_RETURN(kernels,
                        KernelLibrary::load(executable, kernelServices()));
  // OpenBLAS's server threads stop before the pool's start: a worker
  // reuses the stack one of them leaves (glibc caches it, its pages still
  // resident) instead of adding its own.
  makeBlasSerial();
  MFRT_ASSIGN_OR_RETURN(pool, ThreadPool::create(threads));
  prepareBlasThreads(*pool); // before the weights: see BlasThread.h
  return Status::ok();
}

Status ModelSession::loadWeights(const std::vector<std::string> &files,
                                 uint64_t seed, Communicator *ranks,
                                 bool inPlace, const Calibration *calibration) {
  MFRT_ASSIGN_OR_RETURN(
      weights,
      files.empty()
          ? Weights::initialize(executable, allocator, seed, ranks, calibration)
          : Weights::load(executable, allocator, files, "optimizer.", ranks,
                          inPlace, calibration));
  return Status::ok();
}

Status ModelSession::startExecutor(const std::string &mode, GraphWeightUse use,
                                   Communicator *ranks) {
  if (mode == "graph") {
    if (!pool) {
      return Status::error(
          "Graph Mode needs the kernel library: load it first");
    }
    auto graph = std::make_unique<GraphExecutor>(executable, weights, allocator,
                                                 kernels, *pool);
    if (use.panels) {
      graph->keepParametersAsPanels();
    }
    if (use.replaceSources) {
      graph->letDerivedValuesReplaceSources();
    }
    executor = std::move(graph);
  } else if (mode == "pynative") {
    executor =
        std::make_unique<PyNativeExecutor>(executable, weights, allocator);
  } else {
    return Status::error(StatusCode::InvalidArgument,
                         "the mode must be pynative or graph, got '" + mode +
                             "'");
  }
  executor->setCommunicator(ranks);
  return Status::ok();
}

std::vector<int32_t> ModelSession::eosIds() const {
  const fb::ModelInfo &model = executable.model();
  return model.eos_token_ids()
             ? std::vector<int32_t>(model.eos_token_ids()->begin(),
                                    model.eos_token_ids()->end())
             : std::vector<int32_t>();
}

StatusOr<const Tokenizer *>
ModelSession::loadTokenizer(const std::string &path) {
  if (tokenizerLoaded) {
    return static_cast<const Tokenizer *>(tokenizer.get());
  }
  const fb::ModelInfo &model = executable.model();
  std::string source = !path.empty()       ? path
                       : model.tokenizer() ? model.tokenizer()->str()
                                           : "";
  if (source.empty()) {
    tokenizerLoaded = true;
    return static_cast<const Tokenizer *>(nullptr);
  }
  StatusOr<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load(
      source, model.tokenizer_class() ? model.tokenizer_class()->str() : "");
  if (!loaded) {
    return loaded.status().withContext(
        path.empty() ? "the YAML's processor.tokenizer (give --tokenizer PATH "
                       "to use another)"
                     : "--tokenizer");
  }
  if ((*loaded)->vocabSize() > model.vocab_size()) {
    return Status::error("tokenizer " + (*loaded)->path() + " has " +
                         std::to_string((*loaded)->vocabSize()) +
                         " tokens but the model's vocabulary is " +
                         std::to_string(model.vocab_size()) +
                         ": it belongs to another model");
  }
  tokenizer = loaded.take();
  tokenizerLoaded = true;
  return static_cast<const Tokenizer *>(tokenizer.get());
}

StatusOr<std::string>
ModelSession::renderChat(const std::vector<ChatMessage> &messages,
                         const std::string &flag) {
  if (!tokenizer) {
    return Status::error(StatusCode::FailedPrecondition,
                         flag +
                             " needs the model's tokenizer: give --tokenizer "
                             "PATH (a Hugging Face model folder) or set "
                             "processor.tokenizer.tokenizer_file in the YAML");
  }
  const fb::ModelInfo &model = executable.model();
  std::string source =
      model.chat_template() ? model.chat_template()->str() : "";
  std::string bos = model.bos_token() ? model.bos_token()->str() : "";
  std::string eos = model.eos_token() ? model.eos_token()->str() : "";
  MFRT_ASSIGN_OR_RETURN(std::optional<TokenizerConfig> config,
                        TokenizerConfig::beside(tokenizer->path()));
  if (config) {
    source = source.empty() ? config->chatTemplate : source;
    bos = bos.empty() ? config->bosToken : bos;
    eos = eos.empty() ? config->eosToken : eos;
  }
  if (source.empty()) {
    return Status::error(
        flag +
        " needs a chat template: set processor.tokenizer.chat_template "
        "in the YAML, or give --tokenizer a Hugging Face folder whose "
        "tokenizer_config.json has one (" +
        (config ? config->path + " has none"
                : "there is none beside " + tokenizer->path()) +
        ")");
  }
  MFRT_ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::parse(source));
  return chat.render(messages, /*addGenerationPrompt=*/true,
                     {{"bos_token", bos}, {"eos_token", eos}});
}
