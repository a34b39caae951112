//===- MoeKernels.cpp - eager kernels of the mixture-of-experts ops -------===//

#include "runtime/kernels/MoeKernels.h"

#include "runtime/kernels/KernelSupport.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstring>
#include <optional>

using namespace mfrt;
using namespace mfrt::detail;

Status mfrt::detail::topK(const fb::Op &op, const Tensor &input, Tensor &values,
                          Tensor &indices, const ParallelFor &parallel) {
  int64_t width = input.shape().back(), k = values.shape().back();
  int64_t rows = width ? input.numElements() / width : 0;
  F32In x(input);
  F32Out best(values);
  int32_t *chosen = indices.as<int32_t>();
  // Descending; NaN above every number (as torch.topk); equal values in
  // index order, so that every run and both modes choose alike.
  auto before = [](const float *row, int32_t a, int32_t b) {
    bool nanA = std::isnan(row[a]), nanB = std::isnan(row[b]);
    if (nanA != nanB) {
      return nanA;
    }
    if (!nanA && row[a] != row[b]) {
      return row[a] > row[b];
    }
    return a < b;
  };
  parallel(rows, [&](int64_t begin, int64_t end) {
    std::vector<int32_t> order(width);
    for (int64_t r = begin; r < end; ++r) {
      const float *row = x.data() + r * width;
      for (int64_t i = 0; i < width; ++i) {
        order[i] = static_cast<int32_t>(i);
      }
      std::partial_sort(
          order.begin(), order.begin() + k, order.end(),
          [&](int32_t a, int32_t b) { return before(row, a, b); });
      for (int64_t i = 0; i < k; ++i) {
        best[r * k + i] = row[order[i]];
        chosen[r * k + i] = order[i];
      }
    }
  });
  best.finish();
  return Status::ok();
}

Status mfrt::detail::moeRoute(const fb::Op &op, const Tensor &indices,
                              Tensor &positions, Tensor &offsets) {
  const fb::MoeRouteAttrs &attrs = *op.attributes_as_MoeRouteAttrs();
  int64_t experts = attrs.num_experts(), capacity = attrs.capacity();
  int64_t tokens = indices.dim(0), k = indices.dim(1), pairs = tokens * k;
  const int32_t *expert = indices.as<int32_t>();
  for (int64_t i = 0; i < pairs; ++i) {
    if (expert[i] < 0 || expert[i] >= experts) {
      return shapeError(op, "expert index " + std::to_string(expert[i]) +
                                " is not in [0, " + std::to_string(experts) +
                                ")");
    }
  }
  // The pairs in priority order: token order, or every first choice before
  // any second one.
  auto pairAt = [&](int64_t rank) {
    return attrs.choice_order() ? (rank % tokens) * k + rank / tokens : rank;
  };
  // Each pair's rank within its expert; kept while below the capacity.
  std::vector<int32_t> taken(experts, 0);
  int32_t *place = positions.as<int32_t>();
  for (int64_t rank = 0; rank < pairs; ++rank) {
    int64_t pair = pairAt(rank);
    int32_t slot = taken[expert[pair]]++;
    place[pair] = capacity > 0 && slot >= capacity ? -1 : slot;
  }
  int32_t *start = offsets.as<int32_t>();
  start[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t kept =
        capacity > 0 ? std::min<int64_t>(taken[e], capacity) : taken[e];
    start[e + 1] = start[e] + static_cast<int32_t>(kept);
  }
  for (int64_t pair = 0; pair < pairs; ++pair) {
    if (place[pair] >= 0) {
      place[pair] += start[expert[pair]];
    }
  }
  return Status::ok();
}

namespace {

/// Every position names a row of `rows`, or is -1 (a dropped pair).
Status checkPositions(const fb::Op &op, const Tensor &positions, int64_t rows) {
  const int32_t *place = positions.as<int32_t>();
  for (int64_t i = 0; i < positions.numElements(); ++i) {
    if (place[i] < -1 || place[i] >= rows) {
      return shapeError(op, "position " + std::to_string(place[i]) +
                                " is not in [-1, " + std::to_string(rows) +
                                ")");
    }
  }
  return Status::ok();
}

} // namespace

Status mfrt::detail::moeDispatch(const fb::Op &op,
                                 const std::vector<const Tensor *> &inputs,
                                 Tensor &out) {
  const Tensor &tokens = *inputs[0], &positions = *inputs[1];
  int64_t rows = out.dim(0), k = positions.dim(1), hidden = tokens.dim(1);
  MFRT_RETURN_IF_ERROR(checkPositions(op, positions, rows));
  const int32_t *place = positions.as<int32_t>();
  // Rows no pair names (a capacity's dropped pairs leave some) are zero, in
  // both modes and whatever the arena held.
  std::memset(out.data(), 0, out.byteSize());
  if (inputs.size() == 2) {
    // Rows are copied as stored: an unweighted dispatch converts nothing.
    size_t rowBytes = static_cast<size_t>(hidden) * dtypeSize(out.dtype());
    const char *from = static_cast<const char *>(tokens.data());
    char *to = static_cast<char *>(out.data());
    for (int64_t i = 0; i < positions.numElements(); ++i) {
      if (place[i] >= 0) { // -1: a dropped pair
        std::memcpy(to + place[i] * rowBytes, from + (i / k) * rowBytes,
                    rowBytes);
      }
    }
    return Status::ok();
  }
  F32In x(tokens), w(*inputs[2]);
  F32Out y(out);
  for (int64_t i = 0; i < positions.numElements(); ++i) {
    if (place[i] < 0) {
      continue; // a dropped pair
    }
    const float *from = x.data() + (i / k) * hidden;
    float *to = y.data() + int64_t(place[i]) * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      to[j] = w[i] * from[j];
    }
  }
  y.finish();
  return Status::ok();
}

namespace {

/// Expert groups' offsets ascend within [0, rows].
Status checkOffsets(const fb::Op &op, const Tensor &offsets, int64_t rows) {
  const int32_t *start = offsets.as<int32_t>();
  int64_t experts = offsets.numElements() - 1;
  if (start[0] < 0 || start[experts] > rows) {
    return shapeError(op, "groups [" + std::to_string(start[0]) + ", " +
                              std::to_string(start[experts]) +
                              ") are not within the " + std::to_string(rows) +
                              " rows");
  }
  for (int64_t e = 0; e < experts; ++e) {
    if (start[e + 1] < start[e]) {
      return shapeError(op,
                        "group offsets descend at expert " + std::to_string(e));
    }
  }
  return Status::ok();
}

} // namespace

Status mfrt::detail::groupedMatmul(const fb::Op &op,
                                   const std::vector<const Tensor *> &inputs,
                                   Tensor &out, const ParallelFor &parallel) {
  const Tensor &rows = *inputs[0], &offsets = *inputs[1];
  // Per-expert weights, or one stacked [E, ...] whose expert g mod E takes
  // group g (an expert-parallel layer's groups come from each rank).
  bool stacked = inputs.size() == 3 && inputs[2]->shape().size() == 3;
  int64_t experts =
      stacked ? inputs[2]->dim(0) : static_cast<int64_t>(inputs.size()) - 2;
  int64_t groups = offsets.numElements() - 1;
  int64_t total = rows.dim(0), k = rows.dim(1), n = out.dim(1);
  bool transposed = op.attributes_as_GroupedMatmulAttrs()->transpose_rhs();
  MFRT_RETURN_IF_ERROR(checkOffsets(op, offsets, total));
  const int32_t *start = offsets.as<int32_t>();
  F32In x(rows);
  F32Out y(out);
  // Rows no group claims (none in a dropless layer) are zero.
  std::fill(y.data(), y.data() + start[0] * n, 0.0f);
  std::fill(y.data() + start[groups] * n, y.data() + total * n, 0.0f);
  // Tiles of (group, block of output columns) over the non-empty groups,
  // each a serial product (Graph Mode's pool runs them side by side; an
  // expert no token chose is not even widened). A decode step's groups are
  // a row or two: the column blocks are what spreads its weight reads.
  constexpr int64_t kColumns = 128;
  struct Tile {
    int64_t group, column;
  };
  std::vector<Tile> tiles;
  std::vector<std::optional<F32In>> weights(stacked ? 1 : experts);
  for (int64_t g = 0; g < groups; ++g) {
    bool used = start[g + 1] > start[g];
    int64_t w = stacked ? 0 : g % experts;
    if (used && !weights[w]) {
      weights[w].emplace(*inputs[2 + w]);
    }
    for (int64_t column = 0; used && column < n; column += kColumns) {
      tiles.push_back({g, column});
    }
  }
  int64_t expertSize = k * n; // one expert's [n, k] or [k, n] weight
  parallel(static_cast<int64_t>(tiles.size()), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t g = tiles[t].group, column = tiles[t].column;
      int64_t first = start[g], count = start[g + 1] - start[g];
      int64_t width = std::min(kColumns, n - column);
      const float *w = stacked ? weights[0]->data() + (g % experts) * expertSize
                               : weights[g % experts]->data();
      // Columns [column, column + width) of W^T: rows of an [n, k] weight,
      // columns of a [k, n] one.
      const float *b = transposed ? w + column * k : w + column;
      cblas_sgemm(CblasRowMajor, CblasNoTrans,
                  transposed ? CblasTrans : CblasNoTrans, count, width, k, 1.0f,
                  x.data() + first * k, k, b, transposed ? k : n, 0.0f,
                  y.data() + first * n + column, n);
    }
  });
  y.finish();
  return Status::ok();
}

Status mfrt::detail::moeCombine(const fb::Op &op, const Tensor &rows,
                                const Tensor &positions, const Tensor &weights,
                                Tensor &out, const ParallelFor &parallel) {
  int64_t tokens = positions.dim(0), k = positions.dim(1);
  int64_t hidden = rows.dim(1);
  MFRT_RETURN_IF_ERROR(checkPositions(op, positions, rows.dim(0)));
  F32In y(rows), p(weights);
  F32Out sum(out);
  const int32_t *place = positions.as<int32_t>();
  parallel(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float *to = sum.data() + t * hidden;
      std::fill(to, to + hidden, 0.0f);
      for (int64_t c = 0; c < k; ++c) {
        if (place[t * k + c] < 0) {
          continue; // a dropped pair adds nothing
        }
        float weight = p[t * k + c];
        const float *from = y.data() + int64_t(place[t * k + c]) * hidden;
        for (int64_t i = 0; i < hidden; ++i) {
          to[i] += weight * from[i];
        }
      }
    }
  });
  sum.finish();
  return Status::ok();
}

Status mfrt::detail::topKGrad(const fb::Op &op, const Tensor &gradient,
                              const Tensor &indices, Tensor &out) {
  int64_t k = gradient.shape().back(), width = out.shape().back();
  int64_t rows = k ? gradient.numElements() / k : 0;
  const int32_t *index = indices.as<int32_t>();
  for (int64_t i = 0; i < indices.numElements(); ++i) {
    if (index[i] < 0 || index[i] >= width) {
      return shapeError(op, "index " + std::to_string(index[i]) +
                                " is not in [0, " + std::to_string(width) +
                                ")");
    }
  }
  F32In g(gradient);
  F32Out d(out);
  std::fill(d.data(), d.data() + out.numElements(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      d[r * width + index[r * k + c]] += g[r * k + c];
    }
  }
  d.finish();
  return Status::ok();
}

Status mfrt::detail::groupedMatmulWeightGrad(const fb::Op &op,
                                             const Tensor &gradient,
                                             const Tensor &rows,
                                             const Tensor &offsets,
                                             Tensor &out) {
  const auto *attributes = op.attributes_as_GroupedMatmulWeightGradAttrs();
  int64_t expert = attributes->expert(), stacked = attributes->stacked();
  int64_t groups = offsets.numElements() - 1;
  if (stacked > 0 ? groups % stacked != 0 : expert < 0 || expert >= groups) {
    return shapeError(op, "expert " + std::to_string(expert) +
                              " has no group"); // the loader checked it too
  }
  MFRT_RETURN_IF_ERROR(checkOffsets(op, offsets, rows.dim(0)));
  const int32_t *start = offsets.as<int32_t>();
  int64_t n = gradient.dim(1), k = rows.dim(1);
  F32Out dw(out);
  std::fill(dw.data(), dw.data() + out.numElements(), 0.0f);
  F32In g(gradient), x(rows);
  // Expert e's gradient sums its groups: e alone, or (stacked) every group
  // g with g mod E = e, accumulated by beta 1.
  for (int64_t group = stacked > 0 ? 0 : expert;
       group < (stacked > 0 ? groups : expert + 1); ++group) {
    int64_t first = start[group], count = start[group + 1] - first;
    if (count == 0) {
      continue;
    }
    float *to = dw.data() + (stacked > 0 ? (group % stacked) * n * k : 0);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, count, 1.0f,
                g.data() + first * n, n, x.data() + first * k, k, 1.0f, to, k);
  }
  dw.finish();
  return Status::ok();
}

Status mfrt::detail::moeWeightsGrad(const fb::Op &op, const Tensor &gradient,
                                    const Tensor &rows, const Tensor &positions,
                                    Tensor &out, const ParallelFor &parallel) {
  int64_t tokens = positions.dim(0), k = positions.dim(1);
  int64_t hidden = rows.dim(1);
  MFRT_RETURN_IF_ERROR(checkPositions(op, positions, rows.dim(0)));
  F32In g(gradient), y(rows);
  F32Out d(out);
  const int32_t *place = positions.as<int32_t>();
  parallel(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t c = 0; c < k; ++c) {
        if (place[t * k + c] < 0) {
          d[t * k + c] = 0.0f; // a dropped pair's weight does not matter
          continue;
        }
        const float *row = y.data() + int64_t(place[t * k + c]) * hidden;
        const float *from = g.data() + t * hidden;
        double sum = 0;
        for (int64_t i = 0; i < hidden; ++i) {
          sum += double(from[i]) * row[i];
        }
        d[t * k + c] = static_cast<float>(sum);
      }
    }
  });
  d.finish();
  return Status::ok();
}
