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
  if (model.kv_block_size() > 0) {
    pool_.emplace(model.kv_num_blocks(), model.kv_block_size());
    tableWidth_ =
        (seqLength_ + model.kv_block_size() - 1) / model.kv_block_size();
    stats_.kvBlocks = model.kv_num_blocks();
  }
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
  // The caches, zero, as decode takes them (after ids, past_length and a
  // paged cache's block tables).
  const fb::Entry &decode = *executable.entry("decode");
  for (size_t i = generator->pool_ ? 3 : 2; i < decode.inputs()->size(); ++i) {
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
  Sequence &sequence = *slots_[slot];
  sequence.callback(
      {sequence.id, std::nullopt, reason, nullptr, std::move(error)});
  vacate(slot);
}

void BatchGenerator::vacate(size_t slot) {
  releaseBlocks(*slots_[slot]);
  slots_[slot].reset();
  admitted_.erase(std::find(admitted_.begin(), admitted_.end(), slot));
}

int64_t BatchGenerator::prefillTarget(const Sequence &sequence) {
  return sequence.generated > 0
             ? static_cast<int64_t>(sequence.history.size()) - 1
             : static_cast<int64_t>(sequence.request.prompt.size());
}

bool BatchGenerator::reserveBlocks(Sequence &sequence) {
  if (!pool_) {
    return true;
  }
  const int64_t blockSize = pool_->blockSize();
  const int64_t target = prefillTarget(sequence);
  // Full blocks of a known prefix are shared; a new prompt keeps its last
  // token to run, whose logits pick the first new token.
  int64_t shareable =
      (sequence.generated > 0 ? target : target - 1) / blockSize;
  const int32_t *tokens = sequence.history.data();
  std::vector<KvBlockPool::Contents> shared;
  for (int64_t i = 0; i < shareable; ++i) {
    std::optional<KvBlockPool::Contents> block =
        pool_->share(shared.empty() ? KvBlockPool::Contents{} : shared.back(),
                     tokens + i * blockSize);
    if (!block) {
      break;
    }
    shared.push_back(*block);
  }
  // The rest must have prefills that fit before the context's end (near
  // it, only the wide ones start at a block boundary): fewer shared blocks
  // until it does (from the start, it always does).
  auto restHasPlan = [&] {
    int64_t fed = static_cast<int64_t>(shared.size()) * blockSize;
    return fed == target ||
           !planPrefill(rowPrefills_, fed, target - fed, seqLength_).empty();
  };
  while (!shared.empty() && !restHasPlan()) {
    pool_->release(shared.back().block);
    shared.pop_back();
  }
  int64_t needed = (target + blockSize - 1) / blockSize -
                   static_cast<int64_t>(shared.size());
  if (needed > pool_->freeBlocks()) {
    for (const KvBlockPool::Contents &block : shared) {
      pool_->release(block.block);
    }
    return false;
  }
  for (const KvBlockPool::Contents &block : shared) {
    sequence.blocks.push_back(block.block);
  }
  for (int64_t i = 0; i < needed; ++i) {
    sequence.blocks.push_back(*pool_->allocate());
  }
  sequence.published = static_cast<int64_t>(shared.size());
  sequence.prefixEnd = shared.empty() ? KvBlockPool::Contents{} : shared.back();
  sequence.fed = sequence.published * blockSize;
  stats_.prefixHitTokens += sequence.fed;
  // A preempted sequence whose tokens were all found decodes at once.
  if (sequence.generated > 0 && sequence.fed == target) {
    sequence.pending = sequence.history.back();
  }
  return true;
}

void BatchGenerator::releaseBlocks(Sequence &sequence) {
  // Last block first: the free list hands out the oldest release first, so
  // a prefix's first blocks, which its later ones are found through, stay
  // findable longest.
  for (auto block = sequence.blocks.rbegin(); block != sequence.blocks.rend();
       ++block) {
    pool_->release(*block);
  }
  sequence.blocks.clear();
  sequence.published = 0;
  sequence.prefixEnd = {};
}

void BatchGenerator::publishBlocks(Sequence &sequence) {
  if (!pool_) {
    return;
  }
  const int64_t blockSize = pool_->blockSize();
  while ((sequence.published + 1) * blockSize <= sequence.fed) {
    const int32_t *tokens =
        sequence.history.data() + sequence.published * blockSize;
    sequence.prefixEnd = pool_->publish(sequence.blocks[sequence.published],
                                        sequence.prefixEnd, tokens);
    ++sequence.published;
  }
}

void BatchGenerator::preempt(size_t slot) {
  releaseBlocks(*slots_[slot]);
  std::unique_ptr<Sequence> sequence = std::move(slots_[slot]);
  admitted_.erase(std::find(admitted_.begin(), admitted_.end(), slot));
  sequence->pending.reset();
  sequence->fed = 0;
  ++stats_.preemptions;
  waiting_.push_front(std::move(sequence));
}

void BatchGenerator::growForDecode() {
  if (!pool_) {
    return;
  }
  for (size_t i = 0; i < admitted_.size(); ++i) {
    size_t slot = admitted_[i];
    Sequence &sequence = *slots_[slot];
    if (!sequence.pending || sequence.fed / pool_->blockSize() <
                                 static_cast<int64_t>(sequence.blocks.size())) {
      continue;
    }
    // The newest sequences make room for the older ones.
    while (pool_->freeBlocks() == 0 && admitted_.back() != slot) {
      preempt(admitted_.back());
    }
    if (pool_->freeBlocks() == 0) {
      preempt(slot);
      return; // it was the newest: none after it needs a block
    }
    sequence.blocks.push_back(*pool_->allocate());
  }
}

void BatchGenerator::fillBlockTable(Tensor &table, int64_t row,
                                    const Sequence *sequence) {
  int32_t *entries = table.as<int32_t>() + row * tableWidth_;
  std::fill_n(entries, tableWidth_, -1);
  if (sequence) {
    std::copy(sequence->blocks.begin(), sequence->blocks.end(), entries);
  }
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
      // First come, first served: the queue's head waits for its blocks.
      if (!reserveBlocks(*waiting_.front())) {
        break;
      }
      slots_[slot] = std::move(waiting_.front());
      waiting_.pop_front();
      admitted_.push_back(slot);
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
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.kvBlocksUsed = pool_ ? pool_->usedBlocks() : 0;
  stats_.kvBlocksPeak = std::max(stats_.kvBlocksPeak, stats_.kvBlocksUsed);
}

int64_t BatchGenerator::promptLeft(const Sequence &sequence) {
  return sequence.pending ? 0 : prefillTarget(sequence) - sequence.fed;
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
    vacate(slot);
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
    vacate(slot);
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
  std::copy_n(sequence.history.begin() + sequence.fed, feed, ids.as<int32_t>());
  past.as<int32_t>()[0] = static_cast<int32_t>(sequence.fed);
  logitsPosition.as<int32_t>()[0] = static_cast<int32_t>(feed - 1);
  std::vector<Tensor> inputs;
  inputs.push_back(std::move(ids));
  inputs.push_back(std::move(past));
  inputs.push_back(std::move(logitsPosition));
  // The slot's row of each cache, in place; a paged cache's pools whole,
  // through the sequence's block table.
  std::vector<Tensor> rows;
  if (pool_) {
    MFRT_ASSIGN_OR_RETURN(Tensor table, executor_.allocateInput(entry, 3));
    fillBlockTable(table, 0, &sequence);
    inputs.push_back(std::move(table));
  }
  for (const Tensor &cache : caches_) {
    rows.push_back(pool_ ? cache : cache.rows(static_cast<int64_t>(slot), 1));
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
  publishBlocks(sequence);
  if (promptLeft(sequence) == 0) {
    // A preempted sequence has its next token already: decode feeds it.
    if (sequence.generated > 0) {
      sequence.pending = sequence.history.back();
    } else {
      emit(slot, outputs[0].as<float>());
    }
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
  growForDecode();
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
  if (pool_) {
    // A row without a token to feed maps no block: nothing of it is
    // written.
    MFRT_ASSIGN_OR_RETURN(Tensor table, executor_.allocateInput("decode", 2));
    for (int64_t b = 0; b < batch; ++b) {
      const Sequence *sequence = slots_[b].get();
      fillBlockTable(table, b,
                     sequence && sequence->pending ? sequence : nullptr);
    }
    inputs.push_back(std::move(table));
  }
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
      publishBlocks(*sequence);
      emit(static_cast<size_t>(b), logits.as<float>() + b * vocab_);
    }
  }
  return Status::ok();
}
