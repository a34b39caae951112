//===- PrintCost.cpp - report FLOPs and bytes of a module -----------------===//

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::mf {
#define GEN_PASS_DEF_MFPRINTCOSTPASS
#include "dialects/MF/Transforms/Passes.h.inc"
} // namespace mlir::mf

using namespace mlir;
using namespace mlir::mf;

namespace {

struct KindTotals {
  int64_t count = 0;
  int64_t flops = 0;
  int64_t bytes = 0;
};

struct MFPrintCostPass : mf::impl::MFPrintCostPassBase<MFPrintCostPass> {
  using MFPrintCostPassBase::MFPrintCostPassBase;

  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    int64_t parameterCount = 0, parameterBytes = 0;
    for (auto parameter : getOperation().getOps<ParameterOp>()) {
      RankedTensorType type = parameter.getTensorType();
      parameterCount += type.getNumElements();
      parameterBytes += type.getNumElements() *
                        (type.getElementTypeBitWidth() / 8);
    }
    os << llvm::format("parameters: %lld values, %.2f MB\n",
                       static_cast<long long>(parameterCount),
                       parameterBytes / 1.0e6);

    for (auto function : getOperation().getOps<func::FuncOp>()) {
      llvm::MapVector<StringRef, KindTotals> byKind;
      KindTotals total;
      std::string opLines;
      llvm::raw_string_ostream opStream(opLines);
      // Top-level ops only: a fusion is one unit whose cost covers its body.
      for (Operation &topLevel : function.getBody().front()) {
        auto op = dyn_cast<CostOpInterface>(&topLevel);
        if (!op) {
          continue;
        }
        KindTotals &kind = byKind[op->getName().getStringRef()];
        int64_t flops = op.getFlops(), bytes = op.getBytesAccessed();
        for (KindTotals *totals : {&kind, &total}) {
          totals->count += 1;
          totals->flops += flops;
          totals->bytes += bytes;
        }
        if (perOp) {
          opStream << llvm::format("    %-18s %16lld %16lld  ",
                             op->getName().getStringRef().str().c_str(),
                             static_cast<long long>(flops),
                             static_cast<long long>(bytes))
             << mf::getModelPath(op->getLoc()) << "\n";
        }
      }
      os << "entry @" << function.getSymName() << ": " << total.count
         << " ops, "
         << llvm::format("%.4g GFLOP, %.4g MB moved\n", total.flops / 1.0e9,
                         total.bytes / 1.0e6);
      os << llvm::format("  %-20s %8s %16s %16s\n", "op kind", "count", "FLOP",
                         "bytes");
      for (auto &[name, kind] : byKind) {
        os << llvm::format("  %-20s %8lld %16lld %16lld\n", name.str().c_str(),
                           static_cast<long long>(kind.count),
                           static_cast<long long>(kind.flops),
                           static_cast<long long>(kind.bytes));
      }
      if (perOp) {
        os << "  every op (kind, FLOP, bytes, model path):\n" << opLines;
      }
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
