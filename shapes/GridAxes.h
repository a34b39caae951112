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

/// Where the parts of a pipelined model run. Interleaved stages take the
/// parts in turn: part k is chunk k / stages of stage k % stages. A V
/// (zero_bubble_v, 2 chunks) goes down the stages with chunk 0 and back up
/// with chunk 1: part stages + j is chunk 1 of stage stages - 1 - j, so
/// the first stage holds the model's first and last part.
struct PipelinePlace {
  int64_t stage, chunk;
};
inline PipelinePlace pipelinePlaceOf(int64_t part, int64_t stages,
                                     bool vShape) {
  int64_t chunk = part / stages, at = part % stages;
  return {vShape && chunk % 2 == 1 ? stages - 1 - at : at, chunk};
}
inline int64_t pipelinePartOf(int64_t stage, int64_t chunk, int64_t stages,
                              bool vShape) {
  return chunk * stages +
         (vShape && chunk % 2 == 1 ? stages - 1 - stage : stage);
}
/// Whether MindSpore's pipeline_scheduler `name` places chunks in a V.
inline bool isVShapedScheduler(const std::string &name) {
  return name == "zero_bubble_v";
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
