//===- Executor.h - what PyNative and Graph Mode have in common -*- C++ -*-===//

#ifndef MFC_RUNTIME_EXEC_EXECUTOR_H
#define MFC_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/format/Executable.h"
#include "runtime/hal/Allocator.h"
#include "runtime/hal/Communicator.h"
#include "runtime/io/Weights.h"
#include "runtime/kernels/Kernels.h"

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace mfrt {

/// What each routed layer's router did, summed over runs (mf-run
/// --moe-stats): the (token, choice) pairs each expert received and those
/// its capacity dropped, by the layer's model path.
struct MoeStats {
  struct Layer {
    std::vector<int64_t> received; ///< per expert
    int64_t runs = 0;              ///< the router's runs
    int64_t routed = 0;            ///< (token, choice) pairs
    int64_t dropped = 0;
  };
  std::map<std::string, Layer> layers;
};

/// What a debugging user can ask of a run.
struct RunOptions {
  /// Write every intermediate as DIR/<entry>.<index>.<model path>.npy.
  std::string dumpTensorsDir;
  /// Stop at the first op (or kernel) that produces a NaN or an infinity.
  bool checkNumerics = false;
  /// Append one Chrome-trace slice per op (or kernel) to this list.
  std::vector<std::string> *traceEvents = nullptr;
  /// Keep a copy of every value the run computes here (by value id), for
  /// comparisons.
  std::vector<Tensor> *capturedValues = nullptr;
  /// Count what every mf.moe_route decides here.
  MoeStats *moeStats = nullptr;
  /// Graph Mode: the rows every mf.dynamic_quantize or mf.quantize reads (a
  /// kernel's or a library op's input, or what its command computes them
  /// from: an int8 KV cache's keys before RoPE) taken from these values (by
  /// value id, another run's capturedValues) before it runs. --check so
  /// compares kernels that quantize on PyNative's rows: rows within
  /// tolerance can round a step the other way, which is no kernel's error.
  const std::vector<Tensor> *quantizedFrom = nullptr;
  /// PyNative: widen here the ranges of the rows each Linear weight (a
  /// parameter a matmul multiplies by transposed) multiplies, by the
  /// weight's name (mf-run --task calibrate).
  Calibration *calibration = nullptr;
};

/// Runs an executable's entries on one set of weights.
class Executor {
public:
  Executor(const Executable &executable, Weights &weights,
           Allocator &allocator);
  virtual ~Executor() = default;

  /// Runs `entryName` on `inputs` (moved in, so KV caches can be updated in
  /// place) and returns its outputs.
  virtual StatusOr<std::vector<Tensor>> run(const std::string &entryName,
                                            std::vector<Tensor> inputs,
                                            const RunOptions &options = {}) = 0;

  /// Bytes of static arenas this executor holds (Graph Mode).
  virtual uint64_t arenaBytes() const { return 0; }
  /// Bytes of the values derived from the weights it keeps (Graph Mode;
  /// allocated as tensors).
  virtual uint64_t derivedBytes() const { return 0; }

  /// The ranks a sharded program's collectives run over (mf-run's; not
  /// owned). Without one, a program with collectives fails at its first.
  void setCommunicator(Communicator *communicator) {
    communicator_ = communicator;
  }

  /// Zero-filled tensors of an entry's input types (of input `index`).
  StatusOr<std::vector<Tensor>> allocateInputs(const std::string &entryName);
  StatusOr<Tensor> allocateInput(const std::string &entryName, size_t index);

protected:
  /// The entry, after checking that `inputs` match its input types.
  StatusOr<const fb::Entry *> checkedEntry(const std::string &entryName,
                                           const std::vector<Tensor> &inputs);

  /// Does for `value`, just computed by `what` (an op kind or a kernel) at
  /// `location`, what `options` ask: NaN check, dump, trace slice (unless
  /// `traced` is false: a kernel's later outputs share its first's slice),
  /// capture.
  Status observe(const std::string &entryName, size_t index,
                 const std::string &what, const std::string &location,
                 uint32_t valueId, const Tensor &value,
                 std::chrono::steady_clock::time_point began,
                 const RunOptions &options, bool traced = true);

  /// Prepares what `options` need before a run of `entry`.
  Status beginRun(const fb::Entry &entry, const RunOptions &options);

  /// Runs one op of the eager library into `outputs` (one per result): a
  /// collective through the communicator, any other op's kernel.
  Status runOp(const fb::Op &op, const std::vector<const Tensor *> &inputs,
               const std::vector<Tensor *> &outputs,
               const ParallelFor &parallel = runSerially);

  const Executable &executable_;
  Weights &weights_; // entries that assign parameters update them
  Allocator &allocator_;
  Communicator *communicator_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

/// Whether a float tensor holds a NaN or an infinity.
bool hasNonFinite(const Tensor &tensor);

/// Writes a tensor as a NumPy .npy file (f32 for float dtypes, i32 for ints).
Status writeNpy(const std::string &path, const Tensor &tensor);

} // namespace mfrt

#endif // MFC_RUNTIME_EXEC_EXECUTOR_H
