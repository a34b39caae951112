//===- SafetensorsFuzzer.cpp - fuzz the safetensors reader ----------------===//

#include "runtime/Safetensors.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  mfrt::StatusOr<mfrt::SafetensorsFile> file =
      mfrt::SafetensorsFile::fromBytes(std::move(bytes), "fuzz");
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
  return 0;
}
