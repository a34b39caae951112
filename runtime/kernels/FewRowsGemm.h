//===- FewRowsGemm.h - a few rows times a weight as stored ------*- C++ -*-===//
//
// C = A W^T for a few rows of A (a decode step of one sequence or of a
// serving batch) and a weight W stored [N, K], row-major, as the tied
// lm_head reads the embedding table: each weight row is read once, 2 at a
// time against all the rows of A (16 accumulators in registers), with the
// rows 16 on prefetched in software into the outer caches (one core's
// hardware prefetchers alone stream a fraction of what it can read:
// Int8DotGemm.cpp). One core, llama-100m's 32000 x 768 table: 8 rows 5.3
// ms against OpenBLAS's sgemm 14.8, one row 3.3 against its sgemv 12.5
// (the T0 hint: 7.5 and 6.5; spilled accumulators: 9.6).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_FEWROWSGEMM_H
#define MFC_RUNTIME_KERNELS_FEWROWSGEMM_H

#include <cstdint>

namespace mfrt {

/// The most rows of A fewRowsTimesWeight takes.
inline constexpr int64_t kFewRowsMax = 8;

/// Whether this CPU runs fewRowsTimesWeight (AVX-512).
bool runsFewRowsGemm();

/// C[m, n] = sum_k A[m, k] W[n, k] for m < rows (<= kFewRowsMax) and n <
/// columns; A's rows `lda` apart, W's rows `k` apart, C's `ldc`.
void fewRowsTimesWeight(const float *a, int64_t lda, int64_t rows,
                        const float *w, int64_t columns, int64_t k, float *c,
                        int64_t ldc);

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELS_FEWROWSGEMM_H
