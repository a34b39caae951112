//===- GPT2Builder.cpp - mf IR for GPT-2 ----------------------------------===//
//
// GPT-2: learned position embeddings, pre-LayerNorm blocks, fused q/k/v
// projection, tanh GELU (or fast_gelu), Conv1D weights stored [in, out], LM
// head tied to the token embedding. Names follow the Hugging Face checkpoint.
//
//===----------------------------------------------------------------------===//

#include "compiler/Frontend/GraphBuilder.h"

using namespace mlir;
using namespace mfc;

namespace {

class GPT2Builder : public GraphBuilder {
public:
  using GraphBuilder::GraphBuilder;

  Value embed(Value ids, KvCache *cache) override {
    const ModelConfig &model = spec_.model;
    int64_t batch = shapeOf(ids)[0], seq = shapeOf(ids)[1];
    int64_t hiddenSize = model.hiddenSize;
    Location wteLoc = loc("transformer.wte", "vocab_size");
    Value tokens = mf::EmbeddingOp::create(builder_, wteLoc, wte(), ids);
    Location wpeLoc = loc("transformer.wpe", "seq_length");
    Value wpe = weight("transformer.wpe.weight", "", {model.seqLength, hiddenSize},
                       wpeLoc);
    Value positionIds =
        contextParallel()
            ? contextPositions(batch, seq, wpeLoc)
            : positions(batch, seq, cache ? cache->pastLength : Value(),
                        wpeLoc);
    Value placed = mf::EmbeddingOp::create(builder_, wpeLoc, wpe, positionIds);
    Value hidden = mf::AddOp::create(builder_, wpeLoc, tokens, placed);
    return castTo(hidden, computeType(), wpeLoc);
  }

  Value layers(Value hidden, int64_t first, int64_t end,
               KvCache *cache) override {
    for (int64_t layer = first; layer < end; ++layer) {
      hidden = block(layer, hidden, cache);
    }
    return hidden;
  }

  Value head(Value hidden) override {
    Value normed = layerNorm(hidden, "transformer.ln_f");
    return logits(normed, wte(), loc("lm_head", "vocab_size"));
  }

private:
  /// The token embedding, tied to the LM head; vocab_emb_dp: False splits
  /// it by vocabulary.
  Value wte() {
    const ModelConfig &model = spec_.model;
    return weight(
        "transformer.wte.weight", "", {model.vocabSize, model.hiddenSize},
        loc("transformer.wte", "vocab_size"), spec_.vocabParallel ? 0 : -1);
  }

  Value layerNorm(Value input, const std::string &path) {
    Location normLoc = loc(path, "layernorm_compute_type");
    int64_t hiddenSize = spec_.model.hiddenSize;
    Value gamma = param(path + ".weight", "", {hiddenSize},
                        mf::ParameterInit::ones, normLoc);
    Value beta = param(path + ".bias", "", {hiddenSize},
                       mf::ParameterInit::zeros, normLoc);
    Value normed = mf::LayerNormOp::create(
        builder_, normLoc, castTo(input, normType(), normLoc),
        castTo(gamma, normType(), normLoc), castTo(beta, normType(), normLoc),
        builder_.getF64FloatAttr(spec_.model.layerNormEps));
    return castTo(normed, computeType(), normLoc);
  }

  /// A Conv1D: x W + b with W stored [in, out]. `mindFormersPath` names
  /// the module in MindFormers' GPT-2 (LoRA's target_modules may use it).
  Value conv1d(Value input, const std::string &path, int64_t inFeatures,
               int64_t outFeatures, StringRef yamlKey, Parallel parallel,
               int64_t parts = 1, const std::string &mindFormersPath = "") {
    Location convLoc = loc(path, yamlKey);
    Value w = weight(path + ".weight", "", {inFeatures, outFeatures}, convLoc,
                     parallel == Parallel::Column ? 1
                     : parallel == Parallel::Row  ? 0
                                                  : -1,
                     parts);
    Value b = param(path + ".bias", "", {outFeatures}, mf::ParameterInit::zeros,
                    convLoc, parallel == Parallel::Column ? 0 : -1, parts);
    return withLora(input, linear(input, w, b, /*transposed=*/false, convLoc),
                    path, path, outFeatures, inFeatures, mindFormersPath,
                    parallel, parts);
  }

  Value block(int64_t layer, Value hidden, KvCache *cache) {
    const ModelConfig &model = spec_.model;
    int64_t batch = shapeOf(hidden)[0], seq = shapeOf(hidden)[1];
    int64_t heads = model.numHeads, headDim = model.headDim();
    int64_t hiddenSize = model.hiddenSize;
    std::string path = "transformer.h." + std::to_string(layer);
    std::string attn = path + ".attn";
    // MindFormers' GPT-2 names: q, k, v are dense1-3 of `attention`, the
    // MLP is `output` (mapping, projection).
    std::string mindFormers = "backbone.blocks." + std::to_string(layer);

    Value normed = layerNorm(hidden, path + ".ln_1");
    // Each rank's heads' q, k and v: its share of each third.
    Value qkv = conv1d(normed, attn + ".c_attn", hiddenSize, 3 * hiddenSize,
                       "num_heads", Parallel::Column, /*parts=*/3);
    Location splitLoc = loc(attn + ".split_heads", "num_heads");
    auto part = [&](int64_t index) {
      Value slice = mf::SliceOp::create(
          builder_, splitLoc, tensorType({batch, seq, hiddenSize}, computeType()),
          qkv, ArrayRef<int64_t>{0, 0, index * hiddenSize});
      // A LoRA adapter on one of q, k, v (MindFormers' dense1-3).
      slice = withLora(normed, slice,
                       attn + ".c_attn." + std::string(1, "qkv"[index]),
                       mindFormers + ".attention.dense" +
                           std::to_string(index + 1),
                       hiddenSize, hiddenSize, "", Parallel::Column);
      return reshape(slice, {batch, seq, heads, headDim}, splitLoc);
    };
    Value q = part(0), k = part(1), v = part(2);

    Value attended = causalAttention(q, k, v, cache, layer, attn);
    Value output = conv1d(attended, attn + ".c_proj", hiddenSize, hiddenSize,
                          "hidden_size", Parallel::Row, 1,
                          mindFormers + ".attention.projection");
    hidden = mf::AddOp::create(builder_, loc(path + ".attn_add", "num_layers"),
                               hidden, output);

    normed = layerNorm(hidden, path + ".ln_2");
    int64_t ffnSize = model.ffnHiddenSize();
    std::string mlp = path + ".mlp";
    Value expanded = conv1d(normed, mlp + ".c_fc", hiddenSize, ffnSize,
                            "expand_ratio", Parallel::Column, 1,
                            mindFormers + ".output.mapping");
    // MindFormers' gelu is MindSpore's GELU(approximate=True), as gelu_new.
    Location act = loc(mlp + ".act", "hidden_act");
    Value activated =
        model.hiddenAct == "fast_gelu"
            ? Value(mf::FastGeluOp::create(builder_, act, expanded))
            : Value(mf::GeluOp::create(builder_, act, expanded,
                                       mf::GeluApproximation::tanh));
    Value projected = conv1d(activated, mlp + ".c_proj", ffnSize, hiddenSize,
                             "expand_ratio", Parallel::Row, 1,
                             mindFormers + ".output.projection");
    return mf::AddOp::create(builder_, loc(path + ".mlp_add", "num_layers"),
                             hidden, projected);
  }
};

} // namespace

std::unique_ptr<GraphBuilder> mfc::createGPT2Builder(ModuleOp module,
                                                     const ModelSpec &spec) {
  return std::make_unique<GPT2Builder>(module, spec);
}
