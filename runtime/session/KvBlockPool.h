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
// sequence writes only past its shared prefix, into blocks of its own.
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

  /// The identity of a full block's contents: the tokens of every position
  /// up to its end, as a chained 64-bit hash (`parent`: the previous
  /// block's, 0 for the first).
  static uint64_t chainHash(uint64_t parent, const int32_t *tokens,
                            int64_t count);

  /// The block holding exactly `tokens` (blockSize of them) after the
  /// prefix hashed `parent`, taken for one more holder; none if no block
  /// holds it.
  std::optional<int32_t> share(uint64_t parent, const int32_t *tokens);
  /// Makes `block`, now holding `tokens` after the prefix hashed `parent`,
  /// findable by share. A prefix another block already holds keeps that one.
  void publish(int32_t block, uint64_t parent, const int32_t *tokens);

private:
  struct Contents {
    uint64_t parent = 0;
    std::vector<int32_t> tokens; // empty: nothing findable
  };
  /// Forgets what `block` held.
  void forget(int32_t block);

  int64_t blockSize_;
  std::vector<int32_t> references_;
  std::vector<Contents> contents_;
  std::list<int32_t> free_; // oldest release first
  std::vector<std::list<int32_t>::iterator> freePosition_;
  std::unordered_multimap<uint64_t, int32_t> byHash_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_SESSION_KVBLOCKPOOL_H
