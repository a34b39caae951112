//===- ModelSpec.h - a validated MindFormers model config -------*- C++ -*-===//
//
// Everything in a MindFormers YAML that changes the math, the shapes, the
// parallel layout or the training loop, after validation. Field names follow
// the YAML keys; defaults are MindFormers' defaults.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_FRONTEND_MODELSPEC_H
#define MFC_COMPILER_FRONTEND_MODELSPEC_H

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mfc {

enum class RunMode { Train, Finetune, Predict, Eval };
enum class DType { F32, F16, BF16 };
enum class ModelFamily { Llama, GPT2 };

const char *toString(RunMode mode);
const char *toString(DType type);

/// Low-rank adapters from `model.model_config.pet_config`.
struct PetConfig {
  std::string petType; ///< "lora"; empty when there is no pet_config.
  int64_t loraRank = 8;
  double loraAlpha = 16;
  double loraDropout = 0.0;
  std::string targetModules; ///< A regex over model paths.
};

/// Weight-only quantization from `model.model_config.quantization_config`
/// (MindFormers' keys): round-to-nearest int8 weights with per-row scales
/// (rtn or ptq), or int4 ones with scales per group of columns (ptq).
struct QuantizationConfig {
  std::string quantMethod; ///< "rtn" or "ptq"; empty when there is none.
  std::string weightDtype; ///< "int8" or "int4"
  int64_t groupSize = 0;   ///< 0: one scale per row (per_channel)
  /// "int8": activations quantized per token (W8A8), or with calibrated
  /// static scales (act_quant_granularity per_tensor: SmoothQuant); empty:
  /// float.
  std::string activationDtype;
  /// With int8 activations: "per_token" or "per_tensor" (calibrated).
  std::string activationGranularity;
  /// SmoothQuant's migration strength (outliers_suppression 'smooth', or
  /// quant_method smooth_quant); negative: no smoothing.
  double smoothAlpha = -1;
  /// "int8": the KV cache holds int8 rows with calibrated per-channel
  /// scales (kvcache_dtype; golden-stick's per_channel granularity); empty:
  /// the compute dtype.
  std::string kvcacheDtype;
  /// Weights whose name contains one of these stay float (golden-stick's
  /// substring match over the layer's path).
  std::vector<std::string> modulesToNotConvert;
};

/// A mixture-of-experts feed-forward, as Hugging Face's Qwen3-MoE and
/// Mixtral configs and MindFormers' moe_config describe it: in every routed
/// layer a softmax router chooses `expertsPerToken` of `numExperts` SwiGLU
/// experts per token. Dropless (every token reaches its experts), or with
/// a capacity per expert (MindFormers' training regime).
struct MoeConfig {
  int64_t numExperts = 0; ///< 0: a dense model
  int64_t expertsPerToken = 2;
  int64_t expertWidth = 0;   ///< each expert's intermediate width
  bool normTopkProb = false; ///< renormalize the chosen probabilities
  double normEpsilon = 0;    ///< added to the sum that renormalizes
  /// routed_scaling_factor: multiplies the routing weights, after
  /// renormalizing (`scaleNormalized`) or only when not renormalizing.
  double routedScalingFactor = 1.0;
  bool scaleNormalized = true;
  /// capacity_factor > 0 (training and eval): each expert takes at most
  /// ceil(k * tokens * capacityFactor / E) (token, choice) pairs, at most
  /// the tokens, rounded up to `capacityMultiple`; later ones are dropped.
  double capacityFactor = 0;
  int64_t capacityMultiple = 1;
  bool sequenceDropOrder = false;  ///< enable_sdrop: token order, not choice
  /// transformers' router_aux_loss_coef, when output_router_logits adds
  /// the load-balancing loss to the training and eval loss (else 0).
  double auxLossCoef = 0;
  std::optional<DType> routerType; ///< router_dense_type; none: compute's
  int64_t sparseStep = 1; ///< decoder_sparse_step: every n-th layer routes
  std::vector<int64_t> denseLayers; ///< mlp_only_layers
  /// Hugging Face's module names: Mixtral's block_sparse_moe.experts.N.w1,
  /// or Qwen's mlp.experts.N.gate_proj.
  bool mixtralNames = false;
  /// Qwen2-MoE's shared expert: a dense SwiGLU this wide beside the routed
  /// ones (0: none), its output scaled by sigmoid(shared_expert_gate(x))
  /// when `sharedExpertGated`.
  int64_t sharedExpertWidth = 0;
  bool sharedExpertGated = true;

  /// The capacity of each expert for `tokens` routed tokens; 0: dropless.
  int64_t capacity(int64_t tokens) const;

  bool routed(int64_t layer) const {
    return numExperts > 0 && (layer + 1) % sparseStep == 0 &&
           std::find(denseLayers.begin(), denseLayers.end(), layer) ==
               denseLayers.end();
  }
};

/// `model.model_config` plus `model.arch`.
struct ModelConfig {
  ModelFamily family = ModelFamily::Llama;
  std::string configType; ///< LlamaConfig, GPT2Config
  std::string archType;   ///< LlamaForCausalLM, GPT2LMHeadModel

  int64_t batchSize = 1;
  int64_t seqLength = 2048;
  int64_t hiddenSize = 4096;
  int64_t numLayers = 32;
  int64_t numHeads = 32;
  int64_t numKvHeads = 0; ///< 0: same as numHeads (n_kv_heads: null).
  /// `head_dim` when given (Qwen3's differs from hidden_size / num_heads).
  std::optional<int64_t> headDimension;
  int64_t vocabSize = 32000;
  /// LLaMA FFN width: intermediate_size if given, else derived from
  /// multiple_of and ffn_dim_multiplier as MindFormers does.
  std::optional<int64_t> intermediateSize;
  int64_t multipleOf = 256;
  std::optional<double> ffnDimMultiplier;
  int64_t expandRatio = 4; ///< GPT-2 FFN width = expand_ratio * hidden.
  double rmsNormEps = 1e-5;
  double layerNormEps = 1e-5;
  double theta = 10000.0;
  /// extend_method's scale of each RoPE inverse frequency (head_dim / 2
  /// values; empty without PI, linear or LLAMA3 scaling).
  std::vector<double> ropeFrequencyScale;
  bool qkvHasBias = false;
  /// `qk_layernorm`: RMSNorm of each query and key head before RoPE (Qwen3).
  bool qkLayernorm = false;
  /// `fp32_residual_connection`: the residual stream stays float32.
  bool fp32ResidualConnection = false;
  bool tieWordEmbeddings = false;
  std::string hiddenAct = "silu";

  DType computeDtype = DType::F16;
  DType paramInitType = DType::F32;
  DType layernormComputeType = DType::F32;
  DType softmaxComputeType = DType::F32;
  DType rotaryDtype = DType::F32;

  bool usePast = false;
  /// A paged KV cache (MindFormers' PagedAttention): `block_size` and
  /// `num_blocks` of model_config, set when either is given.
  int64_t kvBlockSize = 0, kvNumBlocks = 0;
  bool pagedCache() const { return usePast && kvBlockSize > 0; }
  /// Blocks a row's table maps: enough for seq_length.
  int64_t blockTableWidth() const {
    return (seqLength + kvBlockSize - 1) / kvBlockSize;
  }
  bool useFlashAttention = false;
  /// use_ring_attention: context parallelism passes K/V blocks around a
  /// ring (MindSpore's FlashAttention with enable_ring_attention).
  bool useRingAttention = false;
  int64_t maxDecodeLength = 1024;
  double initMethodStd = 0.02;

  int64_t bosTokenId = 1;
  std::vector<int64_t> eosTokenIds = {2};
  int64_t padTokenId = 0;
  int64_t ignoreTokenId = -100;

  // Generation defaults (predict).
  bool doSample = false;
  int64_t topK = 1;
  double topP = 1.0;
  double temperature = 1.0;
  double repetitionPenalty = 1.0;

  PetConfig pet;
  QuantizationConfig quantization;
  MoeConfig moe;

  /// `pp_interleave_num`: the layers of each pipeline stage come in this
  /// many chunks (MindFormers' interleaved pipeline); 1 unless
  /// parallel.pipeline_config.pipeline_interleave is on, as in MindFormers.
  int64_t ppInterleaveNum = 1;
  /// `offset` as written: one row (an int for every stage, or one per
  /// stage, for every chunk) or one row per chunk ([interleave][stage]).
  /// Chunk v of stage s holds num_layers / (stages * interleave) +
  /// offset[v][s] layers.
  std::vector<std::vector<int64_t>> offset;
  bool offsetForEveryStage = false; ///< a single int: offset[0][0] everywhere
  int64_t chunkOffset(int64_t chunk, int64_t stage) const {
    if (offset.empty()) {
      return 0;
    }
    const std::vector<int64_t> &row =
        offset[offset.size() == 1 ? 0 : static_cast<size_t>(chunk)];
    return offsetForEveryStage ? row[0] : row[static_cast<size_t>(stage)];
  }

  int64_t kvHeads() const { return numKvHeads ? numKvHeads : numHeads; }
  int64_t headDim() const {
    return headDimension ? *headDimension : hiddenSize / numHeads;
  }
  /// The FFN hidden width for this family and config.
  int64_t ffnHiddenSize() const;
};

struct ParallelConfig {
  int64_t dataParallel = 1;
  int64_t modelParallel = 1;
  int64_t pipelineStage = 1;
  int64_t contextParallel = 1;
  int64_t expertParallel = 1;
  int64_t microBatchNum = 1;
  int64_t gradientAggregationGroup = 4;
  bool useSeqParallel = false;
  bool vocabEmbDp = true;
  int64_t microBatchInterleaveNum = 1;
  /// parallel.pipeline_config.pipeline_scheduler: 1f1b (MindSpore's
  /// default) or gpipe.
  std::string pipelineScheduler = "1f1b";
  /// context_parallel_algo: colossalai_cp (MindFormers' default), ulysses_cp
  /// or hybrid_cp.
  std::string contextParallelAlgo = "colossalai_cp";

  int64_t deviceCount() const {
    return dataParallel * modelParallel * pipelineStage * contextParallel;
  }
};

/// Layer counts as MindFormers writes them: one row, a count per pipeline
/// stage (spread over the stage's chunks round-robin when
/// pp_interleave_num > 1), or one row per chunk ([interleave][stage]). A
/// count means the first layers of its stage or chunk; kAllLayers stands
/// for a `True` entry, 0 for `False`.
struct LayerCounts {
  static constexpr int64_t kAllLayers = INT64_MAX;
  std::vector<std::vector<int64_t>> rows;
  bool perChunk = false;
  bool empty() const { return rows.empty(); }
};

/// One of MindFormers' forms for `recompute` / `select_recompute` /
/// `select_comm_recompute` and their `_exclude`s.
struct RecomputeSelection {
  enum class Kind {
    None,          ///< false
    All,           ///< true: every layer
    LayersPerStage,///< [n0, n1, ...] or [[...], ...]: the first layers
    OpPatterns     ///< regexes over op paths, each with its own layer counts
  };
  struct Pattern {
    std::string regex;
    /// Empty: every layer.
    LayerCounts layers;
  };
  Kind kind = Kind::None;
  LayerCounts layers;
  std::vector<Pattern> patterns;
};

struct RecomputeConfig {
  RecomputeSelection recompute;
  RecomputeSelection selectRecompute;
  RecomputeSelection selectCommRecompute;
  /// Highest priority: the ops these match are kept, even in layers
  /// recomputed whole.
  RecomputeSelection selectRecomputeExclude;
  RecomputeSelection selectCommRecomputeExclude;
  bool parallelOptimizerCommRecompute = false;
  bool mpCommRecompute = true;
  bool recomputeSliceActivation = false;
};

struct OptimizerConfig {
  std::string type = "AdamW";
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  std::optional<double> learningRate;
};

struct LrScheduleConfig {
  std::string type = "constant";
  double learningRate = 1e-5;
  double lrEnd = 0.0;
  double warmupRatio = 0.0;
  int64_t warmupSteps = 0;
  double warmupLrInit = 0.0;
  int64_t totalSteps = -1;
  double power = 1.0;
};

struct RunnerConfig {
  int64_t epochs = 1;
  std::optional<int64_t> batchSize;
  int64_t gradientAccumulationSteps = 1;
  bool useClipGrad = false;
  double maxGradNorm = 1.0;
};

/// A YAML key's position, for op locations ("which line made this op").
struct KeyPosition {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
};

/// The whole validated config.
struct ModelSpec {
  std::string sourceFile;
  std::string modelName; ///< trainer.model_name, or the file's stem.
  RunMode runMode = RunMode::Train;
  int64_t seed = 0;
  bool useParallel = false;
  int contextMode = 0; ///< 0 graph, 1 pynative
  ModelConfig model;
  ParallelConfig parallel;
  /// The ranks model_parallel splits the program over (tensor parallelism
  /// as mf-partition builds it), or 1 when the program is not sharded.
  int64_t shardedModelParallel = 1;
  /// The data-parallel ranks of a training program (each runs
  /// runner_config.batch_size sequences; gradients and the loss are
  /// averaged over them), or 1.
  int64_t shardedDataParallel = 1;
  /// expert_parallel: the data-parallel ranks over which a mixture of
  /// experts' experts are split (each rank holds experts / this), with
  /// tokens exchanged by mf.all_to_all; 1 when every rank holds them all.
  int64_t shardedExpertParallel = 1;
  /// The ranks along the grid's axis 0: data-parallel ranks in training,
  /// or in predict the expert-parallel ones (each runs the same batch).
  int64_t dataAxisRanks() const {
    return std::max(shardedDataParallel, shardedExpertParallel);
  }
  /// context_parallel: the ranks each training sequence is split over
  /// (each holds seq_length / this positions; attention gathers every
  /// rank's keys and values, or trades the positions for a block of the
  /// heads with mf.all_to_all_dims, DeepSpeed-Ulysses' way), or 1.
  int64_t shardedContextParallel = 1;
  /// Whether context parallelism gathers every rank's keys and values for
  /// its queries (colossalai_cp), rather than trading positions for heads
  /// (ulysses_cp).
  bool contextGathersKeys() const {
    return shardedContextParallel > 1 &&
           parallel.contextParallelAlgo != "ulysses_cp";
  }
  /// The runs of each sequence's positions a context-parallel rank holds:
  /// 2 (Megatron's causal load balance: blocks r and 2c - 1 - r of 2c, so
  /// that every rank's queries see as many keys) when it gathers keys and
  /// 2c divides the sequence, else 1 (its block).
  int64_t contextRuns() const {
    return contextGathersKeys() &&
                   model.seqLength % (2 * shardedContextParallel) == 0
               ? 2
               : 1;
  }
  /// The positions of each sequence one rank's training entries hold.
  int64_t localSeqLength() const {
    return model.seqLength / shardedContextParallel;
  }
  /// The pipeline stages of a training program (each rank runs one
  /// stage's layers; micro_batch_num micro-batches a step, in a 1F1B
  /// schedule), or 1.
  int64_t shardedPipelineStages = 1;
  /// vocab_emb_dp: False under tensor parallelism: the embedding, lm_head
  /// and cross-entropy split by vocabulary over the model-parallel ranks.
  bool vocabParallel = false;
  /// parallel.enable_parallel_optimizer with data parallelism: AdamW's state
  /// and update sharded over the data-parallel ranks (ZeRO-1).
  bool parallelOptimizer = false;
  RecomputeConfig recompute;
  OptimizerConfig optimizer;
  LrScheduleConfig lrSchedule;
  RunnerConfig runner;

  /// Where each key the spec was read from sits, by dotted path.
  std::map<std::string, KeyPosition> keyPositions;
  /// Top-level sections accepted but only meaningful to MindSpore's trainer.
  std::vector<std::string> ignoredSections;
  /// The tokenizer mf-run reads text with (processor.tokenizer's file, an
  /// absolute path), or empty.
  std::string tokenizerPath;
  /// processor.tokenizer's chat_template, bos_token, eos_token (or empty).
  std::string chatTemplate, bosToken, eosToken;
  /// processor.tokenizer.type: GPT2Tokenizer, Qwen2Tokenizer, ...
  std::string tokenizerClass;
  /// load_checkpoint resolved against the YAML's folder (or empty).
  std::string loadCheckpoint;

  /// The batch size of the compiled entry points: runner_config.batch_size
  /// for train/finetune/eval, model_config.batch_size for predict.
  int64_t entryBatchSize() const;
  /// The position of `path`, or of the closest enclosing key that has one.
  KeyPosition positionOf(const std::string &path) const;
};

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_MODELSPEC_H
