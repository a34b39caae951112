//===- ThreadPool.h - the runtime's threads for kernel tiles ----*- C++ -*-===//
//
// A fixed set of worker threads that, with the calling thread, share the
// tiles of one kernel dispatch at a time. Tiles are handed out in chunks
// from an atomic counter, so a thread slowed by a neighbour on a shared
// machine simply takes fewer.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_THREADPOOL_H
#define MFC_RUNTIME_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
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
  /// returns when all are done.
  void parallelFor(int64_t count,
                   const std::function<void(int64_t, int64_t)> &body);

private:
  void work();
  void runChunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0}; // generation_, readable without the lock
  bool stopping_ = false;
  unsigned busy_ = 0;
  // The current job.
  const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  int64_t count_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
};

} // namespace mfrt

#endif // MFC_RUNTIME_THREADPOOL_H
