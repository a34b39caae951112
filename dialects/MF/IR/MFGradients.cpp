//===- MFGradients.cpp - reverse-mode rules of the mf ops -----------------===//
//
// Each rule builds, from the gradient `g` of an op's result, the gradients
// of its operands as mf ops (GradientOpInterface). Elementwise and shape ops
// use primitives; model-level ops have dedicated gradient ops (silu_grad,
// rms_norm_grad, attention_grad, ...) whose kernels recompute what they need
// (norm statistics, softmax rows) instead of keeping it from the forward
// pass. Integer operands (ids, labels, positions) get no gradient.
//
//===----------------------------------------------------------------------===//

#include "dialects/MF/IR/MFOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::mf;

namespace {

RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// A constant of `type` with every element `value`.
Value splat(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(),
                                                          value)));
}

LogicalResult noRule(Operation *op, StringRef why) {
  return op->emitOpError() << "has no gradient rule " << why;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.append({g, g});
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.append({g, NegOp::create(b, getLoc(), g)});
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.append({MulOp::create(b, getLoc(), g, getRhs()),
                MulOp::create(b, getLoc(), g, getLhs())});
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  // d(a/b)/db = -(a/b)/b
  Location loc = getLoc();
  grads.push_back(DivOp::create(b, loc, g, getRhs()));
  grads.push_back(NegOp::create(
      b, loc, DivOp::create(b, loc, MulOp::create(b, loc, g, getResult()),
                            getRhs())));
  return success();
}

LogicalResult MaxOp::buildGradients(OpBuilder &, Value,
                                    SmallVectorImpl<Value> &) {
  return noRule(*this, "(the frontend does not emit it in training graphs)");
}

LogicalResult MinOp::buildGradients(OpBuilder &, Value,
                                    SmallVectorImpl<Value> &) {
  return noRule(*this, "(the frontend does not emit it in training graphs)");
}

LogicalResult NegOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(NegOp::create(b, getLoc(), g));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(MulOp::create(b, getLoc(), g, getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(DivOp::create(b, getLoc(), g, getInput()));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value y = getResult();
  Value oneMinusSquare = SubOp::create(b, loc, splat(b, loc, typeOf(y), 1.0),
                                       MulOp::create(b, loc, y, y));
  grads.push_back(MulOp::create(b, loc, g, oneMinusSquare));
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  // d sqrt(x) / dx = 1 / (2 y)
  Location loc = getLoc();
  Value y = getResult();
  grads.push_back(DivOp::create(
      b, loc, g, MulOp::create(b, loc, splat(b, loc, typeOf(y), 2.0), y)));
  return success();
}

LogicalResult RsqrtOp::buildGradients(OpBuilder &b, Value g,
                                      SmallVectorImpl<Value> &grads) {
  // d x^(-1/2) / dx = -1/2 y^3
  Location loc = getLoc();
  Value y = getResult();
  Value cube = MulOp::create(b, loc, y, MulOp::create(b, loc, y, y));
  grads.push_back(MulOp::create(
      b, loc, g, MulOp::create(b, loc, splat(b, loc, typeOf(y), -0.5), cube)));
  return success();
}

LogicalResult SiluOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(SiluGradOp::create(b, getLoc(), getInput(), g));
  return success();
}

LogicalResult FastGeluOp::buildGradients(OpBuilder &b, Value g,
                                         SmallVectorImpl<Value> &grads) {
  // x sigmoid(a x) = silu(a x) / a, so its derivative is silu'(a x).
  Location loc = getLoc();
  Value x = getInput();
  Value scaled = MulOp::create(b, loc, splat(b, loc, typeOf(x), 1.702), x);
  grads.push_back(SiluGradOp::create(b, loc, scaled, g));
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(
      GeluGradOp::create(b, getLoc(), getInput(), g, getApproximate()));
  return success();
}

LogicalResult SwiGluOp::buildGradients(OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &grads) {
  // silu(gate) * up
  Location loc = getLoc();
  grads.push_back(SiluGradOp::create(b, loc, getGate(),
                                     MulOp::create(b, loc, g, getUp())));
  grads.push_back(MulOp::create(b, loc, g, SiluOp::create(b, loc, getGate())));
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  if (!isa<FloatType>(typeOf(getInput()).getElementType())) {
    grads.push_back(Value());
    return success();
  }
  grads.push_back(CastOp::create(b, getLoc(), getInput().getType(), g));
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes and reductions
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  // Sum over every dim the broadcast created or stretched, then drop them.
  Location loc = getLoc();
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> shape = getType().getShape();
  size_t lead = shape.size() - from.size();
  Value sum = g;
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    bool created = dim < lead;
    bool stretched = !created && from[dim - lead] == 1 && shape[dim] != 1;
    if (created || stretched) {
      sum = ReduceSumOp::create(b, loc, sum, dim);
    }
  }
  grads.push_back(ReshapeOp::create(b, loc, getInput().getType(), sum));
  return success();
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  grads.push_back(BroadcastOp::create(b, getLoc(), getInput().getType(), g));
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(OpBuilder &, Value,
                                          SmallVectorImpl<Value> &) {
  return noRule(*this, "(the frontend does not emit it in training graphs)");
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, Value g,
                                        SmallVectorImpl<Value> &grads) {
  grads.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(), g));
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  ArrayRef<int64_t> permutation = getPermutation();
  SmallVector<int64_t> inverse(permutation.size());
  for (auto [position, dim] : llvm::enumerate(permutation)) {
    inverse[dim] = static_cast<int64_t>(position);
  }
  grads.push_back(TransposeOp::create(b, getLoc(), getInput().getType(), g,
                                      b.getDenseI64ArrayAttr(inverse)));
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, Value g,
                                      SmallVectorImpl<Value> &grads) {
  grads.push_back(PadOp::create(b, getLoc(), getInput().getType(), g,
                                getOffsetsAttr()));
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &grads) {
  int64_t dim = getDimension();
  SmallVector<int64_t> offsets(typeOf(g).getRank(), 0);
  for (Value input : getInputs()) {
    grads.push_back(SliceOp::create(b, getLoc(), input.getType(), g,
                                    b.getDenseI64ArrayAttr(offsets)));
    offsets[dim] += typeOf(input).getDimSize(dim);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Model-level ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  // Vocabulary parallel: the gradient of the rank's block of rows.
  grads.push_back(EmbeddingGradOp::create(b, getLoc(), getTable().getType(),
                                          getIds(), g, getGridAttr(),
                                          getGridAxesAttr()));
  grads.push_back(Value());
  return success();
}

LogicalResult RmsNormOp::buildGradients(OpBuilder &b, Value g,
                                        SmallVectorImpl<Value> &grads) {
  for (int64_t operand : {0, 1}) {
    grads.push_back(RmsNormGradOp::create(
        b, getLoc(), getOperand(operand).getType(), getInput(), getWeight(), g,
        getEpsilonAttr(), b.getI64IntegerAttr(operand)));
  }
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  for (int64_t operand : {0, 1, 2}) {
    grads.push_back(LayerNormGradOp::create(
        b, getLoc(), getOperand(operand).getType(), getInput(), getWeight(), g,
        getEpsilonAttr(), b.getI64IntegerAttr(operand)));
  }
  return success();
}

LogicalResult MatmulOp::buildGradients(OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &grads) {
  if (getTransposeLhs()) {
    return noRule(*this, "with transpose_lhs");
  }
  Location loc = getLoc();
  Value lhs = getLhs(), rhs = getRhs();
  bool transposedRhs = getTransposeRhs();
  // C = A op(B): dA = g op(B)^T.
  grads.push_back(MatmulOp::create(b, loc, lhs.getType(), g, rhs,
                                   /*transpose_lhs=*/false,
                                   /*transpose_rhs=*/!transposedRhs));
  // dB = A^T g (or g^T A for a transposed B); a 2-D weight applied to every
  // matrix of A sums over all of them: flatten A and g to rows first.
  RankedTensorType lhsType = typeOf(lhs), gType = typeOf(g);
  if (typeOf(rhs).getRank() == 2 && lhsType.getRank() > 2) {
    int64_t k = lhsType.getShape().back(), n = gType.getShape().back();
    int64_t rows = lhsType.getNumElements() / k;
    lhs = ReshapeOp::create(b, loc, lhsType.clone({rows, k}), lhs);
    g = ReshapeOp::create(b, loc, gType.clone({rows, n}), g);
  }
  grads.push_back(transposedRhs
                      ? MatmulOp::create(b, loc, rhs.getType(), g, lhs,
                                         /*transpose_lhs=*/true, false)
                      : MatmulOp::create(b, loc, rhs.getType(), lhs, g,
                                         /*transpose_lhs=*/true, false));
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, Value g,
                                        SmallVectorImpl<Value> &grads) {
  // y * (g - sum(g * y))
  Location loc = getLoc();
  Value y = getResult();
  SmallVector<int64_t> reduced(typeOf(y).getShape());
  reduced[getDimension()] = 1;
  Value dot = ReduceSumOp::create(b, loc, typeOf(y).clone(reduced),
                                  MulOp::create(b, loc, g, y), getDimension());
  Value centered = SubOp::create(
      b, loc, g, BroadcastOp::create(b, loc, y.getType(), dot));
  grads.push_back(MulOp::create(b, loc, y, centered));
  return success();
}

LogicalResult RopeOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(RopeOp::create(b, getLoc(), getType(), g, getPositions(),
                                 getThetaAttr(),
                                 getInverse() ? UnitAttr() : b.getUnitAttr(),
                                 getFrequencyScaleAttr()));
  grads.push_back(Value());
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  // One past length for every row (context parallelism's first position of
  // this rank's queries); a cache's per-row lengths and pages are serving's.
  Value past = getPastLength();
  if (getBlockTable() ||
      (past && cast<RankedTensorType>(past.getType()).getRank() != 0)) {
    return noRule(*this, "with a KV cache (per-row past_length, block_table)");
  }
  for (int64_t operand : {0, 1, 2}) {
    grads.push_back(AttentionGradOp::create(
        b, getLoc(), getOperand(operand).getType(), getQuery(), getKey(),
        getValue(), g, past, getCausalAttr(), getScaleAttr(),
        b.getI64IntegerAttr(operand)));
  }
  if (past) {
    grads.push_back(Value());
  }
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, Value g,
                                             SmallVectorImpl<Value> &grads) {
  grads.push_back(CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(),
                                             getLogits(), getLabels(), g,
                                             getIgnoreIndexAttr(), getGridAttr(),
                                             getGridAxesAttr()));
  grads.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::buildGradients(OpBuilder &, Value g,
                                          SmallVectorImpl<Value> &grads) {
  // Every rank holds the same result gradient, and each partial sum
  // contributed to the result with weight one.
  grads.push_back(g);
  return success();
}

LogicalResult ReplicateOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  // Each rank's consumers gave only their part of the gradient.
  grads.push_back(AllReduceOp::create(b, getLoc(), g, getGrid(), getGridAxes()));
  return success();
}

LogicalResult AllGatherOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  // The result is replicated: each rank's gradient of it is whole, and the
  // input's is its block. (Where consumers compute only part of it,
  // mf.replicate after the gather sums the parts first.)
  grads.push_back(ScatterOp::create(b, getLoc(), getInput().getType(), g,
                                    getGrid(), getGridAxes(), getDimension()));
  return success();
}

// The blocks went from split_dim to concat_dim: their gradient goes back.
LogicalResult AllToAllDimsOp::buildGradients(OpBuilder &b, Value g,
                                             SmallVectorImpl<Value> &grads) {
  grads.push_back(AllToAllDimsOp::create(b, getLoc(), getInput().getType(), g,
                                         getGrid(), getGridAxes(),
                                         getConcatDim(), getSplitDim()));
  return success();
}

LogicalResult ReduceScatterOp::buildGradients(OpBuilder &b, Value g,
                                              SmallVectorImpl<Value> &grads) {
  grads.push_back(AllGatherOp::create(b, getLoc(), getInput().getType(), g,
                                      getGrid(), getGridAxes(), getDimension()));
  return success();
}

LogicalResult ScatterOp::buildGradients(OpBuilder &b, Value g,
                                        SmallVectorImpl<Value> &grads) {
  grads.push_back(AllGatherOp::create(b, getLoc(), getInput().getType(), g,
                                      getGrid(), getGridAxes(), getDimension()));
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

// Only the values carry a gradient (the indices are integers): it goes
// back to the chosen positions.
LogicalResult TopKOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(TopKGradOp::create(b, getLoc(), g, getIndices(),
                                     typeOf(getInput()).getShape().back()));
  return success();
}

// result[p[t, c]] = w[t, c] * tokens[t] (w = 1 without weights):
// d tokens[t] = sum_c w[t, c] * g[p[t, c]], a combine; d w[t, c] =
// dot(tokens[t], g[p[t, c]]).
LogicalResult MoeDispatchOp::buildGradients(OpBuilder &b, Value g,
                                            SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value weights = getWeights();
  if (!weights) {
    weights = splat(
        b, loc, typeOf(getPositions()).clone(typeOf(g).getElementType()), 1.0);
  }
  grads.push_back(MoeCombineOp::create(b, loc, g, getPositions(), weights));
  grads.push_back(Value());
  if (getWeights()) {
    grads.push_back(
        MoeWeightsGradOp::create(b, loc, getTokens(), g, getPositions()));
  }
  return success();
}

// y[g_e] = rows[g_e] W_e^T (W_e [out, in]) or rows[g_e] W_e (W_e [in, out]):
// d rows = g W_e or g W_e^T, the same op with the other layout; d W_e =
// g[g_e]^T rows[g_e] or rows[g_e]^T g[g_e], one op per expert.
LogicalResult GroupedMatmulOp::buildGradients(OpBuilder &b, Value g,
                                              SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  bool transposed = getTransposeRhs();
  grads.push_back(GroupedMatmulOp::create(b, loc, g, getOffsets(), getWeights(),
                                          !transposed));
  grads.push_back(Value());
  // A stacked weight [E, ...]: every expert's gradient in one op.
  auto weightType = cast<RankedTensorType>(getWeights().front().getType());
  if (getWeights().size() == 1 && weightType.getRank() == 3) {
    int64_t experts = weightType.getShape()[0];
    grads.push_back(transposed
                        ? GroupedMatmulWeightGradOp::create(
                              b, loc, g, getRows(), getOffsets(), 0, experts)
                        : GroupedMatmulWeightGradOp::create(
                              b, loc, getRows(), g, getOffsets(), 0, experts));
    return success();
  }
  for (auto [expert, weight] : llvm::enumerate(getWeights())) {
    grads.push_back(
        transposed ? GroupedMatmulWeightGradOp::create(b, loc, g, getRows(),
                                                       getOffsets(), expert)
                   : GroupedMatmulWeightGradOp::create(b, loc, getRows(), g,
                                                       getOffsets(), expert));
  }
  return success();
}

// y[t] = sum_c w[t, c] rows[p[t, c]]: d rows[p[t, c]] = w[t, c] g[t], a
// weighted dispatch; d w[t, c] = dot(g[t], rows[p[t, c]]).
LogicalResult MoeCombineOp::buildGradients(OpBuilder &b, Value g,
                                           SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.push_back(
      MoeDispatchOp::create(b, loc, g, getPositions(), getWeights()));
  grads.push_back(Value());
  grads.push_back(
      MoeWeightsGradOp::create(b, loc, g, getRows(), getPositions()));
  return success();
}

// The rows went to the ranks by `send_offsets` and arrived by
// `recv_offsets`: their gradient goes back the same way reversed.
LogicalResult AllToAllOp::buildGradients(OpBuilder &b, Value g,
                                         SmallVectorImpl<Value> &grads) {
  grads.push_back(AllToAllOp::create(b, getLoc(), getRows().getType(), g,
                                     getRecvOffsets(), getSendOffsets(),
                                     getGridAttr(), getGridAxesAttr()));
  grads.push_back(Value());
  grads.push_back(Value());
  return success();
}
