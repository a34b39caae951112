//===- ExecutableFuzzer.cpp - fuzz the model.bin loader -------------------===//
//
// Any byte string must load cleanly or be rejected with an error; one that
// loads must run its entry points, in PyNative and in Graph Mode, without
// touching memory it does not own.
//
// Inputs that pass the flatbuffer verifier are sealed again (their content
// checksum recomputed) so that mutations reach the checks behind it. Graph
// Mode runs the kernels' machine code, which no loader can tell from a
// mutated copy: it runs only libraries whose CRC-32 is listed in the file
// named by MFC_FUZZ_TRUSTED_KERNELS (scripts/fuzz.sh lists the seeds').
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/GraphExecutor.h"
#include "runtime/exec/PyNative.h"
#include "runtime/format/ContentChecksum.h"
#include "runtime/format/Executable.h"
#include "runtime/hal/KernelLibrary.h"
#include "runtime/hal/ThreadPool.h"
#include "runtime/io/Weights.h"
#include "runtime/kernels/KernelServices.h"

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>

namespace {

const std::set<uint32_t> &trustedKernels() {
  static const std::set<uint32_t> trusted = [] {
    std::set<uint32_t> crcs;
    if (const char *path = std::getenv("MFC_FUZZ_TRUSTED_KERNELS")) {
      std::ifstream list(path);
      uint32_t crc;
      while (list >> std::hex >> crc) {
        crcs.insert(crc);
      }
    }
    return crcs;
  }();
  return trusted;
}

bool runsTrustedKernels(const mfrt::Executable &executable) {
  const auto *library = executable.root().kernel_library();
  if (!library) {
    return false;
  }
  uint32_t crc = static_cast<uint32_t>(
      crc32_z(crc32_z(0, nullptr, 0), library->data(), library->size()));
  return trustedKernels().count(crc) != 0;
}

template <typename ExecutorT>
void runEveryEntry(const mfrt::Executable &executable, ExecutorT &executor) {
  for (const std::string &name : executable.entryNames()) {
    auto inputs = executor.allocateInputs(name);
    if (inputs) {
      (void)executor.run(name, inputs.take());
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (bytes.size() >= 8 && mfbin::ExecutableBufferHasIdentifier(bytes.data()) &&
      mfbin::VerifyExecutableBuffer(verifier)) {
    mfrt::sealContentChecksum(bytes.data(), bytes.size());
  }
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
  {
    mfrt::PyNativeExecutor executor(*executable, *weights, allocator);
    runEveryEntry(*executable, executor);
  }
  if (runsTrustedKernels(*executable)) {
    mfrt::StatusOr<mfrt::KernelLibrary> kernels =
        mfrt::KernelLibrary::load(*executable, mfrt::kernelServices());
    if (kernels) {
      static mfrt::ThreadPool pool(2);
      mfrt::GraphExecutor executor(*executable, *weights, allocator, *kernels,
                                   pool);
      runEveryEntry(*executable, executor);
    }
  }
  return 0;
}
