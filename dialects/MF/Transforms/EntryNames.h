//===- EntryNames.h - an entry's named inputs and results -------*- C++ -*-===//
//
// Entry functions name their inputs and results (`mf.name`) for the
// runtime; the passes that split pipeline entries (mf-split-stages,
// mf-split-weight-gradients) find values by them.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_DIALECTS_MF_TRANSFORMS_ENTRYNAMES_H
#define MFC_DIALECTS_MF_TRANSFORMS_ENTRYNAMES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::mf {

/// The `mf.name` attribute dictionary of a value called `name`.
inline DictionaryAttr valueName(Builder &builder, const Twine &name) {
  return builder.getDictionaryAttr(
      builder.getNamedAttr("mf.name", builder.getStringAttr(name)));
}

/// The index of `entry`'s argument called `name`.
inline std::optional<unsigned> argumentNamed(func::FuncOp entry,
                                             StringRef name) {
  for (unsigned i = 0; i < entry.getNumArguments(); ++i) {
    auto attr = entry.getArgAttrOfType<StringAttr>(i, "mf.name");
    if (attr && attr.getValue() == name) {
      return i;
    }
  }
  return std::nullopt;
}

/// The index of `entry`'s result called `name`.
inline std::optional<unsigned> resultNamed(func::FuncOp entry, StringRef name) {
  for (unsigned i = 0; i < entry.getNumResults(); ++i) {
    auto attr = entry.getResultAttrOfType<StringAttr>(i, "mf.name");
    if (attr && attr.getValue() == name) {
      return i;
    }
  }
  return std::nullopt;
}

/// Parameter and constant reads (no operands): a split entry reads them
/// on each side rather than passing their values across.
inline bool isReadOnEachSide(Operation *op) {
  return op->getNumOperands() == 0;
}

} // namespace mlir::mf

#endif // MFC_DIALECTS_MF_TRANSFORMS_ENTRYNAMES_H
