//===- BatchGenerator.h - continuous batching over a compiled model -*- C++
//-*-===//
//
// Generation for many sequences at once, as a server needs it (Orca's
// iteration-level scheduling, vLLM's continuous batching): the model's
// batch rows are slots, each a sequence of its own with its own KV cache
// row and position. Every step runs one compiled entry over all slots: the
// decode entry (one token per row) when every running sequence decodes,
// else a prefill entry of width W that takes the next W prompt tokens of
// the sequences still reading their prompt (a long prompt in chunks) and
// the one new token of those that decode. A request waits until a slot is
// free and joins at the next step; a finished or cancelled one frees its
// slot at once. The compiled graph stays static: positions are data.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_BATCHGENERATOR_H
#define MFC_RUNTIME_BATCHGENERATOR_H

#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/Generation.h"
#include "runtime/Status.h"

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
const char *finishReasonName(FinishReason reason);

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
};

class BatchGenerator {
public:
  /// Over `executor`'s model, which must have a KV cache (use_past) and a
  /// decode entry. `maxBatchedTokens` bounds the prompt tokens a step
  /// prefills before its decode (with prefills of one row; without them,
  /// slots x width of a step while some sequence decodes); 0: no bound. A
  /// long prompt then goes in chunks and does not stall the sequences that
  /// decode.
  static StatusOr<std::unique_ptr<BatchGenerator>>
  create(const Executable &executable, Executor &executor,
         int64_t maxBatchedTokens = 0);

  int64_t slots() const { return static_cast<int64_t>(slots_.size()); }
  int64_t contextLength() const { return seqLength_; }

  /// Queues a request; `callback` hears of each token it makes and of its
  /// end (on the thread that calls step). Returns its id. A request whose
  /// prompt is empty or longer than the context is an error.
  StatusOr<int64_t> add(GenerationRequest request, GenerationCallback callback);
  /// Ends request `id` (waiting or running) before the next step; its
  /// callback hears FinishReason::Cancelled. Unknown ids are ignored.
  void cancel(int64_t id);
  /// Whether any request waits or runs.
  bool busy() const;
  /// One iteration: admits waiting requests into free slots, runs one
  /// entry over all slots, samples, reports. Nothing to do is no error.
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
  };

  BatchGenerator(const Executable &executable, Executor &executor,
                 int64_t maxBatchedTokens);
  void admit();
  void finish(size_t slot, FinishReason reason, std::string error = "");
  /// Ends every running sequence after a failed run (its caches are lost).
  void failRunning(const Status &status);
  static int64_t promptLeft(const Sequence &sequence);
  /// The narrowest of `widths` that takes `want` tokens, else the widest
  /// that fits `room`; `fallback` when none fits.
  static std::pair<std::string, int64_t>
  widestUpTo(const std::vector<std::pair<int64_t, std::string>> &widths,
             int64_t want, int64_t room,
             std::pair<std::string, int64_t> fallback);
  /// The entry and width of a step over every row (no row prefills).
  std::pair<std::string, int64_t> chooseEntry() const;
  /// Runs `entry` over every row: each feeds its prompt or its new token.
  Status runBatched(const std::string &entry, int64_t width);
  /// The next chunk (at most `budget` tokens, unless no narrower entry
  /// exists) of slot's prompt through a prefill of one row, on its cache
  /// row in place.
  Status prefillRow(size_t slot, int64_t budget);
  /// Samples slot's next token from `row` and reports it (or its end).
  void emit(size_t slot, const float *row);

  const Executable &executable_;
  Executor &executor_;
  int64_t maxBatchedTokens_;
  int64_t seqLength_, vocab_, padId_;
  std::vector<std::pair<int64_t, std::string>> prefillWidths_; ///< ascending
  /// `prefill_row_<L>` entries (batch > 1): one row's prompt alone.
  std::vector<std::pair<int64_t, std::string>> rowPrefillWidths_;
  std::vector<std::unique_ptr<Sequence>> slots_; ///< null: free
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<Tensor> caches_;
  int64_t nextId_ = 1;
  GenerationStats stats_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_BATCHGENERATOR_H
