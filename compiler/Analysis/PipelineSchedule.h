//===- PipelineSchedule.h - the order of a pipeline's passes ----*- C++ -*-===//
//
// A pipelined training step runs m micro-batches through p stages. Each
// stage's ranks run a forward (F) and a backward (B) pass per micro-batch;
// the schedule is the order they run them in, fixed at compile time and
// written into model.bin, so the runtime only follows it.
//
// 1F1B (PipeDream-Flush; MindSpore's default pipeline schedule): stage s
// first runs min(p - s - 1, m) forwards (the warm-up), then alternates one
// forward and one backward, then runs the remaining backwards. A stage
// holds at most min(p - s, m) micro-batches between their F and B.
// GPipe (MindSpore's pipeline_scheduler "gpipe"): all forwards, then all
// backwards; a stage holds all m. Both idle (p - 1) / (m + p - 1) of a
// step with equal stages: 1F1B's gain is memory.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_ANALYSIS_PIPELINESCHEDULE_H
#define MFC_COMPILER_ANALYSIS_PIPELINESCHEDULE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mfc {

struct PipelineSlot {
  bool backward = false;
  int64_t microBatch = 0;
};

/// One stage's passes in order. The last stage's forward of a micro-batch
/// is part of its backward (one pass computes the loss and the
/// gradients), so its slots are backwards only.
struct StageSchedule {
  std::vector<PipelineSlot> slots;
  /// The most micro-batches between their forward and backward.
  int64_t inFlight = 0;
};

/// The schedulers built, by MindSpore's names (pipeline_scheduler).
inline constexpr const char *kPipelineSchedulers[] = {"1f1b", "gpipe"};

/// The schedule `scheduler` (one of kPipelineSchedulers) makes of `stages`
/// stages and `microBatches` micro-batches (both >= 1).
std::vector<StageSchedule> schedulePipeline(const std::string &scheduler,
                                            int64_t stages,
                                            int64_t microBatches);

/// The fraction of a step each stage idles under 1F1B or GPipe with equal
/// stages and a backward twice a forward: (p - 1) / (m + p - 1).
double bubbleFraction(int64_t stages, int64_t microBatches);

/// A stage's slots as text: "F0 F1 B0 F2 B1 B2"; beyond `limit` slots,
/// the first two thirds and the last third of them around "...".
std::string describe(const StageSchedule &stage, size_t limit = SIZE_MAX);

} // namespace mfc

#endif // MFC_COMPILER_ANALYSIS_PIPELINESCHEDULE_H
