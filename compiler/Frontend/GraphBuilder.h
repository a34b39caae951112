//===- GraphBuilder.h - helpers shared by the model IR builders -*- C++ -*-===//

#ifndef MFC_COMPILER_FRONTEND_GRAPHBUILDER_H
#define MFC_COMPILER_FRONTEND_GRAPHBUILDER_H

#include "compiler/Frontend/ModelBuilder.h"
#include "compiler/Frontend/ModelSpec.h"
#include "dialects/MF/IR/MFOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mfc {

/// The KV cache a forward pass reads and extends: per layer, one key and one
/// value tensor [batch, seq_length, kv_heads, head_dim], and the number of
/// tokens already in it. The forward pass replaces the tensors with the
/// updated ones.
struct KvCache {
  mlir::Value pastLength;
  /// A paged cache's block tables ([rows, blocks] i32), else null.
  mlir::Value blockTable;
  llvm::SmallVector<mlir::Value> keys;
  llvm::SmallVector<mlir::Value> values;
};

/// Builds ops into one module: parameters, casts, linear layers, locations.
class GraphBuilder {
public:
  GraphBuilder(mlir::ModuleOp module, const ModelSpec &spec);
  virtual ~GraphBuilder() = default;

  /// The logits [batch, seq, vocab] in f32 for token `ids` [batch, seq]
  /// ([batch, 1, vocab] while an entry selects one position, see
  /// logitsPosition_). With `cache`, attention reads and extends it.
  mlir::Value buildForward(mlir::Value ids, KvCache *cache) {
    mlir::Value hidden = embed(ids, cache);
    return head(layers(hidden, 0, spec_.model.numLayers, cache));
  }

  /// The forward in the pieces pipeline stages cut it into: the residual
  /// stream [batch, seq, hidden] of `ids`; layers [first, end) on it
  /// (`cache`'s past length places the tokens); the logits of the last
  /// layer's output (its final norm and the lm_head).
  virtual mlir::Value embed(mlir::Value ids, KvCache *cache) = 0;
  virtual mlir::Value layers(mlir::Value hidden, int64_t first, int64_t end,
                             KvCache *cache) = 0;
  virtual mlir::Value head(mlir::Value hidden) = 0;

  /// Declares all entry points of the spec's run mode.
  /// Fails (with an error at the YAML key) on a config that builds nothing
  /// sensible, such as LoRA target_modules that match no projection.
  mlir::LogicalResult buildEntries(const FrontendOptions &options);

protected:
  mlir::MLIRContext *context() { return module_.getContext(); }
  mlir::Type elementType(DType type);
  mlir::RankedTensorType tensorType(llvm::ArrayRef<int64_t> shape,
                                    mlir::Type elementType);
  llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);

  /// transformers' load-balancing loss of the routers in routers_ (its
  /// load_balancing_loss_func without an attention mask): E times the sum
  /// over experts of the share of (token, choice) pairs routed to each,
  /// times its mean router probability, over every routed layer's tokens
  /// together. Only the probabilities carry a gradient.
  mlir::Value loadBalancingLoss(mlir::Location loc);

  /// `modelPath` fused with the position of the YAML key `yamlKey`: a dotted
  /// path, a top-level key, or else a key of model.model_config.
  mlir::Location loc(const llvm::Twine &modelPath, llvm::StringRef yamlKey);

  /// Declares (once) and reads a parameter. `name` is the Hugging Face name,
  /// `mfName` the MindFormers one (may be empty). In a tensor-parallel
  /// program, `splitDim` (when not -1) is split over the model-parallel
  /// axis, in each of its `splitParts` equal parts (GPT-2's fused q, k,
  /// v); mf-partition derives the rest of the layout from these splits.
  mlir::Value param(llvm::StringRef name, llvm::StringRef mfName,
                    llvm::ArrayRef<int64_t> shape, mlir::mf::ParameterInit init,
                    mlir::Location loc, int64_t splitDim = -1,
                    int64_t splitParts = 1, mlir::Type stored = {});
  /// A normal-initialized weight with the config's init std.
  mlir::Value weight(llvm::StringRef name, llvm::StringRef mfName,
                     llvm::ArrayRef<int64_t> shape, mlir::Location loc,
                     int64_t splitDim = -1, int64_t splitParts = 1);

  /// A normal-initialized stack of weights [parts, ...] (`shape`), each
  /// slice a checkpoint tensor of its own (a layer's experts); under
  /// expert parallelism split along its experts over the data-parallel
  /// axis, so that each rank holds its experts.
  mlir::Value stackedWeight(llvm::StringRef name,
                            llvm::ArrayRef<std::string> parts,
                            llvm::ArrayRef<int64_t> shape, mlir::Location loc);
  /// Whether expert parallelism splits the experts over the data-parallel
  /// ranks (the grid's axis 0).
  bool expertParallel() { return grid_ && spec_.shardedExpertParallel > 1; }
  /// The grid's name and the data-parallel axis, for the exchanges.
  mlir::FlatSymbolRefAttr gridName() {
    return mlir::FlatSymbolRefAttr::get(grid_.getSymNameAttr());
  }
  static constexpr int16_t kDataParallelAxis = 0;
  /// Whether context parallelism splits each sequence over the ranks of
  /// the grid's context axis.
  bool contextParallel() { return grid_ && spec_.shardedContextParallel > 1; }
  /// Where run `run` of this rank's runs of `length` positions of each
  /// sequence starts (context parallelism; ModelSpec::contextRuns).
  mlir::Value contextRunStart(int64_t run, int64_t length, mlir::Location loc);
  /// colossalai_cp's attention: each run of this rank's queries `q` against
  /// every rank's keys and values (`k`, `v`, in position order) from its
  /// first position; merged heads.
  mlir::Value gatheredAttention(mlir::Value q, mlir::Value k, mlir::Value v,
                                const std::string &attentionPath);
  /// The positions of this rank's block of each sequence, [batch, localSeq].
  mlir::Value contextPositions(int64_t batch, int64_t localSeq,
                               mlir::Location loc);
  /// Every context-parallel rank's runs of `x` along `dim`, joined in
  /// position order, through mf.replicate: each rank's gradient of the
  /// whole is its queries' part, which the gradient sums over the ranks (a
  /// reduce-scatter).
  mlir::Value gatherOverContext(mlir::Value x, int64_t dim, mlir::Location loc);
  /// `x`'s blocks along `splitDim` traded over the context-parallel ranks
  /// for theirs along `concatDim` (mf.all_to_all_dims).
  mlir::Value exchangeOverContext(mlir::Value x, int64_t splitDim,
                                  int64_t concatDim, mlir::Location loc);

  mlir::Value castTo(mlir::Value value, mlir::Type elementType,
                     mlir::Location loc);
  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape,
                        mlir::Location loc);
  mlir::Value broadcastTo(mlir::Value value, llvm::ArrayRef<int64_t> shape,
                            mlir::Location loc);
  /// x . W (+ bias) in the compute dtype; `transposed` for [out, in] weights.
  mlir::Value linear(mlir::Value input, mlir::Value weight, mlir::Value bias,
                     bool transposed, mlir::Location loc);
  /// How model_parallel splits a projection (Megatron-LM's layout, which
  /// MindFormers uses): column-parallel by output features, row-parallel by
  /// input features (mf-partition adds the all-reduce after it), or not.
  enum class Parallel { None, Column, Row };

  /// `projected` plus, when pet_config's target_modules matches the
  /// projection's path or `alias` (MindFormers' module name where `path` is
  /// Hugging Face's, as for GPT-2), the LoRA branch
  /// (lora_alpha / lora_rank) * (x A^T) B^T with A [rank, in] (normal init)
  /// and B [out, rank] (zeros), parameters `<hfPrefix>.lora_A.weight` /
  /// `.lora_B.weight`. Under tensor parallelism the adapter follows its
  /// projection: B split by output features (in `parts`, as the
  /// projection's) for a column-parallel one, A by input features for a
  /// row-parallel one.
  mlir::Value withLora(mlir::Value input, mlir::Value projected,
                       const std::string &hfPrefix, const std::string &path,
                       int64_t outFeatures, int64_t inFeatures,
                       const std::string &alias = "",
                       Parallel parallel = Parallel::None, int64_t parts = 1);
  /// Positions [batch, seq] of the tokens: past_length + 0, 1, ...
  mlir::Value positions(int64_t batch, int64_t seq, mlir::Value pastLength,
                          mlir::Location loc);
  /// Causal attention of q [B,S,H,D] over k, v [B,S,Hkv,D]; with `cache`,
  /// k and v are first written into layer `layer`'s cache at past_length and
  /// attention reads the whole cache. Returns [B, S, H*D].
  mlir::Value causalAttention(mlir::Value q, mlir::Value k, mlir::Value v,
                              KvCache *cache, int64_t layer,
                              const std::string &attentionPath);
  /// Projects hidden states [batch, seq, hidden] to f32 logits with a
  /// [vocab, hidden] weight; only the row at logitsPosition_ when set.
  mlir::Value logits(mlir::Value hidden, mlir::Value headWeight,
                       mlir::Location loc);

  mlir::Type computeType() { return elementType(spec_.model.computeDtype); }
  mlir::Type paramType() { return elementType(spec_.model.paramInitType); }
  mlir::Type normType() {
    return elementType(spec_.model.layernormComputeType);
  }

  mlir::ModuleOp module_;
  const ModelSpec &spec_;
  mlir::OpBuilder builder_;
  /// Each routed layer's router probabilities [tokens, E] (f32) and chosen
  /// experts [tokens, k] in the entry being built, when the load-balancing
  /// loss joins its loss (output_router_logits).
  std::vector<std::pair<mlir::Value, mlir::Value>> routers_;

private:
  void buildPredictEntries(const FrontendOptions &options);
  void buildLossEntry();
  /// The cross-entropy of `logits` against `labels` (both of a whole
  /// batch), as forward_loss returns it.
  mlir::Value loss(mlir::Value logits, mlir::Value labels);
  /// A pipelined training module's entries: per stage s, `stage<s>_forward`
  /// (attribute mf.stage = s) from its input (input_ids on the first stage,
  /// else the previous stage's hidden states) to its output (hidden states,
  /// or on the last stage the loss of `labels`).
  void buildStageEntries();
  mlir::func::FuncOp beginEntry(llvm::StringRef name, mlir::mf::EntryRole role,
                                llvm::ArrayRef<std::string> inputNames,
                                llvm::ArrayRef<mlir::Type> inputTypes);
  void finishEntry(mlir::func::FuncOp entry, llvm::ArrayRef<mlir::Value> results,
                   llvm::ArrayRef<std::string> resultNames);

  /// While set (an i32 scalar of the entry being built), logits() projects
  /// only the hidden state at that position: generation needs the logits
  /// of the last prompt token alone, and the lm_head over every position
  /// was ~23% of llama-100m's prefill FLOPs.
  mlir::Value logitsPosition_;
  llvm::StringMap<mlir::mf::ParameterOp> parameters_;
  bool warnedLoraDropout_ = false;
  /// The projections LoRA's target_modules was matched against, and how
  /// many it matched.
  std::vector<std::string> loraCandidates_;
  int64_t loraAdapters_ = 0;
  mlir::OpBuilder parameterBuilder_;
  /// The device grid of a tensor-parallel program (else null).
  mlir::shard::GridOp grid_;
  static constexpr int16_t kModelParallelAxis = 1;
};

/// The LLaMA family (LLaMA 1/2/3, Qwen2, Baichuan-style decoders).
std::unique_ptr<GraphBuilder> createLlamaBuilder(mlir::ModuleOp module,
                                                 const ModelSpec &spec);
/// GPT-2.
std::unique_ptr<GraphBuilder> createGPT2Builder(mlir::ModuleOp module,
                                                const ModelSpec &spec);

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_GRAPHBUILDER_H
