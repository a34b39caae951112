//===- PanelGemm.cpp - products with weights packed once ------------------===//

#include "runtime/PanelGemm.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

using namespace mfrt;

namespace {

/// Steps along K per pass over a panel: 1024 x 128 bytes of a panel stay
/// in L2 while every row block of the tile reads them (one core, K =
/// 2048: 215 GFLOP/s against 203-206 in blocks of 256 or 512).
constexpr int64_t kDepthBlock = 1024;
/// Activation rows per microkernel call: 8 rows x 2 vectors are 16
/// accumulators, enough to hide the FMA latency (one core, 256 x 128
/// tiles, K = 768: 8 rows 215-222 GFLOP/s, 6 rows 198-211, 4 rows 76).
constexpr int kRowBlock = 8;

/// rows x 32 (the panel's columns in `low` / `high`) of C += or = the
/// rows of A times `depth` rows of a panel. `out` is column 0 of the
/// panel in C's first row; only the masked columns are read or written.
template <int Rows>
__attribute__((target("avx512f"), always_inline)) inline void
panelBlockAvx512(const float *a, int64_t lda, const float *panel,
                 int64_t depth, float *out, int64_t ldc, __mmask16 low,
                 __mmask16 high, bool accumulate) {
  __m512 sum[Rows][2];
  for (int r = 0; r < Rows; ++r) {
    sum[r][0] = accumulate ? _mm512_maskz_loadu_ps(low, out + r * ldc)
                           : _mm512_setzero_ps();
    sum[r][1] = accumulate ? _mm512_maskz_loadu_ps(high, out + r * ldc + 16)
                           : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < depth; ++k) {
    __m512 left = _mm512_loadu_ps(panel + k * kPanelWidth);
    __m512 right = _mm512_loadu_ps(panel + k * kPanelWidth + 16);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      __m512 x = _mm512_set1_ps(a[r * lda + k]);
      sum[r][0] = _mm512_fmadd_ps(x, left, sum[r][0]);
      sum[r][1] = _mm512_fmadd_ps(x, right, sum[r][1]);
    }
  }
  for (int r = 0; r < Rows; ++r) {
    _mm512_mask_storeu_ps(out + r * ldc, low, sum[r][0]);
    _mm512_mask_storeu_ps(out + r * ldc + 16, high, sum[r][1]);
  }
}

/// The same for any x86-64: columns [first, last) of the panel.
void panelBlockPortable(int rows, const float *a, int64_t lda,
                        const float *panel, int64_t depth, float *out,
                        int64_t ldc, int64_t first, int64_t last,
                        bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    float sum[kPanelWidth] = {};
    for (int64_t k = 0; k < depth; ++k) {
      float x = a[r * lda + k];
      for (int64_t j = 0; j < kPanelWidth; ++j) {
        sum[j] += x * panel[k * kPanelWidth + j];
      }
    }
    for (int64_t j = first; j < last; ++j) {
      out[r * ldc + j] = accumulate ? out[r * ldc + j] + sum[j] : sum[j];
    }
  }
}

template <int Rows>
__attribute__((target("avx512f"))) void
panelRowsAvx512(const float *a, int64_t lda, const float *panel,
                int64_t depth, float *out, int64_t ldc, __mmask16 low,
                __mmask16 high, bool accumulate) {
  panelBlockAvx512<Rows>(a, lda, panel, depth, out, ldc, low, high,
                         accumulate);
}

using PanelRows = void (*)(const float *, int64_t, const float *, int64_t,
                           float *, int64_t, __mmask16, __mmask16, bool);
/// The microkernel by row count, 1 .. kRowBlock.
constexpr PanelRows kPanelRows[] = {
    panelRowsAvx512<1>, panelRowsAvx512<2>, panelRowsAvx512<3>,
    panelRowsAvx512<4>, panelRowsAvx512<5>, panelRowsAvx512<6>,
    panelRowsAvx512<7>, panelRowsAvx512<8>};

bool hasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

} // namespace

void mfrt::packPanels(const float *weight, int64_t n, int64_t k, float *panels,
                      int64_t panelBegin, int64_t panelEnd) {
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    float *panel = panels + p * kPanelWidth * k;
    for (int64_t j = 0; j < kPanelWidth; ++j) {
      int64_t row = p * kPanelWidth + j;
      for (int64_t i = 0; i < k; ++i) {
        panel[i * kPanelWidth + j] = row < n ? weight[row * k + i] : 0.0f;
      }
    }
  }
}

void mfrt::packPanelsInPlace(float *weight, int64_t k, int64_t panelBegin,
                             int64_t panelEnd) {
  std::vector<float> rows(kPanelWidth * k);
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    float *panel = weight + p * kPanelWidth * k;
    std::copy(panel, panel + kPanelWidth * k, rows.begin());
    packPanels(rows.data(), kPanelWidth, k, panel, 0, 1);
  }
}

void mfrt::unpackPanels(const float *panels, int64_t n, int64_t k,
                        float *weight) {
  for (int64_t row = 0; row < n; ++row) {
    const float *panel = panels + row / kPanelWidth * kPanelWidth * k;
    for (int64_t i = 0; i < k; ++i) {
      weight[row * k + i] = panel[i * kPanelWidth + row % kPanelWidth];
    }
  }
}

extern "C" void mfrt::mfrtGemmPanelsF32(int64_t a, int64_t b, int64_t c,
                                        int64_t ldc, int64_t m0, int64_t n0,
                                        int64_t m, int64_t n, int64_t k,
                                        int64_t, int64_t, int64_t, int64_t) {
  const float *lhs = reinterpret_cast<const float *>(a) + m0 * k;
  const float *panels = reinterpret_cast<const float *>(b);
  float *tile = reinterpret_cast<float *>(c);
  const bool vector = hasAvx512();
  for (int64_t k0 = 0; k0 < k; k0 += kDepthBlock) {
    int64_t depth = std::min(kDepthBlock, k - k0);
    for (int64_t p = n0 / kPanelWidth; p * kPanelWidth < n0 + n; ++p) {
      // The panel's columns in the tile: [first, last) of its 32.
      int64_t first = std::max<int64_t>(n0 - p * kPanelWidth, 0);
      int64_t last = std::min<int64_t>(n0 + n - p * kPanelWidth, kPanelWidth);
      const float *panel = panels + (p * k + k0) * kPanelWidth;
      // Column 0 of the panel in the tile (left of it for the first panel
      // of a tile that starts mid-panel: those columns are masked off).
      float *out = tile + (p * kPanelWidth - n0);
      uint32_t columns = static_cast<uint32_t>(
          ((uint64_t(1) << last) - 1) & ~((uint64_t(1) << first) - 1));
      for (int64_t i = 0; i < m; i += kRowBlock) {
        int rows = static_cast<int>(std::min<int64_t>(kRowBlock, m - i));
        if (vector) {
          kPanelRows[rows - 1](lhs + i * k + k0, k, panel, depth,
                               out + i * ldc, ldc,
                               static_cast<__mmask16>(columns),
                               static_cast<__mmask16>(columns >> 16), k0 > 0);
        } else {
          panelBlockPortable(rows, lhs + i * k + k0, k, panel, depth,
                             out + i * ldc, ldc, first, last, k0 > 0);
        }
      }
    }
  }
}
