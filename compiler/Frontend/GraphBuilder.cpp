//===- GraphBuilder.cpp - helpers shared by the model IR builders ---------===//

#include "compiler/Frontend/GraphBuilder.h"

#include "compiler/Frontend/ModelBuilder.h"
#include "compiler/Frontend/ModuleSettings.h"
#include "compiler/Frontend/RecomputePlan.h"
#include "shapes/GridAxes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/Regex.h"

#include <cmath>

using namespace mlir;
using namespace mfc;

GraphBuilder::GraphBuilder(ModuleOp module, const ModelSpec &spec)
    : module_(module), spec_(spec), builder_(module.getContext()),
      parameterBuilder_(module.getContext()) {
  parameterBuilder_.setInsertionPointToStart(module.getBody());
  builder_.setInsertionPointToEnd(module.getBody());
  if (spec.shardedModelParallel > 1 || spec.dataAxisRanks() > 1 ||
      spec.shardedPipelineStages > 1 || spec.shardedContextParallel > 1) {
    // MindFormers' device grid: data_parallel x model_parallel (x
    // pipeline_stage, mf::kPipelineGridAxis (x context_parallel,
    // mf::kContextGridAxis)): each added last, so the others keep their
    // meaning. Tensor parallelism splits parameters over axis 1;
    // mf-train-step averages gradients over axis 0 and the context axis;
    // each stage's ranks run its entries.
    SmallVector<int64_t> shape = {spec.dataAxisRanks(),
                                  spec.shardedModelParallel};
    if (spec.shardedPipelineStages > 1 || spec.shardedContextParallel > 1) {
      shape.push_back(spec.shardedPipelineStages);
    }
    if (spec.shardedContextParallel > 1) {
      shape.push_back(spec.shardedContextParallel);
    }
    grid_ = mlir::shard::GridOp::create(
        parameterBuilder_, loc("parallel_config", "parallel_config"), "grid",
        parameterBuilder_.getDenseI64ArrayAttr(shape));
  }
}

Type GraphBuilder::elementType(DType type) {
  return elementTypeOf(builder_, type);
}

RankedTensorType GraphBuilder::tensorType(ArrayRef<int64_t> shape,
                                          Type elementType) {
  return RankedTensorType::get(shape, elementType);
}

ArrayRef<int64_t> GraphBuilder::shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

Location GraphBuilder::loc(const Twine &modelPath, StringRef yamlKey) {
  std::string key = yamlKey.contains('.') || spec_.keyPositions.count(yamlKey.str())
                        ? yamlKey.str()
                        : "model.model_config." + yamlKey.str();
  KeyPosition position = spec_.positionOf(key);
  Location fileLoc = FileLineColLoc::get(
      context(), position.file.empty() ? spec_.sourceFile : position.file,
      position.line, position.column);
  return NameLoc::get(StringAttr::get(context(), modelPath), fileLoc);
}

Value GraphBuilder::param(StringRef name, StringRef mfName,
                          ArrayRef<int64_t> shape, mf::ParameterInit init,
                          Location loc, int64_t splitDim, int64_t splitParts,
                          Type stored) {
  RankedTensorType type = tensorType(shape, stored ? stored : paramType());
  mf::ParameterOp &parameter = parameters_[name];
  if (!parameter) {
    FloatAttr std;
    if (init == mf::ParameterInit::normal) {
      std = builder_.getF64FloatAttr(spec_.model.initMethodStd);
    }
    FlatSymbolRefAttr grid;
    mlir::shard::GridAxesArrayAttr splitAxes;
    IntegerAttr splitGroups;
    if (grid_ && spec_.shardedModelParallel > 1 && splitDim >= 0) {
      if (splitParts > 1) {
        splitGroups = builder_.getI64IntegerAttr(splitParts);
      }
      SmallVector<DenseI16ArrayAttr> axes(
          splitDim + 1, builder_.getDenseI16ArrayAttr({}));
      axes[splitDim] = builder_.getDenseI16ArrayAttr({kModelParallelAxis});
      grid = FlatSymbolRefAttr::get(grid_.getSymNameAttr());
      splitAxes = mlir::shard::GridAxesArrayAttr::get(context(), axes);
    }
    parameter = mf::ParameterOp::create(
        parameterBuilder_, loc, name, type, init, std,
        mfName.empty() ? StringAttr() : builder_.getStringAttr(mfName),
        /*frozen=*/false, /*state=*/false, /*panels=*/false,
        /*dot_panels=*/false, grid, splitAxes, splitGroups,
        /*quant_scale=*/FlatSymbolRefAttr(),
        /*quant_group=*/IntegerAttr(), /*quant_bits=*/IntegerAttr(),
        FlatSymbolRefAttr(), FlatSymbolRefAttr(), FlatSymbolRefAttr(),
        FloatAttr(), /*parts=*/ArrayAttr(), /*calibrated_scales=*/StringAttr());
  }
  return mf::ParamOp::create(builder_, loc, type, name);
}

Value GraphBuilder::weight(StringRef name, StringRef mfName,
                           ArrayRef<int64_t> shape, Location loc,
                           int64_t splitDim, int64_t splitParts) {
  return param(name, mfName, shape, mf::ParameterInit::normal, loc, splitDim,
               splitParts);
}

Value GraphBuilder::stackedWeight(StringRef name, ArrayRef<std::string> parts,
                                  ArrayRef<int64_t> shape, Location loc) {
  RankedTensorType type = tensorType(shape, paramType());
  mf::ParameterOp &parameter = parameters_[name];
  if (!parameter) {
    FlatSymbolRefAttr grid;
    mlir::shard::GridAxesArrayAttr splitAxes;
    if (expertParallel()) {
      SmallVector<DenseI16ArrayAttr> axes(shape.size(),
                                          builder_.getDenseI16ArrayAttr({}));
      axes[0] = builder_.getDenseI16ArrayAttr({kDataParallelAxis});
      grid = gridName();
      splitAxes = mlir::shard::GridAxesArrayAttr::get(context(), axes);
    }
    SmallVector<StringRef> names(parts.begin(), parts.end());
    parameter = mf::ParameterOp::create(
        parameterBuilder_, loc, name, type, mf::ParameterInit::normal,
        builder_.getF64FloatAttr(spec_.model.initMethodStd), StringAttr(),
        /*frozen=*/false, /*state=*/false, /*panels=*/false,
        /*dot_panels=*/false, grid, splitAxes, /*split_groups=*/IntegerAttr(),
        /*quant_scale=*/FlatSymbolRefAttr(), /*quant_group=*/IntegerAttr(),
        /*quant_bits=*/IntegerAttr(), FlatSymbolRefAttr(), FlatSymbolRefAttr(),
        FlatSymbolRefAttr(), FloatAttr(), builder_.getStrArrayAttr(names),
        /*calibrated_scales=*/StringAttr());
  }
  return mf::ParamOp::create(builder_, loc, type, name);
}

Value GraphBuilder::castTo(Value value, Type elementType, Location loc) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType) {
    return value;
  }
  return mf::CastOp::create(builder_, loc, type.clone(elementType), value);
}

Value GraphBuilder::reshape(Value value, ArrayRef<int64_t> shape,
                            Location loc) {
  auto type = cast<RankedTensorType>(value.getType());
  return mf::ReshapeOp::create(builder_, loc, type.clone(shape), value);
}

Value GraphBuilder::broadcastTo(Value value, ArrayRef<int64_t> shape,
                                Location loc) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape) {
    return value;
  }
  return mf::BroadcastOp::create(builder_, loc, type.clone(shape), value);
}

Value GraphBuilder::linear(Value input, Value weight, Value bias,
                           bool transposed, Location loc) {
  Type compute = computeType();
  input = castTo(input, compute, loc);
  weight = castTo(weight, compute, loc);
  auto matmul = mf::MatmulOp::create(builder_, loc, input, weight,
                                     /*transpose_lhs=*/false,
                                     /*transpose_rhs=*/transposed);
  if (!bias) {
    return matmul;
  }
  Value broadcastBias =
      broadcastTo(castTo(bias, compute, loc), shapeOf(matmul), loc);
  return mf::AddOp::create(builder_, loc, matmul, broadcastBias);
}

Value GraphBuilder::contextPositions(int64_t batch, int64_t localSeq,
                                     Location loc) {
  int64_t runs = spec_.contextRuns(), length = localSeq / runs;
  SmallVector<Value> parts;
  for (int64_t run = 0; run < runs; ++run) {
    parts.push_back(positions(
        batch, length,
        broadcastTo(contextRunStart(run, length, loc), {batch}, loc), loc));
  }
  return runs == 1 ? parts.front()
                   : Value(mf::ConcatOp::create(
                         builder_, loc,
                         tensorType({batch, localSeq}, builder_.getI32Type()),
                         parts, 1));
}

Value GraphBuilder::contextRunStart(int64_t run, int64_t length, Location loc) {
  auto scalar = tensorType({}, builder_.getI32Type());
  auto constant = [&](int64_t value) -> Value {
    return mf::ConstantOp::create(
        builder_, loc,
        DenseElementsAttr::get(
            scalar, builder_.getI32IntegerAttr(static_cast<int32_t>(value))));
  };
  Value index = mf::ProcessIndexOp::create(
      builder_, loc, scalar, gridName(),
      builder_.getDenseI16ArrayAttr({mf::kContextGridAxis}));
  Value start = mf::MulOp::create(builder_, loc, index, constant(length));
  if (run == 0) {
    return start;
  }
  // Block 2c - 1 - r of the sequence.
  int64_t last = 2 * spec_.shardedContextParallel - 1;
  return mf::SubOp::create(builder_, loc, constant(last * length), start);
}

Value GraphBuilder::gatherOverContext(Value x, int64_t dim, Location loc) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] *= spec_.shardedContextParallel;
  auto axes = builder_.getDenseI16ArrayAttr({mf::kContextGridAxis});
  Value whole =
      mf::AllGatherOp::create(builder_, loc, type.clone(shape), x, gridName(),
                              axes, builder_.getI64IntegerAttr(dim));
  Value replicated =
      mf::ReplicateOp::create(builder_, loc, whole, gridName(), axes);
  if (spec_.contextRuns() == 1) {
    return replicated;
  }
  // Rank j's runs are blocks j and 2c - 1 - j: back to position order.
  int64_t ranks = spec_.shardedContextParallel;
  int64_t length = type.getShape()[dim] / 2;
  SmallVector<int64_t> blockShape(type.getShape());
  blockShape[dim] = length;
  SmallVector<Value> blocks;
  for (int64_t block = 0; block < 2 * ranks; ++block) {
    int64_t rank = block < ranks ? block : 2 * ranks - 1 - block;
    SmallVector<int64_t> offsets(type.getRank(), 0);
    offsets[dim] = (2 * rank + (block < ranks ? 0 : 1)) * length;
    blocks.push_back(mf::SliceOp::create(builder_, loc, type.clone(blockShape),
                                         replicated, offsets));
  }
  return mf::ConcatOp::create(builder_, loc, type.clone(shape), blocks, dim);
}

Value GraphBuilder::exchangeOverContext(Value x, int64_t splitDim,
                                        int64_t concatDim, Location loc) {
  SmallVector<int64_t> shape(shapeOf(x));
  shape[splitDim] /= spec_.shardedContextParallel;
  shape[concatDim] *= spec_.shardedContextParallel;
  return mf::AllToAllDimsOp::create(
      builder_, loc,
      tensorType(shape, cast<RankedTensorType>(x.getType()).getElementType()),
      x, gridName(), builder_.getDenseI16ArrayAttr({mf::kContextGridAxis}),
      builder_.getI64IntegerAttr(splitDim),
      builder_.getI64IntegerAttr(concatDim));
}

Value GraphBuilder::positions(int64_t batch, int64_t seq, Value pastLength,
                              Location loc) {
  auto type = tensorType({batch, seq}, builder_.getI32Type());
  Value iota = mf::IotaOp::create(builder_, loc, type, 1);
  if (!pastLength) {
    return iota;
  }
  // One past length per batch row: row b's tokens follow its own cache.
  return mf::AddOp::create(
      builder_, loc, iota,
      broadcastTo(reshape(pastLength, {batch, 1}, loc), {batch, seq}, loc));
}

Value GraphBuilder::causalAttention(Value q, Value k, Value v, KvCache *cache,
                                    int64_t layer,
                                    const std::string &attentionPath) {
  Value pastLength, blockTable;
  bool ulysses = false;
  if (!cache && contextParallel()) {
    Location exchangeLoc = loc(attentionPath + ".attention_core",
                               "parallel_config.context_parallel");
    if (spec_.contextGathersKeys()) {
      // colossalai_cp: this rank's queries against every rank's keys and
      // values (in position order), each run of queries from its first
      // position.
      k = gatherOverContext(k, /*dim=*/1, exchangeLoc);
      v = gatherOverContext(v, /*dim=*/1, exchangeLoc);
      return gatheredAttention(q, k, v, attentionPath);
    }
    // DeepSpeed-Ulysses: this rank's block of the sequence of every head
    // becomes every position of a block of the heads (MindFormers'
    // ulysses_cp inserts the same all-to-all before its attention).
    ulysses = true;
    q = exchangeOverContext(q, /*splitDim=*/2, /*concatDim=*/1, exchangeLoc);
    k = exchangeOverContext(k, /*splitDim=*/2, /*concatDim=*/1, exchangeLoc);
    v = exchangeOverContext(v, /*splitDim=*/2, /*concatDim=*/1, exchangeLoc);
  }
  if (cache) {
    Location cacheLoc = loc(attentionPath + ".kv_cache", "use_past");
    k = cache->keys[layer] =
        mf::KvCacheWriteOp::create(builder_, cacheLoc, cache->keys[layer], k,
                                   cache->pastLength, cache->blockTable);
    v = cache->values[layer] =
        mf::KvCacheWriteOp::create(builder_, cacheLoc, cache->values[layer], v,
                                   cache->pastLength, cache->blockTable);
    pastLength = cache->pastLength;
    blockTable = cache->blockTable;
  }
  ArrayRef<int64_t> shape = shapeOf(q);
  Value attended = mf::AttentionOp::create(
      builder_, loc(attentionPath + ".attention_core", "num_heads"),
      q.getType(), q, k, v, pastLength, blockTable, /*key_scale=*/Value(),
      /*value_scale=*/Value(), /*causal=*/true,
      llvm::APFloat(1.0 / std::sqrt(static_cast<double>(shape[3]))));
  Value merged = reshape(attended, {shape[0], shape[1], shape[2] * shape[3]},
                         loc(attentionPath + ".merge_heads", "num_heads"));
  if (!ulysses) {
    return merged;
  }
  // [batch, seq, heads / cp * head_dim] back to this rank's positions of
  // every head (the ranks' heads are consecutive).
  return exchangeOverContext(
      merged, /*splitDim=*/1, /*concatDim=*/2,
      loc(attentionPath + ".merge_heads", "parallel_config.context_parallel"));
}

Value GraphBuilder::gatheredAttention(Value q, Value k, Value v,
                                      const std::string &attentionPath) {
  Location attentionLoc = loc(attentionPath + ".attention_core", "num_heads");
  auto queryType = cast<RankedTensorType>(q.getType());
  ArrayRef<int64_t> shape = queryType.getShape();
  int64_t runs = spec_.contextRuns(), length = shape[1] / runs;
  SmallVector<int64_t> runShape(shape);
  runShape[1] = length;
  SmallVector<Value> attended;
  for (int64_t run = 0; run < runs; ++run) {
    Value queries = q;
    if (runs > 1) {
      queries =
          mf::SliceOp::create(builder_, attentionLoc, queryType.clone(runShape),
                              q, ArrayRef<int64_t>{0, run * length, 0, 0});
    }
    attended.push_back(mf::AttentionOp::create(
        builder_, attentionLoc, queries.getType(), queries, k, v,
        contextRunStart(run, length, attentionLoc), Value(), Value(), Value(),
        /*causal=*/true,
        llvm::APFloat(1.0 / std::sqrt(static_cast<double>(shape[3])))));
  }
  Value joined = runs == 1
                     ? attended.front()
                     : Value(mf::ConcatOp::create(builder_, attentionLoc,
                                                  queryType, attended, 1));
  return reshape(joined, {shape[0], shape[1], shape[2] * shape[3]},
                 loc(attentionPath + ".merge_heads", "num_heads"));
}

Value GraphBuilder::logits(Value hidden, Value headWeight, Location loc) {
  if (logitsPosition_) {
    // Row b * seq + position of the flattened states, for each b: a gather
    // (mf.embedding) with ids [batch, 1].
    ArrayRef<int64_t> shape = shapeOf(hidden);
    int64_t batch = shape[0], seq = shape[1], width = shape[2];
    Value rows = reshape(hidden, {batch * seq, width}, loc);
    RankedTensorType idsType = tensorType({batch, 1}, builder_.getI32Type());
    SmallVector<int32_t> starts;
    for (int64_t b = 0; b < batch; ++b) {
      starts.push_back(static_cast<int32_t>(b * seq));
    }
    Value rowStarts = mf::ConstantOp::create(
        builder_, loc, DenseElementsAttr::get(idsType, ArrayRef<int32_t>(starts)));
    Value ids = mf::AddOp::create(builder_, loc, rowStarts,
                                  reshape(logitsPosition_, {batch, 1}, loc));
    hidden = mf::EmbeddingOp::create(builder_, loc, rows, ids);
  }
  Value projected = linear(hidden, headWeight, Value(), /*transposed=*/true, loc);
  return castTo(projected, builder_.getF32Type(), loc);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

func::FuncOp GraphBuilder::beginEntry(StringRef name, mf::EntryRole role,
                                      ArrayRef<std::string> inputNames,
                                      ArrayRef<Type> inputTypes) {
  Location entryLoc = loc(name, "run_mode");
  auto entry = func::FuncOp::create(
      builder_, entryLoc, name, builder_.getFunctionType(inputTypes, {}));
  mf::setEntryRole(entry, role);
  for (auto [index, inputName] : llvm::enumerate(inputNames)) {
    entry.setArgAttr(index, "mf.name", builder_.getStringAttr(inputName));
  }
  Block *body = entry.addEntryBlock();
  builder_.setInsertionPointToStart(body);
  return entry;
}

void GraphBuilder::finishEntry(func::FuncOp entry, ArrayRef<Value> results,
                               ArrayRef<std::string> resultNames) {
  func::ReturnOp::create(builder_, entry.getLoc(), results);
  SmallVector<Type> resultTypes;
  for (Value result : results) {
    resultTypes.push_back(result.getType());
  }
  entry.setType(
      builder_.getFunctionType(entry.getArgumentTypes(), resultTypes));
  for (auto [index, resultName] : llvm::enumerate(resultNames)) {
    entry.setResultAttr(index, "mf.name", builder_.getStringAttr(resultName));
  }
  builder_.setInsertionPointToEnd(module_.getBody());
}

Value GraphBuilder::withLora(Value input, Value projected,
                             const std::string &hfPrefix,
                             const std::string &path, int64_t outFeatures,
                             int64_t inFeatures, const std::string &alias,
                             Parallel parallel, int64_t parts) {
  const PetConfig &pet = spec_.model.pet;
  if (pet.petType != "lora") {
    return projected;
  }
  loraCandidates_.push_back(alias.empty() ? path : path + " (" + alias + ")");
  llvm::Regex targets("^(" + pet.targetModules + ")$");
  if (!targets.match(path) && (alias.empty() || !targets.match(alias))) {
    return projected;
  }
  ++loraAdapters_;
  Location loraLoc = loc(path + ".lora", "target_modules");
  if (pet.loraDropout > 0 && spec_.runMode != RunMode::Predict && !warnedLoraDropout_) {
    warnedLoraDropout_ = true;
    emitWarning(loc("pet_config", "model.model_config.pet_config.lora_dropout"))
        << "lora_dropout " << pet.loraDropout
        << " is not applied (mfc has no dropout yet): the adapters train "
           "without it";
  }
  int64_t rank = pet.loraRank;
  // MindFormers' LoRA layers (and PEFT's): A HeUniform, B zeros, so an
  // adapter starts as the identity on its base weight.
  Value a = param(hfPrefix + ".lora_A.weight", path + ".lora_a.weight",
                  {rank, inFeatures}, mf::ParameterInit::he_uniform, loraLoc,
                  parallel == Parallel::Row ? 1 : -1);
  Value b = param(hfPrefix + ".lora_B.weight", path + ".lora_b.weight",
                  {outFeatures, rank}, mf::ParameterInit::zeros, loraLoc,
                  parallel == Parallel::Column ? 0 : -1, parts);
  Value down = linear(input, a, Value(), /*transposed=*/true, loraLoc);
  Value up = linear(down, b, Value(), /*transposed=*/true, loraLoc);
  auto type = cast<RankedTensorType>(up.getType());
  Value scale = mf::ConstantOp::create(
      builder_, loraLoc,
      DenseElementsAttr::get(type, builder_.getFloatAttr(type.getElementType(),
                                                         pet.loraAlpha / rank)));
  return mf::AddOp::create(builder_, loraLoc, projected,
                           mf::MulOp::create(builder_, loraLoc, up, scale));
}

LogicalResult GraphBuilder::buildEntries(const FrontendOptions &options) {
  if (spec_.shardedContextParallel > 1) {
    module_->setAttr(mf::kContextBlocksAttrName,
                     builder_.getI64IntegerAttr(spec_.contextRuns()));
  }
  if (spec_.runMode == RunMode::Predict) {
    buildPredictEntries(options);
  } else if (spec_.shardedPipelineStages > 1) {
    module_->setAttr(mf::kMicroBatchesAttrName,
                     builder_.getI64IntegerAttr(spec_.parallel.microBatchNum));
    module_->setAttr(mf::kPipelineSchedulerAttrName,
                     builder_.getStringAttr(spec_.parallel.pipelineScheduler));
    if (spec_.model.ppInterleaveNum > 1) {
      module_->setAttr(mf::kPipelineChunksAttrName,
                       builder_.getI64IntegerAttr(spec_.model.ppInterleaveNum));
    }
    buildStageEntries();
  } else {
    buildLossEntry();
  }
  if (spec_.model.pet.petType == "lora" && loraAdapters_ == 0) {
    std::string examples;
    for (size_t i = 0; i < loraCandidates_.size() && i < 6; ++i) {
      examples += (i ? ", " : "") + loraCandidates_[i];
    }
    emitError(loc("pet_config", "model.model_config.pet_config.target_modules"))
        << "target_modules '" << spec_.model.pet.targetModules
        << "' matches none of the model's " << loraCandidates_.size()
        << " projections (" << examples
        << ", ...), so LoRA would train nothing; write a regex over these "
           "paths";
    return failure();
  }
  // LoRA trains only the adapters: everything else is frozen.
  if (spec_.model.pet.petType == "lora") {
    for (auto parameter : module_.getOps<mf::ParameterOp>()) {
      if (!StringRef(parameter.getSymName()).contains(".lora_")) {
        parameter.setFrozen(true);
      }
    }
  }
  // Parameters were declared as the entries discovered them; list them
  // first, in discovery order.
  Block *body = module_.getBody();
  for (auto entry : llvm::to_vector(body->getOps<func::FuncOp>())) {
    entry->moveBefore(body, body->end());
  }
  return success();
}

void GraphBuilder::buildPredictEntries(const FrontendOptions &options) {
  const ModelConfig &model = spec_.model;
  int64_t batch = spec_.entryBatchSize();
  Type ids = builder_.getI32Type();
  // One position per batch row: rows are sequences of their own (a server
  // batches prompts of different lengths, and steps rows at different
  // positions together).
  RankedTensorType perRow = tensorType({batch}, ids);
  // `logits`: every position's logits, no cache (mf-run --dump-logits).
  auto buildAllLogits = [&] {
    func::FuncOp all =
        beginEntry("logits", mf::EntryRole::logits, {"input_ids"},
                   {tensorType({batch, model.seqLength}, ids)});
    finishEntry(all, {buildForward(all.getArgument(0), nullptr)}, {"logits"});
  };
  if (!model.usePast) {
    // Prefill reruns on the whole prefix for every new token.
    func::FuncOp prefill = beginEntry(
        "prefill", mf::EntryRole::prefill, {"input_ids", "logits_position"},
        {tensorType({batch, model.seqLength}, ids), perRow});
    logitsPosition_ = prefill.getArgument(1);
    Value logits = buildForward(prefill.getArgument(0), nullptr);
    logitsPosition_ = Value();
    finishEntry(prefill, {logits}, {"logits"});
    buildAllLogits();
    return;
  }

  // Both entries take and return the whole cache; prefill starts it at 0.
  SmallVector<std::string> cacheNames;
  for (int64_t layer = 0; layer < model.numLayers; ++layer) {
    cacheNames.push_back("cache." + std::to_string(layer) + ".key");
    cacheNames.push_back("cache." + std::to_string(layer) + ".value");
  }

  // Each row's tokens go into its cache after its `past_length` tokens
  // (prefill from 0, or a later chunk of a long prompt from where the last
  // one ended). Prefill returns the logits at each row's `logits_position`
  // (its last prompt token) only; decode, of its one token.
  // `rows`: the batch (every entry), or 1 for the prefills of one row that
  // a server runs on one sequence's cache row while the others wait.
  // A paged cache (block_size, num_blocks) is one pool per layer and K/V
  // that every entry takes whole, each row reading and writing it through
  // its row of `block_tables` (after the positions): the rows of one-row
  // prefills need no view of it.
  bool paged = model.pagedCache();
  auto build = [&](StringRef name, mf::EntryRole role, int64_t seq,
                   int64_t rows) {
    bool isPrefill = role != mf::EntryRole::decode;
    RankedTensorType cacheType =
        paged ? tensorType({model.kvNumBlocks, model.kvBlockSize,
                            model.kvHeads(), model.headDim()},
                           computeType())
              : tensorType(
                    {rows, model.seqLength, model.kvHeads(), model.headDim()},
                    computeType());
    SmallVector<Type> cacheTypes(cacheNames.size(), cacheType);
    RankedTensorType positionType = tensorType({rows}, ids);
    SmallVector<std::string> inputNames = {"input_ids", "past_length"};
    SmallVector<Type> inputTypes = {tensorType({rows, seq}, ids), positionType};
    if (isPrefill) {
      inputNames.push_back("logits_position");
      inputTypes.push_back(positionType);
    }
    if (paged) {
      inputNames.push_back("block_tables");
      inputTypes.push_back(tensorType({rows, model.blockTableWidth()}, ids));
    }
    inputNames.append(cacheNames.begin(), cacheNames.end());
    inputTypes.append(cacheTypes.begin(), cacheTypes.end());
    func::FuncOp entry = beginEntry(name, role, inputNames, inputTypes);

    unsigned firstCache = (isPrefill ? 3 : 2) + (paged ? 1 : 0);
    KvCache cache;
    cache.pastLength = entry.getArgument(1);
    if (isPrefill) {
      logitsPosition_ = entry.getArgument(2);
    }
    if (paged) {
      cache.blockTable = entry.getArgument(firstCache - 1);
    }
    for (int64_t layer = 0; layer < model.numLayers; ++layer) {
      cache.keys.push_back(entry.getArgument(firstCache + 2 * layer));
      cache.values.push_back(entry.getArgument(firstCache + 2 * layer + 1));
    }
    Value logits = buildForward(entry.getArgument(0), &cache);
    logitsPosition_ = Value();
    SmallVector<Value> results = {logits};
    for (int64_t layer = 0; layer < model.numLayers; ++layer) {
      results.append({cache.keys[layer], cache.values[layer]});
    }
    SmallVector<std::string> resultNames = {"logits"};
    resultNames.append(cacheNames.begin(), cacheNames.end());
    finishEntry(entry, results, resultNames);
  };
  std::vector<int64_t> lengths = prefillLengthsFor(options, model.seqLength);
  build("prefill", mf::EntryRole::prefill, model.seqLength, batch);
  for (int64_t length : lengths) {
    build("prefill_" + std::to_string(length), mf::EntryRole::prefill, length,
          batch);
  }
  build("decode", mf::EntryRole::decode, 1, batch);
  if (batch > 1) {
    // A new sequence's prompt without the other rows' padding (mf-serve,
    // mf-run --prompts-file): its cache row is a [1, ...] cache (a paged
    // cache: the pool, through one row of block table).
    build("prefill_row", mf::EntryRole::prefill_row, model.seqLength, 1);
    for (int64_t length : lengths) {
      build("prefill_row_" + std::to_string(length), mf::EntryRole::prefill_row,
            length, 1);
    }
  }
  buildAllLogits();
}

Value GraphBuilder::loss(Value logits, Value labels) {
  const ModelConfig &model = spec_.model;
  int64_t rows = shapeOf(labels)[0] * shapeOf(labels)[1];
  Location lossLoc = loc("loss", "ignore_token_id");
  Value flatLogits = reshape(logits, {rows, model.vocabSize}, lossLoc);
  Value flatLabels = reshape(labels, {rows}, lossLoc);
  return mf::CrossEntropyOp::create(builder_, lossLoc, flatLogits, flatLabels,
                                    model.ignoreTokenId);
}

Value GraphBuilder::loadBalancingLoss(Location loc) {
  Type f32 = builder_.getF32Type();
  auto sumAll = [&](Value x) {
    int64_t count = cast<RankedTensorType>(x.getType()).getNumElements();
    Value sum =
        mf::ReduceSumOp::create(builder_, loc, reshape(x, {count}, loc), 0);
    return reshape(sum, {}, loc);
  };
  // P[e]: the router probabilities summed over every layer's tokens.
  Value probabilitySums;
  int64_t pairs = 0, experts = 0;
  for (auto [probs, chosen] : routers_) {
    ArrayRef<int64_t> shape = shapeOf(probs);
    experts = shape[1];
    pairs += shape[0];
    Value sums = mf::ReduceSumOp::create(builder_, loc, probs, 0);
    probabilitySums =
        probabilitySums
            ? Value(mf::AddOp::create(builder_, loc, probabilitySums, sums))
            : sums;
  }
  // sum over e of count[e] P[e] is the sum over every chosen (token, choice)
  // of P[its expert]: a lookup in P (whose gradient scatters back to P).
  Value table = reshape(probabilitySums, {experts, 1}, loc);
  Value total;
  for (auto [probs, chosen] : routers_) {
    Value picked = mf::EmbeddingOp::create(builder_, loc, table, chosen);
    Value sum = sumAll(picked);
    total = total ? Value(mf::AddOp::create(builder_, loc, total, sum)) : sum;
  }
  // E * sum over e of (count[e] / N) (P[e] / N), N the tokens of all layers.
  double scale = static_cast<double>(experts) /
                 (static_cast<double>(pairs) * static_cast<double>(pairs));
  Value factor = mf::ConstantOp::create(
      builder_, loc,
      DenseElementsAttr::get(
          tensorType({}, f32),
          builder_.getF32FloatAttr(static_cast<float>(scale))));
  return mf::MulOp::create(builder_, loc, total, factor);
}

void GraphBuilder::buildLossEntry() {
  int64_t batch = spec_.entryBatchSize();
  RankedTensorType idsType =
      tensorType({batch, spec_.localSeqLength()}, builder_.getI32Type());
  func::FuncOp entry = beginEntry("forward_loss", mf::EntryRole::forward_loss,
                                  {"input_ids", "labels"}, {idsType, idsType});
  routers_.clear();
  Value logits = buildForward(entry.getArgument(0), nullptr);
  Value total = loss(logits, entry.getArgument(1));
  if (!routers_.empty()) {
    // transformers: loss += router_aux_loss_coef * aux_loss.
    Location auxLoc = loc("loss.router_aux_loss", "output_router_logits");
    double coefficient = spec_.model.moe.auxLossCoef;
    Value scaled = mf::MulOp::create(
        builder_, auxLoc, loadBalancingLoss(auxLoc),
        mf::ConstantOp::create(
            builder_, auxLoc,
            DenseElementsAttr::get(
                tensorType({}, builder_.getF32Type()),
                builder_.getF32FloatAttr(static_cast<float>(coefficient)))));
    total = mf::AddOp::create(builder_, auxLoc, total, scaled);
    routers_.clear();
  }
  finishEntry(entry, {total}, {"loss"});
}

void GraphBuilder::buildStageEntries() {
  int64_t batch = spec_.entryBatchSize();
  RankedTensorType idsType =
      tensorType({batch, spec_.localSeqLength()}, builder_.getI32Type());
  std::vector<LayerChunk> parts = layerChunks(spec_);
  int64_t chunks = std::max<int64_t>(1, spec_.model.ppInterleaveNum);
  Type hiddenType; // the first part's output: what every later one takes
  // The model's parts in order (layerChunks: chunk 0 of every stage, then
  // chunk 1, ...; under zero_bubble_v chunk 1 from the last stage back).
  for (auto [index, part] : llvm::enumerate(parts)) {
    bool first = index == 0, last = index + 1 == parts.size();
    SmallVector<std::string> names = {first ? "input_ids" : "hidden"};
    SmallVector<Type> types = {first ? Type(idsType) : hiddenType};
    if (last) {
      names.push_back("labels");
      types.push_back(idsType);
    }
    func::FuncOp entry = beginEntry(
        mfshapes::stageEntryPrefix(part.stage, part.chunk, chunks) + "forward",
        mf::EntryRole::stage_forward, names, types);
    entry->setAttr(mf::kStageAttrName, builder_.getI64IntegerAttr(part.stage));
    if (chunks > 1) {
      entry->setAttr(mf::kChunkAttrName,
                     builder_.getI64IntegerAttr(part.chunk));
    }
    Value hidden = entry.getArgument(0);
    if (first) {
      hidden = embed(hidden, nullptr);
    }
    hidden = layers(hidden, part.first, part.first + part.count, nullptr);
    if (last) {
      finishEntry(entry, {loss(head(hidden), entry.getArgument(1))}, {"loss"});
    } else {
      hiddenType = hidden.getType();
      finishEntry(entry, {hidden}, {"hidden"});
    }
  }
}

std::vector<int64_t> mfc::prefillLengthsFor(const FrontendOptions &options,
                                           int64_t seqLength) {
  if (options.prefillLengths) {
    return *options.prefillLengths;
  }
  // Each length at most doubles the work of the prompts it takes; shorter
  // than 32, a prefill is mostly per-dispatch cost.
  std::vector<int64_t> lengths;
  for (int64_t length = 32; length < seqLength; length *= 2) {
    lengths.push_back(length);
  }
  return lengths;
}

OwningOpRef<ModuleOp> mfc::buildModelModule(MLIRContext &context,
                                            const ModelSpec &spec,
                                            const FrontendOptions &options) {
  context.loadDialect<mf::MFDialect, func::FuncDialect>();
  KeyPosition position = spec.positionOf("model");
  OwningOpRef<ModuleOp> module = ModuleOp::create(FileLineColLoc::get(
      &context, spec.sourceFile, position.line, position.column));
  std::unique_ptr<GraphBuilder> builder =
      spec.model.family == ModelFamily::GPT2 ? createGPT2Builder(*module, spec)
                                             : createLlamaBuilder(*module, spec);
  if (failed(builder->buildEntries(options))) {
    return nullptr;
  }
  recordRuntimeSettings(*module, spec);
  recordCompileDecisions(*module, spec, options.calibrationModel);
  return module;
}
