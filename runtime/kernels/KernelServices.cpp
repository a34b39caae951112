//===- KernelServices.cpp - what native kernels call back into ------------===//

#include "runtime/kernels/KernelServices.h"

#include "runtime/hal/BlasThread.h"
#include "runtime/hal/KernelAbi.h"

#include "runtime/base/Tensor.h"
#include "runtime/kernels/FewRowsGemm.h"
#include "runtime/kernels/FlashAttention.h"
#include "runtime/kernels/Int8DotGemm.h"
#include "runtime/kernels/PanelGemm.h"

#include <cblas.h>

#include <string>
#include <utility>
#include <vector>

extern "C" void mfrt::mfrtGemmF32(const mfrt_gemm_args_v1 *args) {
  prepareBlasThread();
  const mfrt_gemm_args_v1 &g = *args;
  const auto *a = static_cast<const float *>(g.a);
  const auto *b = static_cast<const float *>(g.b);
  if (g.trans_a) {
    // op(A) = A^T with A [K x M]: rows m0.. of op(A) are columns m0.. of A.
    cblas_sgemm(CblasRowMajor, CblasTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                a + g.m0, g.m_total, b + (g.trans_b ? g.n0 * g.k : g.n0),
                g.trans_b ? g.k : g.n_total, 0.0f, g.c, g.ldc);
    return;
  }
  const float *lhs = a + g.m0 * g.k;
  const float *rhs = b + (g.trans_b ? g.n0 * g.k : g.n0);
  int64_t ldb = g.trans_b ? g.k : g.n_total;
  if (g.trans_b && g.m > 0 && g.m <= kFewRowsMax && runsFewRowsGemm()) {
    // A batch's decode through a weight as stored (the tied lm_head).
    fewRowsTimesWeight(lhs, g.k, g.m, rhs, g.n, g.k, g.c, g.ldc);
    return;
  }
  if (g.m == 1) {
    // One row (decode): a matrix-vector product over the weight's panel.
    if (g.trans_b) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, g.n, g.k, 1.0f, rhs, ldb, lhs, 1,
                  0.0f, g.c, 1);
    } else {
      cblas_sgemv(CblasRowMajor, CblasTrans, g.k, g.n, 1.0f, rhs, ldb, lhs, 1,
                  0.0f, g.c, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, lhs,
              g.k, rhs, ldb, 0.0f, g.c, g.ldc);
}

// The kernels store each field of a service's argument struct as 8 bytes,
// in order (CPUKernels.h's callService): the structs have no padding.
static_assert(sizeof(mfrt_gemm_args_v1) == 17 * 8);
static_assert(sizeof(mfrt_attention_args_v1) == 28 * 8);
static_assert(sizeof(mfrt_attention_grad_args_v1) == 18 * 8);

namespace {

/// Widens what one tile of a 16-bit gemm reads — rows m0.. of op(A) and
/// columns n0.. of op(B) — into f32 buffers of this thread (a contiguous
/// run at a time where the layout has one), then runs the f32 gemm on them.
template <mfrt::DType dtype> void gemmWidened(const mfrt_gemm_args_v1 *args) {
  const mfrt_gemm_args_v1 &g = *args;
  thread_local std::vector<float> lhs, rhs;
  const auto *A = static_cast<const uint16_t *>(g.a);
  lhs.resize(static_cast<size_t>(g.m * g.k));
  for (int64_t i = 0; i < g.m; ++i) {
    if (g.trans_a) { // A stored [K x M]: row i of op(A) is column m0 + i
      for (int64_t j = 0; j < g.k; ++j) {
        mfrt::toFloats(dtype, A + j * g.m_total + g.m0 + i, &lhs[i * g.k + j],
                       1);
      }
    } else {
      mfrt::toFloats(dtype, A + (g.m0 + i) * g.k, &lhs[i * g.k], g.k);
    }
  }
  rhs.resize(static_cast<size_t>(g.n * g.k));
  mfrt::panelToFloats(dtype, g.b, g.trans_b != 0, g.n0, g.n, g.k, g.n_total,
                      rhs.data());
  mfrt_gemm_args_v1 widened{lhs.data(), rhs.data(), g.c, g.ldc,   0,
                            0,          g.m,        g.n, g.k,     g.n,
                            g.trans_b,  0,          g.m, nullptr, 0,
                            nullptr,    nullptr};
  mfrt::mfrtGemmF32(&widened);
}

/// A tile of f32 A times an i8 weight B's values (a quantized weight, its
/// scales applied by the kernel): the panel B's tile reads widened to f32,
/// then the f32 gemm.
void gemmInt8Weight(const mfrt_gemm_args_v1 *args) {
  const mfrt_gemm_args_v1 &g = *args;
  thread_local std::vector<float> rhs;
  rhs.resize(static_cast<size_t>(g.n * g.k));
  mfrt::panelToFloats(mfrt::DType::I8, g.b, g.trans_b != 0, g.n0, g.n, g.k,
                      g.n_total, rhs.data());
  mfrt_gemm_args_v1 widened{g.a,       rhs.data(), g.c,       g.ldc,   g.m0,
                            0,         g.m,        g.n,       g.k,     g.n,
                            g.trans_b, g.trans_a,  g.m_total, nullptr, 0,
                            nullptr,   nullptr};
  mfrt::mfrtGemmF32(&widened);
}

/// A tile of f32 A times an int4 weight B stored [N, K / 2] (not packed),
/// its scales [K / group, N] applied per group: B's tile rows widened to
/// f32 with their scales, then the f32 gemm.
void gemmInt4Weight(const mfrt_gemm_args_v1 *args) {
  const mfrt_gemm_args_v1 &g = *args;
  thread_local std::vector<float> rhs;
  rhs.resize(static_cast<size_t>(g.n * g.k));
  const auto *bytes = static_cast<const int8_t *>(g.b);
  const auto *scales = static_cast<const float *>(g.scales);
  for (int64_t j = 0; j < g.n; ++j) {
    float *row = rhs.data() + j * g.k;
    mfrt::quantizedRowToFloats(bytes + (g.n0 + j) * (g.k / 2), g.k, 4, row);
    for (int64_t k = 0; k < g.k; ++k) {
      row[k] *= scales[(k / g.group) * g.n_total + g.n0 + j];
    }
  }
  mfrt_gemm_args_v1 widened{g.a, rhs.data(), g.c,       g.ldc,   g.m0,
                            0,   g.m,        g.n,       g.k,     g.n,
                            1,   g.trans_a,  g.m_total, nullptr, 0,
                            nullptr, nullptr};
  mfrt::mfrtGemmF32(&widened);
}

/// Why this thread's last failing service failed (takeServiceError).
thread_local std::string serviceError;

/// The buffers' type the attention services' flags name (16 f16, 32 bf16).
mfrt::DType storageOf(int64_t flags) {
  using mfrt::DType;
  return (flags & 16) ? DType::F16 : (flags & 32) ? DType::BF16 : DType::F32;
}

} // namespace

std::string mfrt::takeServiceError() { return std::exchange(serviceError, {}); }

extern "C" int32_t mfrt::mfrtAttention(const mfrt_attention_args_v1 *args) {
  prepareBlasThread();
  const mfrt_attention_args_v1 &g = *args;
  FusedAttention attention{g.query,
                           g.new_keys,
                           g.new_values,
                           g.cache_key_in,
                           g.cache_value_in,
                           g.cache_key,
                           g.cache_value,
                           g.positions,
                           (g.flags & 2) != 0,
                           (g.flags & 4) != 0,
                           (g.flags & 1) != 0,
                           (g.flags & 8) != 0,
                           (g.flags & 64) ? g.past_pointer : nullptr,
                           g.past_pointer ? *g.past_pointer : g.past_value,
                           g.out,
                           g.batch,
                           g.seq,
                           g.heads,
                           g.kv_heads,
                           g.dim,
                           g.keys,
                           g.new_rows,
                           static_cast<float>(g.scale),
                           static_cast<float>(g.theta),
                           storageOf(g.flags),
                           {(g.flags & 128) ? g.block_table : nullptr,
                            g.block_size > 0 ? g.keys / g.block_size : 0,
                            g.block_size, g.pool_blocks},
                           (g.flags & 256) ? g.key_scales : nullptr,
                           (g.flags & 256) ? g.value_scales : nullptr};
  std::string why = runFusedAttention(attention, g.unit_begin, g.unit_end);
  if (!why.empty()) {
    serviceError = std::move(why);
    return MFRT_KERNEL_SERVICE_FAILED;
  }
  return MFRT_KERNEL_OK;
}

extern "C" int32_t
mfrt::mfrtAttentionGrad(const mfrt_attention_grad_args_v1 *args) {
  prepareBlasThread();
  const mfrt_attention_grad_args_v1 &g = *args;
  int64_t past = g.past_length ? *g.past_length : 0;
  if (past < 0 || past + g.seq > g.key_rows) {
    serviceError = "attention_grad: past_length " + std::to_string(past) +
                   " and " + std::to_string(g.seq) + " query rows do not fit " +
                   std::to_string(g.key_rows) + " keys";
    return MFRT_KERNEL_SERVICE_FAILED;
  }
  runAttentionGradient({g.query, g.keys, g.values, g.out_grad, g.query_grad,
                        g.key_grad, g.value_grad, g.batch, g.seq, g.heads,
                        g.kv_heads, g.dim, g.key_rows, (g.flags & 1) != 0,
                        static_cast<float>(g.scale), storageOf(g.flags), past},
                       g.unit_begin, g.unit_end);
  return MFRT_KERNEL_OK;
}

namespace {

/// A service as the table holds it, its type checked against the one
/// runtime/hal/KernelAbi.h publishes for it.
template <typename Published> void *service(Published function) {
  return reinterpret_cast<void *>(function);
}

} // namespace

const std::vector<mfrt::KernelService> &mfrt::kernelServices() {
  // The kernels call through these with the C calling convention.
  static const std::vector<KernelService> services = {
      {"mfrt_gemm_f32", service<mfrt_gemm_v1>(&mfrtGemmF32)},
      {"mfrt_gemm_panels_f32",
       service<mfrt_gemm_v1>(&gemmPanelsService<DType::F32>)},
      {"mfrt_gemm_panels_f16",
       service<mfrt_gemm_v1>(&gemmPanelsService<DType::F16>)},
      {"mfrt_gemm_panels_bf16",
       service<mfrt_gemm_v1>(&gemmPanelsService<DType::BF16>)},
      {"mfrt_attention", service<mfrt_attention_v1>(&mfrtAttention)},
      {"mfrt_attention_grad",
       service<mfrt_attention_grad_v1>(&mfrtAttentionGrad)},
      {"mfrt_gemm_f16", service<mfrt_gemm_v1>(&gemmWidened<DType::F16>)},
      {"mfrt_gemm_bf16", service<mfrt_gemm_v1>(&gemmWidened<DType::BF16>)},
      {"mfrt_gemm_i8", service<mfrt_gemm_v1>(&gemmInt8Weight)},
      {"mfrt_gemm_i4", service<mfrt_gemm_v1>(&gemmInt4Weight)},
      {"mfrt_gemm_panels_i8",
       service<mfrt_gemm_v1>(&gemmPanelsService<DType::I8>)},
      {"mfrt_gemm_panels_i8_f16",
       service<mfrt_gemm_v1>(&gemmInt8PanelsService<DType::F16>)},
      {"mfrt_gemm_panels_i8_bf16",
       service<mfrt_gemm_v1>(&gemmInt8PanelsService<DType::BF16>)},
      {"mfrt_gemm_panels_i4",
       service<mfrt_gemm_v1>(&gemmInt4PanelsService<DType::F32>)},
      {"mfrt_gemm_panels_i4_f16",
       service<mfrt_gemm_v1>(&gemmInt4PanelsService<DType::F16>)},
      {"mfrt_gemm_panels_i4_bf16",
       service<mfrt_gemm_v1>(&gemmInt4PanelsService<DType::BF16>)},
      {"mfrt_gemm_i8i8_dot",
       service<mfrt_gemm_v1>(&gemmInt8DotService<DType::F32>)},
      {"mfrt_gemm_i8i8_dot_f16",
       service<mfrt_gemm_v1>(&gemmInt8DotService<DType::F16>)},
      {"mfrt_gemm_i8i8_dot_bf16",
       service<mfrt_gemm_v1>(&gemmInt8DotService<DType::BF16>)},
      {"mfrt_gemm_i8i8",
       service<mfrt_gemm_v1>(&gemmInt8RowsService<DType::F32>)},
      {"mfrt_gemm_i8i8_f16",
       service<mfrt_gemm_v1>(&gemmInt8RowsService<DType::F16>)},
      {"mfrt_gemm_i8i8_bf16",
       service<mfrt_gemm_v1>(&gemmInt8RowsService<DType::BF16>)},
  };
  return services;
}
