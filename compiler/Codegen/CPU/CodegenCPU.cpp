//===- CodegenCPU.cpp - native kernels for fusion regions -----------------===//

#include "compiler/Codegen/CPU/ElementwiseKernels.h"
#include "compiler/Transforms/OutputFile.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mfc {
#define GEN_PASS_DEF_MFCODEGENCPUPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;
using namespace mfc;

namespace {

struct MFCodegenCPUPass : mfc::impl::MFCodegenCPUPassBase<MFCodegenCPUPass> {
  using MFCodegenCPUPassBase::MFCodegenCPUPassBase;

  void runOnOperation() override {
    ModuleOp graph = getOperation();
    Builder builder(&getContext());
    KernelModule kernels = buildElementwiseKernels(graph);
    for (auto &[fusion, name] : kernels.kernelOf) {
      fusion->setAttr("mf.kernel", builder.getStringAttr(name));
    }
    for (auto &[fusion, why] : kernels.unsupported) {
      fusion->setAttr("mf.kernel_unsupported", builder.getStringAttr(why));
    }
    int64_t count = std::distance(kernels.module->getOps().begin(),
                                  kernels.module->getOps().end());
    graph->setAttr("mf.kernel_count", builder.getI64IntegerAttr(count));
    if (kernelsFile.empty() && objectFile.empty()) {
      return; // the annotations are all; model.bin's writer builds the library
    }
    if (failed(lowerKernelsToLLVM(*kernels.module))) {
      emitError(graph.getLoc()) << "lowering the kernels to LLVM failed";
      return signalPassFailure();
    }
    if (!kernelsFile.empty() && failed(writeFile(kernelsFile, [&](llvm::raw_ostream &os) {
          kernels.module->print(os);
        }))) {
      return signalPassFailure();
    }
    if (objectFile.empty()) {
      return;
    }
    FailureOr<std::string> object = emitKernelObject(*kernels.module, cpu);
    if (failed(object) ||
        failed(writeFile(objectFile, [&](llvm::raw_ostream &os) { os << *object; }))) {
      return signalPassFailure();
    }
  }

  /// Writes `path`; an error at the module's location if it cannot.
  LogicalResult writeFile(StringRef path,
                          llvm::function_ref<void(llvm::raw_ostream &)> write) {
    std::string error = writeOutputFile(path, write);
    if (!error.empty()) {
      return emitError(getOperation().getLoc()) << error;
    }
    return success();
  }
};

} // namespace
