//===- KernelServices.cpp - what native kernels call back into ------------===//

#include "runtime/KernelServices.h"

#include <cblas.h>

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
