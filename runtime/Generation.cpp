//===- Generation.cpp - tokens in, tokens out -----------------------------===//

#include "runtime/Generation.h"

#include "runtime/FileIO.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>

using namespace mfrt;

StatusOr<std::vector<int32_t>> mfrt::encodeBytes(const std::string &text,
                                                 int64_t vocabSize) {
  if (vocabSize < 256) {
    return Status::error(
        StatusCode::DataLoss,
        "without a tokenizer text is read as bytes (ids "
        "0-255), which needs a vocabulary of at least 256; "
        "this model has " +
            std::to_string(vocabSize) +
            ": give token ids (--input-ids, or an MFTOKENS file "
            "for --data)");
  }
  std::vector<int32_t> ids;
  for (unsigned char c : text) {
    ids.push_back(c);
  }
  return ids;
}

std::string mfrt::decodeBytes(const std::vector<int32_t> &ids) {
  auto isByte = [&](size_t i) { return ids[i] >= 0 && ids[i] < 256; };
  // Bytes 0x80 and up pass through only as parts of valid UTF-8 sequences.
  auto utf8Length = [&](size_t i) -> size_t {
    int32_t lead = ids[i];
    size_t length = (lead & 0xE0) == 0xC0   ? 2
                    : (lead & 0xF0) == 0xE0 ? 3
                    : (lead & 0xF8) == 0xF0 ? 4
                                            : 0;
    if (length == 0 || i + length > ids.size()) {
      return 0;
    }
    for (size_t k = 1; k < length; ++k) {
      if (!isByte(i + k) || (ids[i + k] & 0xC0) != 0x80) {
        return 0;
      }
    }
    return length;
  };
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (!isByte(i)) {
      text += "<" + std::to_string(id) + ">";
    } else if ((id >= 0x20 && id < 0x7f) || id == '\n' || id == '\t') {
      text += static_cast<char>(id);
    } else if (size_t length = id >= 0x80 ? utf8Length(i) : 0) {
      for (size_t k = 0; k < length; ++k) {
        text += static_cast<char>(ids[i + k]);
      }
      i += length - 1;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", id);
      text += escaped;
    }
  }
  return text;
}

StatusOr<std::vector<int32_t>> mfrt::parseIds(const std::string &text,
                                              int64_t vocabSize,
                                              const std::string &flag) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos
                                              ? std::string::npos
                                              : end - start);
    char *rest = nullptr;
    long value = std::strtol(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0') {
      return Status::error(StatusCode::InvalidArgument,
                           flag + ": '" + item +
                               "' is not a token id (expected e.g. 1,2,3)");
    }
    if (value < 0 || value >= vocabSize) {
      return Status::error(StatusCode::InvalidArgument,
                           flag + ": token id " + std::to_string(value) +
                               " is outside the vocabulary [0, " +
                               std::to_string(vocabSize) + ")");
    }
    ids.push_back(static_cast<int32_t>(value));
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return ids;
}

int32_t Sampler::next(const float *logits, int64_t vocabSize,
                      const std::vector<int32_t> &history) {
  if (!options_.doSample && options_.repetitionPenalty == 1.0) {
    // Greedy: the largest logit (the first of equals), no copy of the row.
    return static_cast<int32_t>(std::max_element(logits, logits + vocabSize) -
                                logits);
  }
  std::vector<double> scores(logits, logits + vocabSize);
  if (options_.repetitionPenalty != 1.0) {
    // As in Hugging Face: shrink the logits of tokens already seen.
    for (int32_t id : std::set<int32_t>(history.begin(), history.end())) {
      if (id >= 0 && id < vocabSize) {
        scores[id] = scores[id] > 0 ? scores[id] / options_.repetitionPenalty
                                    : scores[id] * options_.repetitionPenalty;
      }
    }
  }
  if (!options_.doSample) {
    return static_cast<int32_t>(
        std::max_element(scores.begin(), scores.end()) - scores.begin());
  }
  // Candidates by descending score, ties by id (a stable sort's order),
  // only as many as the sampling can pick: sorting the whole vocabulary
  // every step took llama-100m's sampled decode from 131 to 72-83 tokens/s
  // (32000 ids; Qwen2 has 151936). With top_k, the k best; with top_p
  // alone, the best 256, 2048, ... until they hold top_p of the mass of
  // all (a nucleus is rarely more than a few hundred ids); with neither,
  // every id in id order (the same distribution).
  double temperature = std::max(options_.temperature, 1e-6);
  int64_t keep = options_.topK > 0 ? std::min(options_.topK, vocabSize) : vocabSize;
  std::vector<int32_t> order(vocabSize);
  std::iota(order.begin(), order.end(), 0);
  auto orderBest = [&](int64_t count) {
    auto before = [&](int32_t a, int32_t b) {
      return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
    };
    if (count < vocabSize) {
      std::nth_element(order.begin(), order.begin() + count, order.end(),
                       before);
    }
    std::sort(order.begin(), order.begin() + count, before);
  };
  double total = 0; // of all ids, for a nucleus of the whole vocabulary
  if (keep == vocabSize && options_.topP < 1.0) {
    double best =
        *std::max_element(scores.begin(), scores.end()) / temperature;
    for (double score : scores) {
      total += std::exp(score / temperature - best);
    }
    // (Past an eighth of the vocabulary, all of it: a flat distribution's
    // nucleus is most of it, and orderings that fall short cost more.)
    for (int64_t ordered = std::min<int64_t>(256, vocabSize);;
         ordered = ordered * 8 > vocabSize ? vocabSize : ordered * 8) {
      orderBest(ordered);
      double mass = 0;
      for (int64_t i = 0; i < ordered; ++i) {
        mass += std::exp(scores[order[i]] / temperature - best);
      }
      if (mass >= options_.topP * total || ordered == vocabSize) {
        keep = ordered;
        break;
      }
    }
  } else if (keep < vocabSize) {
    orderBest(keep);
  } else { // every id: the largest first is all the probabilities need
    std::swap(order[0], order[std::max_element(scores.begin(), scores.end()) -
                              scores.begin()]);
  }
  std::vector<double> probabilities(keep);
  double best = scores[order[0]] / temperature, sum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    probabilities[i] = std::exp(scores[order[i]] / temperature - best);
    sum += probabilities[i];
  }
  if (total > 0) {
    sum = total; // top_p is a share of every id's mass
  }
  double cumulative = 0;
  int64_t nucleus = keep;
  for (int64_t i = 0; i < keep; ++i) {
    probabilities[i] /= sum;
    cumulative += probabilities[i];
    if (cumulative >= options_.topP) {
      nucleus = i + 1;
      break;
    }
  }
  std::discrete_distribution<int64_t> pick(probabilities.begin(),
                                           probabilities.begin() + nucleus);
  return order[pick(generator_)];
}

/// Token ids from a text file (bytes) or an MFTOKENS file: the 8 bytes
/// "MFTOKENS", then little-endian int32 ids.
StatusOr<std::vector<int32_t>> mfrt::readTokens(const std::string &path,
                                               int64_t vocab,
                                               const TextEncoder &encodeText) {
  StatusOr<std::vector<uint8_t>> read =
      readRegularFile(path, "data file", kMaxDataFileBytes);
  if (!read) {
    return read.status();
  }
  std::string bytes(read->begin(), read->end());
  read = std::vector<uint8_t>(); // one copy at a time
  if (bytes.rfind("MFTOKENS", 0) != 0) {
    return encodeText(bytes);
  }
  if ((bytes.size() - 8) % 4 != 0) {
    return Status::error(StatusCode::DataLoss,
                         "'" + path +
                             "': an MFTOKENS file holds whole int32 "
                             "ids after its 8-byte magic");
  }
  std::vector<int32_t> ids((bytes.size() - 8) / 4);
  std::memcpy(ids.data(), bytes.data() + 8, ids.size() * 4);
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      return Status::error(StatusCode::InvalidArgument,
                           "'" + path + "': token id " + std::to_string(id) +
                               " is outside the vocabulary [0, " +
                               std::to_string(vocab) + ")");
    }
  }
  return ids;
}
