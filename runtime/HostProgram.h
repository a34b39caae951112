//===- HostProgram.h - an entry as Graph Mode runs it -----------*- C++ -*-===//
//
// Graph Mode runs an entry's op-level program as a host program: each kernel
// dispatch is one step (it replaces the ops it covers), every other op is a
// step of its own. Values live at their planned arena offsets, except
// inputs, parameters and constants (their own memory), views (a reshape
// shares its operand's memory, a KV-cache write updates its cache in
// place, in an eager op or in a kernel) and values a kernel computes
// straight into the parameter they are assigned to.
//
// Building the host program checks the plan, so a corrupt model.bin cannot
// make two live values share bytes or a value overrun the arena.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_HOSTPROGRAM_H
#define MFC_RUNTIME_HOSTPROGRAM_H

#include "runtime/Executable.h"

#include <vector>

namespace mfrt {

struct HostStep {
  /// The dispatch this step runs, or null for op `firstOp`'s eager kernel.
  const fb::Dispatch *dispatch = nullptr;
  uint32_t firstOp = 0;
  /// Outputs of the dispatch that are KV caches it updates in place:
  /// (output id, the cache input it shares storage with).
  std::vector<std::pair<uint32_t, uint32_t>> cacheViews;
};

/// The arena offset of a value the weights alone determine (HostProgram::
/// derivedSteps): the executor keeps it outside the arena.
inline constexpr int64_t kDerivedFromWeights = -2;

struct HostProgram {
  std::vector<HostStep> steps;
  uint64_t arenaBytes = 0;
  /// Entry outputs that live outside the arena: each run allocates them
  /// and the steps write them directly.
  std::vector<uint32_t> outputBuffers;
  /// Values computed in place: (value id, parameter index).
  std::vector<std::pair<uint32_t, uint32_t>> inPlace;
  /// The entry assigns parameters (a training step): running it changes
  /// the weights, and nothing in it is derived from them.
  bool assignsParameters = false;
  /// Steps whose results only the weights and constants determine (casts
  /// of parameters to the compute type, position tables), in an
  /// entry that assigns no parameter: the executor computes them when the
  /// weights change, into storage of its own. Their results are not entry
  /// outputs nor KV caches; the compiler keeps them out of the arena
  /// (offset kDerivedFromWeights), an older one gave them arena offsets.
  std::vector<bool> derivedSteps; // per step

  /// The host program of `entry`; an error if it has no memory plan or the
  /// plan is unsound.
  static StatusOr<HostProgram> build(const fb::Entry &entry);
};

} // namespace mfrt

#endif // MFC_RUNTIME_HOSTPROGRAM_H
