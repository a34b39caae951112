//===- SafetensorsFuzzer.cpp - fuzz the checkpoint readers ----------------===//
//
// The same bytes go to the safetensors reader (and what it reads to the
// calibration reader, which checks a file's ranges) and to the MindSpore
// .ckpt reader.
//

#include "runtime/io/Calibration.h"
#include "runtime/io/Safetensors.h"

#include <cstddef>
#include <cstdint>

namespace {
void readAll(const mfrt::StatusOr<mfrt::CheckpointFile> &file) {
  if (file) {
    // Read every byte the reader claims is a tensor (ASan checks the reads).
    uint8_t checksum = 0;
    for (const auto &[name, entry] : file->tensors()) {
      for (size_t i = 0; i < entry.size; ++i) {
        checksum ^= entry.data[i];
      }
    }
    [[maybe_unused]] static volatile uint8_t sink;
    sink = checksum;
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mfrt::StatusOr<mfrt::CheckpointFile> file = mfrt::CheckpointFile::fromBytes(
      std::vector<uint8_t>(data, data + size), "fuzz");
  readAll(file);
  if (file) {
    (void)mfrt::Calibration::fromFile(*file, "fuzz");
  }
  readAll(mfrt::CheckpointFile::fromMindSporeBytes(
      std::vector<uint8_t>(data, data + size), "fuzz.ckpt"));
  return 0;
}
