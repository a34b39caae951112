//===- mf-run.cpp - run an mfc executable ---------------------------------===//
//
//   mf-run model.bin [--mode pynative|graph] [--weights W.safetensors]
//                    [--task predict|eval] [--prompt TEXT | --input-ids 1,2,3]
//                    [--max-new-tokens N] [--dump-logits out.npy] ...
//
// Links only the runtime (no MLIR/LLVM); flags are parsed with getopt_long.
//
//===----------------------------------------------------------------------===//

#include "runtime/base/FileIO.h"
#include "runtime/base/Hash.h"
#include "runtime/exec/GraphExecutor.h"
#include "runtime/exec/PyNative.h"
#include "runtime/format/Executable.h"
#include "runtime/hal/Allocator.h"
#include "runtime/hal/BlasThread.h"
#include "runtime/hal/Communicator.h"
#include "runtime/hal/KernelLibrary.h"
#include "runtime/io/Calibration.h"
#include "runtime/io/Safetensors.h"
#include "runtime/io/Weights.h"
#include "runtime/kernels/KernelServices.h"
#include "runtime/session/BatchGenerator.h"
#include "runtime/session/ModelSession.h"
#include "runtime/session/PrefillPlan.h"
#include "runtime/session/Sampler.h"
#include "runtime/text/ChatTemplate.h"
#include "runtime/text/TokenIds.h"
#include "runtime/text/Tokenizer.h"
#include "runtime/text/TokenizerConfig.h"
#include "tools/mf-run/Dump.h"
#include "tools/mf-run/Fail.h"
#include "tools/mf-run/Train.h"

#include <nlohmann/json.hpp>

#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

using namespace mfrt;
using Clock = std::chrono::steady_clock;

namespace {

/// Bytes as MB with two decimals.
std::string formatMegabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", bytes / 1e6);
  return text;
}

struct Options {
  std::string executable;
  std::string mode;
  std::vector<std::string> weights;
  std::string task;
  std::optional<std::string> prompt;
  /// More than one --prompt, or --prompts-file: generated as one batch.
  std::vector<std::string> prompts;
  std::string promptsFile;
  std::optional<std::string> chat;  ///< a user message through the chat template
  std::optional<std::string> system; ///< its system message
  std::string tokenizer;
  std::optional<std::string> inputIds;
  int64_t maxNewTokens = -1;
  int64_t repeat = 1;
  std::optional<bool> doSample;
  std::optional<int64_t> topK;
  std::optional<double> topP, temperature, repetitionPenalty;
  double presencePenalty = 0.0, frequencyPenalty = 0.0;
  std::optional<uint64_t> seed;
  std::string dumpLogits;
  std::string dumpStepLogits;
  std::string data;
  std::string saveWeights;
  std::string calibration;     ///< activation ranges a calibrated model reads
  std::string saveCalibration; ///< --task calibrate's output
  std::string dumpTensors;
  std::string dumpGrads;
  int64_t steps = -1;
  int64_t saveEvery = 0;
  std::string resume;
  std::string mergeLora;
  int64_t batchSize = -1;
  std::string profile;
  bool checkNumerics = false;
  bool moeStats = false;
  bool check = false;
  bool dump = false;
  bool weightsInPlace = false;
  bool initWeights = false; ///< the deterministic init, said explicitly
  unsigned threads = 0; // graph mode; 0: one per hardware thread
};

void usage(std::ostream &os) {
  os << "USAGE: mf-run model.bin [options]\n\n"
        "  --mode pynative|graph      execution mode (default: the YAML's "
        "context.mode)\n"
        "  --threads N                graph mode: threads for kernel tiles "
        "(default: all)\n"
        "  --weights W.safetensors    parameters (default: the YAML's "
        "load_checkpoint); repeatable:\n"
        "                             base weights, then LoRA adapters\n"
        "  --init-weights             parameters from the deterministic init "
        "(--seed), for tests and\n"
        "                             benchmarks (run_mode train starts so "
        "without weights)\n"
        "  --weights-in-place         serve parameters from the mapped files "
        "where their dtype is\n"
        "                             the model's (no copy: faster start, "
        "pages shared between\n"
        "                             processes; slower kernels on 4 KiB file "
        "pages)\n"
        "  --task predict|eval|train|finetune|calibrate (default: the "
        "YAML's run_mode)\n"
        "  --prompt TEXT              predict: text, through the tokenizer "
        "(or bytes, for a vocabulary of 256);\n"
        "                             repeated: prompts generated together, "
        "one per batch row at a time\n"
        "  --prompts-file F           predict: one prompt per line (or JSONL "
        "{\"prompt\": ...}), as a batch\n"
        "  --tokenizer PATH           a tokenizer.json or a Hugging Face model "
        "folder (default: the YAML's processor.tokenizer)\n"
        "  --chat TEXT [--system S]   predict: a user message through the "
        "model's chat template; prints the reply\n"
        "  --input-ids 1,2,3          predict: token ids\n"
        "  --max-new-tokens N         predict: tokens to generate (default: "
        "32)\n"
        "  --repeat N                 predict: generate N times, report the "
        "median times (benchmarks)\n"
        "  --do-sample / --greedy     override the YAML's do_sample\n"
        "  --top-k K --top-p P --temperature T --repetition-penalty R --seed "
        "S\n"
        "  --presence-penalty P --frequency-penalty F\n"
        "                             OpenAI's penalties in [-2, 2], over the "
        "generated tokens\n"
        "  --dump-logits out.npy      write the logits of every prompt "
        "position "
        "[batch, len, vocab] (f32)\n"
        "  --dump-step-logits out.npy write the logits each new token was "
        "picked from [steps, vocab]\n"
        "  --data FILE                eval, train, calibrate: a text file or "
        "an MFTOKENS file\n"
        "  --save-calibration OUT     calibrate: the range of every Linear's "
        "input channels and every\n"
        "                             attention's keys and values over --data "
        "(a float model: mfc\n"
        "                             --calibration-model)\n"
        "  --calibration FILE         the activation ranges (from --task "
        "calibrate) that quantize a\n"
        "                             smooth_quant model's weights or an int8 "
        "KV cache's scales\n"
        "  --input-ids 1,2,3          train: one sequence as the whole batch "
        "(labels: the ids shifted by one)\n"
        "  --dump-grads G.safetensors train: the first step's gradients, by "
        "parameter name, and the loss as __loss__\n"
        "  --steps N                  train: optimizer steps (default: the "
        "YAML's epochs over --data, 1 for --input-ids)\n"
        "  --save-every K             train: also checkpoint every K steps (W "
        "-> W.stepN.safetensors)\n"
        "  --resume CKPT              train: continue from a checkpoint "
        "written by --save-weights\n"
        "  --merge-lora OUT           write the weights with the LoRA adapters "
        "folded in, and exit\n"
        "  --batch-size B             train: must equal the compiled batch "
        "(shapes are static)\n"
        "  --save-weights W           write the parameters as safetensors "
        "(train: "
        "a checkpoint with the optimizer state, at the end)\n"
        "  --dump-tensors DIR         write every intermediate as .npy\n"
        "  --profile trace.json       Chrome trace, one slice per op\n"
        "  --check-numerics           stop at the first op producing NaN/Inf\n"
        "  --moe-stats                print the (token, choice) pairs each "
        "expert\n"
        "                             of each routed layer received, and "
        "those dropped\n"
        "  --check                    run prefill in both modes, compare "
        "every\n"
        "                             kernel's outputs, name the first that "
        "differs\n"
        "  --dump                     print the executable and exit\n";
}


/// The ranks of a sharded program (one, without MPI, for any other).
std::unique_ptr<Communicator> ranks;

/// Rank 0 writes what every rank holds whole (logits, the trace) and
/// prints notes and summaries; the others compute it too (the same
/// collectives) and print only their errors.
bool primaryRank() { return !ranks || ranks->rank() == 0; }

/// The most tokens a count flag takes (--max-new-tokens, --top-k): beyond
/// any sequence or vocabulary, far below what overflows.
constexpr double kMaxTokens = 1 << 30;

std::string formatBound(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// A finite number, the whole text.
bool parseNumber(const char *text, double &out) {
  char *rest = nullptr;
  errno = 0;
  out = std::strtod(text, &rest);
  return *text && *rest == '\0' && errno == 0 && std::isfinite(out);
}

std::optional<Options> parseOptions(int argc, char **argv, int &exitCode) {
  enum {
    kMode = 256,
    kWeights,
    kTask,
    kPrompt,
    kPromptsFile,
    kInputIds,
    kMaxNewTokens,
    kRepeat,
    kDoSample,
    kGreedy,
    kTopK,
    kTopP,
    kTemperature,
    kRepetitionPenalty,
    kPresencePenalty,
    kFrequencyPenalty,
    kSeed,
    kDumpLogits,
    kDumpStepLogits,
    kData,
    kSaveWeights,
    kDumpTensors,
    kProfile,
    kCheckNumerics,
    kMoeStats,
    kCheck,
    kDump,
    kThreads,
    kDumpGrads,
    kSteps,
    kSaveEvery,
    kResume,
    kMergeLora,
    kBatchSize,
    kTokenizer,
    kChat,
    kSystem,
    kWeightsInPlace,
    kInitWeights,
    kCalibration,
    kSaveCalibration,
    kHelp
  };
  static const option longOptions[] = {
      {"mode", required_argument, nullptr, kMode},
      {"weights", required_argument, nullptr, kWeights},
      {"weights-in-place", no_argument, nullptr, kWeightsInPlace},
      {"init-weights", no_argument, nullptr, kInitWeights},
      {"calibration", required_argument, nullptr, kCalibration},
      {"save-calibration", required_argument, nullptr, kSaveCalibration},
      {"task", required_argument, nullptr, kTask},
      {"prompt", required_argument, nullptr, kPrompt},
      {"prompts-file", required_argument, nullptr, kPromptsFile},
      {"input-ids", required_argument, nullptr, kInputIds},
      {"max-new-tokens", required_argument, nullptr, kMaxNewTokens},
      {"repeat", required_argument, nullptr, kRepeat},
      {"do-sample", no_argument, nullptr, kDoSample},
      {"greedy", no_argument, nullptr, kGreedy},
      {"top-k", required_argument, nullptr, kTopK},
      {"top-p", required_argument, nullptr, kTopP},
      {"temperature", required_argument, nullptr, kTemperature},
      {"repetition-penalty", required_argument, nullptr, kRepetitionPenalty},
      {"presence-penalty", required_argument, nullptr, kPresencePenalty},
      {"frequency-penalty", required_argument, nullptr, kFrequencyPenalty},
      {"seed", required_argument, nullptr, kSeed},
      {"dump-logits", required_argument, nullptr, kDumpLogits},
      {"dump-step-logits", required_argument, nullptr, kDumpStepLogits},
      {"data", required_argument, nullptr, kData},
      {"save-weights", required_argument, nullptr, kSaveWeights},
      {"dump-tensors", required_argument, nullptr, kDumpTensors},
      {"profile", required_argument, nullptr, kProfile},
      {"check-numerics", no_argument, nullptr, kCheckNumerics},
      {"moe-stats", no_argument, nullptr, kMoeStats},
      {"check", no_argument, nullptr, kCheck},
      {"dump", no_argument, nullptr, kDump},
      {"threads", required_argument, nullptr, kThreads},
      {"dump-grads", required_argument, nullptr, kDumpGrads},
      {"steps", required_argument, nullptr, kSteps},
      {"save-every", required_argument, nullptr, kSaveEvery},
      {"resume", required_argument, nullptr, kResume},
      {"merge-lora", required_argument, nullptr, kMergeLora},
      {"batch-size", required_argument, nullptr, kBatchSize},
      {"tokenizer", required_argument, nullptr, kTokenizer},
      {"chat", required_argument, nullptr, kChat},
      {"system", required_argument, nullptr, kSystem},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0}};
  Options options;
  exitCode = kUsageExit;
  int code;
  opterr = 0;
  while ((code = getopt_long(argc, argv, "h", longOptions, nullptr)) != -1) {
    double number = 0;
    auto numeric = [&](const char *flag) {
      if (!parseNumber(optarg, number)) {
        fail(std::string("--") + flag + " expects a number, got '" + optarg +
             "'");
        return false;
      }
      return true;
    };
    // A whole number in [low, high] for `flag`, into `number`.
    auto wholeNumber = [&](const char *flag, double low, double high) {
      if (!numeric(flag)) {
        return false;
      }
      if (number < low || number > high || number != std::floor(number)) {
        fail(std::string("--") + flag + " must be a whole number from " +
             std::to_string(static_cast<long long>(low)) + " to " +
             std::to_string(static_cast<long long>(high)));
        return false;
      }
      return true;
    };
    // A number in (low, high] (as the YAML's keys are checked), into `number`.
    auto numberAbove = [&](const char *flag, double low, double high) {
      if (!numeric(flag)) {
        return false;
      }
      if (number <= low || number > high) {
        fail(std::string("--") + flag + " must be greater than " +
             formatBound(low) +
             (std::isfinite(high) ? " and at most " + formatBound(high) : "") +
             ", got " + optarg);
        return false;
      }
      return true;
    };
    switch (code) {
    case kMode:
      options.mode = optarg;
      break;
    case kWeights:
      options.weights.push_back(optarg);
      break;
    case kTask:
      options.task = optarg;
      break;
    case kPrompt:
      options.prompts.push_back(optarg);
      break;
    case kPromptsFile:
      options.promptsFile = optarg;
      break;
    case kInputIds:
      options.inputIds = optarg;
      break;
    case kTokenizer:
      options.tokenizer = optarg;
      break;
    case kChat:
      options.chat = optarg;
      break;
    case kSystem:
      options.system = optarg;
      break;
    case kThreads:
      if (!wholeNumber("threads", 1, 1024)) {
        return std::nullopt;
      }
      options.threads = static_cast<unsigned>(number);
      break;
    case kMaxNewTokens:
      if (!wholeNumber("max-new-tokens", 0, kMaxTokens)) {
        return std::nullopt;
      }
      options.maxNewTokens = static_cast<int64_t>(number);
      break;
    case kRepeat:
      if (!wholeNumber("repeat", 1, 1000)) {
        return std::nullopt;
      }
      options.repeat = static_cast<int64_t>(number);
      break;
    case kDoSample:
      options.doSample = true;
      break;
    case kGreedy:
      options.doSample = false;
      break;
    case kTopK:
      if (!wholeNumber("top-k", 0, kMaxTokens)) {
        return std::nullopt;
      }
      options.topK = static_cast<int64_t>(number);
      break;
    case kTopP:
      if (!numberAbove("top-p", 0, 1)) {
        return std::nullopt;
      }
      options.topP = number;
      break;
    case kTemperature:
      if (!numberAbove("temperature", 0, INFINITY)) {
        return std::nullopt;
      }
      options.temperature = number;
      break;
    case kRepetitionPenalty:
      if (!numberAbove("repetition-penalty", 0, INFINITY)) {
        return std::nullopt;
      }
      options.repetitionPenalty = number;
      break;
    case kPresencePenalty:
    case kFrequencyPenalty: {
      const char *flag =
          code == kPresencePenalty ? "presence-penalty" : "frequency-penalty";
      if (!numeric(flag)) {
        return std::nullopt;
      }
      if (!(number >= -2.0 && number <= 2.0)) {
        fail(std::string("--") + flag + " must be from -2 to 2, got " + optarg);
        return std::nullopt;
      }
      (code == kPresencePenalty ? options.presencePenalty
                                : options.frequencyPenalty) = number;
      break;
    }
    case kSeed: {
      // Every 64-bit seed, exactly (a double would round above 2^53).
      uint64_t seed = 0;
      const char *end = optarg + std::strlen(optarg);
      auto [stop, error] = std::from_chars(optarg, end, seed);
      if (!*optarg || error != std::errc() || stop != end) {
        fail(std::string("--seed must be a whole number from 0 to 2^64 - 1, "
                         "got '") + optarg + "'");
        return std::nullopt;
      }
      options.seed = seed;
      break;
    }
    case kDumpLogits:
      options.dumpLogits = optarg;
      break;
    case kDumpStepLogits:
      options.dumpStepLogits = optarg;
      break;
    case kDumpGrads:
      options.dumpGrads = optarg;
      break;
    case kSteps:
    case kSaveEvery:
      if (!numeric(code == kSteps ? "steps" : "save-every")) {
        return std::nullopt;
      }
      if (number < 1 || number != std::floor(number)) {
        fail(std::string("--") + (code == kSteps ? "steps" : "save-every") +
             " must be a whole number of at least 1");
        return std::nullopt;
      }
      (code == kSteps ? options.steps : options.saveEvery) =
          static_cast<int64_t>(number);
      break;
    case kResume:
      options.resume = optarg;
      break;
    case kMergeLora:
      options.mergeLora = optarg;
      break;
    case kBatchSize:
      if (!numeric("batch-size")) {
        return std::nullopt;
      }
      if (number < 1 || number != std::floor(number)) {
        fail("--batch-size must be a whole number of at least 1");
        return std::nullopt;
      }
      options.batchSize = static_cast<int64_t>(number);
      break;
    case kData:
      options.data = optarg;
      break;
    case kSaveWeights:
      options.saveWeights = optarg;
      break;
    case kDumpTensors:
      options.dumpTensors = optarg;
      break;
    case kProfile:
      options.profile = optarg;
      break;
    case kCheckNumerics:
      options.checkNumerics = true;
      break;
    case kMoeStats:
      options.moeStats = true;
      break;
    case kCheck:
      options.check = true;
      break;
    case kDump:
      options.dump = true;
      break;
    case kWeightsInPlace:
      options.weightsInPlace = true;
      break;
    case kInitWeights:
      options.initWeights = true;
      break;
    case kCalibration:
      options.calibration = optarg;
      break;
    case kSaveCalibration:
      options.saveCalibration = optarg;
      break;
    case 'h':
    case kHelp:
      usage(std::cout);
      exitCode = 0;
      return std::nullopt;
    default:
      fail(std::string("unknown option '") + argv[optind - 1] +
           "' (see mf-run --help)");
      return std::nullopt;
    }
  }
  if (optind + 1 != argc) {
    fail("expected exactly one executable (model.bin); see mf-run --help");
    return std::nullopt;
  }
  if (options.prompts.size() == 1 && options.promptsFile.empty()) {
    options.prompt = options.prompts.front();
    options.prompts.clear();
  }
  bool batch = !options.prompts.empty() || !options.promptsFile.empty();
  if (!!options.prompt + !!options.chat + !!options.inputIds + batch > 1) {
    fail("give one of --prompt (repeated: a batch), --prompts-file, --chat "
         "and --input-ids");
    return std::nullopt;
  }
  if (batch && (options.repeat != 1 || !options.dumpLogits.empty())) {
    fail("--repeat and --dump-logits take one prompt, not a batch");
    return std::nullopt;
  }
  if (options.system && !options.chat) {
    fail("--system goes with --chat");
    return std::nullopt;
  }
  if (options.initWeights && !options.weights.empty()) {
    fail("give --weights or --init-weights, not both");
    return std::nullopt;
  }
  options.executable = argv[optind];
  return options;
}

/// What decides a run's collectives and values, compared over the ranks
/// before the first collective (Communicator::checkAgreement): ranks given
/// different model.bin files, weights, data or flags would otherwise mix
/// checkpoints, corrupt a collective's buffers or wait forever.
Status checkRanksAgree(const Options &options, const Executable &executable,
                       const std::string &mode, const std::string &task,
                       const std::vector<std::string> &weightFiles) {
  if (!ranks || ranks->size() == 1) {
    return Status::ok();
  }
  auto text = [](const std::string &value) {
    return fnv1a64(value.data(), value.size());
  };
  uint64_t weights = 0;
  for (const std::string &given : weightFiles) {
    StatusOr<std::vector<std::string>> files = checkpointFiles(given);
    for (const std::string &file : files ? *files : std::vector<std::string>{given}) {
      weights = weights * 31 + fileFingerprint(file);
    }
  }
  std::string sampling =
      std::to_string(options.doSample.value_or(-1)) + " " +
      std::to_string(options.topK.value_or(-1)) + " " +
      std::to_string(options.topP.value_or(-1)) + " " +
      std::to_string(options.temperature.value_or(-1)) + " " +
      std::to_string(options.repetitionPenalty.value_or(-1)) + " " +
      std::to_string(options.presencePenalty) + " " +
      std::to_string(options.frequencyPenalty) + " " +
      std::to_string(options.seed.value_or(executable.model().seed()));
  std::string input = options.prompt.value_or("") + "\x1f" +
                      options.chat.value_or("") + "\x1f" +
                      options.system.value_or("") + "\x1f" +
                      options.inputIds.value_or("");
  return ranks->checkAgreement({
      {"model.bin", executable.checksum()},
      {"--mode", text(mode)},
      {"--task", text(task)},
      {"weights", weights},
      {"--data", options.data.empty() ? 0 : fileFingerprint(options.data)},
      {"--steps", static_cast<uint64_t>(options.steps)},
      {"--batch-size", static_cast<uint64_t>(options.batchSize)},
      {"--max-new-tokens", static_cast<uint64_t>(options.maxNewTokens)},
      {"prompt or input ids", text(input)},
      {"sampling flags and seed", text(sampling)},
  });
}

/// Everything a task needs.
/// The loaded model and what this run adds to it.
struct Session : ModelSession {
  explicit Session(Executable loaded) : ModelSession(std::move(loaded)) {}

  RunOptions runOptions;
  std::vector<std::string> traceEvents;
  MoeStats moeStats;
};

/// The tokenizer of --tokenizer, else of the YAML's processor.tokenizer;
/// null when neither names one.
StatusOr<const Tokenizer *> tokenizerOf(const Options &options,
                                        Session &session) {
  return session.loadTokenizer(options.tokenizer);
}

/// `--system` and `--chat` through the model's chat template.
StatusOr<std::string> chatPrompt(const Options &options, Session &session) {
  std::vector<ChatMessage> messages;
  if (options.system) {
    messages.push_back({"system", *options.system});
  }
  messages.push_back({"user", *options.chat});
  return session.renderChat(messages, "--chat");
}

/// Text to ids: the tokenizer's, or bytes for a model without one.
/// `addSpecialTokens`: the tokenizer's BOS and the like (prompts).
StatusOr<std::vector<int32_t>> encodeText(const Options &options,
                                          Session &session,
                                          const std::string &text,
                                          bool addSpecialTokens,
                                          const std::string &what) {
  StatusOr<const Tokenizer *> tokenizer = tokenizerOf(options, session);
  if (!tokenizer) {
    return tokenizer.status();
  }
  int64_t vocab = session.executable.model().vocab_size();
  if (*tokenizer) {
    StatusOr<std::vector<int32_t>> ids =
        (*tokenizer)->encode(text, addSpecialTokens);
    return ids ? ids : ids.status().withContext(what);
  }
  if (vocab > 256 && what == "--prompt") {
    return Status::error(
        "--prompt needs this model's tokenizer (its vocabulary has " +
        std::to_string(vocab) +
        " tokens, not 256 bytes): give --tokenizer PATH (a tokenizer.json "
        "or a Hugging Face model folder), set processor.tokenizer."
        "tokenizer_file in the YAML, or pass --input-ids 1,2,3");
  }
  if (vocab > 256 && primaryRank()) {
    std::fprintf(stderr,
                 "mf-run: note: no tokenizer: %s is read as bytes (ids "
                 "0-255) of this model's %lld; give --tokenizer PATH for "
                 "its own tokens\n",
                 what.c_str(), static_cast<long long>(vocab));
  }
  return encodeBytes(text, vocab);
}

int writeTrace(const Options &options, const Session &session) {
  if (options.profile.empty() || !primaryRank()) {
    return 0;
  }
  Status status = writeFileAtomically(options.profile, "profile", [&](FileWriter &out) {
    out.write("{\"traceEvents\":[\n");
    for (size_t i = 0; i < session.traceEvents.size(); ++i) {
      out.write(session.traceEvents[i]);
      out.write(i + 1 < session.traceEvents.size() ? ",\n" : "\n");
    }
    out.write("]}\n");
    return Status::ok();
  });
  if (!status) {
    return fail(status);
  }
  std::cerr << "mf-run: wrote " << session.traceEvents.size()
            << " op slices to " << options.profile << "\n";
  return 0;
}

/// Writes logits[:, :length, :] of a [batch, seq, vocab] tensor.
Status dumpLogits(const std::string &path, const Tensor &logits,
                  int64_t length, Allocator &allocator) {
  int64_t batch = logits.dim(0), seq = logits.dim(1), vocab = logits.dim(2);
  StatusOr<Tensor> prefix = allocator.allocate(DType::F32, {batch, length, vocab});
  if (!prefix) {
    return prefix.status();
  }
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < length * vocab; ++i) {
      prefix->as<float>()[b * length * vocab + i] =
          logits.loadFloat(b * seq * vocab + i);
    }
  }
  return writeNpy(path, *prefix);
}

/// The YAML's generation settings, overridden by the flags.
SamplingOptions samplingOf(const Options &options, const fb::ModelInfo &model) {
  SamplingOptions sampling;
  sampling.doSample = options.doSample.value_or(model.do_sample());
  sampling.topK = options.topK.value_or(model.top_k());
  sampling.topP = options.topP.value_or(model.top_p());
  sampling.temperature = options.temperature.value_or(model.temperature());
  sampling.repetitionPenalty =
      options.repetitionPenalty.value_or(model.repetition_penalty());
  sampling.presencePenalty = options.presencePenalty;
  sampling.frequencyPenalty = options.frequencyPenalty;
  return sampling;
}

/// The prompts of --prompts-file: one a line, or JSONL objects with a
/// "prompt" string; blank lines skipped.
StatusOr<std::vector<std::string>> readPrompts(const std::string &path) {
  MFRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                        readRegularFile(path, "--prompts-file", 64u << 20));
  std::string text(bytes.begin(), bytes.end());
  std::vector<std::string> prompts;
  size_t start = 0, number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end;
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.find_first_not_of(" \t") == std::string::npos) {
      continue;
    }
    if (line.front() == '{') {
      nlohmann::json object = nlohmann::json::parse(line, nullptr, false);
      if (object.is_discarded() || !object.is_object() ||
          !object.contains("prompt") || !object["prompt"].is_string()) {
        return Status::error(StatusCode::InvalidArgument,
                             path + ":" + std::to_string(number) +
                                 ": a JSON line must be an object with a "
                                 "\"prompt\" string");
      }
      line = object["prompt"].get<std::string>();
    }
    prompts.push_back(line);
  }
  if (prompts.empty()) {
    return Status::error(StatusCode::InvalidArgument,
                         "--prompts-file " + path + " has no prompts");
  }
  return prompts;
}

/// Several prompts generated together (BatchGenerator.h): each batch row
/// is a sequence of its own, rows join as others end. Prints each prompt's
/// text and what it generated, one per line, in the order given; each
/// equals what a run with that prompt alone prints.
int predictBatch(const Options &options, Session &session) {
  const fb::ModelInfo &model = session.executable.model();
  int64_t vocab = model.vocab_size();
  std::vector<std::string> texts = options.prompts;
  if (!options.promptsFile.empty()) {
    StatusOr<std::vector<std::string>> read = readPrompts(options.promptsFile);
    if (!read) {
      return fail(read.status());
    }
    texts = read.take();
  }
  StatusOr<std::unique_ptr<BatchGenerator>> generator =
      BatchGenerator::create(session.executable, *session.executor,
                             /*maxBatchedTokens=*/0, session.runOptions);
  if (!generator) {
    return fail(generator.status());
  }
  StatusOr<const Tokenizer *> tokenizer = tokenizerOf(options, session);
  if (!tokenizer) {
    return fail(tokenizer.status());
  }
  std::vector<int32_t> stopIds = session.eosIds();
  size_t count = texts.size();
  std::vector<std::vector<int32_t>> prompts(count), generated(count);
  std::vector<std::vector<float>> stepLogits(count);
  for (size_t i = 0; i < count; ++i) {
    StatusOr<std::vector<int32_t>> ids = encodeText(
        options, session, texts[i], /*addSpecialTokens=*/true, "--prompt");
    if (!ids) {
      return fail(ids.status());
    }
    prompts[i] = ids.take();
    GenerationRequest request;
    request.prompt = prompts[i];
    request.maxNewTokens =
        options.maxNewTokens >= 0 ? options.maxNewTokens : 32;
    request.sampling = samplingOf(options, model);
    request.seed = options.seed.value_or(model.seed());
    request.stopIds = stopIds;
    bool keepLogits = !options.dumpStepLogits.empty();
    StatusOr<int64_t> added =
        (*generator)
            ->add(std::move(request),
                  [&, i, keepLogits](const GenerationEvent &event) {
                    if (keepLogits && event.logits) {
                      stepLogits[i].insert(stepLogits[i].end(), event.logits,
                                           event.logits + vocab);
                    }
                    if (event.token) {
                      generated[i].push_back(*event.token);
                    }
                  });
    if (!added) {
      return fail(
          added.status().withContext("prompt " + std::to_string(i + 1)));
    }
  }
  auto start = Clock::now();
  while ((*generator)->busy()) {
    if (Status status = (*generator)->step(); !status) {
      return fail(status);
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t i = 0; i < count; ++i) {
    if (*tokenizer) {
      // As a single run streams it: the prompt, then the new text.
      TokenStreamDecoder stream(**tokenizer, prompts[i]);
      StatusOr<std::string> text = (*tokenizer)->decodeText(prompts[i], true);
      if (!text) {
        return fail(text.status());
      }
      std::string line = *text;
      for (int32_t id : generated[i]) {
        StatusOr<std::string> piece = stream.push(id);
        if (!piece) {
          return fail(piece.status());
        }
        line += *piece;
      }
      StatusOr<std::string> rest = stream.finish();
      if (!rest) {
        return fail(rest.status());
      }
      std::cout << line << *rest << "\n";
    } else {
      std::cout << decodeBytes(prompts[i]) << decodeBytes(generated[i]) << "\n";
    }
  }
  std::cout.flush();
  if (!options.dumpStepLogits.empty()) {
    // Every prompt's steps, in prompt order: [sum of steps, vocab].
    std::vector<float> rows;
    for (const std::vector<float> &logits : stepLogits) {
      rows.insert(rows.end(), logits.begin(), logits.end());
    }
    Tensor table(DType::F32, {static_cast<int64_t>(rows.size()) / vocab, vocab},
                 std::shared_ptr<void>(rows.data(), [](void *) {}));
    if (Status status = writeNpy(options.dumpStepLogits, table); !status) {
      return fail(status);
    }
  }
  const GenerationStats &stats = (*generator)->stats();
  std::fprintf(stderr,
               "mf-run: %zu prompts on %lld slots: %lld prompt and %lld "
               "generated tokens in %.1f ms (%.1f generated tokens/s), %lld "
               "steps (%lld decode)\n",
               count, static_cast<long long>((*generator)->slots()),
               static_cast<long long>(stats.promptTokens),
               static_cast<long long>(stats.generatedTokens), seconds * 1e3,
               stats.generatedTokens / std::max(seconds, 1e-9),
               static_cast<long long>(stats.steps),
               static_cast<long long>(stats.decodeSteps));
  if (stats.kvBlocks > 0) {
    std::fprintf(
        stderr,
        "mf-run: paged KV cache: %lld blocks of %lld, at most %lld "
        "held; %lld tokens found in cached blocks, not computed; %lld "
        "preemptions (recomputed)\n",
        static_cast<long long>(stats.kvBlocks),
        static_cast<long long>(session.executable.model().kv_block_size()),
        static_cast<long long>(stats.kvBlocksPeak),
        static_cast<long long>(stats.prefixHitTokens),
        static_cast<long long>(stats.preemptions));
  }
  return writeTrace(options, session);
}

int predict(const Options &options, Session &session) {
  if (!options.prompts.empty() || !options.promptsFile.empty()) {
    return predictBatch(options, session);
  }
  const fb::ModelInfo &model = session.executable.model();
  int64_t vocab = model.vocab_size(), seqLength = model.seq_length();
  int64_t batch = model.batch_size();
  std::optional<std::string> chatText;
  if (options.chat) {
    StatusOr<const Tokenizer *> tokenizer = tokenizerOf(options, session);
    if (!tokenizer) {
      return fail(tokenizer.status());
    }
    if (!*tokenizer) {
      return failUsage(
          "--chat needs the model's tokenizer: give --tokenizer PATH "
          "(a Hugging Face model folder) or set "
          "processor.tokenizer.tokenizer_file in the YAML");
    }
    StatusOr<std::string> text = chatPrompt(options, session);
    if (!text) {
      return fail(text.status());
    }
    chatText = text.take();
  }
  StatusOr<std::vector<int32_t>> prompt =
      options.inputIds ? parseIds(*options.inputIds, vocab)
      : chatText ? encodeText(options, session, *chatText,
                              /*addSpecialTokens=*/false, "--chat")
      : options.prompt
          ? encodeText(options, session, *options.prompt,
                       /*addSpecialTokens=*/true, "--prompt")
          : StatusOr<std::vector<int32_t>>(Status::error(
                "predict needs --prompt TEXT, --chat TEXT or --input-ids 1,2,3"));
  if (!prompt) {
    return fail(prompt.status());
  }
  std::vector<int32_t> tokens = prompt.take();
  if (tokens.empty()) {
    return fail(StatusCode::InvalidArgument, "the prompt is empty");
  }
  if (static_cast<int64_t>(tokens.size()) > seqLength) {
    return fail(StatusCode::InvalidArgument,
                "the prompt has " + std::to_string(tokens.size()) +
                    " tokens but seq_length is " + std::to_string(seqLength) +
                    "; shorten it or compile with --set "
                    "model.model_config.seq_length=N");
  }
  int64_t promptLength = tokens.size();
  int64_t maxNew = options.maxNewTokens >= 0 ? options.maxNewTokens : 32;
  maxNew = std::min(maxNew, seqLength - promptLength);

  Sampler sampler(samplingOf(options, model),
                  options.seed.value_or(model.seed()));
  const std::vector<int32_t> eosIds = session.eosIds();
  auto isEos = [&](int32_t id) {
    return std::find(eosIds.begin(), eosIds.end(), id) != eosIds.end();
  };

  Executor &executor = *session.executor;
  // With a KV cache, the prompt runs as chunks of the compiled prefill
  // widths (mfc --prefill-lengths) with the least padded work
  // (PrefillPlan.h); without, through `prefill` (seq_length).
  const std::vector<PrefillEntry> prefills =
      prefillEntries(session.executable, /*rows=*/false);
  std::vector<PrefillChunk> prefillPlan;
  if (model.use_past()) {
    prefillPlan = planPrefill(prefills, 0, promptLength, seqLength);
  } else {
    for (const PrefillEntry &entry : prefills) {
      if (entry.name == "prefill") {
        prefillPlan.push_back({&entry, 0, promptLength});
      }
    }
  }
  if (prefillPlan.empty()) { // `prefill` holds any prompt checked above
    return fail(StatusCode::Internal, "no prefill entry holds a prompt of " +
                                          std::to_string(promptLength) +
                                          " tokens");
  }
  std::string prefillEntry;
  for (const PrefillChunk &chunk : prefillPlan) {
    prefillEntry += (prefillEntry.empty() ? "" : "+") + chunk.entry->name;
  }
  // Token ids [batch, width]: every row holds the same sequence, padded.
  auto fillIds = [&](Tensor &ids, const std::vector<int32_t> &sequence,
                     int64_t width) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < width; ++i) {
        ids.as<int32_t>()[b * width + i] =
            i < static_cast<int64_t>(sequence.size())
                ? sequence[i]
                : static_cast<int32_t>(model.pad_token_id());
      }
    }
  };
  // One position per batch row, every row the same here.
  auto fillPositions = [&](Tensor &positions, int64_t position) {
    std::fill_n(positions.as<int32_t>(), positions.numElements(),
                static_cast<int32_t>(position));
  };
  // A paged KV cache: every row computes the same tokens and only row 0's
  // are read, so row 0 holds blocks 0, 1, ... (the pool has a sequence's
  // worth) and the other rows none (nothing of theirs is written).
  const bool paged = model.kv_block_size() > 0;
  auto fillBlockTables = [&](Tensor &tables) {
    int32_t *entries = tables.as<int32_t>();
    std::fill_n(entries, tables.numElements(), -1);
    std::iota(entries, entries + tables.dim(1), 0);
  };
  auto runEntry = [&](const std::string &name, std::vector<Tensor> inputs)
      -> StatusOr<std::vector<Tensor>> {
    return executor.run(name, std::move(inputs), session.runOptions);
  };

  // --repeat: the same generation again from the prompt (a benchmark's
  // warm runs); the output is the last run's, the times are medians.
  std::vector<double> prefillTimes, decodeTimes;
  // A text prompt through a tokenizer: the text streams out as it is made.
  const Tokenizer *textTokenizer = nullptr;
  if (options.prompt || chatText) {
    StatusOr<const Tokenizer *> tokenizer = tokenizerOf(options, session);
    textTokenizer = tokenizer ? *tokenizer : nullptr;
  }
  std::optional<TokenStreamDecoder> stream;
  auto print = [](const std::string &text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  std::vector<int32_t> generated;
  std::vector<float> stepLogits; // the row each token was picked from
  Tensor decodeIds, decodePast, decodeTables;
  for (int64_t run = 0; run < options.repeat; ++run) {
    tokens.resize(promptLength);
    // Prefill, chunk by chunk: each continues the caches the last wrote.
    std::vector<Tensor> state;
    auto prefillStart = Clock::now();
    for (const PrefillChunk &chunk : prefillPlan) {
      const std::string &name = chunk.entry->name;
      // ids, past_length (with a cache) and logits_position, then the
      // caches: zero for the first call, a later one's what the call before
      // it wrote (its outputs: logits, then the caches).
      const size_t firstCache = model.use_past() ? 3 + paged : 2;
      const size_t count = session.executable.entry(name)->inputs()->size();
      std::vector<Tensor> inputs;
      for (size_t i = 0; i < count; ++i) {
        if (i >= firstCache && !state.empty()) {
          inputs.push_back(std::move(state[1 + i - firstCache]));
          continue;
        }
        StatusOr<Tensor> input = executor.allocateInput(name, i);
        if (!input) {
          return fail(input.status());
        }
        inputs.push_back(input.take());
      }
      std::vector<int32_t> piece(tokens.begin() + chunk.past,
                                 tokens.begin() + chunk.past + chunk.tokens);
      fillIds(inputs[0], piece, inputs[0].dim(1));
      if (model.use_past()) {
        fillPositions(inputs[1], chunk.past); // past_length
      }
      fillPositions(inputs[2 - !model.use_past()], chunk.tokens - 1);
      if (paged) {
        fillBlockTables(inputs[3]);
      }
      StatusOr<std::vector<Tensor>> outputs = runEntry(name, std::move(inputs));
      if (!outputs) {
        return fail(outputs.status());
      }
      state = outputs.take();
    }
    prefillTimes.push_back(
        std::chrono::duration<double>(Clock::now() - prefillStart).count());
    if (!options.dumpLogits.empty() && run == 0) {
      // Prefill returns the last prompt position's logits; the `logits`
      // entry, every position's.
      StatusOr<std::vector<Tensor>> all = executor.allocateInputs("logits");
      if (all) {
        fillIds((*all)[0], tokens, seqLength);
        all = runEntry("logits", all.take());
      }
      Status status = !all          ? all.status()
                      : !primaryRank() ? Status::ok()
                                       : dumpLogits(options.dumpLogits, (*all)[0],
                                                    promptLength, session.allocator);
      if (!status) {
        return fail(status);
      }
    }

    generated.clear();
    stepLogits.clear();
    if (textTokenizer && run + 1 == options.repeat) {
      std::vector<int32_t> promptIds(tokens.begin(), tokens.begin() + promptLength);
      // A chat prints the reply alone; a prompt, itself and what follows.
      if (!chatText) {
        StatusOr<std::string> text = textTokenizer->decodeText(promptIds, true);
        if (!text) {
          return fail(text.status());
        }
        print(*text);
      }
      stream.emplace(*textTokenizer, std::move(promptIds));
    }
    auto decodeStart = Clock::now();
    Tensor logits = state[0]; // [batch, 1, vocab]
    for (int64_t step = 0; step < maxNew; ++step) {
      const float *row = logits.as<float>(); // batch 0's
      if (!options.dumpStepLogits.empty()) {
        stepLogits.insert(stepLogits.end(), row, row + vocab);
      }
      int32_t next = sampler.next(row, vocab, tokens, promptLength);
      generated.push_back(next);
      tokens.push_back(next);
      if (stream) {
        StatusOr<std::string> piece = stream->push(next);
        if (!piece) {
          return fail(piece.status());
        }
        print(*piece);
      }
      if (isEos(next) || step + 1 == maxNew) {
        break;
      }
      if (model.use_past()) {
        // ids and past_length are new (in tensors allocated once: a run
        // lets go of its inputs); the caches are the last step's.
        if (!decodeIds.data()) {
          StatusOr<Tensor> ids = executor.allocateInput("decode", 0);
          StatusOr<Tensor> past = executor.allocateInput("decode", 1);
          if (!ids || !past) {
            return fail(!ids ? ids.status() : past.status());
          }
          decodeIds = ids.take();
          decodePast = past.take();
          if (paged) {
            StatusOr<Tensor> tables = executor.allocateInput("decode", 2);
            if (!tables) {
              return fail(tables.status());
            }
            decodeTables = tables.take();
            fillBlockTables(decodeTables);
          }
        }
        std::vector<Tensor> arguments{decodeIds, decodePast};
        if (paged) {
          arguments.push_back(decodeTables);
        }
        fillIds(arguments[0], {next}, 1);
        fillPositions(arguments[1], static_cast<int64_t>(tokens.size()) - 1);
        for (size_t i = 1; i < state.size(); ++i) {
          arguments.push_back(std::move(state[i]));
        }
        state.clear();
        StatusOr<std::vector<Tensor>> stepOutputs =
            runEntry("decode", std::move(arguments));
        if (!stepOutputs) {
          return fail(stepOutputs.status());
        }
        state = stepOutputs.take();
        logits = state[0];
      } else {
        StatusOr<std::vector<Tensor>> stepInputs =
            executor.allocateInputs("prefill");
        if (!stepInputs) {
          return fail(stepInputs.status());
        }
        fillIds((*stepInputs)[0], tokens, seqLength);
        fillPositions((*stepInputs)[1],
                      static_cast<int64_t>(tokens.size()) - 1);
        StatusOr<std::vector<Tensor>> stepOutputs =
            runEntry("prefill", stepInputs.take());
        if (!stepOutputs) {
          return fail(stepOutputs.status());
        }
        logits = (*stepOutputs)[0];
      }
    }
    decodeTimes.push_back(
        std::chrono::duration<double>(Clock::now() - decodeStart).count());
  }
  auto median = [](std::vector<double> times) {
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  double prefillSeconds = median(prefillTimes);
  double decodeSeconds = median(decodeTimes);

  if (!options.dumpStepLogits.empty() && primaryRank()) {
    int64_t steps = static_cast<int64_t>(stepLogits.size()) / vocab;
    Tensor table(DType::F32, {steps, vocab},
                 std::shared_ptr<void>(stepLogits.data(), [](void *) {}));
    Status status = writeNpy(options.dumpStepLogits, table);
    if (!status) {
      return fail(status);
    }
  }
  bool bytes = vocab >= 256 && options.prompt.has_value();
  if (stream) {
    StatusOr<std::string> rest = stream->finish();
    if (!rest) {
      return fail(rest.status());
    }
    print(*rest + "\n");
  } else if (bytes) {
    std::cout << decodeBytes(std::vector<int32_t>(tokens.begin(),
                                                  tokens.begin() + promptLength))
              << decodeBytes(generated) << "\n";
  } else {
    std::cout << "ids:";
    for (int32_t id : generated) {
      std::cout << " " << id;
    }
    std::cout << "\n";
  }
  uint64_t derived = session.executor->derivedBytes();
  std::string derivedNote =
      derived >= 1000000 ? ", " + formatMegabytes(derived) +
                               " MB of them derived from the weights"
                         : "";
  // Parameters read in place from the weight files' mapping.
  uint64_t mapped = session.weights.mappedBytes();
  std::string mappedNote = mapped ? ", weights in place in the file " +
                                        formatMegabytes(mapped) + " MB"
                                  : "";
  int64_t decodeSteps = std::max<int64_t>(0, generated.size() - 1);
  if (!primaryRank()) {
    return writeTrace(options, session);
  }
  std::fprintf(
      stderr,
      "mf-run: prefill %lld tokens in %.1f ms (%.1f tokens/s, %s %s); "
      "decode %lld tokens in %.1f ms (%.1f tokens/s)%s; peak memory "
      "%.2f MB (tensors %.2f MB%s, arena %.2f MB%s), peak RSS %.1f MB\n",
      static_cast<long long>(promptLength), prefillSeconds * 1e3,
      promptLength / std::max(prefillSeconds, 1e-9),
      prefillPlan.size() == 1 ? "entry" : "entries", prefillEntry.c_str(),
      static_cast<long long>(decodeSteps), decodeSeconds * 1e3,
      decodeSteps / std::max(decodeSeconds, 1e-9),
      options.repeat > 1
          ? (", medians of " + std::to_string(options.repeat) + " runs").c_str()
          : "",
      (session.allocator.peakBytes() + session.executor->arenaBytes() +
       mapped) /
          1e6,
      session.allocator.peakBytes() / 1e6, derivedNote.c_str(),
      session.executor->arenaBytes() / 1e6, mappedNote.c_str(),
      peakResidentMegabytes());
  return writeTrace(options, session);
}

/// The tokens of --data: an MFTOKENS file, or text through the tokenizer
/// (bytes without one).
StatusOr<std::vector<int32_t>> dataTokens(const Options &options,
                                          Session &session) {
  return readTokens(options.data, session.executable.model().vocab_size(),
                    [&](const std::string &text) {
                      return encodeText(options, session, text,
                                        /*addSpecialTokens=*/false,
                                        "'" + options.data + "'");
                    });
}

/// Why `executable` cannot be calibrated (a quantized model, or one
/// without the `logits` entry), or ok.
Status checkCalibratable(const Executable &executable) {
  if (executable.root().parameters()) {
    for (const fb::Parameter *parameter : *executable.root().parameters()) {
      if (parameter->quant_scale() >= 0) {
        return Status::error(StatusCode::FailedPrecondition,
                             "calibrate measures the float model, and '" +
                                 parameter->name()->str() +
                                 "' is quantized; compile the config with "
                                 "mfc --calibration-model and calibrate that");
      }
    }
  }
  if (!executable.entry("logits")) {
    return Status::error(StatusCode::FailedPrecondition,
                         "calibrate runs the 'logits' entry: compile the "
                         "config with run_mode predict (--set "
                         "run_mode=predict)");
  }
  return Status::ok();
}

/// --task calibrate: the float model's `logits` entry, in PyNative, over
/// windows of seq_length tokens of --data; the range of every input
/// channel of each Linear (a parameter multiplied by transposed), and of
/// every attention's keys and values, over all of them, written for a
/// calibrated model's loading (--calibration).
int calibrate(const Options &options, Session &session) {
  const fb::ModelInfo &model = session.executable.model();
  if (options.data.empty()) {
    return failUsage("calibrate needs --data FILE (text, or an MFTOKENS "
                     "file): the samples whose activation ranges it measures");
  }
  if (ranks && ranks->size() > 1) {
    return failUsage("calibrate runs on one process; run it without mpirun");
  }
  StatusOr<std::vector<int32_t>> data = dataTokens(options, session);
  if (!data) {
    return fail(data.status());
  }
  int64_t batch = model.batch_size(), seq = model.seq_length();
  int64_t windows = static_cast<int64_t>(data->size()) / seq;
  if (windows < 1) {
    return fail(StatusCode::InvalidArgument,
                "'" + options.data + "' has " + std::to_string(data->size()) +
                    " tokens; calibrate needs at least seq_length = " +
                    std::to_string(seq) +
                    " (it runs whole windows, no padding)");
  }
  Calibration calibration;
  calibration.tokens = windows * seq;
  RunOptions runOptions = session.runOptions;
  runOptions.calibration = &calibration;
  auto started = std::chrono::steady_clock::now();
  const bool progress = isatty(STDERR_FILENO); // a counter for a terminal
  for (int64_t first = 0; first < windows; first += batch) {
    StatusOr<std::vector<Tensor>> inputs =
        session.executor->allocateInputs("logits");
    if (!inputs) {
      return fail(inputs.status());
    }
    // Rows past the last window repeat the first: a range is the same.
    for (int64_t b = 0; b < batch; ++b) {
      int64_t window = first + b < windows ? first + b : first;
      std::copy_n(data->begin() + window * seq, seq,
                  inputs->front().as<int32_t>() + b * seq);
    }
    StatusOr<std::vector<Tensor>> outputs =
        session.executor->run("logits", inputs.take(), runOptions);
    if (!outputs) {
      return fail(outputs.status());
    }
    if (progress) {
      std::fprintf(stderr, "\rmf-run: calibrate: window %lld of %lld",
                   static_cast<long long>(std::min(first + batch, windows)),
                   static_cast<long long>(windows));
    }
  }
  if (progress) {
    std::fprintf(stderr, "\n");
  }
  for (const auto &[name, ranges] : calibration.byName) {
    for (size_t j = 0; j < ranges.min.size(); ++j) {
      if (!std::isfinite(ranges.min[j]) || !std::isfinite(ranges.max[j])) {
        return fail(StatusCode::InvalidArgument,
                    "calibrate: input channel " + std::to_string(j) + " of '" +
                        name +
                        "' reached an infinity (or only NaNs); find where "
                        "with --check-numerics, or calibrate in a wider "
                        "compute dtype");
      }
    }
  }
  if (Status status = calibration.write(options.saveCalibration); !status) {
    return fail(status);
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  // (An attention's keys and values are recorded as `<path>.key` and
  // `.value`; everything else is a Linear weight's input.)
  size_t attentions = 0;
  for (const auto &[name, ranges] : calibration.byName) {
    attentions +=
        name.size() > 4 && name.compare(name.size() - 4, 4, ".key") == 0;
  }
  std::fprintf(stderr,
               "mf-run: calibrated the inputs of %zu Linear weights and the "
               "keys and values of %zu attentions on %lld windows of %lld "
               "tokens in %.1f s; wrote %s\n",
               calibration.byName.size() - 2 * attentions, attentions,
               static_cast<long long>(windows), static_cast<long long>(seq),
               seconds, options.saveCalibration.c_str());
  return 0;
}

int evaluate(const Options &options, Session &session) {
  const fb::ModelInfo &model = session.executable.model();
  if (options.data.empty()) {
    return failUsage("eval needs --data FILE (text, or an MFTOKENS file)");
  }
  StatusOr<std::vector<int32_t>> data = dataTokens(options, session);
  if (!data) {
    return fail(data.status());
  }
  // A pipelined program: each rank runs its stage's forwards (one per
  // chunk), the hidden states passed on from part to part, the model's last
  // part the loss.
  int64_t stage = stageOfRank(session.executable, ranks.get());
  int64_t stages = session.executable.pipelineStages();
  int64_t chunks = session.executable.pipelineChunks();
  int64_t parts = stages * chunks;
  std::vector<std::string> chunkEntries; // this rank's, by chunk
  if (stage >= 0) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      chunkEntries.push_back(
          session.executable.pipelinePrefixOf(
              session.executable.pipelinePartOf(stage, chunk)) +
          "forward");
    }
  } else if (session.executable.entry("forward_loss")) {
    chunkEntries.push_back("forward_loss");
  } else {
    return fail(StatusCode::FailedPrecondition,
                "eval needs a 'forward_loss' entry: compile the config with "
                "run_mode eval, train or finetune (--set run_mode=eval)");
  }
  int64_t batch = model.batch_size(), seq = model.seq_length();
  // Windows of seq + 1 tokens: inputs are the first seq, labels the last seq.
  int64_t windows = (static_cast<int64_t>(data->size()) - 1) / seq;
  if (windows < 1) {
    return fail(StatusCode::InvalidArgument,
                "'" + options.data + "' has " + std::to_string(data->size()) +
                    " tokens; eval needs at least seq_length + 1 = " +
                    std::to_string(seq + 1));
  }
  Executor &executor = *session.executor;
  // Data parallelism: each global batch is batch_size windows a
  // data-parallel rank, rank r taking the r-th; every rank runs every step
  // (a rank past the end runs padding), and the sums are combined at the
  // end. Context parallelism: each rank holds a block of each window's
  // positions.
  const std::vector<int64_t> dataAxis = {kDataAxis};
  int64_t dataRanks = ranks ? ranks->extentAlong(dataAxis) : 1;
  int64_t dataIndex = ranks ? ranks->indexAlong(dataAxis) : 0;
  std::vector<int64_t> sumAxes = dataAxis;
  ContextRuns runs = contextRunsOf(model, 0, 1);
  if (ranks && ranks->grid().size() > kContextAxis) {
    sumAxes.push_back(kContextAxis);
    runs = contextRunsOf(model, ranks->indexAlong({kContextAxis}),
                         ranks->extentAlong({kContextAxis}));
  }
  int64_t block = runs.positions();
  double totalLoss = 0;
  int64_t totalTokens = 0;
  // The hidden states one of this rank's parts passes to the next (the
  // turn of a V: both on this stage).
  std::optional<Tensor> handedOver;
  auto stageOf = [&](int64_t part) {
    return session.executable.pipelinePlaceOf(part).stage;
  };
  for (int64_t step = 0; step < windows; step += batch * dataRanks) {
    int64_t firstWindow = step + dataIndex * batch;
    int64_t rows = std::clamp<int64_t>(windows - firstWindow, 0, batch);
    for (size_t chunk = 0; chunk < chunkEntries.size(); ++chunk) {
      const std::string &entryName = chunkEntries[chunk];
      int64_t part = stage >= 0 ? session.executable.pipelinePartOf(
                                      stage, static_cast<int64_t>(chunk))
                                : 0;
      bool first = part == 0, last = stage < 0 || part + 1 == parts;
      StatusOr<std::vector<Tensor>> inputs = executor.allocateInputs(entryName);
      if (!inputs) {
        return fail(inputs.status());
      }
      // The first part's ids (input 0), the last part's labels (its last
      // input); another part's input 0 is the previous one's hidden states.
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < block; ++i) {
          bool real = b < rows;
          int64_t at = (firstWindow + b) * seq + runs.positionOf(i);
          if (first) {
            inputs->front().as<int32_t>()[b * block + i] =
                real ? (*data)[at] : static_cast<int32_t>(model.pad_token_id());
          }
          if (last) {
            inputs->back().as<int32_t>()[b * block + i] =
                real ? (*data)[at + 1]
                     : static_cast<int32_t>(model.ignore_token_id());
          }
        }
      }
      // Messages tagged by the part that takes them (a rank sends another
      // one part's hidden states per chunk, in order).
      if (!first && stageOf(part - 1) == stage) {
        inputs->front() = std::move(*handedOver);
        handedOver.reset();
      } else if (!first) {
        if (Status status =
                ranks->receive(inputs->front(), kPipelineAxis,
                               stageOf(part - 1), static_cast<int>(chunk));
            !status) {
          return fail(status);
        }
      }
      StatusOr<std::vector<Tensor>> outputs =
          executor.run(entryName, inputs.take(), session.runOptions);
      if (!outputs) {
        return fail(outputs.status());
      }
      if (!last) {
        // The hidden states on (the saved values a backward would read are
        // not needed). The communicator keeps each sent tensor until MPI is
        // done with it: let go of those done, or the stage would hold every
        // batch's.
        int64_t next = part + 1;
        if (stageOf(next) == stage) {
          handedOver = std::move(outputs->front());
          continue;
        }
        if (Status status =
                ranks->send(std::move(outputs->front()), kPipelineAxis,
                            stageOf(next), static_cast<int>(next / stages));
            !status || !(status = ranks->progressSends())) {
          return fail(status);
        }
        continue;
      }
      totalLoss += (*outputs)[0].loadFloat(0) * rows * block;
      totalTokens += rows * block;
    }
  }
  if (stage >= 0) {
    // The sums of the stage holding the model's last part reach rank 0
    // (every other stage's are 0).
    sumAxes.push_back(kPipelineAxis);
    std::sort(sumAxes.begin(), sumAxes.end());
    if (Status status = ranks->waitSends(); !status) {
      return fail(status);
    }
  }
  if (ranks && ranks->extentAlong(sumAxes) > 1) {
    double sums[2] = {totalLoss, static_cast<double>(totalTokens)};
    if (Status status =
            ranks->allReduceInPlace(sums, 2, /*max=*/false, sumAxes);
        !status) {
      return fail(status);
    }
    totalLoss = sums[0];
    totalTokens = static_cast<int64_t>(sums[1]);
  }
  double loss = totalLoss / totalTokens;
  std::printf("eval: %lld tokens in %lld windows of %lld: loss %.6f, "
              "perplexity %.4f\n",
              static_cast<long long>(totalTokens),
              static_cast<long long>(windows), static_cast<long long>(seq),
              loss, std::exp(loss));
  return writeTrace(options, session);
}

/// Runs entry `name` in PyNative and in Graph Mode on the same inputs and
/// compares, command by command, what each kernel (or library op: the same
/// eager kernel, on the memory plan's buffers) wrote with what PyNative
/// computed for the same values. Fails naming the first that differs;
/// counts the kernel dispatches and library ops compared.
Status checkEntry(const std::string &name, Session &session, size_t &checked,
                  size_t &libraryChecked) {
  const fb::Executable &root = session.executable.root();
  const fb::Entry *entry = session.executable.entry(name);
  PyNativeExecutor executor(session.executable, session.weights,
                            session.allocator);
  GraphExecutor graphExecutor(session.executable, session.weights,
                              session.allocator, session.kernels, *session.pool);
  executor.setCommunicator(ranks.get());
  graphExecutor.setCommunicator(ranks.get());
  StatusOr<std::vector<Tensor>> inputs = executor.allocateInputs(name);
  if (!inputs) {
    return inputs.status();
  }
  // Deterministic token ids (and labels) within the vocabulary; a paged
  // cache's block tables give each row blocks of its own while the pool
  // lasts (rows sharing a block would race to write it), the rest unmapped.
  int64_t vocab = session.executable.model().vocab_size();
  int64_t poolBlocks = session.executable.model().kv_num_blocks();
  for (size_t index = 0; index < inputs->size(); ++index) {
    Tensor &input = (*inputs)[index];
    if (entry->input_names() && index < entry->input_names()->size() &&
        entry->input_names()->Get(index)->str() == "block_tables") {
      for (int64_t i = 0; i < input.numElements(); ++i) {
        input.as<int32_t>()[i] = i < poolBlocks ? static_cast<int32_t>(i) : -1;
      }
      continue;
    }
    if (input.dtype() == DType::I32 && input.rank() == 2) {
      for (int64_t i = 0; i < input.numElements(); ++i) {
        input.as<int32_t>()[i] = static_cast<int32_t>((7 * i + 3) % vocab);
      }
    }
  }
  std::vector<Tensor> eagerValues, graphValues;
  RunOptions eager, graph;
  eager.capturedValues = &eagerValues;
  graph.capturedValues = &graphValues;
  graph.quantizedFrom = &eagerValues; // rows to quantize: RunOptions says why
  std::vector<Tensor> copies;
  for (const Tensor &input : *inputs) {
    StatusOr<Tensor> copy = session.allocator.allocate(input.dtype(), input.shape());
    std::memcpy(copy->data(), input.data(), input.byteSize());
    copies.push_back(copy.take());
  }
  StatusOr<std::vector<Tensor>> eagerOut = executor.run(name, inputs.take(), eager);
  StatusOr<std::vector<Tensor>> graphOut =
      graphExecutor.run(name, std::move(copies), graph);
  if (!eagerOut || !graphOut) {
    return !eagerOut ? eagerOut.status() : graphOut.status();
  }
  // Values within rtol 1e-4 / atol 1e-5 (kernels sum in another order).
  // Where a kernel computes in f16 or bf16, a product that differs in its
  // last f32 bits can round the other way: then two units in the last place
  // of that type, relative to the value or to the tensor's largest value
  // (a residual add can cancel to far below its operands).
  const double rtol = 1e-4, atol = 1e-5;
  auto worst = [&](const Tensor &a, const Tensor &b, double ulp) {
    double largest = 0;
    for (int64_t i = 0; ulp > 0 && i < a.numElements(); ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(a.loadFloat(i))));
    }
    double relative = std::max(rtol, 2 * ulp);
    double absolute = std::max(atol, 2 * ulp * largest);
    double excess = 0;
    for (int64_t i = 0; i < a.numElements(); ++i) {
      double expected = a.loadFloat(i), actual = b.loadFloat(i);
      excess = std::max(excess, std::fabs(actual - expected) -
                                    (absolute + relative * std::fabs(expected)));
    }
    return excess;
  };
  // The unit in the last place of the narrowest float type among values.
  auto ulpOf = [&](auto &&ids) {
    double ulp = 0;
    for (uint32_t id : ids) {
      fb::DType dtype = entry->values()->Get(id)->dtype();
      ulp = std::max(ulp, dtype == fb::DType::F16    ? std::ldexp(1.0, -10)
                          : dtype == fb::DType::BF16 ? std::ldexp(1.0, -7)
                                                     : 0.0);
    }
    return ulp;
  };
  std::vector<uint32_t> all(entry->values()->size());
  std::iota(all.begin(), all.end(), 0u);
  double entryUlp = ulpOf(all);
  if (entry->host()) {
    for (const fb::Command *command : *entry->host()->commands()) {
      bool library = command->kind() == fb::CommandKind::Library;
      if (command->kind() != fb::CommandKind::Dispatch && !library) {
        continue;
      }
      std::vector<uint32_t> computed;
      for (uint32_t i = 0; i < command->op_count(); ++i) {
        const fb::Op &op = *entry->ops()->Get(command->first_op() + i);
        computed.insert(computed.end(), op.results()->begin(), op.results()->end());
      }
      // A library op runs the eager kernel in both modes: what differs is
      // its inputs, which carry the rounding of every 16-bit value before
      // them (a widened bf16 query into a float32 rope): it is held to the
      // entry's narrowest type, like the entry's outputs.
      double ulp = library ? entryUlp : ulpOf(computed);
      for (const fb::Binding *binding : *command->bindings()) {
        uint32_t id = binding->value();
        if (binding->access() != fb::Access::Write) {
          continue;
        }
        bool captured = eagerValues[id].defined() && graphValues[id].defined();
        double excess =
            captured ? worst(eagerValues[id], graphValues[id], ulp) : 0;
        if (!captured || excess > 0) {
          std::string ops;
          for (uint32_t i = 0; i < command->op_count(); ++i) {
            const fb::Op &op = *entry->ops()->Get(command->first_op() + i);
            ops += std::string("\n    ") + fb::EnumNameOpKind(op.kind()) +
                   " @ " + (op.location() ? op.location()->str() : "");
          }
          char beyond[64];
          std::snprintf(beyond, sizeof(beyond), "%.3g", excess);
          std::string what =
              library
                  ? std::string("library op '") +
                        fb::EnumNameOpKind(
                            entry->ops()->Get(command->first_op())->kind()) +
                        "'"
                  : "kernel '" + root.kernels()->Get(command->kernel())->str() +
                        "'";
          return Status::error(
              "graph and pynative differ first in " + what + " of '" + name +
              "' at value %" + std::to_string(id) +
              (captured
                   ? std::string(" (by ") + beyond + " beyond the tolerance)"
                   : std::string(" (not computed by ") +
                         (eagerValues[id].defined() ? "graph" : "pynative") +
                         " mode)") +
              ", which computes:" + ops);
        }
      }
      ++(library ? libraryChecked : checked);
    }
  }
  for (size_t i = 0; i < eagerOut->size(); ++i) {
    if (worst((*eagerOut)[i], (*graphOut)[i], entryUlp) > 0) {
      return Status::error("the outputs of '" + name + "' differ between graph and "
                  "pynative (no kernel output differs)");
    }
  }
  return Status::ok();
}

/// Whether an entry writes parameters (train_step): run twice, the second
/// run would start from the first's weights.
bool assignsParameters(const fb::Entry &entry) {
  for (const fb::Op *op : *entry.ops()) {
    if (op->kind() == fb::OpKind::Assign) {
      return true;
    }
  }
  return false;
}

/// --check: every entry a run may take (each prefill length, decode,
/// logits, the loss), graph against PyNative.
int checkModes(Session &session) {
  size_t checked = 0, libraryChecked = 0;
  std::string compared;
  std::vector<std::string> skipped;
  int64_t stage = stageOfRank(session.executable, ranks.get());
  for (const std::string &name : session.executable.entryNames()) {
    const fb::Entry &entry = *session.executable.entry(name);
    if (entry.stage() >= 0 && entry.stage() != stage) {
      continue; // another pipeline stage's: its ranks compare it
    }
    if (entry.ops() && assignsParameters(entry)) {
      skipped.push_back(name);
      continue;
    }
    if (Status status = checkEntry(name, session, checked, libraryChecked);
        !status) {
      return fail(status);
    }
    compared += (compared.empty() ? "'" : ", '") + name + "'";
  }
  std::cout << "check: " << compared << " in graph mode equal pynative "
            << "(rtol 1e-4, atol 1e-5; kernels computing in f16/bf16: two ulps): "
            << checked << " kernel dispatches compared";
  if (stage >= 0) {
    std::cout << " on pipeline stage " << stage
              << "'s ranks (each stage's ranks compare its entries; an error "
                 "on any ends the run)";
  }
  if (libraryChecked > 0) {
    std::cout << ", and " << libraryChecked << " library ops";
  }
  for (const std::string &name : skipped) {
    std::cout << "; '" << name << "' not compared (it assigns parameters)";
  }
  std::cout << "\n";
  return 0;
}

/// The files a run will write, checked before any work: a path that cannot
/// be written is found now, not after a whole training run.
Status checkOutputs(const Options &options) {
  const std::pair<const std::string &, const char *> outputs[] = {
      {options.saveWeights, "--save-weights file"},
      {options.dumpLogits, "--dump-logits file"},
      {options.dumpStepLogits, "--dump-step-logits file"},
      {options.dumpGrads, "--dump-grads file"},
      {options.profile, "--profile file"},
      {options.mergeLora, "--merge-lora file"}};
  for (const auto &[path, what] : outputs) {
    if (!path.empty()) {
      MFRT_RETURN_IF_ERROR(checkWritableTarget(path, what));
    }
  }
  return Status::ok();
}

int runTask(const Options &options, Session &session, const std::string &task,
            Communicator *ranks);

/// --moe-stats: per routed layer, the pairs each expert received over the
/// run (padding positions included: they are routed too) and those its
/// capacity dropped.
void printMoeStats(const MoeStats &stats) {
  for (const auto &[layer, counts] : stats.layers) {
    std::cerr << "moe: " << layer << ": " << counts.runs << " runs routed "
              << counts.routed << " (token, choice) pairs, " << counts.dropped
              << " dropped; by expert:";
    for (int64_t received : counts.received) {
      std::cerr << " " << received;
    }
    std::cerr << "\n";
  }
}

int run(int argc, char **argv) {
  int exitCode = 0;
  std::optional<Options> parsed = parseOptions(argc, argv, exitCode);
  if (!parsed) {
    if (exitCode != 0) {
      usage(std::cerr);
    }
    return exitCode;
  }
  Options &options = *parsed;
  if (Status status = checkOutputs(options); !status) {
    return fail(status);
  }

  StatusOr<Executable> executable = Executable::load(options.executable);
  if (!executable) {
    return fail(executable.status());
  }
  if (options.dump) {
    dumpExecutable(*executable, std::cout);
    StatusOr<KernelLibrary> kernels =
        KernelLibrary::load(*executable, kernelServices());
    if (!kernels) {
      return fail(kernels.status());
    }
    std::cout << "kernel library loaded (memfd + dlopen): " << kernels->size()
              << " kernels resolved\n";
    return 0;
  }
  std::vector<int64_t> grid;
  if (executable->root().grid()) {
    grid.assign(executable->root().grid()->begin(),
                executable->root().grid()->end());
  }
  StatusOr<std::unique_ptr<Communicator>> started = Communicator::start(grid);
  if (!started) {
    return fail(started.status());
  }
  ranks = started.take();
  setErrorRanks(ranks.get());
  if (ranks->rank() != 0) {
    // Tokens, progress and summaries are printed once, by rank 0; every
    // rank's errors still reach stderr.
    if (!std::freopen("/dev/null", "w", stdout)) {
      return fail(StatusCode::Unavailable, "cannot silence rank " +
                                               std::to_string(ranks->rank()) +
                                               "'s output");
    }
  }
  bool splitParameters = false;
  if (executable->root().parameters()) {
    for (const fb::Parameter *parameter : *executable->root().parameters()) {
      splitParameters |= parameter->split_dim() >= 0;
    }
  }
  if (ranks->size() > 1 &&
      (!options.dumpTensors.empty() || !options.dumpGrads.empty() ||
       ((splitParameters || executable->pipeline()) &&
        !options.mergeLora.empty()))) {
    return failUsage(
        "--dump-tensors and --dump-grads (and, with split weights or "
        "pipeline stages, --merge-lora) are not built for multi-rank "
        "programs yet: "
        "each rank holds its own values");
  }
  const fb::ModelInfo &model = executable->model();
  std::string mode = options.mode.empty()
                         ? (model.context_mode() == 1 ? "pynative" : "graph")
                         : options.mode;
  if (mode != "graph" && mode != "pynative") {
    return failUsage("--mode must be pynative or graph, got '" + mode + "'");
  }

  std::string runMode = model.run_mode() ? model.run_mode()->str() : "predict";
  std::string task = options.task.empty()
                         ? (runMode == "predict"  ? "predict"
                            : runMode == "eval"   ? "eval"
                                                  : "train")
                         : options.task;
  if (task == "finetune") {
    task = "train";
  }
  if (task != "predict" && task != "eval" && task != "train" &&
      task != "calibrate") {
    return failUsage(
        "--task must be predict, eval, train, finetune or calibrate, got '" +
        task + "'");
  }
  if (task == "calibrate") {
    if (options.saveCalibration.empty()) {
      return failUsage("calibrate needs --save-calibration OUT (the "
                       "activation ranges it measures)");
    }
    // PyNative observes each Linear's rows; Graph Mode fuses them away.
    if (options.mode == "graph") {
      return failUsage("calibrate runs in PyNative mode (it observes every "
                       "Linear's input); drop --mode graph");
    }
    mode = "pynative";
  }
  if (!options.saveCalibration.empty() && task != "calibrate") {
    return failUsage("--save-calibration is --task calibrate's output");
  }
  std::optional<Calibration> calibration;
  if (!options.calibration.empty() && executable->root().parameters() &&
      std::none_of(executable->root().parameters()->begin(),
                   executable->root().parameters()->end(),
                   [](const fb::Parameter *parameter) {
                     return parameter->quant_input_scale() >= 0 ||
                            parameter->calibrated_scales();
                   })) {
    return failUsage("--calibration: this model has no weights quantized "
                     "with calibrated activations (quantization_config "
                     "smooth_quant, or ptq with per_tensor int8 "
                     "activations) and no int8 KV cache (kvcache_dtype: "
                     "int8)");
  }
  if (!options.calibration.empty()) {
    StatusOr<Calibration> read = Calibration::read(options.calibration);
    if (!read) {
      return fail(read.status());
    }
    calibration = read.take();
  }

  Session session(executable.take());
  if (mode == "graph" || options.check) {
    if (Status status = session.loadKernels(options.threads); !status) {
      return fail(status);
    }
  }
  // A training checkpoint also serves as weights (its optimizer state is
  // skipped); --resume continues from one.
  std::vector<std::string> weightFiles = options.weights;
  // Without --weights, the YAML's load_checkpoint (MindFormers' key).
  bool fromYaml = weightFiles.empty() && !options.initWeights &&
                  model.load_checkpoint();
  if (fromYaml) {
    weightFiles.push_back(model.load_checkpoint()->str());
  }
  if (fromYaml && primaryRank()) {
    std::fprintf(stderr, "mf-run: note: weights from the YAML's load_checkpoint: %s\n",
                 weightFiles.back().c_str());
  }
  if (task == "train") { // before the weights: the cause, not a symptom
    if (Status status = checkTrainable(session.executable); !status) {
      return fail(status);
    }
  }
  if (task == "calibrate") {
    if (Status status = checkCalibratable(session.executable); !status) {
      return fail(status);
    }
  }
  if (weightFiles.empty() && options.resume.empty() && !options.initWeights) {
    // Pretraining starts from the init, as MindFormers' does with an empty
    // load_checkpoint, and --check compares the modes on any weights;
    // anything else would print text from random weights.
    bool pretraining = runMode == "train" && task == "train";
    if (!pretraining && !options.check) {
      return failUsage(
          "no weights: the YAML's load_checkpoint is empty and no --weights "
          "was given, so " +
          std::string(task == "train"       ? "finetuning"
                      : task == "eval"      ? "evaluating"
                      : task == "calibrate" ? "calibrating"
                                            : "predicting") +
          " would use random parameters; give --weights FILE|FOLDER (a "
          "safetensors file, a Hugging Face folder, a MindSpore .ckpt), set "
          "load_checkpoint in the YAML, or --init-weights for the "
          "deterministic init");
    }
    if (primaryRank()) {
      std::fprintf(stderr,
                   "mf-run: note: no weights given: %s the deterministic "
                   "init (seed %llu)%s; --init-weights says so and silences "
                   "this note\n",
                   pretraining ? "training starts from" : "comparing on",
                   static_cast<unsigned long long>(
                       options.seed.value_or(model.seed())),
                   pretraining ? ", as pretraining does with an empty "
                                 "load_checkpoint"
                               : "");
    }
  }
  if (!options.resume.empty()) {
    weightFiles.push_back(options.resume);
  }
  if (Status status = checkRanksAgree(options, session.executable, mode, task,
                                      weightFiles);
      !status) {
    return fail(status);
  }
  if (Status status = session.loadWeights(
          weightFiles, options.seed.value_or(model.seed()), ranks.get(),
          options.weightsInPlace, calibration ? &*calibration : nullptr);
      !status) {
    return fail(fromYaml ? Status::error(status.code(),
                                         status.message() +
                                             " (the YAML's load_checkpoint; "
                                             "give --weights to use other "
                                             "weights)")
                         : status);
  }
  if (calibration && session.weights.calibratedFromRanges() == 0 &&
      primaryRank()) {
    std::fprintf(stderr,
                 "mf-run: note: --calibration %s was not used: the weights "
                 "hold the quantized values and scales already\n",
                 options.calibration.c_str());
  }
  if (size_t count = session.weights.initializedAdapters().size();
      count > 0 && primaryRank()) {
    std::fprintf(stderr,
                 "mf-run: note: %zu LoRA adapter matrices are in no weight "
                 "file (%s, ...): they start as MindFormers' LoRA layers do "
                 "(lora_A HeUniform, lora_B zeros), so the model starts as "
                 "its base\n",
                 count, session.weights.initializedAdapters().front().c_str());
  }
  // Without --check nothing else reads the weights as stored, nor reads
  // again what only derivations read, unless a hook observes the
  // derivations (they then run again each run).
  GraphWeightUse weightUse;
  weightUse.panels = !options.check;
  weightUse.replaceSources =
      !options.check && options.dumpTensors.empty() && !options.checkNumerics;
  if (Status status = session.startExecutor(mode, weightUse, ranks.get());
      !status) {
    return fail(status);
  }
  if (!options.mergeLora.empty()) {
    Status status = session.weights.saveMerged(session.executable, options.mergeLora);
    return status ? 0 : fail(status);
  }
  if (!options.saveWeights.empty() && task != "train") {
    Status status = session.weights.save(session.executable, options.saveWeights,
                                         ranks.get());
    if (status) {
      status = savePeftBeside(options.saveWeights, session.executable,
                              session.weights, ranks.get());
    }
    if (!status) {
      return fail(status);
    }
  }
  session.runOptions.dumpTensorsDir = options.dumpTensors;
  session.runOptions.checkNumerics = options.checkNumerics;
  if (!options.profile.empty()) {
    session.runOptions.traceEvents = &session.traceEvents;
  }
  if (options.moeStats) {
    if (options.check) {
      return failUsage("--moe-stats counts a run's routing; --check runs "
                       "each entry twice to compare them: give one");
    }
    session.runOptions.moeStats = &session.moeStats;
  }
  if (options.check) {
    return checkModes(session);
  }
  int code = runTask(options, session, task, ranks.get());
  if (options.moeStats && code == 0) {
    printMoeStats(session.moeStats);
  }
  return code;
}

/// Runs predict, train or eval on the loaded session.
int runTask(const Options &options, Session &session, const std::string &task,
            Communicator *ranks) {
  const fb::ModelInfo &model = session.executable.model();
  if (task == "predict") {
    if (!session.executable.entry("prefill")) {
      return fail(StatusCode::FailedPrecondition,
                  "predict needs a 'prefill' entry: compile the config with "
                  "run_mode predict (--set run_mode=predict)");
    }
    return predict(options, session);
  }
  if (task == "train") {
    if (options.batchSize > 0 && options.batchSize != model.batch_size()) {
      return failUsage("--batch-size " + std::to_string(options.batchSize) +
                       " differs from the compiled batch of " +
                       std::to_string(model.batch_size()) +
                       " (shapes are static); recompile with --set "
                       "runner_config.batch_size=" +
                       std::to_string(options.batchSize));
    }
    TrainOptions train{options.inputIds,
                       options.data,
                       options.steps,
                       options.saveWeights,
                       options.saveEvery,
                       options.resume,
                       options.dumpGrads,
                       [&](const std::string &text) {
                         return encodeText(options, session, text,
                                           /*addSpecialTokens=*/false,
                                           "'" + options.data + "'");
                       },
                       ranks};
    int code = runTraining(train, session.executable, session.weights,
                           *session.executor, session.runOptions);
    return code != 0 ? code : writeTrace(options, session);
  }
  if (task == "calibrate") {
    return calibrate(options, session);
  }
  return evaluate(options, session);
}

} // namespace

int main(int argc, char **argv) {
  // Sizes are checked before allocating; this is the last line of defence
  // for an allocation the machine still cannot satisfy.
  int code;
  try {
    code = run(argc, argv);
  } catch (const std::bad_alloc &) {
    code = fail(Status::error(
        StatusCode::ResourceExhausted,
        "out of memory: an allocation failed (the model, a weight, data or "
        "tokenizer file too big for this machine's free memory); run a "
        "smaller model (--set at compile time) or free memory"));
  }
  if (code != 0 && ranks && ranks->size() > 1) {
    ranks->abort(code); // the other ranks may wait in a collective
  }
  return code;
}
