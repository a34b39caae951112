//===- ChooseWeightLayout.cpp - which weights kernels read as panels ------===//
//
// Marks `panels` the parameters that Graph Mode's kernels will read packed
// into panels (runtime/kernels/PanelGemm.h) instead of as stored: in a module
// that assigns none (packed once, they stay valid), the f32, f16 and bf16 [N,
// K] weights that every reader multiplies by transposed inside a matmul region
// (a Linear weight), and the i8 values of quantized ones read so. The runtime
// then packs each once and, when nothing else reads it as stored, keeps only
// the panels.
//
// Whether to pack at all depends on the target: several rows times panels
// run the runtime's AVX-512 or AVX2 (with FMA and F16C) microkernel, and
// without either its portable loop is ~6x slower than OpenBLAS on the
// stored layout (llama-100m prefill on an AVX2 Zen before the AVX2
// microkernel: 39 against 229-273 tokens/s), so `pack-weights=auto` packs
// only for targets that have one (docs/codegen.md has the measurements).
//
// After mf-outline-lone-matmuls (every product is in a region), before
// mf-codegen-cpu (which builds the kernels for the layout chosen here).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/Transforms/FusionUtils.h"

namespace mfc {
#define GEN_PASS_DEF_MFCHOOSEWEIGHTLAYOUTPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;

namespace {

/// Whether `use` of a parameter's value is the transposed right operand of
/// every matmul its matmul region feeds it to.
bool readAsPanel(OpOperand &use) {
  auto fusion = dyn_cast<mf::FusionOp>(use.getOwner());
  if (!fusion || (fusion.getKind() != mf::FusionKind::matmul &&
                  fusion.getKind() != mf::FusionKind::matmul_epilogue)) {
    return false;
  }
  Value argument = fusion.getBody().front().getArgument(use.getOperandNumber());
  return llvm::all_of(argument.getUses(), [](OpOperand &inner) {
    // A quantized weight's values, through its mf.dequantize.
    auto dequantize = dyn_cast<mf::DequantizeOp>(inner.getOwner());
    if (dequantize && inner.getOperandNumber() == 0) {
      return llvm::all_of(dequantize->getUses(), mf::isTransposedRhs);
    }
    return mf::isTransposedRhs(inner);
  });
}

struct MFChooseWeightLayoutPass
    : mfc::impl::MFChooseWeightLayoutPassBase<MFChooseWeightLayoutPass> {
  using MFChooseWeightLayoutPassBase::MFChooseWeightLayoutPassBase;

  void runOnOperation() override {
    ModuleOp graph = getOperation();
    if (packWeights != "auto" && packWeights != "true" &&
        packWeights != "false") {
      emitError(graph.getLoc())
          << "pack-weights is auto, true or false, not '" << packWeights << "'";
      return signalPassFailure();
    }
    bool pack = packWeights == "true";
    if (packWeights == "auto") {
      FailureOr<mfexec::TargetAttr> target =
          mfc::resolveKernelTarget(cpu, graph.getLoc());
      if (failed(target)) {
        return signalPassFailure();
      }
      auto has = [&](StringRef feature) {
        return llvm::is_contained(target->getFeatures(),
                                  StringAttr::get(&getContext(), feature));
      };
      pack = has("avx512f") || (has("avx2") && has("fma") && has("f16c"));
    }
    if (!pack ||
        graph.walk([](mf::AssignOp) { return WalkResult::interrupt(); })
            .wasInterrupted()) {
      return;
    }
    llvm::StringSet<> read, readOtherwise;
    graph.walk([&](mf::ParamOp param) {
      auto type = cast<RankedTensorType>(param.getType());
      Type element = type.getElementType();
      bool panels = type.getRank() == 2 &&
                    (element.isF32() || element.isF16() || element.isBF16() ||
                     element.isInteger(8)) &&
                    llvm::all_of(param->getUses(), readAsPanel);
      (panels ? read : readOtherwise).insert(param.getName());
    });
    for (auto parameter : graph.getOps<mf::ParameterOp>()) {
      if (read.contains(parameter.getSymName()) &&
          !readOtherwise.contains(parameter.getSymName()) &&
          !parameter.getState()) {
        parameter.setPanels(true);
      }
    }
  }
};

} // namespace
