//===- PyNative.h - op-by-op execution --------------------------*- C++ -*-===//
//
// Interprets an entry's op-level program: each op's result is allocated
// from the caching allocator, computed by its eager kernel, and every value
// is released after its last use. Parameters and reshapes are views, and a
// KV-cache write updates its cache in place when nothing else holds it.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_EXEC_PYNATIVE_H
#define MFC_RUNTIME_EXEC_PYNATIVE_H

#include "runtime/exec/Executor.h"

namespace mfrt {

class PyNativeExecutor : public Executor {
public:
  using Executor::Executor;

  StatusOr<std::vector<Tensor>> run(const std::string &entryName,
                                    std::vector<Tensor> inputs,
                                    const RunOptions &options = {}) override;
};

} // namespace mfrt

#endif // MFC_RUNTIME_EXEC_PYNATIVE_H
