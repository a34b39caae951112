//===- Executable.h - loading model.bin -------------------------*- C++ -*-===//
//
// model.bin is untrusted input: the flatbuffer verifier runs first, then
// semantic checks (version, op registry, value ids, SSA order, each op
// against its row of the registry (runtime/format/OpRegistry.h), parameter
// references, sizes with overflow checks). Shapes of each op are checked
// again by its kernel before it touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_FORMAT_EXECUTABLE_H
#define MFC_RUNTIME_FORMAT_EXECUTABLE_H

#include "runtime/base/Status.h"
#include "runtime/base/Tensor.h"
#include "runtime/format/OpRegistry.h"
#include "runtime/format/schemas/mf_executable_generated.h"
#include "shapes/GridAxes.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mfrt {

namespace fb = ::mfbin;

/// The format versions this runtime reads.
constexpr uint32_t kMinFormatVersion = 23;
constexpr uint32_t kMaxFormatVersion = 23;
/// The most micro-batches a pipeline schedule may have (MindFormers' own
/// configs use up to 256).
constexpr int64_t kMaxMicroBatches = 1 << 16;
/// pp_interleave_num's bound in model.bin (MindFormers bounds it by the
/// layers; no model has more).
constexpr int64_t kMaxPipelineChunks = 1 << 10;

/// The grid's axes (shapes/GridAxes.h).
using mfshapes::gridAxesText;
constexpr int64_t kDataAxis = mfshapes::kDataAxis,
                  kPipelineAxis = mfshapes::kPipelineAxis,
                  kContextAxis = mfshapes::kContextAxis;

/// The positions of each sequence one context-parallel rank holds (one run
/// of seq / ranks, or, with ModelInfo.context_blocks 2, Megatron's causal
/// load balance: blocks index and 2 ranks - 1 - index of 2 ranks): where
/// each run starts, and how long runs are.
struct ContextRuns {
  std::vector<int64_t> starts = {0};
  int64_t length = 0;

  /// The positions a rank holds of each sequence.
  int64_t positions() const {
    return length * static_cast<int64_t>(starts.size());
  }
  /// The sequence position of the rank's `i`-th position.
  int64_t positionOf(int64_t i) const {
    return starts[i / length] + i % length;
  }
};
/// Rank `index` of `ranks` context-parallel ranks' runs of a `model`'s
/// sequences (one rank: the whole sequence).
inline ContextRuns contextRunsOf(const fb::ModelInfo &model, int64_t index,
                                 int64_t ranks) {
  int64_t blocks = model.context_blocks() == 2 ? 2 : 1;
  ContextRuns runs;
  runs.length = model.seq_length() / (ranks * blocks);
  runs.starts = {index * runs.length};
  if (blocks == 2) {
    runs.starts.push_back((2 * ranks - 1 - index) * runs.length);
  }
  return runs;
}

/// The length of a flatbuffers vector, which an absent vector has as 0.
template <typename T> size_t sizeOf(const flatbuffers::Vector<T> *vector) {
  return vector ? vector->size() : 0;
}

/// Whether ops of `kind` only move data between ranks (run by the
/// Communicator, not by a kernel; vocabulary-parallel kernels communicate
/// too, through it).
inline bool isCollective(fb::OpKind kind) {
  return kind == fb::OpKind::AllReduce || kind == fb::OpKind::AllGather ||
         kind == fb::OpKind::ReduceScatter || kind == fb::OpKind::Scatter ||
         kind == fb::OpKind::AllToAll || kind == fb::OpKind::AllToAllOffsets ||
         kind == fb::OpKind::AllToAllDims || kind == fb::OpKind::ProcessIndex;
}

/// A collective's grid axes, or those a vocabulary-parallel op (Embedding,
/// CrossEntropy and their gradients) splits the vocabulary over. Empty when
/// the vocabulary is whole, and for other ops.
inline std::vector<int64_t> gridAxesOf(const fb::Op &op) {
  std::optional<const flatbuffers::Vector<int16_t> *> axes = gridAxesField(op);
  return axes && *axes ? std::vector<int64_t>((*axes)->begin(), (*axes)->end())
                       : std::vector<int64_t>{};
}

/// The grid axes a vocabulary-parallel op splits the vocabulary over
/// (empty: the vocabulary is whole, or `op` is not such an op).
inline std::vector<int64_t> vocabularyAxes(const fb::Op &op) {
  return isCollective(op.kind()) ? std::vector<int64_t>{} : gridAxesOf(op);
}

/// The dimension a collective other than AllReduce splits.
inline int64_t collectiveDimension(const fb::Op &op) {
  switch (op.kind()) {
  case fb::OpKind::AllGather:
    return op.attributes_as_AllGatherAttrs()->dimension();
  case fb::OpKind::ReduceScatter:
    return op.attributes_as_ReduceScatterAttrs()->dimension();
  case fb::OpKind::Scatter:
    return op.attributes_as_ScatterAttrs()->dimension();
  default:
    return -1;
  }
}

/// The parameter a Param reads or an Assign writes (the loader checks it).
inline int64_t parameterOf(const fb::Op &op) { return *parameterField(op); }

struct HostProgram;

/// The entries of `root`, then its initializer (the host program that
/// computes the derived slots) if it has one: every op-level program with
/// a host program to check or run.
std::vector<const fb::Entry *>
entriesAndInitializer(const fb::Executable &root);

/// The prompt tokens a prefill entry (role Prefill or PrefillRow) takes:
/// its ids' second dimension (the loader checks they are 1..seq_length);
/// -1 for other entries.
int64_t prefillTokensOf(const fb::Entry &entry);
/// The name an entry of its role has (in a model of `seq` positions and
/// pipeline `chunks`): prefill, prefill_<L>, prefill_row[_<L>], decode,
/// logits, forward_loss, ..., stage<s>[_chunk<c>]_forward, ...; empty when
/// its role and inputs fit no name. The loader refuses an entry named
/// otherwise, so the runtime's tasks may find entries by these names.
std::string entryNameOf(const fb::Entry &entry, int64_t seq, int64_t chunks);

/// A verified executable. Owns the file's bytes; the accessors read them.
class Executable {
public:
  /// Reads and verifies a file.
  static StatusOr<Executable> load(const std::string &path);
  /// Verifies bytes already in memory (the fuzzer's entry point).
  static StatusOr<Executable> fromBytes(std::vector<uint8_t> bytes,
                                        const std::string &name);

  const fb::Executable &root() const { return *root_; }
  /// The CRC-32 of the whole file (checked at load): ranks check they run
  /// the same one.
  uint64_t checksum() const;
  const fb::ModelInfo &model() const { return *root_->model(); }
  /// The entry called `name`, or null.
  const fb::Entry *entry(const std::string &name) const;
  /// `entry`'s host program (Graph Mode), or the initializer's
  /// (root().initializer()), verified at load; null when it has none.
  const HostProgram *hostProgram(const fb::Entry &entry) const;
  std::vector<std::string> entryNames() const;

  /// A pipelined program's schedule (the grid's axis 2 is the stage),
  /// else null.
  const fb::Pipeline *pipeline() const;
  /// Its stage count (1: not pipelined).
  int64_t pipelineStages() const;
  /// Its chunks a stage (pp_interleave_num; 1 without interleaving): chunk
  /// c of stage s is the model's part pipelinePartOf(s, c) (c * stages + s,
  /// or under zero_bubble_v chunk 1 back up the stages), whose entries are
  /// mfshapes::stageEntryPrefix(s, c, chunks) + "forward", ...
  int64_t pipelineChunks() const;
  /// Where its part `part` runs (chunk c of stage s), and back; the entry
  /// prefix of a part ("stage1_chunk0_"), and the entry that runs its
  /// backward (input_gradients when its weight gradients run apart, else
  /// accumulate_gradients).
  mfshapes::PipelinePlace pipelinePlaceOf(int64_t part) const;
  int64_t pipelinePartOf(int64_t stage, int64_t chunk) const;
  std::string pipelinePrefixOf(int64_t part) const;
  std::string pipelineBackwardOf(int64_t part) const;
  /// Whether the ranks of pipeline `stage` hold `parameter` (every rank
  /// holds every parameter of a program that is not pipelined).
  static bool holds(const fb::Parameter &parameter, int64_t stage);

  /// The tensor type of value `id` of `entry` (checked at load).
  static DType dtypeOf(const fb::TensorType &type);
  static Shape shapeOf(const fb::TensorType &type);
  /// Whether `type` is `dtype` of `shape`.
  static bool hasType(const fb::TensorType &type, DType dtype,
                      const Shape &shape);

private:
  /// fromBytes' checks; errors they do not classify are data loss.
  static StatusOr<Executable> verify(std::vector<uint8_t> bytes,
                                     const std::string &name);

  std::vector<uint8_t> bytes_;
  const fb::Executable *root_ = nullptr;
  std::vector<std::shared_ptr<const HostProgram>>
      hostPrograms_; // by entry, then the initializer's
};

} // namespace mfrt

#endif // MFC_RUNTIME_FORMAT_EXECUTABLE_H
