//===- GridAxes.h - the device grid's axes, for both sides of model.bin -*- C++
//-*-===//
//
// A sharded program's device grid (upstream MLIR's shard.grid, model.bin's
// Executable.grid) has up to four axes, each present when a later one is:
// data_parallel, model_parallel, pipeline_stage, context_parallel. The
// compiler builds the grid and its collectives over these axes; the
// runtime reads which rank holds which part of the batch from them.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_SHAPES_GRIDAXES_H
#define MFC_SHAPES_GRIDAXES_H

#include <cstdint>
#include <string>

namespace mfshapes {

inline constexpr int16_t kDataAxis = 0, kModelAxis = 1, kPipelineAxis = 2,
                         kContextAxis = 3, kGridAxes = 4;

/// An axis's MindFormers name ("data_parallel", ...), or "axis N".
inline std::string gridAxisName(int64_t axis) {
  static const char *const names[] = {"data_parallel", "model_parallel",
                                      "pipeline_stage", "context_parallel"};
  return axis >= 0 && axis < kGridAxes ? names[axis]
                                       : "axis " + std::to_string(axis);
}

/// "data_parallel x model_parallel ...": the first `axes` axes' names.
inline std::string gridAxesText(int64_t axes) {
  std::string text;
  for (int64_t axis = 0; axis < axes; ++axis) {
    text += (axis ? " x " : "") + gridAxisName(axis);
  }
  return text;
}

/// The prefix of the entries of chunk `chunk` of pipeline stage `stage`:
/// "stage1_", or with interleaving (`chunks` > 1) "stage1_chunk0_". A
/// stage's update is "stage<s>_train_step" either way.
inline std::string stageEntryPrefix(int64_t stage, int64_t chunk,
                                    int64_t chunks) {
  std::string prefix = "stage" + std::to_string(stage) + "_";
  return chunks > 1 ? prefix + "chunk" + std::to_string(chunk) + "_" : prefix;
}

} // namespace mfshapes

#endif // MFC_SHAPES_GRIDAXES_H
