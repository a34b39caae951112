//===- MemoryPlanner.h - static memory planning -----------------*- C++ -*-===//
//
// Given buffers with lifetimes and sizes, assigns each an offset in one arena
// so that buffers alive at the same time never overlap, and reports how close
// the arena is to the liveness lower bound (the most bytes alive at once).
// The problem format is MiniMalloc's (id, lower, upper, size; the lifetime is
// [lower, upper)), so the planner can be measured on public instances too.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_ANALYSIS_MEMORYPLANNER_H
#define MFC_COMPILER_ANALYSIS_MEMORYPLANNER_H

#include <cstdint>
#include <string>
#include <vector>

namespace mfc {

struct PlannedBuffer {
  std::string id;
  int64_t lower = 0; ///< first step the buffer is alive
  int64_t upper = 0; ///< first step it is dead again
  int64_t size = 0;
  int64_t offset = -1; ///< set by the planner
};

struct MemoryPlanOptions {
  /// How long the improvement search may run after the portfolio
  /// (negative: no time limit, maxCandidates alone stops it; with neither,
  /// no search).
  double timeLimitSeconds = 1.0;
  /// If positive, the search also stops after this many candidate plans
  /// (and the randomized orders take a fifth of them): the same plan on
  /// any machine, however fast, when it is the limit that stops it.
  int64_t maxCandidates = 0;
  /// Offsets are multiples of this.
  int64_t alignment = 1;
  uint64_t seed = 0;
};

struct MemoryPlanResult {
  int64_t arenaBytes = 0;
  int64_t lowerBound = 0;
  /// Which strategy found the plan ("size", "start", "area", "search", ...).
  std::string strategy;
  double seconds = 0;
  int64_t candidatesTried = 0;

  double ratio() const {
    return lowerBound ? static_cast<double>(arenaBytes) / lowerBound : 1.0;
  }
};

/// The most bytes alive at any one step.
int64_t livenessLowerBound(const std::vector<PlannedBuffer> &buffers);

/// Plans `buffers` in place (sets `offset`):
///  1. a portfolio of greedy orders (decreasing size, start time, area,
///     lifetime), each placed lowest-fit and best-fit, and the order that
///     builds the arena from the bottom up, keeping the best;
///  2. for up to half the time, the skyline search (SkylineSearch.h),
///     bisecting the arena size between the bound and the best plan;
///  3. then, until the time limit or the lower bound, randomized greedy
///     orders and a search that perturbs the best order and replays it.
MemoryPlanResult planMemory(std::vector<PlannedBuffer> &buffers,
                            const MemoryPlanOptions &options = {});

/// True if no two buffers alive at the same step overlap in the arena.
bool isValidPlan(const std::vector<PlannedBuffer> &buffers);

/// Reads MiniMalloc CSV (`id,lower,upper,size`, header first). Returns an
/// error message, or "" on success.
std::string readMemoryPlanCsv(const std::string &text,
                              std::vector<PlannedBuffer> &buffers);
/// Writes MiniMalloc CSV, with an `offset` column when planned.
std::string writeMemoryPlanCsv(const std::vector<PlannedBuffer> &buffers,
                               bool withOffsets);

} // namespace mfc

#endif // MFC_COMPILER_ANALYSIS_MEMORYPLANNER_H
