//===- ThreadPool.cpp - the runtime's threads for kernel tiles ------------===//

#include "runtime/ThreadPool.h"

#include <algorithm>
#include <chrono>

using namespace mfrt;

namespace {

/// Busy-waits one step: a few pauses, then a yield each step. The scheduler
/// may put a spinning thread on the core of the thread it waits for (it
/// does so for a new thread, and more so on a busy machine); pausing alone
/// would then take half that core's time for as long as it spins.
void spinStep(unsigned &spins) {
  if (++spins < 64) {
    __builtin_ia32_pause();
  } else {
    std::this_thread::yield();
  }
}

bool isOpen(uint64_t word) { return word & 1; }

} // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) {
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  shares_ = std::make_unique<Share[]>(threads);
  for (unsigned i = 1; i < threads; ++i) {
    workers_.emplace_back([this, i] { work(i); });
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

void ThreadPool::runTiles(unsigned self) {
  unsigned threads = size();
  for (unsigned k = 0; k < threads; ++k) {
    Share &share = shares_[(self + k) % threads];
    for (;;) {
      int64_t tile = share.next.fetch_add(1, std::memory_order_relaxed);
      if (tile >= share.end) {
        break;
      }
      (*body_)(tile, tile + 1);
    }
  }
}

void ThreadPool::join(uint64_t word, unsigned self) {
  joined_.fetch_add(1, std::memory_order_seq_cst);
  // The caller closes the job and then reads joined_: if this join came
  // after that read, this load sees the job closed (both are seq_cst).
  if (job_.load(std::memory_order_seq_cst) == word) {
    runTiles(self);
  }
  left_.fetch_add(1, std::memory_order_release);
}

void ThreadPool::work(unsigned self) {
  uint64_t seen = 0;
  for (;;) {
    // Dispatches come in bursts (one per kernel): look for the next one for
    // ~200 us before sleeping, which costs a wake-up.
    uint64_t word = job_.load(std::memory_order_acquire);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    for (unsigned spins = 0; word == seen; spinStep(spins)) {
      if (spins >= 64 && std::chrono::steady_clock::now() > deadline) {
        break;
      }
      word = job_.load(std::memory_order_acquire);
    }
    if (word == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] {
        return stopping_ || job_.load(std::memory_order_seq_cst) != seen;
      });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      if (stopping_) {
        return;
      }
      continue;
    }
    seen = word;
    if (isOpen(word)) {
      join(word, self);
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
  // No worker touches the fields below: the last job is closed and all
  // that joined it have left.
  body_ = &body;
  unsigned threads = size();
  for (unsigned t = 0; t < threads; ++t) {
    shares_[t].next.store(count * t / threads, std::memory_order_relaxed);
    shares_[t].end = count * (t + 1) / threads;
  }
  uint64_t word = 2 * ++generation_ + 1;
  job_.store(word, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) != 0) {
    // Taking the lock orders this wake-up after a sleeper's last look at
    // job_.
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
  }
  runTiles(0);
  // Every tile is handed out: close the job and wait for the workers that
  // joined it (they are awake, finishing their last tile).
  job_.store(word - 1, std::memory_order_seq_cst);
  uint64_t joined = joined_.load(std::memory_order_seq_cst);
  unsigned spins = 0;
  while (left_.load(std::memory_order_acquire) < joined) {
    spinStep(spins);
  }
  body_ = nullptr;
}
