//===- HostProgram.h - an entry's Graph Mode program, verified --*- C++ -*-===//
//
// Graph Mode runs an entry's host program as the compiler wrote it
// (runtime/format/schemas/mf_executable.fbs: HostProgram, the compiler's
// mfexec.entry): buffers, and commands that bind them. Building it checks
// every command against the op-level program, the kernel signatures and
// the memory plan, so a corrupt model.bin can neither make two live
// buffers share bytes nor make a command read a value it does not hold:
//
// - each buffer is where its kind says, of its value's type (an arena
//   slice inside the arena and aligned; a view of an earlier buffer, of
//   the same element type and count);
// - each binding holds the op-level value it names: an input, parameter or
//   constant where that value lives, a computed value where an earlier
//   command wrote it; a command writes exactly the values of its ops;
// - a dispatch binds what its kernel takes (types, panel inputs as
//   parameters), inputs read, outputs written; a buffer written and bound
//   again is the input it updates in place and its tied output;
// - the initializer (Executable.initializer) writes only derived slots,
//   each once, and reads only parameters, constants and derived slots; an
//   entry never writes one, and names the op-level value each derived
//   buffer it reads holds; a parameter is written once, by a kernel in
//   place or a copy of its assignment, and not read after;
// - no two arena buffers alive at the same command overlap.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_FORMAT_HOSTPROGRAM_H
#define MFC_RUNTIME_FORMAT_HOSTPROGRAM_H

#include "runtime/format/Executable.h"

#include <vector>

namespace mfrt {

struct HostProgram {
  uint64_t arenaBytes = 0;
  /// Per buffer: the buffer whose storage it is (itself, or a view's root).
  std::vector<uint32_t> root;
  /// The derived slots an entry reads, or the initializer writes.
  std::vector<uint32_t> slots;
  /// An entry's derived buffers: the buffer, the op-level value it holds
  /// and the op that computes that value in PyNative Mode.
  struct DerivedValue {
    uint32_t buffer, value, op;
  };
  std::vector<DerivedValue> derivedValues;
  /// Per command: the bindings that are kernel panel inputs, and how each
  /// is packed.
  struct PanelBinding {
    uint32_t position;
    PanelLayout layout;
  };
  std::vector<std::vector<PanelBinding>> panelBindings;
  /// The entry assigns parameters (a training step): running it changes
  /// the weights.
  bool assignsParameters = false;
  /// Per parameter: some command writes it.
  std::vector<bool> writesParameter;

  /// The verified host program of `entry` (the initializer if
  /// `initializer`); an error if it has none or it breaks a rule above.
  static StatusOr<HostProgram> build(const fb::Executable &root,
                                     const fb::Entry &entry,
                                     bool initializer = false);
};

} // namespace mfrt

#endif // MFC_RUNTIME_FORMAT_HOSTPROGRAM_H
