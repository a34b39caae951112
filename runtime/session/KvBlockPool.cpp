//===- KvBlockPool.cpp - the blocks of a paged KV cache -------------------===//

#include "runtime/session/KvBlockPool.h"

#include <algorithm>
#include <cassert>

using namespace mfrt;

KvBlockPool::KvBlockPool(int64_t blocks, int64_t blockSize)
    : blockSize_(blockSize), references_(blocks, 0), generations_(blocks, 0),
      held_(blocks), freePosition_(blocks) {
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
  ++generations_[block]; // new contents
  references_[block] = 1;
  return block;
}

void KvBlockPool::release(int32_t block) {
  assert(references_[block] > 0 && "releasing a free block");
  if (--references_[block] == 0) {
    freePosition_[block] = free_.insert(free_.end(), block);
  }
}

uint64_t KvBlockPool::keyOf(Contents parent, const int32_t *tokens) const {
  // FNV-1a over the parent and the tokens: it picks the candidates only.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      hash = (hash ^ ((value >> (8 * i)) & 0xff)) * 1099511628211ull;
    }
  };
  mix(static_cast<uint32_t>(parent.block), 4);
  mix(parent.generation, 8);
  for (int64_t i = 0; i < blockSize_; ++i) {
    mix(static_cast<uint32_t>(tokens[i]), 4);
  }
  return hash;
}

int32_t KvBlockPool::find(Contents parent, const int32_t *tokens) const {
  // A parent that holds other contents now has no findable children.
  if (parent.block >= 0 && generations_[parent.block] != parent.generation) {
    return -1;
  }
  auto [begin, end] = byKey_.equal_range(keyOf(parent, tokens));
  for (auto it = begin; it != end; ++it) {
    const Held &held = held_[it->second];
    if (held.parent.block == parent.block &&
        held.parent.generation == parent.generation &&
        std::equal(held.tokens.begin(), held.tokens.end(), tokens)) {
      return it->second;
    }
  }
  return -1;
}

std::optional<KvBlockPool::Contents> KvBlockPool::share(Contents parent,
                                                        const int32_t *tokens) {
  int32_t block = find(parent, tokens);
  if (block < 0) {
    return std::nullopt;
  }
  if (references_[block]++ == 0) {
    free_.erase(freePosition_[block]);
  }
  return Contents{block, generations_[block]};
}

KvBlockPool::Contents KvBlockPool::publish(int32_t block, Contents parent,
                                           const int32_t *tokens) {
  if (int32_t holder = find(parent, tokens); holder >= 0) {
    return {holder, generations_[holder]};
  }
  forget(block);
  held_[block] = {parent, std::vector<int32_t>(tokens, tokens + blockSize_)};
  byKey_.emplace(keyOf(parent, tokens), block);
  return {block, generations_[block]};
}

void KvBlockPool::forget(int32_t block) {
  Held &held = held_[block];
  if (held.tokens.empty()) {
    return;
  }
  auto [begin, end] =
      byKey_.equal_range(keyOf(held.parent, held.tokens.data()));
  for (auto it = begin; it != end; ++it) {
    if (it->second == block) {
      byKey_.erase(it);
      break;
    }
  }
  held = {};
}
