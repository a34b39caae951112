//===- LowerKernels.cpp - an executable's kernels to the LLVM dialect -----===//
//
// The code module of the graph's mfexec.executable (func/linalg/scf on
// memrefs, from mf-codegen-cpu) lowered to the LLVM dialect for the
// executable's target (KernelLowering.cpp), and optionally emitted as an
// ELF object. mfc links the lowered module into model.bin's kernel library.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Transforms/OutputFile.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mfc {
#define GEN_PASS_DEF_MFEXECLOWERKERNELSPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;
using namespace mfc;

namespace {

struct MFExecLowerKernelsPass
    : mfc::impl::MFExecLowerKernelsPassBase<MFExecLowerKernelsPass> {
  using MFExecLowerKernelsPassBase::MFExecLowerKernelsPassBase;

  void runOnOperation() override {
    ModuleOp graph = getOperation();
    mfexec::ExecutableOp executable = findExecutable(graph);
    if (!executable) {
      if (!objectFile.empty()) {
        emitError(graph.getLoc()) << "there are no kernels to write to '"
                                  << objectFile << "'";
        return signalPassFailure();
      }
      return;
    }
    ModuleOp code = executable.getCode();
    if (failed(lowerKernelsToLLVM(code, executable.getTarget()))) {
      emitError(graph.getLoc()) << "lowering the kernels to LLVM failed";
      return signalPassFailure();
    }
    if (objectFile.empty()) {
      return;
    }
    FailureOr<std::string> object = emitKernelObject(code, executable.getTarget());
    if (failed(object) ||
        failed(writeOutputFile(graph, objectFile,
                               [&](llvm::raw_ostream &os) { os << *object; }))) {
      return signalPassFailure();
    }
  }
};

} // namespace
