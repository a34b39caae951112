//===- KernelServices.cpp - what native kernels call back into ------------===//

#include "runtime/KernelServices.h"

#include "runtime/Tensor.h"

#include <cblas.h>

#include <vector>

extern "C" void mfrt::mfrtGemmF32(int64_t a, int64_t b, int64_t c, int64_t ldc,
                                  int64_t m0, int64_t n0, int64_t m, int64_t n,
                                  int64_t k, int64_t bigN, int64_t transB,
                                  int64_t transA, int64_t bigM) {
  if (transA) {
    // op(A) = A^T with A [K x M]: rows m0.. of op(A) are columns m0.. of A.
    cblas_sgemm(CblasRowMajor, CblasTrans, transB ? CblasTrans : CblasNoTrans,
                m, n, k, 1.0f, reinterpret_cast<const float *>(a) + m0, bigM,
                reinterpret_cast<const float *>(b) + (transB ? n0 * k : n0),
                transB ? k : bigN, 0.0f, reinterpret_cast<float *>(c), ldc);
    return;
  }
  const float *lhs = reinterpret_cast<const float *>(a) + m0 * k;
  const float *rhs = reinterpret_cast<const float *>(b) + (transB ? n0 * k : n0);
  float *out = reinterpret_cast<float *>(c);
  int64_t ldb = transB ? k : bigN;
  if (m == 1) {
    // One row (decode): a matrix-vector product over the weight's panel.
    if (transB) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, rhs, ldb, lhs, 1,
                  0.0f, out, 1);
    } else {
      cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, rhs, ldb, lhs, 1,
                  0.0f, out, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, 1.0f, lhs, k, rhs, ldb, 0.0f, out, ldc);
}

namespace {

/// Widens what one tile of a 16-bit gemm reads — rows m0.. of op(A) and
/// columns n0.. of op(B) — into f32 buffers of this thread, then runs the
/// f32 gemm on them.
template <float (*widen)(uint16_t)>
void gemmWidened(int64_t a, int64_t b, int64_t c, int64_t ldc, int64_t m0,
                 int64_t n0, int64_t m, int64_t n, int64_t k, int64_t bigN,
                 int64_t transB, int64_t transA, int64_t bigM) {
  thread_local std::vector<float> lhs, rhs;
  const auto *A = reinterpret_cast<const uint16_t *>(a);
  const auto *B = reinterpret_cast<const uint16_t *>(b);
  lhs.resize(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      lhs[i * k + j] = widen(transA ? A[j * bigM + m0 + i] : A[(m0 + i) * k + j]);
    }
  }
  rhs.resize(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < (transB ? n : k); ++i) {
    for (int64_t j = 0; j < (transB ? k : n); ++j) {
      // transB: rows n0.. of B [N x K]; else columns n0.. of B [K x N].
      rhs[i * (transB ? k : n) + j] =
          widen(transB ? B[(n0 + i) * k + j] : B[i * bigN + n0 + j]);
    }
  }
  mfrt::mfrtGemmF32(reinterpret_cast<int64_t>(lhs.data()),
                    reinterpret_cast<int64_t>(rhs.data()), c, ldc, 0, 0, m, n,
                    k, n, transB, 0, m);
}

} // namespace

extern "C" void mfrt::mfrtGemmF16(int64_t a, int64_t b, int64_t c, int64_t ldc,
                                  int64_t m0, int64_t n0, int64_t m, int64_t n,
                                  int64_t k, int64_t bigN, int64_t transB,
                                  int64_t transA, int64_t bigM) {
  gemmWidened<mfrt::halfToFloat>(a, b, c, ldc, m0, n0, m, n, k, bigN, transB,
                                 transA, bigM);
}

extern "C" void mfrt::mfrtGemmBF16(int64_t a, int64_t b, int64_t c, int64_t ldc,
                                   int64_t m0, int64_t n0, int64_t m, int64_t n,
                                   int64_t k, int64_t bigN, int64_t transB,
                                   int64_t transA, int64_t bigM) {
  gemmWidened<mfrt::bfloat16ToFloat>(a, b, c, ldc, m0, n0, m, n, k, bigN, transB,
                               transA, bigM);
}
