//===- PyNative.h - op-by-op execution --------------------------*- C++ -*-===//
//
// Interprets an entry's op-level program: each op's result is allocated
// from the caching allocator, computed by its eager kernel, and every value
// is released after its last use. Parameters and reshapes are views, and a
// KV-cache write updates its cache in place when nothing else holds it.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_PYNATIVE_H
#define MFC_RUNTIME_PYNATIVE_H

#include "runtime/Allocator.h"
#include "runtime/Executable.h"
#include "runtime/KernelLibrary.h"
#include "runtime/Weights.h"

#include <chrono>
#include <string>
#include <vector>

namespace mfrt {

/// What a debugging user can ask of a run.
struct RunOptions {
  /// Write every intermediate as DIR/<entry>.<index>.<model path>.npy.
  std::string dumpTensorsDir;
  /// Stop at the first op that produces a NaN or an infinity.
  bool checkNumerics = false;
  /// Append one Chrome-trace slice per op to this list.
  std::vector<std::string> *traceEvents = nullptr;
  /// Graph Mode: run the entry's kernel dispatches with these native kernels
  /// instead of the ops they cover.
  const KernelLibrary *kernels = nullptr;
  /// Keep every value of the run here (by value id), for comparisons; values
  /// are then kept to the end instead of freed after their last use.
  std::vector<Tensor> *capturedValues = nullptr;
};

class PyNativeExecutor {
public:
  PyNativeExecutor(const Executable &executable, const Weights &weights,
                   Allocator &allocator);

  /// Runs `entryName` on `inputs` (moved in, so caches can be updated in
  /// place) and returns its outputs.
  StatusOr<std::vector<Tensor>> run(const std::string &entryName,
                                    std::vector<Tensor> inputs,
                                    const RunOptions &options = {});

  /// Zero-filled tensors of an entry's input types.
  StatusOr<std::vector<Tensor>> allocateInputs(const std::string &entryName);

private:
  Status runDispatch(const fb::Entry &entry, const fb::Dispatch &dispatch,
                     const KernelLibrary &kernels, std::vector<Tensor> &values);

  const Executable &executable_;
  const Weights &weights_;
  Allocator &allocator_;
  std::chrono::steady_clock::time_point start_;
};

/// Writes a tensor as a NumPy .npy file (f32 for float dtypes, i32 for ints).
Status writeNpy(const std::string &path, const Tensor &tensor);

} // namespace mfrt

#endif // MFC_RUNTIME_PYNATIVE_H
