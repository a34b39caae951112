//===- KvBlockPool.h - the blocks of a paged KV cache -----------*- C++ -*-===//
//
// A model compiled with a paged KV cache (model_config's block_size and
// num_blocks: PagedAttention, Kwon et al. 2023) keeps every layer's keys and
// values in pools of `blocks` blocks of `blockSize` positions; a sequence
// reads and writes them through its block table. This is who holds which
// block: a reference count per block, so sequences whose prompts start alike
// share the blocks of their common prefix (vLLM's automatic prefix caching),
// and a free list that keeps a released block's contents findable until the
// block is taken again.
//
// Only full blocks are shared, and a shared block is never written: a
// sequence writes only past its shared prefix, into blocks of its own. A
// block is found by its parent block and its own tokens, both checked (the
// hash only picks candidates), so no crafted prompt can collide into
// another's prefix.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_SESSION_KVBLOCKPOOL_H
#define MFC_RUNTIME_SESSION_KVBLOCKPOOL_H

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace mfrt {

class KvBlockPool {
public:
  KvBlockPool(int64_t blocks, int64_t blockSize);

  int64_t blocks() const { return static_cast<int64_t>(references_.size()); }
  int64_t blockSize() const { return blockSize_; }
  /// Blocks no sequence holds (some may still hold a findable prefix).
  int64_t freeBlocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t usedBlocks() const { return blocks() - freeBlocks(); }

  /// A block for one holder, the one free longest (its old contents are
  /// forgotten), or none when every block is held.
  std::optional<int32_t> allocate();
  /// One holder less; at none the block is free, its contents findable.
  void release(int32_t block);

  /// A block as it held some contents: `generation` counts the contents a
  /// block has held, so a reference to contents it no longer holds finds
  /// nothing. Block -1: the start of every sequence.
  struct Contents {
    int32_t block = -1;
    uint64_t generation = 0;
  };

  /// The block holding exactly `tokens` (blockSize of them) right after the
  /// prefix that `parent` ends, taken for one more holder; none if no
  /// block holds them. A candidate is checked by its parent and tokens, so
  /// a prefix is found only where every token of it matches.
  std::optional<Contents> share(Contents parent, const int32_t *tokens);
  /// Makes `block`, now holding `tokens` after the prefix `parent` ends,
  /// findable by share. Returns what holds them from now on: `block`, or
  /// the block that already did (the parent of the next block either way).
  Contents publish(int32_t block, Contents parent, const int32_t *tokens);

private:
  struct Held {
    Contents parent;
    std::vector<int32_t> tokens; // empty: nothing findable
  };
  uint64_t keyOf(Contents parent, const int32_t *tokens) const;
  /// The findable block holding `tokens` after `parent`, or -1.
  int32_t find(Contents parent, const int32_t *tokens) const;
  /// Forgets what `block` held.
  void forget(int32_t block);

  int64_t blockSize_;
  std::vector<int32_t> references_;
  std::vector<uint64_t> generations_;
  std::vector<Held> held_;
  std::list<int32_t> free_; // oldest release first
  std::vector<std::list<int32_t>::iterator> freePosition_;
  std::unordered_multimap<uint64_t, int32_t> byKey_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_SESSION_KVBLOCKPOOL_H
