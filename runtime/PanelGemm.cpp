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
template <int Rows, bool Narrow>
__attribute__((target("avx512f"), always_inline)) inline void
panelBlockAvx512(const float *a, int64_t lda, const float *panel,
                 int64_t width, int64_t depth, float *out, int64_t ldc,
                 __mmask16 low, __mmask16 high, bool accumulate) {
  __m512 sum[Rows][2];
  for (int r = 0; r < Rows; ++r) {
    sum[r][0] = accumulate ? _mm512_maskz_loadu_ps(low, out + r * ldc)
                           : _mm512_setzero_ps();
    sum[r][1] = accumulate ? _mm512_maskz_loadu_ps(high, out + r * ldc + 16)
                           : _mm512_setzero_ps();
  }
  // A narrow (last) panel's rows are `width` wide: its columns past that
  // load as zeros.
  __mmask16 leftColumns = static_cast<__mmask16>((1u << std::min<int64_t>(width, 16)) - 1);
  __mmask16 rightColumns = static_cast<__mmask16>(
      (1u << std::max<int64_t>(width - 16, 0)) - 1);
  for (int64_t k = 0; k < depth; ++k) {
    __m512 left = Narrow ? _mm512_maskz_loadu_ps(leftColumns, panel + k * width)
                         : _mm512_loadu_ps(panel + k * kPanelWidth);
    __m512 right = Narrow
                       ? _mm512_maskz_loadu_ps(rightColumns, panel + k * width + 16)
                       : _mm512_loadu_ps(panel + k * kPanelWidth + 16);
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
                        const float *panel, int64_t width, int64_t depth,
                        float *out, int64_t ldc, int64_t first, int64_t last,
                        bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    float sum[kPanelWidth] = {};
    for (int64_t k = 0; k < depth; ++k) {
      float x = a[r * lda + k];
      for (int64_t j = 0; j < width; ++j) {
        sum[j] += x * panel[k * width + j];
      }
    }
    for (int64_t j = first; j < last; ++j) {
      out[r * ldc + j] = accumulate ? out[r * ldc + j] + sum[j] : sum[j];
    }
  }
}

template <int Rows, bool Narrow>
__attribute__((target("avx512f"))) void
panelRowsAvx512(const float *a, int64_t lda, const float *panel,
                int64_t width, int64_t depth, float *out, int64_t ldc,
                __mmask16 low, __mmask16 high, bool accumulate) {
  panelBlockAvx512<Rows, Narrow>(a, lda, panel, width, depth, out, ldc, low,
                                 high, accumulate);
}

using PanelRows = void (*)(const float *, int64_t, const float *, int64_t,
                           int64_t, float *, int64_t, __mmask16, __mmask16,
                           bool);
/// The microkernel by row count, 1 .. kRowBlock, for whole panels and the
/// narrow last one.
constexpr PanelRows kPanelRows[2][kRowBlock] = {
    {panelRowsAvx512<1, false>, panelRowsAvx512<2, false>,
     panelRowsAvx512<3, false>, panelRowsAvx512<4, false>,
     panelRowsAvx512<5, false>, panelRowsAvx512<6, false>,
     panelRowsAvx512<7, false>, panelRowsAvx512<8, false>},
    {panelRowsAvx512<1, true>, panelRowsAvx512<2, true>,
     panelRowsAvx512<3, true>, panelRowsAvx512<4, true>,
     panelRowsAvx512<5, true>, panelRowsAvx512<6, true>,
     panelRowsAvx512<7, true>, panelRowsAvx512<8, true>}};

/// `width` rows of k side by side: panel[i][j] = rows[j][i].
void packPanel(const float *rows, int64_t width, int64_t k, float *panel) {
  for (int64_t j = 0; j < width; ++j) {
    for (int64_t i = 0; i < k; ++i) {
      panel[i * width + j] = rows[j * k + i];
    }
  }
}

bool hasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

} // namespace

void mfrt::packPanels(const float *weight, int64_t n, int64_t k, float *panels,
                      int64_t panelBegin, int64_t panelEnd) {
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    packPanel(weight + p * kPanelWidth * k,
              std::min(kPanelWidth, n - p * kPanelWidth), k,
              panels + p * kPanelWidth * k);
  }
}

void mfrt::packPanelsInPlace(float *weight, int64_t n, int64_t k,
                             int64_t panelBegin, int64_t panelEnd) {
  std::vector<float> rows(kPanelWidth * k);
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    int64_t width = std::min(kPanelWidth, n - p * kPanelWidth);
    float *panel = weight + p * kPanelWidth * k;
    std::copy(panel, panel + width * k, rows.begin());
    packPanel(rows.data(), width, k, panel);
  }
}

void mfrt::unpackPanels(const float *panels, int64_t n, int64_t k,
                        float *weight) {
  for (int64_t row = 0; row < n; ++row) {
    int64_t p = row / kPanelWidth;
    int64_t width = std::min(kPanelWidth, n - p * kPanelWidth);
    const float *panel = panels + p * kPanelWidth * k;
    for (int64_t i = 0; i < k; ++i) {
      weight[row * k + i] = panel[i * width + row % kPanelWidth];
    }
  }
}

extern "C" void mfrt::mfrtGemmPanelsF32(int64_t a, int64_t b, int64_t c,
                                        int64_t ldc, int64_t m0, int64_t n0,
                                        int64_t m, int64_t n, int64_t k,
                                        int64_t bigN, int64_t, int64_t,
                                        int64_t) {
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
      int64_t width = std::min(kPanelWidth, bigN - p * kPanelWidth);
      const float *panel = panels + p * kPanelWidth * k + k0 * width;
      // Column 0 of the panel in the tile (left of it for the first panel
      // of a tile that starts mid-panel: those columns are masked off).
      float *out = tile + (p * kPanelWidth - n0);
      uint32_t columns = static_cast<uint32_t>(
          ((uint64_t(1) << last) - 1) & ~((uint64_t(1) << first) - 1));
      for (int64_t i = 0; i < m; i += kRowBlock) {
        int rows = static_cast<int>(std::min<int64_t>(kRowBlock, m - i));
        if (vector) {
          kPanelRows[width < kPanelWidth][rows - 1](
              lhs + i * k + k0, k, panel, width, depth, out + i * ldc, ldc,
              static_cast<__mmask16>(columns),
              static_cast<__mmask16>(columns >> 16), k0 > 0);
        } else {
          panelBlockPortable(rows, lhs + i * k + k0, k, panel, width, depth,
                             out + i * ldc, ldc, first, last, k0 > 0);
        }
      }
    }
  }
}
