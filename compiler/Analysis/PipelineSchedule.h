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
// Interleaved 1F1B (pp_interleave_num v > 1; Narayanan et al. 2021,
// Megatron-LM's forward_backward_pipelining_with_interleaving, without its
// every-forward-first case for m = p): each
// stage's layers come in v chunks, chunk c of stage s being the model's
// part c * p + s, so a micro-batch passes every stage v times. Stage s
// runs its m * v forwards in groups of p micro-batches, chunk by chunk
// (chunk 0 of micro-batches 0..p-1, chunk 1 of them, ..., then the next
// p), its backwards alike from the last chunk down; it warms up with
// (p - s - 1) * 2 + (v - 1) * p forwards. The bubble shrinks v-fold,
// (p - 1) / (v m + p - 1), for more micro-batches in flight and v times
// the messages. m must be a multiple of p.
//
// ZB-V (MindSpore's zero_bubble_v; Qi et al., "Zero Bubble Pipeline
// Parallelism", 2024): 2 chunks a stage placed in a V (chunk 0 down the
// stages, chunk 1 back up, so stage 0 holds the first and the last part),
// and each backward split into B (the input's gradient, which the part
// before waits for) and W (the weights' gradients, which nothing waits
// for; mf-split-weight-gradients). The order is found by simulating the
// stages with F, B and W of equal cost: a free stage runs a ready B, else
// a ready F while it keeps fewer than 2p chunk passes (1F1B's memory),
// else a pending W, so that the Ws fill what would be bubbles.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_ANALYSIS_PIPELINESCHEDULE_H
#define MFC_COMPILER_ANALYSIS_PIPELINESCHEDULE_H

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mfc {

struct PipelineSlot {
  bool backward = false;
  int64_t microBatch = 0;
  /// The stage's interleave chunk (0 without interleaving).
  int64_t chunk = 0;
  /// A backward's weight gradients alone (W; zero-bubble schedules).
  bool weight = false;
};

/// One stage's passes in order. The forward of a micro-batch through the
/// model's last part (the last stage's last chunk) is part of its backward
/// (one pass computes the loss and the gradients), so it has no F slot.
struct StageSchedule {
  std::vector<PipelineSlot> slots;
  /// The most micro-batch passes between their forward and backward (over
  /// all chunks): the inputs its ranks keep.
  int64_t inFlight = 0;
  /// pp_interleave_num: slots name their chunk when it is above 1.
  int64_t chunks = 1;
};

/// The schedulers built, by MindSpore's names (pipeline_scheduler).
inline constexpr const char *kPipelineSchedulers[] = {"1f1b", "gpipe",
                                                      "zero_bubble_v"};

/// The schedule `scheduler` (one of kPipelineSchedulers) makes of `stages`
/// stages of `chunks` chunks each and `microBatches` micro-batches (all >=
/// 1; with chunks > 1 under 1f1b a multiple of `stages`; zero_bubble_v
/// takes 2 chunks and at least 2 stages).
std::vector<StageSchedule> schedulePipeline(const std::string &scheduler,
                                            int64_t stages,
                                            int64_t microBatches,
                                            int64_t chunks = 1);

/// The fraction of a step each stage idles with equal stages: 1F1B, GPipe
/// and interleaved 1F1B (a backward twice a forward) (p - 1) / (v m + p -
/// 1), v the chunks; zero_bubble_v as its simulation finds it (F, B and W
/// of equal cost).
double bubbleFraction(const std::string &scheduler, int64_t stages,
                      int64_t microBatches, int64_t chunks = 1);

/// Where each stage's slots fall in time when the ranks run a schedule: a
/// forward takes 1 unit, a backward 2 (the model's last part's 1 more: its
/// forward); under zero_bubble_v a split backward's B and W 1 each. A slot
/// starts when its stage is free and what it waits for has ended (the part
/// before's forward, the part after's backward; messages take no time).
struct Timeline {
  /// Per stage, per slot: its start and its length in units.
  std::vector<std::vector<int64_t>> starts, lengths;
  int64_t length = 0; ///< when the last slot ends
  /// The fraction of the stages' time they wait.
  double idle() const;
};
Timeline simulateTimeline(const std::string &scheduler,
                          const std::vector<StageSchedule> &schedule);

/// The same run with each pass's own length (a stage's forward and
/// backward take their FLOPs' and collectives' time) and a message's
/// between two parts on different stages (0 for the turn of a V, handed
/// over in memory): when the step's last pass ends and each stage's busy
/// time, in the lengths' unit.
struct TimedStep {
  double length = 0;
  std::vector<double> busy;
};
TimedStep simulateStepTimes(
    const std::string &scheduler, const std::vector<StageSchedule> &schedule,
    llvm::function_ref<double(int64_t stage, const PipelineSlot &slot,
                              bool lastPart, bool split)>
        passLength,
    llvm::function_ref<double(int64_t fromPart, int64_t toPart)> messageLength);

/// The most a stage keeps at once under its schedule, given per chunk what
/// a micro-batch in flight keeps from its forward to its backward, what a
/// split backward's W takes from its B on (0 unless split), and whether
/// the chunk is the model's last part (whose forward runs in its
/// backward, keeping nothing between).
int64_t peakKeptBytes(const StageSchedule &stage,
                      const std::vector<int64_t> &keptBytes,
                      const std::vector<int64_t> &weightKeptBytes,
                      const std::vector<bool> &lastPart);

/// Stage `stage`'s row of `timeline` as text, one `width`-character cell a
/// unit: a slot's name ("F0", "B3.1") in its first unit, '-' in the rest,
/// '.' where the stage waits.
std::string drawTimeline(const Timeline &timeline,
                         const std::vector<StageSchedule> &schedule,
                         size_t stage, size_t width);

/// A stage's slots as text: "F0 F1 B0 F2 B1 B2" (with chunks, micro-batch
/// then chunk: "F0.0 F1.0 F0.1 ..."; W a weight-gradient pass); beyond
/// `limit` slots, the first two thirds and the last third of them around
/// "...".
std::string describe(const StageSchedule &stage, size_t limit = SIZE_MAX);

} // namespace mfc

#endif // MFC_COMPILER_ANALYSIS_PIPELINESCHEDULE_H
