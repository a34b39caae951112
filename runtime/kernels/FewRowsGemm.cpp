//===- FewRowsGemm.cpp - a few rows times a weight as stored --------------===//

#include "runtime/kernels/FewRowsGemm.h"

#include "runtime/hal/CpuFeatures.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

using namespace mfrt;

namespace {

/// Weight rows this far ahead are prefetched (into L2 and beyond: into L1
/// they evict the rows of A) as the current ones are read.
constexpr int64_t kPrefetchRows = 16;

/// C[r, q] for Rows rows of A and Columns weight rows (every loop over the
/// accumulators unrolled, so they stay in registers); `ahead`, when not
/// null, is the weight row kPrefetchRows on, prefetched as w is read.
template <int Rows, int Columns>
__attribute__((target("avx512f"))) void
block(const float *a, int64_t lda, const float *w, int64_t k, float *c,
      int64_t ldc, const float *ahead) {
  __m512 sum[Rows][Columns];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < Columns; ++q) {
      sum[r][q] = _mm512_setzero_ps();
    }
  }
  for (int64_t i = 0; i < k; i += 16) {
    __mmask16 mask = k - i >= 16 ? __mmask16(0xFFFF)
                                 : static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 weight[Columns];
#pragma GCC unroll 4
    for (int q = 0; q < Columns; ++q) {
      weight[q] = _mm512_maskz_loadu_ps(mask, w + q * k + i);
      if (ahead) {
        _mm_prefetch(reinterpret_cast<const char *>(ahead + q * k + i),
                     _MM_HINT_T2);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      __m512 row = _mm512_maskz_loadu_ps(mask, a + r * lda + i);
#pragma GCC unroll 4
      for (int q = 0; q < Columns; ++q) {
        sum[r][q] = _mm512_fmadd_ps(row, weight[q], sum[r][q]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < Columns; ++q) {
      c[r * ldc + q] = _mm512_reduce_add_ps(sum[r][q]);
    }
  }
}

using Block = void (*)(const float *, int64_t, const float *, int64_t, float *,
                       int64_t, const float *);

/// Weight rows a block takes: 8 rows of A times 2 weight rows keep 16
/// accumulators, and each weight row is read from memory once.
constexpr int kColumns = 2;

template <int... Rows>
constexpr std::array<std::array<Block, kColumns>, sizeof...(Rows)>
blocksOf(std::integer_sequence<int, Rows...>) {
  return {std::array<Block, kColumns>{&block<Rows + 1, 1>,
                                      &block<Rows + 1, 2>}...};
}

constexpr auto kBlocks = blocksOf(std::make_integer_sequence<int, 8>{});

} // namespace

bool mfrt::runsFewRowsGemm() { return hasAvx512(); }

void mfrt::fewRowsTimesWeight(const float *a, int64_t lda, int64_t rows,
                              const float *w, int64_t columns, int64_t k,
                              float *c, int64_t ldc) {
  for (int64_t n = 0; n < columns; n += kColumns) {
    int q = static_cast<int>(std::min<int64_t>(kColumns, columns - n));
    const float *ahead = n + kPrefetchRows + q <= columns
                             ? w + (n + kPrefetchRows) * k
                             : nullptr;
    kBlocks[rows - 1][q - 1](a, lda, w + n * k, k, c + n, ldc, ahead);
  }
}
