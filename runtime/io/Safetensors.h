//===- Safetensors.h - reading and writing .safetensors ---------*- C++ -*-===//
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}),
// then the data. Files are untrusted: the header length, every offset and
// every size are checked against the file before anything is read.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_IO_SAFETENSORS_H
#define MFC_RUNTIME_IO_SAFETENSORS_H

#include "runtime/base/Status.h"
#include "runtime/base/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mfrt {

/// One tensor of a file: its type and where its bytes are in the file.
struct CheckpointEntry {
  DType dtype;
  Shape shape;
  size_t offset; ///< from the start of the data section
  size_t size;
  const uint8_t *data; ///< into the file's bytes
  bool joined = false; ///< data is a copy (a .ckpt tensor stored in slices)
};

/// Indices [begin, begin + length) along dimension `dim` of a tensor and
/// everything along the others: a sharded program's block of a weight.
/// With `parts` > 1 the dimension is that many equal parts (GPT-2's fused
/// q, k, v) and the block is [begin, begin + length) of each.
struct TensorBlock {
  int64_t dim = 0;
  int64_t begin = 0;
  int64_t length = 0;
  int64_t parts = 1;
};

/// A checkpoint file: named tensors over the file's mapped bytes. Reads
/// safetensors, and MindSpore's .ckpt files (MindSporeCheckpoint.cpp).
class CheckpointFile {
public:
  /// A `.ckpt` file is read as MindSpore's; any other as safetensors.
  static StatusOr<CheckpointFile> open(const std::string &path);
  /// Parses safetensors bytes already in memory (the fuzzer's entry point).
  static StatusOr<CheckpointFile> fromBytes(std::vector<uint8_t> bytes,
                                            const std::string &name);
  /// Parses MindSpore checkpoint bytes already in memory.
  static StatusOr<CheckpointFile> fromMindSporeBytes(std::vector<uint8_t> bytes,
                                                     const std::string &name);

  const std::map<std::string, CheckpointEntry> &tensors() const {
    return tensors_;
  }
  /// Copies a tensor's bytes into `into` (same element count; a float
  /// dtype other than the entry's is converted). A mapped file that became
  /// shorter since it was opened is an error, not a SIGBUS. With `block`,
  /// only that block of the tensor (one rank's shard) is read.
  Status read(const CheckpointEntry &entry, Tensor &into,
              const TensorBlock *block = nullptr) const;

  /// The tensor's bytes in the mapped file as a tensor of `dtype` and
  /// `shape`, without a copy, when they can serve as they are: the file is
  /// mapped, the dtype is the entry's, the bytes are aligned for it, and
  /// the block (if any) is one contiguous run. Otherwise nullopt (read()
  /// copies). The mapping is private: writes to the tensor (an optimizer
  /// step) stay in this process, the file is never written. The tensor
  /// keeps the mapping alive.
  std::optional<Tensor> view(const CheckpointEntry &entry, DType dtype,
                             const Shape &shape,
                             const TensorBlock *block = nullptr) const;

  /// Tells the system a tensor's bytes are no longer needed (a mapped
  /// file's pages leave this process's resident set; reading them again
  /// reads the file). Loading calls it after copying each tensor, so the
  /// peak is the weights, not the weights plus the file.
  void release(const CheckpointEntry &entry) const;

  /// The header's `__metadata__` strings.
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

private:
  /// A block of a tensor as runs of contiguous elements.
  struct BlockRuns {
    int64_t runs, runLength, stride, first;
  };
  StatusOr<BlockRuns> blockRuns(const CheckpointEntry &entry,
                                const TensorBlock *block) const;

  /// Parses the `size` bytes at `data`, which `storage` keeps alive.
  static StatusOr<CheckpointFile> parse(const uint8_t *data, size_t size,
                                        std::shared_ptr<const void> storage,
                                        const std::string &name);
  /// The same for a MindSpore checkpoint (MindSporeCheckpoint.cpp).
  static StatusOr<CheckpointFile>
  parseMindSpore(const uint8_t *data, size_t size,
                 std::shared_ptr<const void> storage, const std::string &name);

  std::shared_ptr<const void> storage_; // the file's bytes
  bool mapped_ = false;                 // storage_ is a file mapping
  std::string name_;                    // for errors
  std::map<std::string, CheckpointEntry> tensors_;
  /// Tensors a .ckpt stores in slices, joined (entries point into them).
  std::vector<std::vector<uint8_t>> joined_;
  std::map<std::string, std::string> metadata_;
};

/// Writes `tensors` (name -> tensor) and `metadata` strings to `path`
/// atomically (temp + rename).
/// The safetensors files `path` stands for: itself; for a Hugging Face
/// folder its model.safetensors or the shards its
/// model.safetensors.index.json lists; for an index, its shards (sorted,
/// each once, beside the index).
StatusOr<std::vector<std::string>> checkpointFiles(const std::string &path);

Status writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    const std::map<std::string, std::string> &metadata = {});

} // namespace mfrt

#endif // MFC_RUNTIME_IO_SAFETENSORS_H
