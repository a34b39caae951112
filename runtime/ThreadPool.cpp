//===- ThreadPool.cpp - the runtime's threads for kernel tiles ------------===//

#include "runtime/ThreadPool.h"

#include <algorithm>

using namespace mfrt;

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) {
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  for (unsigned i = 1; i < threads; ++i) {
    workers_.emplace_back([this] { work(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread &worker : workers_) {
    worker.join();
  }
}

void ThreadPool::runChunks() {
  for (;;) {
    int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= count_) {
      return;
    }
    (*body_)(begin, std::min(count_, begin + chunk_));
  }
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    // Dispatches come in bursts (one per kernel): look for the next one for
    // a few microseconds before sleeping, which costs a wake-up.
    for (int spin = 0; spin < 4000 && published_.load(std::memory_order_acquire) == seen;
         ++spin) {
      __builtin_ia32_pause();
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) {
        return;
      }
      seen = generation_;
    }
    runChunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) {
        done_.notify_one();
      }
    }
  }
}

void ThreadPool::parallelFor(int64_t count,
                             const std::function<void(int64_t, int64_t)> &body) {
  if (count <= 0) {
    return;
  }
  if (count == 1 || workers_.empty()) {
    body(0, count);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    count_ = count;
    // About four chunks a thread: balance without much contention.
    chunk_ = std::max<int64_t>(1, count / (4 * static_cast<int64_t>(size())));
    next_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<unsigned>(workers_.size());
    ++generation_;
    published_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  runChunks();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  body_ = nullptr;
}
