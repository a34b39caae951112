//===- Int8DotGemm.cpp - int8 rows times int8 weights ---------------------===//

#include "runtime/kernels/Int8DotGemm.h"

#include "runtime/hal/CpuFeatures.h"
#include "runtime/kernels/PanelGemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace mfrt;

// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused
// pass-through operand, which -W(maybe-)uninitialized reports.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

/// Activation rows per microkernel call: 8 rows x 2 vectors are 16
/// accumulators.
constexpr int kRowBlock = 8;
/// How far ahead (steps of 128 bytes along a panel) the microkernel asks
/// for the weights: one row (decode) streams them from memory, and the
/// hardware prefetchers alone keep one core at ~20 GB/s here; 48 steps
/// ahead, 47-52 GB/s (12: 40-42, 96: 37-42; 2048 x 768 int8 weights, 24
/// of them, one core).
constexpr int64_t kPrefetchSteps = 48;

/// The lanes (columns) of a panel `width` wide that its two vectors hold.
__mmask16 lowLanes(int64_t width) {
  return static_cast<__mmask16>((1u << std::min<int64_t>(width, 16)) - 1);
}
__mmask16 highLanes(int64_t width) {
  return static_cast<__mmask16>((1u << std::max<int64_t>(width - 16, 0)) - 1);
}

/// Panel p's block of the dot layout: byte (kb, j, t) of a panel `width`
/// wide, for weight row 32p + j and column 4kb + t.
inline int64_t dotOffset(int64_t kb, int64_t j, int64_t t, int64_t width) {
  return (kb * width + j) * 4 + t;
}

void packOne(const int8_t *rows, int64_t width, int64_t k, int8_t *panel) {
  for (int64_t j = 0; j < width; ++j) {
    for (int64_t c = 0; c < k; ++c) {
      // Plus 128: the unsigned bytes vpdpbusd takes.
      panel[dotOffset(c / 4, j, c % 4, width)] =
          static_cast<int8_t>(static_cast<uint8_t>(rows[j * k + c]) ^ 0x80u);
    }
  }
}

/// The tile's rows of A quantized per token, as mf.dynamic_quantize does
/// (the same function), or with the static scales and zero points of
/// `a_scales` as mf.quantize does (scales 1): their values, scales (f32)
/// and, `withSums`, each row's sum of values (the dot panels' +128 adds
/// 128 times it).
struct QuantizedRows {
  std::vector<int8_t> values;
  std::vector<float> scales;
  std::vector<int32_t> sums;
};

template <DType Scale>
const QuantizedRows &quantizeTileRows(const mfrt_gemm_args_v1 &args,
                                      bool withSums) {
  thread_local QuantizedRows rows;
  thread_local std::vector<float> row;
  const int64_t m = args.m, k = args.k;
  rows.values.resize(static_cast<size_t>(m * k));
  rows.scales.resize(static_cast<size_t>(m));
  rows.sums.assign(withSums ? static_cast<size_t>(m) : 0, 0);
  row.resize(static_cast<size_t>(k));
  const char *a = static_cast<const char *>(args.a);
  thread_local std::vector<float> staticScales, zeroPoints;
  if (args.a_scales) {
    staticScales.resize(static_cast<size_t>(k));
    zeroPoints.resize(static_cast<size_t>(k));
    toFloats(Scale, args.a_scales, staticScales.data(), k);
    for (int64_t c = 0; c < k; ++c) {
      zeroPoints[c] = args.a_zero_points[c];
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    const char *from = a + (args.m0 + i) * k * dtypeSize(Scale);
    const float *floats = reinterpret_cast<const float *>(from);
    if (Scale != DType::F32) {
      toFloats(Scale, from, row.data(), k);
      floats = row.data();
    }
    int8_t *values = rows.values.data() + i * k;
    if (args.a_scales) {
      quantizeRowStatic(floats, k, staticScales.data(), zeroPoints.data(),
                        values);
      rows.scales[i] = 1.0f;
    } else {
      rows.scales[i] = quantizeRowPerToken(floats, k, values, Scale);
    }
    for (int64_t c = 0; withSums && c < k; ++c) {
      rows.sums[i] += values[c];
    }
  }
  return rows;
}

/// `rows` rows of A (from `a`, K = `k`) times one dot panel `width` wide:
/// out[r * ldc + j] = float(dot) * rowScales[r] * columnScales[j] for the
/// tile's columns j in `store` (bit j), out at the panel's column 0.
template <int Rows>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
dotRowsVnni(const int8_t *a, int64_t k, const int8_t *panel, int64_t width,
            const int32_t *rowSums, const float *rowScales,
            const float *columnScales, float *out, int64_t ldc,
            uint32_t store) {
  // Few rows (decode's one) sum K in independent chains, step kb in chain
  // kb % kChains, as if more rows: each vpdpbusd waits for the last into
  // its accumulator, and one row's two would run at its latency. (The
  // panel is still read in order, as the prefetchers like.)
  constexpr int kChains = Rows == 1 ? 4 : Rows == 2 ? 2 : 1;
  __m512i acc[kChains * Rows][2];
#pragma GCC unroll 16
  for (int r = 0; r < kChains * Rows; ++r) {
    acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  }
  const __mmask16 low = lowLanes(width), high = highLanes(width);
  const int64_t stride = width * 4, steps = k / 4,
                rounds = steps / kChains * kChains;
  // (Written out twice, the chains' steps and the rest: GCC keeps the
  // sums in registers only when every index is a constant.)
  for (int64_t kb = 0; kb < rounds; kb += kChains) {
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      const int64_t at = kb + c;
      _mm_prefetch(reinterpret_cast<const char *>(
                       panel + (at + kPrefetchSteps) * stride),
                   _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char *>(
                       panel + (at + kPrefetchSteps) * stride + 64),
                   _MM_HINT_T0);
      __m512i left = _mm512_maskz_loadu_epi32(low, panel + at * stride);
      __m512i right = _mm512_maskz_loadu_epi32(high, panel + at * stride + 64);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        int32_t four;
        std::memcpy(&four, a + r * k + 4 * at, 4);
        __m512i x = _mm512_set1_epi32(four);
        acc[c * Rows + r][0] =
            _mm512_dpbusd_epi32(acc[c * Rows + r][0], left, x);
        acc[c * Rows + r][1] =
            _mm512_dpbusd_epi32(acc[c * Rows + r][1], right, x);
      }
    }
  }
  for (int64_t at = rounds; at < steps; ++at) {
    __m512i left = _mm512_maskz_loadu_epi32(low, panel + at * stride);
    __m512i right = _mm512_maskz_loadu_epi32(high, panel + at * stride + 64);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      int32_t four;
      std::memcpy(&four, a + r * k + 4 * at, 4);
      __m512i x = _mm512_set1_epi32(four);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], left, x);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], right, x);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int c = 1; c < kChains; ++c) {
      acc[r][0] = _mm512_add_epi32(acc[r][0], acc[c * Rows + r][0]);
      acc[r][1] = _mm512_add_epi32(acc[r][1], acc[c * Rows + r][1]);
    }
  }
  __m512 scaleLeft = _mm512_maskz_loadu_ps(low, columnScales);
  __m512 scaleRight = _mm512_maskz_loadu_ps(high, columnScales + 16);
  const auto storeLeft = static_cast<__mmask16>(store);
  const auto storeRight = static_cast<__mmask16>(store >> 16);
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    __m512i offset = _mm512_set1_epi32(128 * rowSums[r]);
    __m512 rowScale = _mm512_set1_ps(rowScales[r]);
    __m512 left = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][0], offset));
    __m512 right = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][1], offset));
    _mm512_mask_storeu_ps(
        out + r * ldc, storeLeft,
        _mm512_mul_ps(_mm512_mul_ps(left, rowScale), scaleLeft));
    _mm512_mask_storeu_ps(
        out + r * ldc + 16, storeRight,
        _mm512_mul_ps(_mm512_mul_ps(right, rowScale), scaleRight));
  }
}

using DotRows = void (*)(const int8_t *, int64_t, const int8_t *, int64_t,
                         const int32_t *, const float *, const float *, float *,
                         int64_t, uint32_t);
constexpr DotRows kDotRowsVnni[kRowBlock] = {
    dotRowsVnni<1>, dotRowsVnni<2>, dotRowsVnni<3>, dotRowsVnni<4>,
    dotRowsVnni<5>, dotRowsVnni<6>, dotRowsVnni<7>, dotRowsVnni<8>};

/// AVX2 has no byte dot product that cannot saturate (vpmaddubsw adds two
/// u8 x s8 products in 16 bits), so the panel's bytes are widened to 16
/// bits and multiplied with vpmaddwd, exact in 32 bits: each column's
/// four bytes of a step against the row's four (a 64-bit pattern), two
/// sums per column that the end adds. `Rows` rows (1 or 2) times 16
/// columns at a time, 8 accumulators a row; the int32 sums then scaled as
/// the other microkernels do.
template <int Rows>
__attribute__((target("avx2"))) void
dotRowsAvx2(const int8_t *a, int64_t k, const int8_t *panel, int64_t width,
            const int32_t *rowSums, const float *rowScales,
            const float *columnScales, float *out, int64_t ldc,
            uint32_t store) {
  const int64_t stride = width * 4, steps = k / 4;
  for (int64_t half = 0; half < 2 && half * 16 < width; ++half) {
    // Groups of 4 columns (16 bytes a step), masked past the panel's width.
    __m128i masks[4];
    bool full[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      int64_t column = half * 16 + 4 * g;
      int64_t lanes = std::clamp<int64_t>(width - column, 0, 4);
      full[g] = lanes == 4;
      masks[g] = _mm_set_epi32(lanes > 3 ? -1 : 0, lanes > 2 ? -1 : 0,
                               lanes > 1 ? -1 : 0, lanes > 0 ? -1 : 0);
    }
    __m256i acc[Rows][4];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        acc[r][g] = _mm256_setzero_si256();
      }
    }
    const int8_t *columns = panel + half * 16 * 4;
    for (int64_t kb = 0; kb < steps; ++kb) {
      __m256i pattern[Rows];
#pragma GCC unroll 2
      for (int r = 0; r < Rows; ++r) {
        int32_t four;
        std::memcpy(&four, a + r * k + 4 * kb, 4);
        pattern[r] = _mm256_broadcastq_epi64(
            _mm_cvtepi8_epi16(_mm_cvtsi32_si128(four)));
      }
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const auto *at =
            reinterpret_cast<const __m128i *>(columns + kb * stride + 16 * g);
        __m128i bytes = full[g]
                            ? _mm_loadu_si128(at)
                            : _mm_maskload_epi32(
                                  reinterpret_cast<const int *>(at), masks[g]);
        __m256i words = _mm256_cvtepu8_epi16(bytes);
#pragma GCC unroll 2
        for (int r = 0; r < Rows; ++r) {
          acc[r][g] = _mm256_add_epi32(acc[r][g],
                                       _mm256_madd_epi16(words, pattern[r]));
        }
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < Rows; ++r) {
      alignas(32) int32_t sums[4][8];
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        _mm256_store_si256(reinterpret_cast<__m256i *>(sums[g]), acc[r][g]);
      }
      for (int64_t j = 0; j < 16; ++j) {
        int64_t column = half * 16 + j;
        if (!(store >> column & 1)) {
          continue;
        }
        int32_t dot = sums[j / 4][2 * (j % 4)] + sums[j / 4][2 * (j % 4) + 1] -
                      128 * rowSums[r];
        out[r * ldc + column] =
            static_cast<float>(dot) * rowScales[r] * columnScales[column];
      }
    }
  }
}

/// The same integers and floats, one at a time.
void dotRowsPortable(int rows, const int8_t *a, int64_t k, const int8_t *panel,
                     int64_t width, const float *rowScales,
                     const float *columnScales, float *out, int64_t ldc,
                     uint32_t store) {
  for (int r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; ++j) {
      if (!(store >> j & 1)) {
        continue;
      }
      int32_t dot = 0;
      for (int64_t c = 0; c < k; ++c) {
        auto weight = static_cast<int8_t>(
            static_cast<uint8_t>(panel[dotOffset(c / 4, j, c % 4, width)]) ^
            0x80u);
        dot += int32_t{weight} * a[r * k + c];
      }
      out[r * ldc + j] =
          static_cast<float>(dot) * rowScales[r] * columnScales[j];
    }
  }
}

template <DType Scale>
void gemmInt8Dot(DotIsa isa, const mfrt_gemm_args_v1 &args) {
  const int64_t n0 = args.n0, m = args.m, n = args.n, k = args.k,
                bigN = args.n_total;
  const QuantizedRows &facts = quantizeTileRows<Scale>(args, /*withSums=*/true);
  const int8_t *a = facts.values.data();
  const int8_t *panels = static_cast<const int8_t *>(args.b);
  float columnScales[kPanelWidth];
  for (int64_t p = n0 / kPanelWidth; p * kPanelWidth < n0 + n; ++p) {
    // The panel's columns in the tile: [first, last) of its 32.
    int64_t first = std::max<int64_t>(n0 - p * kPanelWidth, 0);
    int64_t last = std::min<int64_t>(n0 + n - p * kPanelWidth, kPanelWidth);
    int64_t width = std::min(kPanelWidth, bigN - p * kPanelWidth);
    const int8_t *panel = panels + p * kPanelWidth * k;
    // (f32 with rows quantized with static scales.)
    const DType scaleType = args.a_scales ? DType::F32 : Scale;
    toFloats(scaleType,
             static_cast<const char *>(args.scales) +
                 p * kPanelWidth * dtypeSize(scaleType),
             columnScales, width);
    // Column 0 of the panel in the tile (left of it for a tile that
    // starts mid-panel: those columns are not stored).
    float *out = args.c + (p * kPanelWidth - n0);
    uint32_t store = static_cast<uint32_t>(((uint64_t(1) << last) - 1) &
                                           ~((uint64_t(1) << first) - 1));
    for (int64_t i = 0; i < m; i += kRowBlock) {
      int rows = static_cast<int>(std::min<int64_t>(kRowBlock, m - i));
      if (isa == DotIsa::Avx512Vnni) {
        kDotRowsVnni[rows - 1](a + i * k, k, panel, width,
                               facts.sums.data() + i, facts.scales.data() + i,
                               columnScales, out + i * args.ldc, args.ldc,
                               store);
      } else if (isa == DotIsa::Avx2) {
        for (int r = 0; r < rows; r += 2) {
          (rows - r >= 2 ? dotRowsAvx2<2> : dotRowsAvx2<1>)(
              a + (i + r) * k, k, panel, width, facts.sums.data() + i + r,
              facts.scales.data() + i + r, columnScales,
              out + (i + r) * args.ldc, args.ldc, store);
        }
      } else {
        dotRowsPortable(rows, a + i * k, k, panel, width,
                        facts.scales.data() + i, columnScales,
                        out + i * args.ldc, args.ldc, store);
      }
    }
  }
}

} // namespace

void mfrt::packDotPanels(const int8_t *weight, int64_t n, int64_t k,
                         int8_t *panels, int64_t panelBegin, int64_t panelEnd) {
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    packOne(weight + p * kPanelWidth * k,
            std::min(kPanelWidth, n - p * kPanelWidth), k,
            panels + p * kPanelWidth * k);
  }
}

void mfrt::packDotPanelsInPlace(int8_t *weight, int64_t n, int64_t k,
                                int64_t panelBegin, int64_t panelEnd) {
  std::vector<int8_t> rows(static_cast<size_t>(kPanelWidth * k));
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    int64_t width = std::min(kPanelWidth, n - p * kPanelWidth);
    int8_t *panel = weight + p * kPanelWidth * k;
    std::memcpy(rows.data(), panel, static_cast<size_t>(width * k));
    packOne(rows.data(), width, k, panel);
  }
}

void mfrt::unpackDotPanels(const int8_t *panels, int64_t n, int64_t k,
                           int8_t *weight) {
  for (int64_t p = 0; p < panelCount(n); ++p) {
    int64_t width = std::min(kPanelWidth, n - p * kPanelWidth);
    const int8_t *panel = panels + p * kPanelWidth * k;
    int8_t *rows = weight + p * kPanelWidth * k;
    for (int64_t j = 0; j < width; ++j) {
      for (int64_t c = 0; c < k; ++c) {
        rows[j * k + c] = static_cast<int8_t>(
            static_cast<uint8_t>(panel[dotOffset(c / 4, j, c % 4, width)]) ^
            0x80u);
      }
    }
  }
}

bool mfrt::runsDotIsa(DotIsa isa) {
  switch (isa) {
  case DotIsa::Avx512Vnni:
    return hasAvx512() && __builtin_cpu_supports("avx512vnni");
  case DotIsa::Avx2:
    return __builtin_cpu_supports("avx2");
  case DotIsa::Portable:
    return true;
  }
  return false;
}

DotIsa mfrt::dotIsa() {
  static const DotIsa isa = runsDotIsa(DotIsa::Avx512Vnni) ? DotIsa::Avx512Vnni
                            : runsDotIsa(DotIsa::Avx2)     ? DotIsa::Avx2
                                                           : DotIsa::Portable;
  return isa;
}

template <DType Scale>
void mfrt::gemmInt8DotWith(DotIsa isa, const mfrt_gemm_args_v1 &args) {
  gemmInt8Dot<Scale>(isa, args);
}

template <DType Scale>
void mfrt::gemmInt8DotService(const mfrt_gemm_args_v1 *args) {
  gemmInt8Dot<Scale>(dotIsa(), *args);
}

namespace {

/// float(the dot product) * rowScale * columnScale, from the sums of
/// (a + 128) * w and of w.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"),
               always_inline)) inline float
scaledDot(__m512i dot, __m512i sum, float rowScale, float columnScale) {
  int32_t exact =
      _mm512_reduce_add_epi32(dot) - 128 * _mm512_reduce_add_epi32(sum);
  return static_cast<float>(exact) * rowScale * columnScale;
}

/// One quantized row `a` (K = `k`) times `n` rows of a weight as stored
/// (`w`, [n, k]): out[j] = float(a . w[j]) * rowScale * columnScales[j].
/// The row's values are the unsigned side (`shifted`: a + 128), the
/// weight's the signed one, four weight rows at a time, 64 values a step;
/// each weight row's sum (vpdpbusd by ones) takes the offset back out.
/// (A tied table's lm_head: 32000 x 768 of llama-100m, 31 decode steps,
/// 64.0 ms without the prefetch, 14.2 with it; W8A16's row code 29.8.)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
rowTimesStoredVnni(const uint8_t *shifted, int64_t k, const int8_t *w,
                   int64_t n, float rowScale, const float *columnScales,
                   float *out) {
  const __m512i ones = _mm512_set1_epi8(1);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m512i dot0 = _mm512_setzero_si512(), dot1 = dot0, dot2 = dot0,
            dot3 = dot0, sum0 = dot0, sum1 = dot0, sum2 = dot0, sum3 = dot0;
    const int8_t *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
    for (int64_t c = 0; c < k; c += 64) {
      const __mmask64 lanes =
          k - c >= 64 ? ~__mmask64(0) : (__mmask64(1) << (k - c)) - 1;
      // The rows two blocks on (as the dot panels' prefetch, ~6 KB ahead
      // for K = 768): past the weight's end it is only a hint.
      for (const int8_t *ahead : {w0, w1, w2, w3}) {
        _mm_prefetch(reinterpret_cast<const char *>(ahead + 8 * k + c),
                     _MM_HINT_T0);
      }
      __m512i x = _mm512_maskz_loadu_epi8(lanes, shifted + c);
      __m512i v0 = _mm512_maskz_loadu_epi8(lanes, w0 + c);
      __m512i v1 = _mm512_maskz_loadu_epi8(lanes, w1 + c);
      __m512i v2 = _mm512_maskz_loadu_epi8(lanes, w2 + c);
      __m512i v3 = _mm512_maskz_loadu_epi8(lanes, w3 + c);
      dot0 = _mm512_dpbusd_epi32(dot0, x, v0);
      dot1 = _mm512_dpbusd_epi32(dot1, x, v1);
      dot2 = _mm512_dpbusd_epi32(dot2, x, v2);
      dot3 = _mm512_dpbusd_epi32(dot3, x, v3);
      sum0 = _mm512_dpbusd_epi32(sum0, ones, v0);
      sum1 = _mm512_dpbusd_epi32(sum1, ones, v1);
      sum2 = _mm512_dpbusd_epi32(sum2, ones, v2);
      sum3 = _mm512_dpbusd_epi32(sum3, ones, v3);
    }
    out[j] = scaledDot(dot0, sum0, rowScale, columnScales[j]);
    out[j + 1] = scaledDot(dot1, sum1, rowScale, columnScales[j + 1]);
    out[j + 2] = scaledDot(dot2, sum2, rowScale, columnScales[j + 2]);
    out[j + 3] = scaledDot(dot3, sum3, rowScale, columnScales[j + 3]);
  }
  for (; j < n; ++j) {
    __m512i dot = _mm512_setzero_si512(), sum = dot;
    for (int64_t c = 0; c < k; c += 64) {
      const __mmask64 lanes =
          k - c >= 64 ? ~__mmask64(0) : (__mmask64(1) << (k - c)) - 1;
      __m512i x = _mm512_maskz_loadu_epi8(lanes, shifted + c);
      __m512i v = _mm512_maskz_loadu_epi8(lanes, w + j * k + c);
      dot = _mm512_dpbusd_epi32(dot, x, v);
      sum = _mm512_dpbusd_epi32(sum, ones, v);
    }
    out[j] = scaledDot(dot, sum, rowScale, columnScales[j]);
  }
}

} // namespace

template <DType Scale>
void mfrt::gemmInt8RowsService(const mfrt_gemm_args_v1 *args) {
  gemmInt8RowsWith<Scale>(dotIsa(), *args);
}

namespace {

/// The sum of the eight lanes.
__attribute__((target("avx2"))) int32_t totalOf(__m256i sums) {
  __m128i half = _mm_add_epi32(_mm256_castsi256_si128(sums),
                               _mm256_extracti128_si256(sums, 1));
  half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4e));
  half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0xb1));
  return _mm_cvtsi128_si32(half);
}

/// One row of int8 values times the int8 rows of `w` (n of them, K = k,
/// as stored) on AVX2: 16 values of both widened to 16 bits a step,
/// vpmaddwd (exact in int32), four weight rows at a time against the same
/// activations.
__attribute__((target("avx2"))) void
rowTimesStoredAvx2(const int8_t *a, int64_t k, const int8_t *w, int64_t n,
                   float rowScale, const float *columnScales, float *out) {
  auto dotOf = [&](const int8_t *row, int64_t j) {
    // (The last few values, and rows past a multiple of four, one by one.)
    int32_t dot = 0;
    for (int64_t c = j; c < k; ++c) {
      dot += int32_t{a[c]} * row[c];
    }
    return dot;
  };
  const int64_t whole = k / 16 * 16;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const int8_t *rows[4] = {w + j * k, w + (j + 1) * k, w + (j + 2) * k,
                             w + (j + 3) * k};
    __m256i sums[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                       _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t c = 0; c < whole; c += 16) {
      __m256i x = _mm256_cvtepi8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i *>(a + c)));
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        __m256i v = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[r] + c)));
        sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(x, v));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      int32_t dot = totalOf(sums[r]) + dotOf(rows[r], whole);
      out[j + r] = static_cast<float>(dot) * rowScale * columnScales[j + r];
    }
  }
  for (; j < n; ++j) {
    out[j] =
        static_cast<float>(dotOf(w + j * k, 0)) * rowScale * columnScales[j];
  }
}

} // namespace

template <DType Scale>
void mfrt::gemmInt8RowsWith(DotIsa isa, const mfrt_gemm_args_v1 &given) {
  const mfrt_gemm_args_v1 *args = &given;
  const int64_t m = args->m, n = args->n, k = args->k;
  const QuantizedRows &facts =
      quantizeTileRows<Scale>(*args, /*withSums=*/false);
  const int8_t *a = facts.values.data();
  const int8_t *b = static_cast<const int8_t *>(args->b) + args->n0 * k;
  thread_local std::vector<float> columnScales;
  thread_local std::vector<uint8_t> shifted;
  columnScales.resize(static_cast<size_t>(n));
  const DType scaleType = args->a_scales ? DType::F32 : Scale;
  toFloats(scaleType,
           static_cast<const char *>(args->scales) +
               args->n0 * dtypeSize(scaleType),
           columnScales.data(), n);
  const bool vnni = isa == DotIsa::Avx512Vnni;
  for (int64_t i = 0; i < m; ++i) {
    if (isa == DotIsa::Avx2) {
      rowTimesStoredAvx2(a + i * k, k, b, n, facts.scales[i],
                         columnScales.data(), args->c + i * args->ldc);
      continue;
    }
    if (vnni) {
      shifted.resize(static_cast<size_t>(k));
      for (int64_t c = 0; c < k; ++c) {
        shifted[c] = static_cast<uint8_t>(a[i * k + c]) ^ 0x80u;
      }
      rowTimesStoredVnni(shifted.data(), k, b, n, facts.scales[i],
                         columnScales.data(), args->c + i * args->ldc);
      continue;
    }
    for (int64_t j = 0; j < n; ++j) {
      int32_t dot = 0;
      for (int64_t c = 0; c < k; ++c) {
        dot += int32_t{a[i * k + c]} * b[j * k + c];
      }
      args->c[i * args->ldc + j] =
          static_cast<float>(dot) * facts.scales[i] * columnScales[j];
    }
  }
}

namespace {

/// The values of a row with a positive, finite scale: x / scale rounded
/// half to even (the default rounding mode, as nearbyint), clamped.
void quantizeRowPortable(const float *row, int64_t k, float scale,
                         int8_t *out) {
  for (int64_t j = 0; j < k; ++j) {
    out[j] = static_cast<int8_t>(
        std::clamp(std::nearbyint(row[j] / scale), -128.0f, 127.0f));
  }
}

/// The same, 16 at a time: the same division, rounding and clamp.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
quantizeRowAvx512(const float *row, int64_t k, float scale, int8_t *out) {
  const __m512 divisor = _mm512_set1_ps(scale);
  const __m512 low = _mm512_set1_ps(-128.0f), high = _mm512_set1_ps(127.0f);
  for (int64_t j = 0; j < k; j += 16) {
    auto lanes =
        static_cast<__mmask16>((1u << std::min<int64_t>(16, k - j)) - 1);
    __m512 q = _mm512_roundscale_ps(
        _mm512_div_ps(_mm512_maskz_loadu_ps(lanes, row + j), divisor),
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm512_min_ps(_mm512_max_ps(q, low), high);
    _mm512_mask_cvtsepi32_storeu_epi8(out + j, lanes, _mm512_cvtps_epi32(q));
  }
}

/// Eight int32 lanes (within [-128, 127]) stored as eight int8.
__attribute__((target("avx2"))) inline void storeInt8x8(__m256i values,
                                                        int8_t *out) {
  __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(values),
                                  _mm256_extracti128_si256(values, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i *>(out),
                   _mm_packs_epi16(words, words));
}

/// The same, 8 at a time on AVX2 (the rest as the portable loop does).
__attribute__((target("avx2"))) void
quantizeRowAvx2(const float *row, int64_t k, float scale, int8_t *out) {
  const __m256 divisor = _mm256_set1_ps(scale);
  const __m256 low = _mm256_set1_ps(-128.0f), high = _mm256_set1_ps(127.0f);
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    __m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(row + j), divisor),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    storeInt8x8(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(q, low), high)),
                out + j);
  }
  quantizeRowPortable(row + j, k - j, scale, out + j);
}

/// A row's largest magnitude, or NaN when it holds a NaN or an infinity.
float largestMagnitudePortable(const float *row, int64_t k) {
  float amax = 0;
  for (int64_t j = 0; j < k; ++j) {
    if (!std::isfinite(row[j])) {
      return std::nanf("");
    }
    amax = std::max(amax, std::fabs(row[j]));
  }
  return amax;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) float
largestMagnitudeAvx512(const float *row, int64_t k) {
  __m512 amax = _mm512_setzero_ps();
  const __m512 largest = _mm512_set1_ps(std::numeric_limits<float>::max());
  bool finite = true;
  for (int64_t j = 0; j < k; j += 16) {
    auto lanes =
        static_cast<__mmask16>((1u << std::min<int64_t>(16, k - j)) - 1);
    __m512 magnitude = _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes, row + j));
    // Ordered: false for a NaN, and an infinity is above the largest.
    finite = finite && _mm512_mask_cmp_ps_mask(lanes, magnitude, largest,
                                               _CMP_LE_OQ) == lanes;
    amax = _mm512_max_ps(amax, magnitude);
  }
  return finite ? _mm512_reduce_max_ps(amax) : std::nanf("");
}

__attribute__((target("avx2"))) float largestMagnitudeAvx2(const float *row,
                                                           int64_t k) {
  __m256 amax = _mm256_setzero_ps();
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  const __m256 magnitudeBits =
      _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  bool finite = true;
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    __m256 magnitude = _mm256_and_ps(_mm256_loadu_ps(row + j), magnitudeBits);
    // Ordered: false for a NaN, and an infinity is above the largest.
    finite = finite && _mm256_movemask_ps(_mm256_cmp_ps(magnitude, largest,
                                                        _CMP_LE_OQ)) == 0xff;
    amax = _mm256_max_ps(amax, magnitude);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  float rest = largestMagnitudePortable(row + j, k - j);
  if (!finite || std::isnan(rest)) {
    return std::nanf("");
  }
  return std::max(rest, *std::max_element(lanes, lanes + 8));
}

} // namespace

float mfrt::quantizeRowPerToken(const float *row, int64_t k, int8_t *out,
                                DType scaleType) {
  const RowIsa isa = rowIsa();
  float scale = (isa == RowIsa::Avx512 ? largestMagnitudeAvx512
                 : isa == RowIsa::Avx2 ? largestMagnitudeAvx2
                                       : largestMagnitudePortable)(row, k) /
                127.0f;
  uint16_t stored = 0;
  if (scaleType != DType::F32) { // the scale the values multiply
    fromFloats(scaleType, &scale, &stored, 1);
    toFloats(scaleType, &stored, &scale, 1);
  }
  if (!(scale > 0) || !std::isfinite(scale)) {
    std::fill(out, out + k, int8_t{0});
    return scale;
  }
  (isa == RowIsa::Avx512 ? quantizeRowAvx512
   : isa == RowIsa::Avx2 ? quantizeRowAvx2
                         : quantizeRowPortable)(row, k, scale, out);
  return scale;
}

namespace {

void quantizeRowStaticPortable(const float *row, int64_t k,
                               const float *scales, const float *zeroPoints,
                               int8_t *out) {
  for (int64_t j = 0; j < k; ++j) {
    float value = std::nearbyint(row[j] / scales[j] + zeroPoints[j]);
    out[j] = static_cast<int8_t>(
        std::isnan(value) ? zeroPoints[j] : std::clamp(value, -128.0f, 127.0f));
  }
}

/// The same 16 channels at a time (the same divide, add and round, so the
/// same integers).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
quantizeRowStaticAvx512(const float *row, int64_t k, const float *scales,
                        const float *zeroPoints, int8_t *out) {
  const __m512 low = _mm512_set1_ps(-128.0f), high = _mm512_set1_ps(127.0f);
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t j = 0; j < k; j += 16) {
    auto lanes =
        static_cast<__mmask16>((1u << std::min<int64_t>(16, k - j)) - 1);
    __m512 zero = _mm512_maskz_loadu_ps(lanes, zeroPoints + j);
    __m512 q = _mm512_roundscale_ps(
        _mm512_add_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(lanes, row + j),
                                    _mm512_mask_loadu_ps(one, lanes,
                                                         scales + j)),
                      zero),
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __mmask16 nan = _mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q);
    q = _mm512_mask_mov_ps(_mm512_min_ps(_mm512_max_ps(q, low), high), nan,
                           zero);
    _mm512_mask_cvtsepi32_storeu_epi8(out + j, lanes, _mm512_cvtps_epi32(q));
  }
}

/// The same 8 channels at a time on AVX2 (the rest as the portable loop).
__attribute__((target("avx2"))) void
quantizeRowStaticAvx2(const float *row, int64_t k, const float *scales,
                      const float *zeroPoints, int8_t *out) {
  const __m256 low = _mm256_set1_ps(-128.0f), high = _mm256_set1_ps(127.0f);
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    __m256 zero = _mm256_loadu_ps(zeroPoints + j);
    __m256 q = _mm256_round_ps(
        _mm256_add_ps(_mm256_div_ps(_mm256_loadu_ps(row + j),
                                    _mm256_loadu_ps(scales + j)),
                      zero),
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 nan = _mm256_cmp_ps(q, q, _CMP_UNORD_Q);
    q = _mm256_blendv_ps(_mm256_min_ps(_mm256_max_ps(q, low), high), zero, nan);
    storeInt8x8(_mm256_cvtps_epi32(q), out + j);
  }
  quantizeRowStaticPortable(row + j, k - j, scales + j, zeroPoints + j,
                            out + j);
}

} // namespace

void mfrt::quantizeRowStatic(const float *row, int64_t k, const float *scales,
                             const float *zeroPoints, int8_t *out) {
  const RowIsa isa = rowIsa();
  (isa == RowIsa::Avx512 ? quantizeRowStaticAvx512
   : isa == RowIsa::Avx2
       ? quantizeRowStaticAvx2
       : quantizeRowStaticPortable)(row, k, scales, zeroPoints, out);
}

#define MFRT_INSTANTIATE_INT8_DOT(Scale)                                       \
  template void mfrt::gemmInt8DotWith<Scale>(DotIsa,                           \
                                             const mfrt_gemm_args_v1 &);       \
  template void mfrt::gemmInt8DotService<Scale>(const mfrt_gemm_args_v1 *);    \
  template void mfrt::gemmInt8RowsService<Scale>(const mfrt_gemm_args_v1 *);   \
  template void mfrt::gemmInt8RowsWith<Scale>(DotIsa,                          \
                                              const mfrt_gemm_args_v1 &);
MFRT_INSTANTIATE_INT8_DOT(DType::F32)
MFRT_INSTANTIATE_INT8_DOT(DType::F16)
MFRT_INSTANTIATE_INT8_DOT(DType::BF16)
