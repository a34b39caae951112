/* Calls the kernel generated for gelu(x @ w^T + bias) + residual tile by
   tile, in an uneven split of its tile range, with a plain C gemm as the
   runtime's gemm service, and prints its largest deviation from the same
   math in doubles. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROWS = 300, K = 24, N = 520 };

#include "dispatch.h"

extern void *mfrt_gemm_f32_ptr;

static void gemm(const mfrt_gemm_args_v1 *g) {
  const float *lhs = (const float *)g->a, *rhs = (const float *)g->b;
  for (int64_t i = 0; i < g->m; ++i) {
    for (int64_t j = 0; j < g->n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < g->k; ++p) {
        float r = g->trans_b ? rhs[(g->n0 + j) * g->k + p]
                             : rhs[p * g->n_total + g->n0 + j];
        float l = g->trans_a ? lhs[p * g->m_total + g->m0 + i]
                             : lhs[(g->m0 + i) * g->k + p];
        sum += l * r;
      }
      g->c[i * g->ldc + j] = sum;
    }
  }
}

int main(void) {
  float *x = malloc(sizeof(float) * ROWS * K);
  float *w = malloc(sizeof(float) * N * K);
  float *bias = malloc(sizeof(float) * N);
  float *residual = malloc(sizeof(float) * ROWS * N);
  float *out = malloc(sizeof(float) * ROWS * N);
  for (int i = 0; i < ROWS * K; ++i) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < N * K; ++i) w[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
  for (int i = 0; i < N; ++i) bias[i] = (float)(i % 11) / 10.0f - 0.5f;
  for (int i = 0; i < ROWS * N; ++i) { residual[i] = (float)(i % 7) - 3.0f; out[i] = NAN; }
  mfrt_gemm_f32_ptr = (void *)&gemm;
  /* 2 x 3 tiles, run as two uneven ranges as two threads would. */
  for (int range = 0; range < 2; ++range) {
    dispatch("mfk_0", range ? 4 : 0, range ? 6 : 4,
             BUFS(BUF(x, ROWS * K), BUF(w, N * K), BUF(bias, N),
                  BUF(residual, ROWS * N), BUF(out, ROWS * N)));
  }
  double worst = 0;
  for (int r = 0; r < ROWS; ++r) {
    for (int c = 0; c < N; ++c) {
      double sum = bias[c];
      for (int p = 0; p < K; ++p) sum += (double)x[r * K + p] * w[c * K + p];
      double g = 0.5 * sum * (1.0 + tanh(0.7978845608028654 * (sum + 0.044715 * sum * sum * sum)));
      double expected = g + residual[r * N + c];
      double error = fabs(out[r * N + c] - expected);
      if (!(error <= worst)) worst = error;
    }
  }
  printf("max abs error %.3g: %s\n", worst, worst < 1e-4 ? "OK" : "MISMATCH");
  return worst < 1e-4 ? 0 : 1;
}
