//===- OpRegistry.h - the executable's view of the mf ops -------*- C++ -*-===//
//
// What mf-tblgen reads from the `mf` dialect's ODS: for every op model.bin
// stores, its kind, its operand and result counts, the dtypes each operand
// and result may have, whether a trait fixes its types, and its attributes
// as typed fields. Every generator (the schema, the runtime's table, the
// writer's encoder) works from this one model, so they cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_TOOLS_MF_TBLGEN_OPREGISTRY_H
#define MFC_TOOLS_MF_TBLGEN_OPREGISTRY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/TableGen/Record.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mftblgen {

/// How one attribute is stored in model.bin.
enum class FieldKind {
  Int,            // I64Attr, I32Attr: long
  Bool,           // UnitAttr, BoolAttr: bool
  Double,         // F64Attr, F32Attr: double
  Enum,           // an I32EnumAttr: the generated flatbuffers enum
  IntArray,       // DenseI64ArrayAttr: [long]
  ShortArray,     // DenseI16ArrayAttr: [short]
  DoubleArray,    // DenseF64ArrayAttr: [double]
  Bytes,          // ElementsAttr: the raw little-endian values, [ubyte]
  ParameterIndex, // the FlatSymbolRefAttr `name` of an mf.parameter: uint
};

/// An enum an attribute uses, with its cases (symbol, value).
struct EnumType {
  std::string name;
  std::string cppType; // the dialect's C++ enum, for the encoder's cast
  std::vector<std::pair<std::string, int64_t>> cases;
};

struct Field {
  std::string name;   // the ODS argument's name (snake_case)
  std::string getter; // the ODS accessor (getGridAxes)
  FieldKind kind;
  bool optional = false;
  int enumIndex = -1; // into Registry::enums, for FieldKind::Enum
};

/// The dtypes a value may have, as a bit set over runtime DType values
/// (F32 = 0, F16 = 1, BF16 = 2, I32 = 3); rank -1: any rank.
struct ValueConstraint {
  unsigned dtypes = 0xF;
  int rank = -1;
};

struct OpRecord {
  std::string kind;     // OpKind enumerator: SwiGlu
  std::string name;     // mf.swiglu
  std::string cppClass; // ::mlir::mf::SwiGluOp
  int operandsMin = 0, operandsMax = 0, results = 0;
  std::vector<ValueConstraint> operands; // one per ODS operand (variadic: one)
  std::vector<ValueConstraint> resultTypes;
  bool sameOperandsAndResultType = false;
  std::vector<Field> fields;
};

struct Registry {
  std::vector<OpRecord> ops; // in the order of their kinds
  std::vector<EnumType> enums;
};

/// Reads every `mf` op whose `inExecutable` bit is set; a field the
/// executable cannot store is a fatal TableGen error at the op.
Registry readRegistry(const llvm::RecordKeeper &records);

/// The flatbuffers schema of the op kinds, enums and attribute tables.
std::string executableSchema(const Registry &registry);

/// 64-bit FNV-1a of the schema: model.bin records the registry it was
/// written with, and a loader of another registry refuses it.
uint64_t fingerprint(const Registry &registry);

} // namespace mftblgen

#endif // MFC_TOOLS_MF_TBLGEN_OPREGISTRY_H
