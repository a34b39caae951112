//===- Sampler.cpp - the next token from a row of logits ------------------===//

#include "runtime/session/Sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

using namespace mfrt;

int32_t Sampler::next(const float *logits, int64_t vocabSize,
                      const std::vector<int32_t> &history,
                      size_t firstGenerated) {
  if (!options_.doSample && !options_.changesLogits()) {
    // Greedy: the largest logit (the first of equals), no copy of the row.
    return static_cast<int32_t>(std::max_element(logits, logits + vocabSize) -
                                logits);
  }
  std::vector<double> scores(logits, logits + vocabSize);
  for (auto [id, bias] : options_.logitBias) {
    if (id >= 0 && id < vocabSize) {
      scores[id] += bias;
    }
  }
  if (options_.repetitionPenalty != 1.0) {
    // As in Hugging Face: shrink the logits of tokens already seen.
    for (int32_t id : std::set<int32_t>(history.begin(), history.end())) {
      if (id >= 0 && id < vocabSize) {
        scores[id] = scores[id] > 0 ? scores[id] / options_.repetitionPenalty
                                    : scores[id] * options_.repetitionPenalty;
      }
    }
  }
  if (options_.presencePenalty != 0.0 || options_.frequencyPenalty != 0.0) {
    std::map<int32_t, int64_t> counts;
    for (size_t i = std::min(firstGenerated, history.size());
         i < history.size(); ++i) {
      ++counts[history[i]];
    }
    for (auto [id, count] : counts) {
      if (id >= 0 && id < vocabSize) {
        scores[id] -= options_.presencePenalty +
                      options_.frequencyPenalty * static_cast<double>(count);
      }
    }
  }
  if (!options_.doSample) {
    return static_cast<int32_t>(std::max_element(scores.begin(), scores.end()) -
                                scores.begin());
  }
  // Candidates by descending score, ties by id (a stable sort's order),
  // only as many as the sampling can pick: sorting the whole vocabulary
  // every step took llama-100m's sampled decode from 131 to 72-83 tokens/s
  // (32000 ids; Qwen2 has 151936). With top_k, the k best; with top_p
  // alone, the best 256, 2048, ... until they hold top_p of the mass of
  // all (a nucleus is rarely more than a few hundred ids); with neither,
  // every id in id order (the same distribution).
  double temperature = std::max(options_.temperature, 1e-6);
  int64_t keep =
      options_.topK > 0 ? std::min(options_.topK, vocabSize) : vocabSize;
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
    double best = *std::max_element(scores.begin(), scores.end()) / temperature;
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
    std::swap(
        order[0],
        order[std::max_element(scores.begin(), scores.end()) - scores.begin()]);
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
