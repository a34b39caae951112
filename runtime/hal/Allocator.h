//===- Allocator.h - PyNative's caching allocator ---------------*- C++ -*-===//
//
// Eager execution allocates and frees a tensor per op. Blocks are rounded up
// to a size class and kept on a free list when their tensor dies, so the
// next op of the same shape reuses them without calling malloc. Tracks the
// peak of live bytes, which benchmarks compare with Graph Mode's arena.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_HAL_ALLOCATOR_H
#define MFC_RUNTIME_HAL_ALLOCATOR_H

#include "runtime/base/Tensor.h"

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
  StatusOr<Tensor> allocate(DType dtype, const Shape &shape,
                            bool zeroed = true);

  /// Bytes held by live tensors now / at most so far.
  size_t liveBytes() const;
  size_t peakBytes() const;
  /// Bytes obtained from the system (live + cached).
  size_t reservedBytes() const;
  /// Returns the cached blocks to the system: for memory that will not be
  /// asked for again in their sizes (weights Graph Mode released).
  void releaseCached();

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

/// `bytes` of zeroed, page-aligned memory; from 2 MiB on, 2 MiB-aligned in
/// transparent huge pages where the kernel has them; nullptr when out of
/// memory. For big buffers: here a page fault costs ~12 us (a VM), so
/// first touching 32 MB in 4 KiB pages took 95 ms, in 2 MiB pages 2 ms.
/// Release with freePages.
void *allocatePages(size_t bytes);
void freePages(void *block, size_t bytes);

/// This process's peak resident set in MB (VmHWM: unlike getrusage's
/// maxrss it does not carry over the size of whatever forked us).
double peakResidentMegabytes();

} // namespace mfrt

#endif // MFC_RUNTIME_HAL_ALLOCATOR_H
