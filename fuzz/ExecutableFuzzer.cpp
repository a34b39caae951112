//===- ExecutableFuzzer.cpp - fuzz the model.bin loader -------------------===//
//
// Any byte string must load cleanly or be rejected with an error; one that
// loads must run its entry points without touching memory it does not own.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executable.h"
#include "runtime/PyNative.h"
#include "runtime/Weights.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  mfrt::StatusOr<mfrt::Executable> executable =
      mfrt::Executable::fromBytes(std::move(bytes), "fuzz");
  if (!executable) {
    return 0;
  }
  // Keep runs cheap: only small models are executed.
  int64_t values = 0;
  if (executable->root().parameters()) {
    for (const auto *parameter : *executable->root().parameters()) {
      values += *mfrt::checkedElementCount(
          mfrt::Executable::shapeOf(*parameter->type()));
    }
  }
  if (values > (1 << 20)) {
    return 0;
  }
  mfrt::Allocator allocator;
  mfrt::StatusOr<mfrt::Weights> weights =
      mfrt::Weights::initialize(*executable, allocator, 0);
  if (!weights) {
    return 0;
  }
  mfrt::PyNativeExecutor executor(*executable, *weights, allocator);
  for (const std::string &name : executable->entryNames()) {
    auto inputs = executor.allocateInputs(name);
    if (inputs) {
      (void)executor.run(name, inputs.take());
    }
  }
  return 0;
}
