//===- PrefillPlan.cpp - a prompt as chunks of the compiled prefills ------===//

#include "runtime/session/PrefillPlan.h"

#include <limits>

using namespace mfrt;

std::vector<PrefillEntry> mfrt::prefillEntries(const Executable &executable,
                                               bool rows) {
  bool oneRow = executable.model().batch_size() == 1;
  std::vector<PrefillEntry> entries;
  for (const std::string &name : executable.entryNames()) {
    bool batchPrefill =
        name == "prefill" ||
        (name.rfind("prefill_", 0) == 0 && name.rfind("prefill_row", 0) != 0);
    bool rowPrefill =
        name == "prefill_row" || name.rfind("prefill_row_", 0) == 0;
    if (rows && !oneRow ? !rowPrefill : !batchPrefill) {
      continue;
    }
    // The width: input_ids' second dimension (the loader checked it).
    const fb::Entry &entry = *executable.entry(name);
    const fb::TensorType &ids = *entry.values()->Get(entry.inputs()->Get(0));
    entries.push_back({ids.shape()->Get(1), name});
  }
  return entries;
}

std::vector<PrefillChunk>
mfrt::planPrefill(const std::vector<PrefillEntry> &entries, int64_t past,
                  int64_t tokens, int64_t seqLength) {
  // cost[n]: the least work that feeds the last n ids (position past +
  // tokens - n on); first[n]: the entry of its first call.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> cost(tokens + 1, kNone), calls(tokens + 1, 0);
  std::vector<const PrefillEntry *> first(tokens + 1, nullptr);
  cost[0] = 0;
  for (int64_t n = 1; n <= tokens; ++n) {
    int64_t position = past + tokens - n;
    for (const PrefillEntry &entry : entries) {
      if (entry.width <= 0 || position + entry.width > seqLength) {
        continue;
      }
      int64_t rest = entry.width >= n ? 0 : n - entry.width;
      if (cost[rest] == kNone) {
        continue;
      }
      int64_t total = cost[rest] + entry.width + kPrefillCallCost;
      if (total < cost[n] || (total == cost[n] && calls[rest] + 1 < calls[n])) {
        cost[n] = total;
        calls[n] = calls[rest] + 1;
        first[n] = &entry;
      }
    }
  }
  std::vector<PrefillChunk> chunks;
  if (cost[tokens] == kNone) {
    return chunks;
  }
  for (int64_t n = tokens; n > 0;) {
    const PrefillEntry *entry = first[n];
    int64_t fed = std::min(entry->width, n);
    chunks.push_back({entry, past + tokens - n, fed});
    n -= fed;
  }
  return chunks;
}
