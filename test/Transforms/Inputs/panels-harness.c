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

enum { K = 72, N = 1960, ROWS = 40, WIDTH = 32, PANELS = (N + WIDTH - 1) / WIDTH };

void mfk_0(long begin, long end, const float *x, const float *panels,
           const float *residual, float *out);
void mfk_1(long begin, long end, const float *x, const float *panels,
           const float *residual, float *out);
extern void *mfrt_gemm_panels_f32_ptr;

static void gemmPanels(int64_t a, int64_t b, int64_t c, int64_t ldc,
                       int64_t m0, int64_t n0, int64_t m, int64_t n, int64_t k,
                       int64_t bigN, int64_t transB, int64_t transA,
                       int64_t bigM) {
  const float *lhs = (const float *)a, *panels = (const float *)b;
  float *out = (float *)c;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t column = n0 + j, first = column / WIDTH * WIDTH;
      int64_t width = bigN - first < WIDTH ? bigN - first : WIDTH;
      const float *panel = panels + first * k;
      float sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += lhs[(m0 + i) * k + p] * panel[p * width + column % WIDTH];
      }
      out[i * ldc + j] = sum;
    }
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
  for (int p = 0; p < PANELS; ++p) {
    int width = N - p * WIDTH < WIDTH ? N - p * WIDTH : WIDTH;
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < width; ++j)
        panels[p * WIDTH * K + k * width + j] = w[(p * WIDTH + j) * K + k];
  }
  int failed = 0;

  /* One row: 8 tiles of 256 columns (two groups of four panels), the last
     168 = a group of four and two single panels, the last 8 wide. */
  for (int i = 0; i < ROWS * N; ++i) out[i] = NAN;
  mfk_0(0, 3, x, panels, residual, out);
  mfk_0(3, 8, x, panels, residual, out);
  double worst = worstError(1, x, w, residual, out);
  printf("one row: max abs error %.3g: %s\n", worst, worst < 1e-4 ? "OK" : "MISMATCH");
  failed |= !(worst < 1e-4);

  /* 40 rows through the service. */
  mfrt_gemm_panels_f32_ptr = (void *)&gemmPanels;
  for (int i = 0; i < ROWS * N; ++i) out[i] = NAN;
  mfk_1(0, 5, x, panels, residual, out);
  mfk_1(5, 8, x, panels, residual, out);
  worst = worstError(ROWS, x, w, residual, out);
  printf("40 rows: max abs error %.3g: %s\n", worst, worst < 1e-4 ? "OK" : "MISMATCH");
  failed |= !(worst < 1e-4);
  return failed;
}
