/* Calls the kernels generated for norms.mlir (RMSNorm, LayerNorm and
   softmax with producers and consumers, 600 rows of 64 in three tiles run
   as two tile ranges; RMSNorm again on rows of 60) and prints the largest
   deviation from the same math in C doubles. */
#include <math.h>
#include <stdio.h>

enum { ROWS = 600, COLS = 64, N = ROWS * COLS };

#include "dispatch.h"

static float a[N], b[N], t[N], out[N], w[COLS], bias[COLS];

static double check(int kind, int cols) {
  double worst = 0;
  for (int r = 0; r < ROWS; ++r) {
    double x[COLS], mean = 0, var = 0, best = -INFINITY, sum = 0;
    for (int c = 0; c < cols; ++c) {
      int i = r * cols + c;
      x[c] = kind == 1 ? t[i] : kind == 2 ? a[i] * 0.5 : (double)a[i] + b[i];
      mean += x[c] / cols;
      best = fmax(best, x[c]);
    }
    for (int c = 0; c < cols; ++c) {
      double d = kind == 1 ? x[c] - mean : x[c];
      var += d * d / cols;
      sum += exp(x[c] - best);
    }
    for (int c = 0; c < cols; ++c) {
      double expected;
      if (kind == 0 || kind == 3) {
        double n = x[c] / sqrt(var + 1e-5) * w[c];
        expected = n / (1 + exp(-n));
      } else if (kind == 1) {
        expected = (x[c] - mean) / sqrt(var + 1e-5) * w[c] + bias[c] + x[c];
      } else {
        expected = exp(x[c] - best) / sum * 0.5;
      }
      double error = fabs(out[r * cols + c] - expected);
      if (!(error <= worst)) {
        worst = error;
      }
    }
  }
  return worst;
}

int main(void) {
  for (int i = 0; i < N; ++i) {
    a[i] = (float)((i * 37) % 101) / 25.0f - 2.0f;
    b[i] = (float)((i * 11) % 17) / 10.0f - 0.8f;
    t[i] = tanhf(a[i]); /* read twice: the region takes it as an input */
  }
  for (int c = 0; c < COLS; ++c) {
    w[c] = 0.5f + (float)c / COLS;
    bias[c] = (float)(c % 5) / 10.0f;
  }
  int failures = 0;
  for (int kind = 0; kind < 4; ++kind) {
    for (int i = 0; i < N; ++i) {
      out[i] = NAN;
    }
    /* Tiles [0, 1) and [1, 3), as two threads would take them. */
    for (int part = 0; part < 2; ++part) {
      long begin = part ? 1 : 0, end = part ? 3 : 1;
      if (kind == 0)
        dispatch("mfk_0", begin, end, BUFS(BUF(a, N), BUF(b, N), BUF(w, COLS), BUF(out, N)));
      if (kind == 1)
        dispatch("mfk_1", begin, end, BUFS(BUF(t, N), BUF(w, COLS), BUF(bias, COLS), BUF(out, N)));
      if (kind == 2)
        dispatch("mfk_2", begin, end, BUFS(BUF(a, N), BUF(out, N)));
      if (kind == 3)
        dispatch("mfk_3", begin, end,
                 BUFS(BUF(a, ROWS * 60), BUF(b, ROWS * 60), BUF(w, 60), BUF(out, ROWS * 60)));
    }
    double worst = check(kind, kind == 3 ? 60 : COLS);
    printf("%s: max abs error %.3g: %s\n",
           kind == 0   ? "rms"
           : kind == 1 ? "layer"
           : kind == 2 ? "softmax"
                       : "rms (60)",
           worst,
           worst < 1e-5 ? "OK" : "MISMATCH");
    failures += !(worst < 1e-5);
  }
  return failures;
}
