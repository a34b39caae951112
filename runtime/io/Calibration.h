//===- Calibration.h - activation ranges for static quantization -*- C++
//-*-===//
//
// What `mf-run --task calibrate` measures on a float model and a calibrated
// model's loading reads (docs/quantization.md): the range of every channel
// over the calibration's tokens of the input of each Linear weight, by its
// parameter name, and of the keys and values each attention reads (a KV
// cache's), by the attention's location and `.key` or `.value`. A
// safetensors file: `<name>.input_min` and `<name>.input_max`, F32 [K]
// each, and `__metadata__` {"format": "mfc-calibration", "tokens": N}.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_IO_CALIBRATION_H
#define MFC_RUNTIME_IO_CALIBRATION_H

#include "runtime/base/Status.h"
#include "runtime/base/Tensor.h"
#include "runtime/io/Safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mfrt {

struct Calibration {
  struct Ranges {
    std::vector<float> min, max; ///< per input channel
  };
  std::map<std::string, Ranges> byName;
  /// `name`'s ranges, or null.
  const Ranges *find(const std::string &name) const {
    auto it = byName.find(name);
    return it == byName.end() ? nullptr : &it->second;
  }
  int64_t tokens = 0; ///< the tokens they were measured on (written only)

  /// Reads a file `write` wrote; anything else (a checkpoint, ranges of
  /// different lengths, a min above its max) is an error naming it.
  static StatusOr<Calibration> read(const std::string &path);
  /// The same from an opened file (`path` for errors; the fuzzer's entry).
  static StatusOr<Calibration> fromFile(const CheckpointFile &file,
                                        const std::string &path);
  Status write(const std::string &path) const;
  /// Widens `name`'s ranges by every row of `rows` (a float dtype: rows of
  /// `channels` values, by default its last dimension); rows of another
  /// width are an error. A NaN widens nothing.
  Status record(const std::string &name, const Tensor &rows,
                int64_t channels = 0);
};

} // namespace mfrt

#endif // MFC_RUNTIME_IO_CALIBRATION_H
