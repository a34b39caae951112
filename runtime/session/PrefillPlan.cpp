//===- PrefillPlan.cpp - a prompt as chunks of the compiled prefills ------===//

#include "runtime/session/PrefillPlan.h"

#include <algorithm>
#include <limits>

using namespace mfrt;

std::vector<PrefillEntry> mfrt::prefillEntries(const Executable &executable,
                                               bool rows) {
  bool rowEntries = rows && executable.model().batch_size() > 1;
  fb::EntryRole role =
      rowEntries ? fb::EntryRole::PrefillRow : fb::EntryRole::Prefill;
  std::vector<PrefillEntry> entries;
  for (const fb::Entry *entry : *executable.root().entries()) {
    // Their tokens and signatures are checked by the loader.
    if (entry->role() == role && prefillTokensOf(*entry) > 0) {
      entries.push_back({prefillTokensOf(*entry), entry->name()->str()});
    }
  }
  return entries;
}

std::vector<PrefillChunk>
mfrt::planPrefill(const std::vector<PrefillEntry> &entries, int64_t past,
                  int64_t tokens, int64_t seqLength) {
  std::vector<PrefillChunk> chunks;
  if (tokens <= 0) {
    return chunks;
  }
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

std::optional<PrefillChunk>
mfrt::firstPrefillChunk(const std::vector<PrefillEntry> &entries, int64_t past,
                        int64_t tokens, int64_t budget, int64_t seqLength) {
  std::vector<PrefillChunk> plan =
      planPrefill(entries, past, tokens, seqLength);
  if (plan.empty()) {
    return std::nullopt;
  }
  if (plan[0].tokens <= budget) {
    return plan[0];
  }
  const PrefillEntry *widest = nullptr;
  for (const PrefillEntry &entry : entries) {
    if (entry.width <= 0 || entry.width > budget || entry.width >= tokens ||
        (widest && entry.width <= widest->width) ||
        planPrefill(entries, past + entry.width, tokens - entry.width,
                    seqLength)
            .empty()) {
      continue;
    }
    widest = &entry;
  }
  if (!widest) {
    return plan[0];
  }
  return PrefillChunk{widest, past, widest->width};
}
