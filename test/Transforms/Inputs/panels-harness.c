/* Calls the kernels generated for products by weights read as panels
   (panel p at element 32p * K: the weight's rows 32p .. 32p + w - 1 side by
   side, [K][w], w = 32 but for a last panel of the N % 32 rows left):
   decode's, whose vector code streams the panels, and prefill's,
   which calls the panel gemm service (here a plain C one over the panels),
   each in an uneven split of its tile range, and prints their largest
   deviation from the same math in doubles on the unpacked weight. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"

enum { K = 72, N = 1960, ROWS = 40, WIDTH = 32 };

#include "dispatch.h"

extern void *mfrt_gemm_panels_f32_ptr, *mfrt_gemm_panels_f16_ptr;

enum { K16 = 40, N16 = 37, R16 = 300, KH = 24, NH = 50 };

/* Where element i of row `row` of an [n, k] weight sits in its panels
   (PanelGemm.h's layout). */
static int64_t panelIndex(int64_t row, int64_t i, int64_t n, int64_t k) {
  int64_t first = row / WIDTH * WIDTH;
  int64_t width = n - first < WIDTH ? n - first : WIDTH;
  return first * k + i * width + row % WIDTH;
}

/* The panels of an [n, k] weight of `size`-byte elements. */
static void pack(const void *weight, int n, int k, int size, void *panels) {
  for (int row = 0; row < n; ++row)
    for (int i = 0; i < k; ++i)
      memcpy((char *)panels + panelIndex(row, i, n, k) * size,
             (const char *)weight + ((size_t)row * k + i) * size, size);
}

/* The panel gemm services over rows m0.. of A and columns n0.. of B^T
   (C f32), as the runtime's: f32, then f16 operands. */
static void gemmPanels(const mfrt_gemm_args_v1 *g) {
  const float *lhs = (const float *)g->a, *panels = (const float *)g->b;
  for (int64_t i = 0; i < g->m; ++i)
    for (int64_t j = 0; j < g->n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < g->k; ++p)
        sum += lhs[(g->m0 + i) * g->k + p] *
               panels[panelIndex(g->n0 + j, p, g->n_total, g->k)];
      g->c[i * g->ldc + j] = sum;
    }
}

static void gemmPanelsF16(const mfrt_gemm_args_v1 *g) {
  const _Float16 *lhs = (const _Float16 *)g->a, *panels = (const _Float16 *)g->b;
  for (int64_t i = 0; i < g->m; ++i)
    for (int64_t j = 0; j < g->n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < g->k; ++p)
        sum += (float)lhs[(g->m0 + i) * g->k + p] *
               (float)panels[panelIndex(g->n0 + j, p, g->n_total, g->k)];
      g->c[i * g->ldc + j] = sum;
    }
}

/* Largest |out - (x w^T + residual)| over `rows` rows. */
static double worstError(int rows, const float *x, const float *w,
                         const float *residual, const float *out) {
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < N; ++c) {
      double sum = residual[r * N + c];
      for (int p = 0; p < K; ++p) sum += (double)x[r * K + p] * w[c * K + p];
      double error = fabs(out[r * N + c] - sum);
      if (!(error <= worst)) worst = error;
    }
  }
  return worst;
}

int main(void) {
  float *x = malloc(sizeof(float) * ROWS * K), *w = malloc(sizeof(float) * N * K);
  float *panels = malloc(sizeof(float) * N * K);
  float *residual = malloc(sizeof(float) * ROWS * N), *out = malloc(sizeof(float) * ROWS * N);
  for (int i = 0; i < ROWS * K; ++i) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < N * K; ++i) w[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
  for (int i = 0; i < ROWS * N; ++i) residual[i] = (float)(i % 7) - 3.0f;
  pack(w, N, K, 4, panels);
  int failed = 0;

  /* One row: 8 tiles of 256 columns (two groups of four panels), the last
     168 = a group of four and two single panels, the last 8 wide. */
  for (int i = 0; i < ROWS * N; ++i) out[i] = NAN;
  dispatch("mfk_0", 0, 3, BUFS(BUF(x, K), BUF(panels, N * K), BUF(residual, N), BUF(out, N)));
  dispatch("mfk_0", 3, 8, BUFS(BUF(x, K), BUF(panels, N * K), BUF(residual, N), BUF(out, N)));
  double worst = worstError(1, x, w, residual, out);
  printf("one row: max abs error %.3g: %s\n", worst, worst < 1e-4 ? "OK" : "MISMATCH");
  failed |= !(worst < 1e-4);

  /* 40 rows through the service. */
  mfrt_gemm_panels_f32_ptr = (void *)&gemmPanels;
  for (int i = 0; i < ROWS * N; ++i) out[i] = NAN;
  for (int range = 0; range < 2; ++range) {
    dispatch("mfk_1", range ? 5 : 0, range ? 8 : 5,
             BUFS(BUF(x, ROWS * K), BUF(panels, N * K), BUF(residual, ROWS * N),
                  BUF(out, ROWS * N)));
  }
  worst = worstError(ROWS, x, w, residual, out);
  printf("40 rows: max abs error %.3g: %s\n", worst, worst < 1e-4 ? "OK" : "MISMATCH");
  failed |= !(worst < 1e-4);

  /* bf16, one row: panels widened as they stream; the f32 sum rounded to
     bf16 (within 2^-8 relative). */
  uint16_t xs[K16], ws[N16 * K16], ps[N16 * K16], outs[N16];
  for (int i = 0; i < K16; ++i) xs[i] = toBf16(x[i]);
  for (int i = 0; i < N16 * K16; ++i) ws[i] = toBf16(w[i]);
  pack(ws, N16, K16, 2, ps);
  dispatch("mfk_3", 0, 1, BUFS(BUF(xs, K16), BUF(ps, N16 * K16), BUF(outs, N16)));
  worst = 0;
  for (int c = 0; c < N16; ++c) {
    double sum = 0;
    for (int p = 0; p < K16; ++p) sum += (double)fromBf16(xs[p]) * fromBf16(ws[c * K16 + p]);
    double error = fabs(fromBf16(outs[c]) - sum) / (fabs(sum) + 1e-3);
    if (!(error <= worst)) worst = error;
  }
  printf("bf16 one row: max relative error %.3g: %s\n", worst, worst < 0.0079 ? "OK" : "MISMATCH");
  failed |= !(worst < 0.0079);

  /* f16, 300 rows through the f16 service in 5 tiles (within 2^-11
     relative). */
  _Float16 *xh = malloc(sizeof(_Float16) * R16 * KH), wh[NH * KH], ph[NH * KH];
  _Float16 *outh = malloc(sizeof(_Float16) * R16 * NH);
  for (int i = 0; i < R16 * KH; ++i) xh[i] = (_Float16)x[i % (ROWS * K)];
  for (int i = 0; i < NH * KH; ++i) wh[i] = (_Float16)w[i];
  pack(wh, NH, KH, 2, ph);
  mfrt_gemm_panels_f16_ptr = (void *)&gemmPanelsF16;
  dispatch("mfk_4", 0, 2, BUFS(BUF(xh, R16 * KH), BUF(ph, NH * KH), BUF(outh, R16 * NH)));
  dispatch("mfk_4", 2, 5, BUFS(BUF(xh, R16 * KH), BUF(ph, NH * KH), BUF(outh, R16 * NH)));
  worst = 0;
  for (int r = 0; r < R16; ++r) {
    for (int c = 0; c < NH; ++c) {
      double sum = 0;
      for (int p = 0; p < KH; ++p) sum += (double)xh[r * KH + p] * (double)wh[c * KH + p];
      double error = fabs((double)outh[r * NH + c] - sum) / (fabs(sum) + 1e-2);
      if (!(error <= worst)) worst = error;
    }
  }
  printf("f16 300 rows: max relative error %.3g: %s\n", worst, worst < 0.001 ? "OK" : "MISMATCH");
  failed |= !(worst < 0.001);
  return failed;
}
