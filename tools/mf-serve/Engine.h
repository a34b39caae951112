//===- Engine.h - mf-serve's generation thread ------------------*- C++ -*-===//
//
// One thread owns the model: it takes requests that HTTP threads submit,
// steps the BatchGenerator (continuous batching) while any request waits or
// runs, and hands each request's tokens to its Job, where the HTTP thread
// that serves it waits. A Job that its client abandoned is cancelled at the
// next step.
//
// A sharded model (tensor parallelism under mpirun) runs the same engine on
// every rank: rank 0 serves HTTP and, each iteration, broadcasts what it
// admits and cancels; the other ranks follow() it, so every rank steps the
// same batch together (the generator is deterministic given the same
// requests, and every rank sees the same logits).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_TOOLS_MF_SERVE_ENGINE_H
#define MFC_TOOLS_MF_SERVE_ENGINE_H

#include "runtime/hal/Communicator.h"
#include "runtime/session/BatchGenerator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mfserve {

using Clock = std::chrono::steady_clock;

/// One request's tokens as they are made.
/// A generated token's log-probability under the model's logits (before
/// temperature, penalties and biases, as vLLM reports them) and the most
/// likely alternatives.
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

/// The log-probability of `token` and the `top` most likely ids (ties by
/// id) in a row of `vocab` logits.
TokenLogprobs logprobsOf(const float *logits, int64_t vocab, int32_t token,
                         int64_t top);

struct Job {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int32_t> tokens;
  std::optional<mfrt::FinishReason> finish;
  std::string error; ///< set when the engine failed the request
  std::atomic<bool> abandoned{false}; ///< the client left or a stop string hit
  Clock::time_point submitted = Clock::now();
  int64_t promptTokens = 0;
  /// logprobs asked for: -1 none, else how many alternatives a token
  /// lists; `logprobs` holds each token's, index for index with `tokens`.
  int64_t topLogprobs = -1;
  std::vector<TokenLogprobs> logprobs;
};

/// Counters for /metrics (Prometheus text).
struct Metrics {
  std::atomic<int64_t> requests{0}, rejected{0}, promptTokens{0},
      generatedTokens{0}, steps{0}, decodeSteps{0}, waiting{0}, running{0},
      finished{0}, cancelled{0};
  /// A paged KV cache's blocks, those held, tokens found in cached blocks
  /// and sequences preempted (0 without one).
  std::atomic<int64_t> kvBlocks{0}, kvBlocksUsed{0}, prefixHitTokens{0},
      preemptions{0};
  std::atomic<double> firstTokenSeconds{0}, requestSeconds{0};
  std::atomic<int64_t> firstTokens{0};
};

class Engine {
public:
  Engine(mfrt::BatchGenerator &generator, int64_t maxWaiting, Metrics &metrics,
         mfrt::Communicator *ranks = nullptr)
      : generator_(generator), maxWaiting_(maxWaiting), metrics_(metrics),
        ranks_(ranks && ranks->size() > 1 ? ranks : nullptr) {
    metrics_.kvBlocks = generator.stats().kvBlocks;
  }

  /// Queues a request; an error when the queue is full (the HTTP layer
  /// answers 503) or the engine stopped.
  mfrt::Status submit(mfrt::GenerationRequest request,
                      std::shared_ptr<Job> job);
  /// Runs until stop(): call on the thread that owns the model (rank 0).
  void run();
  /// The other ranks of a sharded model: do what rank 0 broadcasts, step
  /// by step, until it stops.
  mfrt::Status follow();
  void stop();
  int64_t slots() const { return generator_.slots(); }

private:
  mfrt::BatchGenerator &generator_;
  int64_t maxWaiting_;
  Metrics &metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<mfrt::GenerationRequest, std::shared_ptr<Job>>>
      incoming_;
  bool stopping_ = false;
  mfrt::Communicator *ranks_; ///< null on one rank
  /// The generator's ids of the jobs it holds (engine thread only).
  std::unordered_map<int64_t, std::shared_ptr<Job>> active_;
};

} // namespace mfserve

#endif // MFC_TOOLS_MF_SERVE_ENGINE_H
