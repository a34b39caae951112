//===- ThreadPool.h - the runtime's threads for kernel tiles ----*- C++ -*-===//
//
// A fixed set of worker threads that, with the calling thread, run the
// tiles of kernel dispatches. Thread t owns the t-th share of a
// dispatch's tiles and takes its own first, one at a time; with more tiles
// than threads it then helps with the others' shares. Owning a share keeps
// a kernel's tile on the same core from one call to the next (a decode
// step's weights stay in that core's cache); helping means a thread
// slowed by a neighbour on a shared machine simply does fewer tiles.
//
// Decode dispatches kernels of a microsecond or two back to back, and a
// cache line takes ~0.3 us to go from one core to the other here, so a
// dispatch moves as few cache lines as it can and waits only where it
// must:
// - the caller writes a job to one of two slots (a sequence lock) that
//   spinning workers read; each share's claim counter only ever counts up
//   (the job names a base position every counter below it jumps to), so
//   nobody resets one and its owner keeps the line;
// - every thread counts the tiles it finished on a line of its own; the
//   tiles of the jobs before job j are done when the counts add up to
//   j's base (the tiles of all the jobs before it);
// - dispatch() returns once the caller's own tiles are done. The next
//   dispatch publishes its job at once and waits for the one before only
//   then, as a worker does before it starts a job: consecutive dispatches
//   cost one exchange between the cores each, not two (publish, then
//   hear back). finish() waits for the last one.
// A thread that waits for tiles a sleeping or late worker has not taken
// runs them itself. Workers spin for a while before they sleep (a futex
// wake-up costs more than a decode kernel).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_HAL_THREADPOOL_H
#define MFC_RUNTIME_HAL_THREADPOOL_H

#include "runtime/base/Status.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mfrt {

class ThreadPool {
public:
  /// `threads` in all, the caller included (0: one per CPU this process
  /// may run on).
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  /// A pool of `threads`, or an error naming the system's refusal when it
  /// cannot start them all (a thread or memory limit).
  static StatusOr<std::unique_ptr<ThreadPool>> create(unsigned threads = 0);
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Tile t of a dispatch: tiles(context, t, t + 1). What a worker reads
  /// of a context that does not change between calls stays in its cache.
  using Tiles = void (*)(const void *context, int64_t begin, int64_t end);

  /// Runs tiles [0, count) and returns when all are done. One caller at a
  /// time, always the same thread.
  void parallelFor(int64_t count, Tiles tiles, const void *context);
  void parallelFor(int64_t count,
                   const std::function<void(int64_t, int64_t)> &body);

  /// Runs tiles [0, count) after every tile dispatched before, and
  /// returns once the caller's own share is done: the workers' may still
  /// run. The caller must finish() before it reads what they write (or
  /// frees what they read); the context must live until then.
  void dispatch(int64_t count, Tiles tiles, const void *context);
  /// Waits until every dispatched tile is done.
  void finish();

  /// Threads in all, the caller included.
  unsigned threads() const { return threads_; }

private:
  /// A job as a thread reads it: its number (1, 2, ...), what to run, and
  /// the base position of its shares (the tiles of all jobs before it).
  struct JobView {
    uint64_t number = 0;
    Tiles tiles = nullptr;
    const void *context = nullptr;
    int64_t count = 0;
    int64_t base = 0;
    /// The tiles the caller had finished when it published the job: a
    /// worker need not fetch the caller's count unless the caller has
    /// taken a late worker's tiles since.
    int64_t callerFinished = 0;
  };

  void work(unsigned self);
  /// Stops and joins the workers.
  void stop();
  void publish(const JobView &job);
  /// The earliest job after job `after` in the slots, if there is one.
  bool nextJob(uint64_t after, JobView &job) const;
  /// Claims and runs the tiles of `share` no one has taken; returns how
  /// many it ran.
  int64_t runShare(unsigned share, const JobView &job);
  /// Thread `self`'s share, then, with more tiles than threads, the
  /// others'. Counts what it ran as finished.
  void runJob(unsigned self, const JobView &job);
  /// Waits until `tiles` tiles are finished in all (the caller's at least
  /// `callerFinished`); takes the unclaimed tiles of `late` (the last job,
  /// or null) when a worker sleeps or no tile was claimed for 1-2 us.
  void waitForTiles(int64_t tiles, unsigned self, const JobView *late,
                    int64_t callerFinished);
  /// The tiles finished in all, the caller's as `caller` (its count, or
  /// a value it had reached) says.
  int64_t finishedTiles(int64_t caller) const;
  void addFinished(unsigned self, int64_t tiles);
  /// Share t of a job of `count` tiles starts at tile ceil(count * t /
  /// threads): with fewer tiles than threads the first threads, the caller
  /// first, get one each (with --threads above the cores a worker may not
  /// be running, but the caller is).
  int64_t shareStart(int64_t count, unsigned t) const {
    return (count * t + threads_ - 1) / threads_;
  }
  /// With more tiles than threads a thread helps with the others' shares
  /// as soon as its own is done. With one each it takes another's only
  /// from a sleeping or late owner: reading a share's counter would cost
  /// its owner that line.
  bool helpsAtOnce(const JobView &job) const { return job.count > threads_; }

  unsigned threads_;
  std::string startError_; ///< why a worker did not start; then none run
  std::vector<std::thread> workers_;
  // Sleeping workers: a condition variable, used only after spinning.
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false; // guarded by mutex_
  alignas(64) std::atomic<unsigned> sleepers_{0};

  /// Job j is in slot j % 2 under a sequence lock: 2 j once written, odd
  /// while the caller writes it. Publishing job j + 2 over job j waits for
  /// job j's tiles.
  struct alignas(64) Slot {
    std::atomic<uint64_t> sequence{0};
    std::atomic<Tiles> tiles{nullptr};
    std::atomic<const void *> context{nullptr};
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> base{0};
    std::atomic<int64_t> callerFinished{0};
  };
  Slot slots_[2];
  /// A share's claim counter: one past the last position handed out.
  /// Share t of a job holds positions [base, base + its size) of counter
  /// t; a counter below base has handed out none of them.
  struct alignas(64) Counter {
    std::atomic<int64_t> next{0};
  };
  std::unique_ptr<Counter[]> counters_; // per thread, the caller's first
  /// Tiles a thread finished, ever; only that thread writes it.
  struct alignas(64) Finished {
    std::atomic<int64_t> tiles{0};
  };
  std::unique_ptr<Finished[]> finished_; // per thread, the caller's first

  // The caller's own records.
  uint64_t jobs_ = 0; // published
  int64_t base_ = 0;  // their tiles
  JobView pending_;   // the last job, until finish() (number 0: none)
};

} // namespace mfrt

#endif // MFC_RUNTIME_HAL_THREADPOOL_H
