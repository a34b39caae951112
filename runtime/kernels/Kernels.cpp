//===- Kernels.cpp - the eager kernel library -----------------------------===//

#include "runtime/kernels/Kernels.h"

#include "runtime/kernels/FlashAttention.h"
#include "runtime/kernels/GradientKernels.h"
#include "runtime/kernels/Int8DotGemm.h"
#include "runtime/kernels/KernelSupport.h"
#include "runtime/kernels/MoeKernels.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mfrt;
using namespace mfrt::detail;

namespace {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Integer add is exact; the float path above would round large ints.
Status addInt(const fb::Op &op, const Tensor &a, const Tensor &b, Tensor &out) {
  MFRT_RETURN_IF_ERROR(expectSameShape(op, a, out));
  MFRT_RETURN_IF_ERROR(expectSameShape(op, b, out));
  for (int64_t i = 0; i < out.numElements(); ++i) {
    out.as<int32_t>()[i] = a.as<int32_t>()[i] + b.as<int32_t>()[i];
  }
  return Status::ok();
}

template <typename F>
Status unary(const fb::Op &op, const Tensor &a, Tensor &out, F function) {
  MFRT_RETURN_IF_ERROR(expectSameShape(op, a, out));
  if (!isFloat(a.dtype()) || !isFloat(out.dtype())) {
    return shapeError(op, "expected float tensors");
  }
  F32In x(a);
  F32Out z(out);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    z[i] = function(x[i]);
  }
  z.finish();
  return Status::ok();
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float fastGelu(float x) { return x / (1.0f + std::exp(-1.702f * x)); }

float geluTanh(float x) {
  const float k = 0.7978845608028654f; // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

float geluErf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
}

/// mf.dequantize: q * scale in f32, per row or per row and group (scales
/// [K / group, N]), q i8 or int4 two to a byte, rows on the pool; stored
/// in the result's type.
Status dequantize(const fb::Op &op, const Tensor &q, const Tensor &scale,
                  Tensor &out, const ParallelFor &parallel) {
  const fb::DequantizeAttrs *attributes = op.attributes_as_DequantizeAttrs();
  int64_t bits = attributes->bits(), group = attributes->group_size();
  // Per-row values may have leading dimensions: rows are all but the last.
  int64_t k = out.shape().back(), rows = out.numElements() / k;
  std::vector<int64_t> stored = out.shape();
  stored.back() = bits == 4 ? k / 2 : k;
  if (q.shape() != stored || (bits == 4 && k % 2 != 0)) {
    return Status::error(StatusCode::InvalidArgument,
                         "dequantize: values of shape " +
                             formatShape(q.shape()) + " for a " +
                             formatShape(out.shape()) + " weight");
  }
  int64_t width = group > 0 ? group : k;
  const int64_t scaleSize = dtypeSize(scale.dtype());
  parallel(rows, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(k));
    char *to = static_cast<char *>(out.data());
    const char *scales = static_cast<const char *>(scale.data());
    for (int64_t n = begin; n < end; ++n) {
      quantizedRowToFloats(q.as<int8_t>() + n * stored.back(), k, bits,
                           row.data());
      for (int64_t g = 0; g * width < k; ++g) {
        float factor;
        toFloats(scale.dtype(), scales + (g * rows + n) * scaleSize, &factor,
                 1);
        for (int64_t j = g * width; j < (g + 1) * width; ++j) {
          row[j] *= factor;
        }
      }
      fromFloats(out.dtype(), row.data(), to + n * k * dtypeSize(out.dtype()),
                 k);
    }
  });
  return Status::ok();
}

/// Calls `visit(r, row)` with each row of `k` elements of `x` (by default
/// its last dimension) as f32, rows on the pool.
template <typename Visit>
void forEachRow(const Tensor &x, const ParallelFor &parallel, Visit visit,
                int64_t k = 0) {
  k = k > 0 ? k : x.shape().back();
  int64_t rows = x.numElements() / k;
  parallel(rows, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(k));
    for (int64_t r = begin; r < end; ++r) {
      toFloats(x.dtype(),
               static_cast<const char *>(x.data()) +
                   r * k * dtypeSize(x.dtype()),
               row.data(), k);
      visit(r, row.data());
    }
  });
}

/// mf.dynamic_quantize: each row of the last dimension as i8 values and
/// one scale, max|x| / 127 rounded to the scales' type; the values divided
/// by that rounded scale, rounded half to even and clamped, in f32.
Status dynamicQuantize(const fb::Op &op, const Tensor &x, Tensor &values,
                       Tensor &scales, const ParallelFor &parallel) {
  int64_t k = x.shape().back(), rows = x.numElements() / k;
  if (values.shape() != x.shape() || scales.numElements() != rows) {
    return shapeError(op, "values " + formatShape(values.shape()) +
                              " and scales " + formatShape(scales.shape()) +
                              " for rows of " + formatShape(x.shape()));
  }
  forEachRow(x, parallel, [&](int64_t r, const float *row) {
    float scale = quantizeRowPerToken(row, k, values.as<int8_t>() + r * k,
                                      scales.dtype());
    fromFloats(
        scales.dtype(), &scale,
        static_cast<char *>(scales.data()) + r * dtypeSize(scales.dtype()), 1);
  });
  return Status::ok();
}

/// mf.quantize: each channel (of the trailing dimensions the scales span)
/// by its static scale and zero point (0 without them), rounded half to
/// even and clamped, in f32.
Status quantize(const fb::Op &op, const Tensor &x, const Tensor &scales,
                const Tensor *zeroPoints, Tensor &values,
                const ParallelFor &parallel) {
  int64_t k = scales.numElements();
  size_t spanned = scales.shape().size();
  if (values.shape() != x.shape() || spanned > x.shape().size() ||
      !std::equal(scales.shape().begin(), scales.shape().end(),
                  x.shape().end() - spanned) ||
      (zeroPoints && zeroPoints->numElements() != k)) {
    return shapeError(op, "values " + formatShape(values.shape()) +
                              ", scales " + formatShape(scales.shape()) +
                              " and zero points " +
                              (zeroPoints ? formatShape(zeroPoints->shape())
                                          : std::string("(none)")) +
                              " for " + formatShape(x.shape()));
  }
  std::vector<float> scale(static_cast<size_t>(k)), zero(scale.size());
  toFloats(scales.dtype(), scales.data(), scale.data(), k);
  for (int64_t j = 0; zeroPoints && j < k; ++j) {
    zero[j] = zeroPoints->as<int8_t>()[j];
  }
  forEachRow(
      x, parallel,
      [&](int64_t r, const float *row) {
        quantizeRowStatic(row, k, scale.data(), zero.data(),
                          values.as<int8_t>() + r * k);
      },
      k);
  return Status::ok();
}

Status cast(const fb::Op &op, const Tensor &a, Tensor &out,
            const ParallelFor &parallel) {
  MFRT_RETURN_IF_ERROR(expectSameShape(op, a, out));
  int64_t n = out.numElements();
  if (a.dtype() == DType::I32 && out.dtype() == DType::I32) {
    std::memcpy(out.data(), a.data(), out.byteSize());
  } else if (out.dtype() == DType::I32) {
    for (int64_t i = 0; i < n; ++i) {
      out.as<int32_t>()[i] = static_cast<int32_t>(a.loadFloat(i));
    }
  } else if (a.dtype() == DType::I32) {
    for (int64_t i = 0; i < n; ++i) {
      out.storeFloat(i, a.loadFloat(i));
    }
  } else {
    // Floats to floats (a mixed-precision model's weights, every step): the
    // bulk conversions (F16C where the machine has it), chunks on the pool.
    // One element at a time took ~9 ns (GPT-2's 38.6M-element lm_head,
    // 374 ms).
    constexpr int64_t kChunk = int64_t(1) << 14;
    size_t inSize = dtypeSize(a.dtype()), outSize = dtypeSize(out.dtype());
    const char *from = static_cast<const char *>(a.data());
    char *to = static_cast<char *>(out.data());
    parallel((n + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> floats;
      for (int64_t chunk = begin; chunk < end; ++chunk) {
        int64_t first = chunk * kChunk, count = std::min(kChunk, n - first);
        const char *in = from + first * inSize;
        char *result = to + first * outSize;
        if (a.dtype() == DType::F32) {
          fromFloats(out.dtype(), reinterpret_cast<const float *>(in), result,
                     count);
        } else if (out.dtype() == DType::F32) {
          toFloats(a.dtype(), in, reinterpret_cast<float *>(result), count);
        } else {
          floats.resize(count);
          toFloats(a.dtype(), in, floats.data(), count);
          fromFloats(out.dtype(), floats.data(), result, count);
        }
      }
    });
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// out[i0, .., in] = source[base + sum(i_d * strides[d])]: broadcast (zero
/// strides), transpose (permuted strides) and slice (an offset base) are
/// all this gather. Where the last dimension is contiguous in the source
/// (slices, rows broadcast), a row at a time, else an element at a time
/// (GPT-2's split of its fused q/k/v projection, 36 slices a 32-token
/// prefill: 7.0 -> 1.1 ms, --profile).
/// `count` copies of the `element`-byte value at `value` from `to` on.
void fillElements(char *to, const char *value, size_t element, int64_t count) {
  switch (element) {
  case 4: {
    uint32_t v;
    std::memcpy(&v, value, 4);
    std::fill_n(reinterpret_cast<uint32_t *>(to), count, v);
    return;
  }
  case 2: {
    uint16_t v;
    std::memcpy(&v, value, 2);
    std::fill_n(reinterpret_cast<uint16_t *>(to), count, v);
    return;
  }
  default:
    for (int64_t i = 0; i < count; ++i) {
      std::memcpy(to + i * element, value, element);
    }
  }
}

void stridedGather(const Tensor &source, Tensor &out,
                   const std::vector<int64_t> &strides, int64_t base) {
  size_t element = dtypeSize(out.dtype());
  const char *from = static_cast<const char *>(source.data());
  char *to = static_cast<char *>(out.data());
  const Shape &shape = out.shape();
  if (!shape.empty() && strides.back() == 0) {
    // Each row repeats one value (a scalar, or a [.., 1] column, broadcast:
    // PyNative's optimizer broadcasts its scalars to every weight's shape).
    int64_t row = shape.back();
    walkStrided(Shape(shape.begin(), shape.end() - 1),
                std::vector<int64_t>(strides.begin(), strides.end() - 1), base,
                [&](int64_t i, int64_t offset) {
                  fillElements(to + i * row * element, from + offset * element,
                               element, row);
                });
    return;
  }
  if (!shape.empty() && strides.back() == 1) {
    size_t row = shape.back() * element;
    walkStrided(Shape(shape.begin(), shape.end() - 1),
                std::vector<int64_t>(strides.begin(), strides.end() - 1), base,
                [&](int64_t i, int64_t offset) {
                  std::memcpy(to + i * row, from + offset * element, row);
                });
    return;
  }
  walkStrided(shape, strides, base, [&](int64_t i, int64_t offset) {
    std::memcpy(to + i * element, from + offset * element, element);
  });
}

Status broadcast(const fb::Op &op, const Tensor &a, Tensor &out) {
  const Shape &from = a.shape(), &to = out.shape();
  if (from.size() > to.size() || a.dtype() != out.dtype()) {
    return shapeError(op, "cannot broadcast " + formatShape(from) + " to " +
                              formatShape(to));
  }
  size_t lead = to.size() - from.size();
  std::vector<int64_t> strides(to.size(), 0);
  int64_t stride = 1;
  for (int64_t i = static_cast<int64_t>(from.size()) - 1; i >= 0; --i) {
    if (from[i] != 1 && from[i] != to[lead + i]) {
      return shapeError(op, "cannot broadcast " + formatShape(from) + " to " +
                                formatShape(to));
    }
    strides[lead + i] = from[i] == 1 ? 0 : stride;
    stride *= from[i];
  }
  stridedGather(a, out, strides, 0);
  return Status::ok();
}

Status transpose(const fb::Op &op, const Tensor &a, Tensor &out) {
  const Shape &in = a.shape();
  size_t rank = in.size();
  const auto &permutation = *op.attributes_as_TransposeAttrs()->permutation();
  if (permutation.size() != rank || out.rank() != static_cast<int64_t>(rank) ||
      a.dtype() != out.dtype()) {
    return shapeError(op, "permutation does not fit the operand");
  }
  std::vector<int64_t> inStrides = rowMajorStrides(in);
  std::vector<int64_t> strides(rank);
  std::vector<bool> seen(rank, false);
  for (size_t d = 0; d < rank; ++d) {
    int64_t source = permutation.Get(d);
    if (source < 0 || source >= static_cast<int64_t>(rank) || seen[source] ||
        out.dim(d) != in[source]) {
      return shapeError(op, "invalid permutation for shape " + formatShape(in));
    }
    seen[source] = true;
    strides[d] = inStrides[source];
  }
  stridedGather(a, out, strides, 0);
  return Status::ok();
}

Status slice(const fb::Op &op, const Tensor &a, Tensor &out) {
  const Shape &in = a.shape();
  size_t rank = in.size();
  const auto &offsets = *op.attributes_as_SliceAttrs()->offsets();
  if (offsets.size() != rank || out.rank() != static_cast<int64_t>(rank) ||
      a.dtype() != out.dtype()) {
    return shapeError(op, "offsets do not fit the operand");
  }
  for (size_t d = 0; d < rank; ++d) {
    int64_t offset = offsets.Get(d);
    if (offset < 0 || out.dim(d) < 0 || offset > in[d] - out.dim(d)) {
      return shapeError(op, "slice is outside the operand");
    }
  }
  std::vector<int64_t> strides = rowMajorStrides(in);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    base += offsets.Get(d) * strides[d];
  }
  stridedGather(a, out, strides, base);
  return Status::ok();
}

Status concat(const fb::Op &op, const std::vector<const Tensor *> &inputs,
              Tensor &out) {
  int64_t dim = op.attributes_as_ConcatAttrs()->dimension();
  if (dim < 0 || dim >= out.rank()) {
    return shapeError(op, "dimension out of range");
  }
  Split split = splitAt(out.shape(), dim);
  size_t element = dtypeSize(out.dtype());
  int64_t total = 0;
  for (const Tensor *input : inputs) {
    Shape expected = out.shape();
    expected[dim] = input->rank() == out.rank() ? input->dim(dim) : -1;
    MFRT_RETURN_IF_ERROR(expectShape(op, *input, expected, "an input"));
    if (input->dtype() != out.dtype()) {
      return shapeError(op, "input dtypes differ");
    }
    total += input->dim(dim);
  }
  if (total != out.dim(dim)) {
    return shapeError(op, "inputs do not add up to the result");
  }
  int64_t offset = 0;
  for (const Tensor *input : inputs) {
    int64_t chunk = input->dim(dim) * split.inner * element;
    for (int64_t o = 0; o < split.outer; ++o) {
      std::memcpy(static_cast<char *>(out.data()) +
                      (o * split.size * split.inner + offset) * element,
                  static_cast<const char *>(input->data()) + o * chunk, chunk);
    }
    offset += input->dim(dim) * split.inner;
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

Status reduce(const fb::Op &op, const Tensor &a, Tensor &out, bool isMax) {
  int64_t dim = isMax ? op.attributes_as_ReduceMaxAttrs()->dimension()
                      : op.attributes_as_ReduceSumAttrs()->dimension();
  if (dim < 0 || dim >= a.rank()) {
    return shapeError(op, "dimension out of range");
  }
  Shape expected = a.shape();
  expected[dim] = 1;
  MFRT_RETURN_IF_ERROR(expectShape(op, out, expected, "the result"));
  Split split = splitAt(a.shape(), dim);
  F32In x(a);
  F32Out z(out);
  for (int64_t o = 0; o < split.outer; ++o) {
    for (int64_t i = 0; i < split.inner; ++i) {
      double sum = 0;
      float best = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < split.size; ++k) {
        float value = x[(o * split.size + k) * split.inner + i];
        sum += value;
        best = std::max(best, value);
      }
      z[o * split.inner + i] = isMax ? best : static_cast<float>(sum);
    }
  }
  z.finish();
  return Status::ok();
}

Status softmax(const fb::Op &op, const Tensor &a, Tensor &out) {
  int64_t dim = op.attributes_as_SoftmaxAttrs()->dimension();
  if (dim < 0 || dim >= a.rank()) {
    return shapeError(op, "dimension out of range");
  }
  MFRT_RETURN_IF_ERROR(expectSameShape(op, a, out));
  Split split = splitAt(a.shape(), dim);
  F32In x(a);
  F32Out z(out);
  for (int64_t o = 0; o < split.outer; ++o) {
    for (int64_t i = 0; i < split.inner; ++i) {
      auto at = [&](int64_t k) {
        return (o * split.size + k) * split.inner + i;
      };
      float best = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < split.size; ++k) {
        best = std::max(best, x[at(k)]);
      }
      double sum = 0;
      for (int64_t k = 0; k < split.size; ++k) {
        z[at(k)] = std::exp(x[at(k)] - best);
        sum += z[at(k)];
      }
      for (int64_t k = 0; k < split.size; ++k) {
        z[at(k)] = static_cast<float>(z[at(k)] / sum);
      }
    }
  }
  z.finish();
  return Status::ok();
}

/// RMSNorm / LayerNorm over the last dimension, rows spread by `parallel`.
Status norm(const fb::Op &op, const std::vector<const Tensor *> &inputs,
            Tensor &out, bool layerNorm, const ParallelFor &parallel) {
  const Tensor &a = *inputs[0];
  MFRT_RETURN_IF_ERROR(expectSameShape(op, a, out));
  if (a.rank() == 0) {
    return shapeError(op, "expected an input of rank >= 1");
  }
  int64_t features = a.shape().back();
  for (size_t i = 1; i < inputs.size(); ++i) {
    MFRT_RETURN_IF_ERROR(expectShape(op, *inputs[i], {features}, "a weight"));
  }
  float epsilon = static_cast<float>(
      layerNorm ? op.attributes_as_LayerNormAttrs()->epsilon()
                : op.attributes_as_RmsNormAttrs()->epsilon());
  F32In x(a), gamma(*inputs[1]);
  std::optional<F32In> beta;
  if (layerNorm) {
    beta.emplace(*inputs[2]);
  }
  F32Out z(out);
  int64_t rows = a.numElements() / std::max<int64_t>(features, 1);
  auto normalize = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *row = x.data() + r * features;
      float *target = z.data() + r * features;
      // (No rows when features is 0.)
      double mean = layerNorm ? sumOf(row, features) / features : 0.0;
      double variance = squaredDeviations(row, features, mean) / features;
      float scale = static_cast<float>(1.0 / std::sqrt(variance + epsilon));
      float center = static_cast<float>(mean);
      for (int64_t k = 0; k < features; ++k) {
        target[k] = (row[k] - center) * scale * gamma[k] +
                    (layerNorm ? (*beta)[k] : 0.0f);
      }
    }
  };
  // Rows of 64K elements or more per thread are worth sharing.
  constexpr int64_t kRowsElementsPerTile = int64_t(1) << 16;
  int64_t rowsPerTile = std::max<int64_t>(
      1, kRowsElementsPerTile / std::max<int64_t>(features, 1));
  int64_t tiles = (rows + rowsPerTile - 1) / rowsPerTile;
  (tiles > 1 ? parallel : runSerially)(tiles, [&](int64_t begin, int64_t end) {
    normalize(begin * rowsPerTile, std::min(rows, end * rowsPerTile));
  });
  z.finish();
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Model-level kernels
//===----------------------------------------------------------------------===//

/// Vocabulary parallel, the ids of other blocks give zero rows.
Status embedding(const fb::Op &op, const Tensor &table, const Tensor &ids,
                 Tensor &out, const VocabularyBlock &block) {
  if (table.rank() != 2 || ids.dtype() != DType::I32 ||
      table.dtype() != out.dtype()) {
    return shapeError(op, "expected a [vocab, hidden] table and i32 ids");
  }
  Shape expected = ids.shape();
  expected.push_back(table.dim(1));
  MFRT_RETURN_IF_ERROR(expectShape(op, out, expected, "the result"));
  StatusOr<int64_t> vocab = wholeVocabulary(op, block, table.dim(0));
  if (!vocab) {
    return vocab.status();
  }
  size_t rowBytes = table.dim(1) * dtypeSize(table.dtype());
  for (int64_t i = 0; i < ids.numElements(); ++i) {
    int32_t id = ids.as<int32_t>()[i];
    if (id < 0 || id >= *vocab) {
      return shapeError(op, "token id " + std::to_string(id) +
                                " is outside the table's [0, " +
                                std::to_string(*vocab) + ")");
    }
    char *row = static_cast<char *>(out.data()) + i * rowBytes;
    int64_t local = id - block.first;
    if (local < 0 || local >= table.dim(0)) {
      std::memset(row, 0, rowBytes);
      continue;
    }
    std::memcpy(row, static_cast<const char *>(table.data()) + local * rowBytes,
                rowBytes);
  }
  return Status::ok();
}

Status matmul(const fb::Op &op, const Tensor &lhs, const Tensor &rhs,
              Tensor &out) {
  const fb::MatmulAttrs &attrs = *op.attributes_as_MatmulAttrs();
  bool transposeLhs = attrs.transpose_lhs(),
       transposeRhs = attrs.transpose_rhs();
  if (lhs.rank() < 2 || rhs.rank() < 2 || out.rank() != lhs.rank()) {
    return shapeError(op, "expected operands of rank >= 2");
  }
  int64_t rank = lhs.rank();
  int64_t m = transposeLhs ? lhs.dim(rank - 1) : lhs.dim(rank - 2);
  int64_t k = transposeLhs ? lhs.dim(rank - 2) : lhs.dim(rank - 1);
  int64_t rhsRank = rhs.rank();
  int64_t rhsK = transposeRhs ? rhs.dim(rhsRank - 1) : rhs.dim(rhsRank - 2);
  int64_t n = transposeRhs ? rhs.dim(rhsRank - 2) : rhs.dim(rhsRank - 1);
  Shape batchShape(lhs.shape().begin(), lhs.shape().end() - 2);
  Shape expected = batchShape;
  expected.push_back(m);
  expected.push_back(n);
  bool sharedRhs = rhsRank == 2;
  if (k != rhsK || (!sharedRhs && Shape(rhs.shape().begin(),
                                        rhs.shape().end() - 2) != batchShape)) {
    return shapeError(op, "cannot multiply " + formatShape(lhs.shape()) +
                              " by " + formatShape(rhs.shape()));
  }
  MFRT_RETURN_IF_ERROR(expectShape(op, out, expected, "the result"));
  int64_t batch = 1;
  for (int64_t dim : batchShape) {
    batch *= dim;
  }
  CBLAS_TRANSPOSE ta = transposeLhs ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transposeRhs ? CblasTrans : CblasNoTrans;
  int lda = transposeLhs ? m : k, ldb = transposeRhs ? k : n;
  if (sharedRhs && !transposeLhs && rhs.dtype() != DType::F32) {
    // A 16-bit weight, widened a panel of columns at a time: widening all
    // of it took a fresh buffer per call (GPT-2's f16 lm_head, 38.6M
    // elements: 489 ms a decode step).
    constexpr int64_t kPanel = 256;
    F32In a(lhs);
    F32Out c(out);
    thread_local std::vector<float> panel;
    for (int64_t n0 = 0; n0 < n; n0 += kPanel) {
      int64_t width = std::min(kPanel, n - n0);
      panel.resize(width * k);
      panelToFloats(rhs.dtype(), rhs.data(), transposeRhs, n0, width, k, n,
                    panel.data());
      cblas_sgemm(CblasRowMajor, ta, tb, batch * m, width, k, 1.0f, a.data(),
                  lda, panel.data(), transposeRhs ? k : width, 0.0f,
                  c.data() + n0, n);
    }
    c.finish();
    return Status::ok();
  }
  F32In a(lhs), b(rhs);
  F32Out c(out);
  if (sharedRhs && !transposeLhs) {
    // One GEMM over all rows of all batches.
    cblas_sgemm(CblasRowMajor, ta, tb, batch * m, n, k, 1.0f, a.data(), lda,
                b.data(), ldb, 0.0f, c.data(), n);
  } else {
    for (int64_t i = 0; i < batch; ++i) {
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a.data() + i * m * k,
                  lda, b.data() + (sharedRhs ? 0 : i * k * n), ldb, 0.0f,
                  c.data() + i * m * n, n);
    }
  }
  c.finish();
  return Status::ok();
}

Status rope(const fb::Op &op, const Tensor &x, const Tensor &positions,
            Tensor &out) {
  if (x.rank() != 4 || x.dim(3) % 2 != 0 || positions.dtype() != DType::I32) {
    return shapeError(op, "expected [batch, seq, heads, even head_dim]");
  }
  MFRT_RETURN_IF_ERROR(expectSameShape(op, x, out));
  MFRT_RETURN_IF_ERROR(
      expectShape(op, positions, {x.dim(0), x.dim(1)}, "positions"));
  int64_t heads = x.dim(2), headDim = x.dim(3), half = headDim / 2;
  // The inverse rotation (the gradient) turns by minus the angle.
  const fb::RopeAttrs &attrs = *op.attributes_as_RopeAttrs();
  float direction = attrs.inverse() ? -1.0f : 1.0f;
  std::vector<float> inverseFrequency =
      ropeInverseFrequencies(static_cast<float>(attrs.theta()), headDim);
  // Context extension (PI, LLaMA-3): a scale per frequency (OpTypes checked
  // there are head_dim / 2 of them).
  if (const auto *scales = attrs.frequency_scale(); scales && scales->size()) {
    for (int64_t i = 0; i < half; ++i) {
      inverseFrequency[i] *= static_cast<float>(scales->Get(i));
    }
  }
  F32In in(x);
  F32Out result(out);
  std::vector<float> cosines(half), sines(half);
  for (int64_t token = 0; token < positions.numElements(); ++token) {
    ropeAngles(inverseFrequency,
               static_cast<float>(positions.as<int32_t>()[token]), direction,
               cosines.data(), sines.data());
    for (int64_t h = 0; h < heads; ++h) {
      int64_t base = (token * heads + h) * headDim;
      ropeRotate(in.data() + base, result.data() + base, cosines.data(),
                 sines.data(), half);
    }
  }
  result.finish();
  return Status::ok();
}

/// Each batch row's start in a cache of `keys` rows, from a scalar (every
/// row) or one position per row, checked so `count` new rows fit.
StatusOr<std::vector<int64_t>> positionsPerRow(const fb::Op &op,
                                               const Tensor &position,
                                               int64_t batch, int64_t count,
                                               int64_t keys) {
  bool perRow = position.rank() == 1;
  if (position.dtype() != DType::I32 ||
      position.numElements() != (perRow ? batch : 1) || position.rank() > 1) {
    return shapeError(op, "a position must be a scalar i32 or one per batch "
                          "row, got " +
                              formatShape(position.shape()));
  }
  std::vector<int64_t> starts(batch);
  for (int64_t b = 0; b < batch; ++b) {
    starts[b] = position.as<int32_t>()[perRow ? b : 0];
    if (starts[b] < 0 || starts[b] + count > keys) {
      return shapeError(
          op, "writing " + std::to_string(count) + " tokens at position " +
                  std::to_string(starts[b]) +
                  (perRow ? " (batch row " + std::to_string(b) + ")" : "") +
                  " overflows the KV cache of " + std::to_string(keys) +
                  "; prompt plus new tokens must fit in seq_length");
    }
  }
  return starts;
}

/// A paged cache's block table operand for `batch` rows over a pool of
/// `pool` [blocks, block_size, ...], its entries checked against the pool.
StatusOr<BlockTable> blockTableOf(const fb::Op &op, const Tensor &entries,
                                  int64_t batch, const Tensor &pool) {
  if (entries.dtype() != DType::I32 || entries.rank() != 2 ||
      entries.dim(0) != batch || pool.rank() != 4) {
    return shapeError(op, "a block table must be i32 [" +
                              std::to_string(batch) + ", blocks], got " +
                              formatShape(entries.shape()));
  }
  BlockTable table{entries.as<int32_t>(), entries.dim(1), pool.dim(1),
                   pool.dim(0)};
  if (std::string why = table.check(batch); !why.empty()) {
    return shapeError(op, why);
  }
  return table;
}

/// Attention per (batch, head, block of query rows), FlashAttention.h's
/// blocks over the cache in place (GQA: the head's KV head, strided).
/// Tiles may run at once; a tile's math does not depend on the split.
Status attention(const fb::Op &op, const std::vector<const Tensor *> &inputs,
                 Tensor &out, const ParallelFor &parallel) {
  const Tensor &q = *inputs[0], &k = *inputs[1], &v = *inputs[2];
  const fb::AttentionAttrs &attrs = *op.attributes_as_AttentionAttrs();
  // q, k, v, then past_length, then a paged cache's block table; an int8
  // cache's scales last.
  bool int8Cache = k.dtype() == DType::I8;
  size_t positional = inputs.size() - (int8Cache ? 2 : 0);
  bool causal = attrs.causal(), hasPast = positional >= 4;
  bool paged = positional == 5;
  if (q.rank() != 4 || k.rank() != 4 || k.shape() != v.shape() ||
      (!paged && q.dim(0) != k.dim(0)) || q.dim(3) != k.dim(3) ||
      k.dim(2) == 0 || q.dim(2) % k.dim(2) != 0) {
    return shapeError(op, "query " + formatShape(q.shape()) +
                              " does not fit key/value " +
                              formatShape(k.shape()));
  }
  MFRT_RETURN_IF_ERROR(expectSameShape(op, q, out));
  int64_t batch = q.dim(0), seq = q.dim(1), heads = q.dim(2), dim = q.dim(3);
  int64_t keys = k.dim(1), kvHeads = k.dim(2), group = heads / kvHeads;
  // An int8 cache's rows are read times their channel's scale.
  std::vector<float> keyScales, valueScales;
  if (int8Cache) {
    for (auto [scales, tensor] :
         {std::pair{&keyScales, inputs[positional]},
          std::pair{&valueScales, inputs[positional + 1]}}) {
      if (tensor->numElements() != kvHeads * dim) {
        return shapeError(op, "scales " + formatShape(tensor->shape()) +
                                  " for an int8 cache " +
                                  formatShape(k.shape()));
      }
      scales->resize(kvHeads * dim);
      toFloats(tensor->dtype(), tensor->data(), scales->data(), kvHeads * dim);
    }
  }
  // A row of `t` (kvHeads x dim values from element `element`) as f32.
  auto widenRows = [&](const Tensor &t, int64_t element, int64_t rows,
                       float *to) {
    if (t.dtype() == DType::I8) {
      dequantizeRows(t.as<int8_t>() + element, kvHeads * dim, rows,
                     &t == &k ? keyScales.data() : valueScales.data(),
                     kvHeads * dim, to);
    } else {
      toFloats(t.dtype(),
               static_cast<const char *>(t.data()) +
                   element * dtypeSize(t.dtype()),
               to, rows * kvHeads * dim);
    }
  };
  BlockTable table;
  if (paged) {
    MFRT_ASSIGN_OR_RETURN(table, blockTableOf(op, *inputs[4], batch, k));
    keys = table.width * table.blockSize; // what a row's table maps
  }
  std::vector<int64_t> pasts(batch, 0);
  if (hasPast) {
    MFRT_ASSIGN_OR_RETURN(pasts,
                          positionsPerRow(op, *inputs[3], batch, seq, keys));
  }
  float scale = static_cast<float>(attrs.scale());
  F32In qf(q);
  F32Out result(out);
  int64_t rowBlocks = (seq + kAttentionRowBlock - 1) / kAttentionRowBlock;
  // Row b attends over its past and its new rows; the most any row does
  // bounds what 16-bit caches widen.
  auto attendedOf = [&](int64_t b) { return hasPast ? pasts[b] + seq : keys; };
  int64_t attended = 0;
  for (int64_t b = 0; b < batch; ++b) {
    attended = std::max(attended, attendedOf(b));
  }
  // Keys and values of 16 bits: only the positions attended are widened
  // (the rest of a cache is never read; widening a 1024-position f16 cache
  // took GPT-2 11 ms a layer per decode step), so a batch's rows are
  // keyRows apart in kf/vf.
  int64_t keyRows =
      k.dtype() == DType::F32 && !paged ? keys : std::min(attended, keys);
  // The keys each row may read: a paged row's up to its first block not
  // mapped; a query row that would see past them outputs zeros.
  std::vector<int64_t> visible(batch);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rowKeys = std::min(attendedOf(b), keys);
    visible[b] = paged ? table.mappedPrefix(b, rowKeys) : rowKeys;
  }
  std::vector<float> widenedKeys, widenedValues;
  auto widened = [&](const Tensor &t, std::vector<float> &rows) {
    if (paged) { // each row's keys gathered from its blocks, in f32
      rows.assign(batch * keyRows * kvHeads * dim, 0.0f);
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t p = 0; p < visible[b]; ++p) {
          widenRows(t, table.poolRow(b, p) * kvHeads * dim, 1,
                    rows.data() + (b * keyRows + p) * kvHeads * dim);
        }
      }
      return static_cast<const float *>(rows.data());
    }
    if (t.dtype() == DType::F32) {
      return t.as<float>();
    }
    int64_t perBatch = keyRows * kvHeads * dim;
    rows.resize(batch * perBatch);
    for (int64_t b = 0; b < batch; ++b) {
      widenRows(t, b * keys * kvHeads * dim, keyRows,
                rows.data() + b * perBatch);
    }
    return static_cast<const float *>(rows.data());
  };
  const float *kf = widened(k, widenedKeys), *vf = widened(v, widenedValues);
  bool small = batch * heads * seq * attended * dim < (1 << 16);
  int64_t queryStride = heads * dim, keyStride = kvHeads * dim;
  if (seq == 1) {
    // One position (decode): a KV head's query heads attend together, as
    // the fused attention does them.
    (small ? runSerially
           : parallel)(batch * kvHeads, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch;
      for (int64_t unit = begin; unit < end; ++unit) {
        int64_t b = unit / kvHeads, kvHead = unit % kvHeads;
        int64_t offset = (b * heads + kvHead * group) * dim;
        int64_t kvOffset = (b * keyRows * kvHeads + kvHead) * dim;
        if (visible[b] < std::min(attendedOf(b), keys)) {
          std::fill_n(result.data() + offset, group * dim, 0.0f);
          continue;
        }
        attendRows(attentionOfOnePosition(qf.data() + offset, kf + kvOffset,
                                          vf + kvOffset, keyStride, keyStride,
                                          group, pasts[b], visible[b], causal,
                                          scale, result.data() + offset, dim),
                   scratch);
      }
    });
    result.finish();
    return Status::ok();
  }
  (small ? runSerially : parallel)(batch * heads * rowBlocks, [&](int64_t begin,
                                                                  int64_t end) {
    std::vector<float> scratch;
    for (int64_t tile = begin; tile < end; ++tile) {
      int64_t b = tile / (heads * rowBlocks);
      int64_t h = tile / rowBlocks % heads;
      int64_t firstRow = tile % rowBlocks * kAttentionRowBlock;
      int64_t rows = std::min(seq, firstRow + kAttentionRowBlock) - firstRow;
      int64_t offset = ((b * seq + firstRow) * heads + h) * dim;
      int64_t kvOffset = (b * keyRows * kvHeads + h / group) * dim;
      // Rows that would see a key not mapped (causal row i sees past + i +
      // 1) output zeros.
      int64_t validRows = rows;
      if (visible[b] < std::min(attendedOf(b), keys)) {
        validRows =
            causal
                ? std::clamp<int64_t>(visible[b] - pasts[b] - firstRow, 0, rows)
                : 0;
        for (int64_t r = validRows; r < rows; ++r) {
          std::fill_n(result.data() + offset + r * queryStride, dim, 0.0f);
        }
      }
      if (validRows == 0) {
        continue;
      }
      attendRows({qf.data() + offset, queryStride, kf + kvOffset, vf + kvOffset,
                  keyStride, keyStride, firstRow, validRows, pasts[b],
                  visible[b], causal, scale, result.data() + offset,
                  queryStride, dim},
                 scratch);
    }
  });
  result.finish();
  return Status::ok();
}

/// A paged cache (a pool of blocks): each row's new tokens where its block
/// table maps them; a position in a block not mapped is not written.
Status pagedKvCacheWrite(const fb::Op &op, const Tensor &pool,
                         const Tensor &update, const Tensor &position,
                         const Tensor &entries, Tensor &out) {
  if (pool.rank() != 4 || update.rank() != 4 || pool.dim(2) != update.dim(2) ||
      pool.dim(3) != update.dim(3) || pool.dtype() != update.dtype()) {
    return shapeError(op, "update " + formatShape(update.shape()) +
                              " does not fit the block pool " +
                              formatShape(pool.shape()));
  }
  MFRT_RETURN_IF_ERROR(expectSameShape(op, pool, out));
  int64_t batch = update.dim(0), count = update.dim(1);
  MFRT_ASSIGN_OR_RETURN(BlockTable table,
                        blockTableOf(op, entries, batch, pool));
  MFRT_ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                        positionsPerRow(op, position, batch, count,
                                        table.width * table.blockSize));
  if (out.data() != pool.data()) {
    std::memcpy(out.data(), pool.data(), out.byteSize());
  }
  size_t rowBytes = pool.dim(2) * pool.dim(3) * dtypeSize(pool.dtype());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t r = 0; r < count; ++r) {
      int64_t row = table.poolRow(b, starts[b] + r);
      if (row >= 0) {
        std::memcpy(static_cast<char *>(out.data()) + row * rowBytes,
                    static_cast<const char *>(update.data()) +
                        (b * count + r) * rowBytes,
                    rowBytes);
      }
    }
  }
  return Status::ok();
}

Status kvCacheWrite(const fb::Op &op, const Tensor &cache, const Tensor &update,
                    const Tensor &position, Tensor &out) {
  if (cache.rank() != 4 || update.rank() != 4 ||
      cache.dim(0) != update.dim(0) || cache.dim(2) != update.dim(2) ||
      cache.dim(3) != update.dim(3) || cache.dtype() != update.dtype()) {
    return shapeError(op, "update " + formatShape(update.shape()) +
                              " does not fit cache " +
                              formatShape(cache.shape()));
  }
  MFRT_RETURN_IF_ERROR(expectSameShape(op, cache, out));
  int64_t length = cache.dim(1), count = update.dim(1);
  MFRT_ASSIGN_OR_RETURN(
      std::vector<int64_t> starts,
      positionsPerRow(op, position, cache.dim(0), count, length));
  if (out.data() != cache.data()) {
    std::memcpy(out.data(), cache.data(), out.byteSize());
  }
  size_t rowBytes = cache.dim(2) * cache.dim(3) * dtypeSize(cache.dtype());
  for (int64_t b = 0; b < cache.dim(0); ++b) {
    std::memcpy(static_cast<char *>(out.data()) +
                    (b * length + starts[b]) * rowBytes,
                static_cast<const char *>(update.data()) + b * count * rowBytes,
                count * rowBytes);
  }
  return Status::ok();
}

} // namespace

Status mfrt::detail::checkLabels(const fb::Op &op, const Tensor &labels,
                                 int64_t vocab, int64_t ignore) {
  for (int64_t t = 0; t < labels.numElements(); ++t) {
    int64_t label = labels.as<int32_t>()[t];
    if (label != ignore && (label < 0 || label >= vocab)) {
      return shapeError(op, "label " + std::to_string(label) +
                                " is outside the vocabulary [0, " +
                                std::to_string(vocab) + ")");
    }
  }
  return Status::ok();
}

namespace {

/// Vocabulary parallel (Megatron's vocab-parallel cross-entropy), each
/// rank holds a block of every row: the ranks combine each token's maximum,
/// then its sum of exponentials and its label's logit (0 off the block).
Status crossEntropy(const fb::Op &op, const Tensor &logits,
                    const Tensor &labels, Tensor &out,
                    const ParallelFor &parallel, const VocabularyBlock &block) {
  if (logits.rank() != 2 || labels.dtype() != DType::I32 ||
      out.numElements() != 1) {
    return shapeError(op, "expected [tokens, vocab] logits and i32 labels");
  }
  MFRT_RETURN_IF_ERROR(expectShape(op, labels, {logits.dim(0)}, "labels"));
  int64_t ignore = op.attributes_as_CrossEntropyAttrs()->ignore_index();
  int64_t tokens = logits.dim(0), vocab = logits.dim(1);
  StatusOr<int64_t> whole = wholeVocabulary(op, block, vocab);
  if (!whole) {
    return whole.status();
  }
  MFRT_RETURN_IF_ERROR(checkLabels(op, labels, *whole, ignore));
  F32In x(logits);
  std::vector<double> best(tokens), sums(2 * tokens, 0.0);
  parallel(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      best[t] = maximumOf(x.data() + t * vocab, vocab);
    }
  });
  MFRT_RETURN_IF_ERROR(combine(block, best, VocabularyBlock::Combine::Max));
  // Per token: the sum of exponentials, then the label's logit.
  parallel(tokens, [&](int64_t begin, int64_t end) {
    std::vector<float> exps(vocab);
    for (int64_t t = begin; t < end; ++t) {
      int64_t label = labels.as<int32_t>()[t];
      if (label == ignore) {
        continue;
      }
      const float *row = x.data() + t * vocab;
      std::copy(row, row + vocab, exps.begin());
      sums[t] = expShiftedSum(exps.data(), vocab, static_cast<float>(best[t]));
      int64_t local = label - block.first;
      sums[tokens + t] = local >= 0 && local < vocab ? row[local] : 0.0;
    }
  });
  MFRT_RETURN_IF_ERROR(combine(block, sums, VocabularyBlock::Combine::Sum));
  // Summed in order: the same loss however the rows were split.
  double total = 0;
  int64_t counted = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    if (labels.as<int32_t>()[t] == ignore) {
      continue;
    }
    total += static_cast<float>(best[t]) + std::log(sums[t]) -
             static_cast<float>(sums[tokens + t]);
    ++counted;
  }
  out.storeFloat(0, counted ? static_cast<float>(total / counted) : 0.0f);
  return Status::ok();
}

} // namespace

StatusOr<int64_t> mfrt::detail::wholeVocabulary(const fb::Op &op,
                                                const VocabularyBlock &block,
                                                int64_t rows) {
  if (block.vocabulary == 0) {
    return rows;
  }
  if (block.first < 0 || block.first + rows > block.vocabulary) {
    return shapeError(op, "the vocabulary block [" +
                              std::to_string(block.first) + ", " +
                              std::to_string(block.first + rows) +
                              ") is outside the vocabulary [0, " +
                              std::to_string(block.vocabulary) + ")");
  }
  return block.vocabulary;
}

Status mfrt::detail::combine(const VocabularyBlock &block,
                             std::vector<double> &values,
                             VocabularyBlock::Combine how) {
  if (!block.combine) {
    return Status::ok();
  }
  return block.combine(values.data(), static_cast<int64_t>(values.size()), how);
}

std::vector<int64_t> mfrt::detail::rowMajorStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) float
dotProductClones(const float *a, const float *b, int64_t n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int u = 0; u < 8; ++u) {
      partial[u] += a[d + u] * b[d + u];
    }
  }
  float tail = 0;
  for (; d < n; ++d) {
    tail += a[d] * b[d];
  }
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
         ((partial[4] + partial[5]) + (partial[6] + partial[7])) + tail;
}

} // namespace

float mfrt::detail::dotProduct(const float *a, const float *b, int64_t n) {
  return dotProductClones(a, b, n);
}

namespace {

/// exp(x) for -inf <= x <= 0: 2^n * p(r) with n = round(x / ln 2), r the
/// remainder, p Cephes' expf polynomial; clamped where exp(x) leaves the
/// normal floats.
inline float expNonPositive(float x) {
  if (x != x) {
    return x; // NaN: no exponent to build (its int conversion is undefined)
  }
  x = std::max(x, -87.0f);
  float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double
squaredDeviationsClones(const float *x, int64_t n, double mean) {
  double partial[8] = {};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int u = 0; u < 8; ++u) {
      double deviation = x[d + u] - mean;
      partial[u] += deviation * deviation;
    }
  }
  double sum = 0;
  for (; d < n; ++d) {
    sum += (x[d] - mean) * (x[d] - mean);
  }
  for (double value : partial) {
    sum += value;
  }
  return sum;
}

} // namespace

double mfrt::detail::squaredDeviations(const float *x, int64_t n, double mean) {
  return squaredDeviationsClones(x, n, mean);
}

namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) double
sumOfClones(const float *x, int64_t n) {
  double partial[8] = {};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int u = 0; u < 8; ++u) {
      partial[u] += x[d + u];
    }
  }
  double sum = 0;
  for (; d < n; ++d) {
    sum += x[d];
  }
  for (double value : partial) {
    sum += value;
  }
  return sum;
}

} // namespace

double mfrt::detail::sumOf(const float *x, int64_t n) {
  return sumOfClones(x, n);
}

namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) float
maximumOfClones(const float *x, int64_t n) {
  // Sixteen running maxima: a reduction the vectorizer takes without
  // reordering NaN comparisons (there are none).
  float partial[16];
  std::fill(partial, partial + 16, x[0]);
  int64_t d = 0;
  for (; d + 16 <= n; d += 16) {
    for (int u = 0; u < 16; ++u) {
      partial[u] = x[d + u] > partial[u] ? x[d + u] : partial[u];
    }
  }
  float best = x[0];
  for (; d < n; ++d) {
    best = std::max(best, x[d]);
  }
  for (float value : partial) {
    best = std::max(best, value);
  }
  return best;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
scaleIntoClones(const float *in, float factor, float *out, int64_t n) {
  for (int64_t d = 0; d < n; ++d) {
    out[d] = in[d] * factor;
  }
}

} // namespace

float mfrt::detail::maximumOf(const float *x, int64_t n) {
  return maximumOfClones(x, n);
}

void mfrt::detail::scaleInto(const float *in, float factor, float *out,
                             int64_t n) {
  scaleIntoClones(in, factor, out, n);
}

namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) double
expShiftedSumClones(float *x, int64_t n, float shift) {
  double partial[16] = {};
  int64_t d = 0;
  for (; d + 16 <= n; d += 16) {
    for (int u = 0; u < 16; ++u) {
      x[d + u] = expNonPositive(x[d + u] - shift);
      partial[u] += x[d + u];
    }
  }
  double sum = 0;
  for (; d < n; ++d) {
    x[d] = expNonPositive(x[d] - shift);
    sum += x[d];
  }
  for (double value : partial) {
    sum += value;
  }
  return sum;
}

} // namespace

double mfrt::detail::expShiftedSum(float *x, int64_t n, float shift) {
  return expShiftedSumClones(x, n, shift);
}

namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) void
scaledAddClones(float *y, const float *x, float alpha, int64_t n) {
  for (int64_t d = 0; d < n; ++d) {
    y[d] += alpha * x[d];
  }
}

} // namespace

void mfrt::detail::scaledAdd(float *y, const float *x, float alpha, int64_t n) {
  return scaledAddClones(y, x, alpha, n);
}

void mfrt::runSerially(int64_t count,
                       const std::function<void(int64_t, int64_t)> &body) {
  if (count > 0) {
    body(0, count);
  }
}

Status mfrt::runKernel(const fb::Op &op,
                       const std::vector<const Tensor *> &inputs,
                       const std::vector<Tensor *> &outputs,
                       const ParallelFor &parallel,
                       const VocabularyBlock &block) {
  auto in = [&](size_t i) -> const Tensor & { return *inputs[i]; };
  Tensor &output = *outputs[0]; // the loader checked the result count
  switch (op.kind()) {
  case fb::OpKind::Param:
    return shapeError(op, "parameters are bound by the executor");
  case fb::OpKind::AllReduce:
  case fb::OpKind::AllGather:
  case fb::OpKind::ReduceScatter:
  case fb::OpKind::Scatter:
    return shapeError(op, "collectives run through the executor's ranks");
  case fb::OpKind::Constant: {
    // All the values, or one repeated (a splat): the filled prefix doubles
    // with each copy.
    const auto &values = *op.attributes_as_ConstantAttrs()->value();
    size_t held = values.size(), bytes = output.byteSize();
    char *out = static_cast<char *>(output.data());
    std::memcpy(out, values.data(), std::min(held, bytes));
    for (size_t filled = held; filled > 0 && filled < bytes; filled *= 2) {
      std::memcpy(out + filled, out, std::min(filled, bytes - filled));
    }
    return Status::ok();
  }
  case fb::OpKind::Iota: {
    int64_t dim = op.attributes_as_IotaAttrs()->dimension();
    if (dim < 0 || dim >= output.rank() || output.dtype() != DType::I32) {
      return shapeError(op, "dimension out of range");
    }
    Split split = splitAt(output.shape(), dim);
    for (int64_t i = 0; i < output.numElements(); ++i) {
      output.as<int32_t>()[i] =
          static_cast<int32_t>((i / split.inner) % split.size);
    }
    return Status::ok();
  }
  case fb::OpKind::Add:
    if (output.dtype() == DType::I32) {
      return addInt(op, in(0), in(1), output);
    }
    return binary(op, in(0), in(1), output,
                  [](float a, float b) { return a + b; });
  case fb::OpKind::Sub:
    return binary(op, in(0), in(1), output,
                  [](float a, float b) { return a - b; });
  case fb::OpKind::Mul:
    return binary(op, in(0), in(1), output,
                  [](float a, float b) { return a * b; });
  case fb::OpKind::Div:
    return binary(op, in(0), in(1), output,
                  [](float a, float b) { return a / b; });
  case fb::OpKind::Max:
    return binary(op, in(0), in(1), output,
                  [](float a, float b) { return std::max(a, b); });
  case fb::OpKind::Min:
    return binary(op, in(0), in(1), output,
                  [](float a, float b) { return std::min(a, b); });
  case fb::OpKind::SwiGlu:
    return binary(op, in(0), in(1), output,
                  [](float gate, float up) { return silu(gate) * up; });
  case fb::OpKind::Neg:
    return unary(op, in(0), output, [](float x) { return -x; });
  case fb::OpKind::Exp:
    return unary(op, in(0), output, [](float x) { return std::exp(x); });
  case fb::OpKind::Log:
    return unary(op, in(0), output, [](float x) { return std::log(x); });
  case fb::OpKind::Tanh:
    return unary(op, in(0), output, [](float x) { return std::tanh(x); });
  case fb::OpKind::Sqrt:
    return unary(op, in(0), output, [](float x) { return std::sqrt(x); });
  case fb::OpKind::Rsqrt:
    return unary(op, in(0), output,
                 [](float x) { return 1.0f / std::sqrt(x); });
  case fb::OpKind::Silu:
    return unary(op, in(0), output, silu);
  case fb::OpKind::FastGelu:
    return unary(op, in(0), output, fastGelu);
  case fb::OpKind::Gelu:
    return op.attributes_as_GeluAttrs()->approximate() ==
                   fb::GeluApproximation::tanh
               ? unary(op, in(0), output, geluTanh)
               : unary(op, in(0), output, geluErf);
  case fb::OpKind::Cast:
    return cast(op, in(0), output, parallel);
  case fb::OpKind::Dequantize:
    return dequantize(op, in(0), in(1), output, parallel);
  case fb::OpKind::Broadcast:
    return broadcast(op, in(0), output);
  case fb::OpKind::ReduceSum:
    return reduce(op, in(0), output, /*isMax=*/false);
  case fb::OpKind::ReduceMax:
    return reduce(op, in(0), output, /*isMax=*/true);
  case fb::OpKind::Reshape:
    if (in(0).numElements() != output.numElements() ||
        in(0).dtype() != output.dtype()) {
      return shapeError(op, "cannot reshape " + formatShape(in(0).shape()) +
                                " to " + formatShape(output.shape()));
    }
    std::memcpy(output.data(), in(0).data(), output.byteSize());
    return Status::ok();
  case fb::OpKind::Transpose:
    return transpose(op, in(0), output);
  case fb::OpKind::Slice:
    return slice(op, in(0), output);
  case fb::OpKind::Concat:
    return concat(op, inputs, output);
  case fb::OpKind::Embedding:
    return embedding(op, in(0), in(1), output, block);
  case fb::OpKind::RmsNorm:
    return norm(op, inputs, output, /*layerNorm=*/false, parallel);
  case fb::OpKind::LayerNorm:
    return norm(op, inputs, output, /*layerNorm=*/true, parallel);
  case fb::OpKind::Matmul:
    return matmul(op, in(0), in(1), output);
  case fb::OpKind::Softmax:
    return softmax(op, in(0), output);
  case fb::OpKind::Rope:
    return rope(op, in(0), in(1), output);
  case fb::OpKind::Attention:
    return attention(op, inputs, output, parallel);
  case fb::OpKind::KvCacheWrite:
    return inputs.size() == 4
               ? pagedKvCacheWrite(op, in(0), in(1), in(2), in(3), output)
               : kvCacheWrite(op, in(0), in(1), in(2), output);
  case fb::OpKind::CrossEntropy:
    return crossEntropy(op, in(0), in(1), output, parallel, block);
  case fb::OpKind::SiluGrad:
    return siluGrad(op, in(0), in(1), output);
  case fb::OpKind::GeluGrad:
    return geluGrad(op, in(0), in(1), output);
  case fb::OpKind::EmbeddingGrad:
    return embeddingGrad(op, in(0), in(1), output, block);
  case fb::OpKind::RmsNormGrad:
    return normGrad(op, inputs, output, /*layerNorm=*/false);
  case fb::OpKind::LayerNormGrad:
    return normGrad(op, inputs, output, /*layerNorm=*/true);
  case fb::OpKind::AttentionGrad:
    return attentionGrad(op, inputs, output, parallel);
  case fb::OpKind::CrossEntropyGrad:
    return crossEntropyGrad(op, in(0), in(1), in(2), output, parallel, block);
  case fb::OpKind::Pad:
    return pad(op, in(0), output);
  case fb::OpKind::TopK:
    return topK(op, in(0), output, *outputs[1], parallel);
  case fb::OpKind::Quantize:
    return quantize(op, in(0), in(1), inputs.size() > 2 ? &in(2) : nullptr,
                    output, parallel);
  case fb::OpKind::DynamicQuantize:
    return dynamicQuantize(op, in(0), output, *outputs[1], parallel);
  case fb::OpKind::MoeRoute:
    return moeRoute(op, in(0), output, *outputs[1]);
  case fb::OpKind::MoeDispatch:
    return moeDispatch(op, inputs, output);
  case fb::OpKind::GroupedMatmul:
    return groupedMatmul(op, inputs, output, parallel);
  case fb::OpKind::MoeCombine:
    return moeCombine(op, in(0), in(1), in(2), output, parallel);
  case fb::OpKind::TopKGrad:
    return topKGrad(op, in(0), in(1), output);
  case fb::OpKind::GroupedMatmulWeightGrad:
    return groupedMatmulWeightGrad(op, in(0), in(1), in(2), output);
  case fb::OpKind::MoeWeightsGrad:
    return moeWeightsGrad(op, in(0), in(1), in(2), output, parallel);
  case fb::OpKind::Assign:
    // The executor binds `output` to the parameter's storage.
    if (output.data() != in(0).data()) {
      std::memcpy(output.data(), in(0).data(), output.byteSize());
    }
    return Status::ok();
  }
  return shapeError(op, "unknown op kind");
}
