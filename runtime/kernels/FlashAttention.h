//===- FlashAttention.h - attention by blocks, online softmax ---*- C++ -*-===//
//
// The one f32 attention of the runtime: the eager mf.attention kernel runs
// it per (batch, head, block of query rows); the compiled "attention"
// region (RoPE, KV-cache writes and attention in one kernel) per (batch,
// KV head) through the mfrt_attention service.
//
// Per block of up to 32 query rows and block of up to 128 keys: the scores
// are one GEMM over the keys in place (strided: a KV head of a cache), a
// running maximum and sum per row rescale what was accumulated (the
// flash-attention recurrence), and one GEMM adds the weighted values. No
// scores beyond one 32 x 128 block exist at any time. Decode's few rows
// (a KV head's group at one position, up to 8) take AVX-512 loops of
// their own instead of the GEMMs.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_FLASHATTENTION_H
#define MFC_RUNTIME_KERNELS_FLASHATTENTION_H

#include "runtime/base/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mfrt {

/// Query rows [firstRow, firstRow + rows) of one head against the keys
/// and values of its KV head (rows of stride `keyStride`, `valueStride`).
/// Row i sees keys [0, min(attended, causal ? past + i + 1 : attended)).
struct AttentionRows {
  const float *query; // row firstRow, stride queryStride
  int64_t queryStride;
  const float *keys, *values;
  int64_t keyStride, valueStride;
  int64_t firstRow, rows, past, attended;
  bool causal;
  float scale;
  float *out; // row firstRow, stride outStride
  int64_t outStride;
  int64_t dim;
};

/// Computes `rows` output rows; `scratch` is reused between calls.
void attendRows(const AttentionRows &block, std::vector<float> &scratch);

/// The most query rows one attendRows call should take.
inline constexpr int64_t kAttentionRowBlock = 32;

/// The block for the query rows of `heads` heads (rows of `dim`, side by
/// side) at one position `past` sharing one KV head, as decode has them:
/// all rows see the same keys, so they attend together.
AttentionRows attentionOfOnePosition(const float *query, const float *keys,
                                     const float *values, int64_t keyStride,
                                     int64_t valueStride, int64_t heads,
                                     int64_t past, int64_t attended,
                                     bool causal, float scale, float *out,
                                     int64_t dim);

/// RoPE's inverse frequencies theta^(-2i / headDim), i < headDim / 2, in
/// f32 as the Hugging Face reference computes them: this thread's, valid
/// until its next call.
const std::vector<float> &ropeInverseFrequencies(float theta, int64_t headDim);

/// The cosines and sines of `position` times each inverse frequency.
void ropeAngles(const std::vector<float> &inverseFrequency, float position,
                float direction, float *cosines, float *sines);

/// One head's rotate-half RoPE: out[i] = x[i] c - x[i + half] s,
/// out[i + half] = x[i + half] c + x[i] s.
inline void ropeRotate(const float *x, float *out, const float *cosines,
                       const float *sines, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    float first = x[i], second = x[i + half];
    out[i] = first * cosines[i] - second * sines[i];
    out[i + half] = second * cosines[i] + first * sines[i];
  }
}

/// An int8 KV cache's rows back as f32: `rows` rows of `width` values
/// (`stride` apart) times their channel's scale, into dense rows of `out`.
void dequantizeRows(const int8_t *values, int64_t stride, int64_t rows,
                    const float *scales, int64_t width, float *out);

/// A paged KV cache's block table (PagedAttention): position p of batch
/// row b lives in pool block entries[b * width + p / blockSize], at row
/// p % blockSize of it; a negative entry is a block not mapped.
struct BlockTable {
  const int32_t *entries = nullptr; // null: the cache is not paged
  int64_t width = 0, blockSize = 0, poolBlocks = 0;

  explicit operator bool() const { return entries != nullptr; }
  /// Row b's position p as a row of the pool, or -1 when not mapped.
  int64_t poolRow(int64_t b, int64_t p) const {
    int32_t block = entries[b * width + p / blockSize];
    return block < 0 ? -1 : block * blockSize + p % blockSize;
  }
  /// How many of row b's first `limit` positions are mapped, from 0.
  int64_t mappedPrefix(int64_t b, int64_t limit) const;
  /// Why an entry of rows [0, batch) lies past the pool, else empty.
  std::string check(int64_t batch) const;
};

/// What one compiled attention region computes (see FuseAttention.cpp):
/// optionally RoPE on the query and the new keys (by `positions`
/// [batch, seq]), optionally the new keys and values written into caches
/// at `past` (in place when cacheKey == cacheKeyIn), then attention.
struct FusedAttention {
  // Buffers of `dtype` (f32, f16 or bf16); the math is f32 either way.
  const void *query;   // [batch, seq, heads, dim], before RoPE
  const void *newKeys; // [batch, newRows, kvHeads, dim], before RoPE
  const void *newValues;
  const void *cacheKeyIn, *cacheValueIn; // [batch, keys, kvHeads, dim] or null
  void *cacheKey, *cacheValue;
  const int32_t *positions; // null: no RoPE
  bool ropeQuery, ropeKey, causal;
  bool hasPast;            // the query follows `past` cached tokens
  const int32_t *pastRows; // one past per batch row, else null
  int64_t past;            // every row's past when pastRows is null
  void *out;               // [batch, seq, heads, dim]
  int64_t batch, seq, heads, kvHeads, dim;
  int64_t keys;    // cache rows (with a cache), else newRows
  int64_t newRows; // rows of newKeys / newValues
  float scale, theta;
  DType dtype;
  /// With a block table the caches are pools [poolBlocks, blockSize,
  /// kvHeads, dim], written in place, and `keys` is what a row's table maps.
  BlockTable table;
  /// An int8 cache's scales ([kvHeads, dim] of `dtype`): the caches are
  /// i8, new rows written as quantizeRowStatic of them (zero points 0) and
  /// read times their channel's scale. Null: the caches are of `dtype`.
  const void *keyScales = nullptr, *valueScales = nullptr;
};

/// Units [unitBegin, unitEnd) of batch x kvHeads: each writes its KV
/// head's new cache rows, then attends for the query heads that read it.
/// Returns why it cannot (a past_length that does not fit the keys, in any
/// row; a block table entry past the pool), else an empty string; nothing
/// is written then. A query row that would see a key in a block not mapped
/// has zeros as its output, and new rows there are not written.
std::string runFusedAttention(const FusedAttention &args, int64_t unitBegin,
                              int64_t unitEnd);

/// The gradients of a causal (or not) attention without a past, with
/// respect to any of its query, keys and values (a null output is not
/// computed). Per block of 32 query rows of a head: the scores and their
/// softmax again (one GEMM, the whole width the block sees), the gradient
/// of the weights (one GEMM with dO), then one GEMM per gradient asked.
struct AttentionGradient {
  // Buffers of `dtype` (f32, f16 or bf16); the math is f32 either way.
  const void *query, *keys, *values, *outGrad; // dO is shaped as the query
  void *queryGrad, *keyGrad, *valueGrad;       // each may be null
  int64_t batch, seq, heads, kvHeads, dim, keyRows;
  bool causal;
  float scale;
  DType dtype;
  /// Query row i saw keys 0 .. past + i (past + seq <= keyRows).
  int64_t past = 0;
};

/// Units [unitBegin, unitEnd) of batch x kvHeads: a unit writes its KV
/// head's key and value gradients and the query gradients of the heads
/// that read it, so units may run at once.
void runAttentionGradient(const AttentionGradient &args, int64_t unitBegin,
                          int64_t unitEnd);

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELS_FLASHATTENTION_H
