//===- GraphExecutor.h - Graph Mode: kernels out of one arena ---*- C++ -*-===//
//
// Runs an entry's host program (runtime/HostProgram.h): each kernel dispatch
// calls a native kernel from the executable's library, its tiles spread over
// the thread pool; every other op runs its eager kernel. All transient
// values live in one arena per entry, allocated once, at the offsets the
// compiler planned; nothing is allocated per op. Outputs are copied out of
// the arena (KV caches, updated in place, are returned as they came in).
// What only the weights determine (casts of parameters, say, and the
// panels that kernels read weights as: runtime/PanelGemm.h) is computed
// once per change of the weights, not every run.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_GRAPHEXECUTOR_H
#define MFC_RUNTIME_GRAPHEXECUTOR_H

#include "runtime/Executor.h"
#include "runtime/HostProgram.h"
#include "runtime/KernelLibrary.h"
#include "runtime/ThreadPool.h"

#include <map>
#include <memory>

namespace mfrt {

/// One run at a time: an executor's arenas are its runs' working memory.
class GraphExecutor : public Executor {
public:
  /// OpenBLAS is made single-threaded: the pool runs matmul tiles in
  /// parallel instead.
  GraphExecutor(const Executable &executable, Weights &weights,
                Allocator &allocator, const KernelLibrary &kernels,
                ThreadPool &pool);

  StatusOr<std::vector<Tensor>> run(const std::string &entryName,
                                    std::vector<Tensor> inputs,
                                    const RunOptions &options = {}) override;

  /// For a process that runs only Graph Mode on these weights: a
  /// parameter that every entry reads only as kernels' panels is packed in
  /// its own storage (Weights::storedAsPanels) instead of into a copy, so
  /// the weights take their size once.
  void keepParametersAsPanels();

  /// Bytes of the arenas prepared so far.
  uint64_t arenaBytes() const override;
  uint64_t derivedBytes() const override;

private:
  /// A value derived from the weights alone, and the Weights version it was
  /// computed for; kept by how it follows from them (the same for every
  /// entry that computes it).
  struct Derived {
    Tensor tensor;
    uint64_t computedFor = ~uint64_t(0);
    /// A parameter's own storage, packed (keepParametersAsPanels).
    bool parameterItself = false;
  };
  /// A kernel dispatch's call: the kernel, its buffers in order, and where
  /// it is (for a kernel service's error).
  struct KernelCall {
    void *entry = nullptr;
    std::vector<void *> arguments;
    std::string where;
  };
  /// An entry ready to run: its program, arena, and its values, bound once
  /// where they do not change between runs (arena views, parameters,
  /// constants, reshapes of those); `bound` marks them. The other slots
  /// (inputs, outputs, views of them) are filled by a run and cleared after.
  struct Prepared {
    HostProgram program;
    std::shared_ptr<void> arena;
    std::vector<Tensor> values;
    std::vector<bool> bound;
    /// Per step: its kernel and arguments (a dispatch's tiles read them
    /// from here; the pointers change only when a buffer moves).
    std::vector<KernelCall> calls;
    /// The steps of values derived from the weights (program.derivedSteps)
    /// and where their results are kept.
    std::vector<std::pair<size_t, std::vector<Derived *>>> derivedSteps;
    /// Per step: the dispatch inputs it reads as panels (by position in
    /// its inputs) and where those are kept.
    std::vector<std::vector<std::pair<uint32_t, Derived *>>> panelInputs;
    /// The steps a run has work in: not eager ops whose results were bound
    /// at preparation (parameters, constants, reshapes of those: half of
    /// a decode step's ops). runStep and observeStep take only these.
    std::vector<uint32_t> workSteps;
    /// Every panel copy of the entry and the parameter value it packs.
    std::vector<std::pair<Derived *, uint32_t>> panelSources;
    // A step's scratch, kept to save allocations.
    std::vector<const Tensor *> operands;
  };
  StatusOr<Prepared *> prepare(const fb::Entry &entry);
  /// The panels (runtime/PanelGemm.h) of value `source` of a prepared
  /// entry, a 2-D weight that `key` names by how it follows from the
  /// weights (parameter `parameter`, or -1): shared by every entry; the
  /// parameter's own storage when keepParametersAsPanels() allows, else a
  /// copy that run() packs (listed in prepared.panelSources).
  StatusOr<Derived *> panelsOf(Prepared &prepared, uint32_t source,
                               const std::string &key, int64_t parameter);
  /// Whether an eager op's result was bound when its entry was prepared
  /// (a parameter, a constant, a reshape of either): it has no work.
  static bool boundWhenPrepared(const fb::Op &op, const Prepared &prepared);
  /// Runs step `index` of a prepared entry (a kernel dispatch or an eager
  /// op) on its values. A dispatch's tiles on other threads may still run
  /// when it returns if `deferred` (finishKernels() waits for them).
  Status runStep(const fb::Entry &entry, Prepared &prepared, size_t index,
                 bool deferred);
  /// Waits for the kernels' tiles; the first error a kernel service
  /// recorded, if any.
  Status finishKernels();
  /// Tiles [begin, end) of a dispatch (`context`: its KernelCall); a
  /// kernel service's error is attributed to the kernel here, on the
  /// thread that ran it.
  static void runKernelTiles(const void *context, int64_t begin,
                             int64_t end);
  /// Hands what step `index` computed (begun at `began`) to the debugging
  /// hooks `options` asks for.
  Status observeStep(const fb::Entry &entry, Prepared &prepared, size_t index,
                     std::chrono::steady_clock::time_point began,
                     const RunOptions &options);

  const KernelLibrary &kernels_;
  ThreadPool &pool_;
  std::map<std::string, std::unique_ptr<Prepared>> prepared_;
  std::map<std::string, Derived> derived_; // by how it follows
  /// Per parameter: read as stored by some entry (keepParametersAsPanels
  /// fills it; empty: every parameter keeps its stored layout).
  std::vector<bool> readAsStored_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_GRAPHEXECUTOR_H
