//===- FlashAttention.cpp - attention by blocks, online softmax -----------===//

#include "runtime/kernels/FlashAttention.h"

#include "runtime/hal/CpuFeatures.h"
#include "runtime/kernels/Int8DotGemm.h"
#include "runtime/kernels/KernelSupport.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mfrt;

namespace {

/// Keys per block: a 32 x 128 block of scores is 16 KB, in L1 with the
/// rows of output it updates.
constexpr int64_t kKeyBlock = 128;

/// The address of element `element` of a buffer of `dtype`.
const char *elementAt(DType dtype, const void *base, int64_t element) {
  return static_cast<const char *>(base) + element * dtypeSize(dtype);
}

/// `rows` rows of `dim` values of `dtype` (row stride `stride` elements,
/// from element `element`) into dense f32 rows, and back.
void loadRows(DType dtype, const void *base, int64_t element, int64_t stride,
              int64_t rows, int64_t dim, float *out) {
  for (int64_t r = 0; r < rows; ++r) {
    toFloats(dtype, elementAt(dtype, base, element + r * stride), out + r * dim,
             dim);
  }
}

void storeRows(DType dtype, const float *in, void *base, int64_t element,
               int64_t stride, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    fromFloats(dtype, in + r * dim,
               const_cast<char *>(elementAt(dtype, base, element + r * stride)),
               dim);
  }
}

/// `rows` rows of `dim` values copied as they are, between buffers of one
/// dtype.
void copyRows(DType dtype, const void *from, int64_t fromElement, void *to,
              int64_t toElement, int64_t stride, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(
        const_cast<char *>(elementAt(dtype, to, toElement + r * stride)),
        elementAt(dtype, from, fromElement + r * stride),
        dim * dtypeSize(dtype));
  }
}

/// One row of dequantizeRows, portably.
void dequantizeRowPortable(const int8_t *row, const float *scales,
                           int64_t width, float *to) {
  for (int64_t c = 0; c < width; ++c) {
    to[c] = static_cast<float>(row[c]) * scales[c];
  }
}

// (GCC 12's masked AVX-512 loads: see the note on the shuffles below.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// The same, 16 channels at a time (the same products).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
dequantizeRowAvx512(const int8_t *row, const float *scales, int64_t width,
                    float *to) {
  for (int64_t c = 0; c < width; c += 16) {
    auto lanes =
        static_cast<__mmask16>((1u << std::min<int64_t>(16, width - c)) - 1);
    __m512 q = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(lanes, row + c)));
    _mm512_mask_storeu_ps(
        to + c, lanes,
        _mm512_mul_ps(q, _mm512_maskz_loadu_ps(lanes, scales + c)));
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// The same, 8 channels at a time on AVX2 (the rest portably).
__attribute__((target("avx2"))) void dequantizeRowAvx2(const int8_t *row,
                                                       const float *scales,
                                                       int64_t width,
                                                       float *to) {
  int64_t c = 0;
  for (; c + 8 <= width; c += 8) {
    __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + c))));
    _mm256_storeu_ps(to + c, _mm256_mul_ps(q, _mm256_loadu_ps(scales + c)));
  }
  dequantizeRowPortable(row + c, scales + c, width - c, to + c);
}

} // namespace

void mfrt::dequantizeRows(const int8_t *values, int64_t stride, int64_t rows,
                          const float *scales, int64_t width, float *out) {
  static const auto row = rowIsa() == RowIsa::Avx512 ? dequantizeRowAvx512
                          : rowIsa() == RowIsa::Avx2 ? dequantizeRowAvx2
                                                     : dequantizeRowPortable;
  for (int64_t r = 0; r < rows; ++r) {
    row(values + r * stride, scales, width, out + r * width);
  }
}

namespace {

/// Decode's few query rows (a KV head's group at one position) multiply
/// their keys and values here, in AVX-512 registers: OpenBLAS spends more
/// on an sgemm's checks and packing than on 2 rows x 64 keys x 32 dims
/// (attendRows on such a block: 1.05-1.5 us through OpenBLAS, 0.36-0.58
/// us here).
constexpr int64_t kFewRows = 8;

/// Whether the block's products take the few-rows path.
bool fewRows(const AttentionRows &block) {
  return block.rows <= kFewRows && block.dim % 16 == 0 && hasAvx512();
}

// GCC 12's AVX-512 shuffle intrinsics pass an undefined vector as the
// unused pass-through operand, which -Wmaybe-uninitialized reports.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// Lane groups 0 + 1 and 2 + 3 of `a`, then of `b`.
__attribute__((target("avx512f"), always_inline)) inline __m512
addLaneGroupPairs(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88),
                       _mm512_shuffle_f32x4(a, b, 0xdd));
}

/// Sixteen vectors to one: lane i holds the sum of the lanes of sums[i].
__attribute__((target("avx512f"), always_inline)) inline __m512
sumEach(__m512 sums[16]) {
  // Pairs interleaved: lane group k of pair[i] holds partial sums of
  // vectors 2i and 2i + 1 over lane group k.
  __m512 pair[8], quad[4];
  for (int i = 0; i < 8; ++i) {
    pair[i] = _mm512_add_ps(_mm512_unpacklo_ps(sums[2 * i], sums[2 * i + 1]),
                            _mm512_unpackhi_ps(sums[2 * i], sums[2 * i + 1]));
  }
  // Lane group k of quad[i]: vectors 4i .. 4i + 3 over lane group k.
  for (int i = 0; i < 4; ++i) {
    __m512d low = _mm512_castps_pd(pair[2 * i]);
    __m512d high = _mm512_castps_pd(pair[2 * i + 1]);
    quad[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(low, high)),
                            _mm512_castpd_ps(_mm512_unpackhi_pd(low, high)));
  }
  // Then the lane groups: lane group k of the result is quad[k]'s four
  // vectors, summed over all four groups.
  return addLaneGroupPairs(addLaneGroupPairs(quad[0], quad[1]),
                           addLaneGroupPairs(quad[2], quad[3]));
}

/// scores[r * count + j] = scale * query row r . key j, for the block's
/// rows and `count` keys (dim a multiple of 16). Sixteen keys at a time,
/// unrolled so that their sums stay in registers.
__attribute__((target("avx512f"))) void scoreFewRows(const AttentionRows &block,
                                                     const float *keys,
                                                     int64_t count,
                                                     float *scores) {
  const int64_t dim = block.dim, stride = block.keyStride;
  const __m512 scale = _mm512_set1_ps(block.scale);
  for (int64_t r = 0; r < block.rows; ++r) {
    const float *query = block.query + r * block.queryStride;
    float *out = scores + r * count;
    int64_t first = 0;
    for (; first + 16 <= count; first += 16) {
      const float *key = keys + first * stride;
      __m512 sums[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        sums[i] = _mm512_setzero_ps();
      }
      for (int64_t d = 0; d < dim; d += 16) {
        __m512 q = _mm512_loadu_ps(query + d);
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          sums[i] = _mm512_fmadd_ps(q, _mm512_loadu_ps(key + i * stride + d),
                                    sums[i]);
        }
      }
      _mm512_storeu_ps(out + first, _mm512_mul_ps(sumEach(sums), scale));
    }
    for (; first < count; ++first) { // the last keys one by one
      const float *key = keys + first * stride;
      __m512 sum = _mm512_setzero_ps();
      for (int64_t d = 0; d < dim; d += 16) {
        sum = _mm512_fmadd_ps(_mm512_loadu_ps(query + d),
                              _mm512_loadu_ps(key + d), sum);
      }
      out[first] = _mm512_reduce_add_ps(sum) * block.scale;
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// out[0, 16 * Vectors) += sum over keys j of weight[j] * value j.
template <int Vectors>
__attribute__((target("avx512f"))) void
addWeightedValues(const float *weight, const float *values, int64_t stride,
                  int64_t count, float *out) {
  __m512 sums[Vectors];
#pragma GCC unroll 8
  for (int v = 0; v < Vectors; ++v) {
    sums[v] = _mm512_loadu_ps(out + 16 * v);
  }
  for (int64_t j = 0; j < count; ++j) {
    __m512 w = _mm512_set1_ps(weight[j]);
    const float *value = values + j * stride;
#pragma GCC unroll 8
    for (int v = 0; v < Vectors; ++v) {
      sums[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(value + 16 * v), sums[v]);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < Vectors; ++v) {
    _mm512_storeu_ps(out + 16 * v, sums[v]);
  }
}

/// accumulated row r += sum over keys j of weights[r * count + j] * value j,
/// by 128 dims at a time (8 accumulators).
void addValuesFewRows(const AttentionRows &block, const float *values,
                      int64_t count, const float *weights, float *accumulated) {
  using Pass =
      void (*)(const float *, const float *, int64_t, int64_t, float *);
  static constexpr Pass passes[] = {addWeightedValues<1>, addWeightedValues<2>,
                                    addWeightedValues<3>, addWeightedValues<4>,
                                    addWeightedValues<5>, addWeightedValues<6>,
                                    addWeightedValues<7>, addWeightedValues<8>};
  for (int64_t r = 0; r < block.rows; ++r) {
    for (int64_t chunk = 0; chunk < block.dim; chunk += 128) {
      int64_t vectors = std::min<int64_t>(128, block.dim - chunk) / 16;
      passes[vectors - 1](weights + r * count, values + chunk,
                          block.valueStride, count,
                          accumulated + r * block.dim + chunk);
    }
  }
}

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
  const bool few = fewRows(block);
  for (int64_t first = 0; first < width; first += kKeyBlock) {
    int64_t count = std::min(kKeyBlock, width - first);
    const float *keys = block.keys + first * block.keyStride;
    const float *values = block.values + first * block.valueStride;
    if (few) {
      scoreFewRows(block, keys, count, scores);
    } else if (rows == 1) {
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
        float best = std::max(maximum[r], detail::maximumOf(row, visible));
        // What was summed so far was relative to the old maximum.
        float rescale = std::exp(maximum[r] - best);
        sum[r] = sum[r] * rescale + detail::expShiftedSum(row, visible, best);
        maximum[r] = best;
        if (rescale != 1.0f) {
          detail::scaleInto(accumulated + r * dim, rescale,
                            accumulated + r * dim, dim);
        }
      }
      std::fill(row + visible, row + count, 0.0f); // masked: weight 0
    }
    if (few) {
      addValuesFewRows(block, values, count, scores, accumulated);
    } else if (rows == 1) {
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
    detail::scaleInto(accumulated + r * dim, inverse,
                      block.out + r * block.outStride, dim);
  }
}

AttentionRows mfrt::attentionOfOnePosition(
    const float *query, const float *keys, const float *values,
    int64_t keyStride, int64_t valueStride, int64_t heads, int64_t past,
    int64_t attended, bool causal, float scale, float *out, int64_t dim) {
  // The position sees the keys up to itself (causal) or all of them: the
  // same for every row, so the rows attend as one non-causal block.
  int64_t visible = causal ? std::min(attended, past + 1) : attended;
  return {query, dim,     keys,  values, keyStride, valueStride, 0,  heads,
          past,  visible, false, scale,  out,       dim,         dim};
}

const std::vector<float> &mfrt::ropeInverseFrequencies(float theta,
                                                       int64_t headDim) {
  // Every layer asks for the same ones (a pow per pair of dimensions).
  thread_local float lastTheta = 0;
  thread_local std::vector<float> last;
  if (theta == lastTheta && static_cast<int64_t>(last.size()) == headDim / 2) {
    return last;
  }
  last.resize(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i) {
    last[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / headDim);
  }
  lastTheta = theta;
  return last;
}

void mfrt::ropeAngles(const std::vector<float> &inverseFrequency,
                      float position, float direction, float *cosines,
                      float *sines) {
  // In decode every layer turns the same position: its angles once a
  // token, not once a layer.
  thread_local std::vector<float> lastFrequency, lastCosines, lastSines;
  thread_local float lastPosition = 0, lastDirection = 0;
  size_t half = inverseFrequency.size();
  if (position == lastPosition && direction == lastDirection &&
      lastFrequency == inverseFrequency) {
    std::copy(lastCosines.begin(), lastCosines.end(), cosines);
    std::copy(lastSines.begin(), lastSines.end(), sines);
    return;
  }
  for (size_t i = 0; i < half; ++i) {
    float angle = position * inverseFrequency[i];
    cosines[i] = std::cos(angle);
    sines[i] = direction * std::sin(angle);
  }
  lastFrequency = inverseFrequency;
  lastPosition = position;
  lastDirection = direction;
  lastCosines.assign(cosines, cosines + half);
  lastSines.assign(sines, sines + half);
}

int64_t BlockTable::mappedPrefix(int64_t b, int64_t limit) const {
  int64_t mapped = 0;
  while (mapped < limit && entries[b * width + mapped / blockSize] >= 0) {
    mapped = std::min(limit, (mapped / blockSize + 1) * blockSize);
  }
  return mapped;
}

std::string BlockTable::check(int64_t batch) const {
  for (int64_t i = 0; i < batch * width; ++i) {
    if (entries[i] >= poolBlocks) {
      return "block table entry " + std::to_string(entries[i]) +
             " (batch row " + std::to_string(i / width) +
             ") is past the pool of " + std::to_string(poolBlocks) +
             " KV blocks";
    }
  }
  return {};
}

std::string mfrt::runFusedAttention(const FusedAttention &args,
                                    int64_t unitBegin, int64_t unitEnd) {
  const bool cached = args.cacheKey != nullptr;
  const BlockTable &table = args.table;
  if (table) {
    if (!cached || args.cacheKey != args.cacheKeyIn ||
        args.cacheValue != args.cacheValueIn) {
      return "a paged KV cache is written in place, by its own region";
    }
    if (std::string why = table.check(args.batch); !why.empty()) {
      return why;
    }
  }
  int64_t available = cached ? args.keys : args.newRows;
  auto pastOf = [&](int64_t b) -> int64_t {
    return args.pastRows ? args.pastRows[b] : args.past;
  };
  for (int64_t b = 0; b < (args.pastRows ? args.batch : 1); ++b) {
    int64_t past = pastOf(b);
    if (past < 0 || (cached && past + args.newRows > args.keys) ||
        (args.hasPast && past + args.seq > available)) {
      return "past_length " + std::to_string(past) +
             (args.pastRows ? " (batch row " + std::to_string(b) + ")" : "") +
             " + " + std::to_string(args.seq) + " new tokens exceeds the " +
             std::to_string(available) +
             " keys of the cache; prompt plus new tokens must fit in "
             "seq_length";
    }
  }
  const int64_t dim = args.dim, half = dim / 2,
                group = args.heads / args.kvHeads;
  const int64_t kvStride = args.kvHeads * dim, queryStride = args.heads * dim;
  // A 16-bit RoPE result is rounded to its type, as PyNative stores it.
  const DType dtype = args.dtype;
  const bool f32 = dtype == DType::F32;
  // An int8 cache: rows quantized by their channel's scale as they are
  // written (mf.quantize, symmetric) and multiplied by it as they are read.
  const bool int8Cache = args.keyScales != nullptr;
  const DType cacheType = int8Cache ? DType::I8 : dtype;
  thread_local std::vector<float> keyScales, valueScales, zeroPoints;
  if (int8Cache) {
    keyScales.resize(kvStride);
    valueScales.resize(kvStride);
    toFloats(dtype, args.keyScales, keyScales.data(), kvStride);
    toFloats(dtype, args.valueScales, valueScales.data(), kvStride);
    zeroPoints.assign(dim, 0.0f);
  }
  thread_local std::vector<uint16_t> narrowed;
  narrowed.resize(dim);
  auto roundToStorage = [&](float *row) {
    if (!f32) {
      fromFloats(dtype, row, narrowed.data(), dim);
      toFloats(dtype, narrowed.data(), row, dim);
    }
  };
  // The cosines and sines of one batch's positions ([batch, rows] for the
  // tensor turned: query or new keys, the same when both are), computed
  // once per batch a call sees and shared by the keys and every head.
  int64_t tableRows = args.ropeQuery ? args.seq : args.newRows;
  thread_local std::vector<float> cosines, sines;
  const std::vector<float> *inverseFrequency = nullptr;
  int64_t tableBatch = -1;
  if (args.positions) {
    inverseFrequency = &ropeInverseFrequencies(args.theta, dim);
    cosines.resize(tableRows * half);
    sines.resize(tableRows * half);
  }
  auto fillTable = [&](int64_t b) {
    if (!args.positions || tableBatch == b) {
      return;
    }
    for (int64_t row = 0; row < tableRows; ++row) {
      ropeAngles(*inverseFrequency,
                 static_cast<float>(args.positions[b * tableRows + row]), 1.0f,
                 &cosines[row * half], &sines[row * half]);
    }
    tableBatch = b;
  };
  // A row turned by RoPE (rounded to the storage type).
  thread_local std::vector<float> loaded;
  loaded.resize(dim);
  auto rotate = [&](const void *base, int64_t element, int64_t row,
                    float *out) {
    toFloats(dtype, elementAt(dtype, base, element), loaded.data(), dim);
    ropeRotate(loaded.data(), out, &cosines[row * half], &sines[row * half],
               half);
    roundToStorage(out);
  };
  // Per thread, reused from call to call (a decode step calls per layer).
  thread_local std::vector<float> keyRows, valueRows, queries, outRows, rotated,
      scratch;
  queries.resize(std::max(kAttentionRowBlock, group) * dim);
  outRows.resize(std::max(kAttentionRowBlock, group) * dim);
  rotated.resize(dim);
  // Attends `rows` query rows from element `offset` (`rowStride` apart;
  // RoPE at table row tableRow + r * tableStep) as `block` says for its
  // keys, and writes the output rows alike: the buffers in place when f32
  // and not turned, else through rows converted here.
  auto attendQueries = [&](int64_t offset, int64_t rows, int64_t rowStride,
                           int64_t tableRow, int64_t tableStep,
                           AttentionRows block) {
    block.query = queries.data();
    block.queryStride = dim;
    if (args.ropeQuery) {
      for (int64_t r = 0; r < rows; ++r) {
        rotate(args.query, offset + r * rowStride, tableRow + r * tableStep,
               &queries[r * dim]);
      }
    } else if (f32) {
      block.query = static_cast<const float *>(args.query) + offset;
      block.queryStride = rowStride;
    } else {
      loadRows(dtype, args.query, offset, rowStride, rows, dim, queries.data());
    }
    block.out = f32 ? static_cast<float *>(args.out) + offset : outRows.data();
    block.outStride = f32 ? rowStride : dim;
    attendRows(block, scratch);
    if (!f32) {
      storeRows(dtype, outRows.data(), args.out, offset, rowStride, rows, dim);
    }
  };
  for (int64_t unit = std::max<int64_t>(unitBegin, 0);
       unit < std::min(unitEnd, args.batch * args.kvHeads); ++unit) {
    int64_t b = unit / args.kvHeads, kvHead = unit % args.kvHeads;
    fillTable(b);
    // Element offsets of this KV head's first new row and first cache row.
    int64_t newBase = (b * args.newRows * args.kvHeads + kvHead) * dim;
    int64_t headBase = (b * args.keys * args.kvHeads + kvHead) * dim;
    const int64_t past = pastOf(b);
    int64_t attended = args.hasPast ? past + args.seq : args.newRows;
    const void *keySource = args.newKeys, *valueSource = args.newValues;
    int64_t keyBase = newBase;
    // The element where row b's cache position p of this KV head is, or -1
    // (a paged block not mapped).
    auto cacheElement = [&](int64_t p) -> int64_t {
      if (!table) {
        return headBase + p * kvStride;
      }
      int64_t row = table.poolRow(b, p);
      return row < 0 ? -1 : (row * args.kvHeads + kvHead) * dim;
    };
    if (cached) {
      for (auto [from, to] : {std::pair{args.cacheKeyIn, args.cacheKey},
                              std::pair{args.cacheValueIn, args.cacheValue}}) {
        if (from != to) { // not in place: the old rows first
          copyRows(cacheType, from, headBase, to, headBase, kvStride, args.keys,
                   dim);
        }
      }
      for (int64_t row = 0; row < args.newRows; ++row) {
        int64_t target = cacheElement(past + row);
        if (target < 0) {
          continue;
        }
        int64_t source = newBase + row * kvStride;
        if (int8Cache) {
          // (The rotated keys rounded to the storage type first, as
          // PyNative quantizes them.)
          if (args.ropeKey) {
            rotate(args.newKeys, source, row, rotated.data());
          } else {
            toFloats(dtype, elementAt(dtype, args.newKeys, source),
                     rotated.data(), dim);
          }
          quantizeRowStatic(rotated.data(), dim, &keyScales[kvHead * dim],
                            zeroPoints.data(),
                            static_cast<int8_t *>(args.cacheKey) + target);
          toFloats(dtype, elementAt(dtype, args.newValues, source),
                   rotated.data(), dim);
          quantizeRowStatic(rotated.data(), dim, &valueScales[kvHead * dim],
                            zeroPoints.data(),
                            static_cast<int8_t *>(args.cacheValue) + target);
          continue;
        }
        if (args.ropeKey) {
          rotate(args.newKeys, source, row, rotated.data());
          fromFloats(
              dtype, rotated.data(),
              const_cast<char *>(elementAt(dtype, args.cacheKey, target)), dim);
        } else {
          copyRows(dtype, args.newKeys, source, args.cacheKey, target, 0, 1,
                   dim);
        }
        copyRows(dtype, args.newValues, source, args.cacheValue, target, 0, 1,
                 dim);
      }
      keySource = args.cacheKey;
      valueSource = args.cacheValue;
      keyBase = headBase;
    }
    // f32 keys and values to attend over: in place when they are f32 and
    // need no turning, else rows converted once per unit. A paged row
    // reads its keys up to its first block not mapped, gathered from their
    // blocks.
    const float *keys, *values;
    int64_t keyStride = dim, valueStride = dim;
    int64_t visible = table ? table.mappedPrefix(b, attended) : attended;
    if (table) {
      keyRows.resize(visible * dim);
      valueRows.resize(visible * dim);
      keys = keyRows.data();
      values = valueRows.data();
      for (int64_t p = 0; p < visible; ++p) {
        int64_t element = cacheElement(p);
        if (int8Cache) {
          dequantizeRows(static_cast<const int8_t *>(args.cacheKey) + element,
                         dim, 1, &keyScales[kvHead * dim], dim,
                         &keyRows[p * dim]);
          dequantizeRows(static_cast<const int8_t *>(args.cacheValue) + element,
                         dim, 1, &valueScales[kvHead * dim], dim,
                         &valueRows[p * dim]);
          continue;
        }
        toFloats(dtype, elementAt(dtype, args.cacheKey, element),
                 &keyRows[p * dim], dim);
        toFloats(dtype, elementAt(dtype, args.cacheValue, element),
                 &valueRows[p * dim], dim);
      }
    } else if (int8Cache) { // (always cached)
      keyRows.resize(attended * dim);
      valueRows.resize(attended * dim);
      dequantizeRows(static_cast<const int8_t *>(keySource) + keyBase, kvStride,
                     attended, &keyScales[kvHead * dim], dim, keyRows.data());
      dequantizeRows(static_cast<const int8_t *>(valueSource) + keyBase,
                     kvStride, attended, &valueScales[kvHead * dim], dim,
                     valueRows.data());
      keys = keyRows.data();
      values = valueRows.data();
    } else {
      if (args.ropeKey && !cached) {
        keyRows.resize(attended * dim);
        for (int64_t row = 0; row < attended; ++row) {
          rotate(keySource, keyBase + row * kvStride, row, &keyRows[row * dim]);
        }
        keys = keyRows.data();
      } else if (!f32) {
        keyRows.resize(attended * dim);
        loadRows(dtype, keySource, keyBase, kvStride, attended, dim,
                 keyRows.data());
        keys = keyRows.data();
      } else {
        keys = static_cast<const float *>(keySource) + keyBase;
        keyStride = kvStride;
      }
      if (f32) {
        values = static_cast<const float *>(valueSource) + keyBase;
        valueStride = kvStride;
      } else {
        valueRows.resize(attended * dim);
        loadRows(dtype, valueSource, keyBase, kvStride, attended, dim,
                 valueRows.data());
        values = valueRows.data();
      }
    }
    // Query rows that would see a key not mapped (causal row i sees
    // past + i + 1 keys) output zeros: rows [validRows, seq) of each head.
    int64_t validRows = visible == attended ? args.seq
                        : args.causal
                            ? std::clamp<int64_t>(visible - past, 0, args.seq)
                            : 0;
    auto zeroRows = [&](int64_t head, int64_t first) {
      for (int64_t i = first; i < args.seq; ++i) {
        std::memset(const_cast<char *>(elementAt(
                        dtype, args.out,
                        ((b * args.seq + i) * args.heads + head) * dim)),
                    0, dim * dtypeSize(dtype));
      }
    };
    if (args.seq == 1) {
      if (validRows == 0) {
        for (int64_t head = kvHead * group; head < (kvHead + 1) * group;
             ++head) {
          zeroRows(head, 0);
        }
        continue;
      }
      // One position: the query rows of the group's heads, side by side,
      // attend together (one GEMM for the group instead of one per head).
      attendQueries((b * args.heads + kvHead * group) * dim, group, dim, 0, 0,
                    attentionOfOnePosition(
                        nullptr, keys, values, keyStride, valueStride, group,
                        past, visible, args.causal, args.scale, nullptr, dim));
      continue;
    }
    for (int64_t head = kvHead * group; head < (kvHead + 1) * group; ++head) {
      zeroRows(head, validRows);
      for (int64_t first = 0; first < validRows; first += kAttentionRowBlock) {
        int64_t rows = std::min(kAttentionRowBlock, validRows - first);
        attendQueries(((b * args.seq + first) * args.heads + head) * dim, rows,
                      queryStride, first, 1,
                      {nullptr, 0, keys, values, keyStride, valueStride, first,
                       rows, past, visible, args.causal, args.scale, nullptr, 0,
                       dim});
      }
    }
  }
  return {};
}

void mfrt::runAttentionGradient(const AttentionGradient &args,
                                int64_t unitBegin, int64_t unitEnd) {
  const int64_t dim = args.dim, keys = args.keyRows, seq = args.seq;
  const int64_t group = args.heads / args.kvHeads;
  const int64_t queryStride = args.heads * dim, kvStride = args.kvHeads * dim;
  const DType dtype = args.dtype;
  const bool f32 = dtype == DType::F32;
  auto load = [&](const void *base, int64_t element, int64_t stride,
                  int64_t rows, float *out) {
    loadRows(dtype, base, element, stride, rows, dim, out);
  };
  auto store = [&](const float *in, void *base, int64_t element, int64_t stride,
                   int64_t rows) {
    storeRows(dtype, in, base, element, stride, rows, dim);
  };
  // The block's softmax weights P and then the gradient of its scores; for
  // 16-bit buffers the unit's rows in f32.
  thread_local std::vector<float> weights, scoreGrad, keyRows, valueRows,
      queryRows, outGradRows, queryGradRows, keyGradRows, valueGradRows;
  weights.resize(kAttentionRowBlock * keys);
  scoreGrad.resize(kAttentionRowBlock * keys);
  if (!f32) {
    for (auto *rows : {&keyRows, &valueRows, &keyGradRows, &valueGradRows}) {
      rows->resize(keys * dim);
    }
    for (auto *rows : {&queryRows, &outGradRows, &queryGradRows}) {
      rows->resize(group * seq * dim);
    }
  }
  for (int64_t unit = std::max<int64_t>(unitBegin, 0);
       unit < std::min(unitEnd, args.batch * args.kvHeads); ++unit) {
    int64_t b = unit / args.kvHeads, kvHead = unit % args.kvHeads;
    int64_t kvBase = (b * keys * args.kvHeads + kvHead) * dim;
    // Head `head`'s first query row, as an element offset.
    auto headBase = [&](int64_t head) {
      return (b * seq * args.heads + head) * dim;
    };
    // f32 views: the buffers in place, or this unit's rows converted.
    const float *key, *value;
    float *keyGrad = nullptr, *valueGrad = nullptr;
    int64_t kStride = kvStride, qStride = queryStride;
    if (f32) {
      key = static_cast<const float *>(args.keys) + kvBase;
      value = static_cast<const float *>(args.values) + kvBase;
      keyGrad =
          args.keyGrad ? static_cast<float *>(args.keyGrad) + kvBase : nullptr;
      valueGrad = args.valueGrad ? static_cast<float *>(args.valueGrad) + kvBase
                                 : nullptr;
    } else {
      load(args.keys, kvBase, kvStride, keys, keyRows.data());
      load(args.values, kvBase, kvStride, keys, valueRows.data());
      for (int64_t j = 0; j < group; ++j) {
        load(args.query, headBase(kvHead * group + j), queryStride, seq,
             &queryRows[j * seq * dim]);
        load(args.outGrad, headBase(kvHead * group + j), queryStride, seq,
             &outGradRows[j * seq * dim]);
      }
      key = keyRows.data();
      value = valueRows.data();
      keyGrad = args.keyGrad ? keyGradRows.data() : nullptr;
      valueGrad = args.valueGrad ? valueGradRows.data() : nullptr;
      kStride = qStride = dim;
    }
    // Key and value gradients sum over every query row of the group.
    for (float *grad : {keyGrad, valueGrad}) {
      if (grad) {
        for (int64_t row = 0; row < keys; ++row) {
          std::fill_n(grad + row * kStride, dim, 0.0f);
        }
      }
    }
    for (int64_t j = 0; j < group; ++j) {
      int64_t head = kvHead * group + j;
      const float *queryHead =
          f32 ? static_cast<const float *>(args.query) + headBase(head)
              : &queryRows[j * seq * dim];
      const float *outGradHead =
          f32 ? static_cast<const float *>(args.outGrad) + headBase(head)
              : &outGradRows[j * seq * dim];
      float *queryGradHead =
          !args.queryGrad ? nullptr
          : f32 ? static_cast<float *>(args.queryGrad) + headBase(head)
                : &queryGradRows[j * seq * dim];
      for (int64_t first = 0; first < seq; first += kAttentionRowBlock) {
        int64_t rows = std::min(kAttentionRowBlock, seq - first);
        auto visibleTo = [&](int64_t r) {
          return args.causal ? std::min(keys, args.past + first + r + 1) : keys;
        };
        int64_t width = visibleTo(rows - 1);
        const float *query = queryHead + first * qStride;
        const float *outGrad = outGradHead + first * qStride;
        float *queryGrad =
            queryGradHead ? queryGradHead + first * qStride : nullptr;
        if (width == 0) { // no keys: no weights, a zero query gradient
          for (int64_t r = 0; queryGrad && r < rows; ++r) {
            std::fill_n(queryGrad + r * qStride, dim, 0.0f);
          }
          continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, width, dim,
                    args.scale, query, qStride, key, kStride, 0.0f,
                    weights.data(), width);
        for (int64_t r = 0; r < rows; ++r) {
          float *row = weights.data() + r * width;
          int64_t visible = visibleTo(r);
          float best = detail::maximumOf(row, visible);
          float inverseSum = 1.0f / detail::expShiftedSum(row, visible, best);
          detail::scaleInto(row, inverseSum, row, visible);
          std::fill(row + visible, row + width, 0.0f);
        }
        if (queryGrad || keyGrad) {
          // dP = dO V^T; dS = P (dP - rowsum(P dP)), zero where masked.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, width, dim,
                      1.0f, outGrad, qStride, value, kStride, 0.0f,
                      scoreGrad.data(), width);
          for (int64_t r = 0; r < rows; ++r) {
            const float *p = weights.data() + r * width;
            float *ds = scoreGrad.data() + r * width;
            double weighted = 0;
            for (int64_t k = 0; k < width; ++k) {
              weighted += static_cast<double>(p[k]) * ds[k];
            }
            for (int64_t k = 0; k < width; ++k) {
              ds[k] = p[k] * (ds[k] - static_cast<float>(weighted));
            }
          }
          if (queryGrad) { // dQ = scale dS K: each block's rows once
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dim,
                        width, args.scale, scoreGrad.data(), width, key,
                        kStride, 0.0f, queryGrad, qStride);
          }
          if (keyGrad) { // dK += scale dS^T Q
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, dim,
                        rows, args.scale, scoreGrad.data(), width, query,
                        qStride, 1.0f, keyGrad, kStride);
          }
        }
        if (valueGrad) { // dV += P^T dO
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, dim, rows,
                      1.0f, weights.data(), width, outGrad, qStride, 1.0f,
                      valueGrad, kStride);
        }
      }
      if (!f32 && queryGradHead) {
        store(queryGradHead, args.queryGrad, headBase(head), queryStride, seq);
      }
    }
    if (!f32) {
      if (keyGrad) {
        store(keyGrad, args.keyGrad, kvBase, kvStride, keys);
      }
      if (valueGrad) {
        store(valueGrad, args.valueGrad, kvBase, kvStride, keys);
      }
    }
  }
}
