//===- Engine.cpp - mf-serve's generation thread --------------------------===//

#include "tools/mf-serve/Engine.h"

#include <cstdio>

using namespace mfserve;
using namespace mfrt;

namespace {

void addSeconds(std::atomic<double> &total, Clock::duration elapsed) {
  double seconds = std::chrono::duration<double>(elapsed).count();
  double old = total.load();
  while (!total.compare_exchange_weak(old, old + seconds)) {
  }
}

} // namespace

Status Engine::submit(GenerationRequest request, std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      return Status::error(StatusCode::Unavailable, "the server is stopping");
    }
    if (static_cast<int64_t>(incoming_.size()) + metrics_.waiting.load() >=
        maxWaiting_) {
      ++metrics_.rejected;
      return Status::error(StatusCode::Unavailable,
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
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Idle: sleep until a request arrives (a busy generator steps on).
      wake_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || generator_.busy();
      });
      if (stopping_) {
        break;
      }
      arrived.swap(incoming_);
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
    for (auto &[id, job] : active_) {
      if (job->abandoned) {
        generator_.cancel(id);
      }
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
    if (!status) {
      // The step's sequences were ended; their clients hear why.
      std::fprintf(stderr, "mf-serve: error: %s\n", status.message().c_str());
    }
  }
}
