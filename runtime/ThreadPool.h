//===- ThreadPool.h - the runtime's threads for kernel tiles ----*- C++ -*-===//
//
// A fixed set of worker threads that, with the calling thread, share the
// tiles of one kernel dispatch at a time. Thread t owns the t-th equal
// share of the tiles and takes its own first, one at a time from an atomic
// counter, then helps with the others' shares through their counters.
// Owning a share keeps a kernel's tile on the same core from one call to
// the next (a decode step's weights stay in that core's cache); helping
// means a thread slowed by a neighbour on a shared machine simply does
// fewer tiles, and a sleeping worker's share is done by the others.
//
// Decode dispatches kernels of a few microseconds back to back, so a
// dispatch must cost far less than a futex wake-up: no lock on the way.
// Workers spin on an atomic job word for a while before they sleep; a
// worker joins an open job by counting itself in, and the caller waits
// only for workers that joined (not for sleeping ones).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_THREADPOOL_H
#define MFC_RUNTIME_THREADPOOL_H

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
  /// `threads` in all, the caller included (0: one per hardware thread).
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  /// Calls `body(begin, end)` on disjoint ranges covering [0, count) and
  /// returns when all are done. One caller at a time.
  void parallelFor(int64_t count,
                   const std::function<void(int64_t, int64_t)> &body);

private:
  void work(unsigned self);
  /// Runs tiles, thread `self`'s share first.
  void runTiles(unsigned self);
  /// Joins the job `word` names if it is still open; runs its tiles.
  void join(uint64_t word, unsigned self);

  std::vector<std::thread> workers_;
  // Sleeping workers: a condition variable, used only after spinning.
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false; // guarded by mutex_
  alignas(64) std::atomic<unsigned> sleepers_{0};
  // The job word: 2 * generation + 1 while the job is open, + 0 once the
  // caller closed it.
  alignas(64) std::atomic<uint64_t> job_{0};
  // Monotonic: every join is matched by a leave.
  alignas(64) std::atomic<uint64_t> joined_{0};
  alignas(64) std::atomic<uint64_t> left_{0};
  /// A thread's share of the tiles: [next, end) still to hand out.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Share[]> shares_; // one per thread, the caller's first
  // The current job, fixed while it is open.
  alignas(64) const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  uint64_t generation_ = 0; // the caller's
};

} // namespace mfrt

#endif // MFC_RUNTIME_THREADPOOL_H
