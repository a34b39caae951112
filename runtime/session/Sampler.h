//===- Sampler.h - the next token from a row of logits ----------*- C++ -*-===//

#ifndef MFC_RUNTIME_SESSION_SAMPLER_H
#define MFC_RUNTIME_SESSION_SAMPLER_H

#include <cstdint>
#include <random>
#include <vector>

namespace mfrt {

struct SamplingOptions {
  bool doSample = false;
  int64_t topK = 0; ///< 0 or 1 with doSample = false: greedy
  double topP = 1.0;
  double temperature = 1.0;
  double repetitionPenalty = 1.0;
};

/// Picks the next token from one row of logits.
class Sampler {
public:
  Sampler(SamplingOptions options, uint64_t seed)
      : options_(options), generator_(seed) {}

  int32_t next(const float *logits, int64_t vocabSize,
               const std::vector<int32_t> &history);

private:
  SamplingOptions options_;
  std::mt19937_64 generator_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_SESSION_SAMPLER_H
