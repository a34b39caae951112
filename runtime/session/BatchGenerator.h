//===- BatchGenerator.h - continuous batching -------------------*- C++ -*-===//
//
// Generation for many sequences at once, as a server needs it (Orca's
// iteration-level scheduling, vLLM's continuous batching): the model's
// batch rows are slots, each a sequence of its own with its own KV cache
// row and position. Each step runs the prompts of newly admitted sequences
// through the prefills of one row (`prefill_row_<L>`; a model of one row
// uses its own prefills) on their cache rows, in chunks, then the decode
// entry once over all slots. A request waits until a slot is free and
// joins at the next step; a finished or cancelled one frees its slot at
// once. The compiled graph stays static: positions are data.
//
// With a paged KV cache (block_size, num_blocks) the slots share one pool
// of blocks (KvBlockPool): a request is admitted when its prompt's blocks
// are free (the blocks of a prompt prefix another sequence computed are
// shared, not recomputed), a decoding sequence takes a block each
// block_size tokens, and when none is free the sequence admitted last is
// preempted: its blocks are freed, and it waits at the front of the queue
// to recompute its tokens (vLLM's recompute preemption). Never a crash,
// never a wrong token.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_SESSION_BATCHGENERATOR_H
#define MFC_RUNTIME_SESSION_BATCHGENERATOR_H

#include "runtime/base/Status.h"
#include "runtime/exec/Executor.h"
#include "runtime/format/Executable.h"
#include "runtime/session/KvBlockPool.h"
#include "runtime/session/PrefillPlan.h"
#include "runtime/session/Sampler.h"
#include "runtime/text/TokenIds.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mfrt {

/// Why a sequence ended.
enum class FinishReason { Stop, Length, Cancelled };

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t maxNewTokens = 16; ///< at most seq_length - prompt length
  SamplingOptions sampling;
  uint64_t seed = 0;
  std::vector<int32_t> stopIds; ///< ends the sequence, not part of it
};

/// What a step made of one sequence: its next token (unless the sequence
/// ended on a stop id, or was cancelled) and, on its last, why it ended.
struct GenerationEvent {
  int64_t id;
  std::optional<int32_t> token;
  std::optional<FinishReason> finish;
  /// The logits the token was picked from (valid during the callback).
  const float *logits = nullptr;
  /// Why the sequence was cancelled when a step failed, else empty.
  std::string error;
};
using GenerationCallback = std::function<void(const GenerationEvent &)>;

struct GenerationStats {
  int64_t waiting = 0, running = 0;
  int64_t steps = 0, decodeSteps = 0, promptTokens = 0, generatedTokens = 0;
  /// A paged cache: its blocks, those held, the prompt tokens found in
  /// shared blocks (not computed), and sequences preempted to recompute.
  int64_t kvBlocks = 0, kvBlocksUsed = 0, kvBlocksPeak = 0, prefixHitTokens = 0,
          preemptions = 0;
};

class BatchGenerator {
public:
  /// Over `executor`'s model, which must have a KV cache (use_past), a
  /// decode entry and prefills of one row. `maxBatchedTokens` bounds the
  /// prompt tokens a step prefills before its decode (0: no bound): a long
  /// prompt goes in chunks and does not stall the sequences that decode.
  /// Every run takes `runOptions` (a profile's trace, MoE statistics).
  static StatusOr<std::unique_ptr<BatchGenerator>>
  create(const Executable &executable, Executor &executor,
         int64_t maxBatchedTokens = 0, RunOptions runOptions = {});

  int64_t slots() const { return static_cast<int64_t>(slots_.size()); }

  int64_t vocab() const { return vocab_; }

  /// Queues a request; `callback` hears of each token it makes and of its
  /// end (on the thread that calls step). Returns its id. A request whose
  /// prompt is empty or longer than the context is an error.
  StatusOr<int64_t> add(GenerationRequest request, GenerationCallback callback);
  /// Ends request `id` (waiting or running) before the next step; its
  /// callback hears FinishReason::Cancelled. Unknown ids are ignored.
  void cancel(int64_t id);
  /// Whether any request waits or runs.
  bool busy() const;
  /// One iteration: admits waiting requests into free slots, prefills
  /// their prompts, decodes every slot once, samples, reports. Nothing to
  /// do is no error; a failed run ends every running sequence.
  Status step();

  const GenerationStats &stats() const { return stats_; }

private:
  struct Sequence {
    int64_t id;
    GenerationRequest request;
    GenerationCallback callback;
    Sampler sampler;
    std::vector<int32_t> history; ///< prompt + generated: what the sampler sees
    int64_t fed = 0;              ///< tokens in the cache
    int64_t generated = 0;
    std::optional<int32_t> pending; ///< sampled, not yet fed
    bool cancelled = false;
    /// A paged cache: the blocks of its positions, in order; how many of
    /// them are findable full blocks, and the block whose contents end
    /// that prefix (the parent of the next one published).
    std::vector<int32_t> blocks;
    int64_t published = 0;
    KvBlockPool::Contents prefixEnd;
  };

  BatchGenerator(const Executable &executable, Executor &executor,
                 int64_t maxBatchedTokens, RunOptions runOptions);
  void admit();
  void finish(size_t slot, FinishReason reason, std::string error = "");
  /// Frees `slot` (and its blocks).
  void vacate(size_t slot);
  /// A paged cache: takes the blocks of `sequence`'s prefill (sharing
  /// those of a known prefix, which then count as fed); false, holding
  /// nothing, when too few are free.
  bool reserveBlocks(Sequence &sequence);
  void releaseBlocks(Sequence &sequence);
  /// Makes the sequence's full blocks findable by later prompts.
  void publishBlocks(Sequence &sequence);
  /// A block for each sequence that decodes into a new one, preempting the
  /// sequences admitted last while none is free.
  void growForDecode();
  /// Sends slot's sequence back to the front of the queue, its blocks
  /// freed; it recomputes its tokens when admitted again.
  void preempt(size_t slot);
  /// The tokens to run through prefills: the prompt, or after a
  /// preemption every token but the last sampled (which decode feeds).
  static int64_t prefillTarget(const Sequence &sequence);
  /// `table` row `row` as slot's block table (or, for null, no block).
  void fillBlockTable(Tensor &table, int64_t row, const Sequence *sequence);
  /// Ends every running sequence after a failed run (its cache rows can no
  /// longer be trusted).
  void failRunning(const Status &status);
  void countRunning();
  static int64_t promptLeft(const Sequence &sequence);
  /// The next chunk of slot's prompt through a prefill of one row, on its
  /// cache row in place: firstPrefillChunk's (at most `budget` tokens unless
  /// no entry is that narrow). Returns the tokens it fed.
  StatusOr<int64_t> prefillRow(size_t slot, int64_t budget);
  /// The decode entry over every slot: each with a token pending feeds it;
  /// the others feed padding at their position, which their next prompt
  /// chunk (or a later sequence's prompt) overwrites.
  Status decode();
  /// Samples slot's next token from `row` and reports it (or its end).
  void emit(size_t slot, const float *row);

  Executor &executor_;
  RunOptions runOptions_;
  int64_t maxBatchedTokens_;
  int64_t seqLength_, vocab_, padId_;
  /// The prefills of one row.
  std::vector<PrefillEntry> rowPrefills_;
  std::vector<std::unique_ptr<Sequence>> slots_; ///< null: free
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<Tensor> caches_;
  /// A paged cache's blocks, and the width of a row's block table.
  std::optional<KvBlockPool> pool_;
  int64_t tableWidth_ = 0;
  std::vector<size_t> admitted_; ///< running slots, oldest admission first
  int64_t nextId_ = 1;
  GenerationStats stats_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_SESSION_BATCHGENERATOR_H
