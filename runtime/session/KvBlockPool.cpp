//===- KvBlockPool.cpp - the blocks of a paged KV cache -------------------===//

#include "runtime/session/KvBlockPool.h"

#include <algorithm>
#include <cassert>

using namespace mfrt;

KvBlockPool::KvBlockPool(int64_t blocks, int64_t blockSize)
    : blockSize_(blockSize), references_(blocks, 0), contents_(blocks),
      freePosition_(blocks) {
  for (int32_t block = 0; block < blocks; ++block) {
    freePosition_[block] = free_.insert(free_.end(), block);
  }
}

std::optional<int32_t> KvBlockPool::allocate() {
  if (free_.empty()) {
    return std::nullopt;
  }
  int32_t block = free_.front();
  free_.pop_front();
  forget(block);
  references_[block] = 1;
  return block;
}

void KvBlockPool::release(int32_t block) {
  assert(references_[block] > 0 && "releasing a free block");
  if (--references_[block] == 0) {
    freePosition_[block] = free_.insert(free_.end(), block);
  }
}

uint64_t KvBlockPool::chainHash(uint64_t parent, const int32_t *tokens,
                                int64_t count) {
  // FNV-1a over the parent's hash and the tokens' bytes.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      hash = (hash ^ ((value >> (8 * i)) & 0xff)) * 1099511628211ull;
    }
  };
  mix(parent, 8);
  for (int64_t i = 0; i < count; ++i) {
    mix(static_cast<uint32_t>(tokens[i]), 4);
  }
  return hash;
}

std::optional<int32_t> KvBlockPool::share(uint64_t parent,
                                          const int32_t *tokens) {
  auto [begin, end] =
      byHash_.equal_range(chainHash(parent, tokens, blockSize_));
  for (auto it = begin; it != end; ++it) {
    int32_t block = it->second;
    const Contents &held = contents_[block];
    // The hash names a candidate; the parent and the tokens decide.
    if (held.parent == parent &&
        std::equal(held.tokens.begin(), held.tokens.end(), tokens)) {
      if (references_[block]++ == 0) {
        free_.erase(freePosition_[block]);
      }
      return block;
    }
  }
  return std::nullopt;
}

void KvBlockPool::publish(int32_t block, uint64_t parent,
                          const int32_t *tokens) {
  uint64_t hash = chainHash(parent, tokens, blockSize_);
  auto [begin, end] = byHash_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    const Contents &held = contents_[it->second];
    if (held.parent == parent &&
        std::equal(held.tokens.begin(), held.tokens.end(), tokens)) {
      return;
    }
  }
  forget(block);
  contents_[block] = {parent,
                      std::vector<int32_t>(tokens, tokens + blockSize_)};
  byHash_.emplace(hash, block);
}

void KvBlockPool::forget(int32_t block) {
  Contents &held = contents_[block];
  if (held.tokens.empty()) {
    return;
  }
  auto [begin, end] = byHash_.equal_range(
      chainHash(held.parent, held.tokens.data(), blockSize_));
  for (auto it = begin; it != end; ++it) {
    if (it->second == block) {
      byHash_.erase(it);
      break;
    }
  }
  held = {};
}
