//===- ShapeRules.h - result types of the ops, written once -----*- C++ -*-===//
//
// What an op's results are, given its operands' types and its attributes,
// or why they cannot be: one rule per op, in plain C++ so that both sides
// of model.bin call it. The mf dialect's `inferReturnTypes` calls a rule to
// build and verify the op (its declared types must be the inferred ones);
// the runtime's loader calls the same rule on every op it reads, so a
// model.bin the compiler would not have written is refused before anything
// runs. (StableHLO's TypeInference.cpp is the model: one library that its
// dialects' inference hooks call.)
//
//===----------------------------------------------------------------------===//

#ifndef MFC_SHAPES_SHAPERULES_H
#define MFC_SHAPES_SHAPERULES_H

#include <cstdint>
#include <string>
#include <vector>

namespace mfshapes {

/// An element type, in model.bin's DType order.
enum class Element : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I8 = 4 };

struct TensorInfo {
  Element element;
  std::vector<int64_t> shape;

  bool operator==(const TensorInfo &other) const {
    return element == other.element && shape == other.shape;
  }
};

/// An op's result types, or (when `error` is not empty) why its operands
/// and attributes have none.
struct Inferred {
  std::vector<TensorInfo> results;
  std::string error;
  /// What the results are, for a message about a declared result that
  /// differs ("the input with dim 1 reduced to 1"); may be empty.
  std::string note = "";

  explicit operator bool() const { return error.empty(); }
};

// Rules of ops whose results their operands and attributes determine.

/// mf.matmul: [..., M, K] x [K, N] (or [..., K, N]: batched alike), either
/// side transposed, in the operands' one element type.
Inferred inferMatmul(const TensorInfo &lhs, const TensorInfo &rhs,
                     bool transposeLhs, bool transposeRhs);

/// mf.transpose: the input's dimensions in `permutation`'s order.
Inferred inferTranspose(const TensorInfo &input,
                        const std::vector<int64_t> &permutation);

/// mf.reduce_sum / mf.reduce_max: `dimension` reduced to 1.
Inferred inferReduction(const TensorInfo &input, int64_t dimension);

/// mf.embedding: the rows of a [vocab, hidden] table that `ids` name.
Inferred inferEmbedding(const TensorInfo &table, const TensorInfo &ids);

/// mf.rms_norm / mf.layer_norm: the input's type; each of `weights` (named
/// `weightsName` in messages) a vector of its last dimension.
Inferred inferNorm(const TensorInfo &input,
                   const std::vector<TensorInfo> &weights,
                   const std::string &weightsName);

/// mf.rope: [batch, seq, heads, even head_dim] rotated at `positions`
/// [batch, seq], by `theta` and head_dim / 2 frequency scales (or none).
Inferred inferRope(const TensorInfo &input, const TensorInfo &positions,
                   double theta, const std::vector<double> &frequencyScale);

/// mf.cross_entropy: the mean loss (f32 scalar) of logits [tokens, vocab]
/// against labels [tokens].
Inferred inferCrossEntropy(const TensorInfo &logits, const TensorInfo &labels);

/// mf.cross_entropy_grad: the logits' gradient from the loss's (an f32
/// scalar), in the logits' type.
Inferred inferCrossEntropyGrad(const TensorInfo &logits,
                               const TensorInfo &labels,
                               const TensorInfo &gradient);

/// mf.kv_cache_write: `update` [batch, len, kv_heads, head_dim] written
/// into `cache` at `position` (a scalar, or one per batch row); with a
/// `blockTable`, into a pool of blocks [blocks, block_size, kv_heads,
/// head_dim] where the table maps each row's positions. The result is the
/// cache.
Inferred inferKvCacheWrite(const TensorInfo &cache, const TensorInfo &update,
                           const TensorInfo &position,
                           const TensorInfo *blockTable);

/// mf.attention: query [batch, seq, heads, head_dim] over key and value
/// [batch, kv_len, kv_heads, head_dim] (heads a multiple of kv_heads), read
/// to `pastLength` (a scalar or one per row) when given; with a
/// `blockTable`, key and value are pools of blocks read where it maps each
/// row. An int8 cache is read with `keyScale`/`valueScale` [kv_heads,
/// head_dim] of the query's type. The result is the query's type.
Inferred inferAttention(const TensorInfo &query, const TensorInfo &key,
                        const TensorInfo &value, const TensorInfo *pastLength,
                        const TensorInfo *blockTable,
                        const TensorInfo *keyScale,
                        const TensorInfo *valueScale, bool causal);

// Rules of ops whose declared result says what they make (a shape, a
// type): why `result` does not fit the operands, empty when it does.

/// mf.embedding_grad: a [vocab, hidden] table's gradient from `ids` and
/// the rows' gradient (the ids' shape + [hidden]).
std::string checkEmbeddingGrad(const TensorInfo &ids, const TensorInfo &grad,
                               const TensorInfo &result);

/// mf.rms_norm_grad (`weights` 1) and mf.layer_norm_grad (2: weight and
/// bias alike): the gradient of operand `wrt` (0 the input, then the
/// weights) from the result's, `grad`.
std::string checkNormGrad(const TensorInfo &input, const TensorInfo &weight,
                          const TensorInfo &grad, const TensorInfo &result,
                          int64_t wrt, int64_t weights);

/// mf.attention_grad: the gradient of the query, key or value (`wrt` 0, 1,
/// 2) from the result's, `grad`.
std::string checkAttentionGrad(const TensorInfo &query, const TensorInfo &key,
                               const TensorInfo &value, const TensorInfo &grad,
                               const TensorInfo *pastLength,
                               const TensorInfo &result, int64_t wrt);

/// `dimension` names one of `rank` dimensions (mf.softmax, mf.iota).
std::string checkDimension(int64_t dimension, int64_t rank);

/// mf.concat: inputs of the result's element type, rank and dimensions but
/// along `dimension`, where they add up to the result's.
std::string checkConcat(const std::vector<TensorInfo> &inputs,
                        const TensorInfo &result, int64_t dimension);

/// mf.slice: the result is a box of the input at `offsets`, of its element
/// type.
std::string checkSlice(const TensorInfo &input, const TensorInfo &result,
                       const std::vector<int64_t> &offsets);

/// mf.pad: the input is a box of the result at `offsets`, of its element
/// type.
std::string checkPad(const TensorInfo &input, const TensorInfo &result,
                     const std::vector<int64_t> &offsets);

/// mf.broadcast: numpy's rules, to a result of the input's element type.
std::string checkBroadcast(const TensorInfo &input, const TensorInfo &result);

/// mf.reshape: as many elements.
std::string checkReshape(const TensorInfo &input, const TensorInfo &result);

/// mf.cast: the input's shape (in another element type).
std::string checkCast(const TensorInfo &input, const TensorInfo &result);

/// mf.dequantize: the [N, K] weight of `bits`-bit values `input` (8: i8
/// [N, K]; 4: i8 [N, K / 2], two values a byte, the even column in the low
/// nibble) and float `scale`s, [N] (`groupSize` 0) or [K / groupSize, N]
/// (golden-stick's layout: a group's scales side by side), in the scales'
/// type (MindFormers keeps them in the compute dtype). Per-row int8 values
/// may have leading dimensions ([..., N, K], scales [..., N]: activations
/// quantized per token).
Inferred inferDequantize(const TensorInfo &input, const TensorInfo &scale,
                         int64_t groupSize, int64_t bits);

/// mf.dynamic_quantize: a float [..., K] as i8 values of the same shape
/// and one scale per row, [...], in the input's type.
Inferred inferDynamicQuantize(const TensorInfo &input);

/// mf.quantize: a float [..., K] as i8 values of the same shape, with a
/// scale (in the input's type) and an i8 zero point per channel ([K]
/// each, or shaped as more trailing dimensions of the input); without zero
/// points (null) symmetric.
Inferred inferQuantize(const TensorInfo &input, const TensorInfo &scale,
                       const TensorInfo *zeroPoint);

/// mf.top_k: the `k` largest of the last dimension, and their indices.
Inferred inferTopK(const TensorInfo &input, int64_t k);

/// mf.moe_route: where each (token, choice) goes in the expert-grouped
/// order, and where each of `experts` groups starts; `capacity` pairs at
/// most per expert (0: no limit).
Inferred inferMoeRoute(const TensorInfo &indices, int64_t experts,
                       int64_t capacity);

/// mf.moe_dispatch: the tokens' rows in the expert-grouped order, each
/// scaled by its routing weight when `weights` is given.
Inferred inferMoeDispatch(const TensorInfo &tokens, const TensorInfo &positions,
                          const TensorInfo *weights);

/// mf.grouped_matmul: each group of rows times its expert's weight, stored
/// [in, out], or [out, in] (a Linear's) with `transposed`; one weight
/// stacked [E, ...] serves any multiple of E groups (group g: expert g mod E).
Inferred inferGroupedMatmul(const TensorInfo &rows, const TensorInfo &offsets,
                            const std::vector<TensorInfo> &weights,
                            bool transposed);

/// mf.moe_combine: each token's expert rows, weighted and summed.
Inferred inferMoeCombine(const TensorInfo &rows, const TensorInfo &positions,
                         const TensorInfo &weights);

/// mf.top_k_grad: the gradient of mf.top_k's values, placed back at their
/// indices in rows of `width`.
Inferred inferTopKGrad(const TensorInfo &gradient, const TensorInfo &indices,
                       int64_t width);

/// mf.grouped_matmul_weight_grad: one expert's weight gradient, [out, in],
/// from the result's gradient [rows, out] and the rows [rows, in]; with
/// `stacked` E > 0, a stacked weight's, [E, out, in].
Inferred inferGroupedMatmulWeightGrad(const TensorInfo &resultGradient,
                                      const TensorInfo &rows,
                                      const TensorInfo &offsets, int64_t expert,
                                      int64_t stacked);

/// mf.all_to_all: segments of `rows` sent to the ranks of a group, the
/// result holding `resultRows` rows (a static bound) of the rows' kind.
Inferred inferAllToAll(const TensorInfo &rows, const TensorInfo &sendOffsets,
                       const TensorInfo &recvOffsets, int64_t resultRows);

/// mf.all_to_all_dims over `ranks` ranks: `input` cut into `ranks` blocks
/// along `splitDim`, the blocks received joined along `concatDim`.
Inferred inferAllToAllDims(const TensorInfo &input, int64_t ranks,
                           int64_t splitDim, int64_t concatDim);

/// mf.moe_weights_grad: the gradient of mf.moe_combine's routing weights.
Inferred inferMoeWeightsGrad(const TensorInfo &resultGradient,
                             const TensorInfo &rows,
                             const TensorInfo &positions);

/// "[2, 3]": a shape as the rules' messages write it.
std::string formatShape(const std::vector<int64_t> &shape);

/// "'tensor<2x3xf32>'": a type as MLIR's diagnostics write it.
std::string formatType(const TensorInfo &type);

} // namespace mfshapes

#endif // MFC_SHAPES_SHAPERULES_H
