//===- ChooseWeightLayout.cpp - which weights kernels read as panels ------===//
//
// Marks `panels` the parameters that Graph Mode's kernels will read packed
// into panels (runtime/kernels/PanelGemm.h) instead of as stored: in a module
// that assigns none (packed once, they stay valid), the f32, f16 and bf16 [N,
// K] weights that every reader multiplies by transposed inside a matmul region
// (a Linear weight), and the i8 values of quantized ones read so; `dot_panels`
// the i8 values of an int8 weight that multiplies only int8 rows (W8A8:
// runtime/kernels/Int8DotGemm.h). The runtime
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

#include "llvm/ADT/StringMap.h"

namespace mfc {
#define GEN_PASS_DEF_MFCHOOSEWEIGHTLAYOUTPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;

namespace {

enum class Layout { Stored, Panels, DotPanels };

/// Whether a matmul multiplies int8 rows (an mf.dequantize of
/// mf.dynamic_quantize's values, or mf.quantize's cast to floats).
bool multipliesInt8Rows(Operation *op) {
  auto matmul = dyn_cast<mf::MatmulOp>(op);
  if (!matmul) {
    return false;
  }
  auto rows = matmul.getLhs().getDefiningOp<mf::DequantizeOp>();
  return (rows && rows.getInput().getDefiningOp<mf::DynamicQuantizeOp>()) ||
         mf::quantizedRowsOf(matmul.getLhs());
}

/// How `use` of a parameter's value reads it: as panels when every matmul
/// its matmul region feeds it to multiplies by it transposed; as dot panels
/// when those are an int8 weight's products with int8 rows (and K is a
/// multiple of 4); else as stored.
Layout layoutOfRead(OpOperand &use) {
  auto fusion = dyn_cast<mf::FusionOp>(use.getOwner());
  if (!fusion || (fusion.getKind() != mf::FusionKind::matmul &&
                  fusion.getKind() != mf::FusionKind::matmul_epilogue)) {
    return Layout::Stored;
  }
  Value argument = fusion.getBody().front().getArgument(use.getOperandNumber());
  auto type = cast<RankedTensorType>(argument.getType());
  bool panels = true, int8Rows = false, floatRows = false;
  for (OpOperand &inner : argument.getUses()) {
    // A quantized weight's values, through its mf.dequantize.
    auto dequantize = dyn_cast<mf::DequantizeOp>(inner.getOwner());
    if (dequantize && inner.getOperandNumber() == 0) {
      panels =
          panels && llvm::all_of(dequantize->getUses(), mf::isTransposedRhs);
      for (Operation *user : dequantize->getUsers()) {
        (multipliesInt8Rows(user) ? int8Rows : floatRows) = true;
      }
    } else {
      panels = panels && mf::isTransposedRhs(inner);
      floatRows = true;
    }
  }
  if (!panels || (int8Rows && floatRows)) {
    return Layout::Stored;
  }
  if (!int8Rows) {
    return Layout::Panels;
  }
  // (The dot layout takes K four at a time.)
  return type.getDimSize(1) % 4 == 0 ? Layout::DotPanels : Layout::Stored;
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
    // W8A8's int8 dot products are fast with AVX512-VNNI only; AVX2's
    // microkernel (and the portable loop) are slower than W8A16's. (An int8
    // KV cache's mf.quantize feeds no matmul.)
    if (graph
            .walk([](Operation *op) {
              auto quantize = dyn_cast<mf::QuantizeOp>(op);
              bool rows =
                  isa<mf::DynamicQuantizeOp>(op) ||
                  (quantize &&
                   llvm::any_of(quantize->getUsers(), [](Operation *user) {
                     return isa<mf::CastOp>(user);
                   }));
              return rows ? WalkResult::interrupt() : WalkResult::advance();
            })
            .wasInterrupted()) {
      FailureOr<mfexec::TargetAttr> target =
          mfc::resolveKernelTarget(cpu, graph.getLoc());
      if (failed(target)) {
        return signalPassFailure();
      }
      if (!llvm::is_contained(target->getFeatures(),
                              StringAttr::get(&getContext(), "avx512vnni"))) {
        emitWarning(graph.getLoc())
            << "int8 activations (W8A8) on a target without AVX512-VNNI "
               "('"
            << target->getCpu()
            << "'): its int8 dot products widen the bytes to 16 bits "
               "(AVX2's vpmaddwd) or run a portable loop, slower than "
               "W8A16 (activation_dtype: None) there";
      }
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
    // Each parameter's one layout (Stored when its reads disagree).
    llvm::StringMap<Layout> layouts;
    graph.walk([&](mf::ParamOp param) {
      auto type = cast<RankedTensorType>(param.getType());
      Type element = type.getElementType();
      Layout layout = Layout::Stored;
      if (type.getRank() == 2 &&
          (element.isF32() || element.isF16() || element.isBF16() ||
           element.isInteger(8)) &&
          !param->use_empty()) {
        layout = layoutOfRead(*param->getUses().begin());
        for (OpOperand &use : param->getUses()) {
          if (layoutOfRead(use) != layout) {
            layout = Layout::Stored;
          }
        }
      }
      auto [known, added] = layouts.try_emplace(param.getName(), layout);
      if (!added && known->second != layout) {
        known->second = Layout::Stored;
      }
    });
    for (auto parameter : graph.getOps<mf::ParameterOp>()) {
      Layout layout = layouts.lookup(parameter.getSymName());
      if (parameter.getState()) {
        continue;
      }
      if (layout == Layout::Panels) {
        parameter.setPanels(true);
      } else if (layout == Layout::DotPanels) {
        parameter.setDotPanels(true);
      }
    }
  }
};

} // namespace
