//===- BatchGenerator.cpp - continuous batching over a compiled model -----===//

#include "runtime/session/BatchGenerator.h"

#include <algorithm>
#include <cstring>
#include <limits>

using namespace mfrt;

BatchGenerator::BatchGenerator(const Executable &executable, Executor &executor,
                               int64_t maxBatchedTokens, RunOptions runOptions)
    : executor_(executor), runOptions_(std::move(runOptions)),
      maxBatchedTokens_(maxBatchedTokens) {
  const fb::ModelInfo &model = executable.model();
  seqLength_ = model.seq_length();
  vocab_ = model.vocab_size();
  padId_ = model.pad_token_id();
  slots_.resize(model.batch_size());
}

StatusOr<std::unique_ptr<BatchGenerator>>
BatchGenerator::create(const Executable &executable, Executor &executor,
                       int64_t maxBatchedTokens, RunOptions runOptions) {
  const fb::ModelInfo &model = executable.model();
  if (!model.use_past() || !executable.entry("decode")) {
    return Status::error(StatusCode::FailedPrecondition,
                         "batched generation needs a model compiled with a "
                         "KV cache (use_past: True) and its decode entry");
  }
  if (maxBatchedTokens < 0) {
    return Status::error(StatusCode::InvalidArgument,
                         "the bound on a step's tokens must be >= 0");
  }
  std::unique_ptr<BatchGenerator> generator(new BatchGenerator(
      executable, executor, maxBatchedTokens, std::move(runOptions)));
  // The prefills of one row: `prefill_row` (seq_length) and
  // `prefill_row_<L>`; a model of one row has them as `prefill[_<L>]`.
  generator->rowPrefills_ = prefillEntries(executable, /*rows=*/true);
  if (generator->rowPrefills_.empty()) {
    return Status::error(StatusCode::FailedPrecondition,
                         "batched generation needs the model's prefills of "
                         "one row (prefill_row): recompile it with this mfc");
  }
  // The caches, zero, as decode takes them (after ids and past_length).
  const fb::Entry &decode = *executable.entry("decode");
  for (size_t i = 2; i < decode.inputs()->size(); ++i) {
    MFRT_ASSIGN_OR_RETURN(Tensor cache, executor.allocateInput("decode", i));
    generator->caches_.push_back(std::move(cache));
  }
  return generator;
}

StatusOr<int64_t> BatchGenerator::add(GenerationRequest request,
                                      GenerationCallback callback) {
  int64_t length = static_cast<int64_t>(request.prompt.size());
  if (length == 0) {
    return Status::error(StatusCode::InvalidArgument, "the prompt is empty");
  }
  if (length > seqLength_) {
    return Status::error(StatusCode::InvalidArgument,
                         "the prompt has " + std::to_string(length) +
                             " tokens but the context holds " +
                             std::to_string(seqLength_));
  }
  for (auto [id, bias] : request.sampling.logitBias) {
    if (id < 0 || id >= vocab_) {
      return Status::error(StatusCode::InvalidArgument,
                           "logit_bias: token " + std::to_string(id) +
                               " is outside the vocabulary [0, " +
                               std::to_string(vocab_) + ")");
    }
  }
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= vocab_) {
      return Status::error(StatusCode::InvalidArgument,
                           "prompt token " + std::to_string(id) +
                               " is outside the vocabulary [0, " +
                               std::to_string(vocab_) + ")");
    }
  }
  request.maxNewTokens =
      std::clamp<int64_t>(request.maxNewTokens, 0, seqLength_ - length);
  int64_t id = nextId_++;
  uint64_t seed = request.seed;
  SamplingOptions sampling = request.sampling;
  std::vector<int32_t> history = request.prompt;
  waiting_.push_back(std::make_unique<Sequence>(Sequence{
      id, std::move(request), std::move(callback), Sampler(sampling, seed),
      std::move(history), /*fed=*/0, /*generated=*/0, std::nullopt, false}));
  return id;
}

void BatchGenerator::cancel(int64_t id) {
  for (std::unique_ptr<Sequence> &sequence : waiting_) {
    sequence->cancelled |= sequence->id == id;
  }
  for (std::unique_ptr<Sequence> &sequence : slots_) {
    if (sequence) {
      sequence->cancelled |= sequence->id == id;
    }
  }
}

bool BatchGenerator::busy() const {
  return !waiting_.empty() ||
         std::any_of(slots_.begin(), slots_.end(),
                     [](const auto &sequence) { return bool(sequence); });
}

void BatchGenerator::finish(size_t slot, FinishReason reason,
                            std::string error) {
  std::unique_ptr<Sequence> sequence = std::move(slots_[slot]);
  sequence->callback(
      {sequence->id, std::nullopt, reason, nullptr, std::move(error)});
}

void BatchGenerator::admit() {
  // Cancelled requests leave first, waiting or running.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->cancelled) {
      (*it)->callback(
          {(*it)->id, std::nullopt, FinishReason::Cancelled, nullptr, ""});
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot] && slots_[slot]->cancelled) {
      finish(slot, FinishReason::Cancelled);
    }
  }
  for (size_t slot = 0; slot < slots_.size() && !waiting_.empty(); ++slot) {
    if (!slots_[slot]) {
      slots_[slot] = std::move(waiting_.front());
      waiting_.pop_front();
      // A request for no tokens ends before it runs.
      if (slots_[slot]->request.maxNewTokens == 0) {
        finish(slot, FinishReason::Length);
        --slot;
      }
    }
  }
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  countRunning();
}

void BatchGenerator::countRunning() {
  stats_.running =
      std::count_if(slots_.begin(), slots_.end(),
                    [](const auto &sequence) { return bool(sequence); });
}

int64_t BatchGenerator::promptLeft(const Sequence &sequence) {
  return sequence.pending
             ? 0
             : static_cast<int64_t>(sequence.request.prompt.size()) -
                   sequence.fed;
}

void BatchGenerator::emit(size_t slot, const float *row) {
  Sequence &sequence = *slots_[slot];
  int32_t next = sequence.sampler.next(row, vocab_, sequence.history,
                                       sequence.request.prompt.size());
  ++sequence.generated;
  ++stats_.generatedTokens;
  const std::vector<int32_t> &stops = sequence.request.stopIds;
  if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
    sequence.callback({sequence.id, std::nullopt, FinishReason::Stop, row, ""});
    slots_[slot].reset();
    return;
  }
  sequence.history.push_back(next);
  // The token must fit the cache to be fed: the context ends the sequence
  // as its length bound does.
  bool last = sequence.generated >= sequence.request.maxNewTokens ||
              sequence.fed >= seqLength_;
  std::optional<FinishReason> reason;
  if (last) {
    reason = FinishReason::Length;
  }
  sequence.callback({sequence.id, next, reason, row, ""});
  if (last) {
    slots_[slot].reset();
  } else {
    sequence.pending = next;
  }
}

void BatchGenerator::failRunning(const Status &status) {
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot]) {
      finish(slot, FinishReason::Cancelled, status.message());
    }
  }
}

StatusOr<int64_t> BatchGenerator::prefillRow(size_t slot, int64_t budget) {
  Sequence &sequence = *slots_[slot];
  int64_t left = promptLeft(sequence);
  // The least padded work for the rest of the prompt, its first call within
  // what is left of this step's budget where it can be (PrefillPlan.h).
  std::optional<PrefillChunk> chunk =
      firstPrefillChunk(rowPrefills_, sequence.fed, left, budget, seqLength_);
  if (!chunk) {
    return Status::error(StatusCode::Internal,
                         "no prefill of one row fits position " +
                             std::to_string(sequence.fed));
  }
  int64_t width = chunk->entry->width, feed = chunk->tokens;
  const std::string &entry = chunk->entry->name;
  MFRT_ASSIGN_OR_RETURN(Tensor ids, executor_.allocateInput(entry, 0));
  MFRT_ASSIGN_OR_RETURN(Tensor past, executor_.allocateInput(entry, 1));
  MFRT_ASSIGN_OR_RETURN(Tensor logitsPosition,
                        executor_.allocateInput(entry, 2));
  std::fill_n(ids.as<int32_t>(), width, static_cast<int32_t>(padId_));
  std::copy_n(sequence.request.prompt.begin() + sequence.fed, feed,
              ids.as<int32_t>());
  past.as<int32_t>()[0] = static_cast<int32_t>(sequence.fed);
  logitsPosition.as<int32_t>()[0] = static_cast<int32_t>(feed - 1);
  std::vector<Tensor> inputs;
  inputs.push_back(std::move(ids));
  inputs.push_back(std::move(past));
  inputs.push_back(std::move(logitsPosition));
  // The slot's row of each cache, in place.
  std::vector<Tensor> rows;
  for (const Tensor &cache : caches_) {
    rows.push_back(cache.rows(static_cast<int64_t>(slot), 1));
    inputs.push_back(rows.back());
  }
  MFRT_ASSIGN_OR_RETURN(std::vector<Tensor> outputs,
                        executor_.run(entry, std::move(inputs), runOptions_));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Tensor &written = outputs[1 + i];
    if (written.data() != rows[i].data()) { // an executor that copied
      std::memcpy(rows[i].data(), written.data(), rows[i].byteSize());
    }
  }
  ++stats_.steps;
  sequence.fed += feed;
  stats_.promptTokens += feed;
  if (promptLeft(sequence) == 0) {
    emit(slot, outputs[0].as<float>());
  }
  return feed;
}

Status BatchGenerator::step() {
  admit();
  if (stats_.running == 0) {
    return Status::ok();
  }
  // Prompts one row at a time, up to the step's token bound; then one
  // decode for the rows that have a token to feed.
  int64_t budget = maxBatchedTokens_ > 0 ? maxBatchedTokens_
                                         : std::numeric_limits<int64_t>::max();
  for (size_t slot = 0; slot < slots_.size() && budget > 0; ++slot) {
    while (slots_[slot] && promptLeft(*slots_[slot]) > 0 && budget > 0) {
      StatusOr<int64_t> fed = prefillRow(slot, budget);
      if (!fed) {
        failRunning(fed.status());
        return fed.status();
      }
      budget -= *fed;
    }
  }
  Status status = Status::ok();
  if (std::any_of(slots_.begin(), slots_.end(), [](const auto &sequence) {
        return sequence && sequence->pending.has_value();
      })) {
    status = decode();
    if (!status) {
      failRunning(status);
    }
  }
  countRunning();
  return status;
}

Status BatchGenerator::decode() {
  int64_t batch = slots();
  MFRT_ASSIGN_OR_RETURN(Tensor ids, executor_.allocateInput("decode", 0));
  MFRT_ASSIGN_OR_RETURN(Tensor past, executor_.allocateInput("decode", 1));
  for (int64_t b = 0; b < batch; ++b) {
    const Sequence *sequence = slots_[b].get();
    ids.as<int32_t>()[b] = sequence && sequence->pending
                               ? *sequence->pending
                               : static_cast<int32_t>(padId_);
    past.as<int32_t>()[b] = sequence ? static_cast<int32_t>(sequence->fed) : 0;
  }
  std::vector<Tensor> inputs;
  inputs.push_back(std::move(ids));
  inputs.push_back(std::move(past));
  for (const Tensor &cache : caches_) {
    inputs.push_back(cache);
  }
  MFRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> results,
      executor_.run("decode", std::move(inputs), runOptions_));
  for (size_t i = 0; i < caches_.size(); ++i) {
    caches_[i] = std::move(results[1 + i]);
  }
  const Tensor &logits = results[0]; // [batch, 1, vocab]
  ++stats_.steps;
  ++stats_.decodeSteps;
  for (int64_t b = 0; b < batch; ++b) {
    Sequence *sequence = slots_[b].get();
    if (sequence && sequence->pending) {
      ++sequence->fed;
      sequence->pending.reset();
      emit(static_cast<size_t>(b), logits.as<float>() + b * vocab_);
    }
  }
  return Status::ok();
}
