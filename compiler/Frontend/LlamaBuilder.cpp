//===- LlamaBuilder.cpp - mf IR for LLaMA-family decoders -----------------===//
//
// LLaMA 1/2/3, Qwen2/3 and Baichuan-style decoders: RMSNorm, rotary
// embeddings (rotate-half), grouped-query attention with optional q/k/v bias
// and per-head q/k RMSNorm (Qwen3), a SwiGLU feed-forward, optionally tied
// embeddings and a float32 residual stream. Parameters carry Hugging Face
// names with the MindFormers name alongside; op locations use MindFormers'
// module paths (model.layers.3.attention.wq).
//
//===----------------------------------------------------------------------===//

#include "compiler/Frontend/GraphBuilder.h"

using namespace mlir;
using namespace mfc;

namespace {

class LlamaBuilder : public GraphBuilder {
public:
  using GraphBuilder::GraphBuilder;

  Value embed(Value ids, KvCache *) override {
    Location embedLoc = loc("model.tok_embeddings", "vocab_size");
    Value hidden = mf::EmbeddingOp::create(builder_, embedLoc, table(), ids);
    return castTo(hidden, residualType(), embedLoc);
  }

  Value layers(Value hidden, int64_t first, int64_t end,
               KvCache *cache) override {
    int64_t batch = shapeOf(hidden)[0], seq = shapeOf(hidden)[1];
    Location positionsLoc = loc("model.rotary_embedding", "theta");
    Value positionIds =
        contextParallel()
            ? contextPositions(batch, seq, positionsLoc)
            : positions(batch, seq, cache ? cache->pastLength : Value(),
                        positionsLoc);
    for (int64_t layer = first; layer < end; ++layer) {
      hidden = decoderLayer(layer, hidden, positionIds, cache);
    }
    return hidden;
  }

  Value head(Value hidden) override {
    const ModelConfig &model = spec_.model;
    Value normed = rmsNorm(hidden, "model.norm.weight", "model.norm_out");
    Location headLoc = loc("lm_head", "vocab_size");
    Value weights = model.tieWordEmbeddings
                        ? table()
                        : weight("lm_head.weight", "lm_head.weight",
                                 {model.vocabSize, model.hiddenSize}, headLoc,
                                 vocabSplit());
    return logits(normed, weights, headLoc);
  }

private:
  /// vocab_emb_dp: False splits the table (and the lm_head) by vocabulary.
  int64_t vocabSplit() { return spec_.vocabParallel ? 0 : -1; }

  Value table() {
    const ModelConfig &model = spec_.model;
    return weight("model.embed_tokens.weight",
                  "model.tok_embeddings.embedding_weight",
                  {model.vocabSize, model.hiddenSize},
                  loc("model.tok_embeddings", "vocab_size"), vocabSplit());
  }

  /// fp32_residual_connection keeps the residual stream in float32.
  Type residualType() {
    return spec_.model.fp32ResidualConnection ? builder_.getF32Type()
                                              : computeType();
  }

  Value residualAdd(Value hidden, Value branch, StringRef path) {
    Location addLoc = loc(path, "num_layers");
    return mf::AddOp::create(builder_, addLoc, hidden,
                             castTo(branch, residualType(), addLoc));
  }

  /// RMSNorm over the last dimension (the hidden size, or a head's for
  /// qk_layernorm), its weight as wide.
  Value rmsNorm(Value input, StringRef weightName, StringRef path,
                StringRef yamlKey = "rms_norm_eps") {
    Location normLoc = loc(path, yamlKey);
    std::string mfName = (path + ".weight").str();
    Value gamma = param(weightName, mfName, {shapeOf(input).back()},
                        mf::ParameterInit::ones, normLoc);
    Value normed = mf::RmsNormOp::create(
        builder_, normLoc, castTo(input, normType(), normLoc),
        castTo(gamma, normType(), normLoc),
        builder_.getF64FloatAttr(spec_.model.rmsNormEps));
    return castTo(normed, computeType(), normLoc);
  }

  /// A projection `x W^T (+ b)` of a Linear stored [out, in].
  Value projection(Value input, const std::string &hfPrefix,
                   const std::string &path, int64_t outFeatures,
                   int64_t inFeatures, bool hasBias, StringRef yamlKey,
                   Parallel parallel) {
    Location projLoc = loc(path, yamlKey);
    Value w = weight(hfPrefix + ".weight", path + ".weight",
                     {outFeatures, inFeatures}, projLoc,
                     parallel == Parallel::Column ? 0 : 1);
    Value b;
    if (hasBias) {
      b = param(hfPrefix + ".bias", path + ".bias", {outFeatures},
                mf::ParameterInit::zeros, projLoc,
                parallel == Parallel::Column ? 0 : -1);
    }
    return withLora(input, linear(input, w, b, /*transposed=*/true, projLoc),
                    hfPrefix, path, outFeatures, inFeatures, "", parallel);
  }

  Value rope(Value heads, Value positionIds, const std::string &path) {
    Location ropeLoc = loc(path, "theta");
    Type rotary = elementType(spec_.model.rotaryDtype);
    const std::vector<double> &scale = spec_.model.ropeFrequencyScale;
    Value rotated = mf::RopeOp::create(
        builder_, ropeLoc, castTo(heads, rotary, ropeLoc), positionIds,
        builder_.getF64FloatAttr(spec_.model.theta), UnitAttr(),
        scale.empty() ? DenseF64ArrayAttr() : builder_.getDenseF64ArrayAttr(scale));
    return castTo(rotated, computeType(), ropeLoc);
  }

  Value decoderLayer(int64_t layer, Value hidden, Value positionIds,
                     KvCache *cache) {
    const ModelConfig &model = spec_.model;
    int64_t batch = shapeOf(hidden)[0], seq = shapeOf(hidden)[1];
    int64_t heads = model.numHeads, kvHeads = model.kvHeads();
    int64_t headDim = model.headDim(), hiddenSize = model.hiddenSize;
    std::string hf = "model.layers." + std::to_string(layer);
    std::string path = hf; // MindFormers and HF share the layer prefix.
    StringRef kvKey = model.numKvHeads ? "n_kv_heads" : "num_heads";

    // Attention block.
    Value normed = rmsNorm(hidden, hf + ".input_layernorm.weight",
                           path + ".attention_norm");
    std::string attn = path + ".attention";
    Value q = projection(normed, hf + ".self_attn.q_proj", attn + ".wq",
                         heads * headDim, hiddenSize, model.qkvHasBias,
                         "num_heads", Parallel::Column);
    Value k = projection(normed, hf + ".self_attn.k_proj", attn + ".wk",
                         kvHeads * headDim, hiddenSize, model.qkvHasBias, kvKey,
                         Parallel::Column);
    Value v = projection(normed, hf + ".self_attn.v_proj", attn + ".wv",
                         kvHeads * headDim, hiddenSize, model.qkvHasBias, kvKey,
                         Parallel::Column);
    Location splitLoc = loc(attn + ".split_heads", "num_heads");
    q = reshape(q, {batch, seq, heads, headDim}, splitLoc);
    k = reshape(k, {batch, seq, kvHeads, headDim}, splitLoc);
    v = reshape(v, {batch, seq, kvHeads, headDim}, splitLoc);
    if (model.qkLayernorm) {
      q = rmsNorm(q, hf + ".self_attn.q_norm.weight", attn + ".q_layernorm",
                  "qk_layernorm");
      k = rmsNorm(k, hf + ".self_attn.k_norm.weight", attn + ".k_layernorm",
                  "qk_layernorm");
    }
    q = rope(q, positionIds, attn + ".rotary_embedding.q");
    k = rope(k, positionIds, attn + ".rotary_embedding.k");

    Value attended = causalAttention(q, k, v, cache, layer, attn);
    Value output = projection(attended, hf + ".self_attn.o_proj", attn + ".wo",
                              hiddenSize, heads * headDim, false, "hidden_size",
                              Parallel::Row);
    hidden = residualAdd(hidden, output, path + ".attention_add");

    // Feed-forward block: w2(silu(w1 x) * w3 x), or a mixture of experts.
    normed = rmsNorm(hidden, hf + ".post_attention_layernorm.weight",
                     path + ".ffn_norm");
    if (model.moe.routed(layer)) {
      return residualAdd(hidden, mixtureOfExperts(normed, hf, path),
                         path + ".ffn_add");
    }
    StringRef ffnKey = model.intermediateSize ? "intermediate_size"
                       : model.ffnDimMultiplier ? "ffn_dim_multiplier"
                                                : "multiple_of";
    Value down = feedForward(normed, hf + ".mlp", path + ".feed_forward",
                             model.ffnHiddenSize(), ffnKey);
    return residualAdd(hidden, down, path + ".ffn_add");
  }

  /// A SwiGLU feed-forward w2(silu(w1 x) * w3 x) of `width`, its weights
  /// Hugging Face's `hf`.gate_proj/up_proj/down_proj and MindFormers'
  /// `path`.w1/w3/w2.
  Value feedForward(Value normed, const std::string &hf,
                    const std::string &path, int64_t width, StringRef key) {
    int64_t hiddenSize = spec_.model.hiddenSize;
    Value gate = projection(normed, hf + ".gate_proj", path + ".w1", width,
                            hiddenSize, false, key, Parallel::Column);
    Value up = projection(normed, hf + ".up_proj", path + ".w3", width,
                          hiddenSize, false, key, Parallel::Column);
    // One op for MindFormers' w1 activation and mul: it answers to both
    // names (select_recompute's default patterns name each).
    Location swigluLoc = mf::getModelPathsLoc(
        builder_.getContext(),
        {loc(path + ".mul", key), loc(path + ".w1.activation.silu", key)});
    Value activated = mf::SwiGluOp::create(builder_, swigluLoc, gate, up);
    return projection(activated, hf + ".down_proj", path + ".w2", hiddenSize,
                      width, false, key, Parallel::Row);
  }

  /// A routed feed-forward (dropless): the router's softmax in f32 chooses
  /// k experts per token (renormalized with norm_topk_prob), each token's
  /// rows go to its experts in expert order, every expert's SwiGLU runs as
  /// grouped matmuls over all experts, and the rows come back weighted.
  Value mixtureOfExperts(Value normed, const std::string &hf,
                         const std::string &path) {
    const MoeConfig &moe = spec_.model.moe;
    int64_t batch = shapeOf(normed)[0], seq = shapeOf(normed)[1];
    int64_t tokens = batch * seq, hiddenSize = spec_.model.hiddenSize;
    int64_t experts = moe.numExperts, k = moe.expertsPerToken;
    std::string block = hf + (moe.mixtralNames ? ".block_sparse_moe" : ".mlp");
    std::string moePath = path + ".feed_forward";
    Location routerLoc = loc(moePath + ".router", "num_experts_per_tok");
    Value x = reshape(normed, {tokens, hiddenSize}, routerLoc);

    // The router: logits in router_dense_type (MindFormers' float32), or
    // the compute dtype (Hugging Face's), then a float32 softmax.
    Type routerType =
        moe.routerType ? elementType(*moe.routerType) : computeType();
    // MindFormers keeps the router's weight in router_dense_type too.
    // MindFormers' Mixtral keeps it as feed_forward.router.dense (r1.5.0
    // research/mixtral/convert_weight.py).
    std::string routerName =
        moe.mixtralNames ? moePath + ".router.dense.weight" : "";
    Value gate = param(block + ".gate.weight", routerName,
                       {experts, hiddenSize}, mf::ParameterInit::normal,
                       routerLoc, -1, 1, moe.routerType ? routerType : Type());
    Value logits = mf::MatmulOp::create(
        builder_, routerLoc, castTo(x, routerType, routerLoc),
        castTo(gate, routerType, routerLoc),
        /*transpose_lhs=*/false, /*transpose_rhs=*/true);
    Type f32 = builder_.getF32Type();
    Value probs = mf::SoftmaxOp::create(builder_, routerLoc,
                                        castTo(logits, f32, routerLoc), 1);
    auto chosen = mf::TopKOp::create(builder_, routerLoc, probs, k);
    if (moe.auxLossCoef > 0) {
      routers_.emplace_back(probs, chosen.getIndices());
    }
    Value weights = chosen.getValues();
    auto splat = [&](double value, ArrayRef<int64_t> shape, Location at) {
      RankedTensorType type = tensorType(shape, f32);
      return mf::ConstantOp::create(
          builder_, at,
          DenseElementsAttr::get(type, builder_.getF32FloatAttr(value)));
    };
    if (moe.normTopkProb) {
      Location normLoc = loc(moePath + ".router", "norm_topk_prob");
      Value sum = mf::ReduceSumOp::create(builder_, normLoc, weights, 1);
      if (moe.normEpsilon > 0) {
        sum = mf::AddOp::create(builder_, normLoc, sum,
                                splat(moe.normEpsilon, {tokens, 1}, normLoc));
      }
      weights = mf::DivOp::create(builder_, normLoc, weights,
                                  broadcastTo(sum, {tokens, k}, normLoc));
    }
    if (moe.routedScalingFactor != 1.0 &&
        (moe.scaleNormalized || !moe.normTopkProb)) {
      Location scaleLoc = loc(moePath + ".router", "routed_scaling_factor");
      weights = mf::MulOp::create(
          builder_, scaleLoc, weights,
          splat(moe.routedScalingFactor, {tokens, k}, scaleLoc));
    }
    weights = castTo(weights, computeType(), routerLoc);

    // Dropless, or MindFormers' capacity per expert (training and eval).
    int64_t capacity = moe.capacity(tokens);
    Location routeLoc = loc(moePath + ".dispatch",
                            capacity ? "capacity_factor" : "num_experts");
    auto route = mf::MoeRouteOp::create(
        builder_, routeLoc, chosen.getIndices(), experts, capacity,
        /*choice_order=*/capacity > 0 && !moe.sequenceDropOrder);
    Value rows = mf::MoeDispatchOp::create(builder_, routeLoc,
                                           castTo(x, computeType(), routeLoc),
                                           route.getPositions(),
                                           /*weights=*/Value());

    // Expert parallelism: each rank holds experts / ep consecutive experts;
    // the rows go to the ranks holding their experts (counts first), arrive
    // in groups by sender, and go back after the experts' SwiGLU.
    Value groups = route.getOffsets(), expertRows = rows;
    auto axes = builder_.getDenseI16ArrayAttr({kDataParallelAxis});
    Location exchangeLoc =
        loc(moePath + ".dispatch", "parallel_config.expert_parallel");
    if (expertParallel()) {
      groups = mf::AllToAllOffsetsOp::create(
          builder_, exchangeLoc, route.getOffsets(), gridName(), axes);
      // At most every rank's pairs arrive (with a capacity, at most the
      // capacity of each of this rank's experts from each rank).
      int64_t ranks = spec_.shardedExpertParallel;
      int64_t bound = ranks * tokens * k;
      if (capacity > 0) {
        bound = std::min(bound, ranks * (experts / ranks) * capacity);
      }
      expertRows = mf::AllToAllOp::create(
          builder_, exchangeLoc, tensorType({bound, hiddenSize}, computeType()),
          rows, route.getOffsets(), groups, gridName(), axes);
    }

    int64_t width = moe.expertWidth;
    StringRef widthKey =
        moe.mixtralNames ? "intermediate_size" : "moe_intermediate_size";
    auto projections = [&](StringRef hfName, StringRef mixtralName, int64_t out,
                           int64_t in, Value input) {
      Location projLoc = loc(moePath + ".experts." + mixtralName, widthKey);
      StringRef projName = moe.mixtralNames ? mixtralName : hfName;
      SmallVector<std::string> names;
      for (int64_t e = 0; e < experts; ++e) {
        names.push_back(block + ".experts." + std::to_string(e) + "." +
                        projName.str() + ".weight");
      }
      SmallVector<Value> perExpert;
      if (expertParallel()) {
        // One stack of the experts, split by expert over the ranks.
        perExpert.push_back(
            castTo(stackedWeight(block + ".experts." + projName.str(), names,
                                 {experts, out, in}, projLoc),
                   computeType(), projLoc));
      } else {
        // Tensor parallelism inside each expert: w1 and w3 by output
        // features, w2 by input features (Megatron's layout).
        int64_t splitDim =
            projName == (moe.mixtralNames ? "w2" : "down_proj") ? 1 : 0;
        for (const std::string &name : names) {
          perExpert.push_back(
              castTo(weight(name, "", {out, in}, projLoc, splitDim),
                     computeType(), projLoc));
        }
      }
      return mf::GroupedMatmulOp::create(builder_, projLoc, input, groups,
                                         perExpert,
                                         /*transpose_rhs=*/true)
          .getResult();
    };
    Value gated = projections("gate_proj", "w1", width, hiddenSize, expertRows);
    Value up = projections("up_proj", "w3", width, hiddenSize, expertRows);
    Value activated = mf::SwiGluOp::create(
        builder_, loc(moePath + ".experts.mul", widthKey), gated, up);
    Value down = projections("down_proj", "w2", hiddenSize, width, activated);
    if (expertParallel()) {
      down =
          mf::AllToAllOp::create(builder_, exchangeLoc, rows.getType(), down,
                                 groups, route.getOffsets(), gridName(), axes);
    }
    Location combineLoc = loc(moePath + ".combine", "num_experts_per_tok");
    Value combined = mf::MoeCombineOp::create(builder_, combineLoc, down,
                                              route.getPositions(), weights);
    combined = reshape(combined, {batch, seq, hiddenSize}, combineLoc);
    if (moe.sharedExpertWidth == 0) {
      return combined;
    }
    // Qwen2-MoE's shared expert, every token's, scaled by its gate.
    Location sharedLoc =
        loc(moePath + ".shared_experts", "shared_expert_intermediate_size");
    Value shared = feedForward(
        normed, hf + ".mlp.shared_expert", moePath + ".shared_experts",
        moe.sharedExpertWidth, "shared_expert_intermediate_size");
    if (moe.sharedExpertGated) {
      // The gate in the router's dtype (MindFormers: router_dense_type),
      // its sigmoid in float32, rounded once (as torch.sigmoid).
      Value sharedGate =
          param(hf + ".mlp.shared_expert_gate.weight", "", {1, hiddenSize},
                mf::ParameterInit::normal, sharedLoc, -1, 1,
                moe.routerType ? routerType : Type());
      Value logit = mf::MatmulOp::create(
          builder_, sharedLoc, castTo(normed, routerType, sharedLoc),
          castTo(sharedGate, routerType, sharedLoc),
          /*transpose_lhs=*/false, /*transpose_rhs=*/true);
      Value scale = castTo(
          sigmoid(castTo(logit, builder_.getF32Type(), sharedLoc), sharedLoc),
          computeType(), sharedLoc);
      shared = mf::MulOp::create(builder_, sharedLoc,
                                 broadcastTo(scale, shapeOf(shared), sharedLoc),
                                 shared);
    }
    return mf::AddOp::create(builder_, sharedLoc,
                             castTo(combined, computeType(), sharedLoc),
                             shared);
  }

  /// 1 / (1 + exp(-x)), of mf's elementwise ops (fused like any chain).
  Value sigmoid(Value x, Location at) {
    auto type = cast<RankedTensorType>(x.getType());
    Value one = mf::ConstantOp::create(
        builder_, at,
        DenseElementsAttr::get(
            type, builder_.getFloatAttr(type.getElementType(), 1.0)));
    Value denominator = mf::AddOp::create(
        builder_, at, one,
        mf::ExpOp::create(builder_, at, mf::NegOp::create(builder_, at, x)));
    return mf::DivOp::create(builder_, at, one, denominator);
  }
};

} // namespace

std::unique_ptr<GraphBuilder> mfc::createLlamaBuilder(ModuleOp module,
                                                      const ModelSpec &spec) {
  return std::make_unique<LlamaBuilder>(module, spec);
}
