//===- OpRegistry.h - the ops model.bin stores ------------------*- C++ -*-===//
//
// The runtime's view of the op registry: one row per fb::OpKind, generated
// by mf-tblgen from the mf dialect's ODS (dialects/MF/IR/MFOps.td) together
// with the schema's attribute tables and the writer's encoder, so writer
// and loader cannot disagree (docs/adding-an-op.md). The loader checks
// every op it reads against its row: counts, the attribute table of its
// kind, attribute values, and the dtypes and ranks its ODS constraints
// give each operand and result.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_FORMAT_OPREGISTRY_H
#define MFC_RUNTIME_FORMAT_OPREGISTRY_H

#include "runtime/format/schemas/mf_executable_generated.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mfrt {

namespace fb = ::mfbin;

/// The dtypes a value may have (bit i: DType i) and its rank (-1: any).
struct ValueRule {
  uint8_t dtypes;
  int8_t rank;
};

struct OpRow {
  fb::OpKind kind;
  const char *name; // the mf op: "mf.rms_norm"
  int operandsMin;
  int operandsMax; // -1: no limit (a variadic operand)
  int results;
  fb::OpAttributes attributes; // its kind's table; NONE: no attributes
  /// The op's types are equal (its `SameOperandsAndResultType` trait):
  /// the loader needs no rule of the op's own.
  bool sameOperandsAndResultType;
  const ValueRule *values; // the operands' rules, then the results'
  int operandRules;
};

/// Whether a vector's elements sit at their alignment (flatbuffers 2.0's
/// verifier checks only the length field's 4 bytes, so a hostile file can
/// put a vector of 8-byte values at a 4-byte boundary).
template <typename T> bool alignedVector(const flatbuffers::Vector<T> *vector) {
  // An empty vector has no element to read (flatbuffers does not align it).
  return !vector || vector->size() == 0 ||
         reinterpret_cast<uintptr_t>(vector->data()) % alignof(T) == 0;
}

#include "runtime/format/schemas/RuntimeOpTable.inc"

/// The row of `kind`, or null for a kind this runtime does not know.
inline const OpRow *opRow(fb::OpKind kind) {
  auto index = static_cast<size_t>(kind);
  return index < sizeof(kOpRows) / sizeof(kOpRows[0]) ? &kOpRows[index]
                                                      : nullptr;
}

/// The row of the mf op called `name`, or null.
inline const OpRow *opRowNamed(std::string_view name) {
  for (const OpRow &row : kOpRows) {
    if (name == row.name) {
      return &row;
    }
  }
  return nullptr;
}

} // namespace mfrt

#endif // MFC_RUNTIME_FORMAT_OPREGISTRY_H
