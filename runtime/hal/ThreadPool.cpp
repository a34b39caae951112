//===- ThreadPool.cpp - the runtime's threads for kernel tiles ------------===//

#include "runtime/hal/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include <sched.h>

using namespace mfrt;

namespace {

using Clock = std::chrono::steady_clock;

/// Busy-waiting: pauses for the first ~50 us, then a yield each step. A
/// yield costs ~1.2 us here (a system call), as much as a decode kernel,
/// so a thread that yields from the start reacts late; but the scheduler
/// may put a spinning thread on the core of the thread it waits for (it
/// does so for a new thread, and more so on a busy machine), and pausing
/// alone would then take half that core's time for as long as it spins.
/// The clock is read every 64 pauses: a read costs more than a pause.
class Backoff {
public:
  void step() {
    if (!yielding_ && ++pauses_ % 64 != 0) {
      __builtin_ia32_pause();
      return;
    }
    waited_ = Clock::now() - began_;
    yielding_ = waited_ > std::chrono::microseconds(50);
    if (yielding_) {
      std::this_thread::yield();
    } else {
      __builtin_ia32_pause();
    }
  }
  /// How long it has waited, as of its last look at the clock.
  Clock::duration waited() const { return waited_; }

private:
  Clock::time_point began_ = Clock::now();
  Clock::duration waited_{};
  unsigned pauses_ = 0;
  bool yielding_ = false;
};

void callBody(const void *body, int64_t begin, int64_t end) {
  (*static_cast<const std::function<void(int64_t, int64_t)> *>(body))(begin,
                                                                      end);
}

} // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) {
    // The CPUs of this process's affinity mask (taskset, a container's
    // cpuset), not every CPU of the machine.
    cpu_set_t cpus;
    threads = sched_getaffinity(0, sizeof cpus, &cpus) == 0
                  ? static_cast<unsigned>(CPU_COUNT(&cpus))
                  : std::thread::hardware_concurrency();
    threads = std::max(1u, threads);
  }
  threads_ = threads;
  counters_ = std::make_unique<Counter[]>(threads);
  finished_ = std::make_unique<Finished[]>(threads);
  try {
    for (unsigned i = 1; i < threads; ++i) {
      workers_.emplace_back([this, i] { work(i); });
    }
  } catch (const std::system_error &error) {
    // The workers that did start stop again: the pool runs on the caller
    // alone, and create() reports why.
    startError_ = "cannot start " + std::to_string(threads) +
                  " threads (started " + std::to_string(workers_.size() + 1) +
                  "): " + error.what();
    stop();
    threads_ = 1;
  }
}

StatusOr<std::unique_ptr<ThreadPool>> ThreadPool::create(unsigned threads) {
  auto pool = std::make_unique<ThreadPool>(threads);
  if (!pool->startError_.empty()) {
    return Status::error(StatusCode::ResourceExhausted,
                         pool->startError_ +
                             "; use --threads with fewer, or raise the limit");
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  finish();
  stop();
}

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread &worker : workers_) {
    worker.join();
  }
  workers_.clear();
}

void ThreadPool::publish(const JobView &job) {
  Slot &slot = slots_[job.number % 2];
  slot.sequence.store(2 * job.number - 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.tiles.store(job.tiles, std::memory_order_relaxed);
  slot.context.store(job.context, std::memory_order_relaxed);
  slot.count.store(job.count, std::memory_order_relaxed);
  slot.base.store(job.base, std::memory_order_relaxed);
  slot.callerFinished.store(job.callerFinished, std::memory_order_relaxed);
  slot.sequence.store(2 * job.number, std::memory_order_release);
  // No fence between the store and this load (it would wait for the
  // slot's line): a worker going to sleep just now may miss the job, and
  // then the caller, which sees it asleep, takes its tiles.
  if (sleepers_.load(std::memory_order_relaxed) != 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
  }
}

bool ThreadPool::nextJob(uint64_t after, JobView &job) const {
  job.number = 0;
  for (const Slot &slot : slots_) {
    uint64_t sequence = slot.sequence.load(std::memory_order_acquire);
    if (sequence <= 2 * after || (sequence & 1) ||
        (job.number != 0 && sequence / 2 > job.number)) {
      continue; // old, being written (looked at again), or later
    }
    JobView read;
    read.tiles = slot.tiles.load(std::memory_order_relaxed);
    read.context = slot.context.load(std::memory_order_relaxed);
    read.count = slot.count.load(std::memory_order_relaxed);
    read.base = slot.base.load(std::memory_order_relaxed);
    read.callerFinished = slot.callerFinished.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) == sequence) {
      read.number = sequence / 2;
      job = read;
    }
  }
  return job.number != 0;
}

int64_t ThreadPool::runShare(unsigned share, const JobView &job) {
  int64_t first = shareStart(job.count, share);
  int64_t end = job.base + shareStart(job.count, share + 1) - first;
  std::atomic<int64_t> &next = counters_[share].next;
  int64_t seen = next.load(std::memory_order_relaxed);
  int64_t ran = 0;
  for (;;) {
    int64_t position = std::max(seen, job.base);
    if (position >= end) {
      return ran;
    }
    if (next.compare_exchange_weak(seen, position + 1,
                                   std::memory_order_relaxed)) {
      int64_t tile = first + position - job.base;
      job.tiles(job.context, tile, tile + 1);
      ++ran;
      seen = position + 1;
    }
  }
}

void ThreadPool::runJob(unsigned self, const JobView &job) {
  int64_t ran = runShare(self, job);
  if (helpsAtOnce(job)) {
    for (unsigned k = 1; k < threads_; ++k) {
      ran += runShare((self + k) % threads_, job);
    }
  }
  addFinished(self, ran);
}

int64_t ThreadPool::finishedTiles(int64_t caller) const {
  for (unsigned t = 1; t < threads_; ++t) {
    caller += finished_[t].tiles.load(std::memory_order_acquire);
  }
  return caller;
}

void ThreadPool::addFinished(unsigned self, int64_t tiles) {
  if (tiles != 0) {
    std::atomic<int64_t> &finished = finished_[self].tiles;
    finished.store(finished.load(std::memory_order_relaxed) + tiles,
                   std::memory_order_release);
  }
}

void ThreadPool::waitForTiles(int64_t tiles, unsigned self, const JobView *late,
                              int64_t callerFinished) {
  if (finishedTiles(callerFinished) >= tiles) {
    return;
  }
  auto caller = [&] {
    return finished_[0].tiles.load(std::memory_order_acquire);
  };
  // Every microsecond the waiter looks at the claim counters: if none moved
  // since its last look, the owners of the tiles left are asleep or not
  // running (a busy machine: with two other processes on its two cores,
  // llama-tiny decode 7.2-11.9K tokens/s looking every 5 us, 12.8-14.3K
  // every 1 us; unchanged when idle). A tile being run is not taken.
  constexpr Clock::duration kLookEvery = std::chrono::microseconds(1);
  Clock::duration lookedAt{};
  int64_t claims = -1;
  for (Backoff backoff;; backoff.step()) {
    if (finishedTiles(caller()) >= tiles) {
      return;
    }
    bool asleep = sleepers_.load(std::memory_order_relaxed) != 0;
    if (!late || (!asleep && backoff.waited() < lookedAt + kLookEvery)) {
      continue;
    }
    int64_t now = 0;
    for (unsigned share = 0; share < threads_; ++share) {
      now += counters_[share].next.load(std::memory_order_relaxed);
    }
    if (asleep || now == claims) {
      // Every share of the last job: its owners either took their tiles
      // (and finish them) or find none left.
      int64_t ran = 0;
      for (unsigned share = 0; share < threads_; ++share) {
        ran += runShare(share, *late);
      }
      addFinished(self, ran);
      late = nullptr;
    }
    claims = now;
    lookedAt = backoff.waited();
  }
}

void ThreadPool::work(unsigned self) {
  uint64_t seen = 0;
  JobView last;
  for (;;) {
    JobView job;
    // Dispatches come in bursts (one per kernel): look for the next one for
    // ~200 us before sleeping, which costs a wake-up.
    for (Backoff backoff; !nextJob(seen, job); backoff.step()) {
      if (backoff.waited() > std::chrono::microseconds(200)) {
        break;
      }
    }
    if (job.number == 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] {
        if (stopping_) {
          return true;
        }
        for (const Slot &slot : slots_) {
          if (slot.sequence.load(std::memory_order_seq_cst) > 2 * seen) {
            return true;
          }
        }
        return false;
      });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      if (stopping_) {
        return;
      }
      continue;
    }
    // The jobs before it may have written what its tiles read. This
    // thread may take the tiles of the one before only if it read it.
    waitForTiles(job.base, self,
                 last.number + 1 == job.number ? &last : nullptr,
                 job.callerFinished);
    runJob(self, job);
    last = job;
    seen = job.number;
  }
}

void ThreadPool::dispatch(int64_t count, Tiles tiles, const void *context) {
  if (count <= 0) {
    return;
  }
  if (count == 1 || workers_.empty()) {
    finish();
    tiles(context, 0, count);
    return;
  }
  // Job number - 2, in the slot this one takes, was waited for before the
  // caller's share of job number - 1.
  JobView job{++jobs_, tiles,
              context, count,
              base_,   finished_[0].tiles.load(std::memory_order_relaxed)};
  base_ += count;
  publish(job);
  finish();
  runJob(0, job);
  pending_ = job;
}

void ThreadPool::finish() {
  if (pending_.number == 0) {
    return;
  }
  waitForTiles(pending_.base + pending_.count, 0, &pending_,
               finished_[0].tiles.load(std::memory_order_relaxed));
  pending_.number = 0;
}

void ThreadPool::parallelFor(int64_t count, Tiles tiles, const void *context) {
  dispatch(count, tiles, context);
  finish();
}

void ThreadPool::parallelFor(
    int64_t count, const std::function<void(int64_t, int64_t)> &body) {
  parallelFor(count, callBody, &body);
}
