//===- KernelServices.cpp - what native kernels call back into ------------===//

#include "runtime/KernelServices.h"

#include "runtime/BlasThread.h"
#include "runtime/KernelAbi.h"

#include "runtime/FlashAttention.h"
#include "runtime/PanelGemm.h"
#include "runtime/Tensor.h"

#include <cblas.h>

#include <string>
#include <utility>
#include <vector>

extern "C" void mfrt::mfrtGemmF32(int64_t a, int64_t b, int64_t c, int64_t ldc,
                                  int64_t m0, int64_t n0, int64_t m, int64_t n,
                                  int64_t k, int64_t bigN, int64_t transB,
                                  int64_t transA, int64_t bigM) {
  prepareBlasThread();
  if (transA) {
    // op(A) = A^T with A [K x M]: rows m0.. of op(A) are columns m0.. of A.
    cblas_sgemm(CblasRowMajor, CblasTrans, transB ? CblasTrans : CblasNoTrans,
                m, n, k, 1.0f, reinterpret_cast<const float *>(a) + m0, bigM,
                reinterpret_cast<const float *>(b) + (transB ? n0 * k : n0),
                transB ? k : bigN, 0.0f, reinterpret_cast<float *>(c), ldc);
    return;
  }
  const float *lhs = reinterpret_cast<const float *>(a) + m0 * k;
  const float *rhs =
      reinterpret_cast<const float *>(b) + (transB ? n0 * k : n0);
  float *out = reinterpret_cast<float *>(c);
  int64_t ldb = transB ? k : bigN;
  if (m == 1) {
    // One row (decode): a matrix-vector product over the weight's panel.
    if (transB) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, rhs, ldb, lhs, 1,
                  0.0f, out, 1);
    } else {
      cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, rhs, ldb, lhs, 1, 0.0f,
                  out, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, 1.0f, lhs, k, rhs, ldb, 0.0f, out, ldc);
}

namespace {

/// Widens what one tile of a 16-bit gemm reads — rows m0.. of op(A) and
/// columns n0.. of op(B) — into f32 buffers of this thread (a contiguous
/// run at a time where the layout has one), then runs the f32 gemm on them.
template <mfrt::DType dtype>
void gemmWidened(int64_t a, int64_t b, int64_t c, int64_t ldc, int64_t m0,
                 int64_t n0, int64_t m, int64_t n, int64_t k, int64_t bigN,
                 int64_t transB, int64_t transA, int64_t bigM) {
  thread_local std::vector<float> lhs, rhs;
  const auto *A = reinterpret_cast<const uint16_t *>(a);
  lhs.resize(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i) {
    if (transA) { // A stored [K x M]: row i of op(A) is column m0 + i
      for (int64_t j = 0; j < k; ++j) {
        mfrt::toFloats(dtype, A + j * bigM + m0 + i, &lhs[i * k + j], 1);
      }
    } else {
      mfrt::toFloats(dtype, A + (m0 + i) * k, &lhs[i * k], k);
    }
  }
  rhs.resize(static_cast<size_t>(n * k));
  mfrt::panelToFloats(dtype, reinterpret_cast<const void *>(b), transB != 0,
                      n0, n, k, bigN, rhs.data());
  mfrt::mfrtGemmF32(reinterpret_cast<int64_t>(lhs.data()),
                    reinterpret_cast<int64_t>(rhs.data()), c, ldc, 0, 0, m, n,
                    k, n, transB, 0, m);
}

/// Why this thread's last failing service failed (takeServiceError).
thread_local std::string serviceError;

void *buffer(int64_t address) { return reinterpret_cast<void *>(address); }

/// The buffers' type the attention services' flags name (16 f16, 32 bf16).
mfrt::DType storageOf(int64_t flags) {
  using mfrt::DType;
  return (flags & 16) ? DType::F16 : (flags & 32) ? DType::BF16 : DType::F32;
}

} // namespace

std::string mfrt::takeServiceError() { return std::exchange(serviceError, {}); }

extern "C" int32_t
mfrt::mfrtAttention(int64_t unitBegin, int64_t unitEnd, int64_t query,
                    int64_t newKeys, int64_t newValues, int64_t cacheKeyIn,
                    int64_t cacheValueIn, int64_t cacheKey, int64_t cacheValue,
                    int64_t positions, int64_t pastPointer, int64_t pastValue,
                    int64_t out, int64_t batch, int64_t seq, int64_t heads,
                    int64_t kvHeads, int64_t dim, int64_t keys, int64_t newRows,
                    int64_t flags, double scale, double theta) {
  prepareBlasThread();
  FusedAttention args{
      buffer(query),
      buffer(newKeys),
      buffer(newValues),
      buffer(cacheKeyIn),
      buffer(cacheValueIn),
      buffer(cacheKey),
      buffer(cacheValue),
      reinterpret_cast<const int32_t *>(positions),
      (flags & 2) != 0,
      (flags & 4) != 0,
      (flags & 1) != 0,
      (flags & 8) != 0,
      pastPointer ? *reinterpret_cast<const int32_t *>(pastPointer) : pastValue,
      buffer(out),
      batch,
      seq,
      heads,
      kvHeads,
      dim,
      keys,
      newRows,
      static_cast<float>(scale),
      static_cast<float>(theta),
      storageOf(flags)};
  std::string why = runFusedAttention(args, unitBegin, unitEnd);
  if (!why.empty()) {
    serviceError = std::move(why);
    return MFRT_KERNEL_SERVICE_FAILED;
  }
  return MFRT_KERNEL_OK;
}

extern "C" int32_t
mfrt::mfrtAttentionGrad(int64_t unitBegin, int64_t unitEnd, int64_t query,
                        int64_t keys, int64_t values, int64_t outGrad,
                        int64_t queryGrad, int64_t keyGrad, int64_t valueGrad,
                        int64_t batch, int64_t seq, int64_t heads,
                        int64_t kvHeads, int64_t dim, int64_t keyRows,
                        int64_t flags, double scale) {
  prepareBlasThread();
  runAttentionGradient({buffer(query), buffer(keys), buffer(values),
                        buffer(outGrad), buffer(queryGrad), buffer(keyGrad),
                        buffer(valueGrad), batch, seq, heads, kvHeads, dim,
                        keyRows, (flags & 1) != 0, static_cast<float>(scale),
                        storageOf(flags)},
                       unitBegin, unitEnd);
  return MFRT_KERNEL_OK;
}

const std::vector<mfrt::KernelService> &mfrt::kernelServices() {
  // The kernels call through these with the C calling convention; the
  // widening ones are instances of one template, same signature.
  static const std::vector<KernelService> services = {
      {"mfrt_gemm_f32", reinterpret_cast<void *>(&mfrtGemmF32)},
      {"mfrt_gemm_panels_f32",
       reinterpret_cast<void *>(&gemmPanelsService<DType::F32>)},
      {"mfrt_gemm_panels_f16",
       reinterpret_cast<void *>(&gemmPanelsService<DType::F16>)},
      {"mfrt_gemm_panels_bf16",
       reinterpret_cast<void *>(&gemmPanelsService<DType::BF16>)},
      {"mfrt_attention", reinterpret_cast<void *>(&mfrtAttention)},
      {"mfrt_attention_grad", reinterpret_cast<void *>(&mfrtAttentionGrad)},
      {"mfrt_gemm_f16",
       reinterpret_cast<void *>(&gemmWidened<mfrt::DType::F16>)},
      {"mfrt_gemm_bf16",
       reinterpret_cast<void *>(&gemmWidened<mfrt::DType::BF16>)},
  };
  return services;
}
