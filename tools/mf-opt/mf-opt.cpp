//===- mf-opt.cpp - run mf passes by hand ---------------------------------===//
//
// mlir-opt with mfc's dialects, passes and phase pipelines registered.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/IR/MFDialect.h"
#include "dialects/MF/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  // The LLVM dialect too: after codegen the graph holds its kernels in a
  // nested LLVM-dialect module.
  registry.insert<mlir::mf::MFDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect>();
  mlir::registerTransformsPasses();
  mlir::mf::registerMFPasses();
  mfc::registerMFCPasses();
  mfc::registerPhasePipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mfc pass driver\n", registry));
}
