//===- ModelSession.h - a compiled model loaded once ------------*- C++ -*-===//
//
// What every command that runs a model.bin holds: the executable, its
// weights, the kernel library and thread pool of Graph Mode, an executor
// in the mode asked for, and the tokenizer and chat template when text is
// needed. mf-run runs one task on it; mf-serve serves many requests from
// it (BatchGenerator.h).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_SESSION_MODELSESSION_H
#define MFC_RUNTIME_SESSION_MODELSESSION_H

#include "runtime/base/Status.h"
#include "runtime/exec/Executor.h"
#include "runtime/format/Executable.h"
#include "runtime/hal/Allocator.h"
#include "runtime/hal/KernelLibrary.h"
#include "runtime/hal/ThreadPool.h"
#include "runtime/io/Weights.h"
#include "runtime/text/ChatTemplate.h"
#include "runtime/text/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace mfrt {

class Communicator;

/// How Graph Mode may treat the weights when nothing but its entries reads
/// them (GraphExecutor's keepParametersAsPanels and
/// letDerivedValuesReplaceSources).
struct GraphWeightUse {
  bool panels = false;
  bool replaceSources = false;
};

struct ModelSession {
  explicit ModelSession(Executable loaded) : executable(std::move(loaded)) {}
  ModelSession(ModelSession &&) = default;

  /// The kernel library and a pool of `threads` (0: one per core), as
  /// Graph Mode needs them; OpenBLAS is made serial first (the pool runs
  /// tiles in parallel).
  Status loadKernels(int64_t threads);
  /// The weights: from `files` (safetensors files, Hugging Face folders,
  /// .ckpt), else the deterministic init of `seed`; calibrated weights
  /// quantized with `calibration`'s activation ranges.
  Status loadWeights(const std::vector<std::string> &files, uint64_t seed,
                     Communicator *ranks, bool inPlace,
                     const Calibration *calibration = nullptr);
  /// The executor of `mode` ("graph": after loadKernels; "pynative").
  Status startExecutor(const std::string &mode, GraphWeightUse use,
                       Communicator *ranks);

  /// The ids that end a generation (the YAML's eos_token_id).
  std::vector<int32_t> eosIds() const;

  /// The tokenizer of `path`, else the YAML's processor.tokenizer; null
  /// when neither names one. Read once; its ids must fit the model.
  StatusOr<const Tokenizer *> loadTokenizer(const std::string &path);
  /// `messages` through the model's chat template (the YAML's, else the
  /// tokenizer_config.json beside the tokenizer, with its bos and eos
  /// tokens), as Hugging Face's apply_chat_template(add_generation_prompt
  /// =True) renders them. Needs the tokenizer; `flag` names how the user
  /// asked in messages.
  StatusOr<std::string> renderChat(const std::vector<ChatMessage> &messages,
                                   const std::string &flag);

  Executable executable;
  Allocator allocator;
  Weights weights;
  KernelLibrary kernels;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Tokenizer> tokenizer;
  bool tokenizerLoaded = false;
};

} // namespace mfrt

#endif // MFC_RUNTIME_SESSION_MODELSESSION_H
