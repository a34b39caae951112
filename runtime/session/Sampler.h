//===- Sampler.h - the next token from a row of logits ----------*- C++ -*-===//

#ifndef MFC_RUNTIME_SESSION_SAMPLER_H
#define MFC_RUNTIME_SESSION_SAMPLER_H

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace mfrt {

struct SamplingOptions {
  bool doSample = false;
  int64_t topK = 0; ///< 0 or 1 with doSample = false: greedy
  double topP = 1.0;
  double temperature = 1.0;
  double repetitionPenalty = 1.0;
  /// OpenAI's penalties: a token's logit less `presencePenalty` once it
  /// has been generated and `frequencyPenalty` times the times it has (the
  /// tokens generated so far, as vLLM counts them, not the prompt's).
  double presencePenalty = 0.0;
  double frequencyPenalty = 0.0;
  /// OpenAI's logit_bias: (token id, what to add to its logit).
  std::vector<std::pair<int32_t, double>> logitBias;

  /// Whether the logits pass unchanged (the greedy pick needs no copy).
  bool changesLogits() const {
    return repetitionPenalty != 1.0 || presencePenalty != 0.0 ||
           frequencyPenalty != 0.0 || !logitBias.empty();
  }
};

/// Picks the next token from one row of logits.
class Sampler {
public:
  Sampler(SamplingOptions options, uint64_t seed)
      : options_(options), generator_(seed) {}

  /// `history` is the prompt then the tokens generated so far, from
  /// `firstGenerated` on.
  int32_t next(const float *logits, int64_t vocabSize,
               const std::vector<int32_t> &history, size_t firstGenerated);

private:
  SamplingOptions options_;
  std::mt19937_64 generator_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_SESSION_SAMPLER_H
