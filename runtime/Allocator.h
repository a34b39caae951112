//===- Allocator.h - PyNative's caching allocator ---------------*- C++ -*-===//
//
// Eager execution allocates and frees a tensor per op. Blocks are rounded up
// to a size class and kept on a free list when their tensor dies, so the
// next op of the same shape reuses them without calling malloc. Tracks the
// peak of live bytes, which benchmarks compare with Graph Mode's arena.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_ALLOCATOR_H
#define MFC_RUNTIME_ALLOCATOR_H

#include "runtime/Tensor.h"

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace mfrt {

class Allocator {
public:
  Allocator();

  /// A tensor of `shape`, zero-filled unless `zeroed` is false (for a
  /// buffer its writer fills completely); an error if the size overflows or
  /// memory runs out.
  StatusOr<Tensor> allocate(DType dtype, const Shape &shape, bool zeroed = true);

  /// Bytes held by live tensors now / at most so far.
  size_t liveBytes() const;
  size_t peakBytes() const;
  /// Bytes obtained from the system (live + cached).
  size_t reservedBytes() const;

private:
  struct Pool {
    std::mutex mutex;
    std::multimap<size_t, void *> freeBlocks;
    size_t live = 0;
    size_t peak = 0;
    size_t reserved = 0;
    ~Pool();
  };
  std::shared_ptr<Pool> pool_;
};

/// This process's peak resident set in MB (VmHWM: unlike getrusage's
/// maxrss it does not carry over the size of whatever forked us).
double peakResidentMegabytes();

} // namespace mfrt

#endif // MFC_RUNTIME_ALLOCATOR_H
