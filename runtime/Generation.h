//===- Generation.h - tokens in, tokens out ---------------------*- C++ -*-===//

#ifndef MFC_RUNTIME_GENERATION_H
#define MFC_RUNTIME_GENERATION_H

#include "runtime/Status.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mfrt {

/// Bytes as token ids, for models whose vocabulary covers 0..255.
StatusOr<std::vector<int32_t>> encodeBytes(const std::string &text,
                                           int64_t vocabSize);
/// Ids back to text; control bytes print as \xNN, ids above 255 as <id>.
std::string decodeBytes(const std::vector<int32_t> &ids);
/// Token ids from a text file (through `encodeText`) or an MFTOKENS file:
/// the 8 bytes "MFTOKENS", then little-endian int32 ids.
using TextEncoder =
    std::function<StatusOr<std::vector<int32_t>>(const std::string &)>;
StatusOr<std::vector<int32_t>> readTokens(const std::string &path,
                                          int64_t vocab,
                                          const TextEncoder &encodeText);

/// "1,2,3" -> {1, 2, 3}, each checked against the vocabulary; `flag` names
/// where they came from in messages.
StatusOr<std::vector<int32_t>> parseIds(const std::string &text,
                                        int64_t vocabSize,
                                        const std::string &flag = "--input-ids");

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

#endif // MFC_RUNTIME_GENERATION_H
