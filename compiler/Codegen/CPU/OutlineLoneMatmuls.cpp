//===- OutlineLoneMatmuls.cpp - every matmul in a kernel region -----------===//
//
// A float matmul with a 2-D right operand that fusion left outside any
// region becomes a one-op `matmul` region: all matmul-class work goes
// through the tiled kernels (and their gemm services) instead of the eager
// library.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mfc {
#define GEN_PASS_DEF_MFOUTLINELONEMATMULSPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;

namespace {

/// f32, f16 or bf16 elements: what matmul kernels take.
bool isKernelFloatTensor(Type type) {
  Type element = cast<RankedTensorType>(type).getElementType();
  return element.isF32() || element.isF16() || element.isBF16();
}

/// Wraps each float matmul with a 2-D weight that no region holds.
void outlineLoneMatmuls(ModuleOp graph) {
  SmallVector<mf::MatmulOp> matmuls;
  for (auto function : graph.getOps<func::FuncOp>()) {
    for (auto matmul : function.getBody().front().getOps<mf::MatmulOp>()) {
      if (isKernelFloatTensor(matmul.getType()) &&
          isKernelFloatTensor(matmul.getLhs().getType()) &&
          cast<RankedTensorType>(matmul.getRhs().getType()).getRank() == 2) {
        matmuls.push_back(matmul);
      }
    }
  }
  for (mf::MatmulOp matmul : matmuls) {
    mf::outlineIntoFusion({matmul.getOperation()}, mf::FusionKind::matmul);
  }
}

struct MFOutlineLoneMatmulsPass
    : mfc::impl::MFOutlineLoneMatmulsPassBase<MFOutlineLoneMatmulsPass> {
  void runOnOperation() override { outlineLoneMatmuls(getOperation()); }
};

} // namespace
