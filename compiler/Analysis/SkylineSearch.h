//===- SkylineSearch.h - depth-first search for tight memory plans -*- C++ -*-//
//
// The memory planner's exact-fit search: buffers are placed bottom-up on the
// skyline (per time slot, the top of what is placed so far), each resting on
// it at its lowest level, at the slot there that the fewest buffers can rest
// on; it backtracks when a slot can no longer hold what must still live
// there within the capacity. On a problem whose bound is reached at every
// step (an exact tiling) every plan that fits is such a sequence of
// placements (up to swapping identical buffers), so the search is complete
// there; elsewhere it may also leave a slot empty up to its neighbours.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_ANALYSIS_SKYLINESEARCH_H
#define MFC_COMPILER_ANALYSIS_SKYLINESEARCH_H

#include "compiler/Analysis/MemoryPlanner.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <unordered_set>
#include <vector>

namespace mfc {

/// The steps where some buffer starts or ends, sorted: slot s is the span
/// [times[s], times[s + 1]), where the set of live buffers is constant.
class TimeSlots {
public:
  explicit TimeSlots(const std::vector<PlannedBuffer> &buffers);
  /// The slot starting at `time`, one of the buffers' bounds.
  int slotOf(int64_t time) const;
  int count() const { return std::max<int>(1, int(times_.size()) - 1); }

private:
  std::vector<int64_t> times_;
};

struct SkylineSearchBudget {
  std::chrono::steady_clock::time_point deadline;
  /// Placements to try in all (0: only the deadline counts): the same
  /// result on any machine.
  int64_t maxNodes = 0;
};

class SkylineSearch {
public:
  SkylineSearch(const std::vector<PlannedBuffer> &buffers, int64_t alignment);

  /// Looks for offsets (indexed like the buffers) that keep every buffer
  /// below `capacity`, restarting with shuffled choices while the budget
  /// lasts. Returns true and sets `offsets` when it finds them.
  bool run(int64_t capacity, const SkylineSearchBudget &budget,
           std::mt19937_64 &random, std::vector<int64_t> &offsets);

  /// Placements tried so far, over all runs.
  int64_t nodes() const { return nodes_; }

private:
  struct Item {
    int lo = 0, hi = 0; ///< slots [lo, hi)
    int64_t size = 0;   ///< rounded up to the alignment
    int buffer = 0;     ///< index among the planner's buffers
    int twin = 0;       ///< the first item with the same slots and size
  };

  enum class Outcome { Found, Exhausted, OutOfBudget };
  Outcome descend();
  bool outOfBudget();
  void set(int64_t &value, int64_t to);
  void setHeight(int slot, int64_t to);
  void undoTo(size_t mark);
  bool raiseFloorOf(int item, int64_t to, llvm::SmallVectorImpl<int> &raised);
  bool slotsCanHoldTheRest(int lo, int hi);

  size_t numBuffers_;
  std::vector<Item> items_;
  std::vector<std::vector<int>> startingAt_; ///< items by first slot
  std::vector<std::vector<int>> covering_;   ///< items alive in each slot
  std::vector<std::vector<int>> neighbors_;  ///< items alive at a common slot
  int slots_ = 0;

  // The state of one run.
  int64_t capacity_ = 0;
  std::vector<int64_t> height_;    ///< skyline per slot
  std::vector<int64_t> remaining_; ///< bytes still to place per slot
  std::vector<int64_t> offset_;    ///< per item, -1 while unplaced
  /// Per unplaced item, the lowest offset it can still take: the skyline's
  /// highest point over its lifetime.
  std::vector<int64_t> floor_;
  std::vector<char> fromStart_, toEnd_; ///< per slot, scratch of descend()
  std::vector<int> restingAt_;          ///< per slot, scratch of descend()
  std::vector<int64_t> checkedAt_; ///< per slot, the node that last checked it
  std::vector<double> preference_; ///< per item, the order candidates are tried
  std::vector<std::pair<int64_t *, int64_t>> trail_; ///< (value, previous)
  int unplaced_ = 0;
  /// The skyline and the placed buffers, hashed (Zobrist); the states
  /// whose every continuation failed.
  uint64_t state_ = 0;
  std::vector<uint64_t> itemKey_;
  std::unordered_set<uint64_t> failed_;
  int64_t checks_ = 0;
  int64_t nodes_ = 0, nodeLimit_ = 0, runNodes_ = 0;
  SkylineSearchBudget budget_;
};

} // namespace mfc

#endif // MFC_COMPILER_ANALYSIS_SKYLINESEARCH_H
