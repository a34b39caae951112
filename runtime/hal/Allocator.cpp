//===- Allocator.cpp - PyNative's caching allocator -----------------------===//

#include "runtime/hal/Allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <sys/mman.h>

using namespace mfrt;

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t(2) << 20;
/// Blocks this big come from allocatePages (fresh ones are zero already).
constexpr size_t kPageBlock = kHugePage;

/// The mapped length, in 4 KiB pages: the kernel backs the whole 2 MiB
/// stretches of a block with huge pages and its tail with small ones, so
/// a block never holds more than its size (to 4 KiB) resident.
size_t mappedLength(size_t bytes) {
  constexpr size_t kPage = 4096;
  return (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
}

/// Size classes: multiples of 64 bytes up to 4 KiB, then 1/8 steps of the
/// next power of two, so that reuse wastes at most ~12%.
size_t sizeClass(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= 4096) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  size_t power = 1;
  while (power < bytes) {
    power <<= 1;
  }
  size_t step = power / 16;
  return (bytes + step - 1) / step * step;
}
} // namespace

void *mfrt::allocatePages(size_t bytes) {
  size_t length = mappedLength(bytes);
  if (length < kHugePage) { // no whole huge page in it
    void *mapped = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mapped == MAP_FAILED ? nullptr : mapped;
  }
  // Map one huge page more and trim, so the block starts on a boundary.
  void *mapped = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) {
    return nullptr;
  }
  uintptr_t begin = reinterpret_cast<uintptr_t>(mapped);
  uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) {
    munmap(mapped, aligned - begin);
  }
  if (size_t tail = begin + kHugePage - aligned) { // the slack after it
    munmap(reinterpret_cast<void *>(aligned + length), tail);
  }
  void *block = reinterpret_cast<void *>(aligned);
  madvise(block, length, MADV_HUGEPAGE); // advice: fine if refused
  return block;
}

void mfrt::freePages(void *block, size_t bytes) {
  if (block) {
    munmap(block, mappedLength(bytes));
  }
}

namespace {
void releaseBlock(void *block, size_t size) {
  if (size >= kPageBlock) {
    freePages(block, size);
  } else {
    std::free(block);
  }
}
} // namespace

Allocator::Pool::~Pool() {
  for (auto &[size, block] : freeBlocks) {
    releaseBlock(block, size);
  }
}

void Allocator::releaseCached() {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  for (auto &[size, block] : pool_->freeBlocks) {
    releaseBlock(block, size);
    pool_->reserved -= size;
  }
  pool_->freeBlocks.clear();
}

Allocator::Allocator() : pool_(std::make_shared<Pool>()) {}

StatusOr<Tensor> Allocator::allocate(DType dtype, const Shape &shape,
                                     bool zeroed) {
  StatusOr<int64_t> count = checkedElementCount(shape);
  if (!count) {
    return count.status();
  }
  size_t bytes = static_cast<size_t>(*count) * dtypeSize(dtype);
  size_t size = sizeClass(bytes);
  void *block = nullptr;
  { // a cached block, counted live at once (one lock per tensor: decode
    // allocates its inputs and outputs every token)
    std::lock_guard<std::mutex> lock(pool_->mutex);
    auto it = pool_->freeBlocks.find(size);
    if (it != pool_->freeBlocks.end()) {
      block = it->second;
      pool_->freeBlocks.erase(it);
      pool_->live += size;
      pool_->peak = std::max(pool_->peak, pool_->live);
    }
  }
  bool fresh = !block;
  if (!block) {
    block = size >= kPageBlock ? allocatePages(size)
                               : std::aligned_alloc(kAlignment, size);
    if (!block) {
      return Status::error(StatusCode::ResourceExhausted,
                           "out of memory allocating " + std::to_string(bytes) +
                               " bytes for a tensor of shape " +
                               formatShape(shape));
    }
    std::lock_guard<std::mutex> lock(pool_->mutex);
    pool_->reserved += size;
    pool_->live += size;
    pool_->peak = std::max(pool_->peak, pool_->live);
  }
  if (zeroed && !(fresh && size >= kPageBlock)) {
    std::memset(block, 0, bytes);
  }
  std::shared_ptr<Pool> pool = pool_;
  std::shared_ptr<void> storage(block, [pool, size](void *released) {
    std::lock_guard<std::mutex> lock(pool->mutex);
    pool->live -= size;
    pool->freeBlocks.emplace(size, released);
  });
  return Tensor(dtype, shape, std::move(storage));
}

size_t Allocator::liveBytes() const {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  return pool_->live;
}

size_t Allocator::peakBytes() const {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  return pool_->peak;
}

size_t Allocator::reservedBytes() const {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  return pool_->reserved;
}

double mfrt::peakResidentMegabytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::strtod(line.c_str() + 6, nullptr) / 1024.0; // kB
    }
  }
  return 0;
}
