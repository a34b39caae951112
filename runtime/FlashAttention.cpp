//===- FlashAttention.cpp - attention by blocks, online softmax -----------===//

#include "runtime/FlashAttention.h"

#include "runtime/KernelSupport.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mfrt;

namespace {

/// Keys per block: a 32 x 128 block of scores is 16 KB, in L1 with the
/// rows of output it updates.
constexpr int64_t kKeyBlock = 128;

} // namespace

void mfrt::attendRows(const AttentionRows &block, std::vector<float> &scratch) {
  const int64_t rows = block.rows, dim = block.dim;
  auto visibleTo = [&](int64_t row) { // keys row `row` (of the block) sees
    int64_t i = block.firstRow + row;
    return std::min(block.attended,
                    block.causal ? block.past + i + 1 : block.attended);
  };
  // Scores [rows x kKeyBlock], the output rows [rows x dim], then the
  // running maximum and sum per row.
  scratch.resize(rows * kKeyBlock + rows * dim + 2 * rows);
  float *scores = scratch.data();
  float *accumulated = scores + rows * kKeyBlock;
  float *maximum = accumulated + rows * dim;
  float *sum = maximum + rows;
  std::fill(accumulated, accumulated + rows * dim, 0.0f);
  std::fill(maximum, maximum + rows, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + rows, 0.0f);
  int64_t width = visibleTo(rows - 1); // the widest row's keys
  for (int64_t first = 0; first < width; first += kKeyBlock) {
    int64_t count = std::min(kKeyBlock, width - first);
    const float *keys = block.keys + first * block.keyStride;
    const float *values = block.values + first * block.valueStride;
    if (rows == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, count, dim, block.scale, keys,
                  block.keyStride, block.query, 1, 0.0f, scores, 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, count, dim,
                  block.scale, block.query, block.queryStride, keys,
                  block.keyStride, 0.0f, scores, count);
    }
    for (int64_t r = 0; r < rows; ++r) {
      float *row = scores + r * count;
      int64_t visible = std::clamp<int64_t>(visibleTo(r) - first, 0, count);
      if (visible > 0) {
        float best =
            std::max(maximum[r], *std::max_element(row, row + visible));
        // What was summed so far was relative to the old maximum.
        float rescale = std::exp(maximum[r] - best);
        sum[r] = sum[r] * rescale + detail::expShiftedSum(row, visible, best);
        maximum[r] = best;
        if (rescale != 1.0f) {
          for (int64_t d = 0; d < dim; ++d) {
            accumulated[r * dim + d] *= rescale;
          }
        }
      }
      std::fill(row + visible, row + count, 0.0f); // masked: weight 0
    }
    if (rows == 1) {
      cblas_sgemv(CblasRowMajor, CblasTrans, count, dim, 1.0f, values,
                  block.valueStride, scores, 1, 1.0f, accumulated, 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dim, count,
                  1.0f, scores, count, values, block.valueStride, 1.0f,
                  accumulated, dim);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    // A row that sees no key (no keys at all) is the weighted sum of none.
    float inverse = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
    float *target = block.out + r * block.outStride;
    for (int64_t d = 0; d < dim; ++d) {
      target[d] = accumulated[r * dim + d] * inverse;
    }
  }
}

std::vector<float> mfrt::ropeInverseFrequencies(float theta, int64_t headDim) {
  std::vector<float> inverseFrequency(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i) {
    inverseFrequency[i] =
        1.0f / std::pow(theta, static_cast<float>(2 * i) / headDim);
  }
  return inverseFrequency;
}

void mfrt::ropeAngles(const std::vector<float> &inverseFrequency,
                      float position, float direction, float *cosines,
                      float *sines) {
  for (size_t i = 0; i < inverseFrequency.size(); ++i) {
    float angle = position * inverseFrequency[i];
    cosines[i] = std::cos(angle);
    sines[i] = direction * std::sin(angle);
  }
}

std::string mfrt::runFusedAttention(const FusedAttention &args,
                                    int64_t unitBegin, int64_t unitEnd) {
  const bool cached = args.cacheKey != nullptr;
  int64_t available = cached ? args.keys : args.newRows;
  if (args.past < 0 || (cached && args.past + args.newRows > args.keys) ||
      (args.hasPast && args.past + args.seq > available)) {
    return "past_length " + std::to_string(args.past) + " + " +
           std::to_string(args.seq) + " new tokens exceeds the " +
           std::to_string(available) +
           " keys of the cache; prompt plus new tokens must fit in seq_length";
  }
  const int64_t dim = args.dim, half = dim / 2,
                group = args.heads / args.kvHeads;
  const int64_t kvStride = args.kvHeads * dim, queryStride = args.heads * dim;
  // The cosines and sines of one batch's positions ([batch, rows] for the
  // tensor turned: query or new keys, the same when both are), computed
  // once per batch a call sees and shared by the keys and every head.
  int64_t tableRows = args.ropeQuery ? args.seq : args.newRows;
  std::vector<float> inverseFrequency, cosines, sines;
  int64_t tableBatch = -1;
  if (args.positions) {
    inverseFrequency = ropeInverseFrequencies(args.theta, dim);
    cosines.resize(tableRows * half);
    sines.resize(tableRows * half);
  }
  auto fillTable = [&](int64_t b) {
    if (!args.positions || tableBatch == b) {
      return;
    }
    for (int64_t row = 0; row < tableRows; ++row) {
      ropeAngles(inverseFrequency,
                 static_cast<float>(args.positions[b * tableRows + row]), 1.0f,
                 &cosines[row * half], &sines[row * half]);
    }
    tableBatch = b;
  };
  std::vector<float> rotatedKeys, queries(kAttentionRowBlock * dim), scratch;
  for (int64_t unit = std::max<int64_t>(unitBegin, 0);
       unit < std::min(unitEnd, args.batch * args.kvHeads); ++unit) {
    int64_t b = unit / args.kvHeads, kvHead = unit % args.kvHeads;
    fillTable(b);
    // The keys and values this KV head attends over, and the new rows'.
    const float *newKeys =
        args.newKeys + (b * args.newRows * args.kvHeads + kvHead) * dim;
    const float *newValues =
        args.newValues + (b * args.newRows * args.kvHeads + kvHead) * dim;
    const float *keys = newKeys, *values = newValues;
    int64_t keyStride = kvStride;
    int64_t attended = args.hasPast ? args.past + args.seq : args.newRows;
    if (cached) {
      int64_t headBase = (b * args.keys * args.kvHeads + kvHead) * dim;
      float *cacheKey = args.cacheKey + headBase;
      float *cacheValue = args.cacheValue + headBase;
      for (auto [from, to] : {std::pair{args.cacheKeyIn, args.cacheKey},
                              std::pair{args.cacheValueIn, args.cacheValue}}) {
        if (from != to) { // not in place: the old rows first
          for (int64_t row = 0; row < args.keys; ++row) {
            std::memcpy(to + headBase + row * kvStride,
                        from + headBase + row * kvStride, dim * sizeof(float));
          }
        }
      }
      for (int64_t row = 0; row < args.newRows; ++row) {
        float *keyRow = cacheKey + (args.past + row) * kvStride;
        if (args.ropeKey) {
          ropeRotate(newKeys + row * kvStride, keyRow, &cosines[row * half],
                     &sines[row * half], half);
        } else {
          std::memcpy(keyRow, newKeys + row * kvStride, dim * sizeof(float));
        }
        std::memcpy(cacheValue + (args.past + row) * kvStride,
                    newValues + row * kvStride, dim * sizeof(float));
      }
      keys = cacheKey;
      values = cacheValue;
    } else if (args.ropeKey) {
      rotatedKeys.resize(args.newRows * dim);
      for (int64_t row = 0; row < args.newRows; ++row) {
        ropeRotate(newKeys + row * kvStride, &rotatedKeys[row * dim],
                   &cosines[row * half], &sines[row * half], half);
      }
      keys = rotatedKeys.data();
      keyStride = dim;
    }
    for (int64_t head = kvHead * group; head < (kvHead + 1) * group; ++head) {
      for (int64_t first = 0; first < args.seq; first += kAttentionRowBlock) {
        int64_t rows = std::min(kAttentionRowBlock, args.seq - first);
        const float *query =
            args.query + ((b * args.seq + first) * args.heads + head) * dim;
        int64_t stride = queryStride;
        if (args.ropeQuery) {
          for (int64_t r = 0; r < rows; ++r) {
            int64_t row = first + r;
            ropeRotate(query + r * queryStride, &queries[r * dim],
                       &cosines[row * half], &sines[row * half], half);
          }
          query = queries.data();
          stride = dim;
        }
        attendRows(
            {query, stride, keys, values, keyStride, kvStride, first, rows,
             args.past, attended, args.causal, args.scale,
             args.out + ((b * args.seq + first) * args.heads + head) * dim,
             queryStride, dim},
            scratch);
      }
    }
  }
  return {};
}

void mfrt::runAttentionGradient(const AttentionGradient &args,
                                int64_t unitBegin, int64_t unitEnd) {
  const int64_t dim = args.dim, keys = args.keyRows;
  const int64_t group = args.heads / args.kvHeads;
  const int64_t queryStride = args.heads * dim, kvStride = args.kvHeads * dim;
  // The block's softmax weights P and then the gradient of its scores.
  std::vector<float> weights(kAttentionRowBlock * keys),
      scoreGrad(kAttentionRowBlock * keys);
  for (int64_t unit = std::max<int64_t>(unitBegin, 0);
       unit < std::min(unitEnd, args.batch * args.kvHeads); ++unit) {
    int64_t b = unit / args.kvHeads, kvHead = unit % args.kvHeads;
    int64_t kvBase = (b * keys * args.kvHeads + kvHead) * dim;
    const float *key = args.keys + kvBase, *value = args.values + kvBase;
    // Key and value gradients sum over every query row of the group.
    for (float *grad : {args.keyGrad, args.valueGrad}) {
      if (grad) {
        for (int64_t row = 0; row < keys; ++row) {
          std::fill_n(grad + kvBase + row * kvStride, dim, 0.0f);
        }
      }
    }
    for (int64_t head = kvHead * group; head < (kvHead + 1) * group; ++head) {
      for (int64_t first = 0; first < args.seq; first += kAttentionRowBlock) {
        int64_t rows = std::min(kAttentionRowBlock, args.seq - first);
        auto visibleTo = [&](int64_t r) {
          return args.causal ? std::min(keys, first + r + 1) : keys;
        };
        int64_t width = visibleTo(rows - 1);
        int64_t offset = ((b * args.seq + first) * args.heads + head) * dim;
        const float *query = args.query + offset;
        const float *outGrad = args.outGrad + offset;
        if (width == 0) { // no keys: no weights, a zero query gradient
          if (args.queryGrad) {
            for (int64_t r = 0; r < rows; ++r) {
              std::fill_n(args.queryGrad + offset + r * queryStride, dim, 0.0f);
            }
          }
          continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, width, dim,
                    args.scale, query, queryStride, key, kvStride, 0.0f,
                    weights.data(), width);
        for (int64_t r = 0; r < rows; ++r) {
          float *row = weights.data() + r * width;
          int64_t visible = visibleTo(r);
          float best = *std::max_element(row, row + visible);
          float inverseSum = 1.0f / detail::expShiftedSum(row, visible, best);
          for (int64_t j = 0; j < visible; ++j) {
            row[j] *= inverseSum;
          }
          std::fill(row + visible, row + width, 0.0f);
        }
        if (args.queryGrad || args.keyGrad) {
          // dP = dO V^T; dS = P (dP - rowsum(P dP)), zero where masked.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, width, dim,
                      1.0f, outGrad, queryStride, value, kvStride, 0.0f,
                      scoreGrad.data(), width);
          for (int64_t r = 0; r < rows; ++r) {
            const float *p = weights.data() + r * width;
            float *ds = scoreGrad.data() + r * width;
            double weighted = 0;
            for (int64_t j = 0; j < width; ++j) {
              weighted += static_cast<double>(p[j]) * ds[j];
            }
            for (int64_t j = 0; j < width; ++j) {
              ds[j] = p[j] * (ds[j] - static_cast<float>(weighted));
            }
          }
          if (args.queryGrad) { // dQ = scale dS K: each block's rows once
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dim,
                        width, args.scale, scoreGrad.data(), width, key,
                        kvStride, 0.0f, args.queryGrad + offset, queryStride);
          }
          if (args.keyGrad) { // dK += scale dS^T Q
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, dim,
                        rows, args.scale, scoreGrad.data(), width, query,
                        queryStride, 1.0f, args.keyGrad + kvBase, kvStride);
          }
        }
        if (args.valueGrad) { // dV += P^T dO
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, dim, rows,
                      1.0f, weights.data(), width, outGrad, queryStride, 1.0f,
                      args.valueGrad + kvBase, kvStride);
        }
      }
    }
  }
}
