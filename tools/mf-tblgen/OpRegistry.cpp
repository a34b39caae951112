//===- OpRegistry.cpp - read the executable's ops from the mf ODS ---------===//

#include "tools/mf-tblgen/OpRegistry.h"

#include "mlir/TableGen/Argument.h"
#include "mlir/TableGen/Attribute.h"
#include "mlir/TableGen/EnumInfo.h"
#include "mlir/TableGen/Operator.h"
#include "mlir/TableGen/Trait.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/TableGen/Error.h"

#include <algorithm>

using namespace mftblgen;
using mlir::tblgen::Attribute;
using mlir::tblgen::NamedTypeConstraint;
using mlir::tblgen::Operator;

namespace {

/// The dtypes of the dialect's tensor constraints (MFBase.td); a
/// constraint not named here constrains nothing the loader checks
/// generically (the op's own rule in runtime/format/OpTypes.cpp does).
ValueConstraint constraintOf(const NamedTypeConstraint &value) {
  constexpr unsigned f32 = 1, f16 = 2, bf16 = 4, i32 = 8, i8 = 16;
  llvm::StringRef def = value.constraint.getDefName();
  ValueConstraint result;
  if (def == "MF_FloatTensor") {
    result.dtypes = f32 | f16 | bf16;
  } else if (def == "MF_IndexTensor" || def == "MF_PositionTensor") {
    result.dtypes = i32;
  } else if (def == "MF_QuantizedTensor") {
    result.dtypes = i8;
  } else if (def == "MF_ParameterTensor" || def == "MF_CacheTensor") {
    result.dtypes = f32 | f16 | bf16 | i8;
  } else if (def == "MF_AnyTensor") {
    result.dtypes = f32 | f16 | bf16 | i32 | i8;
  } else if (def == "MF_ScalarIndexTensor") {
    result.dtypes = i32;
    result.rank = 0;
  }
  return result;
}

/// Whether a trait makes every operand's and result's type one:
/// `SameOperandsAndResultType`, or `AllTypesMatch` naming all of them.
bool allTypesMatch(const Operator &op) {
  if (op.getTrait("::mlir::OpTrait::SameOperandsAndResultType")) {
    return true;
  }
  size_t values = op.getNumOperands() + op.getNumResults();
  for (const mlir::tblgen::Trait &trait : op.getTraits()) {
    const llvm::Record &def = trait.getDef();
    if (def.isSubClassOf("AllTypesMatch") &&
        def.getValueAsListOfStrings("values").size() == values) {
      return true;
    }
  }
  return false;
}

int enumIndexOf(Registry &registry, const Attribute &attr) {
  mlir::tblgen::EnumInfo info(attr.getDef());
  std::string name = info.getEnumClassName().str();
  for (size_t i = 0; i < registry.enums.size(); ++i) {
    if (registry.enums[i].name == name) {
      return static_cast<int>(i);
    }
  }
  EnumType type{name, (info.getCppNamespace() + "::" + name).str(), {}};
  for (const mlir::tblgen::EnumCase &c : info.getAllCases()) {
    type.cases.emplace_back(c.getSymbol().str(), c.getValue());
  }
  registry.enums.push_back(std::move(type));
  return static_cast<int>(registry.enums.size() - 1);
}

/// How `attr`, argument `name` of `op`, is stored; false when it is not
/// stored at all (the `grid` symbol: an executable has one grid).
bool fieldOf(Registry &registry, const Operator &op, llvm::StringRef name,
             const Attribute &attr, Field &field) {
  Attribute base = attr.getBaseAttr();
  llvm::StringRef def = base.getAttrDefName();
  field.name = name.str();
  field.getter = op.getGetterName(name);
  field.optional = attr.isOptional();
  if (def == "FlatSymbolRefAttr" && name == "grid") {
    return false;
  }
  if (def == "FlatSymbolRefAttr" && name == "name") {
    field.kind = FieldKind::ParameterIndex;
    field.name = "parameter";
    return true;
  }
  if (base.isEnumAttr()) {
    field.kind = FieldKind::Enum;
    field.enumIndex = enumIndexOf(registry, base);
    return true;
  }
  std::optional<FieldKind> kind =
      llvm::StringSwitch<std::optional<FieldKind>>(def)
          .Cases({"I64Attr", "I32Attr", "SI64Attr", "SI32Attr"}, FieldKind::Int)
          .Cases({"UnitAttr", "BoolAttr"}, FieldKind::Bool)
          .Cases({"F64Attr", "F32Attr"}, FieldKind::Double)
          .Case("DenseI64ArrayAttr", FieldKind::IntArray)
          .Case("DenseI16ArrayAttr", FieldKind::ShortArray)
          .Case("DenseF64ArrayAttr", FieldKind::DoubleArray)
          .Case("ElementsAttr", FieldKind::Bytes)
          .Default(std::nullopt);
  if (!kind) {
    llvm::PrintFatalError(
        &op.getDef(),
        llvm::formatv("{0}'s attribute '{1}' ({2}) has no encoding in the "
                      "executable: teach tools/mf-tblgen/OpRegistry.cpp how "
                      "to store it, or set `inExecutable = 0`",
                      op.getOperationName(), name, def));
  }
  field.kind = *kind;
  bool vector = *kind == FieldKind::IntArray ||
                *kind == FieldKind::ShortArray ||
                *kind == FieldKind::DoubleArray;
  if (field.optional && !vector && *kind != FieldKind::Bool) {
    // A flatbuffers scalar cannot say "absent" apart from its default.
    llvm::PrintFatalError(
        &op.getDef(),
        llvm::formatv("{0}'s attribute '{1}' is an optional scalar, which the "
                      "executable cannot store: give it a default",
                      op.getOperationName(), name));
  }
  return true;
}

} // namespace

Registry mftblgen::readRegistry(const llvm::RecordKeeper &records) {
  Registry registry;
  std::vector<const llvm::Record *> defs;
  for (const llvm::Record *def : records.getAllDerivedDefinitions("Op")) {
    if (Operator(def).getDialectName() == "mf" &&
        def->getValueAsBit("inExecutable")) {
      defs.push_back(def);
    }
  }
  // Definition order: kinds follow MFOps.td.
  llvm::sort(defs, [](const llvm::Record *a, const llvm::Record *b) {
    return a->getID() < b->getID();
  });
  for (const llvm::Record *def : defs) {
    Operator op(def);
    OpRecord record;
    llvm::StringRef cppClass = op.getCppClassName();
    record.kind = cppClass.drop_back(cppClass.ends_with("Op") ? 2 : 0).str();
    record.name = op.getOperationName();
    record.cppClass = op.getQualCppClassName();
    for (int i = 0; i < op.getNumOperands(); ++i) {
      const NamedTypeConstraint &operand = op.getOperand(i);
      record.operands.push_back(constraintOf(operand));
      if (operand.isVariadic()) {
        record.operandsMin += 1;
        record.operandsMax = -1;
      } else {
        record.operandsMin += operand.isOptional() ? 0 : 1;
        if (record.operandsMax >= 0) {
          record.operandsMax += 1;
        }
      }
    }
    for (int i = 0; i < op.getNumResults(); ++i) {
      if (op.getResult(i).isVariableLength()) {
        llvm::PrintFatalError(def, "the executable stores ops with a fixed "
                                   "number of results");
      }
      record.resultTypes.push_back(constraintOf(op.getResult(i)));
    }
    record.results = op.getNumResults();
    record.sameOperandsAndResultType = allTypesMatch(op);
    for (const mlir::tblgen::NamedAttribute &named : op.getAttributes()) {
      if (named.attr.isDerivedAttr()) {
        continue;
      }
      Field field;
      if (fieldOf(registry, op, named.name, named.attr, field)) {
        record.fields.push_back(std::move(field));
      }
    }
    registry.ops.push_back(std::move(record));
  }
  return registry;
}

namespace {

std::string fbsType(const Registry &registry, const Field &field) {
  switch (field.kind) {
  case FieldKind::Int:
    return "long";
  case FieldKind::Bool:
    return "bool";
  case FieldKind::Double:
    return "double";
  case FieldKind::Enum:
    return registry.enums[field.enumIndex].name;
  case FieldKind::IntArray:
    return "[long]";
  case FieldKind::ShortArray:
    return "[short]";
  case FieldKind::DoubleArray:
    return "[double]";
  case FieldKind::Bytes:
    return "[ubyte]";
  case FieldKind::ParameterIndex:
    return "uint";
  }
  return "";
}

bool isVector(FieldKind kind) {
  return kind == FieldKind::IntArray || kind == FieldKind::ShortArray ||
         kind == FieldKind::DoubleArray || kind == FieldKind::Bytes;
}

} // namespace

std::string mftblgen::executableSchema(const Registry &registry) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "// The mf ops model.bin stores: generated by mf-tblgen from\n"
        "// dialects/MF/IR/MFOps.td (the op registry). Do not edit.\n\n"
        "namespace mfbin;\n\n";
  os << "enum OpKind : ushort {\n";
  for (size_t i = 0; i < registry.ops.size(); ++i) {
    os << "  " << registry.ops[i].kind << " = " << i
       << (i + 1 < registry.ops.size() ? ",\n" : "\n");
  }
  os << "}\n\n";
  for (const EnumType &type : registry.enums) {
    os << "enum " << type.name << " : int {";
    llvm::interleave(
        type.cases, os,
        [&](const auto &c) { os << " " << c.first << " = " << c.second; }, ",");
    os << " }\n\n";
  }
  for (const OpRecord &op : registry.ops) {
    if (op.fields.empty()) {
      continue;
    }
    os << "table " << op.kind << "Attrs { // " << op.name << "\n";
    for (const Field &field : op.fields) {
      os << "  " << field.name << ": " << fbsType(registry, field);
      if (isVector(field.kind) && !field.optional) {
        os << " (required)";
      }
      os << ";\n";
    }
    os << "}\n\n";
  }
  os << "union OpAttributes {";
  bool first = true;
  for (const OpRecord &op : registry.ops) {
    if (!op.fields.empty()) {
      os << (first ? "\n  " : ",\n  ") << op.kind << "Attrs";
      first = false;
    }
  }
  os << "\n}\n";
  return out;
}

uint64_t mftblgen::fingerprint(const Registry &registry) {
  std::string text = executableSchema(registry);
  // The counts and constraints the loader checks are part of the contract.
  for (const OpRecord &op : registry.ops) {
    text +=
        llvm::formatv("{0} {1} {2} {3} {4}\n", op.name, op.operandsMin,
                      op.operandsMax, op.results, op.sameOperandsAndResultType);
    for (const ValueConstraint &value : op.operands) {
      text += llvm::formatv("{0}:{1} ", value.dtypes, value.rank);
    }
    for (const ValueConstraint &value : op.resultTypes) {
      text += llvm::formatv("{0}:{1} ", value.dtypes, value.rank);
    }
  }
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash = (hash ^ c) * 0x100000001b3ull;
  }
  return hash;
}
