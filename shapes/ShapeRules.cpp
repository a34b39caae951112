//===- ShapeRules.cpp - result types of the ops, written once -------------===//

#include "shapes/ShapeRules.h"

#include <algorithm>
#include <cmath>

using namespace mfshapes;

namespace {

bool isFloat(Element element) {
  return element != Element::I32 && element != Element::I8;
}

/// MLIR's name of an element type.
const char *elementName(Element element) {
  static const char *const names[] = {"f32", "f16", "bf16", "i32", "i8"};
  return names[static_cast<int>(element)];
}

Inferred failure(std::string why) { return {{}, std::move(why)}; }

/// The type of a routed layer's i32 [tokens, k] table (expert indices,
/// positions): rank 2, both dimensions positive, tokens * k representable.
std::string checkRouting(const TensorInfo &table, const char *what) {
  if (table.element != Element::I32) {
    return std::string("expected i32 ") + what;
  }
  if (table.shape.size() != 2 || table.shape[0] <= 0 || table.shape[1] <= 0) {
    return std::string("expected ") + what + " of shape [tokens, k], got " +
           formatShape(table.shape);
  }
  int64_t product = 0;
  if (__builtin_mul_overflow(table.shape[0], table.shape[1], &product) ||
      product > (int64_t(1) << 31) - 1) {
    return std::string(what) + " " + formatShape(table.shape) +
           " route more rows than an i32 position can name";
  }
  return "";
}

/// Every dimension in [1, 2^31 - 1]: the kernels hand them to BLAS, whose
/// sizes are ints, and index rows with i32 positions.
std::string checkDims(const TensorInfo &tensor, const char *what) {
  for (int64_t dim : tensor.shape) {
    if (dim < 1 || dim > (int64_t(1) << 31) - 1) {
      return std::string(what) + " " + formatShape(tensor.shape) +
             " has a dimension outside [1, 2^31 - 1]";
    }
  }
  return "";
}

} // namespace

std::string mfshapes::formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

Inferred mfshapes::inferDequantize(const TensorInfo &input,
                                   const TensorInfo &scale, int64_t groupSize,
                                   int64_t bits) {
  if (bits != 8 && bits != 4) {
    return failure("bits = " + std::to_string(bits) + " is not 8 or 4");
  }
  // Per-row int8 values may have any leading dimensions (activations
  // quantized per token); int4 and grouped values are a weight, [N, K].
  bool rows = bits == 8 && groupSize == 0;
  if (input.element != Element::I8 || input.shape.size() < 2 ||
      (!rows && input.shape.size() != 2)) {
    return failure(std::string("expected an i8 [N, K") +
                   (bits == 4 ? " / 2" : "") + "] weight" +
                   (rows ? " or [..., N, K] values" : "") + ", got " +
                   formatShape(input.shape));
  }
  if (std::string problem = checkDims(input, "the weight"); !problem.empty()) {
    return failure(problem);
  }
  std::vector<int64_t> shape = input.shape;
  int64_t k = shape.back() * (bits == 4 ? 2 : 1);
  shape.back() = k;
  if (std::string problem =
          checkDims({input.element, shape}, "the dequantized weight");
      !problem.empty()) {
    return failure(problem);
  }
  if (groupSize < 0 || (groupSize > 0 && k % groupSize != 0) ||
      (bits == 4 && groupSize % 2 != 0)) {
    return failure("group_size " + std::to_string(groupSize) +
                   " does not divide K = " + std::to_string(k) +
                   (bits == 4 ? " in whole bytes" : ""));
  }
  std::vector<int64_t> scales(shape.begin(), shape.end() - 1);
  if (groupSize > 0) {
    scales = {k / groupSize, shape[0]};
  }
  if (!isFloat(scale.element) || scale.shape != scales) {
    return failure("expected float scales of shape " + formatShape(scales) +
                   ", got " + formatShape(scale.shape));
  }
  return {{{scale.element, shape}}, ""};
}

Inferred mfshapes::inferDynamicQuantize(const TensorInfo &input) {
  if (!isFloat(input.element) || input.shape.size() < 2) {
    return failure("expected a float tensor of rank >= 2, got " +
                   formatShape(input.shape));
  }
  if (std::string problem = checkDims(input, "the input"); !problem.empty()) {
    return failure(problem);
  }
  std::vector<int64_t> rows(input.shape.begin(), input.shape.end() - 1);
  return {{{Element::I8, input.shape}, {input.element, rows}}, ""};
}

Inferred mfshapes::inferQuantize(const TensorInfo &input,
                                 const TensorInfo &scale,
                                 const TensorInfo *zeroPoint) {
  if (!isFloat(input.element) || input.shape.empty()) {
    return failure("expected a float tensor of rank >= 1, got " +
                   formatShape(input.shape));
  }
  if (std::string problem = checkDims(input, "the input"); !problem.empty()) {
    return failure(problem);
  }
  // The channels: the input's trailing dimensions that the scales span
  // (the last one, or a KV cache's [kv_heads, head_dim]).
  size_t spanned =
      std::clamp<size_t>(scale.shape.size(), 1, input.shape.size());
  std::vector<int64_t> channels(input.shape.end() - spanned, input.shape.end());
  if (scale.element != input.element || scale.shape != channels) {
    static const char *const names[] = {"f32", "f16", "bf16", "i32", "i8"};
    return failure("expected scales " + formatShape(channels) +
                   " (one per channel: the input's trailing dimensions) "
                   "in the input's type, got " +
                   names[static_cast<int>(scale.element)] + " " +
                   formatShape(scale.shape));
  }
  if (zeroPoint &&
      (zeroPoint->element != Element::I8 || zeroPoint->shape != channels)) {
    return failure("expected i8 zero points " + formatShape(channels) +
                   " (one per channel), got " + formatShape(zeroPoint->shape));
  }
  return {{{Element::I8, input.shape}}, ""};
}

Inferred mfshapes::inferTopK(const TensorInfo &input, int64_t k) {
  if (!isFloat(input.element) || input.shape.empty()) {
    return failure("expected a float tensor of rank >= 1");
  }
  if (std::string problem = checkDims(input, "the input"); !problem.empty()) {
    return failure(problem);
  }
  if (k < 1 || k > input.shape.back()) {
    return failure("k = " + std::to_string(k) + " is not in [1, " +
                   std::to_string(input.shape.back()) +
                   "] (the last dimension)");
  }
  std::vector<int64_t> shape = input.shape;
  shape.back() = k;
  return {{{input.element, shape}, {Element::I32, shape}}, ""};
}

Inferred mfshapes::inferMoeRoute(const TensorInfo &indices, int64_t experts,
                                 int64_t capacity) {
  if (std::string problem = checkRouting(indices, "expert indices");
      !problem.empty()) {
    return failure(problem);
  }
  if (experts < 1 || experts > (int64_t(1) << 24)) {
    return failure("num_experts = " + std::to_string(experts) +
                   " is not in [1, 2^24]");
  }
  if (capacity < 0) {
    return failure("capacity = " + std::to_string(capacity) +
                   " is negative (0: no limit)");
  }
  return {{{Element::I32, indices.shape}, {Element::I32, {experts + 1}}}, ""};
}

Inferred mfshapes::inferMoeDispatch(const TensorInfo &tokens,
                                    const TensorInfo &positions,
                                    const TensorInfo *weights) {
  if (!isFloat(tokens.element) || tokens.shape.size() != 2) {
    return failure("expected float tokens of shape [tokens, hidden], got " +
                   formatShape(tokens.shape));
  }
  if (std::string problem = checkDims(tokens, "tokens"); !problem.empty()) {
    return failure(problem);
  }
  if (std::string problem = checkRouting(positions, "positions");
      !problem.empty()) {
    return failure(problem);
  }
  if (positions.shape[0] != tokens.shape[0]) {
    return failure("positions " + formatShape(positions.shape) + " route " +
                   std::to_string(positions.shape[0]) + " tokens, not " +
                   std::to_string(tokens.shape[0]));
  }
  if (weights && (weights->element != tokens.element ||
                  weights->shape != positions.shape)) {
    return failure("expected routing weights of the tokens' dtype and the "
                   "positions' shape " +
                   formatShape(positions.shape) + ", got " +
                   formatShape(weights->shape));
  }
  return {{{tokens.element,
            {positions.shape[0] * positions.shape[1], tokens.shape[1]}}},
          ""};
}

Inferred mfshapes::inferGroupedMatmul(const TensorInfo &rows,
                                      const TensorInfo &offsets,
                                      const std::vector<TensorInfo> &weights,
                                      bool transposed) {
  if (!isFloat(rows.element) || rows.shape.size() != 2) {
    return failure("expected float rows of shape [rows, in], got " +
                   formatShape(rows.shape));
  }
  if (weights.empty()) {
    return failure("expected one weight per expert, got none");
  }
  if (std::string problem = checkDims(rows, "rows"); !problem.empty()) {
    return failure(problem);
  }
  if (std::string problem = checkDims(weights.front(), "weight 0");
      !problem.empty()) {
    return failure(problem);
  }
  // One stacked weight [E, ...] serves any multiple of E groups.
  bool stacked = weights.size() == 1 && weights.front().shape.size() == 3;
  if (weights.front().shape.size() != (stacked ? 3u : 2u)) {
    return failure("weight 0 " + formatShape(weights.front().shape) +
                   " is neither one expert's matrix nor a stack of them");
  }
  int64_t experts =
      stacked ? weights.front().shape[0] : static_cast<int64_t>(weights.size());
  if (offsets.element != Element::I32 || offsets.shape.size() != 1 ||
      (stacked ? offsets.shape[0] < 1 || (offsets.shape[0] - 1) % experts != 0
               : offsets.shape[0] != experts + 1)) {
    return failure(
        "expected i32 group offsets of shape [" +
        std::string(stacked ? "a multiple of " + std::to_string(experts) +
                                  " plus one] (groups of the stacked weight's "
                                  "experts"
                            : std::to_string(experts + 1) +
                                  "] (one more than the weights") +
        "), got " + formatShape(offsets.shape));
  }
  const TensorInfo &first = weights.front();
  std::vector<int64_t> matrix(first.shape.end() - 2, first.shape.end());
  int inDim = transposed ? 1 : 0;
  for (size_t e = 0; e < weights.size(); ++e) {
    const TensorInfo &weight = weights[e];
    std::vector<int64_t> expertShape =
        stacked ? matrix : weight.shape; // [out, in] or [in, out]
    if (weight.element != rows.element ||
        weight.shape.size() != (stacked ? 3u : 2u) ||
        expertShape[inDim] != rows.shape[1] || weight.shape != first.shape) {
      std::string in = std::to_string(rows.shape[1]);
      std::string each = transposed ? "[out, " + in + "]" : "[" + in + ", out]";
      return failure(
          "weight " + std::to_string(e) + " " + formatShape(weight.shape) +
          " is not " + (stacked ? "[experts] + " : "") + each +
          " of the rows' dtype, like weight 0 " + formatShape(first.shape));
    }
  }
  return {{{rows.element, {rows.shape[0], matrix[1 - inDim]}}}, ""};
}

Inferred mfshapes::inferMoeCombine(const TensorInfo &rows,
                                   const TensorInfo &positions,
                                   const TensorInfo &weights) {
  if (!isFloat(rows.element) || rows.shape.size() != 2) {
    return failure("expected float rows of shape [rows, hidden], got " +
                   formatShape(rows.shape));
  }
  if (std::string problem = checkDims(rows, "rows"); !problem.empty()) {
    return failure(problem);
  }
  if (std::string problem = checkRouting(positions, "positions");
      !problem.empty()) {
    return failure(problem);
  }
  if (weights.element != rows.element || weights.shape != positions.shape) {
    return failure("expected routing weights of the rows' dtype and the "
                   "positions' shape " +
                   formatShape(positions.shape) + ", got " +
                   formatShape(weights.shape));
  }
  if (positions.shape[0] * positions.shape[1] != rows.shape[0]) {
    return failure("positions " + formatShape(positions.shape) +
                   " do not route the " + std::to_string(rows.shape[0]) +
                   " rows one to one");
  }
  return {{{rows.element, {positions.shape[0], rows.shape[1]}}}, ""};
}

Inferred mfshapes::inferTopKGrad(const TensorInfo &gradient,
                                 const TensorInfo &indices, int64_t width) {
  if (!isFloat(gradient.element) || gradient.shape.empty() ||
      indices.element != Element::I32 || indices.shape != gradient.shape) {
    return failure("expected a float gradient and i32 indices of one shape, "
                   "got " +
                   formatShape(gradient.shape) + " and " +
                   formatShape(indices.shape));
  }
  if (std::string problem = checkDims(gradient, "the gradient");
      !problem.empty()) {
    return failure(problem);
  }
  if (width > (int64_t(1) << 31) - 1) {
    return failure("width " + std::to_string(width) + " is above 2^31 - 1");
  }
  if (width < gradient.shape.back()) {
    return failure("width " + std::to_string(width) + " is narrower than k = " +
                   std::to_string(gradient.shape.back()));
  }
  std::vector<int64_t> shape = gradient.shape;
  shape.back() = width;
  return {{{gradient.element, shape}}, ""};
}

Inferred mfshapes::inferGroupedMatmulWeightGrad(
    const TensorInfo &resultGradient, const TensorInfo &rows,
    const TensorInfo &offsets, int64_t expert, int64_t stacked) {
  if (!isFloat(resultGradient.element) || resultGradient.shape.size() != 2 ||
      rows.element != resultGradient.element || rows.shape.size() != 2 ||
      rows.shape[0] != resultGradient.shape[0]) {
    return failure("expected a gradient [rows, out] and rows [rows, in] of "
                   "one float dtype, got " +
                   formatShape(resultGradient.shape) + " and " +
                   formatShape(rows.shape));
  }
  if (std::string problem = checkDims(rows, "rows"); !problem.empty()) {
    return failure(problem);
  }
  if (std::string problem = checkDims(resultGradient, "the gradient");
      !problem.empty()) {
    return failure(problem);
  }
  if (offsets.element != Element::I32 || offsets.shape.size() != 1 ||
      offsets.shape[0] < 1) {
    return failure("expected i32 group offsets, got " +
                   formatShape(offsets.shape));
  }
  int64_t groups = offsets.shape[0] - 1;
  if (stacked > 0) {
    if (expert != 0 || groups % stacked != 0) {
      return failure("a stacked gradient of " + std::to_string(stacked) +
                     " experts needs expert 0 and a multiple of " +
                     std::to_string(stacked) + " groups, got expert " +
                     std::to_string(expert) + " and offsets " +
                     formatShape(offsets.shape));
    }
    return {{{rows.element, {stacked, resultGradient.shape[1], rows.shape[1]}}},
            ""};
  }
  if (expert < 0 || expert >= groups) {
    return failure("expert " + std::to_string(expert) +
                   " has no group in offsets " + formatShape(offsets.shape));
  }
  return {{{rows.element, {resultGradient.shape[1], rows.shape[1]}}}, ""};
}

Inferred mfshapes::inferAllToAll(const TensorInfo &rows,
                                 const TensorInfo &sendOffsets,
                                 const TensorInfo &recvOffsets,
                                 int64_t resultRows) {
  if (!isFloat(rows.element) || rows.shape.empty()) {
    return failure("expected float rows, got " + formatShape(rows.shape));
  }
  if (std::string problem = checkDims(rows, "rows"); !problem.empty()) {
    return failure(problem);
  }
  if (sendOffsets.element != Element::I32 || sendOffsets.shape.size() != 1 ||
      sendOffsets.shape[0] < 1 || !(recvOffsets == sendOffsets)) {
    return failure("expected i32 send and receive offsets of one shape "
                   "[segments + 1], got " +
                   formatShape(sendOffsets.shape) + " and " +
                   formatShape(recvOffsets.shape));
  }
  std::vector<int64_t> shape = rows.shape;
  shape[0] = resultRows;
  if (std::string problem = checkDims({rows.element, shape}, "the result");
      !problem.empty()) {
    return failure(problem);
  }
  return {{{rows.element, shape}}, ""};
}

Inferred mfshapes::inferAllToAllDims(const TensorInfo &input, int64_t ranks,
                                     int64_t splitDim, int64_t concatDim) {
  int64_t rank = static_cast<int64_t>(input.shape.size());
  if (!isFloat(input.element) || ranks < 1) {
    return failure("expected a float tensor over at least one rank");
  }
  if (splitDim < 0 || splitDim >= rank || concatDim < 0 || concatDim >= rank) {
    return failure("split and concat dimensions " + std::to_string(splitDim) +
                   " and " + std::to_string(concatDim) +
                   " are not dimensions of " + formatShape(input.shape));
  }
  if (splitDim == concatDim) {
    return failure("split and concat dimensions are both " +
                   std::to_string(splitDim) + "; they must differ");
  }
  if (input.shape[splitDim] % ranks != 0) {
    return failure("dimension " + std::to_string(splitDim) + " of " +
                   formatShape(input.shape) + " does not split into " +
                   std::to_string(ranks) + " blocks");
  }
  std::vector<int64_t> shape = input.shape;
  shape[splitDim] /= ranks;
  shape[concatDim] *= ranks;
  if (std::string problem = checkDims({input.element, shape}, "the result");
      !problem.empty()) {
    return failure(problem);
  }
  return {{{input.element, shape}}, ""};
}

Inferred mfshapes::inferMoeWeightsGrad(const TensorInfo &resultGradient,
                                       const TensorInfo &rows,
                                       const TensorInfo &positions) {
  if (!isFloat(resultGradient.element) || resultGradient.shape.size() != 2 ||
      !isFloat(rows.element) || rows.shape.size() != 2 ||
      rows.shape[1] != resultGradient.shape[1]) {
    return failure("expected a gradient [tokens, hidden] and rows "
                   "[rows, hidden], got " +
                   formatShape(resultGradient.shape) + " and " +
                   formatShape(rows.shape));
  }
  if (std::string problem = checkDims(rows, "rows"); !problem.empty()) {
    return failure(problem);
  }
  if (std::string problem = checkRouting(positions, "positions");
      !problem.empty()) {
    return failure(problem);
  }
  if (positions.shape[0] != resultGradient.shape[0] ||
      positions.shape[0] * positions.shape[1] != rows.shape[0]) {
    return failure("positions " + formatShape(positions.shape) +
                   " do not route the gradient's tokens to the rows");
  }
  return {{{resultGradient.element, positions.shape}}, ""};
}

//===----------------------------------------------------------------------===//
// Shape rules of the dense ops
//===----------------------------------------------------------------------===//

namespace {

/// [rows, cols] of the last two dimensions, swapped when transposed.
std::pair<int64_t, int64_t> matrixDims(const std::vector<int64_t> &shape,
                                       bool transposed) {
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  return transposed ? std::make_pair(cols, rows) : std::make_pair(rows, cols);
}

/// `box` at `offsets` inside `whole` (a slice of its input, a pad's input
/// in its result).
std::string checkBox(const std::vector<int64_t> &box,
                     const std::vector<int64_t> &whole,
                     const std::vector<int64_t> &offsets,
                     const std::string &boxName, const std::string &wholeName) {
  if (box.size() != whole.size() || offsets.size() != whole.size()) {
    return "expected " + std::to_string(whole.size()) + " offsets and rank " +
           std::to_string(whole.size()) + " on both sides, got " +
           std::to_string(offsets.size()) + " offsets, ranks " +
           std::to_string(box.size()) + " and " + std::to_string(whole.size());
  }
  for (size_t dim = 0; dim < whole.size(); ++dim) {
    if (offsets[dim] < 0 || offsets[dim] > whole[dim] - box[dim]) {
      int64_t end = 0;
      std::string range =
          __builtin_add_overflow(offsets[dim], box[dim], &end)
              ? std::to_string(box[dim]) + " from " +
                    std::to_string(offsets[dim])
              : "[" + std::to_string(offsets[dim]) + ", " +
                    std::to_string(end) + ")";
      return boxName + " " + range + " of dim " + std::to_string(dim) +
             " is outside " + wholeName + " [0, " + std::to_string(whole[dim]) +
             ")";
    }
  }
  return "";
}

/// Logits [tokens, vocab] and labels [tokens].
std::string checkLogitsAndLabels(const TensorInfo &logits,
                                 const TensorInfo &labels) {
  if (logits.shape.size() != 2) {
    return "expected logits [tokens, vocab], got shape " +
           formatShape(logits.shape);
  }
  if (labels.shape != std::vector<int64_t>{logits.shape[0]}) {
    return "expected labels of shape [" + std::to_string(logits.shape[0]) +
           "], got " + formatShape(labels.shape);
  }
  return "";
}

} // namespace

Inferred mfshapes::inferMatmul(const TensorInfo &lhs, const TensorInfo &rhs,
                               bool transposeLhs, bool transposeRhs) {
  if (lhs.shape.size() < 2 || rhs.shape.size() < 2) {
    return failure("expected operands of rank >= 2, got " +
                   formatShape(lhs.shape) + " and " + formatShape(rhs.shape));
  }
  auto [m, k] = matrixDims(lhs.shape, transposeLhs);
  auto [rhsK, n] = matrixDims(rhs.shape, transposeRhs);
  if (k != rhsK) {
    return failure("contracting dims differ: lhs has " + std::to_string(k) +
                   ", rhs has " + std::to_string(rhsK) +
                   " (check transpose_lhs / transpose_rhs)");
  }
  std::vector<int64_t> batch(lhs.shape.begin(), lhs.shape.end() - 2);
  std::vector<int64_t> rhsBatch(rhs.shape.begin(), rhs.shape.end() - 2);
  if (!rhsBatch.empty() && rhsBatch != batch) {
    return failure("batch dims differ: " + formatShape(batch) + " vs " +
                   formatShape(rhsBatch) +
                   " (a rank-2 rhs is applied to every lhs matrix)");
  }
  if (lhs.element != rhs.element) {
    return failure("expected one element type for operands and result; "
                   "insert mf.cast to convert");
  }
  batch.push_back(m);
  batch.push_back(n);
  return {{{lhs.element, batch}}, ""};
}

Inferred mfshapes::inferTranspose(const TensorInfo &input,
                                  const std::vector<int64_t> &permutation) {
  int64_t rank = static_cast<int64_t>(input.shape.size());
  if (static_cast<int64_t>(permutation.size()) != rank) {
    return failure("expected a permutation of " + std::to_string(rank) +
                   " dims, got " + std::to_string(permutation.size()));
  }
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> shape;
  for (int64_t dim : permutation) {
    if (dim < 0 || dim >= rank || seen[dim]) {
      return failure(formatShape(permutation) + " is not a permutation of 0.." +
                     std::to_string(rank - 1));
    }
    seen[dim] = true;
    shape.push_back(input.shape[dim]);
  }
  return {{{input.element, shape}}, ""};
}

std::string mfshapes::checkDimension(int64_t dimension, int64_t rank) {
  if (dimension < 0 || dimension >= rank) {
    return "dimension " + std::to_string(dimension) +
           " is out of range for a rank-" + std::to_string(rank) +
           " operand (expected 0 <= dim < " + std::to_string(rank) + ")";
  }
  return "";
}

Inferred mfshapes::inferReduction(const TensorInfo &input, int64_t dimension) {
  if (std::string problem =
          checkDimension(dimension, static_cast<int64_t>(input.shape.size()));
      !problem.empty()) {
    return failure(problem);
  }
  std::vector<int64_t> shape = input.shape;
  shape[dimension] = 1;
  return {{{input.element, shape}},
          "",
          "the input with dim " + std::to_string(dimension) + " reduced to 1"};
}

Inferred mfshapes::inferEmbedding(const TensorInfo &table,
                                  const TensorInfo &ids) {
  if (table.shape.size() != 2) {
    return failure("expected a [vocab, hidden] table, got shape " +
                   formatShape(table.shape));
  }
  std::vector<int64_t> shape = ids.shape;
  shape.push_back(table.shape[1]);
  return {{{table.element, shape}}, "", "the ids' shape + [hidden]"};
}

Inferred mfshapes::inferNorm(const TensorInfo &input,
                             const std::vector<TensorInfo> &weights,
                             const std::string &weightsName) {
  if (input.shape.empty()) {
    return failure("expected an input of rank >= 1");
  }
  int64_t features = input.shape.back();
  for (const TensorInfo &weight : weights) {
    if (weight.shape != std::vector<int64_t>{features}) {
      return failure(
          "expected " + weightsName + " of shape [" + std::to_string(features) +
          "] (the last dim of the input), got " + formatShape(weight.shape));
    }
    if (weight.element != input.element) {
      return failure("expected " + weightsName +
                     " of the input's element type");
    }
  }
  return {{input}, ""};
}

Inferred mfshapes::inferRope(const TensorInfo &input,
                             const TensorInfo &positions, double theta,
                             const std::vector<double> &frequencyScale) {
  if (input.shape.size() != 4) {
    return failure("expected input [batch, seq, heads, head_dim], got shape " +
                   formatShape(input.shape));
  }
  int64_t headDim = input.shape[3];
  if (headDim % 2 != 0) {
    return failure("head_dim " + std::to_string(headDim) +
                   " must be even to rotate pairs");
  }
  std::vector<int64_t> rows{input.shape[0], input.shape[1]};
  if (positions.shape != rows) {
    return failure("expected positions of shape " + formatShape(rows) +
                   " ([batch, seq]), got " + formatShape(positions.shape));
  }
  if (!(theta > 0.0) || !std::isfinite(theta)) {
    return failure("theta must be positive and finite");
  }
  if (!frequencyScale.empty() &&
      static_cast<int64_t>(frequencyScale.size()) != headDim / 2) {
    return failure("frequency_scale has " +
                   std::to_string(frequencyScale.size()) +
                   " values; head_dim " + std::to_string(headDim) + " needs " +
                   std::to_string(headDim / 2));
  }
  for (double value : frequencyScale) {
    if (!(value > 0.0) || !std::isfinite(value)) {
      return failure("frequency_scale values must be positive and finite");
    }
  }
  return {{input}, ""};
}

Inferred mfshapes::inferCrossEntropy(const TensorInfo &logits,
                                     const TensorInfo &labels) {
  if (std::string problem = checkLogitsAndLabels(logits, labels);
      !problem.empty()) {
    return failure(problem);
  }
  return {{{Element::F32, {}}}, "", "the mean loss"};
}

Inferred mfshapes::inferCrossEntropyGrad(const TensorInfo &logits,
                                         const TensorInfo &labels,
                                         const TensorInfo &gradient) {
  if (std::string problem = checkLogitsAndLabels(logits, labels);
      !problem.empty()) {
    return failure(problem);
  }
  if (gradient.element != Element::F32 || !gradient.shape.empty()) {
    return failure("expected the loss's gradient as an f32 scalar, got " +
                   formatShape(gradient.shape));
  }
  return {{logits}, "", "the gradient of the logits"};
}

std::string mfshapes::checkConcat(const std::vector<TensorInfo> &inputs,
                                  const TensorInfo &result, int64_t dimension) {
  if (inputs.empty()) {
    return "expected at least one input";
  }
  int64_t rank = static_cast<int64_t>(result.shape.size());
  if (std::string problem = checkDimension(dimension, rank); !problem.empty()) {
    return problem;
  }
  int64_t total = 0;
  for (size_t index = 0; index < inputs.size(); ++index) {
    const std::vector<int64_t> &shape = inputs[index].shape;
    if (inputs[index].element != result.element) {
      return "input " + std::to_string(index) +
             " has another element type than the result";
    }
    if (static_cast<int64_t>(shape.size()) != rank) {
      return "input " + std::to_string(index) + " has rank " +
             std::to_string(shape.size()) + ", expected " +
             std::to_string(rank);
    }
    for (int64_t dim = 0; dim < rank; ++dim) {
      if (dim != dimension && shape[dim] != result.shape[dim]) {
        return "input " + std::to_string(index) + " has shape " +
               formatShape(shape) + ", expected dim " + std::to_string(dim) +
               " to be " + std::to_string(result.shape[dim]);
      }
    }
    total += shape[dimension];
  }
  if (total != result.shape[dimension]) {
    return "inputs add up to " + std::to_string(total) + " along dim " +
           std::to_string(dimension) + ", result has " +
           std::to_string(result.shape[dimension]);
  }
  return "";
}

std::string mfshapes::checkSlice(const TensorInfo &input,
                                 const TensorInfo &result,
                                 const std::vector<int64_t> &offsets) {
  if (input.element != result.element) {
    return "expected the result element type of the input";
  }
  return checkBox(result.shape, input.shape, offsets, "slice", "the input's");
}

std::string mfshapes::checkPad(const TensorInfo &input,
                               const TensorInfo &result,
                               const std::vector<int64_t> &offsets) {
  if (input.element != result.element) {
    return "expected the result element type of the input";
  }
  return checkBox(input.shape, result.shape, offsets, "the input's",
                  "the result's");
}

std::string mfshapes::checkBroadcast(const TensorInfo &input,
                                     const TensorInfo &result) {
  const std::vector<int64_t> &from = input.shape, &to = result.shape;
  if (input.element != result.element) {
    return "expected the result element type of the input";
  }
  if (from.size() > to.size()) {
    return "cannot broadcast " + formatShape(from) + " to the lower-rank " +
           formatShape(to);
  }
  size_t lead = to.size() - from.size();
  for (size_t index = 0; index < from.size(); ++index) {
    if (from[index] != 1 && from[index] != to[lead + index]) {
      return "cannot broadcast " + formatShape(from) + " to " +
             formatShape(to) + ": input dim " + std::to_string(index) + " is " +
             std::to_string(from[index]) + ", expected 1 or " +
             std::to_string(to[lead + index]);
    }
  }
  return "";
}

std::string mfshapes::checkReshape(const TensorInfo &input,
                                   const TensorInfo &result) {
  // (Shapes whose products overflow are refused before any rule runs.)
  auto count = [](const std::vector<int64_t> &shape) {
    int64_t elements = 1;
    for (int64_t dim : shape) {
      elements *= dim;
    }
    return elements;
  };
  if (input.element != result.element) {
    return "expected the result element type of the input";
  }
  if (count(input.shape) != count(result.shape)) {
    return "cannot reshape " + formatShape(input.shape) + " (" +
           std::to_string(count(input.shape)) + " elements) to " +
           formatShape(result.shape) + " (" +
           std::to_string(count(result.shape)) + " elements)";
  }
  return "";
}

std::string mfshapes::checkCast(const TensorInfo &input,
                                const TensorInfo &result) {
  if (input.shape != result.shape) {
    return "expected a result of the input's shape " +
           formatShape(input.shape) + ", got " + formatShape(result.shape);
  }
  return "";
}

std::string mfshapes::formatType(const TensorInfo &type) {
  std::string text = "'tensor<";
  for (int64_t dim : type.shape) {
    text += std::to_string(dim) + "x";
  }
  return text + elementName(type.element) + ">'";
}

//===----------------------------------------------------------------------===//
// KV caches and attention
//===----------------------------------------------------------------------===//

namespace {

/// A position operand: i32, a scalar or one per batch row.
std::string checkPositionRows(const TensorInfo &position, int64_t batch,
                              const std::string &name) {
  if (position.element != Element::I32 || position.shape.size() > 1) {
    return "expected " + name + " as an i32 scalar or one per batch row";
  }
  if (position.shape.size() == 1 && position.shape[0] != batch) {
    return name + " has " + std::to_string(position.shape[0]) +
           " positions, expected one per batch row (" + std::to_string(batch) +
           ")";
  }
  return "";
}

/// A paged cache's block table: i32 [batch, blocks], enough blocks of
/// `blockSize` positions for `tokens` new ones.
std::string checkBlockTable(const TensorInfo &table, int64_t batch,
                            int64_t tokens, int64_t blockSize) {
  if (table.element != Element::I32 || table.shape.size() != 2 ||
      blockSize <= 0) {
    return "expected an i32 block_table [batch, blocks] and blocks of at "
           "least one position";
  }
  if (table.shape[0] != batch) {
    return "block_table has " + std::to_string(table.shape[0]) +
           " rows, expected one per batch row (" + std::to_string(batch) + ")";
  }
  // (Divided, not multiplied: dimensions may be near 2^60 in a hostile
  // model.bin.)
  if (table.shape[1] < tokens / blockSize + (tokens % blockSize != 0)) {
    return "block_table maps " + std::to_string(table.shape[1]) +
           " blocks of " + std::to_string(blockSize) + " positions, fewer " +
           "than the " + std::to_string(tokens) + " new tokens";
  }
  return "";
}

/// `result` must have `expected`'s type: the gradient of a forward operand
/// has that operand's type.
std::string checkGradientType(const TensorInfo &expected,
                              const TensorInfo &result, const std::string &of) {
  if (!(expected == result)) {
    return "the gradient of " + of + " must have its type " +
           formatType(expected) + ", got " + formatType(result);
  }
  return "";
}

} // namespace

Inferred mfshapes::inferKvCacheWrite(const TensorInfo &cache,
                                     const TensorInfo &update,
                                     const TensorInfo &position,
                                     const TensorInfo *blockTable) {
  const std::vector<int64_t> &c = cache.shape, &u = update.shape;
  if (c.size() != 4 || u.size() != 4) {
    return failure("expected rank-4 cache and update "
                   "([batch, len, kv_heads, head_dim])");
  }
  if (cache.element != update.element) {
    return failure("expected an update of the cache's element type");
  }
  if (blockTable) {
    // A pool of blocks: the update's rows go where the table maps them.
    for (int dim : {2, 3}) {
      if (c[dim] != u[dim]) {
        return failure("update shape " + formatShape(u) +
                       " does not fit the block pool " + formatShape(c) +
                       " in dim " + std::to_string(dim));
      }
    }
    if (std::string problem = checkBlockTable(*blockTable, u[0], u[1], c[1]);
        !problem.empty()) {
      return failure(problem);
    }
    if (std::string problem = checkPositionRows(position, u[0], "position");
        !problem.empty()) {
      return failure(problem);
    }
    return {{cache}, ""};
  }
  for (int dim : {0, 2, 3}) {
    if (c[dim] != u[dim]) {
      return failure("update shape " + formatShape(u) +
                     " does not fit cache shape " + formatShape(c) +
                     " in dim " + std::to_string(dim));
    }
  }
  if (u[1] > c[1]) {
    return failure("update of " + std::to_string(u[1]) +
                   " tokens is longer than the cache (" + std::to_string(c[1]) +
                   ")");
  }
  if (std::string problem = checkPositionRows(position, c[0], "position");
      !problem.empty()) {
    return failure(problem);
  }
  return {{cache}, ""};
}

Inferred mfshapes::inferAttention(
    const TensorInfo &query, const TensorInfo &key, const TensorInfo &value,
    const TensorInfo *pastLength, const TensorInfo *blockTable,
    const TensorInfo *keyScale, const TensorInfo *valueScale, bool causal) {
  const std::vector<int64_t> &q = query.shape, &k = key.shape;
  if (q.size() != 4 || k.size() != 4) {
    return failure("expected rank-4 query and key/value "
                   "([batch, seq, heads, head_dim]), got " +
                   formatShape(q) + " and " + formatShape(k));
  }
  if (!(key == value)) {
    return failure("expected key and value of one type, got " +
                   formatType(key) + " and " + formatType(value));
  }
  if (blockTable) {
    if (std::string problem = checkBlockTable(*blockTable, q[0], q[1], k[1]);
        !problem.empty()) {
      return failure(problem);
    }
    if (!pastLength) {
      return failure("a block_table needs the past_length of each row (a "
                     "paged cache is read to it)");
    }
  } else if (q[0] != k[0]) {
    return failure("query batch " + std::to_string(q[0]) +
                   " differs from key/value batch " + std::to_string(k[0]));
  }
  if (q[3] != k[3]) {
    return failure("query head_dim " + std::to_string(q[3]) +
                   " differs from key/value head_dim " + std::to_string(k[3]));
  }
  if (k[2] <= 0 || q[2] % k[2] != 0) {
    return failure("query heads (" + std::to_string(q[2]) +
                   ") must be a multiple of key/value heads (" +
                   std::to_string(k[2]) + ")");
  }
  if (pastLength) {
    if (std::string problem =
            checkPositionRows(*pastLength, q[0], "past_length");
        !problem.empty()) {
      return failure(problem);
    }
  }
  // An int8 cache is read with its per-channel scales ([kv_heads,
  // head_dim], the query's type).
  // (A float cache may be of another float type than the query: the eager
  // kernel widens each.)
  bool int8Cache = key.element == Element::I8;
  if (bool(keyScale) != bool(valueScale)) {
    return failure("kv_scales needs the key and the value scales");
  }
  if (int8Cache && !pastLength) {
    return failure("an int8 key/value cache needs the past_length it is "
                   "read to");
  }
  if (int8Cache != bool(keyScale)) {
    return failure(int8Cache ? "reads an int8 key/value cache without its "
                               "scales (kv_scales)"
                             : "has kv_scales but a float key/value cache, "
                               "not i8");
  }
  if (int8Cache) {
    TensorInfo channels{query.element, {k[2], k[3]}};
    for (const TensorInfo *scales : {keyScale, valueScale}) {
      if (!(*scales == channels)) {
        return failure("kv_scales must be " + formatShape(channels.shape) +
                       " (a scale per KV head and channel) of the query's "
                       "type '" +
                       elementName(query.element) + "', got " +
                       formatType(*scales));
      }
    }
  }
  if (!pastLength && causal && q[1] > k[1]) {
    return failure("a causal query of length " + std::to_string(q[1]) +
                   " needs at least as many keys, got " + std::to_string(k[1]));
  }
  return {{query}, ""};
}

std::string mfshapes::checkEmbeddingGrad(const TensorInfo &ids,
                                         const TensorInfo &grad,
                                         const TensorInfo &result) {
  if (result.shape.size() != 2) {
    return "expected a [vocab, hidden] result, got shape " +
           formatShape(result.shape);
  }
  TensorInfo expected{result.element, ids.shape};
  expected.shape.push_back(result.shape[1]);
  if (!(grad == expected)) {
    return "expected grad " + formatType(expected) +
           " (the ids' shape + [hidden]), got " + formatType(grad);
  }
  return "";
}

std::string mfshapes::checkNormGrad(const TensorInfo &input,
                                    const TensorInfo &weight,
                                    const TensorInfo &grad,
                                    const TensorInfo &result, int64_t wrt,
                                    int64_t weights) {
  if (Inferred norm = inferNorm(input, {weight}, "weight"); !norm) {
    return norm.error;
  }
  if (std::string problem = checkGradientType(input, grad, "the result (grad)");
      !problem.empty()) {
    return problem;
  }
  static const char *const operands[] = {"the input", "the weight", "the bias"};
  if (wrt < 0 || wrt > weights) {
    return "wrt = " + std::to_string(wrt) + " names no operand (0 to " +
           std::to_string(weights) + ")";
  }
  return checkGradientType(wrt == 0 ? input : weight, result, operands[wrt]);
}

std::string
mfshapes::checkAttentionGrad(const TensorInfo &query, const TensorInfo &key,
                             const TensorInfo &value, const TensorInfo &grad,
                             const TensorInfo *pastLength,
                             const TensorInfo &result, int64_t wrt) {
  const std::vector<int64_t> &q = query.shape, &k = key.shape;
  if (q.size() != 4 || !(key == value) || k.size() != 4 || q[0] != k[0] ||
      q[3] != k[3] || k[2] <= 0 || q[2] % k[2] != 0 ||
      query.element != key.element) {
    return "expected query [batch, seq, heads, head_dim] and key/value "
           "[batch, kv_len, kv_heads, head_dim] with heads a multiple of "
           "kv_heads, got " +
           formatType(query) + " and " + formatType(key);
  }
  if (pastLength &&
      (pastLength->element != Element::I32 || !pastLength->shape.empty())) {
    return "expected past_length as an i32 scalar";
  }
  if (std::string problem = checkGradientType(query, grad, "the result (grad)");
      !problem.empty()) {
    return problem;
  }
  static const char *const operands[] = {"the query", "the key", "the value"};
  if (wrt < 0 || wrt > 2) {
    return "wrt = " + std::to_string(wrt) + " names no operand (0 to 2)";
  }
  const TensorInfo *of[] = {&query, &key, &value};
  return checkGradientType(*of[wrt], result, operands[wrt]);
}
