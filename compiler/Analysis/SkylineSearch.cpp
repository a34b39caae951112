//===- SkylineSearch.cpp - depth-first search for tight memory plans ------===//

#include "compiler/Analysis/SkylineSearch.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cmath>

using namespace mfc;

namespace {

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace

TimeSlots::TimeSlots(const std::vector<PlannedBuffer> &buffers) {
  for (const PlannedBuffer &buffer : buffers) {
    times_.push_back(buffer.lower);
    times_.push_back(buffer.upper);
  }
  std::sort(times_.begin(), times_.end());
  times_.erase(std::unique(times_.begin(), times_.end()), times_.end());
}

int TimeSlots::slotOf(int64_t time) const {
  return static_cast<int>(std::lower_bound(times_.begin(), times_.end(), time) -
                          times_.begin());
}

SkylineSearch::SkylineSearch(const std::vector<PlannedBuffer> &buffers,
                             int64_t alignment)
    : numBuffers_(buffers.size()) {
  TimeSlots slots(buffers);
  slots_ = slots.count();
  startingAt_.resize(slots_);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &buffer = buffers[i];
    if (buffer.upper <= buffer.lower || buffer.size <= 0) {
      continue; // alive at no step, or empty: offset 0
    }
    Item item;
    item.lo = slots.slotOf(buffer.lower);
    item.hi = slots.slotOf(buffer.upper);
    item.size = alignUp(buffer.size, alignment);
    item.buffer = static_cast<int>(i);
    item.twin = static_cast<int>(items_.size());
    for (int other : startingAt_[item.lo]) {
      if (items_[other].hi == item.hi && items_[other].size == item.size) {
        item.twin = items_[other].twin;
        break;
      }
    }
    startingAt_[item.lo].push_back(static_cast<int>(items_.size()));
    items_.push_back(item);
  }
  covering_.resize(slots_);
  neighbors_.resize(items_.size());
  for (size_t i = 0; i < items_.size(); ++i) {
    for (int s = items_[i].lo; s < items_[i].hi; ++s) {
      covering_[s].push_back(static_cast<int>(i));
    }
    for (size_t j = i + 1; j < items_.size(); ++j) {
      if (items_[i].lo < items_[j].hi && items_[j].lo < items_[i].hi) {
        neighbors_[i].push_back(static_cast<int>(j));
        neighbors_[j].push_back(static_cast<int>(i));
      }
    }
  }
}

bool SkylineSearch::outOfBudget() {
  ++nodes_;
  ++runNodes_;
  if (budget_.maxNodes > 0 && nodes_ >= budget_.maxNodes) {
    return true;
  }
  if ((nodes_ & 255) == 0 &&
      std::chrono::steady_clock::now() >= budget_.deadline) {
    budget_.maxNodes = nodes_; // stays out of budget from now on
    return true;
  }
  return runNodes_ >= nodeLimit_;
}

void SkylineSearch::set(int64_t &value, int64_t to) {
  trail_.emplace_back(&value, value);
  value = to;
}

void SkylineSearch::setHeight(int slot, int64_t to) {
  auto key = [&](int64_t height) {
    uint64_t x =
        (static_cast<uint64_t>(slot) << 40) ^ static_cast<uint64_t>(height);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull; // splitmix64's finalizer
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  state_ ^= key(height_[slot]) ^ key(to);
  set(height_[slot], to);
}

void SkylineSearch::undoTo(size_t mark) {
  while (trail_.size() > mark) {
    *trail_.back().first = trail_.back().second;
    trail_.pop_back();
  }
}

bool SkylineSearch::raiseFloorOf(int item, int64_t to,
                                 llvm::SmallVectorImpl<int> &raised) {
  if (offset_[item] >= 0 || floor_[item] >= to) {
    return true;
  }
  set(floor_[item], to);
  raised.push_back(item);
  return to + items_[item].size <= capacity_;
}

// Whatever still lives in a slot sits above the lowest floor among its
// buffers, all of them stacked: that must stay within the capacity.
bool SkylineSearch::slotsCanHoldTheRest(int lo, int hi) {
  for (int s = lo; s < hi; ++s) {
    if (checkedAt_[s] == checks_ || remaining_[s] == 0) {
      continue;
    }
    checkedAt_[s] = checks_;
    // Some unplaced buffer of the slot must be able to sit low enough.
    int64_t highest = capacity_ - remaining_[s];
    bool held = false;
    for (int i : covering_[s]) {
      if (offset_[i] < 0 && floor_[i] <= highest) {
        held = true;
        break;
      }
    }
    if (!held) {
      return false;
    }
  }
  return true;
}

SkylineSearch::Outcome SkylineSearch::descend() {
  if (unplaced_ == 0) {
    return Outcome::Found;
  }
  if (outOfBudget()) {
    return Outcome::OutOfBudget;
  }
  // The same buffers placed in another order can leave the same skyline
  // (stacks of equal lifetimes, rows of the arena): what failed from there
  // fails again.
  const uint64_t entered = state_;
  if (failed_.count(entered)) {
    return Outcome::Exhausted;
  }
  // The lowest level of the skyline where some unplaced buffer lives.
  int64_t level = INT64_MAX;
  for (int s = 0; s < slots_; ++s) {
    if (remaining_[s] > 0) {
      level = std::min(level, height_[s]);
    }
  }
  // Along a stretch of slots at that level, each slot either has a buffer
  // resting right on it, which rests at the level all along its lifetime
  // (so its lifetime lies within the stretch), or is left empty there (if
  // the slot has room to spare): the buffers at the level partition the
  // stretch. Which buffers can be part of such a partition: reachable from
  // the stretch's start (`fromStart_`) and to its end (`toEnd_`).
  auto flat = [&](int i) { return offset_[i] < 0 && floor_[i] == level; };
  auto spare = [&](int s) { return height_[s] + remaining_[s] < capacity_; };
  int first = -1, fewest = 0;
  llvm::SmallVector<int, 8> candidates;
  for (int begin = 0; begin < slots_;) {
    if (remaining_[begin] == 0 || height_[begin] != level) {
      ++begin;
      continue;
    }
    int end = begin;
    while (end < slots_ && remaining_[end] > 0 && height_[end] == level) {
      ++end;
    }
    std::fill(fromStart_.begin() + begin, fromStart_.begin() + end + 1, 0);
    std::fill(toEnd_.begin() + begin, toEnd_.begin() + end + 1, 0);
    fromStart_[begin] = 1;
    for (int t = begin; t < end; ++t) {
      if (!fromStart_[t]) {
        continue;
      }
      fromStart_[t + 1] |= spare(t);
      for (int i : startingAt_[t]) {
        if (flat(i)) {
          fromStart_[items_[i].hi] = 1;
        }
      }
    }
    if (!fromStart_[end]) {
      return Outcome::Exhausted; // (not recorded: cheap to find again)
    }
    toEnd_[end] = 1;
    for (int t = end - 1; t >= begin; --t) {
      toEnd_[t] = spare(t) && toEnd_[t + 1];
      for (int i : startingAt_[t]) {
        toEnd_[t] |= flat(i) && toEnd_[items_[i].hi];
      }
    }
    // Branch on the slot with the fewest buffers that can rest there (one
    // is a forced move), counted by a difference array over the buffers
    // that start in the stretch: those that rest at the level lie in it.
    std::fill(restingAt_.begin() + begin, restingAt_.begin() + end + 1, 0);
    for (int t = begin; t < end; ++t) {
      for (int i : startingAt_[t]) {
        if (flat(i) && fromStart_[t] && toEnd_[items_[i].hi]) {
          ++restingAt_[t];
          --restingAt_[items_[i].hi];
        }
      }
    }
    int resting = 0;
    for (int t = begin; t < end; ++t) {
      resting += restingAt_[t];
      if (first < 0 || resting < fewest) {
        first = t;
        fewest = resting;
      }
    }
    begin = end;
  }
  for (int i : covering_[first]) {
    if (flat(i) && fromStart_[items_[i].lo] && toEnd_[items_[i].hi]) {
      candidates.push_back(i);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    return preference_[a] > preference_[b];
  });
  llvm::SmallVector<int, 32> raised;
  for (size_t k = 0; k < candidates.size(); ++k) {
    int chosen = candidates[k];
    const Item &item = items_[chosen];
    // Identical buffers go in index order: the other orders are the same
    // plans.
    bool symmetric = false;
    for (int other : candidates) {
      symmetric =
          symmetric || (items_[other].twin == item.twin && other < chosen);
    }
    if (symmetric) {
      continue;
    }
    size_t mark = trail_.size();
    ++checks_;
    int64_t top = level + item.size;
    for (int s = item.lo; s < item.hi; ++s) {
      setHeight(s, top);
      set(remaining_[s], remaining_[s] - item.size);
    }
    offset_[chosen] = level;
    state_ ^= itemKey_[chosen];
    --unplaced_;
    raised.clear();
    bool fits = true;
    for (int other : neighbors_[chosen]) {
      fits = fits && raiseFloorOf(other, top, raised);
    }
    fits = fits && slotsCanHoldTheRest(item.lo, item.hi);
    for (size_t r = 0; r < raised.size() && fits; ++r) {
      fits = slotsCanHoldTheRest(items_[raised[r]].lo, items_[raised[r]].hi);
    }
    Outcome outcome = fits ? descend() : Outcome::Exhausted;
    if (outcome == Outcome::Found) {
      return outcome;
    }
    ++unplaced_;
    offset_[chosen] = -1;
    undoTo(mark);
    state_ = entered;
    if (outcome == Outcome::OutOfBudget) {
      return outcome;
    }
  }
  // Nothing rests there, or nothing that led to a plan: leave the slot
  // empty up to where something can rest on it, the lowest of its
  // neighbours and of the floors of the buffers that live in it.
  int64_t to = capacity_;
  for (int s : {first - 1, first + 1}) {
    if (s >= 0 && s < slots_ && height_[s] > level) {
      to = std::min(to, height_[s]);
    }
  }
  for (int i : covering_[first]) {
    if (offset_[i] < 0 && floor_[i] > level) {
      to = std::min(to, floor_[i]);
    }
  }
  size_t mark = trail_.size();
  ++checks_;
  raised.clear();
  bool fits = true;
  setHeight(first, to);
  for (int i : covering_[first]) {
    fits = fits && raiseFloorOf(i, to, raised);
  }
  fits = fits && slotsCanHoldTheRest(first, first + 1);
  for (size_t r = 0; r < raised.size() && fits; ++r) {
    fits = slotsCanHoldTheRest(items_[raised[r]].lo, items_[raised[r]].hi);
  }
  Outcome outcome = fits ? descend() : Outcome::Exhausted;
  if (outcome != Outcome::Found) {
    undoTo(mark);
    state_ = entered;
  }
  if (outcome == Outcome::Exhausted && failed_.size() < (1u << 22)) {
    failed_.insert(entered);
  }
  return outcome;
}

bool SkylineSearch::run(int64_t capacity, const SkylineSearchBudget &budget,
                        std::mt19937_64 &random,
                        std::vector<int64_t> &offsets) {
  budget_ = budget;
  capacity_ = capacity;
  int n = static_cast<int>(items_.size());
  failed_.clear(); // failures are at this capacity
  itemKey_.resize(n);
  for (uint64_t &key : itemKey_) {
    key = random();
  }
  int64_t largest = 1;
  for (const Item &item : items_) {
    largest = std::max(largest, item.size);
  }
  // Chronological backtracking can sink its time into one deep subtree:
  // restart with other preferences, every third run allowed 1.5x more
  // placements.
  double runLimit = 8.0 * n + 64;
  for (int restart = 0;; ++restart) {
    if (restart > 0 && restart % 3 == 0) {
      runLimit *= 1.5;
    }
    height_.assign(slots_, 0);
    state_ = 0;
    remaining_.assign(slots_, 0);
    for (const Item &item : items_) {
      for (int s = item.lo; s < item.hi; ++s) {
        remaining_[s] += item.size;
      }
    }
    for (int s = 0; s < slots_; ++s) {
      if (remaining_[s] > capacity_) {
        return false; // more is alive at once than fits
      }
    }
    // Which buffer to rest on a slot first: runs take turns preferring
    // the longest lifetime, the largest size and the largest area (each
    // the best on some tight problems), from the fourth run stretched by
    // up to a half at random.
    preference_.resize(n);
    for (int i = 0; i < n; ++i) {
      double stretch =
          restart < 3 ? 1.0
                      : 1.0 + 0.5 * std::ldexp(double(random() >> 11), -53);
      double span = items_[i].hi - items_[i].lo;
      double size = static_cast<double>(items_[i].size) / largest;
      switch (restart % 3) {
      case 0:
        preference_[i] = span * stretch + 0.5 * size;
        break;
      case 1:
        preference_[i] = size * stretch + 1e-9 * span;
        break;
      default:
        preference_[i] = span * size * stretch;
        break;
      }
    }
    offset_.assign(n, -1);
    floor_.assign(n, 0);
    checkedAt_.assign(slots_, -1);
    fromStart_.assign(slots_ + 1, 0);
    restingAt_.assign(slots_ + 1, 0);
    toEnd_.assign(slots_ + 1, 0);
    trail_.clear();
    unplaced_ = n;
    runNodes_ = 0;
    nodeLimit_ = static_cast<int64_t>(std::min(runLimit, 1e18));
    Outcome outcome = descend();
    if (outcome == Outcome::Found) {
      offsets.assign(numBuffers_, 0);
      for (int i = 0; i < n; ++i) {
        offsets[items_[i].buffer] = offset_[i];
      }
      return true;
    }
    if (outcome == Outcome::Exhausted) {
      return false; // every placement of this kind tried
    }
    if ((budget_.maxNodes > 0 && nodes_ >= budget_.maxNodes) ||
        std::chrono::steady_clock::now() >= budget_.deadline) {
      return false;
    }
  }
}
