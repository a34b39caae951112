//===- GradientKernels.cpp - eager kernels of the gradient ops ------------===//
//
// The backward of the model-level ops, fp32 math like the forward kernels.
// Norm statistics and attention's softmax rows are recomputed from the
// forward inputs rather than kept.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/GradientKernels.h"

#include "runtime/kernels/FlashAttention.h"
#include "runtime/kernels/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mfrt;
using namespace mfrt::detail;

Status mfrt::detail::siluGrad(const fb::Op &op, const Tensor &x,
                              const Tensor &dy, Tensor &out) {
  return binary(op, x, dy, out, [](float v, float g) {
    float s = 1.0f / (1.0f + std::exp(-v));
    return g * s * (1.0f + v * (1.0f - s));
  });
}

Status mfrt::detail::geluGrad(const fb::Op &op, const Tensor &x,
                              const Tensor &dy, Tensor &out) {
  if (op.attributes_as_GeluGradAttrs()->approximate() ==
      fb::GeluApproximation::tanh) {
    return binary(op, x, dy, out, [](float v, float g) {
      const float k = 0.7978845608028654f, c = 0.044715f;
      float t = std::tanh(k * (v + c * v * v * v));
      return g * (0.5f * (1.0f + t) +
                  0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * c * v * v));
    });
  }
  return binary(op, x, dy, out, [](float v, float g) {
    const float invSqrt2 = 0.7071067811865476f,
                invSqrt2Pi = 0.3989422804014327f;
    return g * (0.5f * (1.0f + std::erf(v * invSqrt2)) +
                v * std::exp(-0.5f * v * v) * invSqrt2Pi);
  });
}

/// Vocabulary parallel, the rank's block of rows: ids of other blocks add
/// nothing.
Status mfrt::detail::embeddingGrad(const fb::Op &op, const Tensor &ids,
                                   const Tensor &dy, Tensor &out,
                                   const VocabularyBlock &block) {
  if (out.rank() != 2 || ids.dtype() != DType::I32) {
    return shapeError(op, "expected i32 ids and a [vocab, hidden] result");
  }
  Shape expected = ids.shape();
  expected.push_back(out.dim(1));
  MFRT_RETURN_IF_ERROR(expectShape(op, dy, expected, "the gradient"));
  int64_t rows = out.dim(0), hidden = out.dim(1);
  StatusOr<int64_t> vocab = wholeVocabulary(op, block, rows);
  if (!vocab) {
    return vocab.status();
  }
  F32In g(dy);
  F32Out table(out);
  std::fill(table.data(), table.data() + out.numElements(), 0.0f);
  for (int64_t i = 0; i < ids.numElements(); ++i) {
    int32_t id = ids.as<int32_t>()[i];
    if (id < 0 || id >= *vocab) {
      return shapeError(op, "token id " + std::to_string(id) +
                                " is outside the table's [0, " +
                                std::to_string(*vocab) + ")");
    }
    int64_t local = id - block.first;
    if (local < 0 || local >= rows) {
      continue;
    }
    for (int64_t k = 0; k < hidden; ++k) {
      table[local * hidden + k] += g[i * hidden + k];
    }
  }
  table.finish();
  return Status::ok();
}

/// RMSNorm / LayerNorm backward, one row at a time: the row statistics are
/// recomputed from the input. Accumulates in double.
Status mfrt::detail::normGrad(const fb::Op &op,
                              const std::vector<const Tensor *> &inputs,
                              Tensor &out, bool layerNorm) {
  const Tensor &a = *inputs[0], &w = *inputs[1], &dy = *inputs[2];
  MFRT_RETURN_IF_ERROR(expectSameShape(op, a, dy));
  if (a.rank() == 0) {
    return shapeError(op, "expected an input of rank >= 1");
  }
  int64_t features = a.shape().back();
  MFRT_RETURN_IF_ERROR(expectShape(op, w, {features}, "the weight"));
  int64_t operand = layerNorm ? op.attributes_as_LayerNormGradAttrs()->wrt()
                              : op.attributes_as_RmsNormGradAttrs()->wrt();
  MFRT_RETURN_IF_ERROR(expectShape(
      op, out, operand == 0 ? a.shape() : Shape{features}, "the result"));
  double epsilon = layerNorm ? op.attributes_as_LayerNormGradAttrs()->epsilon()
                             : op.attributes_as_RmsNormGradAttrs()->epsilon();
  F32In x(a), gamma(w), g(dy);
  F32Out z(out);
  int64_t rows = a.numElements() / std::max<int64_t>(features, 1);
  std::vector<double> weightSum(features, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x.data() + r * features;
    const float *grad = g.data() + r * features;
    double mean = 0;
    if (layerNorm) {
      for (int64_t k = 0; k < features; ++k) {
        mean += row[k];
      }
      mean /= features;
    }
    double variance = 0;
    for (int64_t k = 0; k < features; ++k) {
      variance += (row[k] - mean) * (row[k] - mean);
    }
    double rstd = 1.0 / std::sqrt(variance / features + epsilon);
    if (operand != 0) {
      for (int64_t k = 0; k < features; ++k) {
        double normed = (row[k] - mean) * rstd;
        weightSum[k] += operand == 1 ? grad[k] * normed : grad[k];
      }
      continue;
    }
    // dx = rstd * (gw - mean(gw) [LayerNorm] - n * mean(gw * n)), gw = g * w.
    double meanGw = 0, meanGwN = 0;
    for (int64_t k = 0; k < features; ++k) {
      double gw = grad[k] * gamma[k];
      meanGw += gw;
      meanGwN += gw * (row[k] - mean) * rstd;
    }
    meanGw /= features;
    meanGwN /= features;
    for (int64_t k = 0; k < features; ++k) {
      double normed = (row[k] - mean) * rstd;
      double gw = grad[k] * gamma[k];
      z[r * features + k] = static_cast<float>(
          rstd * (gw - (layerNorm ? meanGw : 0.0) - normed * meanGwN));
    }
  }
  if (operand != 0) {
    for (int64_t k = 0; k < features; ++k) {
      z[k] = static_cast<float>(weightSum[k]);
    }
  }
  z.finish();
  return Status::ok();
}

/// Attention backward without a KV cache. For query row i of head h:
/// p = softmax(q_i . k_j * scale) over the visible keys, dp_j = dO_i . v_j,
/// ds_j = p_j (dp_j - sum_j p_j dp_j); then dq_i = scale sum_j ds_j k_j,
/// dk_j += scale ds_j q_i, dv_j += p_j dO_i. Query gradients are tiled by
/// (batch, head); key/value gradients by (batch, KV head), which owns the
/// rows it sums into.
Status mfrt::detail::attentionGrad(const fb::Op &op,
                                   const std::vector<const Tensor *> &inputs,
                                   Tensor &out, const ParallelFor &parallel) {
  const Tensor &q = *inputs[0], &k = *inputs[1], &v = *inputs[2],
               &dO = *inputs[3];
  const fb::AttentionGradAttrs &attrs = *op.attributes_as_AttentionGradAttrs();
  bool causal = attrs.causal();
  int64_t operand = attrs.wrt();
  if (q.rank() != 4 || k.rank() != 4 || k.shape() != v.shape() ||
      q.shape() != dO.shape() || q.dim(0) != k.dim(0) || q.dim(3) != k.dim(3) ||
      k.dim(2) == 0 || q.dim(2) % k.dim(2) != 0 || operand < 0 || operand > 2) {
    return shapeError(op, "query " + formatShape(q.shape()) +
                              " does not fit key/value " +
                              formatShape(k.shape()));
  }
  MFRT_RETURN_IF_ERROR(expectSameShape(op, *inputs[operand], out));
  int64_t batch = q.dim(0), seq = q.dim(1), heads = q.dim(2), dim = q.dim(3);
  int64_t keys = k.dim(1), kvHeads = k.dim(2);
  float scale = static_cast<float>(attrs.scale());
  int64_t past = 0;
  if (inputs.size() > 4) { // past_length: the loader checked an i32 scalar
    past = inputs[4]->as<int32_t>()[0];
    if (past < 0 || past + seq > keys) {
      return shapeError(op, "past_length " + std::to_string(past) + " and " +
                                std::to_string(seq) +
                                " query rows do not fit " +
                                std::to_string(keys) + " keys");
    }
  }
  AttentionGradient args{nullptr, nullptr, nullptr, nullptr,   nullptr, nullptr,
                         nullptr, batch,   seq,     heads,     kvHeads, dim,
                         keys,    causal,  scale,   q.dtype(), past};
  auto run = [&](const void *query, const void *key, const void *value,
                 const void *outGrad, void *grad) {
    args.query = query;
    args.keys = key;
    args.values = value;
    args.outGrad = outGrad;
    (operand == 0   ? args.queryGrad
     : operand == 1 ? args.keyGrad
                    : args.valueGrad) = grad;
    parallel(batch * kvHeads, [&](int64_t begin, int64_t end) {
      runAttentionGradient(args, begin, end);
    });
  };
  bool oneType = q.dtype() != DType::I32 && k.dtype() == q.dtype() &&
                 v.dtype() == q.dtype() && dO.dtype() == q.dtype() &&
                 out.dtype() == q.dtype();
  if (oneType) {
    // The routine converts a unit's 16-bit rows itself, as the region does.
    run(q.data(), k.data(), v.data(), dO.data(), out.data());
    return Status::ok();
  }
  F32In qf(q), kf(k), vf(v), gf(dO);
  F32Out result(out);
  args.dtype = DType::F32;
  run(qf.data(), kf.data(), vf.data(), gf.data(), result.data());
  result.finish();
  return Status::ok();
}

/// Vocabulary parallel, the rank's block: each token's maximum and sum of
/// exponentials are combined over the ranks first.
Status mfrt::detail::crossEntropyGrad(const fb::Op &op, const Tensor &logits,
                                      const Tensor &labels, const Tensor &dloss,
                                      Tensor &out, const ParallelFor &parallel,
                                      const VocabularyBlock &block) {
  if (logits.rank() != 2 || labels.dtype() != DType::I32 ||
      dloss.numElements() != 1) {
    return shapeError(op, "expected [tokens, vocab] logits, i32 labels and a "
                          "scalar gradient");
  }
  MFRT_RETURN_IF_ERROR(expectShape(op, labels, {logits.dim(0)}, "labels"));
  MFRT_RETURN_IF_ERROR(expectSameShape(op, logits, out));
  int64_t ignore = op.attributes_as_CrossEntropyGradAttrs()->ignore_index();
  int64_t tokens = logits.dim(0), vocab = logits.dim(1);
  StatusOr<int64_t> whole = wholeVocabulary(op, block, vocab);
  if (!whole) {
    return whole.status();
  }
  MFRT_RETURN_IF_ERROR(checkLabels(op, labels, *whole, ignore));
  int64_t counted = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    counted += labels.as<int32_t>()[t] != ignore;
  }
  float factor =
      counted ? dloss.loadFloat(0) / static_cast<float>(counted) : 0.0f;
  F32In x(logits);
  F32Out z(out);
  std::vector<double> best(tokens), sums(tokens, 0.0);
  parallel(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      best[t] = maximumOf(x.data() + t * vocab, vocab);
    }
  });
  MFRT_RETURN_IF_ERROR(combine(block, best, VocabularyBlock::Combine::Max));
  // exp(x - max) into the result, rows on the pool.
  parallel(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float *row = x.data() + t * vocab;
      float *target = z.data() + t * vocab;
      std::copy(row, row + vocab, target);
      sums[t] = expShiftedSum(target, vocab, static_cast<float>(best[t]));
    }
  });
  MFRT_RETURN_IF_ERROR(combine(block, sums, VocabularyBlock::Combine::Sum));
  // (softmax - one-hot(label)) * factor per row.
  parallel(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t label = labels.as<int32_t>()[t];
      float *target = z.data() + t * vocab;
      if (label == ignore) {
        std::fill(target, target + vocab, 0.0f);
        continue;
      }
      float scale = static_cast<float>(factor / sums[t]);
      scaleInto(target, scale, target, vocab);
      int64_t local = label - block.first;
      if (local >= 0 && local < vocab) {
        target[local] -= factor;
      }
    }
  });
  z.finish();
  return Status::ok();
}

Status mfrt::detail::pad(const fb::Op &op, const Tensor &a, Tensor &out) {
  const Shape &in = a.shape();
  size_t rank = in.size();
  const auto &offsets = *op.attributes_as_PadAttrs()->offsets();
  if (offsets.size() != rank || out.rank() != static_cast<int64_t>(rank) ||
      a.dtype() != out.dtype()) {
    return shapeError(op, "offsets do not fit the operand");
  }
  std::vector<int64_t> strides = rowMajorStrides(out.shape());
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    int64_t offset = offsets.Get(d);
    if (offset < 0 || offset > out.dim(d) - in[d]) {
      return shapeError(op, "the input does not fit at its offsets");
    }
    base += offset * strides[d];
  }
  std::memset(out.data(), 0, out.byteSize());
  size_t element = dtypeSize(out.dtype());
  const char *from = static_cast<const char *>(a.data());
  char *to = static_cast<char *>(out.data());
  // The input's elements scattered into the output's strides.
  walkStrided(in, strides, base, [&](int64_t i, int64_t offset) {
    std::memcpy(to + offset * element, from + i * element, element);
  });
  return Status::ok();
}
