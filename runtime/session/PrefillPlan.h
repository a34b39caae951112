//===- PrefillPlan.h - a prompt as chunks of the compiled prefills -*- C++
//-*-===//
//
// A model compiles prefills of a few widths (mfc --prefill-lengths: 32, 64,
// 128, ... and seq_length); each takes a past_length, so a prompt may run as
// several chunks, each continuing the KV cache. One padded call of the
// narrowest width that holds the prompt wastes up to half of its positions
// (192 tokens through a 256-wide prefill: a quarter of the work); 128 + 64
// wastes none, at the price of a second call (the weights are read again).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_SESSION_PREFILLPLAN_H
#define MFC_RUNTIME_SESSION_PREFILLPLAN_H

#include "runtime/format/Executable.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mfrt {

/// A prefill entry of some width.
struct PrefillEntry {
  int64_t width;
  std::string name;
};

/// One call: `entry` fed `tokens` prompt ids (the rest of its width padded)
/// after the `past` ids before it. `entry` points into the entries the plan
/// was made from, which must outlive it.
struct PrefillChunk {
  const PrefillEntry *entry;
  int64_t past;
  int64_t tokens;
};

/// The prefills of `executable` by width, the ones its loader checked:
/// `prefill` (seq_length) and `prefill_<L>`; with `rows`, those of one batch
/// row (`prefill_row[_<L>]`, or a model of one row's own).
std::vector<PrefillEntry> prefillEntries(const Executable &executable,
                                         bool rows);

/// A position's worth of work that one more call costs (its weights read
/// again, its dispatches): on llama-100m a call of 64 positions reads its
/// 400 MB of weights in ~6 ms, ~10 positions' compute.
constexpr int64_t kPrefillCallCost = 16;

/// The chunks that feed `tokens` (> 0) ids after `past` with the least padded
/// work (positions computed plus kPrefillCallCost per call; fewer calls on a
/// tie), never past `seqLength`; only the last chunk is padded. Empty when no
/// plan fits (or `tokens` <= 0).
std::vector<PrefillChunk> planPrefill(const std::vector<PrefillEntry> &entries,
                                      int64_t past, int64_t tokens,
                                      int64_t seqLength);

/// The call to make now when at most `budget` of the `tokens` ids left may be
/// fed in this step (continuous batching bounds a step's prompt tokens): the
/// plan's first call when it fits the budget; else the widest whole entry
/// within the budget after which the rest still has a plan (whole, so the
/// next call starts on its boundary and the rest never gets stuck short of
/// the cache's end); else the plan's first call, over the budget. Empty when
/// no plan fits.
std::optional<PrefillChunk>
firstPrefillChunk(const std::vector<PrefillEntry> &entries, int64_t past,
                  int64_t tokens, int64_t budget, int64_t seqLength);

} // namespace mfrt

#endif // MFC_RUNTIME_SESSION_PREFILLPLAN_H
