/* Calls the kernel generated for silu(a + b) on 4x16 f32 tensors and
   prints its largest deviation from the same math in C doubles; checks the
   library's table and that the kernel refuses a dispatch that is not its
   own. */
#include <math.h>
#include <stdio.h>

#include "dispatch.h"

int main(void) {
  float a[64], b[64], out[64];
  for (int i = 0; i < 64; ++i) {
    a[i] = (float)(i - 32) / 8.0f;
    b[i] = (float)((i * 7) % 13) / 10.0f - 0.6f;
    out[i] = NAN;
  }
  const mfrt_kernel_library_v1 *table = library();
  printf("abi %u, %u kernel: %s, %u bindings, %lld tiles; version %u: %s\n",
         table->abi_version, table->kernel_count, table->names[0],
         table->binding_counts[0], (long long)table->tile_counts[0],
         MFRT_KERNEL_ABI_VERSION + 1,
         mfrt_kernel_library_query(MFRT_KERNEL_ABI_VERSION + 1) ? "answered"
                                                                 : "null");
  /* A binding too few, or one shorter than the kernel reads: refused, and
     nothing written. */
  printf("two bindings: status %d\n",
         tryDispatch("mfk_0", 0, 1, BUFS(BUF(a, 64), BUF(b, 64))));
  printf("a short result: status %d\n",
         tryDispatch("mfk_0", 0, 1, BUFS(BUF(a, 64), BUF(b, 64), BUF(out, 63))));
  printf("untouched: %s\n", isnan(out[0]) && isnan(out[63]) ? "yes" : "no");
  dispatch("mfk_0", 0, 1, BUFS(BUF(a, 64), BUF(b, 64), BUF(out, 64)));
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
