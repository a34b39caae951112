//===- Safetensors.cpp - reading and writing .safetensors -----------------===//

#include "runtime/io/Safetensors.h"

#include "runtime/base/FileIO.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <csetjmp>
#include <csignal>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mfrt;
using json = nlohmann::json;

namespace {

StatusOr<DType> parseDType(const std::string &name) {
  if (name == "F32") {
    return DType::F32;
  }
  if (name == "F16") {
    return DType::F16;
  }
  if (name == "BF16") {
    return DType::BF16;
  }
  if (name == "I32") {
    return DType::I32;
  }
  if (name == "I8") {
    return DType::I8;
  }
  return Status::error(StatusCode::Unimplemented,
                       "dtype '" + name +
                           "' is not supported (F32, F16, BF16, I32, I8 are)");
}

const char *dtypeTag(DType type) {
  switch (type) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I8:
    return "I8";
  }
  return "F32";
}

/// What a file that is not safetensors is, by its first bytes, and how to
/// get safetensors from it; nullopt when it is none of those.
std::optional<std::string> otherCheckpointFormat(const uint8_t *bytes,
                                                 size_t size,
                                                 const std::string &name) {
  auto endsWith = [&](const std::string &suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  };
  const std::string convert =
      "; convert it with python3: torch.load it and save the state dict with "
      "safetensors.torch.save_file";
  if (size >= 4 && std::memcmp(bytes, "PK\x03\x04", 4) == 0) {
    return "a PyTorch checkpoint (torch.save's zip archive), not safetensors" +
           convert;
  }
  if (size >= 2 && bytes[0] == 0x80 && bytes[1] >= 2 && bytes[1] <= 5) {
    return "a Python pickle (an older torch.save), not safetensors" + convert;
  }
  if (endsWith(".json") || (size >= 1 && bytes[0] == '{')) {
    return "a JSON file, not safetensors; for a sharded Hugging Face "
           "checkpoint give its model.safetensors.index.json's folder or the "
           "index itself to --weights, which follows its shards";
  }
  if (size >= 1 && bytes[0] == 0x0a) {
    return "not safetensors; if it is a MindSpore checkpoint (a protobuf "
           "starting with byte 0x0a, as this file does), give it a name "
           "ending in .ckpt";
  }
  return std::nullopt;
}

} // namespace

StatusOr<CheckpointFile> CheckpointFile::fromBytes(std::vector<uint8_t> bytes,
                                                   const std::string &name) {
  auto storage = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return parse(storage->data(), storage->size(), storage, name);
}

StatusOr<CheckpointFile>
CheckpointFile::parse(const uint8_t *bytes, size_t size,
                      std::shared_ptr<const void> storage,
                      const std::string &name) {
  auto fail = [&](const std::string &message) {
    return Status::error(StatusCode::DataLoss, "'" + name + "': " + message);
  };
  if (size < 8) {
    return fail("too short for a safetensors header (" + std::to_string(size) +
                " bytes)");
  }
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i) {
    headerSize = (headerSize << 8) | bytes[i];
  }
  if (headerSize > size - 8) {
    if (std::optional<std::string> other =
            otherCheckpointFormat(bytes, size, name)) {
      return fail(*other);
    }
    return fail("the header claims " + std::to_string(headerSize) +
                " bytes but the file has " + std::to_string(size - 8) +
                " after the length; the file is truncated or not safetensors");
  }
  // JSON keeps the last of two equal keys; a tensor named twice is an
  // error instead (which of the two did the writer mean?).
  std::set<std::string> names;
  std::string repeated;
  auto noteRepeats = [&](int depth, json::parse_event_t event, json &parsed) {
    if (depth == 1 && event == json::parse_event_t::key && repeated.empty() &&
        !names.insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  json header = json::parse(bytes + 8, bytes + 8 + headerSize, noteRepeats,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return fail("the header is not a JSON object");
  }
  if (!repeated.empty()) {
    return fail("the header names tensor '" + repeated +
                "' twice; the file is corrupt (rewrite it)");
  }
  CheckpointFile file;
  size_t dataSize = size - 8 - headerSize;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto &[tensorName, info] : header.items()) {
    if (tensorName == "__metadata__") {
      if (info.is_object()) {
        for (auto &[key, value] : info.items()) {
          if (value.is_string()) {
            file.metadata_[key] = value.get<std::string>();
          }
        }
      }
      continue;
    }
    std::string where = "tensor '" + tensorName + "'";
    if (!info.is_object() || !info.contains("dtype") ||
        !info["dtype"].is_string() || !info.contains("shape") ||
        !info["shape"].is_array() || !info.contains("data_offsets") ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      return fail(where + " needs dtype, shape and data_offsets [begin, end]");
    }
    StatusOr<DType> dtype = parseDType(info["dtype"].get<std::string>());
    if (!dtype) {
      return fail(where + ": " + dtype.status().message());
    }
    Shape shape;
    for (const json &dim : info["shape"]) {
      if (!dim.is_number_unsigned()) {
        return fail(where + " has a shape entry that is not a size");
      }
      shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    }
    StatusOr<int64_t> count = checkedElementCount(shape);
    if (!count) {
      return fail(where + ": " + count.status().message());
    }
    const json &offsets = info["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return fail(where + " has data_offsets that are not sizes");
    }
    uint64_t begin = offsets[0].get<uint64_t>(),
             end = offsets[1].get<uint64_t>();
    uint64_t expected = static_cast<uint64_t>(*count) * dtypeSize(*dtype);
    if (begin > end || end > dataSize || end - begin != expected) {
      return fail(where + " has data_offsets [" + std::to_string(begin) + ", " +
                  std::to_string(end) + ") but needs " +
                  std::to_string(expected) + " bytes within the " +
                  std::to_string(dataSize) + " data bytes");
    }
    ranges.emplace_back(begin, end);
    file.tensors_[tensorName] = {*dtype, shape, static_cast<size_t>(begin),
                                 static_cast<size_t>(expected), nullptr};
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return fail("two tensors' data_offsets overlap");
    }
  }
  file.storage_ = std::move(storage);
  file.name_ = name;
  const uint8_t *base = bytes + 8 + headerSize;
  for (auto &[tensorName, entry] : file.tensors_) {
    entry.data = base + entry.offset;
  }
  return file;
}

namespace {

/// Where a SIGBUS while this thread reads a mapped file jumps back to.
thread_local sigjmp_buf *readingMapping = nullptr;

/// The mapped weight files, for the SIGBUS a file that shrinks under a
/// running model raises when a kernel reads a parameter served in place:
/// reported by name instead of a bare crash.
struct MappedFile {
  std::atomic<uintptr_t> begin{0};
  uintptr_t end = 0;
  char name[240] = {};
};
constexpr size_t kMaxMappedFiles = 256;
MappedFile mappedFiles[kMaxMappedFiles];
std::mutex mappedFilesLock;

void writeString(const char *text) {
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void onBusError(int signal, siginfo_t *info, void *) {
  if (readingMapping) {
    siglongjmp(*readingMapping, 1);
  }
  uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const MappedFile &file : mappedFiles) {
    uintptr_t begin = file.begin.load(std::memory_order_acquire);
    if (begin != 0 && address >= begin && address < file.end) {
      // Async-signal-safe: write(2) and _exit(2) only.
      writeString("error: weights file '");
      writeString(file.name);
      writeString("' became shorter while its tensors were in use "
                  "(truncated or rewritten in place?); parameters are read "
                  "in place from the file, so keep it unchanged while a run "
                  "uses it (write new weights to another file)\n");
      _exit(1);
    }
  }
  std::signal(signal, SIG_DFL); // not ours: the default, a crash
  std::raise(signal);
}

void registerMapping(const void *begin, size_t size, const std::string &name) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction handler = {};
    handler.sa_sigaction = onBusError;
    handler.sa_flags = SA_SIGINFO;
    sigemptyset(&handler.sa_mask);
    sigaction(SIGBUS, &handler, nullptr);
  });
  std::lock_guard<std::mutex> lock(mappedFilesLock);
  for (MappedFile &file : mappedFiles) {
    if (file.begin.load(std::memory_order_relaxed) == 0) {
      std::snprintf(file.name, sizeof(file.name), "%s", name.c_str());
      file.end = reinterpret_cast<uintptr_t>(begin) + size;
      file.begin.store(reinterpret_cast<uintptr_t>(begin),
                       std::memory_order_release);
      return;
    }
  }
  // More files than slots: a fault in this one is a plain SIGBUS.
}

void unregisterMapping(const void *begin) {
  std::lock_guard<std::mutex> lock(mappedFilesLock);
  for (MappedFile &file : mappedFiles) {
    if (file.begin.load(std::memory_order_relaxed) ==
        reinterpret_cast<uintptr_t>(begin)) {
      file.begin.store(0, std::memory_order_release);
      return;
    }
  }
}

} // namespace

StatusOr<CheckpointFile> CheckpointFile::open(const std::string &path) {
  // O_NONBLOCK: a FIFO is refused below instead of waiting for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::error(codeOfErrno(errno), "cannot open weights '" + path +
                                                 "': " + std::strerror(errno));
  }
  struct stat info;
  bool known = fstat(fd, &info) == 0;
  if (!known || !S_ISREG(info.st_mode)) {
    bool directory = known && S_ISDIR(info.st_mode);
    ::close(fd);
    return Status::error(
        StatusCode::InvalidArgument,
        "cannot read weights '" + path +
            "': " + (directory ? "a directory" : "not a regular file") +
            "; pass a .safetensors file");
  }
  size_t size = static_cast<size_t>(info.st_size);
  bool mindSpore =
      path.size() >= 5 && path.compare(path.size() - 5, 5, ".ckpt") == 0;
  if (size == 0) {
    ::close(fd);
    return mindSpore ? fromMindSporeBytes({}, path) : fromBytes({}, path);
  }
  // Mapped, read ahead in order (a page fault costs ~12 us on this kind of
  // machine; the kernel maps file pages 16 at a time) and released tensor
  // by tensor as loading copies them.
  // Writable and private: a parameter served from the file (view()) may be
  // updated in place by training; its pages are then this process's copy.
  void *mapped =
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) {
    return Status::error(codeOfErrno(errno), "cannot map weights '" + path +
                                                 "': " + std::strerror(errno));
  }
  madvise(mapped, size, MADV_SEQUENTIAL);
  madvise(mapped, size, MADV_WILLNEED);
  registerMapping(mapped, size, path);
  std::shared_ptr<const void> storage(mapped, [size](const void *block) {
    unregisterMapping(block);
    munmap(const_cast<void *>(block), size);
  });
  StatusOr<CheckpointFile> file =
      mindSpore ? parseMindSpore(static_cast<const uint8_t *>(mapped), size,
                                 std::move(storage), path)
                : parse(static_cast<const uint8_t *>(mapped), size,
                        std::move(storage), path);
  if (file) {
    file->mapped_ = true;
  }
  return file;
}

/// The block (the whole tensor without one) as `runs` runs of `runLength`
/// contiguous elements, `stride` apart, from element `first`.
StatusOr<CheckpointFile::BlockRuns>
CheckpointFile::blockRuns(const CheckpointEntry &entry,
                          const TensorBlock *block) const {
  int64_t elements = static_cast<int64_t>(entry.size / dtypeSize(entry.dtype));
  if (!block) {
    return BlockRuns{1, elements, elements, 0};
  }
  // Each part is `extent` long: its runs are the block's.
  int64_t dim = block->dim;
  if (block->parts < 1 || dim < 0 ||
      static_cast<size_t>(dim) >= entry.shape.size() ||
      entry.shape[dim] % block->parts != 0) {
    return Status::error(StatusCode::Internal,
                         "'" + name_ + "': a tensor of " +
                             formatShape(entry.shape) + " read in " +
                             std::to_string(block->parts) + " parts");
  }
  int64_t extent = entry.shape[dim] / block->parts;
  if (block->begin < 0 || block->length < 0 ||
      block->begin + block->length > extent) {
    return Status::error(StatusCode::Internal,
                         "'" + name_ + "': a block outside a tensor of " +
                             formatShape(entry.shape));
  }
  int64_t inner = 1;
  for (size_t d = dim + 1; d < entry.shape.size(); ++d) {
    inner *= entry.shape[d];
  }
  return BlockRuns{extent == 0 || inner == 0 ? 0 : elements / (extent * inner),
                   block->length * inner, extent * inner, block->begin * inner};
}

Status CheckpointFile::read(const CheckpointEntry &entry, Tensor &into,
                            const TensorBlock *block) const {
  StatusOr<BlockRuns> layout = blockRuns(entry, block);
  if (!layout) {
    return layout.status();
  }
  int64_t runs = layout->runs, runLength = layout->runLength,
          stride = layout->stride, first = layout->first;
  if (into.numElements() != runs * runLength) {
    return Status::error(StatusCode::Internal, "'" + name_ + "': a tensor of " +
                                                   formatShape(entry.shape) +
                                                   " read into " +
                                                   formatShape(into.shape()));
  }
  // A float tensor of another dtype goes through f32 (allocated first: no
  // allocation while the handler may jump).
  std::vector<float> widened;
  if (entry.dtype != into.dtype()) {
    widened.resize(into.numElements());
  }
  size_t sourceSize = dtypeSize(entry.dtype),
         intoSize = dtypeSize(into.dtype());
  auto copy = [&] {
    for (int64_t run = 0; run < runs; ++run) {
      const uint8_t *from = entry.data + (run * stride + first) * sourceSize;
      if (widened.empty()) {
        std::memcpy(static_cast<uint8_t *>(into.data()) +
                        run * runLength * intoSize,
                    from, runLength * sourceSize);
      } else {
        Tensor source(
            entry.dtype, {runLength},
            std::shared_ptr<void>(const_cast<uint8_t *>(from), [](void *) {}));
        source.loadFloats(widened.data() + run * runLength);
      }
    }
    if (!widened.empty()) {
      into.storeFloats(widened.data());
    }
  };
  if (!mapped_) {
    copy();
    return Status::ok();
  }
  // A mapped file that shrinks under us (truncated or rewritten in place)
  // faults with SIGBUS on the missing pages: an error, not a crash.
  struct sigaction handler = {}, previous = {};
  handler.sa_sigaction = onBusError;
  handler.sa_flags = SA_SIGINFO;
  sigemptyset(&handler.sa_mask);
  sigaction(SIGBUS, &handler, &previous);
  sigjmp_buf back;
  readingMapping = &back;
  bool faulted = sigsetjmp(back, 1) != 0;
  if (!faulted) {
    copy();
  }
  readingMapping = nullptr;
  sigaction(SIGBUS, &previous, nullptr);
  if (faulted) {
    return Status::error(StatusCode::DataLoss,
                         "'" + name_ +
                             "' became shorter while it was read (truncated or "
                             "rewritten?); load it again once it is complete");
  }
  return Status::ok();
}

std::optional<Tensor> CheckpointFile::view(const CheckpointEntry &entry,
                                           DType dtype, const Shape &shape,
                                           const TensorBlock *block) const {
  size_t elementSize = dtypeSize(dtype);
  if (!mapped_ || entry.joined || entry.dtype != dtype ||
      reinterpret_cast<uintptr_t>(entry.data) % elementSize != 0) {
    return std::nullopt;
  }
  // One contiguous run of exactly the tensor's elements.
  StatusOr<BlockRuns> layout = blockRuns(entry, block);
  StatusOr<int64_t> elements = checkedElementCount(shape);
  if (!layout || !elements || layout->runs != 1 ||
      layout->runLength != *elements || *elements == 0) {
    return std::nullopt;
  }
  // The file's bytes, shared with the mapping's owner (aliasing).
  std::shared_ptr<void> storage(std::const_pointer_cast<void>(storage_),
                                const_cast<uint8_t *>(entry.data) +
                                    layout->first * elementSize);
  return Tensor(dtype, shape, std::move(storage));
}

void CheckpointFile::release(const CheckpointEntry &entry) const {
  if (!mapped_ || entry.size == 0 || entry.joined) {
    return;
  }
  // Whole pages inside the tensor only: its neighbours may still be read.
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(entry.data);
  uintptr_t first = (begin + page - 1) / page * page;
  uintptr_t last = (begin + entry.size) / page * page;
  if (last > first) {
    madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
  }
}

Status mfrt::writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  size_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    header[name] = {{"dtype", dtypeTag(tensor->dtype())},
                    {"shape", tensor->shape()},
                    {"data_offsets", {offset, offset + tensor->byteSize()}}};
    offset += tensor->byteSize();
  }
  json meta = {{"format", "pt"}, {"writer", "mfc"}};
  for (const auto &[key, value] : metadata) {
    meta[key] = value;
  }
  header["__metadata__"] = meta;
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) {
    text += ' '; // keeps the data 8-byte aligned, as the format recommends
  }
  return writeFileAtomically(path, "weights", [&](FileWriter &out) {
    uint8_t size[8];
    for (int i = 0; i < 8; ++i) {
      size[i] = static_cast<uint8_t>((text.size() >> (8 * i)) & 0xff);
    }
    out.write(size, 8);
    out.write(text);
    for (const auto &[name, tensor] : tensors) {
      out.write(tensor->data(), tensor->byteSize());
    }
    return Status::ok();
  });
}

StatusOr<std::vector<std::string>>
mfrt::checkpointFiles(const std::string &path) {
  struct stat info;
  std::string index = path;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    index = path + "/model.safetensors.index.json";
    if (::stat(index.c_str(), &info) != 0) {
      std::string single = path + "/model.safetensors";
      if (::stat(single.c_str(), &info) != 0) {
        return Status::error(StatusCode::NotFound,
                             "folder '" + path +
                                 "' has neither model.safetensors nor "
                                 "model.safetensors.index.json");
      }
      return std::vector<std::string>{single};
    }
  } else if (path.size() < 11 ||
             path.compare(path.size() - 11, 11, ".index.json") != 0) {
    return std::vector<std::string>{path};
  }
  StatusOr<std::vector<uint8_t>> bytes =
      readRegularFile(index, "checkpoint index", 64ull << 20);
  if (!bytes) {
    return bytes.status();
  }
  json parsed = json::parse(bytes->begin(), bytes->end(), nullptr,
                            /*allow_exceptions=*/false);
  const json *map = nullptr;
  if (parsed.is_object()) {
    auto found = parsed.find("weight_map");
    map = found != parsed.end() && found->is_object() ? &*found : nullptr;
  }
  if (!map) {
    return Status::error(StatusCode::DataLoss,
                         "'" + index +
                             "': expected a JSON object with a "
                             "weight_map of tensor name: shard file");
  }
  std::set<std::string> shards;
  for (auto item = map->begin(); item != map->end(); ++item) {
    const json &shard = item.value();
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        shard.get<std::string>().find_first_of(std::string("/\0", 2)) !=
            std::string::npos) {
      return Status::error(StatusCode::DataLoss,
                           "'" + index + "': weight_map['" + item.key() +
                               "'] must name a shard file beside the index");
    }
    shards.insert(shard.get<std::string>());
  }
  if (shards.empty()) {
    return Status::error(StatusCode::DataLoss,
                         "'" + index + "': the weight_map is empty");
  }
  std::string folder = index.substr(0, index.find_last_of('/') + 1);
  std::vector<std::string> files;
  // The index and the shards must agree: a tensor is taken from the shard
  // the index names, so one the index names elsewhere, or one it names in
  // a shard that lacks it, is an error (the loader would silently take the
  // tensor from whichever shard has it).
  std::map<std::string, std::string> shardOf;
  for (auto item = map->begin(); item != map->end(); ++item) {
    shardOf[item.key()] = item.value().get<std::string>();
  }
  std::set<std::string> present;
  for (const std::string &shard : shards) {
    files.push_back(folder + shard);
    StatusOr<CheckpointFile> file = CheckpointFile::open(files.back());
    if (!file) {
      return file.status().withContext("'" + index + "' names shard '" + shard +
                                       "'");
    }
    for (const auto &[name, entry] : file->tensors()) {
      auto named = shardOf.find(name);
      if (named == shardOf.end() || named->second != shard) {
        return Status::error(
            StatusCode::DataLoss,
            "'" + index + "': shard '" + shard + "' holds tensor '" + name +
                "', which the index puts " +
                (named == shardOf.end() ? std::string("in no shard")
                                        : "in '" + named->second + "'"));
      }
      present.insert(name);
    }
  }
  for (const auto &[name, shard] : shardOf) {
    if (!present.count(name)) {
      return Status::error(StatusCode::DataLoss,
                           "'" + index + "': the index puts tensor '" + name +
                               "' in shard '" + shard +
                               "', which does not hold it");
    }
  }
  return files;
}
