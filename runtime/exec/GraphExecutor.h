//===- GraphExecutor.h - Graph Mode: kernels out of one arena ---*- C++ -*-===//
//
// Runs an entry's host program (runtime/format/HostProgram.h) as the compiler
// wrote it: each dispatch calls a native kernel from the executable's
// library, its tiles spread over the thread pool; each library command
// runs an op's eager kernel; a copy stores an assignment. Buffers are bound
// once where they do not change between runs (arena slices, parameters,
// constants, derived slots); inputs and outputs each run. Nothing is
// allocated per op. The initializer, which derives values from the
// weights into slots the entries share (given storage when first
// computed), runs when the weights change before an entry that reads one,
// as does packing the weights kernels read as panels
// (runtime/kernels/PanelGemm.h). In a process that runs only Graph Mode, what
// only the initializer reads is released once derived.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_EXEC_GRAPHEXECUTOR_H
#define MFC_RUNTIME_EXEC_GRAPHEXECUTOR_H

#include "runtime/exec/Executor.h"
#include "runtime/format/HostProgram.h"
#include "runtime/hal/KernelLibrary.h"
#include "runtime/hal/ThreadPool.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

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

  /// For a process that runs only Graph Mode on these weights, and no hook
  /// that observes the weights as stored: a parameter that only the
  /// initializer reads (to cast it to the compute dtype, say) is released
  /// as soon as every value derived from it is computed. The derived
  /// values replace it (Weights::release).
  void letDerivedValuesReplaceSources();

  /// Bytes of the arenas prepared so far.
  uint64_t arenaBytes() const override;
  uint64_t derivedBytes() const override;

private:
  /// Storage computed from the weights (a derived slot, a parameter's
  /// panels) and the Weights version it was computed for.
  struct Derived {
    Tensor tensor;
    uint64_t computedFor = ~uint64_t(0);
    /// A slot's type, its storage allocated only when a command first
    /// computes it (after what the weights it replaces let go).
    DType dtype = DType::F32;
    Shape shape;
    /// A parameter's own storage, packed (keepParametersAsPanels).
    bool parameterItself = false;
    /// A parameter's panels: how they are packed.
    PanelLayout layout = PanelLayout::Columns;
  };
  /// A dispatch's call: the kernel, its bindings' addresses and lengths in
  /// order (runtime/hal/KernelAbi.h), and where it is (for its errors).
  struct KernelCall {
    mfrt_kernel_v1 entry = nullptr;
    std::vector<void *> pointers;
    std::vector<uint64_t> lengths;
    std::string where;
    GraphExecutor *executor = nullptr;
  };
  /// An entry ready to run: its program, arena and buffers (those bound
  /// per run, inputs and outputs and views of them, are cleared after).
  struct Prepared {
    const HostProgram *program = nullptr; // the Executable's, verified at load
    std::shared_ptr<void> arena;
    std::vector<Tensor> buffers;
    /// Buffers rebound by each run: inputs, outputs, views of them.
    std::vector<uint32_t> perRun;
    /// Per command: its kernel call (dispatches), the panels it reads per
    /// panel binding, and the derived slots it computes (the initializer's).
    std::vector<KernelCall> calls;
    std::vector<std::vector<std::pair<uint32_t, Derived *>>> panels;
    std::vector<std::vector<Derived *>> computes;
    /// Every panel copy of the entry and the buffer (a parameter) it packs.
    std::vector<std::pair<Derived *, uint32_t>> panelSources;
    /// The buffers that are a derived slot or a view of one: slot, shape.
    std::vector<std::tuple<uint32_t, uint32_t, Shape>> slotBuffers;
    std::vector<const Tensor *> operands; // a command's scratch
    std::vector<Tensor *> results;        // a command's scratch
  };
  /// How every entry's host program reads each parameter.
  struct ParameterReads {
    bool assigned = false; ///< some entry writes parameters
    /// Bound other than as a kernel's panel input, or returned.
    std::vector<bool> asStored;
    /// Bound by an entry (not the initializer), as a panel input, or
    /// returned.
    std::vector<bool> outsideDerivations;
    /// The derived slots of the initializer's commands that read it.
    std::vector<std::set<uint32_t>> derivedInto;
  };
  ParameterReads parameterReads() const;
  /// Whether command `command` of `entry` reads a parameter of another
  /// pipeline stage (the initializer's derivations of them are theirs).
  bool readsParameterElsewhere(const fb::Entry &entry, size_t command) const;
  StatusOr<Prepared *> prepare(const fb::Entry &entry);
  /// The panels of parameter `parameter` (bound as buffer `source`),
  /// shared by every entry: the parameter's own storage when
  /// keepParametersAsPanels() allows, else a copy that run() packs.
  StatusOr<Derived *> panelsOf(Prepared &prepared, uint32_t source,
                               int64_t parameter, PanelLayout layout);
  /// RunOptions::quantizedFrom: the rows that command `index`'s
  /// mf.dynamic_quantize ops read, replaced by `values`' before it runs.
  void takeQuantizedRows(const fb::Entry &entry, Prepared &prepared,
                         size_t index, const std::vector<Tensor> &values);
  /// Runs command `index` of a prepared entry. A dispatch's tiles on other
  /// threads may still run when it returns if `deferred` (finishKernels()
  /// waits for them).
  Status runCommand(const fb::Entry &entry, Prepared &prepared, size_t index,
                    bool deferred);
  /// Waits for the kernels' tiles; the first status a kernel failed with,
  /// if any.
  Status finishKernels();
  /// Tiles [begin, end) of a dispatch (`context`: its KernelCall), on a
  /// thread of the pool.
  static void runKernelTiles(const void *context, int64_t begin, int64_t end);
  /// Keeps the first failure (a kernel's status, with what its service
  /// said on this thread) for finishKernels().
  void recordKernelFailure(const KernelCall &call, int32_t status);
  /// Runs the initializer (the executable's, if any) unless it ran for
  /// these weights: every derived slot, computed.
  Status initialize();
  /// Packs the panel copies `prepared` reads that are older than the
  /// weights.
  void packPanelCopies(Prepared &prepared);
  /// Allocates derived slot `slot` if it has no storage yet and binds it
  /// in every prepared entry.
  Status allocateSlot(uint32_t slot);
  /// Releases each parameter of releasable_ whose derived slots are all
  /// current (after the kernels that read it finish).
  Status releaseComputedSources();
  /// Hands what command `index` computed (begun at `began`) to the
  /// debugging hooks `options` asks for.
  Status observeCommand(const fb::Entry &entry, Prepared &prepared,
                        size_t index,
                        std::chrono::steady_clock::time_point began,
                        const RunOptions &options);

  const KernelLibrary &kernels_;
  ThreadPool &pool_;
  std::atomic<bool> kernelFailed_{false};
  std::mutex kernelFailureMutex_;
  Status kernelFailure_; // the first since finishKernels() took one
  std::map<const fb::Entry *, std::unique_ptr<Prepared>> prepared_;
  /// The Weights version the initializer last ran for.
  uint64_t initializedFor_ = ~uint64_t(0);
  std::vector<Derived> slots_;        // per derived slot
  std::map<int64_t, Derived> panels_; // per parameter
  /// Per parameter that only the initializer reads: the slots derived from
  /// it (letDerivedValuesReplaceSources).
  std::map<int64_t, std::vector<uint32_t>> releasable_;
  /// Per parameter: read as stored by some entry (keepParametersAsPanels
  /// fills it; empty: every parameter keeps its stored layout).
  std::vector<bool> readAsStored_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_EXEC_GRAPHEXECUTOR_H
