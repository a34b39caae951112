/* Calls the kernels generated for decode-shaped products (one row times a
   [N, K] weight, in the kernels' own vector code) and prints their largest
   deviation from the same math in doubles. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"

enum { K = 72, N = 1900, K16 = 40, N16 = 37 };

#include "dispatch.h"

int main(void) {
  float *x = malloc(sizeof(float) * K), *w = malloc(sizeof(float) * N * K);
  float *residual = malloc(sizeof(float) * N), *out = malloc(sizeof(float) * N);
  for (int i = 0; i < K; ++i) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < N * K; ++i) w[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
  for (int i = 0; i < N; ++i) { residual[i] = (float)(i % 7) - 3.0f; out[i] = NAN; }
  /* 8 tiles, run as two uneven ranges as two threads would. */
  dispatch("mfk_0", 0, 3, BUFS(BUF(x, K), BUF(w, N * K), BUF(residual, N), BUF(out, N)));
  dispatch("mfk_0", 3, 8, BUFS(BUF(x, K), BUF(w, N * K), BUF(residual, N), BUF(out, N)));
  double worst = 0;
  for (int c = 0; c < N; ++c) {
    double sum = residual[c];
    for (int p = 0; p < K; ++p) sum += (double)x[p] * w[c * K + p];
    double error = fabs(out[c] - sum);
    if (!(error <= worst)) worst = error;
  }
  printf("f32 + residual: max abs error %.3g: %s\n", worst,
         worst < 1e-4 ? "OK" : "MISMATCH");
  int failed = !(worst < 1e-4);

  uint16_t xs[K16], ws[N16 * K16], outs[N16];
  for (int i = 0; i < K16; ++i) xs[i] = toBf16((float)((i * 29) % 89) / 44.0f - 1.0f);
  for (int i = 0; i < N16 * K16; ++i) ws[i] = toBf16((float)((i * 31) % 83) / 83.0f - 0.5f);
  for (int i = 0; i < N16; ++i) outs[i] = 0x7fc0; /* NaN */
  dispatch("mfk_1", 0, 1, BUFS(BUF(xs, K16), BUF(ws, N16 * K16), BUF(outs, N16)));
  worst = 0;
  for (int c = 0; c < N16; ++c) {
    double sum = 0;
    for (int p = 0; p < K16; ++p) sum += (double)fromBf16(xs[p]) * fromBf16(ws[c * K16 + p]);
    double error = fabs(fromBf16(outs[c]) - sum) / fmax(fabs(sum), 1e-3);
    if (!(error <= worst)) worst = error;
  }
  /* Rounding to bf16 (8 significant bits) is off by at most 2^-8 relative;
     the f32 sums add ~1e-7. */
  double bound = 1.0 / 256 + 1e-5;
  printf("bf16: max relative error %.3g: %s\n", worst,
         worst <= bound ? "OK" : "MISMATCH");
  failed = failed || !(worst <= bound);

  /* [K, N] weights: 100 x 1400 + a bias in 6 tiles of 256 columns (two
     blocks of 128; the last tile 120 = 7 x 16 + 8, masked), as two ranges. */
  enum { KC = 100, NC = 1400 };
  float *xc = malloc(sizeof(float) * KC), *wc = malloc(sizeof(float) * KC * NC);
  float *bias = malloc(sizeof(float) * NC), *outc = malloc(sizeof(float) * NC);
  for (int i = 0; i < KC; ++i) xc[i] = (float)((i * 19) % 61) / 30.0f - 1.0f;
  for (int i = 0; i < KC * NC; ++i) wc[i] = (float)((i * 43) % 89) / 89.0f - 0.5f;
  for (int i = 0; i < NC; ++i) { bias[i] = (float)(i % 5) - 2.0f; outc[i] = NAN; }
  dispatch("mfk_2", 0, 4, BUFS(BUF(xc, KC), BUF(wc, KC * NC), BUF(bias, NC), BUF(outc, NC)));
  dispatch("mfk_2", 4, 6, BUFS(BUF(xc, KC), BUF(wc, KC * NC), BUF(bias, NC), BUF(outc, NC)));
  worst = 0;
  for (int c = 0; c < NC; ++c) {
    double sum = bias[c];
    for (int p = 0; p < KC; ++p) sum += (double)xc[p] * wc[p * NC + c];
    double error = fabs(outc[c] - sum);
    if (!(error <= worst)) worst = error;
  }
  printf("[K, N] f32 + bias: max abs error %.3g: %s\n", worst,
         worst < 1e-4 ? "OK" : "MISMATCH");
  failed = failed || !(worst < 1e-4);

  /* f16 [K, N]: 24 x 50 (three vectors and 2 columns masked), the f32 sum
     rounded to f16 (11 significant bits: within 2^-11 relative). */
  _Float16 xh[24], wh[24 * 50], outh[50];
  for (int i = 0; i < 24; ++i) xh[i] = (_Float16)((float)((i * 7) % 23) / 11.0f - 1.0f);
  for (int i = 0; i < 24 * 50; ++i) wh[i] = (_Float16)((float)((i * 11) % 37) / 37.0f - 0.5f);
  for (int i = 0; i < 50; ++i) outh[i] = (_Float16)NAN;
  dispatch("mfk_3", 0, 1, BUFS(BUF(xh, 24), BUF(wh, 24 * 50), BUF(outh, 50)));
  worst = 0;
  for (int c = 0; c < 50; ++c) {
    double sum = 0;
    for (int p = 0; p < 24; ++p) sum += (double)xh[p] * (double)wh[p * 50 + c];
    double error = fabs((double)outh[c] - sum) / fmax(fabs(sum), 1e-3);
    if (!(error <= worst)) worst = error;
  }
  double halfBound = 1.0 / 2048 + 1e-5;
  printf("[K, N] f16: max relative error %.3g: %s\n", worst,
         worst <= halfBound ? "OK" : "MISMATCH");
  return failed || !(worst <= halfBound);
}
