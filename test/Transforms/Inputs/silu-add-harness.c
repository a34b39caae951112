/* Calls the kernel generated for silu(a + b) on 4x16 f32 tensors and
   prints its largest deviation from the same math in C doubles. */
#include <math.h>
#include <stdio.h>

/* The kernel ABI: the tile range, then inputs and results. */
void mfk_0(long begin, long end, const float *a, const float *b, float *out);

int main(void) {
  float a[64], b[64], out[64];
  for (int i = 0; i < 64; ++i) {
    a[i] = (float)(i - 32) / 8.0f;
    b[i] = (float)((i * 7) % 13) / 10.0f - 0.6f;
    out[i] = NAN;
  }
  mfk_0(0, 1, a, b, out);
  double worst = 0;
  for (int i = 0; i < 64; ++i) {
    double x = (double)a[i] + (double)b[i];
    double expected = x / (1.0 + exp(-x));
    double error = fabs(out[i] - expected);
    if (!(error <= worst)) {
      worst = error;
    }
  }
  printf("max abs error %.3g: %s\n", worst, worst < 1e-5 ? "OK" : "MISMATCH");
  return worst < 1e-5 ? 0 : 1;
}
