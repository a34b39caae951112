//===- OpTypes.cpp - static type rules of the executable's ops ------------===//

#include "runtime/format/OpTypes.h"

#include "shapes/ShapeRules.h"

#include <algorithm>
#include <optional>

using namespace mfrt;

namespace {

bool sameType(const TensorDesc &a, const TensorDesc &b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

bool fitsRule(const ValueRule &rule, const TensorDesc &type) {
  return (rule.dtypes >> static_cast<int>(type.dtype) & 1) &&
         (rule.rank < 0 ||
          rule.rank == static_cast<int64_t>(type.shape.size()));
}

/// What the op's ODS says of every op of its kind
/// (runtime/format/OpRegistry.h): each operand's and result's dtypes and rank,
/// and one type for all when a trait says so.
std::string checkRow(const OpRow &row, const std::vector<TensorDesc> &in,
                     const std::vector<TensorDesc> &outs) {
  for (size_t i = 0; i < in.size(); ++i) {
    size_t rule = std::min<size_t>(i, row.operandRules - 1);
    if (!fitsRule(row.values[rule], in[i])) {
      return "operand " + std::to_string(i) +
             " has a dtype or rank its op "
             "does not take";
    }
    if (row.sameOperandsAndResultType && !sameType(in[i], outs[0])) {
      return "expected operands of the result's type";
    }
  }
  for (size_t r = 0; r < outs.size(); ++r) {
    if (!fitsRule(row.values[row.operandRules + r], outs[r])) {
      return "result " + std::to_string(r) +
             " has a dtype or rank its op does not produce";
    }
  }
  return "";
}

mfshapes::TensorInfo infoOf(const TensorDesc &type) {
  return {static_cast<mfshapes::Element>(type.dtype), type.shape};
}

/// An attribute vector's values (empty when absent).
template <typename T>
std::vector<T> vectorOf(const flatbuffers::Vector<T> *values) {
  return values ? std::vector<T>(values->begin(), values->end())
                : std::vector<T>();
}

/// What the op's rule in shapes/ShapeRules.h says of `outs`; nullopt for
/// an op without one.
std::optional<std::string> checkShapeRule(const fb::Op &op,
                                          const std::vector<TensorDesc> &in,
                                          const std::vector<TensorDesc> &outs) {
  mfshapes::Inferred inferred;
  switch (op.kind()) {
  case fb::OpKind::Dequantize:
    inferred = mfshapes::inferDequantize(
        infoOf(in[0]), infoOf(in[1]),
        op.attributes_as_DequantizeAttrs()->group_size(),
        op.attributes_as_DequantizeAttrs()->bits());
    break;
  case fb::OpKind::DynamicQuantize:
    inferred = mfshapes::inferDynamicQuantize(infoOf(in[0]));
    break;
  case fb::OpKind::Quantize: {
    std::optional<mfshapes::TensorInfo> zeroPoint;
    if (in.size() > 2) {
      zeroPoint = infoOf(in[2]);
    }
    inferred = mfshapes::inferQuantize(infoOf(in[0]), infoOf(in[1]),
                                       zeroPoint ? &*zeroPoint : nullptr);
  } break;
  case fb::OpKind::TopK:
    inferred =
        mfshapes::inferTopK(infoOf(in[0]), op.attributes_as_TopKAttrs()->k());
    break;
  case fb::OpKind::MoeRoute:
    inferred = mfshapes::inferMoeRoute(
        infoOf(in[0]), op.attributes_as_MoeRouteAttrs()->num_experts(),
        op.attributes_as_MoeRouteAttrs()->capacity());
    break;
  case fb::OpKind::MoeDispatch: {
    mfshapes::TensorInfo weights =
        in.size() > 2 ? infoOf(in[2]) : mfshapes::TensorInfo{};
    inferred = mfshapes::inferMoeDispatch(infoOf(in[0]), infoOf(in[1]),
                                          in.size() > 2 ? &weights : nullptr);
    break;
  }
  case fb::OpKind::GroupedMatmul: {
    std::vector<mfshapes::TensorInfo> weights;
    for (size_t i = 2; i < in.size(); ++i) {
      weights.push_back(infoOf(in[i]));
    }
    inferred = mfshapes::inferGroupedMatmul(
        infoOf(in[0]), infoOf(in[1]), weights,
        op.attributes_as_GroupedMatmulAttrs()->transpose_rhs());
    break;
  }
  case fb::OpKind::MoeCombine:
    inferred =
        mfshapes::inferMoeCombine(infoOf(in[0]), infoOf(in[1]), infoOf(in[2]));
    break;
  case fb::OpKind::TopKGrad:
    inferred =
        mfshapes::inferTopKGrad(infoOf(in[0]), infoOf(in[1]),
                                op.attributes_as_TopKGradAttrs()->width());
    break;
  case fb::OpKind::GroupedMatmulWeightGrad:
    inferred = mfshapes::inferGroupedMatmulWeightGrad(
        infoOf(in[0]), infoOf(in[1]), infoOf(in[2]),
        op.attributes_as_GroupedMatmulWeightGradAttrs()->expert(),
        op.attributes_as_GroupedMatmulWeightGradAttrs()->stacked());
    break;
  case fb::OpKind::AllToAll:
    inferred = mfshapes::inferAllToAll(
        infoOf(in[0]), infoOf(in[1]), infoOf(in[2]),
        outs.empty() || outs[0].shape.empty() ? -1 : outs[0].shape[0]);
    break;
  case fb::OpKind::MoeWeightsGrad:
    inferred = mfshapes::inferMoeWeightsGrad(infoOf(in[0]), infoOf(in[1]),
                                             infoOf(in[2]));
    break;
  case fb::OpKind::Matmul: {
    const fb::MatmulAttrs &attrs = *op.attributes_as_MatmulAttrs();
    inferred =
        mfshapes::inferMatmul(infoOf(in[0]), infoOf(in[1]),
                              attrs.transpose_lhs(), attrs.transpose_rhs());
    break;
  }
  case fb::OpKind::Transpose:
    inferred = mfshapes::inferTranspose(
        infoOf(in[0]),
        vectorOf(op.attributes_as_TransposeAttrs()->permutation()));
    break;
  case fb::OpKind::ReduceSum:
    inferred = mfshapes::inferReduction(
        infoOf(in[0]), op.attributes_as_ReduceSumAttrs()->dimension());
    break;
  case fb::OpKind::ReduceMax:
    inferred = mfshapes::inferReduction(
        infoOf(in[0]), op.attributes_as_ReduceMaxAttrs()->dimension());
    break;
  case fb::OpKind::Embedding:
    inferred = mfshapes::inferEmbedding(infoOf(in[0]), infoOf(in[1]));
    break;
  case fb::OpKind::RmsNorm:
    inferred = mfshapes::inferNorm(infoOf(in[0]), {infoOf(in[1])}, "weight");
    break;
  case fb::OpKind::LayerNorm:
    inferred = mfshapes::inferNorm(
        infoOf(in[0]), {infoOf(in[1]), infoOf(in[2])}, "weight and bias");
    break;
  case fb::OpKind::Rope: {
    const fb::RopeAttrs &attrs = *op.attributes_as_RopeAttrs();
    inferred = mfshapes::inferRope(infoOf(in[0]), infoOf(in[1]), attrs.theta(),
                                   vectorOf(attrs.frequency_scale()));
    break;
  }
  case fb::OpKind::CrossEntropy:
    inferred = mfshapes::inferCrossEntropy(infoOf(in[0]), infoOf(in[1]));
    break;
  case fb::OpKind::CrossEntropyGrad:
    inferred = mfshapes::inferCrossEntropyGrad(infoOf(in[0]), infoOf(in[1]),
                                               infoOf(in[2]));
    break;
  case fb::OpKind::KvCacheWrite: {
    mfshapes::TensorInfo table =
        in.size() > 3 ? infoOf(in[3]) : mfshapes::TensorInfo{};
    inferred =
        mfshapes::inferKvCacheWrite(infoOf(in[0]), infoOf(in[1]), infoOf(in[2]),
                                    in.size() > 3 ? &table : nullptr);
    break;
  }
  case fb::OpKind::Attention: {
    // q, k, v, then past_length, then a paged cache's block table (both
    // i32; k and v are then pools of blocks); an int8 cache's scales last
    // (floats).
    size_t scales = 0;
    while (scales < 2 && in.size() > 3 + scales &&
           in[in.size() - 1 - scales].dtype != DType::I32) {
      ++scales;
    }
    size_t positional = in.size() - scales;
    if (positional > 5) {
      return std::string("expected query, key, value, past_length and a "
                         "block table at most, then an int8 cache's scales");
    }
    std::vector<mfshapes::TensorInfo> infos;
    for (const TensorDesc &operand : in) {
      infos.push_back(infoOf(operand));
    }
    auto at = [&](size_t index, bool present) {
      return present ? &infos[index] : nullptr;
    };
    inferred = mfshapes::inferAttention(
        infos[0], infos[1], infos[2], at(3, positional >= 4),
        at(4, positional == 5), at(positional, scales >= 1),
        at(positional + 1, scales == 2),
        op.attributes_as_AttentionAttrs()->causal());
    break;
  }
  // Ops whose declared result says what they make.
  case fb::OpKind::EmbeddingGrad:
    return mfshapes::checkEmbeddingGrad(infoOf(in[0]), infoOf(in[1]),
                                        infoOf(outs[0]));
  case fb::OpKind::RmsNormGrad:
    return mfshapes::checkNormGrad(
        infoOf(in[0]), infoOf(in[1]), infoOf(in[2]), infoOf(outs[0]),
        op.attributes_as_RmsNormGradAttrs()->wrt(), /*weights=*/1);
  case fb::OpKind::LayerNormGrad:
    return mfshapes::checkNormGrad(
        infoOf(in[0]), infoOf(in[1]), infoOf(in[2]), infoOf(outs[0]),
        op.attributes_as_LayerNormGradAttrs()->wrt(), /*weights=*/2);
  case fb::OpKind::AttentionGrad: {
    mfshapes::TensorInfo past =
        in.size() > 4 ? infoOf(in[4]) : mfshapes::TensorInfo{};
    return mfshapes::checkAttentionGrad(
        infoOf(in[0]), infoOf(in[1]), infoOf(in[2]), infoOf(in[3]),
        in.size() > 4 ? &past : nullptr, infoOf(outs[0]),
        op.attributes_as_AttentionGradAttrs()->wrt());
  }
  case fb::OpKind::Iota:
    return mfshapes::checkDimension(op.attributes_as_IotaAttrs()->dimension(),
                                    static_cast<int64_t>(outs[0].shape.size()));
  case fb::OpKind::Softmax:
    return mfshapes::checkDimension(
        op.attributes_as_SoftmaxAttrs()->dimension(),
        static_cast<int64_t>(outs[0].shape.size()));
  case fb::OpKind::Broadcast:
    return mfshapes::checkBroadcast(infoOf(in[0]), infoOf(outs[0]));
  case fb::OpKind::Reshape:
    return mfshapes::checkReshape(infoOf(in[0]), infoOf(outs[0]));
  case fb::OpKind::Cast:
    return mfshapes::checkCast(infoOf(in[0]), infoOf(outs[0]));
  case fb::OpKind::Slice:
    return mfshapes::checkSlice(
        infoOf(in[0]), infoOf(outs[0]),
        vectorOf(op.attributes_as_SliceAttrs()->offsets()));
  case fb::OpKind::Pad:
    return mfshapes::checkPad(infoOf(in[0]), infoOf(outs[0]),
                              vectorOf(op.attributes_as_PadAttrs()->offsets()));
  case fb::OpKind::Concat: {
    std::vector<mfshapes::TensorInfo> inputs;
    for (const TensorDesc &input : in) {
      inputs.push_back(infoOf(input));
    }
    return mfshapes::checkConcat(inputs, infoOf(outs[0]),
                                 op.attributes_as_ConcatAttrs()->dimension());
  }
  default:
    return std::nullopt;
  }
  if (!inferred) {
    return inferred.error;
  }
  for (size_t r = 0; r < outs.size(); ++r) {
    if (!(inferred.results[r] == infoOf(outs[r]))) {
      return "expected result " + std::to_string(r) + " " +
             dtypeName(static_cast<DType>(inferred.results[r].element)) +
             formatShape(inferred.results[r].shape) +
             (inferred.note.empty() ? "" : " (" + inferred.note + ")");
    }
  }
  return "";
}

/// Why an op's types do not fit; empty when they do.
std::string check(const fb::Op &op, const std::vector<TensorDesc> &in,
                  const std::vector<TensorDesc> &outs) {
  const OpRow &row = *opRow(op.kind()); // the loader checked the kind
  if (std::string problem = checkRow(row, in, outs); !problem.empty()) {
    return problem;
  }
  if (std::optional<std::string> problem = checkShapeRule(op, in, outs)) {
    return *problem;
  }
  const TensorDesc &out = outs[0];
  switch (op.kind()) {
  case fb::OpKind::Param:
  case fb::OpKind::Constant:
    return ""; // checked with the parameter table / the data size
  case fb::OpKind::AllGather: // shapes and axes: against the grid
  case fb::OpKind::ReduceScatter:
  case fb::OpKind::Scatter:
    return in[0].dtype == out.dtype && in[0].shape.size() == out.shape.size() &&
                   !gridAxesOf(op).empty()
               ? ""
               : "expected an operand of the result's dtype and rank, and "
                 "grid axes";
  case fb::OpKind::AllReduce: // its axes are checked against the grid
  case fb::OpKind::AllToAllOffsets:
  case fb::OpKind::ProcessIndex:
    return !gridAxesOf(op).empty() ? "" : "expected grid axes";
  case fb::OpKind::AllToAllDims: // shapes: against the grid
    return in[0].dtype == out.dtype && !gridAxesOf(op).empty()
               ? ""
               : "expected an operand of the result's dtype, and grid axes";
  default:
    // An op whose types its ODS fixes needs no rule of its own.
    return row.sameOperandsAndResultType
               ? ""
               : std::string("no type rule for ") + row.name +
                     " in runtime/format/OpTypes.cpp";
  }
  return "";
}

} // namespace

Status mfrt::checkOpTypes(const fb::Op &op,
                          const std::vector<TensorDesc> &operands,
                          const std::vector<TensorDesc> &results) {
  std::string problem = check(op, operands, results);
  if (problem.empty()) {
    return Status::ok();
  }
  auto list = [](const std::vector<TensorDesc> &types) {
    std::string text;
    for (const TensorDesc &type : types) {
      text += std::string(text.empty() ? "" : ", ") + dtypeName(type.dtype) +
              formatShape(type.shape);
    }
    return text;
  };
  return Status::error(std::string(fb::EnumNameOpKind(op.kind())) + " (" +
                       list(operands) + ") -> " + list(results) + ": " +
                       problem);
}
