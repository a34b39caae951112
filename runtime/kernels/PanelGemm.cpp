//===- PanelGemm.cpp - products with weights packed once ------------------===//

#include "runtime/kernels/PanelGemm.h"

#include "runtime/hal/CpuFeatures.h"
#include "runtime/kernels/Int8DotGemm.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
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

/// Whether `isa` runs the AVX-512 microkernels (AVX512-BF16 adds one).
bool usesAvx512(PanelIsa isa) {
  return isa == PanelIsa::Avx512 || isa == PanelIsa::Avx512Bf16;
}

// GCC 12's AVX-512 conversion intrinsics pass an undefined vector as the
// unused pass-through operand, which -Wmaybe-uninitialized reports.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// 16 elements of a panel row as f32, the first of `mask` only when
/// `Masked` (the rest 0): f32 as they are, f16 converted, bf16 as the high
/// halves of f32s, i8 (a quantized weight's values) sign-extended and
/// converted.
template <DType Stored, bool Masked>
__attribute__((target("avx512f,avx512bw,avx512vl"),
               always_inline)) inline __m512
loadPanelRow(const void *at, __mmask16 mask) {
  if constexpr (Stored == DType::F32) {
    return Masked ? _mm512_maskz_loadu_ps(mask, at) : _mm512_loadu_ps(at);
  } else if constexpr (Stored == DType::I8) {
    __m128i bytes = Masked ? _mm_maskz_loadu_epi8(mask, at)
                           : _mm_loadu_si128(static_cast<const __m128i *>(at));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
  } else {
    __m256i half = Masked
                       ? _mm256_maskz_loadu_epi16(mask, at)
                       : _mm256_loadu_si256(static_cast<const __m256i *>(at));
    if constexpr (Stored == DType::F16) {
      return _mm512_cvtph_ps(half);
    } else {
      return _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// rows x 32 (the panel's columns in `low` / `high`) of C += or = the
/// rows of A (f32) times `depth` rows of a panel of `Stored` elements.
/// `out` is column 0 of the panel in C's first row; only the masked
/// columns are read or written.
template <DType Stored, int Rows, bool Narrow>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
panelRowsAvx512(const float *a, int64_t lda, const void *panelBytes,
                int64_t width, int64_t depth, float *out, int64_t ldc,
                __mmask16 low, __mmask16 high, bool accumulate) {
  const int64_t size = dtypeSize(Stored);
  const char *panel = static_cast<const char *>(panelBytes);
  __m512 sum[Rows][2];
  for (int r = 0; r < Rows; ++r) {
    sum[r][0] = accumulate ? _mm512_maskz_loadu_ps(low, out + r * ldc)
                           : _mm512_setzero_ps();
    sum[r][1] = accumulate ? _mm512_maskz_loadu_ps(high, out + r * ldc + 16)
                           : _mm512_setzero_ps();
  }
  // A narrow (last) panel's rows are `width` wide: its columns past that
  // load as zeros.
  __mmask16 leftColumns =
      static_cast<__mmask16>((1u << std::min<int64_t>(width, 16)) - 1);
  __mmask16 rightColumns =
      static_cast<__mmask16>((1u << std::max<int64_t>(width - 16, 0)) - 1);
  const int64_t stride = (Narrow ? width : kPanelWidth) * size;
  for (int64_t k = 0; k < depth; ++k) {
    __m512 left = loadPanelRow<Stored, Narrow>(panel + k * stride, leftColumns);
    __m512 right = loadPanelRow<Stored, Narrow>(panel + k * stride + 16 * size,
                                                rightColumns);
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

/// rows x 32 of C (+)= the rows of bf16 A times `depth` rows of a bf16
/// panel, two steps of K per instruction (vdpbf16ps, AVX512-BF16: each f32
/// lane adds the products of a pair of bf16s): rows k and k + 1 of the
/// panel are interleaved in registers into (k, k + 1) pairs of columns, and
/// each row's (A[k], A[k + 1]) broadcast as one 32-bit pair. The
/// interleave puts columns in the lanes by 128-bit quarters; the sums are
/// put back in column order once, at the end.
// GCC 12's broadcast intrinsics, as its conversions (see loadPanelRow).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <int Rows, bool Narrow>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void
panelRowsBf16Dot(const uint16_t *a, int64_t lda, const uint16_t *panel,
                 int64_t width, int64_t depth, float *out, int64_t ldc,
                 __mmask16 low, __mmask16 high, bool accumulate) {
  __m512 sum[Rows][2];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    sum[r][0] = _mm512_setzero_ps();
    sum[r][1] = _mm512_setzero_ps();
  }
  const int64_t stride = Narrow ? width : kPanelWidth;
  const __mmask32 columns =
      Narrow ? static_cast<__mmask32>((uint64_t(1) << width) - 1)
             : ~__mmask32(0);
  // Steps of two rows of the panel, k and k + 1, each A row's pair
  // broadcast as one 32-bit value; an odd depth's last row pairs with
  // zeros. (Written out twice: with one loop for both, GCC stored every
  // sum to the stack each step.)
  const int64_t pairs = depth / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t k = 2 * p;
    // A narrow panel's rows load under the mask of its columns.
    __m512i even = _mm512_maskz_loadu_epi16(columns, panel + k * stride);
    __m512i odd = _mm512_maskz_loadu_epi16(columns, panel + (k + 1) * stride);
    // Lane 4q + i of `left`: column 8q + i; of `right`: column 8q + 4 + i.
    __m512bh left = (__m512bh)_mm512_unpacklo_epi16(even, odd);
    __m512bh right = (__m512bh)_mm512_unpackhi_epi16(even, odd);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      __m512bh x =
          (__m512bh)_mm512_broadcastd_epi32(_mm_loadu_si32(a + r * lda + k));
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], x, left);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], x, right);
    }
  }
  if (depth % 2 != 0) {
    const int64_t k = depth - 1;
    __m512i even = _mm512_maskz_loadu_epi16(columns, panel + k * stride);
    __m512bh left =
        (__m512bh)_mm512_unpacklo_epi16(even, _mm512_setzero_si512());
    __m512bh right =
        (__m512bh)_mm512_unpackhi_epi16(even, _mm512_setzero_si512());
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      __m512bh x = (__m512bh)_mm512_set1_epi32(a[r * lda + k]);
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], x, left);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], x, right);
    }
  }
  const __m512i first =
      _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13,
                                           14, 15, 28, 29, 30, 31);
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    __m512 columns0 = _mm512_permutex2var_ps(sum[r][0], first, sum[r][1]);
    __m512 columns16 = _mm512_permutex2var_ps(sum[r][0], second, sum[r][1]);
    if (accumulate) {
      columns0 =
          _mm512_add_ps(columns0, _mm512_maskz_loadu_ps(low, out + r * ldc));
      columns16 = _mm512_add_ps(
          columns16, _mm512_maskz_loadu_ps(high, out + r * ldc + 16));
    }
    _mm512_mask_storeu_ps(out + r * ldc, low, columns0);
    _mm512_mask_storeu_ps(out + r * ldc + 16, high, columns16);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// 8 elements of a panel row as f32 (AVX2 with F16C, as every AVX2 CPU
/// has).
template <DType Stored>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256
loadPanelRow8(const char *at) {
  if constexpr (Stored == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float *>(at));
  } else if constexpr (Stored == DType::I8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i *>(at))));
  } else {
    __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i *>(at));
    if constexpr (Stored == DType::F16) {
      return _mm256_cvtph_ps(half);
    } else {
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
    }
  }
}

/// Lanes i of 8 set where bit i of `bits` is.
__attribute__((target("avx2"), always_inline)) inline __m256i
laneMask(uint32_t bits) {
  const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256i set =
      _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), lanes);
  return _mm256_cmpeq_epi32(set, lanes);
}

/// The AVX2 microkernel: like panelRowsAvx512 on a whole panel (rows
/// `stride` bytes apart), by halves of 16 columns so that 6 rows x 2
/// vectors of accumulators, 2 of the panel and the broadcast fit the 16
/// registers; only the columns set in `columns` are read or written.
template <DType Stored, int Rows>
__attribute__((target("avx2,fma,f16c"))) void
panelRowsAvx2(const float *a, int64_t lda, const char *panel, int64_t stride,
              int64_t depth, float *out, int64_t ldc, uint32_t columns,
              bool accumulate) {
  const int64_t size = dtypeSize(Stored);
  for (int half = 0; half < 2; ++half) {
    uint32_t bits = (columns >> (16 * half)) & 0xffff;
    if (bits == 0) {
      continue;
    }
    __m256i low = laneMask(bits & 0xff), high = laneMask(bits >> 8);
    float *at = out + 16 * half;
    const char *column = panel + 16 * half * size;
    __m256 sum[Rows][2];
    for (int r = 0; r < Rows; ++r) {
      sum[r][0] = accumulate ? _mm256_maskload_ps(at + r * ldc, low)
                             : _mm256_setzero_ps();
      sum[r][1] = accumulate ? _mm256_maskload_ps(at + r * ldc + 8, high)
                             : _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < depth; ++k) {
      __m256 left = loadPanelRow8<Stored>(column + k * stride);
      __m256 right = loadPanelRow8<Stored>(column + k * stride + 8 * size);
#pragma GCC unroll 6
      for (int r = 0; r < Rows; ++r) {
        __m256 x = _mm256_broadcast_ss(a + r * lda + k);
        sum[r][0] = _mm256_fmadd_ps(x, left, sum[r][0]);
        sum[r][1] = _mm256_fmadd_ps(x, right, sum[r][1]);
      }
    }
    for (int r = 0; r < Rows; ++r) {
      _mm256_maskstore_ps(at + r * ldc, low, sum[r][0]);
      _mm256_maskstore_ps(at + r * ldc + 8, high, sum[r][1]);
    }
  }
}

/// The same for any x86-64: columns [first, last) of the panel.
void panelRowsPortable(DType stored, int rows, const float *a, int64_t lda,
                       const void *panel, int64_t width, int64_t depth,
                       float *out, int64_t ldc, int64_t first, int64_t last,
                       bool accumulate) {
  const char *bytes = static_cast<const char *>(panel);
  float row[kPanelWidth];
  for (int r = 0; r < rows; ++r) {
    float sum[kPanelWidth] = {};
    for (int64_t k = 0; k < depth; ++k) {
      toFloats(stored, bytes + k * width * dtypeSize(stored), row, width);
      float x = a[r * lda + k];
      for (int64_t j = 0; j < width; ++j) {
        sum[j] += x * row[j];
      }
    }
    for (int64_t j = first; j < last; ++j) {
      out[r * ldc + j] = accumulate ? out[r * ldc + j] + sum[j] : sum[j];
    }
  }
}

using PanelRows = void (*)(const float *, int64_t, const void *, int64_t,
                           int64_t, float *, int64_t, __mmask16, __mmask16,
                           bool);
/// The microkernel by row count, 1 .. kRowBlock, for whole panels and the
/// narrow last one.
template <DType Stored, int... Rows>
constexpr std::array<std::array<PanelRows, kRowBlock>, 2>
panelKernels(std::integer_sequence<int, Rows...>) {
  return {{{panelRowsAvx512<Stored, Rows + 1, false>...},
           {panelRowsAvx512<Stored, Rows + 1, true>...}}};
}
template <DType Stored>
constexpr auto kPanelRows =
    panelKernels<Stored>(std::make_integer_sequence<int, kRowBlock>());

using PanelRowsBf16 = void (*)(const uint16_t *, int64_t, const uint16_t *,
                               int64_t, int64_t, float *, int64_t, __mmask16,
                               __mmask16, bool);
template <int... Rows>
constexpr std::array<std::array<PanelRowsBf16, kRowBlock>, 2>
panelKernelsBf16(std::integer_sequence<int, Rows...>) {
  return {{{panelRowsBf16Dot<Rows + 1, false>...},
           {panelRowsBf16Dot<Rows + 1, true>...}}};
}
constexpr auto kPanelRowsBf16 =
    panelKernelsBf16(std::make_integer_sequence<int, kRowBlock>());

/// Activation rows per AVX2 microkernel call (its 16 registers).
constexpr int kRowBlockAvx2 = 6;
using PanelRowsAvx2 = void (*)(const float *, int64_t, const char *, int64_t,
                               int64_t, float *, int64_t, uint32_t, bool);
template <DType Stored, int... Rows>
constexpr std::array<PanelRowsAvx2, kRowBlockAvx2>
panelKernelsAvx2(std::integer_sequence<int, Rows...>) {
  return {panelRowsAvx2<Stored, Rows + 1>...};
}
template <DType Stored>
constexpr auto kPanelRowsAvx2 =
    panelKernelsAvx2<Stored>(std::make_integer_sequence<int, kRowBlockAvx2>());

/// out[c][r] = in[r][c] for an r x c matrix `in`, by blocks of 64 of its
/// columns (a block's reads and writes stay in L1). A panel is its rows
/// transposed ([width][K] -> [K][width]), and back.
template <typename Element>
void transposeOf(const Element *in, int64_t rows, int64_t cols, Element *out) {
  constexpr int64_t kBlock = 64;
  for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    int64_t c1 = std::min(cols, c0 + kBlock);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = c0; c < c1; ++c) {
        out[c * rows + r] = in[r * cols + c];
      }
    }
  }
}

/// The same for elements of `size` bytes (4, 2 or 1).
void transpose(const char *in, int64_t rows, int64_t cols, int64_t size,
               char *out) {
  if (size == 4) {
    transposeOf(reinterpret_cast<const uint32_t *>(in), rows, cols,
                reinterpret_cast<uint32_t *>(out));
  } else if (size == 1) {
    transposeOf(reinterpret_cast<const uint8_t *>(in), rows, cols,
                reinterpret_cast<uint8_t *>(out));
  } else {
    transposeOf(reinterpret_cast<const uint16_t *>(in), rows, cols,
                reinterpret_cast<uint16_t *>(out));
  }
}

} // namespace

namespace {

/// The tile's rows of A [M x K] (`Activation`) in f32: A itself, or the
/// rows widened once for all the tile's panels.
template <DType Activation>
const float *tileRowsOfA(const mfrt_gemm_args_v1 &args) {
  if constexpr (Activation == DType::F32) {
    return static_cast<const float *>(args.a) + args.m0 * args.k;
  } else {
    thread_local std::vector<float> widened;
    widened.resize(static_cast<size_t>(args.m * args.k));
    toFloats(Activation,
             static_cast<const char *>(args.a) +
                 args.m0 * args.k * dtypeSize(Activation),
             widened.data(), args.m * args.k);
    return widened.data();
  }
}

/// The product with B's panels of `Stored` elements and A of `Activation`
/// (the same type, but for a quantized weight's i8 values: A in the
/// compute dtype, the scales the caller's to apply).
template <DType Stored, DType Activation>
void gemmPanels(PanelIsa isa, const mfrt_gemm_args_v1 &args) {
  const int64_t size = dtypeSize(Stored);
  const int64_t ldc = args.ldc, n0 = args.n0, m = args.m, n = args.n,
                k = args.k, bigN = args.n_total;
  // bf16 times bf16 on AVX512-BF16: A's rows as they are, pairs of K a
  // step; the other types (and this CPU's other kernels) widen to f32.
  constexpr bool bf16Pairs = Stored == DType::BF16 && Activation == DType::BF16;
  const float *lhs = bf16Pairs && isa == PanelIsa::Avx512Bf16
                         ? nullptr
                         : tileRowsOfA<Activation>(args);
  const uint16_t *rawA =
      bf16Pairs ? static_cast<const uint16_t *>(args.a) + args.m0 * k : nullptr;
  const char *panels = static_cast<const char *>(args.b);
  float *tile = args.c;
  const int rowBlock = isa == PanelIsa::Avx2 ? kRowBlockAvx2 : kRowBlock;
  for (int64_t k0 = 0; k0 < k; k0 += kDepthBlock) {
    int64_t depth = std::min(kDepthBlock, k - k0);
    for (int64_t p = n0 / kPanelWidth; p * kPanelWidth < n0 + n; ++p) {
      // The panel's columns in the tile: [first, last) of its 32.
      int64_t first = std::max<int64_t>(n0 - p * kPanelWidth, 0);
      int64_t last = std::min<int64_t>(n0 + n - p * kPanelWidth, kPanelWidth);
      int64_t width = std::min(kPanelWidth, bigN - p * kPanelWidth);
      const char *panel = panels + (p * kPanelWidth * k + k0 * width) * size;
      // Column 0 of the panel in the tile (left of it for the first panel
      // of a tile that starts mid-panel: those columns are masked off).
      float *out = tile + (p * kPanelWidth - n0);
      uint32_t columns = static_cast<uint32_t>(((uint64_t(1) << last) - 1) &
                                               ~((uint64_t(1) << first) - 1));
      // AVX2 has no masked loads of 16-bit elements: a narrow panel's
      // block is read as f32, padded to the whole width with zeros, once
      // for all its rows.
      const char *avx2Panel = panel;
      int64_t avx2Stride = kPanelWidth * size;
      bool padded = isa == PanelIsa::Avx2 && width < kPanelWidth;
      if (padded) {
        thread_local std::vector<float> wide;
        wide.assign(static_cast<size_t>(depth * kPanelWidth), 0.0f);
        for (int64_t row = 0; row < depth; ++row) {
          toFloats(Stored, panel + row * width * size,
                   wide.data() + row * kPanelWidth, width);
        }
        avx2Panel = reinterpret_cast<const char *>(wide.data());
        avx2Stride = kPanelWidth * 4;
      }
      for (int64_t i = 0; i < m; i += rowBlock) {
        int rows = static_cast<int>(std::min<int64_t>(rowBlock, m - i));
        if (bf16Pairs && isa == PanelIsa::Avx512Bf16) {
          kPanelRowsBf16[width < kPanelWidth][rows - 1](
              rawA + i * k + k0, k, reinterpret_cast<const uint16_t *>(panel),
              width, depth, out + i * ldc, ldc, static_cast<__mmask16>(columns),
              static_cast<__mmask16>(columns >> 16), k0 > 0);
        } else if (isa == PanelIsa::Avx2) {
          (padded ? kPanelRowsAvx2<DType::F32>
                  : kPanelRowsAvx2<Stored>)[rows - 1](
              lhs + i * k + k0, k, avx2Panel, avx2Stride, depth, out + i * ldc,
              ldc, columns, k0 > 0);
        } else if (usesAvx512(isa)) {
          kPanelRows<Stored>[width < kPanelWidth][rows - 1](
              lhs + i * k + k0, k, panel, width, depth, out + i * ldc, ldc,
              static_cast<__mmask16>(columns),
              static_cast<__mmask16>(columns >> 16), k0 > 0);
        } else {
          panelRowsPortable(Stored, rows, lhs + i * k + k0, k, panel, width,
                            depth, out + i * ldc, ldc, first, last, k0 > 0);
        }
      }
    }
  }
}

} // namespace

namespace {

// GCC 12's conversion intrinsics again (see loadPanelRow).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// Byte rows [0, pairs) of an int4 panel `width` columns wide (byte j of
/// row kb: column j's values at k = 2kb, low nibble, and 2kb + 1, high)
/// as f32 rows 2kb and 2kb + 1 of `out` [2 pairs][kPanelWidth], each value
/// times its column's scale in `scales` (one group: all the rows share
/// it); columns past `width` are 0.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
int4RowsAvx512(const int8_t *panel, int64_t width, int64_t pairs,
               const float *scales, float *out) {
  __mmask16 left =
      static_cast<__mmask16>((1u << std::min<int64_t>(width, 16)) - 1);
  __mmask16 right =
      static_cast<__mmask16>((1u << std::max<int64_t>(width - 16, 0)) - 1);
  __m512 scaleLeft = _mm512_maskz_loadu_ps(left, scales);
  __m512 scaleRight = _mm512_maskz_loadu_ps(right, scales + 16);
  for (int64_t kb = 0; kb < pairs; ++kb) {
    const int8_t *row = panel + kb * width;
    for (int half = 0; half < 2; ++half) {
      __m512i bytes = _mm512_cvtepi8_epi32(
          _mm_maskz_loadu_epi8(half ? right : left, row + 16 * half));
      // Arithmetic shifts sign-extend each nibble.
      __m512 low = _mm512_cvtepi32_ps(
          _mm512_srai_epi32(_mm512_slli_epi32(bytes, 28), 28));
      __m512 high = _mm512_cvtepi32_ps(_mm512_srai_epi32(bytes, 4));
      __m512 scale = half ? scaleRight : scaleLeft;
      _mm512_storeu_ps(out + 2 * kb * kPanelWidth + 16 * half,
                       _mm512_mul_ps(low, scale));
      _mm512_storeu_ps(out + (2 * kb + 1) * kPanelWidth + 16 * half,
                       _mm512_mul_ps(high, scale));
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void int4RowsPortable(const int8_t *panel, int64_t width, int64_t pairs,
                      const float *scales, float *out) {
  for (int64_t kb = 0; kb < pairs; ++kb) {
    float *even = out + 2 * kb * kPanelWidth, *odd = even + kPanelWidth;
    for (int64_t j = 0; j < kPanelWidth; ++j) {
      int8_t byte = j < width ? panel[kb * width + j] : 0;
      even[j] = static_cast<float>(
                    static_cast<int8_t>(static_cast<uint8_t>(byte) << 4) >> 4) *
                (j < width ? scales[j] : 0.0f);
      odd[j] = static_cast<float>(byte >> 4) * (j < width ? scales[j] : 0.0f);
    }
  }
}

/// The product with an int4 weight's panels: each panel's block of depth
/// (whole groups) is converted to f32 with its scales applied, once per
/// tile, then multiplied by the f32 microkernel like a float weight's.
template <DType Activation>
void gemmInt4Panels(PanelIsa isa, const mfrt_gemm_args_v1 &args) {
  const int64_t ldc = args.ldc, n0 = args.n0, m = args.m, n = args.n,
                k = args.k, bigN = args.n_total, group = args.group;
  const float *lhs = tileRowsOfA<Activation>(args);
  const int8_t *panels = static_cast<const int8_t *>(args.b);
  const char *scaleBytes = static_cast<const char *>(args.scales);
  const int64_t block = std::max(group, kDepthBlock / group * group);
  thread_local std::vector<float> wide, scales;
  wide.resize(static_cast<size_t>(block * kPanelWidth));
  scales.resize(kPanelWidth);
  const int rowBlock = isa == PanelIsa::Avx2 ? kRowBlockAvx2 : kRowBlock;
  for (int64_t k0 = 0; k0 < k; k0 += block) {
    int64_t depth = std::min(block, k - k0);
    for (int64_t p = n0 / kPanelWidth; p * kPanelWidth < n0 + n; ++p) {
      int64_t first = std::max<int64_t>(n0 - p * kPanelWidth, 0);
      int64_t last = std::min<int64_t>(n0 + n - p * kPanelWidth, kPanelWidth);
      int64_t width = std::min(kPanelWidth, bigN - p * kPanelWidth);
      const int8_t *panel = panels + p * kPanelWidth * (k / 2);
      for (int64_t g0 = k0; g0 < k0 + depth; g0 += group) {
        toFloats(Activation,
                 scaleBytes + ((g0 / group) * bigN + p * kPanelWidth) *
                                  dtypeSize(Activation),
                 scales.data(), width);
        float *to = wide.data() + (g0 - k0) * kPanelWidth;
        if (usesAvx512(isa)) {
          int4RowsAvx512(panel + g0 / 2 * width, width, group / 2,
                         scales.data(), to);
        } else {
          int4RowsPortable(panel + g0 / 2 * width, width, group / 2,
                           scales.data(), to);
        }
      }
      float *out = args.c + (p * kPanelWidth - n0);
      uint32_t columns = static_cast<uint32_t>(((uint64_t(1) << last) - 1) &
                                               ~((uint64_t(1) << first) - 1));
      for (int64_t i = 0; i < m; i += rowBlock) {
        int rows = static_cast<int>(std::min<int64_t>(rowBlock, m - i));
        if (isa == PanelIsa::Avx2) {
          kPanelRowsAvx2<DType::F32>[rows - 1](
              lhs + i * k + k0, k, reinterpret_cast<const char *>(wide.data()),
              kPanelWidth * 4, depth, out + i * ldc, ldc, columns, k0 > 0);
        } else if (usesAvx512(isa)) {
          kPanelRows<DType::F32>[0][rows - 1](
              lhs + i * k + k0, k, wide.data(), kPanelWidth, depth,
              out + i * ldc, ldc, static_cast<__mmask16>(columns),
              static_cast<__mmask16>(columns >> 16), k0 > 0);
        } else {
          panelRowsPortable(DType::F32, rows, lhs + i * k + k0, k, wide.data(),
                            kPanelWidth, depth, out + i * ldc, ldc, first, last,
                            k0 > 0);
        }
      }
    }
  }
}

} // namespace

template <DType Activation>
void mfrt::gemmInt4PanelsWith(PanelIsa isa, const mfrt_gemm_args_v1 &args) {
  gemmInt4Panels<Activation>(isa, args);
}

template <DType Activation>
void mfrt::gemmInt4PanelsService(const mfrt_gemm_args_v1 *args) {
  gemmInt4PanelsWith<Activation>(panelIsa(), *args);
}

#define MFRT_INSTANTIATE_INT4_PANEL_GEMM(Activation)                           \
  template void mfrt::gemmInt4PanelsWith<Activation>(                          \
      PanelIsa, const mfrt_gemm_args_v1 &);                                    \
  template void mfrt::gemmInt4PanelsService<Activation>(                       \
      const mfrt_gemm_args_v1 *);
MFRT_INSTANTIATE_INT4_PANEL_GEMM(DType::F32)
MFRT_INSTANTIATE_INT4_PANEL_GEMM(DType::F16)
MFRT_INSTANTIATE_INT4_PANEL_GEMM(DType::BF16)

template <DType Stored>
void mfrt::gemmPanelsWith(PanelIsa isa, const mfrt_gemm_args_v1 &args) {
  gemmPanels<Stored, Stored == DType::I8 ? DType::F32 : Stored>(isa, args);
}

template <DType Activation>
void mfrt::gemmInt8PanelsWith(PanelIsa isa, const mfrt_gemm_args_v1 &args) {
  gemmPanels<DType::I8, Activation>(isa, args);
}

template <DType Activation>
void mfrt::gemmInt8PanelsService(const mfrt_gemm_args_v1 *args) {
  gemmInt8PanelsWith<Activation>(panelIsa(), *args);
}

template void mfrt::gemmInt8PanelsWith<DType::F16>(PanelIsa,
                                                   const mfrt_gemm_args_v1 &);
template void mfrt::gemmInt8PanelsWith<DType::BF16>(PanelIsa,
                                                    const mfrt_gemm_args_v1 &);
template void
mfrt::gemmInt8PanelsService<DType::F16>(const mfrt_gemm_args_v1 *);
template void
mfrt::gemmInt8PanelsService<DType::BF16>(const mfrt_gemm_args_v1 *);

void mfrt::packPanels(DType dtype, const void *weight, int64_t n, int64_t k,
                      void *panels, int64_t panelBegin, int64_t panelEnd) {
  const int64_t size = dtypeSize(dtype);
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    transpose(static_cast<const char *>(weight) + p * kPanelWidth * k * size,
              std::min(kPanelWidth, n - p * kPanelWidth), k, size,
              static_cast<char *>(panels) + p * kPanelWidth * k * size);
  }
}

void mfrt::packPanelsInPlace(DType dtype, void *weight, int64_t n, int64_t k,
                             int64_t panelBegin, int64_t panelEnd) {
  const int64_t size = dtypeSize(dtype);
  std::vector<char> rows(kPanelWidth * k * size);
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    int64_t width = std::min(kPanelWidth, n - p * kPanelWidth);
    char *panel = static_cast<char *>(weight) + p * kPanelWidth * k * size;
    std::memcpy(rows.data(), panel, width * k * size);
    transpose(rows.data(), width, k, size, panel);
  }
}

void mfrt::unpackPanels(DType dtype, const void *panels, int64_t n, int64_t k,
                        void *weight) {
  const int64_t size = dtypeSize(dtype);
  for (int64_t p = 0; p < panelCount(n); ++p) {
    transpose(static_cast<const char *>(panels) + p * kPanelWidth * k * size, k,
              std::min(kPanelWidth, n - p * kPanelWidth), size,
              static_cast<char *>(weight) + p * kPanelWidth * k * size);
  }
}

void mfrt::packWeight(PanelLayout layout, DType dtype, const void *weight,
                      int64_t n, int64_t k, void *panels, int64_t panelBegin,
                      int64_t panelEnd) {
  if (layout == PanelLayout::Int8Dot) {
    packDotPanels(static_cast<const int8_t *>(weight), n, k,
                  static_cast<int8_t *>(panels), panelBegin, panelEnd);
  } else {
    packPanels(dtype, weight, n, k, panels, panelBegin, panelEnd);
  }
}

void mfrt::packWeightInPlace(PanelLayout layout, DType dtype, void *weight,
                             int64_t n, int64_t k, int64_t panelBegin,
                             int64_t panelEnd) {
  if (layout == PanelLayout::Int8Dot) {
    packDotPanelsInPlace(static_cast<int8_t *>(weight), n, k, panelBegin,
                         panelEnd);
  } else {
    packPanelsInPlace(dtype, weight, n, k, panelBegin, panelEnd);
  }
}

void mfrt::unpackWeight(PanelLayout layout, DType dtype, const void *panels,
                        int64_t n, int64_t k, void *weight) {
  if (layout == PanelLayout::Int8Dot) {
    unpackDotPanels(static_cast<const int8_t *>(panels), n, k,
                    static_cast<int8_t *>(weight));
  } else {
    unpackPanels(dtype, panels, n, k, weight);
  }
}

bool mfrt::runsPanelIsa(PanelIsa isa) {
  switch (isa) {
  case PanelIsa::Avx512:
    return hasAvx512();
  case PanelIsa::Avx512Bf16:
    return hasAvx512() && __builtin_cpu_supports("avx512bf16");
  case PanelIsa::Avx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  case PanelIsa::Portable:
    return true;
  }
  return false;
}

PanelIsa mfrt::panelIsa() {
  static const PanelIsa isa =
      runsPanelIsa(PanelIsa::Avx512Bf16) ? PanelIsa::Avx512Bf16
      : runsPanelIsa(PanelIsa::Avx512)   ? PanelIsa::Avx512
      : runsPanelIsa(PanelIsa::Avx2)     ? PanelIsa::Avx2
                                         : PanelIsa::Portable;
  return isa;
}

template <DType Stored>
void mfrt::gemmPanelsService(const mfrt_gemm_args_v1 *args) {
  gemmPanelsWith<Stored>(panelIsa(), *args);
}

#define MFRT_INSTANTIATE_PANEL_GEMM(Stored)                                    \
  template void mfrt::gemmPanelsWith<Stored>(PanelIsa,                         \
                                             const mfrt_gemm_args_v1 &);       \
  template void mfrt::gemmPanelsService<Stored>(const mfrt_gemm_args_v1 *);
MFRT_INSTANTIATE_PANEL_GEMM(DType::F32)
MFRT_INSTANTIATE_PANEL_GEMM(DType::F16)
MFRT_INSTANTIATE_PANEL_GEMM(DType::BF16)
MFRT_INSTANTIATE_PANEL_GEMM(DType::I8)
