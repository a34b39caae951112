//===- OpTypes.h - static type rules of the executable's ops ----*- C++ -*-===//

#ifndef MFC_RUNTIME_FORMAT_OPTYPES_H
#define MFC_RUNTIME_FORMAT_OPTYPES_H

#include "runtime/format/Executable.h"

#include <vector>

namespace mfrt {

/// A tensor type: what the loader knows of a value before anything runs.
struct TensorDesc {
  DType dtype;
  Shape shape;
};

/// Checks that `results` (one per result of the op's row) are what `op`
/// produces from `operands`, by the same rules as the mf dialect's
/// verifiers (for the ops with a rule in shapes/ShapeRules.h, by that
/// rule). The loader runs it on every op, so no kernel ever sees (or
/// allocates for) inconsistent shapes.
Status checkOpTypes(const fb::Op &op, const std::vector<TensorDesc> &operands,
                    const std::vector<TensorDesc> &results);

} // namespace mfrt

#endif // MFC_RUNTIME_FORMAT_OPTYPES_H
