//===- Engine.cpp - mf-serve's generation thread --------------------------===//

#include "tools/mf-serve/Engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

using namespace mfserve;
using namespace mfrt;

namespace {

void addSeconds(std::atomic<double> &total, Clock::duration elapsed) {
  double seconds = std::chrono::duration<double>(elapsed).count();
  double old = total.load();
  while (!total.compare_exchange_weak(old, old + seconds)) {
  }
}

/// What rank 0 admitted and cancelled in one iteration (sharded models).
struct Plan {
  bool stop = false;
  std::vector<GenerationRequest> added;
  std::vector<int64_t> cancelled;
};

class Writer {
public:
  template <typename T> void put(const T &value) {
    const auto *bytes = reinterpret_cast<const uint8_t *>(&value);
    out.insert(out.end(), bytes, bytes + sizeof(T));
  }
  void ids(const std::vector<int32_t> &values) {
    put<uint64_t>(values.size());
    for (int32_t value : values) {
      put(value);
    }
  }
  std::vector<uint8_t> out;
};

class Reader {
public:
  explicit Reader(const std::vector<uint8_t> &in) : in_(in) {}
  template <typename T> T get() {
    T value{};
    if (at_ + sizeof(T) > in_.size()) {
      failed = true;
      return value;
    }
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::vector<int32_t> ids() {
    uint64_t count = get<uint64_t>();
    std::vector<int32_t> values;
    if (count > (in_.size() - std::min(at_, in_.size())) / sizeof(int32_t)) {
      failed = true;
      return values;
    }
    for (uint64_t i = 0; i < count; ++i) {
      values.push_back(get<int32_t>());
    }
    return values;
  }
  bool failed = false;

private:
  const std::vector<uint8_t> &in_;
  size_t at_ = 0;
};

std::vector<uint8_t> encodePlan(const Plan &plan) {
  Writer writer;
  writer.put<uint8_t>(plan.stop);
  writer.put<uint64_t>(plan.added.size());
  for (const GenerationRequest &request : plan.added) {
    writer.ids(request.prompt);
    writer.put(request.maxNewTokens);
    writer.put<uint8_t>(request.sampling.doSample);
    writer.put(request.sampling.topK);
    writer.put(request.sampling.topP);
    writer.put(request.sampling.temperature);
    writer.put(request.sampling.repetitionPenalty);
    writer.put(request.sampling.presencePenalty);
    writer.put(request.sampling.frequencyPenalty);
    writer.put<uint64_t>(request.sampling.logitBias.size());
    for (auto [id, bias] : request.sampling.logitBias) {
      writer.put(id);
      writer.put(bias);
    }
    writer.put(request.seed);
    writer.ids(request.stopIds);
  }
  writer.put<uint64_t>(plan.cancelled.size());
  for (int64_t id : plan.cancelled) {
    writer.put(id);
  }
  return writer.out;
}

StatusOr<Plan> decodePlan(const std::vector<uint8_t> &bytes) {
  Reader reader(bytes);
  Plan plan;
  plan.stop = reader.get<uint8_t>() != 0;
  uint64_t added = reader.get<uint64_t>();
  for (uint64_t i = 0; i < added && !reader.failed; ++i) {
    GenerationRequest request;
    request.prompt = reader.ids();
    request.maxNewTokens = reader.get<int64_t>();
    request.sampling.doSample = reader.get<uint8_t>() != 0;
    request.sampling.topK = reader.get<int64_t>();
    request.sampling.topP = reader.get<double>();
    request.sampling.temperature = reader.get<double>();
    request.sampling.repetitionPenalty = reader.get<double>();
    request.sampling.presencePenalty = reader.get<double>();
    request.sampling.frequencyPenalty = reader.get<double>();
    uint64_t biases = reader.get<uint64_t>();
    for (uint64_t b = 0; b < biases && !reader.failed; ++b) {
      int32_t id = reader.get<int32_t>();
      request.sampling.logitBias.emplace_back(id, reader.get<double>());
    }
    request.seed = reader.get<uint64_t>();
    request.stopIds = reader.ids();
    plan.added.push_back(std::move(request));
  }
  uint64_t cancelled = reader.get<uint64_t>();
  for (uint64_t i = 0; i < cancelled && !reader.failed; ++i) {
    plan.cancelled.push_back(reader.get<int64_t>());
  }
  if (reader.failed) {
    return Status::error(StatusCode::Internal, "a truncated plan from rank 0");
  }
  return plan;
}

} // namespace

TokenLogprobs mfserve::logprobsOf(const float *logits, int64_t vocab,
                                  int32_t token, int64_t top) {
  // log softmax in double: the largest logit first, then the log of the
  // sum of exponentials.
  double best = *std::max_element(logits, logits + vocab), sum = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    sum += std::exp(static_cast<double>(logits[i]) - best);
  }
  double logTotal = best + std::log(sum);
  TokenLogprobs result;
  result.logprob = static_cast<float>(logits[token] - logTotal);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  int64_t count = std::min(top, vocab);
  std::partial_sort(
      ids.begin(), ids.begin() + count, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
  for (int64_t i = 0; i < count; ++i) {
    result.top.emplace_back(ids[i],
                            static_cast<float>(logits[ids[i]] - logTotal));
  }
  return result;
}

Status Engine::submit(GenerationRequest request, std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      return Status::error(StatusCode::Unavailable, "the server is stopping");
    }
    if (static_cast<int64_t>(incoming_.size()) + metrics_.waiting.load() >=
        maxWaiting_) {
      ++metrics_.rejected;
      return Status::error(
          StatusCode::Unavailable,
          "the server has " + std::to_string(maxWaiting_) +
              " requests waiting (--max-waiting); retry later");
    }
    job->promptTokens = static_cast<int64_t>(request.prompt.size());
    incoming_.emplace_back(std::move(request), std::move(job));
  }
  wake_.notify_one();
  return Status::ok();
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
}

void Engine::run() {
  while (true) {
    std::deque<std::pair<GenerationRequest, std::shared_ptr<Job>>> arrived;
    bool stop;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Idle: sleep until a request arrives (a busy generator steps on).
      wake_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || generator_.busy();
      });
      stop = stopping_;
      arrived.swap(incoming_);
    }
    std::vector<int64_t> cancels;
    for (auto &[id, job] : active_) {
      if (job->abandoned) {
        cancels.push_back(id);
      }
    }
    if (ranks_) {
      // The other ranks admit and cancel the same, then step with us.
      Plan plan;
      plan.stop = stop;
      for (const auto &[request, job] : arrived) {
        plan.added.push_back(request);
      }
      plan.cancelled = cancels;
      std::vector<uint8_t> bytes = encodePlan(plan);
      if (Status status = ranks_->broadcastBytes(bytes); !status) {
        std::fprintf(stderr, "mf-serve: error: %s\n", status.message().c_str());
        ranks_->abort(1);
      }
    }
    if (stop) {
      break;
    }
    for (auto &[request, job] : arrived) {
      std::shared_ptr<Job> held = job;
      auto callback = [this, held](const GenerationEvent &event) {
        {
          std::lock_guard<std::mutex> lock(held->mutex);
          if (event.token) {
            if (held->tokens.empty()) {
              addSeconds(metrics_.firstTokenSeconds,
                         Clock::now() - held->submitted);
              ++metrics_.firstTokens;
            }
            held->tokens.push_back(*event.token);
            if (held->topLogprobs >= 0 && event.logits) {
              held->logprobs.push_back(
                  logprobsOf(event.logits, generator_.vocab(), *event.token,
                             held->topLogprobs));
            }
          }
          held->finish = event.finish;
          if (!event.error.empty()) {
            held->error = event.error;
          }
        }
        if (event.finish) {
          addSeconds(metrics_.requestSeconds, Clock::now() - held->submitted);
          ++(*event.finish == FinishReason::Cancelled ? metrics_.cancelled
                                                      : metrics_.finished);
          active_.erase(event.id);
        }
        held->changed.notify_all();
      };
      StatusOr<int64_t> id = generator_.add(std::move(request), callback);
      if (!id) {
        std::lock_guard<std::mutex> lock(job->mutex);
        job->error = id.status().message();
        job->finish = FinishReason::Cancelled;
        job->changed.notify_all();
        continue;
      }
      ++metrics_.requests;
      active_.emplace(*id, job);
    }
    for (int64_t id : cancels) {
      generator_.cancel(id);
    }
    GenerationStats before = generator_.stats();
    Status status = generator_.step();
    const GenerationStats &after = generator_.stats();
    metrics_.promptTokens += after.promptTokens - before.promptTokens;
    metrics_.generatedTokens += after.generatedTokens - before.generatedTokens;
    metrics_.steps += after.steps - before.steps;
    metrics_.decodeSteps += after.decodeSteps - before.decodeSteps;
    metrics_.waiting = after.waiting;
    metrics_.running = after.running;
    metrics_.kvBlocks = after.kvBlocks;
    metrics_.kvBlocksUsed = after.kvBlocksUsed;
    metrics_.prefixHitTokens = after.prefixHitTokens;
    metrics_.preemptions = after.preemptions;
    if (!status) {
      // The step's sequences were ended; their clients hear why.
      std::fprintf(stderr, "mf-serve: error: %s\n", status.message().c_str());
      if (ranks_) {
        ranks_->abort(1); // the ranks are out of step
      }
    }
  }
}

Status Engine::follow() {
  while (true) {
    std::vector<uint8_t> bytes;
    MFRT_RETURN_IF_ERROR(ranks_->broadcastBytes(bytes));
    MFRT_ASSIGN_OR_RETURN(Plan plan, decodePlan(bytes));
    if (plan.stop) {
      return Status::ok();
    }
    // Rank 0 answers the clients; here a request only has to run.
    for (GenerationRequest &request : plan.added) {
      (void)generator_.add(std::move(request), [](const GenerationEvent &) {});
    }
    for (int64_t id : plan.cancelled) {
      generator_.cancel(id);
    }
    MFRT_RETURN_IF_ERROR(generator_.step());
  }
}
