//===- ElementwiseKernels.h - fusion regions -> native kernels --*- C++ -*-===//
//
// The first code generator: every elementwise mf.fusion becomes one
// linalg.generic over its output (broadcast inputs read through projected
// indexing maps), in a kernel function with the bare-pointer ABI
//   void mfk_N(T *input0, ..., T *output0, ...)
// Identical regions (same ops, types and maps: every layer's) share one
// kernel. The kernels are lowered through loops to the LLVM dialect, and
// from there to object code for the target CPU.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_CODEGEN_CPU_ELEMENTWISEKERNELS_H
#define MFC_COMPILER_CODEGEN_CPU_ELEMENTWISEKERNELS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace mfc {

struct KernelModule {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The kernel each supported fusion region runs.
  llvm::DenseMap<mlir::Operation *, std::string> kernelOf;
  /// Regions that stay on the eager library (and why), for the report.
  std::vector<std::pair<mlir::Operation *, std::string>> unsupported;
};

/// Builds kernels (linalg on memrefs) for the elementwise regions of `graph`.
KernelModule buildElementwiseKernels(mlir::ModuleOp graph);

/// Lowers a kernel module to the LLVM dialect.
llvm::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels);

/// Translates an LLVM-dialect module, optimizes it (O3) and emits an ELF
/// object for `cpu` ("native" = this machine). Returns the object's bytes.
mlir::FailureOr<std::string> emitKernelObject(mlir::ModuleOp kernels,
                                              llvm::StringRef cpu);

/// Links an object file into an ELF shared object with LLVM's lld.
mlir::FailureOr<std::string> linkSharedObject(llvm::StringRef object,
                                              mlir::Location loc);

/// The kernels of a graph as one shared object, for model.bin.
struct KernelLibrary {
  std::string sharedObject; ///< empty when the graph has no kernels
  std::vector<std::string> names;
  /// The kernel each fusion region of the graph runs.
  llvm::DenseMap<mlir::Operation *, std::string> kernelOf;
};
mlir::FailureOr<KernelLibrary> buildKernelLibrary(mlir::ModuleOp graph,
                                                  llvm::StringRef cpu);

} // namespace mfc

#endif // MFC_COMPILER_CODEGEN_CPU_ELEMENTWISEKERNELS_H
